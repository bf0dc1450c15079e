"""The created models' store (modelhost.hub.created): creates that run at once (the Ollama door stages a create's
uploaded `files` on a worker thread each, so two creates from the same upload meet in the same folder), and the
bound on how many are kept."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest
from http_support import LoopThread, disk_order

from modelhost.hub import created as store
from modelhost.testing.waiting import STATE_WAIT_SECONDS

#: Creates that stage the same files at once, and how many times they meet: before the fix one round in about
#: seven lost a create to FileExistsError (a 500), so this many rounds catch it all but surely.
THREADS, ROUNDS = 4, 100


def test_creates_staging_the_same_upload_at_once_all_get_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uploaded, blob = _uploaded(tmp_path, monkeypatch)
    digest = uploaded["model.gguf"]
    got: list[Path] = []
    failed: list[BaseException] = []

    def stage(files: dict[str, str], barrier: threading.Barrier) -> None:
        barrier.wait()
        try:
            got.append(store.staged_files(files))
        except BaseException as exc:  # any failure is the finding; the assert names it
            failed.append(exc)

    for round_ in range(ROUNDS):
        files = {f"model-{round_}.gguf": digest}  # a fresh folder each round: the links are made, not found
        barrier = threading.Barrier(THREADS)
        threads = [threading.Thread(target=stage, args=(files, barrier)) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failed, f"round {round_}: {failed[0]!r}"
        assert {(where / f"model-{round_}.gguf").read_bytes() for where in got[-THREADS:]} == {blob}
        for where in got[-THREADS:]:
            store.unhold(where)


def _uploaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, str], bytes]:
    """A store in `tmp_path` holding one uploaded blob, and the `files` a create names it by."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    blob = b"GGUF a model's bytes"
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    kept = store.blob_path(digest)
    kept.parent.mkdir(parents=True)
    kept.write_bytes(blob)
    return {"model.gguf": digest}, blob


def test_a_delete_while_a_create_from_the_same_upload_is_in_flight_leaves_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Model `old` was created from an upload; `new` is being created from the same upload (staged, not yet kept)
    when `old` is deleted: the delete must not remove the folder of links, nor the blob, that `new` is kept with.
    Before the fix it did (its release saw no kept model using them), and `new` was kept pointing at nothing."""
    files, blob = _uploaded(tmp_path, monkeypatch)
    where = store.staged_files(files)
    store.save(store.CreatedModel("old", str(where / "model.gguf")))
    store.unhold(where)
    staged, deleted = threading.Event(), threading.Event()
    seen: list[bytes] = []

    def create() -> None:  # the door's create, on its worker threads: stage, (serve,) keep, unhold
        where = store.staged_files(files)
        staged.set()
        assert deleted.wait(STATE_WAIT_SECONDS)
        store.save(store.CreatedModel("new", str(where / "model.gguf")))
        store.unhold(where)
        seen.append((where / "model.gguf").read_bytes())

    def delete() -> None:
        assert staged.wait(STATE_WAIT_SECONDS)
        store.remove("old")
        deleted.set()

    threads = [threading.Thread(target=create), threading.Thread(target=delete)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(STATE_WAIT_SECONDS)
    assert seen == [blob], "the create's link was removed under it"
    assert [m.name for m in store.load_all()] == ["new"]
    store.remove("new")  # and once nothing uses them, they go
    assert not any((store.folder() / "files").iterdir()) and not any((store.folder() / "blobs").iterdir())


def test_creates_and_deletes_of_one_upload_racing_never_lose_a_kept_models_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Free-running: two names created and deleted in turn from one upload on two threads; whatever the order,
    every model kept at the end reads its blob through its link. (A third model keeps the blob itself: the last
    model made from an upload takes it along when deleted, and the next create would have to upload it again.)"""
    files, blob = _uploaded(tmp_path, monkeypatch)
    anchor = store.staged_files({"anchor.gguf": files["model.gguf"]})
    store.save(store.CreatedModel("anchor", str(anchor / "anchor.gguf")))
    store.unhold(anchor)
    failed: list[BaseException] = []

    def churn(name: str, barrier: threading.Barrier) -> None:
        barrier.wait()
        try:
            for _ in range(ROUNDS // 4):
                where = store.staged_files(files)
                store.save(store.CreatedModel(name, str(where / "model.gguf")))
                store.unhold(where)
                assert (where / "model.gguf").read_bytes() == blob, f"{name}'s link was removed under it"
                store.remove(name)
            where = store.staged_files(files)  # kept at the end
            store.save(store.CreatedModel(name, str(where / "model.gguf")))
            store.unhold(where)
        except BaseException as exc:  # any failure is the finding; the assert names it
            failed.append(exc)

    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=churn, args=(name, barrier)) for name in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(STATE_WAIT_SECONDS)
    assert not failed, repr(failed[0])
    for model in store.load_all():
        assert Path(model.source).read_bytes() == blob, model


def test_a_create_past_the_kept_bound_is_refused_not_served_until_a_restart(
    loop_thread: LoopThread, tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ollama = pytest.importorskip("ollama")
    pytest.importorskip("llama_cpp")
    from test_ollama_create import names, serving

    from modelhost.testing.waiting import STATE_WAIT_SECONDS

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(store, "MAX_CREATED", 2)  # what a start reads back at most (load_all)
    with serving(loop_thread, tiny_llama_gguf) as server:
        client = ollama.Client(host=server.url, timeout=STATE_WAIT_SECONDS)
        for name in ("first", "second"):
            client.create(model=name, from_="tiny", system=name)
        with pytest.raises(ollama.ResponseError, match="2 created models are kept already") as refused:
            client.create(model="third", from_="tiny")
        assert refused.value.status_code == 400 and "third" not in names(client)
        client.create(model="first", from_="tiny", system="again")  # made again: no new room needed
    with serving(loop_thread, tiny_llama_gguf) as server:  # a restart serves what was served before it
        kept = names(ollama.Client(host=server.url, timeout=STATE_WAIT_SECONDS))
        assert {"first", "second"} <= kept and "third" not in kept


def test_a_kept_model_is_on_the_disk_before_its_name_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A created model's file is synced before the rename that names it (a power loss must leave the old file or
    none, never a short one that load_all then skips with the model lost); the real fsync and rename, in order."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with disk_order() as events:
        store.save(store.CreatedModel("kept", "tiny", system="be brief"))
    assert [kind for kind, _ in events] == ["fsync", "rename"], events
    synced, named = (Path(where) for _, where in events)
    assert synced.name.startswith(".created.") and named.parent == synced.parent == store.folder(), events
    assert [(m.source, m.system) for m in store.load_all()] == [("tiny", "be brief")]

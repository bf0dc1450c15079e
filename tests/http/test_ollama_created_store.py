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

#: Creates that stage the same files at once, and how many times they meet: before the fix one round in about
#: seven lost a create to FileExistsError (a 500), so this many rounds catch it all but surely.
THREADS, ROUNDS = 4, 100


def test_creates_staging_the_same_upload_at_once_all_get_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    blob = b"GGUF a model's bytes"
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    kept = store.blob_path(digest)
    kept.parent.mkdir(parents=True)
    kept.write_bytes(blob)
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

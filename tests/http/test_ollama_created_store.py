"""The created models' store (modelhost.hub.created) under creates that run at once: the Ollama door stages a
create's uploaded `files` on a worker thread each, so two creates from the same upload meet in the same folder."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

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

"""Issue 35, item 3: removing a model from the hub cache never deletes outside it.

Before, a snapshot file of `HF_HUB_CACHE` that was a link to a file elsewhere was deleted at its target by `modelhost
rm` and `DELETE /api/delete` (both `hub.remove`): `_remove_files` resolved the link and unlinked what it found, and
huggingface_hub's cleaner (used for a whole repository) deletes each file's resolved "blob" the same way. A snapshot
folder that was a link went the same way. Each case below builds huggingface_hub's real layout by hand (snapshot
files are links into `../../blobs/`), adds one hostile link, removes the model, and checks that the file outside the
cache is still there, with its bytes, and the model is gone from the cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from modelhost import hub
from modelhost.inference import hub_cache

REPO = "tiny/linked"
REVISION = "0" * 40
SECRET = b"a file of the user's, outside the cache\n"


def _layout(root: Path) -> Path:
    """huggingface_hub's cache of REPO with two GGUF models (F16, F32) as links into blobs/; the snapshot folder."""
    folder = hub_cache.repo_folder(REPO, root)
    snapshot = folder / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    (folder / "blobs").mkdir()
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(REVISION)
    for quant in ("F16", "F32"):
        blob = folder / "blobs" / (quant.lower() * 16)
        blob.write_bytes(b"GGUF" + quant.encode())
        (snapshot / f"linked-{quant}.gguf").symlink_to(Path("..", "..", "blobs", blob.name))
    return snapshot


def _file_is_a_link_out(snapshot: Path, outside: Path) -> None:
    (snapshot / "linked-F16.gguf").unlink()
    (snapshot / "linked-F16.gguf").symlink_to(outside / "secret.gguf")


def _blob_is_a_link_out(snapshot: Path, outside: Path) -> None:
    blob = Path(os.path.abspath(snapshot / os.readlink(snapshot / "linked-F16.gguf")))
    blob.unlink()
    blob.symlink_to(outside / "secret.gguf")


def _snapshot_is_a_link_out(snapshot: Path, outside: Path) -> None:
    for quant in ("F16", "F32"):
        (snapshot / f"linked-{quant}.gguf").unlink()
    snapshot.rmdir()
    (outside / "secret.gguf").rename(outside / "linked-F16.gguf")
    snapshot.symlink_to(outside)


def _repository_is_a_link_out(snapshot: Path, outside: Path) -> None:
    folder = snapshot.parent.parent
    moved = outside / folder.name
    folder.rename(moved)
    folder.symlink_to(moved)


HOSTILE: dict[str, Callable[[Path, Path], None]] = {
    "a snapshot file linked outside": _file_is_a_link_out,
    "a blob linked outside": _blob_is_a_link_out,
    "the snapshot folder linked outside": _snapshot_is_a_link_out,
    "the repository folder linked outside": _repository_is_a_link_out,
}


def _outside_files(outside: Path) -> dict[str, bytes]:
    return {p.relative_to(outside).as_posix(): p.read_bytes() for p in outside.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", [f"{REPO}:F16", REPO], ids=["one quantisation", "the repository"])
@pytest.mark.parametrize("hostile", list(HOSTILE), ids=list(HOSTILE))
def test_removing_a_model_leaves_every_file_outside_the_cache(tmp_path: Path, hostile: str, name: str) -> None:
    root, outside = tmp_path / "hub-cache", tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.gguf").write_bytes(SECRET)
    snapshot = _layout(root)
    HOSTILE[hostile](snapshot, outside)
    before = _outside_files(outside)
    assert SECRET in before.values()

    gone = hub.remove(name, root)

    assert _outside_files(outside) == before, "nothing outside the cache was deleted or changed"
    assert f"{REPO}:F16" in gone, "the model named is gone from the cache"
    assert f"{REPO}:F16" not in [m.name for m in hub.cached_models(root)]


def test_removing_one_quantisation_keeps_the_other_and_frees_its_own_blob(tmp_path: Path) -> None:
    """The ordinary layout still loses exactly the model's link and blob (the check above is not a no-op)."""
    root = tmp_path / "hub-cache"
    snapshot = _layout(root)
    blobs = hub_cache.repo_folder(REPO, root) / "blobs"
    assert hub.remove(f"{REPO}:F16", root) == [f"{REPO}:F16"]
    assert sorted(p.name for p in snapshot.iterdir()) == ["linked-F32.gguf"]
    assert sorted(p.name for p in blobs.iterdir()) == ["f32" * 16]
    assert hub.remove(f"{REPO}:F32", root) == [f"{REPO}:F32"]
    assert not hub_cache.repo_folder(REPO, root).exists(), "the last model takes the repository's folder"


def test_modelhost_rm_removes_the_link_not_the_file_it_points_to(tmp_path: Path) -> None:
    """The same through the command a user types (`DELETE /api/delete` calls the same `hub.remove`)."""
    root, outside = tmp_path / "hub-cache", tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.gguf").write_bytes(SECRET)
    _file_is_a_link_out(_layout(root), outside)
    env = {**os.environ, "HF_HUB_CACHE": str(root), "HF_HUB_OFFLINE": "1"}
    removed = subprocess.run(
        [sys.executable, "-m", "modelhost.cli", "rm", f"{REPO}:F16"], env=env, capture_output=True, text=True
    )
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == f"removed {REPO}:F16"
    assert (outside / "secret.gguf").read_bytes() == SECRET
    assert [m.name for m in hub.cached_models(root)] == [f"{REPO}:F32"]

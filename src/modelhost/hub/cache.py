"""The models in the local hub cache: list them by the names `--model` takes, and remove one.

A name is what the catalogue resolves (inference/hub_cache.py): `org/repo` for a model folder, `org/repo:QUANT`
(or `org/repo:path/file.gguf` when two files share a quantisation) for each GGUF model. `rm org/repo` removes the
whole repository; `rm org/repo:QUANT` removes that model's files and the blobs no other snapshot still links to.
Neither deletes anything outside the cache: a link in it is removed as a link, never what it points to.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from modelhost.errors import ModelNotFoundError
from modelhost.inference import hub_cache


@dataclass(frozen=True, slots=True)
class CachedModel:
    """A model in the cache: the name that loads it, the path it resolves to, and its bytes on disk."""

    name: str
    path: str
    bytes: int
    #: Seconds since the epoch when the snapshot last changed (Ollama's `modified_at`).
    modified: float


def _repos(root: Path) -> list[str]:
    """The hub-shaped model repositories in the cache (`models--org--name` folders), sorted."""
    if not root.is_dir():
        return []
    repos = []
    for folder in root.iterdir():
        name = folder.name
        if folder.is_dir() and name.startswith("models--") and "--" in name[len("models--") :]:
            repo = name[len("models--") :].replace("--", "/", 1)
            if hub_cache.parse_ref(repo) is not None:
                repos.append(repo)
    return sorted(repos)


def _size(snapshot: Path, files: tuple[str, ...]) -> int:
    return sum(os.path.getsize(snapshot / f) for f in files if (snapshot / f).is_file())


def cached_models(root: Path | None = None) -> list[CachedModel]:
    """Every model in the cache, by name; a name in several snapshots is listed once, from the newest."""
    root = root or hub_cache.cache_root()
    found: dict[str, CachedModel] = {}
    for repo in _repos(root):
        for snapshot in hub_cache.snapshots(repo, root):
            files = hub_cache.snapshot_files(snapshot)
            names = ([repo] if "config.json" in files else []) + [f"{repo}:{s}" for s in hub_cache.specs_of(files)]
            for name in names:
                ref = hub_cache.parse_ref(name)
                if name in found or ref is None:
                    continue
                try:
                    choice = hub_cache.choose(ref, files)
                except ModelNotFoundError:
                    continue
                path = snapshot if choice.entry is None else snapshot / choice.entry
                found[name] = CachedModel(name, str(path), _size(snapshot, choice.files), snapshot.stat().st_mtime)
    return sorted(found.values(), key=lambda m: m.name)


def remove(name: str, root: Path | None = None) -> list[str]:
    """Delete the model `name` from the cache; returns the names that are gone. ModelNotFoundError if not cached."""
    root = root or hub_cache.cache_root()
    ref = hub_cache.parse_ref(name)
    if ref is None:
        raise ModelNotFoundError(f"{name!r} is not a hub model name (org/repo or org/repo:QUANT)")
    before = {m.name for m in cached_models(root)}
    if ref.spec is None:
        if not hub_cache.repo_folder(ref.repo, root).is_dir():
            raise ModelNotFoundError(f"{name!r} is not in the cache ({root}); `modelhost list` shows what is")
        _remove_repo(ref.repo, root)
    else:
        if hub_cache.resolve_cached(ref, root) is None:
            raise ModelNotFoundError(f"{name!r} is not in the cache ({root}); `modelhost list` shows what is")
        _remove_files(ref, root)
    return sorted(before - {m.name for m in cached_models(root)})


def _remove_repo(repo: str, root: Path) -> None:
    """Every revision of `repo`: its cache folder, removed without following a link out of it.

    Not huggingface_hub's cache cleaner: it resolves each snapshot file to its "blob" and deletes that, so a snapshot
    file linked to a file outside the cache would take the file with it. `shutil.rmtree` removes a link inside the
    folder as a link; a repository folder that is itself a link loses the link only.
    """
    folder = hub_cache.repo_folder(repo, root)
    if folder.is_symlink():
        folder.unlink()
    else:
        shutil.rmtree(folder, ignore_errors=True)


def _remove_files(ref: hub_cache.HubRef, root: Path) -> None:
    """The files of one GGUF model, from every snapshot that holds it; blobs nothing links to any more go too.

    Written here because huggingface_hub's cleaner deletes whole revisions only. Nothing outside the repository's
    own cache folder is deleted: a link on the way to a file (the snapshot folder, a folder in it, the file) is
    removed as a link, never what it points to, and a file's blob goes only when it lies in the repository's own
    `blobs/` (huggingface_hub's layout: snapshot files are links into `../../blobs/`).
    """
    blobs = Path(os.path.abspath(hub_cache.repo_folder(ref.repo, root) / "blobs"))
    for snapshot in hub_cache.snapshots(ref.repo, root):
        try:
            choice = hub_cache.choose(ref, hub_cache.snapshot_files(snapshot))
        except ModelNotFoundError:
            continue
        for rel in choice.files:
            pointer = snapshot / rel
            link = _first_link(root, pointer)
            if link is not None and link != pointer:
                # A linked folder on the way (a snapshot, a subfolder, the repository's folder): its files are
                # elsewhere, so the link goes and what it points to stays, with the other files it may hold.
                link.unlink()
                continue
            # No link above `pointer`, so its target is read without resolving anything outside the cache.
            blob = Path(os.path.abspath(pointer.parent / os.readlink(pointer))) if link is not None else None
            pointer.unlink(missing_ok=True)
            if pointer.parent != snapshot and pointer.parent.is_dir() and not any(pointer.parent.iterdir()):
                pointer.parent.rmdir()
            if blob is not None and blob.parent == blobs and not _linked(blob.resolve(), root, ref.repo):
                blob.unlink(missing_ok=True)  # a blob that is itself a link loses the link only
        if snapshot.is_dir() and not snapshot.is_symlink() and not hub_cache.snapshot_files(snapshot):
            shutil.rmtree(snapshot, ignore_errors=True)
    if not hub_cache.snapshots(ref.repo, root):
        _remove_repo(ref.repo, root)


def _first_link(root: Path, path: Path) -> Path | None:
    """The first link on the way from the cache `root` down to `path` (`path` itself included), or None.

    The root is the operator's to place (a link to a larger disk is common), so only what lies under it counts.
    """
    step = root
    for part in path.relative_to(root).parts:
        step = step / part
        if step.is_symlink():
            return step
    return None


def _linked(blob: Path, root: Path, repo: str) -> bool:
    """True when some snapshot of `repo` still links to `blob`."""
    return any(
        (snapshot / rel).resolve() == blob
        for snapshot in hub_cache.snapshots(repo, root)
        for rel in hub_cache.snapshot_files(snapshot)
    )

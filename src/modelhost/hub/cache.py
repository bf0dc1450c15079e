"""The models in the local hub cache: list them by the names `--model` takes, and remove one.

A name is what the catalogue resolves (inference/hub_cache.py): `org/repo` for a model folder, `org/repo:QUANT`
(or `org/repo:path/file.gguf` when two files share a quantisation) for each GGUF model. `rm org/repo` removes the
whole repository (through huggingface_hub's own cache cleaner); `rm org/repo:QUANT` removes that model's files and
the blobs no other snapshot still links to.
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
    """Every revision of `repo` through huggingface_hub's cache cleaner (snapshots, refs, blobs, the folder)."""
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(root)
    hashes = [
        rev.commit_hash for r in info.repos if r.repo_id == repo and r.repo_type == "model" for rev in r.revisions
    ]
    if hashes:
        info.delete_revisions(*hashes).execute()
    # A repository with no complete revision (an interrupted first pull left only blobs/.locks) is not scanned.
    shutil.rmtree(hub_cache.repo_folder(repo, root), ignore_errors=True)


def _remove_files(ref: hub_cache.HubRef, root: Path) -> None:
    """The files of one GGUF model, from every snapshot that holds it; blobs nothing links to any more go too.

    Written here because huggingface_hub's cleaner deletes whole revisions only.
    """
    for snapshot in hub_cache.snapshots(ref.repo, root):
        try:
            choice = hub_cache.choose(ref, hub_cache.snapshot_files(snapshot))
        except ModelNotFoundError:
            continue
        for rel in choice.files:
            pointer = snapshot / rel
            blob = pointer.resolve()
            pointer.unlink(missing_ok=True)
            if pointer.parent != snapshot and not any(pointer.parent.iterdir()):
                pointer.parent.rmdir()
            if blob != pointer and not _linked(blob, root, ref.repo):
                blob.unlink(missing_ok=True)
        if not hub_cache.snapshot_files(snapshot):
            shutil.rmtree(snapshot, ignore_errors=True)
    if not hub_cache.snapshots(ref.repo, root):
        shutil.rmtree(hub_cache.repo_folder(ref.repo, root), ignore_errors=True)


def _linked(blob: Path, root: Path, repo: str) -> bool:
    """True when some snapshot of `repo` still links to `blob`."""
    return any(
        (snapshot / rel).resolve() == blob
        for snapshot in hub_cache.snapshots(repo, root)
        for rel in hub_cache.snapshot_files(snapshot)
    )

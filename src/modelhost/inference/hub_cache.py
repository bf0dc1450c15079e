"""Hub model names (`org/repo`, `org/repo:FILE`, `org/repo:QUANT`) and the local Hugging Face cache they resolve in.

One module knows which files of a repository make a model, for two callers: `modelhost pull` (`modelhost.hub`),
choosing from the hub's listing what to download, and the catalogue, choosing from a cached snapshot what to load.
The same choice on both sides is what makes `modelhost pull x` then `--model x` load what was pulled. It reads the
cache layout that huggingface_hub writes (`models--org--name/snapshots/<commit>/...`, symlinks into `blobs/`) and
never touches the network; it imports only the standard library, as the contract must.

A repository holds either a model folder (config.json beside its weights: the transformers layout) or GGUF
files, often one per quantisation (`model-Q4_K_M.gguf`), sometimes split in shards (`-00001-of-00003.gguf`). A name
without `:SPEC` means the folder, or the repository's only GGUF model; with several GGUF models it is ambiguous and
the error lists the specs that would pick one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from modelhost.errors import ModelNotFoundError

# The hub's own repository-name rules: `org/name`, each part starting with a letter or digit, made of letters,
# digits, `_`, `.` and `-`, at most 96 characters, no `--` or `..` (the cache folder joins the parts with `--`, so a
# name holding `--` could not be read back, and `..` could climb out of the cache).
_PART = r"[A-Za-z0-9](?:[\w.-]{0,94}[\w])?"
HUB_REPO = re.compile(rf"^{_PART}/{_PART}$")
#: Bound on the `:SPEC` part: a hub file path is at most a few hundred characters; a longer one is a mistake.
MAX_SPEC_CHARS = 512

# Quantisation names as llama.cpp's tools write them into file names (Q4_K_M, Q8_0, IQ2_XXS, TQ1_0, F16, BF16...),
# not preceded or followed by a letter or digit. Parts after the first are 1-3 characters, so "Q4_K_M_imatrix"
# still reads as Q4_K_M.
_QUANT = re.compile(r"(?<![A-Za-z0-9])([IT]?Q[1-8](?:_[A-Z0-9]{1,3})*|BF16|F16|F32|MXFP4)(?![A-Za-z0-9])", re.I)
# llama.cpp's split files: the loader is given the first shard and opens the others by this same pattern.
_SHARD = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.I)
# Files that make a model folder, besides its weights: configs, tokenizers, chat templates, processor settings.
# Pickled weights (`.bin`, `.pt`) are never taken: loading them runs code; safetensors and GGUF cannot.
FOLDER_SUFFIXES = (".json", ".safetensors", ".model", ".txt", ".jinja", ".tiktoken")


@dataclass(frozen=True, slots=True)
class HubRef:
    """A hub model name: the repository and, optionally, which file or quantisation of it."""

    repo: str
    spec: str | None = None

    def __str__(self) -> str:
        return self.repo if self.spec is None else f"{self.repo}:{self.spec}"


@dataclass(frozen=True, slots=True)
class Choice:
    """The files of a repository that make the model a name asks for, and the one a backend is given."""

    #: Repository-relative paths to download (the folder's files, or a GGUF's shards).
    files: tuple[str, ...]
    #: The file to load (a GGUF, its first shard), or None: the snapshot folder itself.
    entry: str | None


def parse_ref(text: str) -> HubRef | None:
    """The HubRef that `text` names, or None when it is not hub-shaped (a path, a catalogue name, a typo)."""
    repo, sep, spec = text.partition(":")
    if not HUB_REPO.match(repo) or "--" in repo or ".." in repo:
        return None
    if sep and (not spec or len(spec) > MAX_SPEC_CHARS or spec.startswith("/") or ".." in spec.split("/")):
        return None
    return HubRef(repo, spec or None)


def quant_of(filename: str) -> str | None:
    """The quantisation a GGUF file name carries (upper case: `Q4_K_M`), or None."""
    found = _QUANT.findall(PurePosixPath(filename).name)
    return found[-1].upper() if found else None


def _gguf_models(files: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The GGUF models among `files`: the entry file (a lone GGUF, or a split set's first shard) to all its files.

    Vision projectors (`mmproj*`) are not models of their own; they are skipped here and taken only by exact name.
    A split set is a model only with all its shards: a pull cut short between two shards leaves none that loads half.
    """
    models: dict[str, list[str]] = {}
    for name in sorted(files):
        base = PurePosixPath(name).name
        if not base.lower().endswith(".gguf") or base.lower().startswith("mmproj"):
            continue
        shard = _SHARD.match(name)
        if shard is None:
            models[name] = [name]
            continue
        first = f"{shard['stem']}-{1:05d}-of-{shard['count']}.gguf"
        models.setdefault(first, []).append(name)
    return {
        entry: tuple(parts)
        for entry, parts in models.items()
        if (shard := _SHARD.match(entry)) is None or len(parts) == int(shard["count"])
    }


def _folder_files(files: Sequence[str]) -> tuple[str, ...] | None:
    """The files of a model folder at the repository root, config.json last; None when there is no such folder.

    config.json goes last because it is what makes a folder look like a model (catalogue.is_model_folder): a pull
    cut short leaves no folder that claims to be a model while its weights are missing.
    """
    root = [f for f in files if "/" not in f]
    if "config.json" not in root:
        return None
    chosen = sorted(f for f in root if f.endswith(FOLDER_SUFFIXES) and f != "config.json")
    return (*chosen, "config.json")


def specs_of(files: Sequence[str]) -> list[str]:
    """What may follow `repo:` to pick each GGUF model among `files` (its quantisation when unique, else its path)."""
    models = _gguf_models(files)
    quants = [quant_of(entry) for entry in models]
    return [q if q is not None and quants.count(q) == 1 else entry for entry, q in zip(models, quants, strict=True)]


def choose(ref: HubRef, files: Sequence[str]) -> Choice:
    """The files of `ref`'s repository (listed as `files`) that make the model it names.

    Raises ModelNotFoundError (code `ambiguous_model` when several models fit) naming the specs that would work.
    """
    models = _gguf_models(files)
    if ref.spec is None:
        folder = _folder_files(files)
        if folder is not None:
            return Choice(folder, None)
        if len(models) == 1:
            entry, parts = next(iter(models.items()))
            return Choice(parts, entry)
        if not models:
            raise ModelNotFoundError(f"{ref.repo!r} holds neither a model folder (with config.json) nor a GGUF file")
        raise ModelNotFoundError(
            f"{ref.repo!r} holds {len(models)} GGUF models; name one: "
            + ", ".join(f"{ref.repo}:{s}" for s in specs_of(files)),
            code="ambiguous_model",
        )
    if ref.spec in files:
        if not ref.spec.lower().endswith(".gguf"):
            raise ModelNotFoundError(f"{ref.spec!r} in {ref.repo!r} is not a GGUF file; only a GGUF is a model alone")
        if _SHARD.match(ref.spec) is None:
            return Choice((ref.spec,), ref.spec)
        group = next((parts for parts in models.values() if ref.spec in parts), None)
        if group is None:
            raise ModelNotFoundError(
                f"{ref.spec!r} in {ref.repo!r} is a shard of a split GGUF whose other shards are missing"
            )
        return Choice(group, group[0])
    matches = {e: p for e, p in models.items() if quant_of(e) == ref.spec.upper()}
    if len(matches) == 1:
        entry, parts = next(iter(matches.items()))
        return Choice(parts, entry)
    if matches:
        raise ModelNotFoundError(
            f"{ref.spec!r} matches {len(matches)} GGUF models in {ref.repo!r}; name the file: "
            + ", ".join(f"{ref.repo}:{e}" for e in matches),
            code="ambiguous_model",
        )
    available = specs_of(files)
    raise ModelNotFoundError(
        f"{ref.repo!r} has no file or quantisation {ref.spec!r}; "
        + (f"it has: {', '.join(available)}" if available else "it holds no GGUF file")
    )


def cache_root() -> Path:
    """The Hugging Face hub cache folder, as huggingface_hub computes it (HF_HUB_CACHE, else HF_HOME/hub)."""
    return Path(
        os.environ.get("HF_HUB_CACHE")
        or os.path.join(os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")), "hub")
    )


def modelhost_cache_root() -> Path:
    """modelhost's own cache folder, for files it derives from a model (a GGUF dequantised for transformers, the
    layout model's optimised graph): $MODELHOST_CACHE_DIR, else $XDG_CACHE_HOME/modelhost, else ~/.cache/modelhost.
    Beside the hub's cache, not in it: huggingface_hub owns that layout and may prune what it did not write."""
    explicit = os.environ.get("MODELHOST_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "modelhost"


def repo_folder(repo: str, root: Path | None = None) -> Path:
    """The cache folder of a model repository (`models--org--name`)."""
    return (root or cache_root()) / ("models--" + repo.replace("/", "--"))


def repo_of(path: str | os.PathLike[str]) -> str | None:
    """The hub repository (`org/name`) whose cache folder holds `path` (a `models--org--name` component of it), or
    None for a path outside any: what to call a model without naming the server's disk."""
    for part in reversed(Path(path).parts):
        if part.startswith("models--") and part.count("--") >= 2:
            return part.removeprefix("models--").replace("--", "/")
    return None


def snapshot_files(snapshot: Path) -> list[str]:
    """The repository-relative paths present in one snapshot folder (links whose blob is gone are left out)."""
    return sorted(
        p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file() and not p.name.startswith(".")
    )


def snapshots(repo: str, root: Path | None = None) -> list[Path]:
    """The cached snapshot folders of `repo`, newest first."""
    folder = repo_folder(repo, root) / "snapshots"
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)


def resolve_cached(ref: HubRef, root: Path | None = None) -> str | None:
    """The loadable path of `ref` in the cache (newest snapshot that holds it), or None when it is not cached.

    A folder resolves only when every file the choice names is present, so a folder missing a weight shard (a
    download cut short by another tool) is not loaded half. Raises ModelNotFoundError when a snapshot makes the
    name ambiguous.
    """
    for snapshot in snapshots(ref.repo, root):
        files = snapshot_files(snapshot)
        try:
            choice = choose(ref, files)
        except ModelNotFoundError as exc:
            if exc.code == "ambiguous_model":
                raise
            continue
        if choice.entry is None and _index_complete(snapshot):
            return str(snapshot)
        if choice.entry is not None:
            return str(snapshot / choice.entry)
    return None


def _index_complete(snapshot: Path) -> bool:
    """False when a sharded safetensors index names a shard the folder lacks."""
    import json

    index = snapshot / "model.safetensors.index.json"
    if not index.is_file():
        return True
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
    except (OSError, ValueError):
        return False
    return all((snapshot / name).is_file() for name in set(weight_map.values()))

"""Download a model from a Hugging Face hub into the local cache that `--model NAME` resolves.

huggingface_hub does the transfer: `hf_hub_download` writes each file to a process-unique temporary file, resumes
it with an HTTP Range request when the connection drops, checks its size, and only then renames it into
`blobs/` and links it into `snapshots/<commit>/`, so a cut-off download is never visible in the cache. What it does
not check is the content: a blob of the right size with the wrong bytes would be kept. So every file is hashed
after download against the hub's listing (sha256 for LFS files, the git blob id for the others) and a mismatch is
deleted and refused.

Everything the download will do is decided first, from one listing (`plan`): the repository name's shape, which
files make the model (inference/hub_cache.py, the same choice the catalogue makes when loading), the commit (every
file comes from that one commit, even if the repository moves on mid-pull), and the total size against a bound
and the free disk. Offline, that listing fails at once with one line (PullError code `hub_unreachable`), never
after huggingface_hub's backoff retries.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from modelhost.errors import NOT_FOUND, REFUSED, UPSTREAM, ErrorKind, ModelHostError, ModelNotFoundError
from modelhost.inference import hub_cache

DEFAULT_ENDPOINT = "https://huggingface.co"
#: The largest pull accepted unless the caller raises it: 200 GB holds a 70B model at 16 bits, while a mistyped
#: repository (a dataset dump, a checkpoint history) of terabytes is refused before a byte is written.
DEFAULT_MAX_BYTES = 200 * 10**9
#: Bound on the files one model may need: the largest sharded checkpoints have a few hundred shards; a listing
#: asking for more is not a model and would open that many connections.
MAX_FILES = 2000
#: Seconds the listing may take to connect and answer. It is the one call made before anything is written, so
#: offline is known within this bound (at once when the name does not resolve or the port refuses).
LISTING_TIMEOUT_S = 10.0
# Hashing reads in chunks of this size: large enough for hashlib's speed, small enough to hold no file in memory.
_CHUNK = 1 << 20


class PullError(ModelHostError):
    """A pull refused or failed; `code` says why (hub_unreachable, invalid_name, too_large, checksum_mismatch,
    not_a_model, hub_error, or the catalogue's model_not_found / ambiguous_model)."""

    code = "pull_failed"
    kind = UPSTREAM
    # The client's own mistake is a 4xx, the hub's failure a 502 (this server worked; the one behind it did not).
    codes = MappingProxyType(
        {
            "invalid_name": REFUSED,
            "ambiguous_model": REFUSED,
            "not_a_model": REFUSED,
            "too_large": REFUSED,
            "model_not_found": NOT_FOUND,
            # A gated repository: the hub wants this server's HF_TOKEN, not the client's credentials (so not 401).
            "gated": ErrorKind(403, "invalid_request_error", "invalid_request", "WORKER_INVALID_INPUT"),
            "hub_unreachable": UPSTREAM,
            "hub_error": UPSTREAM,
            "checksum_mismatch": UPSTREAM,
            "download_failed": UPSTREAM,
        }
    )


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """One file of the plan, as the hub lists it."""

    path: str
    size: int | None
    #: The LFS object's sha256 (large files), else None.
    sha256: str | None
    #: The git blob id (sha1 of "blob <size>\\0<bytes>"), which the hub lists for every file.
    blob_id: str | None


@dataclass(frozen=True, slots=True)
class PullPlan:
    """What a pull will download: the model name, the commit, the files (config.json last) and their total size."""

    ref: hub_cache.HubRef
    endpoint: str
    commit: str
    files: tuple[RemoteFile, ...]
    entry: str | None

    @property
    def total_bytes(self) -> int | None:
        """The sum of the files' sizes, or None when the listing left a size out."""
        sizes = [f.size for f in self.files]
        return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)


@dataclass(frozen=True, slots=True)
class PulledModel:
    """A model now in the cache: the name that loads it and the path the catalogue resolves it to."""

    name: str
    path: str
    bytes: int


class PullProgress(Protocol):
    """What a pull reports as it goes (the CLI draws a rich bar; the Ollama door streams JSON lines)."""

    def file_started(self, file: RemoteFile) -> None:
        """A file's download begins (or it is found already cached)."""

    def advance(self, file: RemoteFile, nbytes: int) -> None:
        """`nbytes` more of `file` arrived; negative when a server ignored a resume and the file restarts."""

    def verifying(self, file: RemoteFile) -> None:
        """The file is complete and is being hashed against the listing."""

    def file_done(self, file: RemoteFile) -> None:
        """The file is in the cache and verified."""


def endpoint_url(endpoint: str | None = None) -> str:
    """The hub's base URL: `endpoint`, else HF_ENDPOINT, else huggingface.co (read at call time, not import)."""
    return (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def parse_name(name: str) -> hub_cache.HubRef:
    """The hub name a pull accepts (`org/repo`, `org/repo:FILE`, `org/repo:QUANT`); PullError for anything else.

    Ollama's spelling of a hub model (`hf.co/org/repo:Q4_K_M`, `huggingface.co/...`) is accepted too.
    """
    bare = name.strip()
    for prefix in ("hf.co/", "huggingface.co/", "https://huggingface.co/"):
        if bare.startswith(prefix):
            bare = bare[len(prefix) :]
            break
    ref = hub_cache.parse_ref(bare)
    if ref is None:
        shown = name if len(name) <= 200 else name[:200] + "..."
        raise PullError(
            f"{shown!r} is not a hub model name: expected org/repo, org/repo:FILE or org/repo:QUANT (letters, "
            "digits, '_', '.' and '-'; each part at most 96 characters)",
            code="invalid_name",
        )
    return ref


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _unreachable(endpoint: str, exc: BaseException) -> PullError:
    return PullError(
        f"cannot reach the model hub at {endpoint} ({_first_line(exc)}); `modelhost pull` needs the network "
        "(set HF_ENDPOINT for a mirror)",
        code="hub_unreachable",
    )


def plan(
    name: str, *, endpoint: str | None = None, token: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> PullPlan:
    """List the repository once and decide what the pull of `name` downloads; raises PullError before any write."""
    import httpx2
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    ref = parse_name(name)
    base = endpoint_url(endpoint)
    if _offline():
        raise PullError(f"HF_HUB_OFFLINE is set: cannot pull {str(ref)!r} from {base}", code="hub_unreachable")
    try:
        info = HfApi(endpoint=base, token=token).model_info(ref.repo, files_metadata=True, timeout=LISTING_TIMEOUT_S)
    except GatedRepoError as exc:
        raise PullError(
            f"{ref.repo!r} is gated on {base}: accept its terms there and set HF_TOKEN", code="gated"
        ) from exc
    except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
        raise PullError(f"no model repository {ref.repo!r} on {base}", code="model_not_found") from exc
    except HfHubHTTPError as exc:
        raise PullError(f"the hub at {base} refused the listing of {ref.repo!r}: {exc}", code="hub_error") from exc
    except (httpx2.TransportError, OSError) as exc:
        # ConnectError (refused, no route, DNS), timeouts, a peer that hangs up: all mean "no hub here now".
        raise _unreachable(base, exc) from exc
    siblings = list(info.siblings or [])
    if not info.sha or not siblings:
        raise PullError(f"the hub at {base} listed no commit or no files for {ref.repo!r}", code="hub_error")
    by_path = {s.rfilename: s for s in siblings}
    try:
        choice = hub_cache.choose(ref, list(by_path))
    except ModelNotFoundError as exc:
        raise PullError(str(exc), code=exc.code) from exc
    if choice.entry is None and not any(f.endswith(".safetensors") for f in choice.files):
        raise PullError(
            f"{ref.repo!r} has no safetensors weights (only pickled ones, which modelhost never loads: loading them "
            "runs code); pick a GGUF with :QUANT or another repository",
            code="not_a_model",
        )
    if len(choice.files) > MAX_FILES:
        raise PullError(f"{ref.repo!r} needs {len(choice.files)} files, over the bound {MAX_FILES}", code="too_large")
    files = tuple(_remote_file(by_path[p]) for p in choice.files)
    result = PullPlan(ref=ref, endpoint=base, commit=info.sha, files=files, entry=choice.entry)
    _check_size(result, max_bytes)
    return result


def _remote_file(sibling: Any) -> RemoteFile:
    lfs = sibling.lfs
    return RemoteFile(
        path=sibling.rfilename,
        size=sibling.size,
        sha256=lfs.sha256 if lfs is not None else None,
        blob_id=sibling.blob_id,
    )


def _check_size(plan_: PullPlan, max_bytes: int) -> None:
    total = plan_.total_bytes
    if total is None:
        return  # huggingface_hub still checks each file's size against its HEAD answer
    if total > max_bytes:
        raise PullError(
            f"{plan_.ref} is {human_size(total)}, over the pull limit of {human_size(max_bytes)} "
            "(raise it with --max-size)",
            code="too_large",
        )
    root = hub_cache.cache_root()
    existing = next((p for p in (root, *root.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(existing).free
    if total > free:
        raise PullError(
            f"{plan_.ref} is {human_size(total)} but {existing} has {human_size(free)} free", code="too_large"
        )


def human_size(n: int) -> str:
    """Bytes for people: `98.2 MB` (powers of 1000, as the hub shows sizes)."""
    size = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


def parse_size(text: str) -> int:
    """Bytes from `10GB`, `500MB`, `2GiB` or a plain number; ValueError for anything else."""
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
    units |= {"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}
    raw = text.strip().upper().replace(" ", "")
    digits = raw.rstrip("KMGTIB")
    unit = raw[len(digits) :]
    if not digits or unit not in units:
        raise ValueError(f"not a size: {text!r} (examples: 500MB, 20GB, 2GiB)")
    value = float(digits) * units[unit]
    if not 0 < value < 1 << 60:
        raise ValueError(f"size out of range: {text!r}")
    return int(value)


def pull(
    name: str,
    *,
    progress: PullProgress | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> PulledModel:
    """Download `name` into the hub cache (resumable, verified) and return the name and path that load it."""
    return download(plan(name, endpoint=endpoint, token=token, max_bytes=max_bytes), progress=progress, token=token)


def download(plan_: PullPlan, *, progress: PullProgress | None = None, token: str | None = None) -> PulledModel:
    """Fetch every file of `plan_` from its commit, verifying each; PullError on a failure (nothing half-kept)."""
    import httpx2
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    root = hub_cache.cache_root()
    total = 0
    for file in plan_.files:
        if progress is not None:
            progress.file_started(file)
        try:
            pointer = hf_hub_download(
                plan_.ref.repo,
                file.path,
                revision=plan_.commit,
                cache_dir=root,
                endpoint=plan_.endpoint,
                token=token,
                tqdm_class=_bar_class(file, progress),
            )
        except LocalEntryNotFoundError as exc:  # its HEAD found no hub (and the file is not cached)
            raise _unreachable(plan_.endpoint, exc) from exc
        except httpx2.TransportError as exc:  # the connection kept failing through huggingface_hub's resumes
            raise PullError(
                f"downloading {file.path} of {plan_.ref} failed: {_first_line(exc)}; nothing was kept, pull again",
                code="download_failed",
            ) from exc
        except HfHubHTTPError as exc:
            raise PullError(f"downloading {file.path} of {plan_.ref} failed: {exc}", code="hub_error") from exc
        except OSError as exc:
            # huggingface_hub's "Consistency check failed" (a size mismatch after its retries), a full disk.
            raise PullError(f"downloading {file.path} of {plan_.ref} failed: {exc}", code="download_failed") from exc
        if progress is not None:
            progress.verifying(file)
        _verify(plan_, file, Path(pointer))
        total += os.path.getsize(pointer)
        if progress is not None:
            progress.file_done(file)
    path = hub_cache.resolve_cached(plan_.ref, root)
    if path is None:  # the choice the plan made must resolve now; anything else is a bug worth a clear report
        raise PullError(f"{plan_.ref} downloaded but does not resolve in {root}", code="pull_failed")
    return PulledModel(name=str(plan_.ref), path=path, bytes=total)


def _verify(plan_: PullPlan, file: RemoteFile, pointer: Path) -> None:
    """Hash the downloaded file against the listing; on a mismatch delete it from the cache and raise.

    The expected hash is the listing's (sha256 for an LFS file, else the git blob id); a listing without hashes
    leaves the blob's own name, which huggingface_hub takes from the file's ETag: the same two kinds of hash.
    """
    blob = pointer.resolve()
    expected = (file.sha256 or file.blob_id or blob.name).lower()
    if len(expected) == 64:
        actual = _digest(blob, hashlib.sha256())
    elif len(expected) == 40:
        actual = _digest(blob, hashlib.sha1(f"blob {blob.stat().st_size}\0".encode()))
    else:
        return  # no hash to check against: huggingface_hub's size check is all there is
    if actual == expected:
        return
    pointer.unlink(missing_ok=True)
    blob.unlink(missing_ok=True)
    raise PullError(
        f"{file.path} of {plan_.ref} does not match the hub's checksum (expected {expected[:16]}..., got "
        f"{actual[:16]}...); the corrupt file was deleted, nothing was kept; pull again",
        code="checksum_mismatch",
    )


def _digest(path: Path, h: Any) -> str:
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return str(h.hexdigest())


def _bar_class(file: RemoteFile, progress: PullProgress | None) -> type[Any]:
    """A tqdm class for huggingface_hub's `tqdm_class` that forwards each update of `file` to `progress`.

    A subclass of tqdm (disabled, so it draws nothing itself) rather than a duck type, because huggingface_hub's
    transfer paths use more of tqdm's surface (total, set_postfix_str, close) than `update`.
    """
    from tqdm.auto import tqdm

    class _Bar(tqdm):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            kwargs.pop("name", None)
            super().__init__(*args, **kwargs)
            initial = int(kwargs.get("initial") or 0)
            if progress is not None and initial:
                progress.advance(file, initial)

        def update(self, n: float | None = 1) -> bool | None:
            if progress is not None and n:
                progress.advance(file, int(n))
            return super().update(n)  # type: ignore[no-any-return]

    return _Bar

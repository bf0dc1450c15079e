"""What Ollama's listings say of a served model's files, truthfully: the bytes on disk (`/api/tags`' `size`; the
memory estimate is `/api/ps`' `size`, as in Ollama), the format, the quantisation its file name carries (else the
loaded model's bits), and the sha256 digest of a GGUF file.

The digest: a GGUF in the hub cache is a blob named by its sha256, so it is read from the name; any other file is
hashed once (on a worker thread, off the event loop) and kept for as long as its size and modification time stay
the same, and listed as "" until the hash is done (a 4 GB file takes seconds). A folder (safetensors) has no one
file to hash: "".
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path
from typing import Any

from modelhost.host.models import ServedModel, resident_size
from modelhost.inference import hub_cache

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: Bytes read per step while hashing: large enough to be fast, small enough not to hold much memory.
_CHUNK = 1 << 20

#: (path, size, mtime_ns) -> sha256 hex of the file; "" while the hash runs.
_digests: dict[tuple[str, int, int], str] = {}
_tasks: set[asyncio.Task[None]] = set()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def digest(path: str | None) -> str:
    """The sha256 of the model's file when known now ("" otherwise; a first call starts the hash)."""
    if path is None:
        return ""
    file = Path(path)
    if not file.is_file():
        return ""
    blob = file.resolve().name
    if _SHA256.match(blob):
        return blob
    stat = file.stat()
    key = (str(file.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        _digests[key] = ""

        async def run() -> None:
            try:
                _digests[key] = await asyncio.to_thread(_sha256, file)
            except OSError:
                _digests.pop(key, None)  # unreadable now: try again at the next listing

        task = asyncio.get_running_loop().create_task(run())
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
    return _digests[key]


def details(model: ServedModel) -> dict[str, Any]:
    """Ollama's `details` of a served model: format, family, quantisation (parameter_size is not known here)."""
    family = model.model.model_type if model.ready else ""
    path = Path(model.path) if model.path is not None else None
    fmt = ""
    quant = ""
    if path is not None and path.is_file():
        fmt = "gguf" if path.suffix == ".gguf" else ""
        quant = hub_cache.quant_of(path.name) or ""
    elif path is not None and path.is_dir():
        fmt = "safetensors" if any(path.glob("*.safetensors")) else ""
    if not quant and model.ready:
        info = model.model.info()
        if info.quant_bits >= 16:
            quant = f"F{info.quant_bits}"
        elif info.quant_bits:
            quant = f"Q{info.quant_bits}"  # the bits are known, not the GGUF type's name (Q4_0 and Q4_1 alike)
    parent = model.parent.name if model.parent is not None else ""  # a LoRA adapter's base model, as Ollama says it
    return {"parent_model": parent, "format": fmt, "family": family, "families": [family] if family else [],
            "parameter_size": "", "quantization_level": quant}  # fmt: skip


def disk_size(model: ServedModel) -> int:
    """The bytes of the model's files (0: unknown)."""
    return resident_size(model.path) if model.path is not None else 0

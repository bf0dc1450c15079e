"""How much memory a GGUF model will hold once loaded, known before loading it: the budget of a model set
(`serve --max-memory`) needs it to decide what fits, and the file's size alone misses the KV cache, which for a
batching host is often larger than the weights (a 4 GB 7B model at 4 slots x 4096 tokens holds 8 GB of f16 KV).

The estimate is the file (llama.cpp maps it whole), the projector file when there is one, and the KV cache the load
sets up: `parallel` slots of `context_length` cells each for the batch engine, plus the one-at-a-time context, which
a direct call grows to `context_length` (counted so the budget still holds then). Compute buffers (tens of MB) are
left out; the embedding context (made at the first embedding request) too.

Why a header reader of our own rather than the `gguf` package: GGUFReader parses every tensor's description too
(3.2 s for SmolLM2's 272 tensors on a busy 2-core machine), where `serve` needs a handful of numbers from the header
before it binds its sockets. Every length read from the file is bounded before anything is allocated for it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Collection
from typing import Any, BinaryIO

from modelhost.errors import ModelLoadError

#: Bytes per KV cell per layer and head dimension: llama.cpp's default K and V cache type is f16.
KV_BYTES = 2

#: Bounds on what the header may claim, each far past any real GGUF: a corrupt or hostile file must not make us
#: allocate gigabytes for one key or loop for hours over an array.
MAX_KEY_BYTES = 1 << 16
MAX_STRING_BYTES = 1 << 24
MAX_ARRAY_ITEMS = 1 << 24
MAX_KEYS = 1 << 16

# GGUF value types (the file format's own numbering).
_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


def read_header(path: str | os.PathLike[str], wanted: Collection[str] | None = None) -> dict[str, Any]:
    """The scalar values of the `wanted` keys of a GGUF file's header (None: of every key; arrays are skipped,
    never kept). ModelLoadError when the file is not a GGUF or its header is damaged."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"GGUF":
                raise ModelLoadError(f"{path} is not a GGUF file")
            version, _tensors, keys = struct.unpack("<IQQ", _exact(f, 20))
            if version < 2 or keys > MAX_KEYS:
                raise ModelLoadError(f"{path}: unsupported GGUF header (version {version}, {keys} keys)")
            found: dict[str, Any] = {}
            for _ in range(keys):
                key = _string(f, MAX_KEY_BYTES)
                (kind,) = struct.unpack("<I", _exact(f, 4))
                value = _value(f, kind)
                if wanted is None:
                    if value is not None:
                        found[key] = value
                elif key in wanted:
                    found[key] = value
                    if len(found) == len(wanted):
                        break
            return found
    except (OSError, struct.error, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{path}: cannot read the GGUF header: {exc}") from exc


def _exact(f: BinaryIO, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise ModelLoadError("the GGUF header ends early")
    return data


def _string(f: BinaryIO, bound: int) -> str:
    (n,) = struct.unpack("<Q", _exact(f, 8))
    if n > bound:
        raise ModelLoadError(f"a GGUF header string claims {n} bytes")
    return _exact(f, n).decode("utf-8")


def _value(f: BinaryIO, kind: int) -> Any:
    if kind in _FIXED:
        fmt = "<" + _FIXED[kind]
        return struct.unpack(fmt, _exact(f, struct.calcsize(fmt)))[0]
    if kind == _STRING:
        return _string(f, MAX_STRING_BYTES)
    if kind == _ARRAY:
        item, count = struct.unpack("<IQ", _exact(f, 12))
        if count > MAX_ARRAY_ITEMS:
            raise ModelLoadError(f"a GGUF header array claims {count} items")
        if item in _FIXED:
            f.seek(struct.calcsize("<" + _FIXED[item]) * count, os.SEEK_CUR)  # skipped, not read
        else:
            for _ in range(count):
                _value(f, item)
        return None
    raise ModelLoadError(f"unknown GGUF value type {kind}")


def kv_bytes_per_cell(header: dict[str, Any], arch: str) -> int:
    """Bytes one KV cell (one token of one sequence) takes across all layers, from the header's attention shape."""
    layers = int(header.get(f"{arch}.block_count", 0))
    heads = int(header.get(f"{arch}.attention.head_count", 0))
    kv_heads = int(header.get(f"{arch}.attention.head_count_kv", heads) or heads)
    width = int(header.get(f"{arch}.embedding_length", 0))
    head_dim = width // heads if heads else 0
    key = int(header.get(f"{arch}.attention.key_length", head_dim))
    value = int(header.get(f"{arch}.attention.value_length", head_dim))
    return layers * kv_heads * (key + value) * KV_BYTES


def estimate(path: str, *, context: int | None, default_context: int, parallel: int, mmproj: str | None = None) -> int:
    """Bytes the loaded model will hold (see the module doc). `context` is the caller's context_length, else the
    model's own trained length when shorter than `default_context`, as the backend chooses it at load."""
    # One pass over the header: the keys are named after the architecture, which the same header names.
    header = read_header(path)
    arch = header.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelLoadError(f"{path}: the GGUF header names no architecture")
    trained = int(header.get(f"{arch}.context_length", 0))
    cells_per_slot = context or (trained if 0 < trained < default_context else default_context)
    slots = parallel + 1 if parallel > 1 else 1  # the batch engine's slots, and the one-at-a-time context
    size = os.path.getsize(path) + (os.path.getsize(mmproj) if mmproj else 0)
    return size + slots * cells_per_slot * kv_bytes_per_cell(header, arch)

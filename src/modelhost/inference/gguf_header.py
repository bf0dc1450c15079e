"""The GGUF header, read without llama.cpp or the gguf package: the one reader (memory estimates, the mmproj's kind, a
LoRA GGUF's base model), in the contract so the host and the backends share it.

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


def gguf_string(path: str | os.PathLike[str], key: str) -> str | None:
    """The string value of metadata `key` (None if absent or not a string), reading only the header."""
    value = read_header(path, (key,)).get(key)
    return value if isinstance(value, str) else None

"""The GGUF header, read without llama.cpp or the gguf package: the one reader (memory estimates, the mmproj's kind, a
LoRA GGUF's base model, the tensor shapes an adapter is checked against), in the contract so the host and the
backends share it.

Why a header reader of our own rather than the `gguf` package: GGUFReader parses every tensor's description too
(3.2 s for SmolLM2's 272 tensors on a busy 2-core machine), where `serve` needs a handful of numbers from the header
before it binds its sockets. Every length read from the file is bounded before anything is allocated for it.
"""

from __future__ import annotations

import os
import re
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
#: The most tensors read from one file's descriptions: a real model holds hundreds to a few thousand (a 400B dense
#: model about 1,100; MoE files merge their experts into one tensor per layer), and each kept description costs
#: ~200 bytes of Python objects, so a file claiming more cannot make us hold more than ~25 MB for them.
MAX_TENSORS = 1 << 17
#: ggml's own bounds on a tensor (GGML_MAX_NAME, GGML_MAX_DIMS): a description past them is no tensor llama.cpp
#: could load, so it is refused here rather than read.
MAX_TENSOR_NAME_BYTES = 64
MAX_TENSOR_DIMS = 4

# GGUF value types (the file format's own numbering).
_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


def read_header(path: str | os.PathLike[str], wanted: Collection[str] | None = None) -> dict[str, Any]:
    """The scalar values of the `wanted` keys of a GGUF file's header (None: of every key; arrays are skipped,
    never kept). ModelLoadError when the file is not a GGUF or its header is damaged."""
    try:
        with open(path, "rb") as f:
            _tensors, keys = _preamble(f, path)
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


def read_tensor_shapes(path: str | os.PathLike[str]) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape in a GGUF file, by name, in ggml's order (`ne[0]` first: a weight's input side), read
    from the tensor descriptions after the header; no tensor data is read. ModelLoadError when the file is not a
    GGUF, its descriptions are damaged, or it names one tensor twice."""
    try:
        with open(path, "rb") as f:
            tensors, keys = _preamble(f, path)
            for _ in range(keys):
                _string(f, MAX_KEY_BYTES)
                (kind,) = struct.unpack("<I", _exact(f, 4))
                _value(f, kind)
            shapes: dict[str, tuple[int, ...]] = {}
            for _ in range(tensors):
                name = _string(f, MAX_TENSOR_NAME_BYTES)
                (dims,) = struct.unpack("<I", _exact(f, 4))
                if dims > MAX_TENSOR_DIMS:
                    raise ModelLoadError(f"{path}: tensor {name!r} claims {dims} dimensions")
                shape = struct.unpack(f"<{dims}Q", _exact(f, 8 * dims))
                _exact(f, 12)  # its type and data offset
                if name in shapes:
                    raise ModelLoadError(f"{path}: tensor {name!r} is described twice")
                shapes[name] = shape
            return shapes
    except (OSError, struct.error, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{path}: cannot read the GGUF tensor descriptions: {exc}") from exc


#: llama.cpp's split GGUF names (`gguf-split`): the loader is given the first shard and opens the rest by name.
_SHARD = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.I)


def read_model_tensor_shapes(path: str | os.PathLike[str]) -> dict[str, tuple[int, ...]]:
    """read_tensor_shapes over a whole model: a split model's first shard names `split.count`, and each of its
    shards (named as llama.cpp opens them) holds some of the tensors. ModelLoadError when a shard is missing."""
    shapes = read_tensor_shapes(path)
    count = read_header(path, ("split.count",)).get("split.count")
    shard = _SHARD.match(os.path.basename(path))
    if not isinstance(count, int) or count <= 1 or shard is None:
        return shapes
    folder = os.path.dirname(path)
    for index in range(2, count + 1):
        shapes.update(read_tensor_shapes(os.path.join(folder, f"{shard['stem']}-{index:05d}-of-{count:05d}.gguf")))
    return shapes


def _preamble(f: BinaryIO, path: str | os.PathLike[str]) -> tuple[int, int]:
    """The file's tensor and key counts, after its magic and version are checked and the counts bounded."""
    if f.read(4) != b"GGUF":
        raise ModelLoadError(f"{path} is not a GGUF file")
    version, tensors, keys = struct.unpack("<IQQ", _exact(f, 20))
    if version < 2 or keys > MAX_KEYS or tensors > MAX_TENSORS:
        raise ModelLoadError(f"{path}: unsupported GGUF header (version {version}, {keys} keys, {tensors} tensors)")
    return tensors, keys


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
        elif item == _ARRAY:
            # llama.cpp's reader refuses an array of arrays (gguf.cpp: "invalid GGUF type"), so no model has one;
            # followed here, 100,000 nested arrays ran the reader into RecursionError (a 500, not a load error).
            raise ModelLoadError("a GGUF header array of arrays (llama.cpp reads no nested arrays)")
        else:
            for _ in range(count):
                _value(f, item)
        return None
    raise ModelLoadError(f"unknown GGUF value type {kind}")


def gguf_string(path: str | os.PathLike[str], key: str) -> str | None:
    """The string value of metadata `key` (None if absent or not a string), reading only the header."""
    value = read_header(path, (key,)).get(key)
    return value if isinstance(value, str) else None

"""What a model set is built from: one ModelSpec per model (with its request defaults), and the sizes the memory
budget counts."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from modelhost.host.defaults import RequestDefaults
from modelhost.inference.model import TextModel


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One model to serve: its name, where it comes from (a path, for whoever needs the files: lora.train), how to
    load it, its resident size in bytes (0: unknown, not counted against the budget), and whether it is pinned."""

    name: str
    loader: Callable[[], TextModel]
    path: str | None = None
    size: int = 0
    pinned: bool = False
    #: Other names a request may use for it (the catalogue name given on the command line, e.g. `ocr`).
    aliases: tuple[str, ...] = ()
    #: What every request for it gets where it says nothing (a created model's SYSTEM, PARAMETERs, TEMPLATE).
    defaults: RequestDefaults | None = None


def resident_size(path: str | os.PathLike[str]) -> int:
    """An estimate of a model's resident size: the bytes of its file, or of every file in its folder (weights
    dominate; a GGUF is mapped whole, a safetensors checkpoint is read whole)."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    if p.is_dir():
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return 0


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> int:
    """`8G`, `512M`, `1.5GiB`, `1000000` into bytes (binary units); ValueError naming the bad value."""
    found = _SIZE.match(text)
    if not found:
        raise ValueError(f"expected a size such as 8G, 512M or a number of bytes, got {text!r}")
    return int(float(found.group(1)) * _UNITS[found.group(2).lower()])


def megabytes(size: int) -> str:
    """`size` bytes as a person reads them in a message: whole MB, or bytes below one."""
    return f"{size / 2**20:.0f} MB" if size >= 2**20 else f"{size} bytes"

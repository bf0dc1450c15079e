"""A full disk for tests: fill a small filesystem (the `small_disk` fixture's tmpfs) to its last byte."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def fill(disk: Path) -> Path:
    """Fill `disk` to its last byte with one file; returns it (unlink it to free the space)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        # Megabytes first, then pages, then bytes: the last byte of a tmpfs goes only to a write of one byte.
        for size in (1 << 20, 4096, 1):
            chunk = bytes(size)
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return filler

"""Giving freed page memory back to the system.

A page read from its pixels passes through allocations of every size: the rendered bytes and the model's RGB and
BGR copies (117 MB each for a 6250x6250 page) are mmapped and go back to the system when freed, but everything
below glibc's mmap threshold (resized images, crops, onnxruntime's buffers, decoded DocTags; tens of MB a page,
from several threads, so several malloc arenas) stays in the heap after it is freed. Measured on a worker reading
6250x6250 pages: ~500 MB stayed mapped after the job was deleted, and RSS wandered by 200-400 MB page to page.
`malloc_trim(0)` after each such page and after each document hands those free pages back (the same run: RSS
back under its baseline after the document; 30-75 ms a call, against seconds of OCR a page).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _trim() -> Callable[[int], int] | None:
    # glibc only: musl and macOS have no malloc_trim (and give memory back by themselves, or not at all)
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def release_freed_memory() -> bool:
    """Return the heap's free pages to the system (glibc's `malloc_trim(0)`, every arena). Blocking (tens of ms
    on a large fragmented heap): call it off the event loop. False where the C library has no such call."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True

"""Freed heap handed back to the system (docengine.memory), which the engine does after each pixel page."""

from __future__ import annotations

import os
import platform

import pytest

from modelhost.docengine.memory import release_freed_memory
from modelhost.testing.proc import rss_bytes

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")


def test_freed_small_buffers_go_back_to_the_system() -> None:
    # 3,000 buffers of 64 KiB (under glibc's mmap threshold: heap, like a page's crops and resized copies), all
    # freed but the last (which pins the heap's top, so glibc's own top trim cannot give the rest back).
    chunks = [bytes(64 << 10) for _ in range(3000)]
    held = rss_bytes(os.getpid())
    last = chunks[-1]
    del chunks
    kept = rss_bytes(os.getpid())
    assert kept > held - (64 << 20), (held, kept)  # freed, and still the process's: what stayed after DELETE
    assert release_freed_memory()
    assert rss_bytes(os.getpid()) < kept - (128 << 20), (kept, rss_bytes(os.getpid()))
    assert len(last) == 64 << 10

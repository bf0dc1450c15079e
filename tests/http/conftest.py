"""Fixtures of the HTTP door tests (helpers in http_support)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from http_support import LoopThread, serving

import modelhost.inference
from modelhost.host import Host
from modelhost.http import HttpServer


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    """One background event loop per test module (module-scoped servers live on it)."""
    lt = LoopThread()
    yield lt
    lt.close()


@pytest.fixture(scope="module")
def tiny_gguf_door(loop_thread: LoopThread, tiny_llama_gguf: Path) -> Iterator[HttpServer]:
    """The HTTP door on loopback over the tiny GGUF (llama.cpp, one thread), one per module: a real engine that
    loads in a second, for tests of the door's own behaviour (metrics, fuzzing) rather than of the model's words."""
    pytest.importorskip("llama_cpp")
    host = Host(
        lambda: modelhost.inference.load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1), name="tiny"
    )
    with serving(loop_thread, host) as server:
        yield server

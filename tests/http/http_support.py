"""Helpers of the HTTP door tests: a background event loop, a server on loopback, and a stand-in model.

The server and the host live on an event loop in a background thread, as they would in `modelhost serve`; the
tests talk to them over real sockets with the real `openai` client and httpx, so nothing is mocked between the
client and the host. (Not named conftest so test modules can import it: tests/http has no __init__, because a
package named `http` would shadow the standard library's.)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

import modelhost.inference
from modelhost.host import Host
from modelhost.http import HttpServer
from modelhost.testing.standins import ScriptedModel

T = TypeVar("T")


class LoopThread:
    """An asyncio loop on its own thread; `run(coro)` runs a coroutine there and waits for its result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="http-test-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


#: How long `serving` waits for its host's model to load: minutes, not seconds. A first load of the embedded GGUF
#: through transformers dequantises it, or waits for another test process doing so; on a fresh 2-core machine at
#: load 12 that took over 120 s and failed CI at what was a 120 s wait. pytest-timeout still bounds every test.
MODEL_LOAD_WAIT_S = 600.0


@contextmanager
def serving(lt: LoopThread, host: Host, *, wait_ready: bool = True, **server_kw: Any) -> Iterator[HttpServer]:
    """Start `server_kw`'s HttpServer over `host` on port 0 (before the host loads, as the CLI does), then the host."""
    server = HttpServer(host, port=0, **server_kw)
    lt.run(server.start())
    loading = lt.spawn(host.start())
    if wait_ready:
        loading.result(MODEL_LOAD_WAIT_S)
    try:
        yield server
    finally:
        lt.run(server.aclose())
        if not loading.done():
            loading.result(MODEL_LOAD_WAIT_S)
        lt.run(host.aclose(grace=1))


#: What the door tests' model says: one word a token, then end of sequence.
WORDS = "one two three four five six seven eight"


def scripted_model(gate: threading.Semaphore | None = None) -> ScriptedModel:
    """A stand-in model that yields the words of WORDS one per token, for tests of the door's own logic.

    With a `gate`, each token waits for a release, so a test can hold a request in decode as long as it likes.
    It honours the contract's options (max_tokens, stop, cancel) through the shared decode loop.
    """
    return ScriptedModel([w + " " for w in WORDS.split()], gate=gate)


def scripted_host(model: ScriptedModel | None = None, *, loader: Callable[[], Any] | None = None, **kw: Any) -> Host:
    """A host over a scripted_model() (or over what `loader` returns)."""
    chosen = model or scripted_model()
    return Host(loader or (lambda: chosen), name=kw.pop("name", "scripted"), **kw)


def embedded_gguf_or_skip() -> Path:
    """The embedded default model's GGUF, for tests that need a real small chat model; the test is skipped (not
    failed) where llama-cpp-python or the model's package is not installed."""
    pytest.importorskip("llama_cpp")
    try:
        return Path(modelhost.inference.catalogue.resolve("default"))
    except Exception as exc:  # the embedded model's package is missing on this machine
        pytest.skip(f"the embedded model is not installed: {exc}")


@contextmanager
def disk_order() -> Iterator[list[tuple[str, str]]]:
    """Note, in order, each real `os.fsync` (with the path of the file or folder it syncs) and `os.replace` (with its
    destination) made inside the block: a power loss cannot be had in a test, and the order of what reaches the disk
    is what makes a name on it safe."""
    import os

    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        events.append(("rename", str(dst)))
        real_replace(src, dst)

    with pytest.MonkeyPatch.context() as spy:
        spy.setattr(os, "fsync", fsync)
        spy.setattr(os, "replace", replace)
        yield events

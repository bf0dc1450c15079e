"""Helpers of the HTTP door tests: a background event loop, a server on loopback, and a stand-in model.

The server and the host live on an event loop in a background thread, as they would in `modelhost serve`; the
tests talk to them over real sockets with the real `openai` client and httpx, so nothing is mocked between the
client and the host. (Not named conftest so test modules can import it: tests/http has no __init__, because a
package named `http` would shadow the standard library's.)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar

from modelhost.host import Host
from modelhost.http import HttpServer
from modelhost.inference.generation import LoopOutcome, MetricsClock, decode_loop
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import GenerateMetrics, Message, ModelInfo, Token

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


@contextmanager
def serving(lt: LoopThread, host: Host, *, wait_ready: bool = True, **server_kw: Any) -> Iterator[HttpServer]:
    """Start `server_kw`'s HttpServer over `host` on port 0 (before the host loads, as the CLI does), then the host."""
    server = HttpServer(host, port=0, **server_kw)
    lt.run(server.start())
    loading = lt.spawn(host.start())
    if wait_ready:
        loading.result(120)
    try:
        yield server
    finally:
        lt.run(server.aclose())
        if not loading.done():
            loading.result(120)
        lt.run(host.aclose(grace=1))


class ScriptedModel:
    """A stand-in model that yields the words of `text` one per token, for tests of the door's own logic.

    With a `gate`, each token waits for a release, so a test can hold a request in decode as long as it likes.
    It honours the contract's options (max_tokens, stop, cancel) through the shared decode loop.
    """

    model_type = "scripted"

    def __init__(self, text: str = "one two three four five six seven eight", gate: threading.Semaphore | None = None):
        self.words = [w + " " for w in text.split()]
        self.gate = gate
        self.prompts: list[str] = []
        self._metrics = GenerateMetrics()

    def _ids(self) -> Iterator[int]:
        i = 0
        while True:
            if self.gate is not None:
                self.gate.acquire()
            yield i
            i += 1

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        o = GenerateOptions.parse(opts).resolved({"max_tokens": len(self.words)})
        self.prompts.append(prompt)
        clock = MetricsClock()
        clock.prefill_done(len(prompt.split()))
        outcome = LoopOutcome()
        eos = len(self.words)
        try:
            yield from decode_loop(
                self._ids(),
                lambda i: self.words[i].encode() if i < eos else b"",
                o,
                eos_ids=(eos,),
                clock=clock,
                outcome=outcome,
            )
        finally:
            self._metrics = clock.finish(outcome.finish_reason)

    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        return self.generate(" ".join(m.content for m in messages), **opts)

    def classify(self, prompts: Sequence[str], **opts: Any) -> list[Any]:
        raise NotImplementedError

    def batch_generate(self, prompts: Sequence[str], **opts: Any) -> list[Any]:
        raise NotImplementedError

    def info(self) -> ModelInfo:
        return ModelInfo("scripted")

    def metrics(self) -> GenerateMetrics:
        return self._metrics

    def err(self) -> BaseException | None:
        return None

    def close(self) -> None:
        pass

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def scripted_host(model: ScriptedModel | None = None, *, loader: Callable[[], Any] | None = None, **kw: Any) -> Host:
    """A host over a ScriptedModel (or over what `loader` returns)."""
    chosen = model or ScriptedModel()
    return Host(loader or (lambda: chosen), name=kw.pop("name", "scripted"), **kw)

"""Shared pieces of the worker tests: a stand-in model, test-only operations, a running server, HTTP helpers.

The stand-in model exists for what a real model's speed would blur: a job that must still be processing when it is
cancelled or killed. End-to-end generation runs on the real tiny model (tests/worker/test_model.py).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from modelhost.host import Host
from modelhost.inference.generation import LoopOutcome, MetricsClock, decode_loop
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import GenerateMetrics, Message, ModelInfo, Token
from modelhost.worker import JobContext, WorkerServer, default_operations
from modelhost.worker.protocol import failed, invalid


class PacedModel:
    """Yields letters; each token waits for `gate` (when given), so a test decides when a generation moves on."""

    model_type = "paced"

    def __init__(self, gate: threading.Semaphore | None = None) -> None:
        self.gate = gate
        self._metrics = GenerateMetrics()

    def _ids(self) -> Iterator[int]:
        i = 0
        while True:
            if self.gate is not None:
                while not self.gate.acquire(timeout=0.01):
                    pass
            yield i
            i += 1

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        o = GenerateOptions.parse(opts).resolved({"max_tokens": 16})
        clock = MetricsClock()
        clock.prefill_done(len(prompt))
        outcome = LoopOutcome()
        try:
            yield from decode_loop(
                self._ids(), lambda i: chr(97 + i % 26).encode(), o, eos_ids=(), clock=clock, outcome=outcome
            )
        finally:
            self._metrics = clock.finish(outcome.finish_reason)

    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        return self.generate(messages[-1].content, **opts)

    def info(self) -> ModelInfo:
        return ModelInfo("paced")

    def metrics(self) -> GenerateMetrics:
        return self._metrics

    def err(self) -> BaseException | None:
        return None

    def close(self) -> None:
        pass


async def echo(ctx: JobContext) -> list[str]:
    """test.echo: writes the input (with `$inputFile` objects) to echo.json at once."""
    import json

    if isinstance(ctx.work.input, dict) and ctx.work.input.get("fail") == "invalid":
        raise invalid("asked to refuse")
    if isinstance(ctx.work.input, dict) and ctx.work.input.get("fail") == "crash":
        raise RuntimeError("boom")
    (ctx.dir / "echo.json").write_text(json.dumps(ctx.work.input))
    return ["echo.json"]


async def block(ctx: JobContext) -> list[str]:
    """test.block: reports progress, then waits until cancelled (a job that is reliably processing)."""
    stop = asyncio.Event()
    ctx.on_cancel(stop.set)
    ctx.progress("generating", 1, 10, 9.0)
    await stop.wait()
    raise ctx.stopped()


async def lying(ctx: JobContext) -> list[str]:
    """test.lying: reports an output it never wrote."""
    return ["missing.txt"]


def operations() -> dict[str, Any]:
    """The real operations plus the test-only ones."""
    return {**default_operations(), "test.echo": echo, "test.block": block, "test.lying": lying, "test.fail": _fail}


async def _fail(ctx: JobContext) -> list[str]:
    raise failed("WORKER_FAILED", "told to fail")


async def paced_host(gate: threading.Semaphore | None = None, name: str = "paced") -> Host:
    host = Host.from_model(PacedModel(gate), name=name)  # type: ignore[arg-type]
    await host.start()
    return host


async def start_server(host: Host, state: Path, **kwargs: Any) -> WorkerServer:
    kwargs.setdefault("capacity", 8)
    kwargs.setdefault("operations", operations())
    kwargs.setdefault("journal", lambda line: None)
    kwargs.setdefault("drain_seconds", 0.2)
    server = WorkerServer(host, state_dir=state, **kwargs)
    await server.start()
    return server


async def wait_for(client: Any, job_id: str, statuses: set[str], timeout: float = 20.0) -> dict[str, Any]:
    """Poll a job until its status is one of `statuses`."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        record: dict[str, Any] = (await client.get(f"/v1/jobs/{job_id}")).json()
        if record.get("status") in statuses:
            return record
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"job {job_id} stayed {record.get('status')}: {record}")
        await asyncio.sleep(0.01)

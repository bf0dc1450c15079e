"""Shared pieces of the worker tests: a stand-in model, test-only operations, a running server, HTTP helpers.

The stand-in model exists for what a real model's speed would blur: a job that must still be processing when it is
cancelled or killed. End-to-end generation runs on the real tiny model (tests/worker/test_model.py).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from modelhost.host import Host
from modelhost.host.models import Models
from modelhost.testing.standins import ScriptedModel
from modelhost.testing.waiting import STATE_WAIT_SECONDS
from modelhost.worker import JobContext, WorkerServer, default_operations
from modelhost.worker.protocol import failed, invalid


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


async def big(ctx: JobContext) -> list[str]:
    """test.big: writes an output of `input.bytes` bytes (one that a small disk cannot take)."""
    (ctx.dir / "big.bin").write_bytes(bytes(int(ctx.work.input["bytes"])))
    return ["big.bin"]


def operations() -> dict[str, Any]:
    """The real operations plus the test-only ones."""
    return {
        **default_operations(),
        "test.echo": echo,
        "test.block": block,
        "test.lying": lying,
        "test.fail": _fail,
        "test.big": big,
    }


async def _fail(ctx: JobContext) -> list[str]:
    raise failed("WORKER_FAILED", "told to fail")


async def paced_host(gate: threading.Semaphore | None = None, name: str = "paced") -> Host:
    """A host over a stand-in that writes the letters a, b, c, ...; each token waits for `gate` when given."""
    host = Host.from_model(ScriptedModel(name="paced", gate=gate), name=name)
    await host.start()
    return host


async def start_server(host: Host | Models, state: Path, **kwargs: Any) -> WorkerServer:
    kwargs.setdefault("capacity", 8)
    kwargs.setdefault("operations", operations())
    kwargs.setdefault("journal", lambda line: None)
    kwargs.setdefault("drain_seconds", 0.2)
    server = WorkerServer(host, state_dir=state, **kwargs)
    await server.start()
    return server


async def wait_for(client: Any, job_id: str, statuses: set[str], timeout: float = STATE_WAIT_SECONDS) -> dict[str, Any]:
    """Poll a job until its status is one of `statuses`."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        record: dict[str, Any] = (await client.get(f"/v1/jobs/{job_id}")).json()
        if record.get("status") in statuses:
            return record
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"job {job_id} stayed {record.get('status')}: {record}")
        await asyncio.sleep(0.01)

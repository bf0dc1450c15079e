"""Races on the worker door that answered 500 (issue 35 item 5), through the real worker over loopback: DELETEs of
one queued job at once, and a `text.embed` job cancelled while it waits for room in a full model queue."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import httpx
import numpy as np

from modelhost.host import Host
from modelhost.host.events import GenerationRequest
from modelhost.host.models import Models
from modelhost.inference.types import EmbeddingResult
from modelhost.testing.standins import ScriptedModel

from .helpers import paced_host, start_server, wait_for

ECHO = {"operation": "test.echo", "model": "paced", "input": {"a": 1}}
BLOCK = {"operation": "test.block", "model": "paced", "input": {}}
#: Rounds of the DELETE race: the probe saw 94 of 252 DELETEs answered 500, so a few rounds meet it.
ROUNDS = 5


def test_concurrent_deletes_of_a_queued_job_all_answer_it_cancelled(tmp_path: Path) -> None:
    async def main() -> None:
        host = await paced_host()
        server = await start_server(host, tmp_path / "state")
        async with httpx.AsyncClient(base_url=server.url) as c:
            blocking = (await c.post("/v1/jobs", json=BLOCK)).json()["id"]
            await wait_for(c, blocking, {"processing"})  # the one job that runs: the others stay queued
            for i in range(ROUNDS):
                queued = (await c.post("/v1/jobs", json={**ECHO, "input": {"round": i}})).json()["id"]
                answers = await asyncio.gather(*(c.delete(f"/v1/jobs/{queued}") for _ in range(3)))
                assert [a.status_code for a in answers] == [200, 200, 200], [a.text for a in answers]
                assert {a.json()["status"] for a in answers} == {"cancelled"}, [a.text for a in answers]
            await c.delete(f"/v1/jobs/{blocking}")
        await server.aclose()
        await host.aclose()

    asyncio.run(main())


class _Embedder(ScriptedModel):
    """A stand-in that embeds (one constant vector a text) and generates only as its gate allows."""

    def embedding_size(self) -> int:
        return 4

    def embed(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingResult:
        return EmbeddingResult(np.ones((len(texts), 4), dtype=np.float32), len(texts), ())


def test_an_embed_job_cancelled_while_the_model_queue_is_full_ends_cancelled(tmp_path: Path) -> None:
    async def main() -> None:
        gate = threading.Semaphore(0)
        host = Host.from_model(_Embedder(name="paced", gate=gate), name="paced", max_queue=1)
        await host.start()
        # Served as `serve` serves it (a model set): the job holds the model's `in_use` while it waits for room.
        server = await start_server(Models.of(host), tmp_path / "state")
        running = host.submit(GenerationRequest(prompt="a"))  # holds the one slot at the gate
        while not host.running:
            await asyncio.sleep(0.01)
        waiting = host.submit(GenerationRequest(prompt="b"))  # fills the queue of one
        async with httpx.AsyncClient(base_url=server.url) as c:
            body = {"operation": "text.embed", "model": "paced", "input": {"texts": ["x"]}}
            job = (await c.post("/v1/jobs", json=body)).json()["id"]
            await wait_for(c, job, {"processing"})  # waiting for room: the host answers queue_full meanwhile
            assert (await c.delete(f"/v1/jobs/{job}")).status_code == 200
            ended = await wait_for(c, job, {"cancelled", "failed"})
            # It ended WORKER_FAILED "TypeError: super(type, obj)..." (the job's Failure raised through the model's
            # in_use context manager, which a frozen slotted exception could not pass).
            assert ended["status"] == "cancelled" and ended["code"] == "WORKER_CANCELLED", ended
        running.cancel()
        waiting.cancel()
        for _ in range(64):
            gate.release()
        await server.aclose()
        await host.aclose()

    asyncio.run(main())

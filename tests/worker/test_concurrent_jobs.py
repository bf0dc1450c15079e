"""Worker jobs share the model's batch: as many run at once as the host decodes at once, the rest stay queued.

The stand-in batching engine of tests/host paces its steps with a gate, so the test sees the jobs running together
before any of them can finish; the real engine's equality with one-at-a-time decoding is pinned in tests/host.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path

import httpx
from tests.host.test_batching import BatchingScripted

from modelhost.host import Host
from modelhost.jobs.operation import JobContext
from modelhost.worker.training import LORA_TRAIN

from .helpers import operations, start_server, wait_for


def test_jobs_run_together_up_to_the_hosts_slots(tmp_path: Path) -> None:
    async def main() -> None:
        gate = threading.Semaphore(0)
        model = BatchingScripted(slots=2, gate=gate)
        host = Host.from_model(model, name="paced")
        await host.start()
        assert host.slots == 2
        server = await start_server(host, tmp_path / "state")
        async with httpx.AsyncClient(base_url=server.url) as c:
            ids = []
            for n in range(3):
                job = {"operation": "text.generate", "model": "paced", "input": {"prompt": f"p{n}", "max_tokens": 8}}
                r = await c.post("/v1/jobs", json=job)
                assert r.status_code == 202, r.text
                ids.append(r.json()["id"])
            for job_id in ids[:2]:
                await wait_for(c, job_id, {"processing"})
            # A step at a time (a request joins between steps) until both slots decode worker jobs together; the
            # third waits queued (cancellable as such), not "processing".
            for _ in range(5):
                if len(model.paced.busy) == 2:
                    break
                gate.release()
                await asyncio.sleep(0.2)
            assert len(model.paced.busy) == 2, model.paced.busy
            health = (await c.get("/v1/health")).json()
            assert (health["processing"], health["queued"]) == (2, 1), health
            queue = (await c.get("/v1/queue")).json()
            assert [j["status"] for j in queue["jobs"]] == ["processing", "processing", "queued"]
            for _ in range(40):
                gate.release()
            for job_id in ids:
                done = await wait_for(c, job_id, {"completed"})
                assert (await c.get(f"/files/{job_id}/output.txt")).text == "abcdefgh", done
        await server.aclose()
        await host.aclose()

    asyncio.run(main())


def test_training_jobs_run_one_at_a_time_while_other_jobs_pass_them(tmp_path: Path) -> None:
    """Two lora.train jobs never run together (each trains its own copy of the model), even with free slots; a
    text job queued behind the waiting one starts at once, and the waiting one starts when the first ends."""

    async def main() -> None:
        started: list[str] = []
        release = asyncio.Event()

        async def training(ctx: JobContext) -> list[str]:
            # Stands in for the real lora.train (minutes of compute): the point here is only who runs when.
            started.append(ctx.work.id)
            await release.wait()
            (ctx.dir / "adapter.txt").write_text("trained")
            return ["adapter.txt"]

        host = Host.from_model(BatchingScripted(slots=4, gate=None), name="paced")
        await host.start()
        # The real record with its runner replaced: lora.train's exclusivity is the record's, whatever runs it.
        stand_in = replace(LORA_TRAIN, run=training, check=None)
        server = await start_server(host, tmp_path / "state", operations={**operations(), "lora.train": stand_in})
        async with httpx.AsyncClient(base_url=server.url) as c:
            ids = []
            for n in range(2):
                job = {"operation": "lora.train", "model": "paced", "input": {"n": n}}
                r = await c.post("/v1/jobs", json=job)
                assert r.status_code == 202, r.text
                ids.append(r.json()["id"])
            text = {"operation": "text.generate", "model": "paced", "input": {"prompt": "p", "max_tokens": 3}}
            r = await c.post("/v1/jobs", json=text)
            assert r.status_code == 202, r.text
            # The text job runs past the waiting training job; the second training job stays queued meanwhile.
            await wait_for(c, r.json()["id"], {"completed"})
            assert [(await c.get(f"/v1/jobs/{i}")).json()["status"] for i in ids] == ["processing", "queued"]
            assert started == [ids[0]]
            release.set()
            for job_id in ids:
                await wait_for(c, job_id, {"completed"})
            assert started == ids
        await server.aclose()
        await host.aclose()

    asyncio.run(main())

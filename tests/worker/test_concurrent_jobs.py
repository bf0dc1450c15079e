"""Worker jobs share the model's batch: as many run at once as the host decodes at once, the rest stay queued.

The stand-in batching engine of tests/host paces its steps with a gate, so the test sees the jobs running together
before any of them can finish; the real engine's equality with one-at-a-time decoding is pinned in tests/host.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
from tests.host.test_batching import BatchingScripted

from modelhost.host import Host

from .helpers import start_server, wait_for


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
                if len(model.engine.busy) == 2:
                    break
                gate.release()
                await asyncio.sleep(0.2)
            assert len(model.engine.busy) == 2, model.engine.busy
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

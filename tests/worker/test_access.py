"""The worker's access log: one record per request, with the model a job submission names (modelhost._access)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from modelhost._access import AccessRecord
from modelhost.host import Host
from modelhost.host.models import Models, ModelSpec
from modelhost.testing.standins import ScriptedModel
from modelhost.testing.waiting import STATE_WAIT_SECONDS
from modelhost.worker import WorkerServer


def test_the_worker_logs_each_request_with_the_jobs_model(tmp_path: Path) -> None:
    async def main() -> list[AccessRecord]:
        records: list[AccessRecord] = []
        host = Host(lambda: ScriptedModel(["a ", "b ", "c "]), name="scripted")
        await host.start()
        server = WorkerServer(
            host, state_dir=tmp_path / "state", capacity=4, journal=lambda line: None, access_log=records.append
        )
        await server.start()
        async with httpx.AsyncClient(base_url=server.url, timeout=STATE_WAIT_SECONDS) as client:
            job = {"operation": "text.generate", "model": "scripted", "input": {"prompt": "p", "max_tokens": 2}}
            created = await client.post("/v1/jobs", json=job)
            assert created.status_code == 202, created.text
            await client.get(f"/v1/jobs/{created.json()['id']}")
            refused = await client.post("/v1/jobs", json={**job, "model": "nope"})
            assert refused.status_code == 400
        await server.aclose()
        await host.aclose()
        return records

    submitted, read, refused = asyncio.run(main())
    assert (submitted.door, submitted.method, submitted.path, submitted.status) == ("worker", "POST", "/v1/jobs", 202)
    assert submitted.model == "scripted"
    assert (read.method, read.status) == ("GET", 200)
    assert (refused.status, refused.model) == (400, "")


def test_a_job_may_name_its_model_by_an_alias(tmp_path: Path) -> None:
    """The worker takes the names the HTTP door takes: `default` for the model started as `--model default`."""

    async def main() -> None:
        spec = ModelSpec("smollm2", lambda: ScriptedModel(["a ", "b "]), aliases=("default",))
        models = Models([spec])
        await models.start()
        server = WorkerServer(models, state_dir=tmp_path / "state", capacity=4, journal=lambda line: None)
        await server.start()
        async with httpx.AsyncClient(base_url=server.url, timeout=STATE_WAIT_SECONDS) as client:
            job = {"operation": "text.generate", "model": "default", "input": {"prompt": "p", "max_tokens": 2},
                   "idempotencyKey": "k1"}  # fmt: skip
            by_alias = await client.post("/v1/jobs", json=job)
            assert by_alias.status_code == 202, by_alias.text
            assert by_alias.json()["model"] == "smollm2"
            # The alias is the model itself: the same key under its name is the same job.
            by_name = await client.post("/v1/jobs", json={**job, "model": "smollm2"})
            assert by_name.json()["id"] == by_alias.json()["id"]
            refused = await client.post("/v1/jobs", json={**job, "model": "ocr", "idempotencyKey": "k2"})
            assert refused.status_code == 400 and "ocr" in refused.text
        await server.aclose()
        await models.aclose()

    asyncio.run(main())

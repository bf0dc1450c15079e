"""A full disk under a real worker: a tmpfs of a few MB made by the test, filled to the last page, then freed.

What a user relies on: a storage failure never ends a job that did not run, no job starts while the state folder
refuses writes (intake answers 507, health says why), the worker resumes by itself once space is back, every
accepted job ends exactly once, and what GET shows is what is on disk, before and after a restart.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import httpx

from modelhost.testing.disks import fill
from modelhost.worker import WorkerServer

from .helpers import paced_host, start_server, wait_for

ECHO = {"operation": "test.echo", "model": "paced", "input": {"a": 1}}
BLOCK = {"operation": "test.block", "model": "paced", "input": {}}


def on_disk(state: Path, job_id: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((state / job_id / "job.json").read_text())
    return record


async def serving(state: Path, lines: list[str], **kwargs: Any) -> tuple[WorkerServer, httpx.AsyncClient]:
    host = await paced_host()
    server = await start_server(host, state, journal=lines.append, **kwargs)
    return server, httpx.AsyncClient(base_url=server.url)


async def stop(server: WorkerServer, client: httpx.AsyncClient) -> None:
    await client.aclose()
    await server.aclose()
    await server.host.aclose()


async def until(check: Any, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_a_full_disk_holds_every_queued_job_and_the_worker_resumes_when_space_is_back(small_disk: Path) -> None:
    state = small_disk / "state"

    async def main() -> None:
        lines: list[str] = []
        server, c = await serving(state, lines, capacity=64)
        blocking = (await c.post("/v1/jobs", json=BLOCK)).json()["id"]
        await wait_for(c, blocking, {"processing"})
        queued = []
        for n in range(30):
            r = await c.post("/v1/jobs", json={**ECHO, "input": {"n": n}})
            assert r.status_code == 202, r.text
            queued.append(r.json()["id"])

        filler = fill(small_disk)
        # The running job is told to stop: it stops, but its end cannot be written, so it stays processing (as on
        # disk) and the executor takes no queued job meanwhile.
        assert (await c.delete(f"/v1/jobs/{blocking}")).status_code == 200

        async def failing() -> bool:
            return bool((await c.get("/v1/health")).json()["storage"] == "failing")

        await until(failing)
        await asyncio.sleep(1.0)  # many probe rounds: before the fix every queued job was failed by now
        health = (await c.get("/v1/health")).json()
        assert health["storage"] == "failing" and "No space left" in health["storageError"], health
        assert health["queued"] == 30 and health["processing"] == 1, health
        for job_id in queued:
            shown = (await c.get(f"/v1/jobs/{job_id}")).json()
            assert shown["status"] == "queued" and on_disk(state, job_id)["status"] == "queued", shown
        assert (await c.get(f"/v1/jobs/{blocking}")).json()["status"] == "processing"
        refused = await c.post("/v1/jobs", json={**ECHO, "idempotencyKey": "k"})
        assert refused.status_code == 507 and refused.json()["code"] == "WORKER_STORAGE", refused.text
        assert int(refused.headers["retry-after"]) >= 1
        metrics = (await c.get("/metrics")).text
        assert "modelhost_worker_storage_writable 0.0" in metrics
        assert lines == []  # nothing ended

        filler.unlink()
        for job_id in queued:
            await wait_for(c, job_id, {"completed"})
        assert (await wait_for(c, blocking, {"cancelled"}))["code"] == "WORKER_CANCELLED"
        assert (await c.get("/v1/health")).json()["storage"] == "ok"
        ended = [line.split()[0] for line in lines]
        assert sorted(ended) == sorted([blocking, *queued]), lines  # each accepted job ended, exactly once
        assert (await c.post("/v1/jobs", json={**ECHO, "idempotencyKey": "k"})).status_code == 202
        shown = {job_id: (await c.get(f"/v1/jobs/{job_id}")).json() for job_id in [blocking, *queued]}
        for job_id, record in shown.items():
            assert on_disk(state, job_id)["status"] == record["status"]
        await stop(server, c)

        # A restart reads back exactly what GET showed: no finished job changes state.
        again, c = await serving(state, [])
        for job_id, record in shown.items():
            assert (await c.get(f"/v1/jobs/{job_id}")).json()["status"] == record["status"]
        await stop(again, c)

    asyncio.run(main())


def test_a_refused_write_leaves_nothing_and_the_same_key_works_once_space_is_back(small_disk: Path) -> None:
    state = small_disk / "state"

    async def main() -> None:
        server, c = await serving(state, [], capacity=8)
        filler = fill(small_disk)
        keyed = {**ECHO, "idempotencyKey": "same"}
        first = await c.post("/v1/jobs", json=keyed)
        assert first.status_code == 507 and first.json()["code"] == "WORKER_STORAGE", first.text
        assert int(first.headers["retry-after"]) >= 1  # the first 507 of a full disk too, not only the later ones
        upload = await c.post(
            "/v1/jobs",
            files=[("request", (None, json.dumps({**ECHO, "input": {"p": {"$file": "p"}}}))), ("p", ("p.png", b"x"))],
        )
        assert upload.status_code == 507 and int(upload.headers["retry-after"]) >= 1, upload.text
        assert sorted(p.name for p in state.iterdir()) == [".lock"]  # no job folder, no staging folder
        assert server.board.held == 0
        filler.unlink()

        async def accepted() -> bool:
            return (await c.post("/v1/jobs", json=keyed)).status_code == 202

        await until(accepted)
        await stop(server, c)

    asyncio.run(main())


def test_outputs_that_do_not_fit_make_the_job_wait_and_run_again(small_disk: Path) -> None:
    state = small_disk / "state"

    async def main() -> None:
        lines: list[str] = []
        server, c = await serving(state, lines, capacity=8)
        # Room for the records, not for this output: writing it fails with ENOSPC half-way.
        job = await c.post("/v1/jobs", json={"operation": "test.big", "model": "paced", "input": {"bytes": 5 << 20}})
        job_id = job.json()["id"]
        await until(lambda: _failing(c))
        await asyncio.sleep(0.5)
        record = (await c.get(f"/v1/jobs/{job_id}")).json()
        assert record["status"] == "processing" and on_disk(state, job_id)["status"] == "processing", record
        assert not (state / job_id / "outputs" / "big.bin").exists()  # the partial output gave its space back
        assert lines == []
        # An operator makes room (here: a bigger tmpfs); the job runs again and completes, once.
        subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
        done = await wait_for(c, job_id, {"completed", "failed"})
        assert done["status"] == "completed" and done["output"] == ["big.bin"], done
        assert [line.split()[0] for line in lines] == [job_id]
        await stop(server, c)

    asyncio.run(main())


async def _failing(c: httpx.AsyncClient) -> bool:
    return bool((await c.get("/v1/health")).json()["storage"] == "failing")


def test_a_worker_restarted_on_a_full_disk_starts_and_ends_the_interrupted_job_once_space_is_back(
    small_disk: Path,
) -> None:
    """The last run stopped while a job was processing and the disk was full, so the job is still processing on
    disk. The next start must not fail for want of space to write that job's end: it serves (intake 507, health
    says why), shows the job as processing (as on disk), and writes the end once space is back."""
    state = small_disk / "state"

    async def main() -> None:
        lines: list[str] = []
        server, c = await serving(state, lines, capacity=16)
        blocking = (await c.post("/v1/jobs", json=BLOCK)).json()["id"]
        await wait_for(c, blocking, {"processing"})
        waiting = (await c.post("/v1/jobs", json=ECHO)).json()["id"]
        filler = fill(small_disk)
        await stop(server, c)  # its interrupted end cannot be written: on disk the job is still processing
        assert on_disk(state, blocking)["status"] == "processing"

        server, c = await serving(state, lines, capacity=16)  # before the fix: StorageError, no worker
        health = (await c.get("/v1/health")).json()
        assert health["storage"] == "failing" and "No space left" in health["storageError"], health
        assert (await c.get(f"/v1/jobs/{blocking}")).json()["status"] == "processing"
        assert (await c.get(f"/v1/jobs/{waiting}")).json()["status"] == "queued"
        assert (await c.post("/v1/jobs", json={**ECHO, "input": {"b": 2}})).status_code == 507

        filler.unlink()
        ended = await wait_for(c, blocking, {"failed"})
        assert ended["code"] == "WORKER_INTERRUPTED" and on_disk(state, blocking)["code"] == "WORKER_INTERRUPTED"
        await wait_for(c, waiting, {"completed"})
        assert (await c.get("/v1/health")).json()["storage"] == "ok"
        assert sum(blocking in line for line in lines) == 1, lines  # it ended exactly once
        await stop(server, c)

    asyncio.run(main())

"""Durability: SIGKILL a real worker process mid-job, restart it on the same state folder, lose nothing answered."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from modelhost.testing.waiting import STATE_WAIT_SECONDS

HERE = Path(__file__).parent


def launch(state: Path, *flags: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "serve_worker.py"), str(state), *flags],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(HERE)},
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://"), f"the worker did not start: {url!r}"
    return proc, url


def wait_status(c: httpx.Client, job_id: str, status: str) -> dict[str, object]:
    deadline = time.monotonic() + STATE_WAIT_SECONDS
    while True:
        record: dict[str, object] = c.get(f"/v1/jobs/{job_id}").json()
        if record["status"] == status:
            return record
        assert time.monotonic() < deadline, record
        time.sleep(0.01)


def test_sigkill_keeps_queued_and_finished_jobs_and_interrupts_the_running_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc, url = launch(state)
    try:
        with httpx.Client(base_url=url) as c:
            finished = c.post("/v1/jobs", json={"operation": "test.echo", "model": "paced", "input": {"n": 0}}).json()
            wait_status(c, finished["id"], "completed")
            running = c.post("/v1/jobs", json={"operation": "test.block", "model": "paced", "input": {}}).json()
            wait_status(c, running["id"], "processing")
            queued = [
                c.post("/v1/jobs", json={"operation": "test.echo", "model": "paced", "input": {"n": n}}).json()["id"]
                for n in range(1, 4)
            ]
            request = {"operation": "test.echo", "model": "paced", "input": {"pic": {"$file": "pic"}}}
            upload = c.post("/v1/jobs", files=[("request", (None, json.dumps(request))), ("pic", ("p.png", b"PIC"))])
            queued.append(upload.json()["id"])
            assert upload.status_code == 202
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    # Restart without running anything: the queue must be exactly as it was.
    proc, url = launch(state, "--no-execute")
    try:
        with httpx.Client(base_url=url) as c:
            kept = c.get(f"/v1/jobs/{finished['id']}").json()
            assert kept["status"] == "completed" and kept["output"] == ["echo.json"]
            assert c.get(f"/files/{finished['id']}/echo.json").json() == {"n": 0}
            interrupted = c.get(f"/v1/jobs/{running['id']}").json()
            assert interrupted["status"] == "failed" and interrupted["code"] == "WORKER_INTERRUPTED"
            assert interrupted["errorStatus"] == 500 and interrupted["completed"] > 0
            assert [j["id"] for j in c.get("/v1/queue").json()["jobs"]] == queued
            assert json.loads(c.get(f"/v1/jobs/{queued[-1]}").json()["input"])["pic"]["$inputFile"]["name"] == "p.png"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    # And with execution on, the kept queue runs to completion, uploads included.
    proc, url = launch(state)
    try:
        with httpx.Client(base_url=url) as c:
            for job_id in queued:
                wait_status(c, job_id, "completed")
            echoed = c.get(f"/files/{queued[-1]}/echo.json").json()
            assert Path(echoed["pic"]["$inputFile"]["path"]).read_bytes() == b"PIC"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

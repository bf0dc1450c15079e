"""Every endpoint and status code of the worker over real HTTP on loopback, with real files in tmp_path.

The host here carries the stand-in PacedModel and the test-only operations of helpers.py: these tests pin the
protocol (codes, bodies, idempotency, capacity, cancel, files, auth), which a real model would only slow down.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until
from modelhost.worker import WorkerServer

from .helpers import paced_host, start_server, wait_for

ECHO = {"operation": "test.echo", "model": "paced", "input": {"a": 1}}
BLOCK = {"operation": "test.block", "model": "paced", "input": {}}


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


async def serving(tmp_path: Path, **kwargs: Any) -> tuple[WorkerServer, httpx.AsyncClient]:
    host = await paced_host(kwargs.pop("gate", None))
    server = await start_server(host, tmp_path / "state", **kwargs)
    return server, httpx.AsyncClient(base_url=server.url, headers=kwargs.get("headers", {}))


async def stop(server: WorkerServer, client: httpx.AsyncClient) -> None:
    await client.aclose()
    await server.aclose()
    await server.host.aclose()


async def on_disk(folder: Path, status: str) -> bool:
    """Wait for job.json to say `status` (a record changes in memory a moment before its write is durable)."""
    for _ in range(500):
        if json.loads((folder / "job.json").read_text())["status"] == status:
            return True
        await asyncio.sleep(0.01)
    return False


def job_folders(state: Path) -> list[str]:
    return sorted(p.name for p in state.iterdir() if p.name != ".lock")


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Wait on the event loop for a state the server reaches by itself, bounded only against a hang."""
    await asyncio.to_thread(wait_until, predicate, STATE_WAIT_SECONDS, what)


def test_json_job_lifecycle_read_files_and_ack(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        r = await c.post("/v1/jobs", json=ECHO)
        assert r.status_code == 202
        record = r.json()
        assert r.headers["location"] == f"/v1/jobs/{record['id']}"
        assert len(record["id"]) == 32 and record["status"] == "queued" and json.loads(record["input"]) == {"a": 1}
        assert set(record) == {
            "id", "operation", "model", "input", "status", "stage", "step", "total", "remaining", "output",
            "error", "code", "errorStatus", "created", "started", "completed", "acknowledged", "cancel",
        }  # fmt: skip
        done = await wait_for(c, record["id"], {"completed"})
        assert done["output"] == ["echo.json"] and done["started"] >= done["created"] > 0 and done["completed"] > 0
        f = await c.get(f"/files/{record['id']}/echo.json")
        assert f.status_code == 200 and f.json() == {"a": 1} and f.headers["content-type"] == "application/json"
        assert (tmp_path / "state" / record["id"] / "job.json").is_file()
        a = await c.post(f"/v1/jobs/{record['id']}/ack")
        assert a.status_code == 200 and a.json()["acknowledged"] is True
        assert not (tmp_path / "state" / record["id"]).exists()
        again = await c.post(f"/v1/jobs/{record['id']}/ack")
        assert again.status_code == 404 and again.json()["code"] == "WORKER_NOT_FOUND"
        assert (await c.get(f"/v1/jobs/{record['id']}")).status_code == 404
        await stop(server, c)

    run(main)


def test_idempotent_replay_capacity_and_intake(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path, capacity=2)
        keyed = {**BLOCK, "idempotencyKey": "key-1"}
        first = await c.post("/v1/jobs", json=keyed)
        assert first.status_code == 202
        expected = hashlib.sha256(b"paced\ntest.block\nkey-1").hexdigest()[:32]
        assert first.json()["id"] == expected
        await wait_for(c, expected, {"processing"})
        assert (await c.post("/v1/jobs", json=ECHO)).status_code == 202  # capacity 2: one processing, one queued
        busy = await c.post("/v1/jobs", json=ECHO)
        assert (
            busy.status_code == 429 and busy.json()["code"] == "WORKER_BUSY" and int(busy.headers["retry-after"]) >= 1
        )
        replay = await c.post("/v1/jobs", json={**keyed, "input": {"different": True}})
        assert replay.status_code == 200 and replay.json()["id"] == expected and replay.json()["input"] == "{}"
        assert (await c.post("/v1/intake/close")).json() == {"intake": "closed"}
        assert (await c.get("/v1/health")).json()["intake"] == "closed"
        await c.delete(f"/v1/jobs/{expected}")
        await wait_for(c, expected, {"cancelled"})
        closed = await c.post("/v1/jobs", json=ECHO)
        assert closed.status_code == 429 and closed.json()["code"] == "WORKER_BUSY"
        assert (await c.post("/v1/jobs", json=keyed)).status_code == 200  # a replay adds no load: still answered
        assert (await c.post("/v1/intake/open")).json() == {"intake": "open"}
        r = await c.post("/v1/jobs", json=ECHO)
        assert r.status_code == 202, r.text
        await stop(server, c)

    run(main)


def test_cancel_queued_processing_and_finished(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        blocking = (await c.post("/v1/jobs", json=BLOCK)).json()["id"]
        queued = (await c.post("/v1/jobs", json=ECHO)).json()["id"]
        running = await wait_for(c, blocking, {"processing"})
        while running["stage"] != "generating":  # the record says processing a moment before the op reports
            await asyncio.sleep(0.01)
            running = (await c.get(f"/v1/jobs/{blocking}")).json()
        assert running["step"] == 1 and running["total"] == 10 and running["remaining"] == 9.0
        r = await c.delete(f"/v1/jobs/{queued}")
        assert r.status_code == 200
        assert r.json()["status"] == "cancelled" and r.json()["code"] == "WORKER_CANCELLED"
        assert r.json()["errorStatus"] == 500
        r = await c.delete(f"/v1/jobs/{blocking}")
        assert r.json()["cancel"] is True
        ended = await wait_for(c, blocking, {"cancelled"})
        assert ended["code"] == "WORKER_CANCELLED" and ended["cancel"] is True
        assert await on_disk(tmp_path / "state" / blocking, "cancelled")
        again = await c.delete(f"/v1/jobs/{blocking}")
        assert again.status_code == 200 and again.json() == ended
        assert (await c.delete("/v1/jobs/" + "0" * 32)).status_code == 404
        await stop(server, c)

    run(main)


def test_text_generate_progress_and_cancel_through_the_host(tmp_path: Path) -> None:
    """text.generate on the host: progress maps the host's events; DELETE closes the host stream mid-generation."""

    async def main() -> None:
        gate = threading.Semaphore(0)
        server, c = await serving(tmp_path, gate=gate)
        job = {"operation": "text.generate", "model": "paced", "input": {"prompt": "p", "max_tokens": 50, "seed": -1}}
        job_id = (await c.post("/v1/jobs", json=job)).json()["id"]
        for _ in range(6):
            gate.release()
        deadline = asyncio.get_running_loop().time() + STATE_WAIT_SECONDS
        while (record := (await c.get(f"/v1/jobs/{job_id}")).json())["step"] < 6:
            assert asyncio.get_running_loop().time() < deadline, record
            await asyncio.sleep(0.01)
        assert record["status"] == "processing" and record["stage"] == "generating" and record["total"] == 50
        assert record["remaining"] >= 0
        await c.delete(f"/v1/jobs/{job_id}")
        gate.release()  # the model takes one more step and sees the cancel token
        ended = await wait_for(c, job_id, {"cancelled"})
        assert ended["code"] == "WORKER_CANCELLED" and ended["output"] == []
        assert server.host.running == 0
        await stop(server, c)

    run(main)


def test_multipart_files_reach_the_executor_as_input_files(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        payload = os.urandom(300_000)
        request = {"operation": "test.echo", "model": "paced", "input": {"pic": {"$file": "photo"}, "n": 1}}
        for order in ("request-first", "files-first"):
            parts: list[Any] = [("request", (None, json.dumps(request), "application/json"))]
            file_part = ("photo", ("cat.JPG", payload, "image/jpeg"))
            parts = [*parts, file_part] if order == "request-first" else [file_part, *parts]
            parts.append(("unused", ("x.bin", b"dropped", "application/octet-stream")))
            r = await c.post("/v1/jobs", files=parts)
            assert r.status_code == 202, r.text
            done = await wait_for(c, r.json()["id"], {"completed"})
            echoed = (await c.get(f"/files/{done['id']}/echo.json")).json()
            meta = echoed["pic"]["$inputFile"]
            assert meta["name"] == "cat.JPG" and meta["contentType"] == "image/jpeg"
            assert Path(meta["path"]).read_bytes() == payload
            assert Path(meta["path"]).parent == tmp_path / "state" / done["id"] / "inputs"
            assert [p.name for p in Path(meta["path"]).parent.iterdir()] == [Path(meta["path"]).name]
        await stop(server, c)

    run(main)


def test_bad_input_leaves_nothing_behind(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path, max_upload_bytes=100_000)
        state = tmp_path / "state"

        async def refused(status: int, **kwargs: Any) -> dict[str, Any]:
            r = await c.post("/v1/jobs", **kwargs)
            assert r.status_code == status, r.text
            body: dict[str, Any] = r.json()
            assert body["code"] == "WORKER_INVALID_INPUT" and body["status"] == status and body["message"]
            return body

        await refused(400, content=b'{"operation": "test.echo", "model": ')
        await refused(400, content=b"[1, 2]")
        await refused(400, json={"model": "paced", "input": {}})
        await refused(400, json={**ECHO, "operation": "no.such"})
        await refused(400, json={**ECHO, "model": "no-such-model"})
        await refused(400, json={**ECHO, "input": {"pic": {"$file": "photo"}}})
        await refused(400, json={**ECHO, "input": {"pic": {"$inputFile": {"path": "/etc/passwd"}}}})
        request = json.dumps({**ECHO, "input": {"pic": {"$file": "absent"}}})
        await refused(400, files=[("request", (None, request)), ("photo", ("a.png", b"png", "image/png"))])
        await refused(413, files=[("request", (None, json.dumps(ECHO))), ("big", ("b", b"x" * 200_000))])
        await refused(413, content=b"{" + b" " * 200_000 + b"}", headers={"content-type": "application/json"})
        boundary = "b0undary"
        truncated = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="photo"; filename="a.png"\r\n\r\nPNGDATA\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="request"\r\n\r\n{json.dumps(ECHO)}\r\n'
        ).encode()  # no closing boundary
        await refused(400, content=truncated, headers={"content-type": f"multipart/form-data; boundary={boundary}"})

        # A client that disconnects mid-upload: its staging folder must go.
        host, port = server.url.removeprefix("http://").rsplit(":", 1)
        _reader, writer = await asyncio.open_connection(host, int(port))
        head = (
            f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
            f"Content-Length: 50000\r\n\r\n"
        ).encode()
        writer.write(head + truncated)
        await writer.drain()
        await until(lambda: job_folders(state) != [], "the upload's staging folder made")
        writer.close()
        await until(lambda: job_folders(state) == [], "the staging folder of a client that left removed")
        assert job_folders(state) == []
        assert (await c.get("/v1/health")).json()["queued"] == 0
        await stop(server, c)

    run(main)


def test_executor_failures_are_recorded_and_the_worker_carries_on(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        cases = [
            ({"operation": "test.echo", "input": {"fail": "invalid"}}, "WORKER_INVALID_INPUT", 400),
            ({"operation": "test.echo", "input": {"fail": "crash"}}, "WORKER_FAILED", 500),
            ({"operation": "test.lying", "input": {}}, "WORKER_FAILED", 500),
            ({"operation": "test.fail", "input": {}}, "WORKER_FAILED", 500),
        ]
        for job, code, status in cases:
            job_id = (await c.post("/v1/jobs", json={"model": "paced", **job})).json()["id"]
            record = await wait_for(c, job_id, {"failed", "completed"})
            assert (record["status"], record["code"], record["errorStatus"]) == ("failed", code, status), record
            assert record["error"]
        # The text operations check their input at submission: refused there (400), nothing is queued.
        for bad in ({"prompt": 3}, {"prompt": "p", "max_tokens": -1}):
            r = await c.post("/v1/jobs", json={"model": "paced", "operation": "text.generate", "input": bad})
            assert r.status_code == 400 and r.json()["code"] == "WORKER_INVALID_INPUT", r.text
        r = await c.post("/v1/jobs", json={"model": "paced", "operation": "text.chat", "input": {"messages": []}})
        assert r.status_code == 400 and r.json()["code"] == "WORKER_INVALID_INPUT", r.text
        assert (await wait_for(c, (await c.post("/v1/jobs", json=ECHO)).json()["id"], {"completed"}))["output"]
        assert (await c.post(f"/v1/jobs/{job_id}/ack")).status_code == 200
        await stop(server, c)

    run(main)


def test_ack_of_an_unfinished_job_is_409(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        job_id = (await c.post("/v1/jobs", json=BLOCK)).json()["id"]
        r = await c.post(f"/v1/jobs/{job_id}/ack")
        assert r.status_code == 409 and r.json()["code"] == "WORKER_NOT_FINISHED"
        await stop(server, c)

    run(main)


def test_describing_routes(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path, capacity=5)
        blocking = (await c.post("/v1/jobs", json=BLOCK)).json()["id"]
        await wait_for(c, blocking, {"processing"})
        queued = (await c.post("/v1/jobs", json=ECHO)).json()["id"]
        health = (await c.get("/v1/health")).json()
        assert health == {
            "status": "ok", "protocol": 1, "intake": "open", "capacity": 5, "queued": 1, "processing": 1,
            "storage": "ok", "storageError": "",
        }  # fmt: skip
        q = (await c.get("/v1/queue")).json()
        assert [j["id"] for j in q["jobs"]] == [blocking, queued] and q["capacity"] == 5 and q["queued"] == 1
        models = (await c.get("/v1/models")).json()["models"]
        assert {"id": "paced", "operation": "text.chat"} in models
        assert {"id": "paced", "operation": "text.generate"} in models
        metrics = (await c.get("/metrics")).text
        assert "modelhost_worker_jobs_created_total 2.0" in metrics
        assert "modelhost_worker_jobs_processing 1.0" in metrics and "modelhost_worker_capacity 5.0" in metrics
        assert "modelhost_num_requests_running" in metrics  # the host's own metrics ride along
        nowhere = await c.get("/v1/nowhere")
        assert nowhere.status_code == 404 and nowhere.json()["code"] == "WORKER_NOT_FOUND"
        await stop(server, c)

    run(main)


def test_output_names_that_escape_are_404(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        job_id = (await c.post("/v1/jobs", json=ECHO)).json()["id"]
        await wait_for(c, job_id, {"completed"})
        (tmp_path / "state" / "secret.txt").write_text("secret")
        for name in ("../job.json", "..%2Fjob.json", "..%2F..%2Fsecret.txt", "a%5Cb", "echo.json%00", "..", "job.json"):
            r = await c.get(f"/files/{job_id}/{name}")
            assert r.status_code == 404, name
        assert (await c.get(f"/files/{'f' * 32}/echo.json")).status_code == 404
        await stop(server, c)

    run(main)


def test_authorization_guards_every_route(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path, authorization="Bearer s3cret")
        job_id = "0" * 32
        routes = [
            ("POST", "/v1/jobs"),
            ("GET", f"/v1/jobs/{job_id}"),
            ("DELETE", f"/v1/jobs/{job_id}"),
            ("POST", f"/v1/jobs/{job_id}/ack"),
            ("GET", f"/files/{job_id}/x.txt"),
            ("GET", "/v1/queue"),
            ("GET", "/v1/health"),
            ("GET", "/v1/models"),
            ("GET", "/metrics"),
            ("POST", "/v1/intake/close"),
            ("POST", "/v1/intake/open"),
        ]
        for method, path in routes:
            for wrong in ({}, {"Authorization": "Bearer s3cre"}, {"Authorization": "bearer s3cret"}):
                r = await c.request(method, path, headers=wrong)
                assert r.status_code == 401, (method, path, wrong)
                assert r.json()["code"] == "WORKER_UNAUTHORIZED" and r.headers["www-authenticate"]
            ok = await c.request(method, path, headers={"Authorization": "Bearer s3cret"}, json=ECHO)
            assert ok.status_code != 401, (method, path)
        await stop(server, c)

    run(main)


def test_retention_sweeps_unacknowledged_jobs(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path, retention_seconds=0.3)
        job_id = (await c.post("/v1/jobs", json=ECHO)).json()["id"]
        await wait_for(c, job_id, {"completed"})
        for _ in range(300):
            if job_folders(tmp_path / "state") == []:
                break
            await asyncio.sleep(0.01)
        assert job_folders(tmp_path / "state") == []
        assert (await c.get(f"/v1/jobs/{job_id}")).status_code == 404
        await stop(server, c)

    run(main)


def test_graceful_close_interrupts_the_running_job_and_keeps_the_queue(tmp_path: Path) -> None:
    async def main() -> None:
        lines: list[str] = []
        server, c = await serving(tmp_path, drain_seconds=0.1, journal=lines.append)
        blocking = (await c.post("/v1/jobs", json=BLOCK)).json()["id"]
        await wait_for(c, blocking, {"processing"})
        queued = (await c.post("/v1/jobs", json=ECHO)).json()["id"]
        await stop(server, c)
        state = tmp_path / "state"
        assert json.loads((state / blocking / "job.json").read_text())["code"] == "WORKER_INTERRUPTED"
        assert json.loads((state / queued / "job.json").read_text())["status"] == "queued"
        assert lines == [f"{blocking} test.block failed {lines[0].split()[3]} WORKER_INTERRUPTED"]

    run(main)


def test_an_escaped_input_file_key_is_refused_too(tmp_path: Path) -> None:
    """`$inputFile` spelled with JSON escapes decodes to the same key in the executor: it must be refused as well,
    or a JSON job could name any file on the machine as its input."""

    async def main() -> None:
        server, c = await serving(tmp_path)
        for key in ("\\u0024inputFile", "$inputFil\\u0065", "\\u0024file"):
            ref = '{"name": "p", "contentType": "image/png", "path": "/etc/passwd"}'
            body = '{"operation": "test.echo", "model": "paced", "input": {"pic": {"' + key + '": ' + ref + "}}}"
            r = await c.post("/v1/jobs", content=body.encode(), headers={"content-type": "application/json"})
            assert r.status_code == 400, (key, r.text)
            assert r.json()["code"] == "WORKER_INVALID_INPUT"
        assert job_folders(tmp_path / "state") == []
        await stop(server, c)

    run(main)


def test_deeply_nested_json_is_400_not_500(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        deep = b"[" * 100_000 + b"]" * 100_000
        body = b'{"operation": "test.echo", "model": "paced", "input": ' + deep + b"}"
        r = await c.post("/v1/jobs", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400, r.text
        assert r.json()["code"] == "WORKER_INVALID_INPUT"
        # Shallow enough for the decoder, too deep for the check of file references (a recursive walk).
        for depth in (600, 900, 990):
            nested = b"[" * depth + b'{"$file": "photo"}' + b"]" * depth
            body_ = b'{"operation": "test.echo", "model": "paced", "input": ' + nested + b"}"
            r = await c.post("/v1/jobs", content=body_, headers={"content-type": "application/json"})
            assert r.status_code == 400, r.text
        files = [("request", (None, body.decode())), ("photo", ("a.png", b"png", "image/png"))]
        r = await c.post("/v1/jobs", files=files)
        assert r.status_code == 400, r.text
        assert r.json()["code"] == "WORKER_INVALID_INPUT"
        assert job_folders(tmp_path / "state") == []
        assert (await c.get("/v1/health")).json()["queued"] == 0
        await stop(server, c)

    run(main)


def test_a_stalled_upload_is_refused_and_frees_its_capacity_slot(tmp_path: Path) -> None:
    from urllib.parse import urlsplit

    from modelhost._serving import ClientLimits

    async def main() -> None:
        server, c = await serving(tmp_path, capacity=1, limits=ClientLimits(body_timeout=0.3))
        request = json.dumps({"operation": "test.echo", "model": "paced", "input": {"n": 1}})
        head = (
            f'--b\r\nContent-Disposition: form-data; name="request"\r\n\r\n{request}\r\n'
            '--b\r\nContent-Disposition: form-data; name="photo"; filename="p.jpg"\r\n\r\nsome bytes'
        ).encode()
        address = urlsplit(server.url)
        reader, writer = await asyncio.open_connection(address.hostname, address.port)
        writer.write(
            b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
            + f"Content-Length: {len(head) + 10_000}\r\n\r\n".encode()
            + head
        )
        await writer.drain()  # the request field is in: the job holds the only slot, then the peer goes quiet
        answer = await asyncio.wait_for(reader.read(4096), 10)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer
        r = await c.post("/v1/jobs", json={"operation": "test.echo", "model": "paced", "input": {"n": 1}})
        assert r.status_code == 202, r.text  # the slot came back
        await wait_for(c, r.json()["id"], {"completed"})
        assert [p.name for p in (tmp_path / "state").iterdir() if not p.name.startswith(".")] == [r.json()["id"]]
        await stop(server, c)

    run(main)

"""The worker door against clients a library would never be: slow headers and bodies, too many connections, bytes
past Content-Length, odd Content-Types, a route that raises. Raw sockets on loopback, timeouts shortened so each test
ends by itself within seconds; afterwards capacity and the state folder are back where they were.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from pathlib import Path

import httpx
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from modelhost._serving import ClientLimits
from modelhost.testing.rawhttp import Connection, parse_answers, refused_until_answered, request
from modelhost.testing.waiting import STATE_WAIT_SECONDS
from modelhost.worker import WorkerServer

from .helpers import paced_host, start_server

#: Short enough for a test, long enough that a loaded 2-core machine answers a well-behaved request within it.
FAST = ClientLimits(header_timeout=0.5, body_timeout=0.5)
ECHO = json.dumps({"operation": "test.echo", "model": "paced", "input": {"a": 1}}).encode()


async def worker(tmp_path: Path, **kwargs: object) -> WorkerServer:
    kwargs.setdefault("limits", FAST)
    return await start_server(await paced_host(), tmp_path / "state", **kwargs)


async def stop(server: WorkerServer) -> None:
    await server.aclose()
    await server.host.aclose()


async def refusals(url: str, reason: str) -> float:
    async with httpx.AsyncClient() as c:
        text = (await c.get(f"{url}/metrics")).text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "modelhost_worker_client_refusals_total" and s.labels["reason"] == reason:
                return s.value
    raise AssertionError("no modelhost_worker_client_refusals_total in /metrics")


def assert_error(body: bytes, code: str, status: int) -> None:
    error = json.loads(body)
    assert error["code"] == code and error["status"] == status and error["message"], error


async def health(url: str) -> dict[str, object]:
    async with httpx.AsyncClient() as c:
        body: dict[str, object] = (await c.get(f"{url}/v1/health")).json()
        return body


def test_trickled_and_silent_headers_get_a_json_408_and_are_counted(tmp_path: Path) -> None:
    async def client(url: str, trickle: bool) -> bytes:
        conn = await Connection.open(url)
        sender = asyncio.create_task(conn.trickle(request("POST", "/v1/jobs", ECHO) if trickle else b"", 0.05))
        raw = await conn.read_all(timeout=5)
        sender.cancel()
        await conn.close()
        return raw

    async def main() -> None:
        server = await worker(tmp_path)
        try:
            raws = await asyncio.gather(*(client(server.url, trickle=i % 4 != 0) for i in range(20)))
            for raw in raws:
                (answer,) = parse_answers(raw)  # one answer, then the server closed the connection
                assert answer.status == 408 and answer.headers["connection"] == "close"
                assert_error(answer.body, "WORKER_INVALID_INPUT", 408)
            assert await refusals(server.url, "header_timeout") == 20
        finally:
            await stop(server)

    asyncio.run(main())


def test_a_trickled_or_stalled_body_gets_a_json_408_and_holds_nothing(tmp_path: Path) -> None:
    boundary = "b0undary"
    multipart = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="request"\r\n\r\n'
        '{"operation": "test.echo", "model": "paced", "input": {"f": {"$file": "f"}}}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="f"; filename="f.bin"\r\n\r\n'
    ).encode() + b"x" * 400

    async def client(url: str, kind: str) -> bytes:
        conn = await Connection.open(url)
        if kind == "multipart":
            # The request field arrives at once (a capacity slot is reserved), then the file part stalls.
            await conn.send(request("POST", "/v1/jobs", multipart, {
                "content-type": f"multipart/form-data; boundary={boundary}", "content-length": "100000"}))  # fmt: skip
            sender = None
        else:
            await conn.send(request("POST", "/v1/jobs", headers={"content-length": str(len(ECHO))}))
            # A byte every 50 ms is never idle for 0.5 s, but at 20 bytes/s it is far under the minimum rate.
            sender = asyncio.create_task(conn.trickle(ECHO, 0.05))
        raw = await conn.read_all(timeout=5)
        if sender is not None:
            sender.cancel()
        await conn.close()
        return raw

    async def main() -> None:
        server = await worker(tmp_path, capacity=5)
        try:
            kinds = ["json", "json", "json", "multipart", "multipart"]
            raws = await asyncio.gather(*(client(server.url, kind) for kind in kinds))
            for raw in raws:
                (answer,) = parse_answers(raw)
                assert answer.status == 408
                assert_error(answer.body, "WORKER_INVALID_INPUT", 408)
            assert await refusals(server.url, "body_timeout") == 5
            for _ in range(100):  # a refused upload gives its slot back as its handler unwinds
                if (await health(server.url))["queued"] == 0 and not list((tmp_path / "state").glob("[0-9a-f]*")):
                    break
                await asyncio.sleep(0.02)
            assert (await health(server.url))["queued"] == 0
            assert not list((tmp_path / "state").glob("[0-9a-f]*")), "a refused upload left a job folder"
            async with httpx.AsyncClient(base_url=server.url) as c:
                accepted = [await c.post("/v1/jobs", content=ECHO) for _ in range(5)]
            assert [r.status_code for r in accepted] == [202] * 5  # all five slots are free again
        finally:
            await stop(server)

    asyncio.run(main())


def test_connections_over_the_bound_get_a_json_503_and_a_freed_one_admits_again(tmp_path: Path) -> None:
    async def main() -> None:
        server = await worker(tmp_path, limits=ClientLimits(header_timeout=5, body_timeout=5, max_connections=3))
        try:
            held = [await Connection.open(server.url) for _ in range(3)]
            for conn in held:
                await conn.send(b"GET /v1/health HTTP/1.1\r\n")  # headers not finished: each holds its connection
            # No pause needed: the door accepts connections in the order they were made and counts each as it
            # accepts it, so these three are held before the next is counted.
            extra = await Connection.open(server.url)
            await extra.send(request("GET", "/v1/queue"))
            answer = await extra.read_answer(timeout=5)
            assert answer is not None and answer.status == 503, answer
            assert answer.headers["retry-after"] == "1" and answer.headers["connection"] == "close"
            assert_error(answer.body, "WORKER_BUSY", 503)
            assert await extra.closed_by_server(timeout=5)
            await extra.close()
            # giz's health probe still gets through (on a connection closed after its answer).
            probe = await Connection.open(server.url)
            await probe.send(request("GET", "/v1/health"))
            answer = await probe.read_answer(timeout=5)
            assert answer is not None and answer.status == 200 and answer.headers["connection"] == "close", answer
            await probe.close()
            for conn in held:
                await conn.close()
            # The door frees a connection when it sees the close, which comes after ours: wait for that state (a
            # request that is not a probe admitted again).
            # One sent before it is refused too, and counted.
            early = await refused_until_answered(server.url, "/v1/queue", STATE_WAIT_SECONDS)
            assert (await health(server.url))["status"] == "ok"
            assert await refusals(server.url, "connection_limit") == 1 + early
        finally:
            await stop(server)

    asyncio.run(main())


def test_bytes_past_content_length_are_a_malformed_next_request_answered_after_the_first(tmp_path: Path) -> None:
    async def main() -> None:
        server = await worker(tmp_path)
        try:
            conn = await Connection.open(server.url)
            await conn.send(request("POST", "/v1/jobs", ECHO, {"content-type": "application/json"}) + b'{"x": 1}')
            raw = await conn.read_all(timeout=5)
            await conn.close()
            first, second = parse_answers(raw)
            # The job Content-Length framed is accepted and the client is told so; the rest is not HTTP: 400, close.
            assert first.status == 202 and first.json()["status"] in ("queued", "processing", "completed")
            assert second.status == 400 and second.headers["connection"] == "close"
            assert_error(second.body, "WORKER_INVALID_INPUT", 400)
            assert await refusals(server.url, "malformed") == 1
        finally:
            await stop(server)

    asyncio.run(main())


def test_json_is_read_whatever_the_content_type_but_other_multipart_types_are_415(tmp_path: Path) -> None:
    async def main() -> None:
        server = await worker(tmp_path)
        try:
            async with httpx.AsyncClient(base_url=server.url) as c:
                for ctype in ("text/plain", "application/x-www-form-urlencoded", None):
                    headers = {"content-type": ctype} if ctype else {}
                    r = await c.post("/v1/jobs", content=ECHO, headers=headers)
                    assert r.status_code == 202, (ctype, r.text)
                r = await c.post("/v1/jobs", content=ECHO, headers={"content-type": "multipart/mixed; boundary=x"})
                assert r.status_code == 415 and r.json()["code"] == "WORKER_INVALID_INPUT"
        finally:
            await stop(server)

    asyncio.run(main())


class _Broken(Collector):
    def collect(self) -> Iterable[GaugeMetricFamily]:
        raise RuntimeError("a collector that fails")


def test_an_unexpected_exception_in_a_route_is_a_json_500_worker_failed(tmp_path: Path) -> None:
    async def main() -> None:
        server = await worker(tmp_path)
        try:
            server.metrics.registry.register(_Broken())
            async with httpx.AsyncClient(base_url=server.url) as c:
                r = await c.get("/metrics")
                assert r.status_code == 500 and r.headers["content-type"] == "application/json"
                assert r.json() == {"code": "WORKER_FAILED", "message": r.json()["message"], "status": 500}
                assert (await c.get("/v1/health")).status_code == 200  # the door carries on
        finally:
            await stop(server)

    asyncio.run(main())

"""The HTTP door against clients a library would never be: slow headers and bodies, too many connections, bytes past
Content-Length, odd Content-Types, a route that raises. Raw sockets on loopback, timeouts shortened so each test
ends by itself within seconds.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable

import httpx
from http_support import LoopThread, scripted_host, serving
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from modelhost._serving import PROBE_HEADROOM, ClientLimits
from modelhost.testing.rawhttp import Connection, parse_answers, refused_until_answered, request
from modelhost.testing.waiting import STATE_WAIT_SECONDS

#: Short enough for a test, long enough that a loaded 2-core machine answers a well-behaved request within it.
FAST = ClientLimits(header_timeout=0.5, body_timeout=0.5)
CHAT = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()


def refusals(url: str, reason: str) -> float:
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics").text):
        for s in family.samples:
            if s.name == "modelhost_http_client_refusals_total" and s.labels["reason"] == reason:
                return s.value
    raise AssertionError("no modelhost_http_client_refusals_total in /metrics")


def assert_openai_error(body: bytes, code: str) -> None:
    error = json.loads(body)["error"]
    assert error["code"] == code and error["message"], error


def test_trickled_and_silent_headers_get_a_json_408_and_are_counted(loop_thread: LoopThread) -> None:
    async def client(url: str, trickle: bool) -> bytes:
        conn = await Connection.open(url)
        sender = asyncio.create_task(conn.trickle(request("POST", "/v1/chat/completions", CHAT), 0.05))
        if not trickle:
            sender.cancel()  # a connection that sends nothing at all
        raw = await conn.read_all(timeout=5)
        sender.cancel()
        await conn.close()
        return raw

    async def main(url: str) -> list[bytes]:
        return await asyncio.gather(*(client(url, trickle=i % 4 != 0) for i in range(20)))

    with serving(loop_thread, scripted_host(), limits=FAST) as server:
        raws = asyncio.run(main(server.url))
        for raw in raws:
            (answer,) = parse_answers(raw)  # one answer, then the server closed the connection
            assert answer.status == 408 and answer.headers["connection"] == "close"
            assert_openai_error(answer.body, "request_timeout")
        assert refusals(server.url, "header_timeout") == 20


def test_a_trickled_or_stalled_body_gets_a_json_408_and_runs_nothing(loop_thread: LoopThread) -> None:
    head = request("POST", "/v1/chat/completions", headers={"content-length": str(len(CHAT))})

    async def client(url: str, stall: bool) -> bytes:
        conn = await Connection.open(url)
        await conn.send(head)
        # A byte every 50 ms is never idle for 0.5 s, but at 20 bytes/s it is far under the minimum rate.
        sender = asyncio.create_task(conn.send(CHAT[:5]) if stall else conn.trickle(CHAT, 0.05))
        raw = await conn.read_all(timeout=5)
        sender.cancel()
        await conn.close()
        return raw

    async def main(url: str) -> list[bytes]:
        return await asyncio.gather(*(client(url, stall=i == 0) for i in range(5)))

    host = scripted_host()
    with serving(loop_thread, host, limits=FAST) as server:
        for raw in asyncio.run(main(server.url)):
            (answer,) = parse_answers(raw)
            assert answer.status == 408
            assert_openai_error(answer.body, "request_timeout")
        assert refusals(server.url, "body_timeout") == 5
        assert host.metrics.registry.get_sample_value("modelhost_requests_total", {"model_name": host.name}) in (
            None,
            0.0,
        )
        # The door still serves a well-behaved client.
        ok = httpx.post(f"{server.url}/v1/chat/completions", content=CHAT, headers={"content-type": "application/json"})
        assert ok.status_code == 200


def test_connections_over_the_bound_get_a_json_503_and_a_freed_one_admits_again(loop_thread: LoopThread) -> None:
    limits = ClientLimits(header_timeout=600, body_timeout=5, max_connections=3)

    async def main(url: str) -> int:
        held = [await Connection.open(url) for _ in range(3)]
        for conn in held:
            await conn.send(b"GET /health HTTP/1.1\r\n")  # headers not finished: each holds its connection
        # No pause needed before the next one: the door accepts connections in the order they were made and counts
        # each as it accepts it, so these three are held before the next is counted.
        extra = await Connection.open(url)
        await extra.send(request("GET", "/v1/models"))
        answer = await extra.read_answer(timeout=5)
        assert answer is not None and answer.status == 503, answer
        assert answer.headers["retry-after"] == "1" and answer.headers["connection"] == "close"
        assert_openai_error(answer.body, "too_many_connections")
        assert await extra.closed_by_server(timeout=5)
        await extra.close()
        # A probe is still answered past the bound (an orchestrator must see the process), on a connection that
        # closes after it, so probes cannot hold the headroom either.
        for path in ("/health", "/ready", "/metrics"):
            probe = await Connection.open(url)
            await probe.send(request("GET", path))
            answer = await probe.read_answer(timeout=5)
            assert answer is not None and answer.status == 200, (path, answer)
            assert answer.headers["connection"] == "close" and await probe.closed_by_server(timeout=5)
            await probe.close()
        # The headroom is bounded: past it, probes are refused too.
        more = [await Connection.open(url) for _ in range(PROBE_HEADROOM)]
        for conn in more:
            await conn.send(b"GET /health HTTP/1.1\r\n")
        late = await Connection.open(url)
        await late.send(request("GET", "/health"))
        answer = await late.read_answer(timeout=5)
        assert answer is not None and answer.status == 503, answer
        await late.close()
        # The headroom's connections that never finish their headers leave it after PROBE_HEADER_SECONDS, not the
        # door's ten-minute header timeout: a burst of silent connections keeps the probes out only briefly.
        for conn in more:
            assert await conn.closed_by_server(timeout=STATE_WAIT_SECONDS)
        for conn in [*held, *more]:
            await conn.close()
        # The door frees a connection when it sees the close, which comes after ours: wait for that state. A
        # probe sent before it is refused too, and counted.
        return await refused_until_answered(url, "/health", STATE_WAIT_SECONDS)

    with serving(loop_thread, scripted_host(), limits=limits) as server:
        early = asyncio.run(main(server.url))
        assert refusals(server.url, "connection_limit") == 2 + early


def test_bytes_past_content_length_are_a_malformed_next_request_answered_after_the_first(
    loop_thread: LoopThread,
) -> None:
    async def main(url: str) -> list[bytes]:
        raws = []
        for extra in (b'{"more": true}', b"garbage\r\n\r\n"):
            conn = await Connection.open(url)
            await conn.send(request("POST", "/v1/chat/completions", CHAT, {"content-type": "application/json"}) + extra)
            raws.append(await conn.read_all(timeout=5))
            await conn.close()
        return raws

    with serving(loop_thread, scripted_host(), limits=FAST) as server:
        for raw in asyncio.run(main(server.url)):
            first, second = parse_answers(raw)
            # The request Content-Length framed is answered in full; the rest is not HTTP: a JSON 400, then close.
            assert first.status == 200 and first.json()["choices"][0]["message"]["content"]
            assert second.status == 400 and second.headers["connection"] == "close"
            assert_openai_error(second.body, "malformed_http")
        assert refusals(server.url, "malformed") == 2


def test_json_is_read_whatever_the_content_type_but_multipart_is_415(loop_thread: LoopThread) -> None:
    with serving(loop_thread, scripted_host(), limits=FAST) as server:
        for ctype in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = {"content-type": ctype} if ctype else {}
            r = httpx.post(f"{server.url}/v1/chat/completions", content=CHAT, headers=headers)
            assert r.status_code == 200, (ctype, r.text)
        r = httpx.post(f"{server.url}/api/chat", content=CHAT, headers={"content-type": "Multipart/Form-Data; b=x"})
        assert r.status_code == 415 and "multipart/form-data" in r.json()["error"]
        r = httpx.post(f"{server.url}/v1/completions", content=CHAT, headers={"content-type": "multipart/mixed"})
        assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"


class _Broken(Collector):
    def collect(self) -> Iterable[GaugeMetricFamily]:
        raise RuntimeError("a collector that fails")


def test_an_unexpected_exception_in_any_route_is_a_json_500(loop_thread: LoopThread) -> None:
    host = scripted_host()
    with serving(loop_thread, host, limits=FAST) as server:
        host.metrics.registry.register(_Broken())  # /metrics is not one of the generation routes
        r = httpx.get(f"{server.url}/metrics")
        assert r.status_code == 500 and r.headers["content-type"] == "application/json"
        assert r.json()["error"]["code"] == "internal"
        missing = httpx.get(f"{server.url}/v1/nothing-here")
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
        wrong = httpx.get(f"{server.url}/api/chat")
        assert wrong.status_code == 405 and wrong.json()["error"]


def test_a_huge_unknown_parameter_name_is_not_echoed_whole(loop_thread: LoopThread) -> None:
    name = "x" * 20_000
    with serving(loop_thread, scripted_host(), limits=FAST) as server:
        r = httpx.post(f"{server.url}/v1/chat/completions", json={**json.loads(CHAT), name: 1})
        assert r.status_code == 400 and r.json()["error"]["code"] == "unsupported_parameter"
        assert len(r.content) < 1000, len(r.content)
        r = httpx.post(f"{server.url}/api/generate", json={"prompt": "hi", "options": {name: 1}})
        assert r.status_code == 400 and len(r.content) < 1000, len(r.content)

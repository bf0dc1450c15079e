"""The HTTP door mounted in a server it does not run (modelhost.http.mounted), as each `serve --ray` replica mounts
it behind Ray Serve's proxy: its app under uvicorn on loopback over a loaded model set, its metrics read as the
replica reports them to the application's board.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import uvicorn
from http_support import LoopThread, scripted_model
from prometheus_client.parser import text_string_to_metric_families

from modelhost import _serving
from modelhost.host.models import Models, ModelSpec
from modelhost.http.mounted import MountedDoor
from modelhost.testing.waiting import STATE_WAIT_SECONDS


@pytest.fixture(scope="module")
def models(loop_thread: LoopThread) -> Iterator[Models]:
    """A loaded model set of one stand-in model, as a replica holds it before it mounts the door."""
    loaded = Models([ModelSpec("scripted", scripted_model)])
    loop_thread.run(loaded.start())
    yield loaded
    loop_thread.run(loaded.aclose(grace=1.0))


@dataclass
class Mounted:
    """A door's app served by a uvicorn of the test's own on an ephemeral loopback port."""

    url: str
    server: uvicorn.Server
    task: asyncio.Task[None]

    def stop(self, loop_thread: LoopThread) -> None:
        self.server.should_exit = True
        loop_thread.run(_ended(self.task))


async def _ended(task: asyncio.Task[None]) -> None:
    await task


def mounted(loop_thread: LoopThread, door: MountedDoor) -> Mounted:
    """Serve the door's app on loopback, as Ray Serve's proxy would reach it in a replica."""
    sock = _serving.bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(door.app(), log_config=None, lifespan="off"))
    task = loop_thread.run(_serving.serve(server, sock, name="mounted-door"))
    return Mounted(_serving.url_of(sock), server, task)


def samples(text: bytes, name: str) -> list[tuple[dict[str, str], float]]:
    """The labels and value of each sample called `name` (parsed by prometheus_client: a malformed text raises)."""
    families = text_string_to_metric_families(text.decode())
    return [(s.labels, s.value) for family in families for s in family.samples if s.name == name]


def test_the_mounted_door_answers_as_the_http_door_and_its_metrics_count_what_it_served(
    loop_thread: LoopThread, models: Models
) -> None:
    door = MountedDoor(models)
    before = door.metrics()  # readable before the app exists: a replica reports from its first health check
    assert samples(before, "modelhost_http_requests_total") == []
    served = mounted(loop_thread, door)
    url = served.url
    try:
        assert httpx.get(f"{url}/health", timeout=STATE_WAIT_SECONDS).status_code == 200
        answer = httpx.post(
            f"{url}/v1/completions",
            json={"model": "scripted", "prompt": "one two", "max_tokens": 3},
            timeout=STATE_WAIT_SECONDS,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["usage"]["completion_tokens"] == 3
        after = door.metrics()
    finally:
        served.stop(loop_thread)
    # The door's own series and the models' series, in one text, as the replica's /replicas/metrics merges it.
    requests = samples(after, "modelhost_http_requests_total")
    assert any(labels["status"] == "200" and value >= 1 for labels, value in requests), requests
    generated = samples(after, "modelhost_request_generation_tokens_sum")
    assert sum(value for labels, value in generated if labels.get("model_name") == "scripted") >= 3, generated


def test_access_log_false_writes_no_record_and_true_writes_one_per_request(
    loop_thread: LoopThread, models: Models, caplog: pytest.LogCaptureFixture
) -> None:
    # `serve --ray --log-format none` gives each replica access_log=False.
    for access_log, expected in ((False, 0), (True, 1)):
        caplog.clear()
        served = mounted(loop_thread, MountedDoor(models, access_log=access_log))
        url = served.url
        # The record is written once the answer is over, on the server's loop, which can be after the client has
        # read the answer: the level stays INFO until the server has stopped (its request finished), or a late
        # record is dropped by the logger's restored level and the test fails one run in three.
        with caplog.at_level(logging.INFO, logger="modelhost.access"):
            try:
                assert httpx.get(f"{url}/health", timeout=STATE_WAIT_SECONDS).status_code == 200
            finally:
                served.stop(loop_thread)
        lines = [r for r in caplog.records if r.name == "modelhost.access" and "/health" in r.getMessage()]
        assert len(lines) == expected, (access_log, [r.getMessage() for r in lines])


def test_an_api_key_guards_the_model_routes_of_the_mounted_door(loop_thread: LoopThread, models: Models) -> None:
    served = mounted(loop_thread, MountedDoor(models, api_key="sesame"))
    url = served.url
    try:
        refused = httpx.get(f"{url}/v1/models", timeout=STATE_WAIT_SECONDS)
        allowed = httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer sesame"}, timeout=STATE_WAIT_SECONDS)
    finally:
        served.stop(loop_thread)
    assert refused.status_code == 401
    assert allowed.status_code == 200 and [m["id"] for m in allowed.json()["data"]] == ["scripted"]

"""The page's own API (modelhost.http.ui) through the real HTTP door on loopback: /ui/api/state and its event
stream say what the host is doing (running, queued, finished by reason, tokens over the last minutes; a browser's
Stop, counted as cancelled, is tested in tests/ui), the jobs of
a worker's board can be listed and cancelled, the key guards the API but not the page, and --no-ui removes it all."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import LoopThread, scripted_host, scripted_model, serving

from modelhost.http import HttpServer
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

KEY = "ui-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def gate() -> threading.Semaphore:
    """Each token of the scripted model waits for a release: a test holds a request running as long as it likes."""
    return threading.Semaphore(0)


@pytest.fixture(scope="module")
def keyed(loop_thread: LoopThread, gate: threading.Semaphore) -> Iterator[HttpServer]:
    """The door with an API key over a host of the gated scripted model (one slot, so a second request queues)."""
    with serving(loop_thread, scripted_host(scripted_model(gate), name="scripted"), api_key=KEY) as server:
        yield server


def state(server: HttpServer) -> dict[str, Any]:
    response = httpx.get(f"{server.url}/ui/api/state", headers=AUTH, timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def model_state(server: HttpServer, name: str = "scripted") -> dict[str, Any]:
    return next(m for m in state(server)["models"] if m["name"] == name)


def test_the_page_is_open_and_its_api_needs_the_key(keyed: HttpServer) -> None:
    page = httpx.get(f"{keyed.url}/", timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/ui/static/app.js">' in page.text
    script = httpx.get(f"{keyed.url}/ui/static/app.js", timeout=10)
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    for path in ("/ui/api/state", "/ui/api/events", "/ui/api/documents/x"):
        refused = httpx.get(f"{keyed.url}{path}", timeout=10)
        assert refused.status_code == 401, (path, refused.text)
        wrong = httpx.get(f"{keyed.url}{path}", headers={"Authorization": "Bearer nope"}, timeout=10)
        assert wrong.status_code == 401, path
    assert state(keyed)["models"][0]["state"] == "ready"


def stream_chat(server: HttpServer, opened: threading.Event) -> None:
    """A streamed chat completion, read to its end."""
    body = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 3}
    with (
        httpx.Client(timeout=STATE_WAIT_SECONDS) as client,
        client.stream("POST", f"{server.url}/v1/chat/completions", json=body, headers=AUTH) as response,
    ):
        assert response.status_code == 200
        opened.set()
        for _ in response.iter_lines():
            pass


def test_state_shows_a_request_running_one_queued_and_both_finished(
    keyed: HttpServer, gate: threading.Semaphore
) -> None:
    before = model_state(keyed)["finished"]
    assert model_state(keyed)["slots"] == 1
    opened = [threading.Event(), threading.Event()]
    threads = [threading.Thread(target=stream_chat, args=(keyed, event)) for event in opened]
    for thread, event in zip(threads, opened, strict=True):
        thread.start()
        event.wait(STATE_WAIT_SECONDS)
    wait_until(
        lambda: (model_state(keyed)["running"], model_state(keyed)["waiting"]) == (1, 1), what="1 running, 1 queued"
    )
    for _ in range(2 * 4):  # three tokens and the end of each answer
        gate.release()
    for thread in threads:
        thread.join(STATE_WAIT_SECONDS)
    now = model_state(keyed)
    assert (now["running"], now["waiting"]) == (0, 0)
    ended = sum(now["finished"].values()) - sum(before.values())
    assert ended == 2 and now["finished"]["cancelled"] == before["cancelled"]


def test_the_event_stream_pushes_the_state_every_second(keyed: HttpServer) -> None:
    events: list[dict[str, Any]] = []
    with (
        httpx.Client(timeout=STATE_WAIT_SECONDS) as client,
        client.stream("GET", f"{keyed.url}/ui/api/events", headers=AUTH) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        kind = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                assert kind == "state"
                events.append(json.loads(line.removeprefix("data: ")))
                if len(events) == 2:
                    break
    assert [m["name"] for m in events[0]["models"]] == ["scripted"]
    assert events[1]["time"] > events[0]["time"], "a second snapshot, taken later"


def test_throughput_history_adds_up_to_the_tokens_generated(
    loop_thread: LoopThread, tiny_gguf_door: HttpServer
) -> None:
    ui = tiny_gguf_door.ui
    assert ui is not None

    async def sample() -> None:
        ui.state.sample()

    loop_thread.run(sample())
    body = {"model": "tiny", "prompt": "one two", "max_tokens": 12, "temperature": 0}
    answer = httpx.post(f"{tiny_gguf_door.url}/v1/completions", json=body, timeout=STATE_WAIT_SECONDS).json()
    generated = answer["usage"]["completion_tokens"]
    time.sleep(0.05)  # a measurable interval, however fast the machine
    loop_thread.run(sample())
    snapshot = httpx.get(f"{tiny_gguf_door.url}/ui/api/state", timeout=10).json()
    history = snapshot["models"][0]["history"]
    # Every interval since the server started (the sampler's, this test's, the live one to now): only this request
    # generated, so its tokens are all there, once.
    assert sum(p["tokens_per_second"] * p["seconds"] for p in history) == pytest.approx(generated, rel=0.01)
    assert [p["ttft_seconds"] for p in history if p["ttft_seconds"] is not None][-1] > 0


def test_a_worker_job_is_listed_and_cancelled_from_the_page(loop_thread: LoopThread, tmp_path: Path) -> None:
    from modelhost.worker import WorkerServer

    with serving(loop_thread, scripted_host(name="jobs")) as server:
        worker = WorkerServer(server.models, state_dir=tmp_path / "jobs", capacity=4, execute=False)
        loop_thread.run(worker.start())
        try:
            assert server.ui is not None
            server.ui.add_jobs("worker", worker.board)
            job = {"operation": "text.generate", "model": "jobs", "input": {"prompt": "hi"}}
            submitted = httpx.post(f"{worker.url}/v1/jobs", json=job, timeout=10)
            assert submitted.status_code == 202, submitted.text
            job_id = submitted.json()["id"]
            listed = httpx.get(f"{server.url}/ui/api/state", timeout=10).json()["jobs"]
            assert [(j["source"], j["id"], j["status"]) for j in listed] == [("worker", job_id, "queued")]
            cancelled = httpx.delete(f"{server.url}/ui/api/jobs/worker/{job_id}", timeout=10)
            assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
            assert httpx.get(f"{worker.url}/v1/jobs/{job_id}", timeout=10).json()["status"] == "cancelled"
            unknown = httpx.delete(f"{server.url}/ui/api/jobs/nowhere/{job_id}", timeout=10)
            assert unknown.status_code == 404
            # Without the docling door the Documents view is off, and says so.
            assert httpx.get(f"{server.url}/ui/api/state", timeout=10).json()["documents"] is False
            assert httpx.get(f"{server.url}/ui/api/documents/{job_id}", timeout=10).status_code == 404
        finally:
            loop_thread.run(worker.aclose())


def test_no_ui_serves_no_page(loop_thread: LoopThread) -> None:
    with serving(loop_thread, scripted_host(name="plain"), ui=False) as server:
        assert server.ui is None
        for path in ("/", "/ui/static/app.js", "/ui/api/state"):
            assert httpx.get(f"{server.url}{path}", timeout=10).status_code == 404, path
        assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200


def test_the_page_and_its_state_answer_while_the_model_loads(loop_thread: LoopThread) -> None:
    loaded = threading.Event()

    def slow_load() -> Any:
        loaded.wait(STATE_WAIT_SECONDS)  # the model loads until the test lets it
        return scripted_model()

    with serving(loop_thread, scripted_host(loader=slow_load, name="slow"), wait_ready=False) as server:
        try:
            assert httpx.get(f"{server.url}/", timeout=10).status_code == 200
            assert model_state_open(server)["state"] in ("new", "loading")  # "new": its load not begun yet
        finally:
            loaded.set()
        wait_until(lambda: model_state_open(server)["state"] == "ready", what="loaded")


def model_state_open(server: HttpServer) -> dict[str, Any]:
    """The first model's state from a door without a key."""
    body: dict[str, Any] = httpx.get(f"{server.url}/ui/api/state", timeout=10).json()["models"][0]
    return body

"""Several models behind one HTTP door (modelhost.host.models): routing by `model`, unknown names, listings, metrics
by model, lazy loading, keep-alive unloading and the memory budget. Stand-in models, real uvicorn on loopback."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from http_support import LoopThread
from prometheus_client.parser import text_string_to_metric_families

from modelhost.host.models import Models, ModelSpec, parse_size
from modelhost.http import HttpServer
from modelhost.testing.standins import ScriptedModel
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

MB = 2**20


def spec(name: str, words: str, **kw: Any) -> ModelSpec:
    loads: list[int] = kw.pop("loads", [])

    def loader() -> ScriptedModel:
        loads.append(1)
        return ScriptedModel([w + " " for w in words.split()], name=name)

    return ModelSpec(name, loader, **kw)


@contextmanager
def door(lt: LoopThread, models: Models) -> Iterator[str]:
    server = HttpServer(models, port=0)
    lt.run(server.start())
    lt.run(models.start())
    try:
        yield server.url
    finally:
        lt.run(server.aclose())
        lt.run(models.aclose(grace=1))


def chat(url: str, model: str | None, path: str = "/v1/chat/completions") -> httpx.Response:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
    if model is not None:
        body["model"] = model
    return httpx.post(url + path, json=body, timeout=STATE_WAIT_SECONDS)


def samples(url: str, name: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics").text
    return {
        s.labels["model_name"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def test_two_models_answer_by_name_on_openai_and_ollama(loop_thread: LoopThread) -> None:
    models = Models([spec("alpha", "a1 a2"), spec("beta", "b1 b2 b3", aliases=("b",))])
    with door(loop_thread, models) as url:
        openai_a = chat(url, "alpha").json()
        assert openai_a["model"] == "alpha" and openai_a["choices"][0]["message"]["content"] == "a1 a2 "
        assert chat(url, "beta").json()["choices"][0]["message"]["content"] == "b1 b2 b3 "
        assert chat(url, "b").json()["model"] == "beta", "an alias (the catalogue name given) reaches its model"
        assert chat(url, None).json()["model"] == "alpha", "no model: the first one"
        ollama = chat(url, "beta", "/api/chat").json()
        assert ollama["model"] == "beta" and ollama["message"]["content"] == "b1 b2 b3 "

        unknown = chat(url, "gamma")
        assert unknown.status_code == 404
        error = unknown.json()["error"]
        assert error["code"] == "model_not_found" and error["type"] == "not_found_error" and error["param"] == "model"
        assert "alpha, beta" in error["message"]
        unknown_ollama = chat(url, "gamma", "/api/chat")
        assert unknown_ollama.status_code == 404 and "gamma" in unknown_ollama.json()["error"]

        listed = httpx.get(f"{url}/v1/models").json()
        assert [m["id"] for m in listed["data"]] == ["alpha", "beta"]
        tags = httpx.get(f"{url}/api/tags").json()
        assert [(m["name"], m["details"]["family"]) for m in tags["models"]] == [("alpha", "alpha"), ("beta", "beta")]
        ready = httpx.get(f"{url}/ready").json()
        assert ready == {"status": "ready", "model": "alpha", "models": {"alpha": "ready", "beta": "ready"}}

        finished = samples(url, "modelhost_generation_tokens_total")
        assert finished == {"alpha": 2 + 2, "beta": 3 + 3 + 3}, "metrics carry the model label"


def test_lazy_model_loads_at_its_first_request_and_keep_alive_unloads_it(loop_thread: LoopThread) -> None:
    loads: list[int] = []
    models = Models([spec("alpha", "a1", pinned=True), spec("beta", "b1", loads=loads)], lazy=True, keep_alive=0.5)
    with door(loop_thread, models) as url:
        assert httpx.get(f"{url}/ready").json()["models"] == {"alpha": "ready", "beta": "unloaded"}
        assert httpx.get(f"{url}/ready").status_code == 200, "an unloaded lazy model does not make the host unready"
        first = chat(url, "beta")
        assert first.status_code == 503 and first.json()["error"]["code"] == "model_loading"
        assert first.headers["retry-after"] == "1"
        wait_until(lambda: chat(url, "beta").status_code == 200)
        loaded = len(loads)  # 1, unless a busy machine left a gap past keep-alive between the polls
        # Idle past keep-alive: unloaded (the pinned one stays), and the next request loads it again.
        wait_until(lambda: httpx.get(f"{url}/ready").json()["models"]["beta"] == "unloaded")
        assert models.get("alpha").ready
        state = {
            s.labels["state"]: s.value
            for family in text_string_to_metric_families(httpx.get(f"{url}/metrics").text)
            for s in family.samples
            if s.name == "modelhost_model_state" and s.labels["model_name"] == "beta"
        }
        assert state["unloaded"] == 1 and state["ready"] == 0
        wait_until(lambda: chat(url, "beta").status_code == 200)
        assert len(loads) > loaded, "loaded again"


def test_memory_budget_unloads_the_least_recently_used_idle_model(loop_thread: LoopThread) -> None:
    models = Models(
        [spec("alpha", "a1", size=60 * MB), spec("beta", "b1", size=60 * MB), spec("gamma", "c1", size=30 * MB)],
        max_memory=parse_size("100M"),
    )
    with door(loop_thread, models) as url:
        # At start alpha fits, beta does not (alpha is idle, but a start loads in order without evicting): it
        # stays unloaded, gamma fits beside alpha.
        assert models.states() == {"alpha": "ready", "beta": "unloaded", "gamma": "ready"}
        assert chat(url, "gamma").status_code == 200  # gamma used last: alpha is the least recently used
        wait_until(lambda: chat(url, "beta").status_code == 200)
        assert models.states() == {"alpha": "unloaded", "beta": "ready", "gamma": "ready"}
        assert models.resident == 90 * MB
        assert samples(url, "modelhost_model_resident_bytes") == {"alpha": 0, "beta": 60 * MB, "gamma": 30 * MB}
        assert samples(url, "modelhost_model_unloads_total") == {"alpha": 1, "beta": 0, "gamma": 0}
        assert samples(url, "modelhost_model_loads_total") == {"alpha": 1, "beta": 1, "gamma": 1}


def test_models_load_side_by_side_at_start_and_each_is_announced_when_it_is_ready(loop_thread: LoopThread) -> None:
    """A serve of several models loads them at once: the second is ready (its socket bound, in serve) while the
    first still loads, and a first model whose load fails ends the start with its own error."""
    release = threading.Event()
    announced: list[str] = []

    def slow() -> ScriptedModel:
        assert release.wait(STATE_WAIT_SECONDS), "the test never let the slow load finish"
        return ScriptedModel(["s "], name="slow")

    async def on_ready(model: Any) -> None:
        announced.append(model.name)

    models = Models([ModelSpec("slow", slow), spec("quick", "q1")])
    try:
        starting = loop_thread.spawn(models.start(on_ready=on_ready))
        wait_until(lambda: announced == ["quick"])  # one after the other, quick waited for slow's whole load
        assert models.states() == {"slow": "loading", "quick": "ready"} and not starting.done()
        release.set()
        starting.result(STATE_WAIT_SECONDS)
        assert announced == ["quick", "slow"] and models.states() == {"slow": "ready", "quick": "ready"}
    finally:
        release.set()
        loop_thread.run(models.aclose(grace=1))

    def broken() -> ScriptedModel:
        raise RuntimeError("no weights here")

    models = Models([ModelSpec("broken", broken), spec("quick", "q1")])
    try:
        with pytest.raises(Exception, match="no weights here"):
            loop_thread.run(models.start())
    finally:
        loop_thread.run(models.aclose(grace=1))


def test_a_model_larger_than_the_budget_is_refused_when_the_set_is_built() -> None:
    with pytest.raises(ValueError, match=r"'big' needs about 200 MB, more than the whole memory budget \(100 MB\)"):
        Models([spec("big", "x", size=200 * MB)], max_memory=100 * MB)
    assert parse_size("1.5G") == 1536 * MB and parse_size("512MiB") == 512 * MB and parse_size("1000") == 1000
    with pytest.raises(ValueError, match="lots"):
        parse_size("lots")


def test_a_model_that_cannot_fit_beside_a_busy_one_gets_its_room_when_the_busy_ones_requests_end(
    loop_thread: LoopThread,
) -> None:
    """Fair eviction: beta's request claims the room alpha holds; alpha finishes the request it runs, takes no new
    one meanwhile, and unloads; the set then loads beta by itself. Each refusal says how long to wait."""
    gate = threading.Semaphore(0)

    def held() -> ScriptedModel:
        return ScriptedModel(["x "] * 3, name="alpha", gate=gate)

    models = Models([ModelSpec("alpha", held, size=80 * MB), spec("beta", "b1", size=80 * MB)], max_memory=100 * MB)
    with door(loop_thread, models) as url:
        running = loop_thread.spawn(asyncio.to_thread(chat, url, "alpha"))
        wait_until(lambda: models.get("alpha").busy)
        refused = chat(url, "beta")
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1", "1 request, its time unknown: 1 s"
        message = refused.json()["error"]["message"]
        assert "'beta' needs about 80 MB" in message and "'alpha' finish their 1 requests in flight" in message
        turned = chat(url, "alpha")
        assert turned.status_code == 503 and turned.json()["error"]["code"] == "model_loading"
        assert "'alpha' is giving its memory to 'beta'" in turned.json()["error"]["message"]
        assert models.get("alpha").in_flight == 1, "the refused request was never queued"
        for _ in range(4):
            gate.release()
        assert running.result(STATE_WAIT_SECONDS).status_code == 200, "the request alpha held is answered"
        wait_until(lambda: models.get("beta").ready)  # loaded for its claim: no request of beta's needed
        assert models.states() == {"alpha": "unloaded", "beta": "ready"}


def test_a_pinned_model_listed_after_others_loads_first_and_the_budget_leaves_the_others_for_later(
    loop_thread: LoopThread,
) -> None:
    """Loads at start run side by side, and a loading model cannot be unloaded to make room: so the pinned models
    load first, and the others take what room is left (alpha would otherwise start loading, then leave the pinned
    beta no room and fail the start)."""
    models = Models(
        [spec("alpha", "a1", size=60 * MB), spec("beta", "b1", size=60 * MB, pinned=True)],
        max_memory=parse_size("100M"),
    )
    with door(loop_thread, models) as url:
        assert models.states() == {"alpha": "unloaded", "beta": "ready"}
        assert chat(url, "beta").status_code == 200

"""Ollama's per-request keep_alive and GET /api/ps: what Ollama clients send to load, keep and unload models.

Stand-in models behind a real HTTP door on loopback (the lifecycle is the set's, not a backend's); the duration
parser is pinned on its own first.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import LoopThread, serving
from prometheus_client.parser import text_string_to_metric_families
from test_models import chat, door, spec, wait_until

import modelhost.inference
from modelhost.host import Host
from modelhost.host.models import Models, ModelSpec
from modelhost.http.errors import ApiError
from modelhost.http.ollama.models import parse_keep_alive
from modelhost.inference.capabilities import ChatFeatures
from modelhost.testing import tinymodels
from modelhost.testing.standins import ScriptedModel
from modelhost.testing.waiting import STATE_WAIT_SECONDS


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("1.5s", 1.5),
        (" 10s ", 10.0),
        (300, 300.0),
        (2.5, 2.5),
        ("300", 300.0),
        ("0", 0.0),
        (0, 0.0),
        (-1, math.inf),
        ("-1m", math.inf),
        ("-1", math.inf),
        (1e308, math.inf),
        ("99999999h", math.inf),
        (None, None),
    ],
)
def test_keep_alive_reads_go_durations_and_seconds(value: Any, seconds: float | None) -> None:
    assert parse_keep_alive(value) == seconds


@pytest.mark.parametrize("value", ["5 minutes", "", "m", "5x", "1h 30m", "h1", True, [], {"s": 1}, "1h" * 40])
def test_a_bad_keep_alive_is_refused_by_name(value: Any) -> None:
    with pytest.raises(ApiError) as info:
        parse_keep_alive(value)
    assert info.value.param == "keep_alive" and info.value.status == 400


def ollama_chat(url: str, model: str, **extra: Any) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": False, **extra}
    return httpx.post(f"{url}/api/chat", json=body, timeout=STATE_WAIT_SECONDS)


def sample(url: str, name: str, **labels: str) -> float:
    """One sample of /metrics (0 when absent)."""
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics").text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return 0.0


def ps(url: str) -> dict[str, Any]:
    return {m["name"]: m for m in httpx.get(f"{url}/api/ps").json()["models"]}


def test_keep_alive_zero_unloads_after_the_request_and_ps_shows_what_is_loaded(loop_thread: LoopThread) -> None:
    models = Models([spec("alpha", "a1 a2"), spec("beta", "b1")])  # the server keeps models loaded for good
    with door(loop_thread, models) as url:
        listed = ps(url)
        assert set(listed) == {"alpha", "beta"}
        assert datetime.fromisoformat(listed["alpha"]["expires_at"]).year > 2100, "kept for good: far in the future"
        assert listed["alpha"]["size_vram"] == 0 and listed["alpha"]["details"]["family"] == "alpha"

        answer = ollama_chat(url, "alpha", keep_alive=0)
        assert answer.status_code == 200 and answer.json()["message"]["content"] == "a1 a2 "
        wait_until(lambda: models.get("alpha").state == "unloaded")
        assert set(ps(url)) == {"beta"}
        # The next request loads it again and waits for the load, as Ollama's do (its clients never retry a 503),
        # and a request without keep_alive goes back to the server's policy: it stays.
        assert ollama_chat(url, "alpha").status_code == 200
        time.sleep(1.5)  # more than a sweep period
        assert models.get("alpha").state == "ready"


def test_a_duration_keeps_the_model_that_long_after_use_and_minus_one_for_good(loop_thread: LoopThread) -> None:
    models = Models([spec("alpha", "a1"), spec("beta", "b1")], keep_alive=0.3)
    with door(loop_thread, models) as url:
        assert ollama_chat(url, "alpha", keep_alive=-1).status_code == 200
        # 3 s, not 1: at load 30 more than a second passed between the answer and /api/ps, and the model had gone.
        asked = time.time()
        assert ollama_chat(url, "beta", keep_alive="3s").status_code == 200
        expires = datetime.fromisoformat(ps(url)["beta"]["expires_at"]).timestamp()
        assert asked + 3.0 - 0.01 <= expires <= time.time() + 3.0  # 10 ms: the server reads its own clock
        # Kept for its own 3 s, not the server's 0.3 s: it is never seen unloaded before its expiry. A lower bound,
        # which a loaded machine can only delay, not break (a sleep then "still ready" failed at load 10).
        wait_until(lambda: models.get("beta").state == "unloaded", timeout=STATE_WAIT_SECONDS)
        assert time.time() >= expires - 0.05, "unloaded before its keep_alive ran out"
        assert models.get("alpha").state == "ready", "keep_alive -1 keeps it past the server's keep-alive"


def test_generate_without_a_prompt_and_keep_alive_zero_unloads_now(loop_thread: LoopThread) -> None:
    models = Models([spec("alpha", "a1"), spec("beta", "b1")])
    with door(loop_thread, models) as url:
        answer = httpx.post(f"{url}/api/generate", json={"model": "beta", "keep_alive": 0}).json()
        assert answer["done"] and answer["done_reason"] == "unload" and answer["model"] == "beta"
        wait_until(lambda: models.get("beta").state == "unloaded")
        loaded = httpx.post(
            f"{url}/api/generate", json={"model": "beta"}, timeout=STATE_WAIT_SECONDS
        )  # answered once loaded
        assert loaded.status_code == 200 and loaded.json()["done_reason"] == "load"
        assert set(ps(url)) == {"alpha", "beta"}


def test_a_bad_keep_alive_is_a_400_before_any_work(loop_thread: LoopThread) -> None:
    loads: list[int] = []
    models = Models([spec("alpha", "a1", loads=loads)], lazy=True)
    with door(loop_thread, models) as url:
        answer = ollama_chat(url, "alpha", keep_alive="5 minutes")
        assert answer.status_code == 400 and "keep_alive" in answer.json()["error"]
        assert loads == [] and models.get("alpha").state == "unloaded"


def test_a_pinned_model_stays_loaded_whatever_a_request_says(loop_thread: LoopThread) -> None:
    models = Models([spec("alpha", "a1", pinned=True)], keep_alive=0.1)
    with door(loop_thread, models) as url:
        assert ollama_chat(url, "alpha", keep_alive=0).status_code == 200
        time.sleep(1.2)
        assert models.get("alpha").state == "ready"
        refused = httpx.post(f"{url}/api/generate", json={"model": "alpha", "keep_alive": 0})
        assert refused.status_code == 400 and "pinned" in refused.json()["error"]


def test_show_describes_a_model_and_its_capabilities_without_loading_it(loop_thread: LoopThread) -> None:
    loads: list[int] = []
    models = Models([spec("alpha", "a1"), spec("beta", "b1", loads=loads)], lazy=True)
    with door(loop_thread, models) as url:
        wait_until(lambda: ollama_chat(url, "alpha").status_code == 200)
        shown = httpx.post(f"{url}/api/show", json={"model": "alpha"}).json()
        assert shown["capabilities"] == ["completion"] and shown["details"]["family"] == "alpha"
        assert shown["model_info"]["general.architecture"] == "alpha"
        cold = httpx.post(f"{url}/api/show", json={"name": "beta"})  # the older field name
        assert cold.status_code == 200 and cold.json()["model_info"] == {} and loads == []
        assert httpx.post(f"{url}/api/show", json={"model": "gamma"}).status_code == 404
        assert httpx.post(f"{url}/api/show", json={}).status_code == 400


@pytest.mark.slow
def test_show_on_a_real_model_lists_embedding_and_its_sizes(loop_thread: LoopThread, tiny_llama_gguf: Path) -> None:
    pytest.importorskip("llama_cpp")
    host = Host(lambda: modelhost.inference.load_model(str(tiny_llama_gguf), backend="llama_cpp"), name="tiny")
    with serving(loop_thread, host) as server:
        shown = httpx.post(f"{server.url}/api/show", json={"model": "tiny"}).json()
        assert shown["capabilities"] == ["completion", "embedding"]
        assert shown["model_info"]["llama.embedding_length"] == 64 and shown["model_info"]["llama.block_count"] == 2


class Featured(ScriptedModel):
    """A stand-in that says what its chat path can do (ChatFeatures)."""

    def __init__(self, pieces: list[str], *, tools: bool, thinks: bool, name: str) -> None:
        super().__init__(pieces, name=name)
        self._tools, self._thinks = tools, thinks

    def renders_tools(self) -> bool:
        return self._tools

    def thinks(self) -> bool:
        return self._thinks


def test_show_lists_tools_and_thinking_as_the_model_says_and_think_is_refused_where_it_cannot(
    loop_thread: LoopThread,
) -> None:
    built: dict[str, ScriptedModel] = {}

    def featured(name: str, **facts: bool) -> ModelSpec:
        def load() -> ScriptedModel:
            built[name] = Featured(["x "], name=name, **facts)
            return built[name]

        return ModelSpec(name, load)

    models = Models([featured("plain", tools=False, thinks=False), featured("tooled", tools=True, thinks=False),
                     featured("thinker", tools=True, thinks=True), spec("silent", "s1")])  # fmt: skip
    with door(loop_thread, models) as url:
        assert isinstance(built["plain"], ChatFeatures)
        capabilities = {name: httpx.post(f"{url}/api/show", json={"model": name}).json()["capabilities"]
                        for name in ("plain", "tooled", "thinker", "silent")}  # fmt: skip
        assert capabilities == {"plain": ["completion"], "tooled": ["completion", "tools"],
                                "thinker": ["completion", "tools", "thinking"], "silent": ["completion"]}  # fmt: skip
        # `think: true` (or a level) on a model without a thought channel: Ollama's 400 naming `think`, before any
        # work (the model is never asked), through both routes and whether streamed or not.
        for stream in (False, True):
            for value in (True, "high"):
                refused = ollama_chat(url, "tooled", think=value, stream=stream)
                assert refused.status_code == 400 and "think" in refused.json()["error"], refused.text
                body = {"model": "plain", "prompt": "hi", "think": value, "stream": stream}
                refused = httpx.post(f"{url}/api/generate", json=body, timeout=STATE_WAIT_SECONDS)
                assert refused.status_code == 400 and "think" in refused.json()["error"], refused.text
        assert built["tooled"].prompts == [] and built["plain"].prompts == []
        # `think: false` is always fine, and a thinking model takes `think: true`.
        assert ollama_chat(url, "plain", think=False).json()["message"]["content"] == "x "
        assert ollama_chat(url, "thinker", think=True).status_code == 200
        # A model that does not say what it can do is not refused: the door refuses only what a model says it cannot.
        assert ollama_chat(url, "silent", think=True).status_code == 200


@pytest.mark.slow
def test_show_on_real_models_lists_tools_and_thinking_from_their_templates_and_vocabularies(
    loop_thread: LoopThread, tiny_llama_gguf: Path, tiny_thinking_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("llama_cpp")
    tools_gguf = tinymodels.write_llama_gguf(tinymodels.build_tiny_tools_llama(tmp_path / "tools"), tmp_path / "t.gguf")
    think_gguf = tinymodels.write_llama_gguf(tiny_thinking_dir, tmp_path / "think.gguf")

    def real(name: str, path: Path) -> ModelSpec:
        return ModelSpec(name, lambda: modelhost.inference.load_model(str(path), backend="llama_cpp", threads=1))

    models = Models([real("tiny", tiny_llama_gguf), real("tools", tools_gguf), real("think", think_gguf)])
    with door(loop_thread, models) as url:
        capabilities = {name: httpx.post(f"{url}/api/show", json={"model": name}).json()["capabilities"]
                        for name in ("tiny", "tools", "think")}  # fmt: skip
        assert capabilities == {"tiny": ["completion", "embedding"], "tools": ["completion", "tools", "embedding"],
                                "think": ["completion", "thinking", "embedding"]}  # fmt: skip
        refused = ollama_chat(url, "tools", think=True)
        assert refused.status_code == 400 and "think" in refused.json()["error"]
        assert ollama_chat(url, "think", think=True, options={"num_predict": 2}).status_code == 200


def test_an_ollama_request_waits_for_its_models_load_until_it_fails_or_the_client_hangs_up(
    loop_thread: LoopThread,
) -> None:
    gate = threading.Event()

    def gated() -> ScriptedModel:
        gate.wait(STATE_WAIT_SECONDS)
        return ScriptedModel(["b1 "], name="beta")

    def broken() -> ScriptedModel:
        raise RuntimeError("no such weights")

    models = Models([spec("alpha", "a1"), ModelSpec("beta", gated), ModelSpec("gamma", broken)], lazy=True)
    with door(loop_thread, models) as url:
        # Ollama's clients never retry a 503, so its door waits for the load; the OpenAI door still answers 503.
        # "new" until the load task first runs: the 503 can come before it does.
        assert chat(url, "beta").status_code == 503 and models.get("beta").state in ("new", "loading")
        with pytest.raises(httpx.ReadTimeout):  # the client gives up while the model loads: the wait ends
            httpx.post(f"{url}/api/chat", json={"model": "beta", "messages": [{"role": "user", "content": "hi"}],
                                                "stream": False}, timeout=0.3)  # fmt: skip
        wait_until(lambda: sample(url, "modelhost_http_client_disconnects_total", route="/api/chat") == 1)
        # Sent while the model loads (or just after: either way it is answered, never a 503).
        waiting = loop_thread.spawn(asyncio.to_thread(ollama_chat, url, "beta"))
        gate.set()
        answer = waiting.result(STATE_WAIT_SECONDS)
        assert answer.status_code == 200 and answer.json()["message"]["content"] == "b1 "
        # A load that fails ends the wait with the door's usual 503 (the model cannot serve), not a hang.
        failed = ollama_chat(url, "gamma")
        assert failed.status_code == 503 and "gamma" in failed.json()["error"]


def test_a_model_kept_alive_zero_seconds_still_answers_every_ollama_request(loop_thread: LoopThread) -> None:
    """With `--keep-alive 0` the sweep unloads an idle model at once: each Ollama request loads the model, and the
    request counts as use from before its wait for the load until its submit, so the model cannot be unloaded in
    between. The sweep runs at every turn of the event loop (sweep_interval=0), so it finds any turn at which the
    model looks idle: the wait for the load ends a few turns before the request runs again, the window in which a
    sweep once unloaded the model (a 503). Every request is answered; none gets 503."""
    loads: list[int] = []
    models = Models([spec("alpha", "a1 a2", loads=loads)], keep_alive=0.0, lazy=True, sweep_interval=0)
    with door(loop_thread, models) as url:
        for _ in range(5):
            answer = ollama_chat(url, "alpha")
            assert answer.status_code == 200 and answer.json()["message"]["content"] == "a1 a2 ", answer.text
            wait_until(lambda: models.get("alpha").state == "unloaded")
        assert len(loads) == 5

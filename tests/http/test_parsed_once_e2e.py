"""A request is parsed and checked once, whatever its `n` (issue 37 item 1), through the real doors over the tiny GGUF
model (llama.cpp): the HTTP door on loopback (OpenAI and Ollama) and the inferd socket, both over one host; and
over the same model on transformers, whose engine prepares nothing ahead (the model checks the parsed options).

The door hands the host's Admission (options parsed, prompt rendered and tokenized by the engine's `prepare`) to
`submit` for every choice, so an n=2 chat parses its options once and renders its chat template once, where each
choice used to be a request of its own (6 parses at n=1, 9 and 3 renders at n=2). The counters patch the two
functions every such step goes through: `GenerateOptions.parse` and llama.cpp's chat template `render`. The
`request_params_n` histogram counts the request once, with its n.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import LoopThread, serving
from prometheus_client.parser import text_string_to_metric_families

import modelhost.inference
from modelhost.host import Host
from modelhost.http import HttpServer
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Message
from modelhost.testing.counting import Calls
from modelhost.testing.waiting import STATE_WAIT_SECONDS
from modelhost.wire.client import Client
from modelhost.wire.server import WireServer

pytest.importorskip("llama_cpp")

from modelhost.backends.llama_cpp import chat as llama_chat


@pytest.fixture(scope="module")
def socket_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inferd") / "inferd.sock"


@pytest.fixture(scope="module")
def tiny(loop_thread: LoopThread, tiny_llama_gguf: Path, socket_path: Path) -> Iterator[HttpServer]:
    """The HTTP door over the tiny GGUF (llama.cpp, one thread), and the inferd socket at `socket_path` on its host."""
    host = Host(
        lambda: modelhost.inference.load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1), name="tiny"
    )
    with serving(loop_thread, host) as server:
        wire = WireServer(host, str(socket_path))
        loop_thread.run(wire.start())
        try:
            yield server
        finally:
            loop_thread.run(wire.aclose(1.0))


class Counts:
    """How often the options were parsed and the chat template rendered since `reset()`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._parses = Calls(monkeypatch, GenerateOptions, "parse")
        self._renders = Calls(monkeypatch, llama_chat, "render")

    @property
    def parses(self) -> int:
        return self._parses.count

    @property
    def renders(self) -> int:
        return self._renders.count

    def reset(self) -> None:
        self._parses.reset()
        self._renders.reset()


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counts:
    return Counts(monkeypatch)


def post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    response = httpx.post(f"{url}{path}", json={"model": "tiny", **body}, timeout=STATE_WAIT_SECONDS)
    assert response.status_code == 200, response.text
    return response


CHAT: dict[str, Any] = {"messages": [{"role": "user", "content": "tell me a story"}], "max_tokens": 4, "seed": 3}


@pytest.mark.parametrize("n", [1, 2])
def test_a_chat_parses_its_options_and_renders_its_template_once_for_any_n(
    tiny: HttpServer, counts: Counts, n: int
) -> None:
    counts.reset()
    answer = post(tiny.url, "/v1/chat/completions", {**CHAT, "n": n}).json()
    assert len(answer["choices"]) == n
    assert (counts.parses, counts.renders) == (1, 1)


def test_the_choices_of_one_admission_are_still_the_seeded_samples_of_their_own_requests(tiny: HttpServer) -> None:
    sampled = {**CHAT, "temperature": 1.0, "max_tokens": 8}
    both = post(tiny.url, "/v1/chat/completions", {**sampled, "n": 2}).json()["choices"]
    alone = [post(tiny.url, "/v1/chat/completions", {**sampled, "seed": 3 + i}).json()["choices"][0] for i in (0, 1)]
    assert [c["message"]["content"] for c in both] == [c["message"]["content"] for c in alone]


def test_completions_of_several_prompts_parse_once_per_prompt(tiny: HttpServer, counts: Counts) -> None:
    counts.reset()
    answer = post(tiny.url, "/v1/completions", {"prompt": ["a b", "c d"], "n": 2, "max_tokens": 3}).json()
    assert len(answer["choices"]) == 4
    assert (counts.parses, counts.renders) == (2, 0)  # a raw prompt has no chat template


def test_ollama_chat_parses_once(tiny: HttpServer, counts: Counts) -> None:
    counts.reset()
    body = {"messages": CHAT["messages"], "stream": False, "options": {"num_predict": 3}}
    post(tiny.url, "/api/chat", body)
    assert (counts.parses, counts.renders) == (1, 1)


def test_an_inferd_chat_parses_once(tiny: HttpServer, socket_path: Path, counts: Counts) -> None:
    counts.reset()
    with Client(str(socket_path), timeout=STATE_WAIT_SECONDS) as client:
        "".join(client.chat([Message("user", "tell me a story")], max_tokens=3))
    assert (counts.parses, counts.renders) == (1, 1)


@pytest.fixture(scope="module")
def tiny_transformers(loop_thread: LoopThread, tiny_llama_dir: Path) -> Iterator[HttpServer]:
    """The HTTP door over the same tiny model on transformers: an engine that prepares nothing ahead, so at precheck
    the model checks the request's options itself (OptionChecker), handed the host's one parse."""
    pytest.importorskip("torch")
    host = Host(lambda: modelhost.inference.load_model(str(tiny_llama_dir), backend="transformers"), name="tiny")
    with serving(loop_thread, host) as server:
        yield server


@pytest.mark.parametrize("n", [1, 2])
def test_an_engine_that_prepares_nothing_ahead_parses_once_too(
    tiny_transformers: HttpServer, counts: Counts, n: int
) -> None:
    counts.reset()
    answer = post(tiny_transformers.url, "/v1/chat/completions", {**CHAT, "n": n}).json()
    assert len(answer["choices"]) == n
    assert counts.parses == 1  # the host's, which the model's own check is handed (it parsed again before)
    # The model's check runs on that parse: a schema llguidance cannot enforce is its refusal, before the queue.
    counts.reset()
    schema = {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "array", "uniqueItems": True}}}
    refused = httpx.post(
        f"{tiny_transformers.url}/v1/chat/completions",
        json={"model": "tiny", **CHAT, "n": n, "response_format": schema},
        timeout=STATE_WAIT_SECONDS,
    )
    assert refused.status_code == 400 and "uniqueItems" in refused.text, refused.text
    assert counts.parses == 1


def n_histogram(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=STATE_WAIT_SECONDS).text
    return {
        f"{s.name}{s.labels.get('le', '')}": s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("modelhost_request_params_n") and s.labels.get("model_name") == "tiny"
    }


def test_request_params_n_counts_each_request_once_with_its_n(tiny: HttpServer) -> None:
    before = n_histogram(tiny.url)
    post(tiny.url, "/v1/chat/completions", {**CHAT, "n": 3})
    post(tiny.url, "/v1/chat/completions", CHAT)
    after = n_histogram(tiny.url)

    def grew(name: str) -> float:
        return after.get(name, 0) - before.get(name, 0)

    assert grew("modelhost_request_params_n_count") == 2  # two requests, four choices
    assert grew("modelhost_request_params_n_sum") == 3 + 1
    assert grew("modelhost_request_params_n_bucket1.0") == 1 and grew("modelhost_request_params_n_bucket5.0") == 2

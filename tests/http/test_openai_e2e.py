"""The HTTP door end to end: the real `openai` client and raw HTTP against a real server on loopback, serving the
embedded model (SmolLM2-135M-Instruct GGUF through llama.cpp), loaded once for the module.

Generations are short and greedy (temperature 0), so answers are repeatable and the module stays quick on 2 cores.
Timing checks are ratios inside one test, never absolute figures: the machine is shared.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from http_support import LoopThread, serving
from prometheus_client.parser import text_string_to_metric_families

import modelhost.inference
from modelhost.host import Host
from modelhost.http import HttpServer
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

pytestmark = pytest.mark.slow

PNG_1x1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
IMAGE_PART = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG_1x1).decode()}}


def _embedded_model(**load_options: Any) -> Any:
    try:
        return modelhost.inference.load_model("default", **load_options)
    except Exception as exc:  # the backend or the model package is missing on this machine
        pytest.skip(f"the embedded model does not load here: {exc}")


@pytest.fixture(scope="module")
def smol(loop_thread: LoopThread) -> Iterator[HttpServer]:
    """One server over the embedded model for the whole module (the model loads once)."""
    try:
        modelhost.inference.load_model  # noqa: B018 (import check only)
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"llama-cpp-python is not installed: {exc}")
    host = Host(lambda: modelhost.inference.load_model("default"), name="default")
    with serving(loop_thread, host) as server:
        yield server


@pytest.fixture
def client(smol: HttpServer) -> openai.OpenAI:
    # max_retries=0: a 429 or 5xx must reach the test, not be retried away by the client.
    return openai.OpenAI(base_url=f"{smol.url}/v1", api_key="unused", max_retries=0, timeout=STATE_WAIT_SECONDS)


def metric(base_url: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` matching `labels` in /metrics, parsed by prometheus_client's own parser."""
    total = 0.0
    for family in text_string_to_metric_families(httpx.get(f"{base_url}/metrics").text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def ask(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def test_chat_non_streaming_and_streaming_agree_with_usage(client: openai.OpenAI) -> None:
    messages = ask("What is the capital of France?")
    whole = client.chat.completions.create(model="default", messages=messages, max_tokens=8, temperature=0)
    answer = whole.choices[0].message.content
    assert whole.object == "chat.completion" and whole.model == "default"
    assert answer and whole.choices[0].finish_reason in ("stop", "length")
    assert whole.usage is not None and whole.usage.prompt_tokens > 5 and 0 < whole.usage.completion_tokens <= 8
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens

    chunks = list(
        client.chat.completions.create(
            model="default",
            messages=messages,
            max_tokens=8,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == answer  # greedy: the same answer either way
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage


def test_max_tokens_ends_with_length(client: openai.OpenAI) -> None:
    out = client.chat.completions.create(
        model="default", messages=ask("Write a long story about a dragon."), max_completion_tokens=3, temperature=0
    )
    assert out.choices[0].finish_reason == "length"
    assert out.usage is not None and out.usage.completion_tokens == 3


def test_stop_string_ends_the_answer_before_it(client: openai.OpenAI) -> None:
    messages = ask("List three colours, separated by commas.")
    free = client.chat.completions.create(model="default", messages=messages, max_tokens=12, temperature=0)
    text = free.choices[0].message.content or ""
    words = text.split()
    assert len(words) >= 3, text
    stop = words[2]  # a string the greedy answer is known to contain
    cut = client.chat.completions.create(model="default", messages=messages, max_tokens=12, temperature=0, stop=[stop])
    assert cut.choices[0].message.content == text[: text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_completions_whole_and_streamed(client: openai.OpenAI) -> None:
    whole = client.completions.create(model="default", prompt="The capital of France is", max_tokens=4, temperature=0)
    assert whole.object == "text_completion" and whole.choices[0].text
    assert whole.usage is not None and whole.usage.completion_tokens <= 4 and whole.usage.prompt_tokens > 0
    streamed = client.completions.create(
        model="default", prompt="The capital of France is", max_tokens=4, temperature=0, stream=True
    )
    assert "".join(c.choices[0].text for c in streamed if c.choices) == whole.choices[0].text


def test_an_image_for_a_text_model_is_refused_before_any_compute(client: openai.OpenAI, smol: HttpServer) -> None:
    prompt_tokens = metric(smol.url, "modelhost_prompt_tokens_total")
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model="default",
            messages=[{"role": "user", "content": [{"type": "text", "text": "What is this?"}, IMAGE_PART]}],
            max_tokens=4,
        )
    assert "does not accept image input" in info.value.message
    assert info.value.body["code"] == "attachment_unsupported"  # type: ignore[index]
    assert metric(smol.url, "modelhost_prompt_tokens_total") == prompt_tokens  # nothing reached the model
    assert metric(smol.url, "modelhost_request_rejected_total", code="attachment_unsupported") >= 1


def test_ollama_chat_streams_ndjson_line_by_line(smol: HttpServer) -> None:
    body = {"model": "default", "messages": ask("Say hello."), "options": {"num_predict": 6, "temperature": 0}}
    lines = []
    with httpx.stream("POST", f"{smol.url}/api/chat", json=body, timeout=STATE_WAIT_SECONDS) as response:
        assert response.headers["content-type"].startswith("application/x-ndjson")
        for line in response.iter_lines():
            if line:
                lines.append(json.loads(line))
    *parts, last = lines
    assert parts and all(p["done"] is False and p["message"]["role"] == "assistant" for p in parts)
    assert last["done"] is True and last["done_reason"] in ("stop", "length") and 0 < last["eval_count"] <= 6
    assert last["prompt_eval_count"] > 0 and last["total_duration"] >= last["eval_duration"] > 0
    text = "".join(p["message"]["content"] for p in parts)
    whole = httpx.post(f"{smol.url}/api/chat", json={**body, "stream": False}, timeout=STATE_WAIT_SECONDS).json()
    assert whole["done"] and whole["message"]["content"] == text
    generated = httpx.post(
        f"{smol.url}/api/generate", json={"model": "default", "prompt": "Say hello.", "stream": False,
                                          "options": {"num_predict": 6, "temperature": 0}}, timeout=STATE_WAIT_SECONDS
    ).json()  # fmt: skip
    assert generated["response"] == text  # /api/generate applies the same chat template to a lone user turn


def _ttft(base_url: str, prompt: str) -> float:
    """Seconds from sending a streamed chat request to its first token of content."""
    body = {"messages": ask(prompt), "max_tokens": 2, "temperature": 0, "stream": True}
    start = time.perf_counter()
    first = None
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, timeout=STATE_WAIT_SECONDS) as response:
        for line in response.iter_lines():  # read to the end: leaving early would cancel this request too
            if first is None and line.startswith("data: {"):
                delta = json.loads(line[6:])["choices"][0]["delta"]
                if delta.get("content"):
                    first = time.perf_counter() - start
    assert first is not None, "no content arrived"
    return first


def test_a_disconnect_mid_stream_frees_the_model_for_the_next_request(smol: HttpServer) -> None:
    url = smol.url
    cancelled = metric(url, "modelhost_request_success_total", finished_reason="cancelled")
    # Both measured prompts are new to the model (same length, different first word), so prefix caching treats
    # them alike; the warm-up brings the shared chat-template prefix into the cache for both.
    _ttft(url, "Warm up: name a fruit.")
    undisturbed = _ttft(url, "Alpha: name a colour.")
    # A request that would run for ~2000 tokens (tens of seconds), abandoned after its first tokens.
    long_body = {"messages": ask("Count upwards from one."), "max_tokens": 2000, "min_tokens": 2000, "stream": True}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=long_body, timeout=STATE_WAIT_SECONDS) as response:
        seen = 0
        for line in response.iter_lines():
            seen += line.startswith("data: {")
            if seen >= 4:
                break
    after = _ttft(url, "Omega: name a colour.")
    # Had the abandoned request kept the model, `after` would include ~2000 tokens of decode (~100x the bound).
    assert after < 10 * undisturbed + 0.5, (after, undisturbed)
    assert metric(url, "modelhost_request_success_total", finished_reason="cancelled") == cancelled + 1


def test_metrics_move_as_requests_finish(client: openai.OpenAI, smol: HttpServer) -> None:
    url = smol.url
    before = {
        "finished": metric(url, "modelhost_request_success_total"),
        "generated": metric(url, "modelhost_generation_tokens_total"),
        "ttft": metric(url, "modelhost_time_to_first_token_seconds_count"),
        "e2e": metric(url, "modelhost_e2e_request_latency_seconds_count"),
        "http": metric(url, "modelhost_http_requests_total", route="/v1/chat/completions", status="200"),
    }
    out = client.chat.completions.create(model="default", messages=ask("Hi!"), max_tokens=5, temperature=0)
    assert out.usage is not None
    assert metric(url, "modelhost_request_success_total") == before["finished"] + 1
    assert metric(url, "modelhost_generation_tokens_total") == before["generated"] + out.usage.completion_tokens
    assert metric(url, "modelhost_time_to_first_token_seconds_count") == before["ttft"] + 1
    assert metric(url, "modelhost_e2e_request_latency_seconds_count") == before["e2e"] + 1
    assert metric(url, "modelhost_http_requests_total", route="/v1/chat/completions", status="200") == (
        before["http"] + 1
    )
    assert metric(url, "modelhost_num_requests_running") == 0
    assert metric(url, "modelhost_model_state", state="ready") == 1


def _drain(lines: Iterator[str]) -> None:
    """Read a streamed answer to its end, or until the test closes it under this thread."""
    with contextlib.suppress(httpx.HTTPError, RuntimeError):
        for _ in lines:
            pass


def test_a_full_queue_answers_429_with_retry_after(loop_thread: LoopThread, smol: HttpServer) -> None:
    # Its own host, bounded to one waiting request (the module's server keeps serving the other tests), on one batch
    # slot: with the default four, the second request left the queue for a slot at the next step, and whether the
    # third found the queue full depended on how fast the steps ran.
    host = Host(lambda: _embedded_model(parallel=1), name="default", max_queue=1)
    long_body = {"messages": ask("Count."), "max_tokens": 2000, "min_tokens": 2000, "stream": True}
    with serving(loop_thread, host) as server, httpx.Client(base_url=server.url, timeout=STATE_WAIT_SECONDS) as http:
        running = http.stream("POST", "/v1/chat/completions", json=long_body)
        with running as first:
            lines = first.iter_lines()
            next(lines)  # the role chunk, which may come while the request still waits for the model
            # Go on reading the first answer: a client that stops reading is one the door may drop (flow control,
            # its timeouts), and its cancelled request would free the queue this test fills.
            threading.Thread(target=_drain, args=(lines,), daemon=True).start()
            # The model runs the first request and nothing waits (states, however long a busy machine takes): else
            # the second could find the first still queued and be refused itself, and the third then admitted.
            wait_until(lambda: host.running == 1 and host.waiting == 0, what="the first request running")
            url = f"{server.url}/v1/chat/completions"
            second = httpx.stream("POST", url, json=long_body, timeout=STATE_WAIT_SECONDS)
            with second as queued:
                assert queued.status_code == 200
                wait_until(lambda: host.waiting == 1, what="the second request queued")
                refused = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
                with pytest.raises(openai.RateLimitError) as info:
                    refused.chat.completions.create(model="default", messages=ask("Hi"), max_tokens=1)
                assert int(info.value.response.headers["retry-after"]) >= 1
                assert info.value.body["code"] == "queue_full"  # type: ignore[index]


def test_an_image_reaches_a_vision_model(loop_thread: LoopThread, request: pytest.FixtureRequest) -> None:
    try:
        import transformers  # noqa: F401

        folder: Path = request.getfixturevalue("tiny_idefics3_dir")
        modelhost.inference.get("transformers")
    except Exception as exc:
        pytest.skip(f"no tiny vision model with the transformers backend here: {exc}")
    host = Host(lambda: modelhost.inference.load_model(str(folder), backend="transformers"), name="tiny-vlm")
    with serving(loop_thread, host) as server:
        if not host.accepts_images:
            pytest.skip("the tiny Idefics3 loaded without its vision tower on this install")
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=STATE_WAIT_SECONDS)
        text_only = client.chat.completions.create(model="tiny-vlm", messages=ask("Describe."), max_tokens=2)
        out = client.chat.completions.create(
            model="tiny-vlm",
            messages=[{"role": "user", "content": [{"type": "text", "text": "Describe."}, IMAGE_PART]}],
            max_tokens=2,
            temperature=0,
        )
        assert out.usage is not None and text_only.usage is not None
        # The image became tokens in the prompt: the vision model saw it.
        assert out.usage.prompt_tokens > text_only.usage.prompt_tokens
        assert out.choices[0].finish_reason in ("stop", "length")

"""`modelhost serve --model DIR --backend vllm --http`: the real `openai` client and the inferd socket at once, all
served by one vLLM engine that batches them together (`make test-vllm`)."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from vllm_support import build_tiny_llama, require_vllm

require_vllm()

from openai import OpenAI  # noqa: E402

from modelhost.inference.types import Message  # noqa: E402
from modelhost.testing.serving import Served, start_serving  # noqa: E402
from modelhost.testing.waiting import STATE_WAIT_SECONDS  # noqa: E402
from modelhost.wire.client import Client  # noqa: E402

#: A vLLM load imports vLLM, reads the weights and warms up: about 90 s on a busy 2-core machine.
LOAD_SECONDS = 600
#: The long stream's length: long enough that every other request starts and ends while it is still streaming.
LONG_TOKENS = 300
SHORT_TOKENS = 24


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    root = tmp_path_factory.mktemp("vllm-serve")
    folder = build_tiny_llama(root / "tiny")
    sock = root / "run" / "m.sock"
    sock.parent.mkdir()  # an explicit --socket's folder must exist
    args = ["--model", str(folder), "--backend", "vllm", "--parallel", "4", "--socket", str(sock), "--http", ":0"]
    serving = start_serving(args, timeout=LOAD_SECONDS)
    try:
        yield serving, sock
    finally:
        serving.kill()


def _stream(client: OpenAI, max_tokens: int, first: threading.Event | None = None) -> tuple[str, int, float]:
    """One streamed chat through the openai client: its text, its completion tokens, when it ended."""
    text, used = "", 0
    stream = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=max_tokens,
        temperature=0, stream=True, stream_options={"include_usage": True}, extra_body={"ignore_eos": True},
    )  # fmt: skip
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
            if first is not None:
                first.set()
        if chunk.usage is not None:
            used = chunk.usage.completion_tokens
    return text, used, time.monotonic()


def test_the_openai_client_and_the_socket_are_batched_together(served: tuple[Served, Path]) -> None:
    serving, sock = served
    client = OpenAI(base_url=serving.url("http") + "/v1", api_key="unused", timeout=STATE_WAIT_SECONDS)
    results: dict[str, tuple[str, int, float]] = {}
    first = threading.Event()

    def run(name: str, max_tokens: int, started: threading.Event | None = None) -> None:
        results[name] = _stream(client, max_tokens, started)

    long = threading.Thread(target=run, args=("long", LONG_TOKENS, first))
    long.start()
    assert first.wait(STATE_WAIT_SECONDS), "the long stream never started"
    shorts = [threading.Thread(target=run, args=(f"short{i}", SHORT_TOKENS)) for i in range(2)]
    for thread in shorts:
        thread.start()
    with Client(str(sock)) as wire:
        socket_text = "".join(wire.chat([Message("user", "Hello")], max_tokens=12, temperature=0))
        socket_done = time.monotonic()
        assert wire.last_done is not None and wire.last_done.output_tokens > 0, socket_text
    for thread in (*shorts, long):
        thread.join(STATE_WAIT_SECONDS)
    assert results["long"][1] == LONG_TOKENS, "ignore_eos: the long stream gives every token it asked for"
    for i in range(2):
        assert results[f"short{i}"][1] == SHORT_TOKENS
        assert results[f"short{i}"][0] == results["short0"][0], "the same greedy request, the same answer"
    assert results["long"][2] > socket_done, "the socket's request ran while the long HTTP stream was streaming"

    with httpx.Client(base_url=serving.url("http"), timeout=STATE_WAIT_SECONDS) as http:
        metrics = http.get("/metrics").text
    steps = _histogram(metrics, "modelhost_batch_sequences")
    assert steps["+Inf"] > steps["1.0"], f"no step decoded more than one request: {steps}"

    serving.proc.send_signal(signal.SIGTERM)
    assert serving.proc.wait(timeout=STATE_WAIT_SECONDS) == 0, "serve stops cleanly, vLLM's engine with it"


def _histogram(metrics: str, name: str) -> dict[str, float]:
    """The cumulative bucket counts of one histogram series, by bound (`le`)."""
    found = re.findall(rf'^{name}_bucket\{{[^}}]*le="([^"]+)"[^}}]*\}} (\S+)$', metrics, re.M)
    assert found, f"no {name} in the metrics"
    return {bound: float(count) for bound, count in found}

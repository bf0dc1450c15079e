"""`modelhost serve --ray`: two replicas of the tiny GGUF on Ray Serve, reached through Serve's HTTP proxy by the
real `openai` client, as a user meets them; one replica killed mid-stream.

One `serve --ray` process for the module (its start costs Serve's controller, its proxy and two model loads);
its stop, at the module's end, must delete the application.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from ray_support import Cli

from modelhost.testing import raynodes
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

#: Per test, setup included: this module's first test also waits for a Ray start and two model loads, which took
#: minutes at load 12-20 on 2 cores (the suite's 300 s is for one test's own work).
pytestmark = pytest.mark.timeout(900)

API_KEY = "test-key"
#: How many requests may go out before both replicas have answered one: Serve picks the less loaded of two random
#: replicas, so sequential requests land on either; 40 misses of one replica in a row is 1 in 10^12.
ROUTING_TRIES = 40
#: Long enough a stream that it is still going when its replica is killed (the tiny model writes noise quickly).
LONG_STREAM_TOKENS = 4000
#: Between two looks at the application's state: each look is a request through Serve, which costs CPU the
#: replacement's start needs; its start takes seconds anyway.
POLL_SECONDS = 0.5


@pytest.fixture(scope="module")
def served(ray_head: raynodes.RayNode, ray_driver: Any, tiny_llama_gguf: Path) -> Iterator[str]:
    """The base URL of `modelhost serve --ray` with two replicas of the tiny GGUF; stopped (and its application
    checked gone) at the module's end."""
    port = raynodes.free_port(raynodes.HEAD_IP)
    cli = Cli(
        "serve", "--ray", ray_head.address, "--replicas", "2", "--num-cpus", "0.5",
        "--model", f"tiny={tiny_llama_gguf}", "--parallel", "2",
        "--http", f"{raynodes.HEAD_IP}:{port}", "--api-key", API_KEY, "--log-format", "none",
    )  # fmt: skip
    try:
        cli.wait_for("modelhost: ready:")
        yield f"http://{raynodes.HEAD_IP}:{port}"
    finally:
        status = cli.stop()
    assert status == 0, cli.output

    # This `serve --ray` started Serve on the cluster, so its stop took Serve down with the application.
    def serve_gone() -> bool:
        try:
            ray_driver.get_actor("SERVE_CONTROLLER_ACTOR", namespace="serve")
        except ValueError:
            return True
        time.sleep(POLL_SECONDS)
        return False

    wait_until(serve_gone, what="Serve's controller gone after `serve --ray` stopped")


def client(base: str) -> openai.OpenAI:
    # No retries: a request that fails must show here, not be hidden by the client trying again.
    return openai.OpenAI(base_url=f"{base}/v1", api_key=API_KEY, max_retries=0, timeout=STATE_WAIT_SECONDS)


def ask(base: str, max_tokens: int = 8) -> tuple[str, str]:
    """(the replica that answered, the answer's text) of one short greedy chat completion."""
    raw = client(base).chat.completions.with_raw_response.create(
        model="tiny", messages=[{"role": "user", "content": "hello"}], max_tokens=max_tokens, temperature=0
    )
    return raw.headers["x-modelhost-replica"], raw.parse().choices[0].message.content or ""


def test_two_replicas_answer_the_openai_client(served: str) -> None:
    seen: dict[str, str] = {}
    for _ in range(ROUTING_TRIES):
        replica, text = ask(served)
        seen.setdefault(replica, text)
        if len(seen) == 2:
            break
    assert len(seen) == 2, f"only replica {set(seen)} answered {ROUTING_TRIES} requests"
    # Each replica holds the same model and answers greedy requests alike.
    assert len(set(seen.values())) == 1 and next(iter(seen.values())), seen


def test_a_stream_comes_through_the_proxy_whole(served: str) -> None:
    stream = client(served).chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hello"}], max_tokens=12, temperature=0, stream=True
    )
    chunks = list(stream)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ask(served, max_tokens=12)[1]


def test_the_api_key_is_checked_in_every_replica(served: str) -> None:
    body = {"model": "tiny", "messages": []}
    anonymous = httpx.post(f"{served}/v1/chat/completions", json=body, timeout=STATE_WAIT_SECONDS)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "invalid_api_key"
    # The probes stay open, as on one host, and say which replica answered.
    ready = httpx.get(f"{served}/ready", timeout=STATE_WAIT_SECONDS)
    assert ready.status_code == 200 and ready.headers["x-modelhost-replica"]


def test_replicas_answers_for_the_whole_application(served: str) -> None:
    answer = httpx.get(f"{served}/replicas", timeout=STATE_WAIT_SECONDS)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"status": "ready", "replicas": {"RUNNING": 2}}


def test_replicas_metrics_show_each_replicas_series(served: str) -> None:
    # Both replicas answer requests (each then has generated tokens of its own), then both show in the one view.
    tokens: dict[str, int] = {}
    for _ in range(ROUTING_TRIES):
        replica, _ = ask(served)
        tokens[replica] = tokens.get(replica, 0) + 1
        if len(tokens) == 2:
            break
    assert len(tokens) == 2, tokens
    generated: dict[str, float] = {}

    def both_reported() -> bool:
        answer = httpx.get(f"{served}/replicas/metrics", timeout=STATE_WAIT_SECONDS)
        assert answer.status_code == 200, answer.text
        generated.clear()
        ages = set()
        for family in text_string_to_metric_families(answer.text):
            for sample in family.samples:
                if sample.name == "modelhost_generation_tokens_total":
                    generated[sample.labels["replica"]] = sample.value
                if sample.name == "modelhost_replica_metrics_age_seconds":
                    ages.add(sample.labels["replica"])
        # A health check (every 5 s) after each replica's last answer has reported it.
        if set(tokens) <= ages and all(generated.get(r, 0) >= 1 for r in tokens):
            return True
        time.sleep(POLL_SECONDS)
        return False

    wait_until(both_reported, what="both replicas' series in /replicas/metrics")
    # In total, what Prometheus's `sum without (replica)` adds up: at least what this test asked for.
    assert sum(generated.values()) >= len(tokens)


def test_a_replica_killed_mid_stream_fails_its_stream_and_is_replaced(served: str, ray_driver: Any) -> None:
    from ray import serve

    handle = serve.get_deployment_handle("modelhost", app_name="modelhost")
    pids: dict[str, int] = {}
    for _ in range(ROUTING_TRIES):
        described = handle.describe.remote().result()
        pids[described["replica"]] = described["pid"]
        if len(pids) == 2:
            break
    assert len(pids) == 2, pids
    raw = client(served).chat.completions.with_raw_response.create(
        model="tiny",
        messages=[{"role": "user", "content": "hello"}],
        max_tokens=LONG_STREAM_TOKENS,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    victim = raw.headers["x-modelhost-replica"]
    # Killed as soon as the stream has begun (its headers are here), with the replica's tokens still to write. The
    # later the kill, the likelier a slow client comes to it after the tiny model has written every token into the
    # proxy's buffers: killed at the third chunk, one run at load 15 saw the stream end whole, and at the first chunk
    # one fresh-clone run beside a benchmark did too.
    os.kill(pids[victim], signal.SIGKILL)
    chunks = 0
    with pytest.raises(openai.APIError):
        for _ in raw.parse():
            chunks += 1
    assert chunks < LONG_STREAM_TOKENS // 2, "the stream went on after its replica was killed"
    # The next request is answered, by the replica that lives (or already by the replacement).
    _, text = ask(served)
    assert text

    # Serve's controller starts a replacement: a replica id neither of the first two had, then both running.
    def replaced() -> bool:
        if handle.describe.remote().result()["replica"] not in pids:
            return True
        time.sleep(POLL_SECONDS)
        return False

    wait_until(replaced, what="a replacement replica answering")

    def whole() -> bool:
        if httpx.get(f"{served}/replicas", timeout=STATE_WAIT_SECONDS).status_code == 200:
            return True
        time.sleep(POLL_SECONDS)
        return False

    wait_until(whole, what="the application back to 2 running replicas")

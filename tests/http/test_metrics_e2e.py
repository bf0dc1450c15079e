"""What an operator reads on /metrics, through the real HTTP door on loopback over the tiny GGUF model (llama.cpp).

Each test reads /metrics before and after real requests and checks the figures against what the API itself
answered (usage), so a histogram that counts the wrong request, or a failure counted as a success, shows.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from http_support import LoopThread, scripted_model
from prometheus_client.parser import text_string_to_metric_families

from modelhost.host.models import Models, ModelSpec
from modelhost.http import HttpServer
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytest.importorskip("llama_cpp")


@pytest.fixture(scope="module")
def tiny(tiny_gguf_door: HttpServer) -> HttpServer:
    """The module's door over the tiny GGUF (tests/http/conftest.py)."""
    return tiny_gguf_door


def scrape(url: str) -> list[Any]:
    """Every sample of /metrics, parsed by prometheus_client's own parser (a malformed exposition raises)."""
    response = httpx.get(f"{url}/metrics", timeout=STATE_WAIT_SECONDS)
    response.raise_for_status()
    return [s for family in text_string_to_metric_families(response.text) for s in family.samples]


def value(samples: list[Any], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when there is none)."""
    return sum(s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def complete(url: str, **body: Any) -> httpx.Response:
    return httpx.post(f"{url}/v1/completions", json={"model": "tiny", **body}, timeout=STATE_WAIT_SECONDS)


def test_length_and_time_histograms_count_each_request_with_the_usage_the_api_returned(tiny: HttpServer) -> None:
    before = scrape(tiny.url)
    answers = [
        complete(tiny.url, prompt="The quick brown fox jumps over the lazy dog", max_tokens=6, temperature=0),
        complete(tiny.url, prompt="one two", max_tokens=3, temperature=0),
    ]
    usages = [a.json()["usage"] for a in answers if a.status_code == 200]
    assert len(usages) == 2, [a.text for a in answers]
    after = scrape(tiny.url)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, model_name="tiny", **labels) - value(before, name, model_name="tiny", **labels)

    assert grew("modelhost_request_prompt_tokens_count") == 2
    assert grew("modelhost_request_prompt_tokens_sum") == sum(u["prompt_tokens"] for u in usages)
    assert grew("modelhost_request_generation_tokens_count") == 2
    assert grew("modelhost_request_generation_tokens_sum") == sum(u["completion_tokens"] for u in usages)
    # Each request lands in its own bucket: the smallest bound at or above its count, not the one below it
    # (what histogram_quantile relies on).
    bounds = sorted(
        float(s.labels["le"]) for s in after if s.name == "modelhost_request_prompt_tokens_bucket" and s.labels["le"]
    )
    for usage in usages:
        n = usage["prompt_tokens"]
        at = min(b for b in bounds if b >= n)
        below = max((b for b in bounds if b < n), default=None)
        le = str(at) if at != float("inf") else "+Inf"
        assert grew("modelhost_request_prompt_tokens_bucket", le=le) >= 1
        if below is not None:
            assert grew("modelhost_request_prompt_tokens_bucket", le=str(below)) < 2
    for name in ("modelhost_request_prefill_time_seconds", "modelhost_request_decode_time_seconds"):
        assert grew(f"{name}_count") == 2
        assert grew(f"{name}_sum") > 0  # a real model takes time to read a prompt and to write tokens
    # A request's prefill and decode lie inside its end-to-end time, which the host measures separately.
    assert grew("modelhost_request_prefill_time_seconds_sum") + grew(
        "modelhost_request_decode_time_seconds_sum"
    ) <= grew("modelhost_e2e_request_latency_seconds_sum")


def test_vllm_named_series_count_each_request_with_the_usage_the_api_returned(tiny: HttpServer) -> None:
    prompt = "The quick brown fox jumps over the lazy dog and runs far away"
    before = scrape(tiny.url)
    answers = [complete(tiny.url, prompt=prompt, max_tokens=m, temperature=0) for m in (5, 7)]
    usages = [a.json()["usage"] for a in answers if a.status_code == 200]
    assert len(usages) == 2, [a.text for a in answers]
    after = scrape(tiny.url)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, model_name="tiny", **labels) - value(before, name, model_name="tiny", **labels)

    # Every prompt token is a prefix-cache query; the second request of the same prompt reuses what the first
    # left in a slot, so there are hits, never more than the queries, and each is a cached prompt token.
    queries, hits = grew("modelhost_prefix_cache_queries_total"), grew("modelhost_prefix_cache_hits_total")
    assert queries == sum(u["prompt_tokens"] for u in usages)
    assert 0 < hits <= queries and hits == grew("modelhost_prompt_tokens_cached_total")
    assert grew("modelhost_request_params_max_tokens_count") == 2
    assert grew("modelhost_request_params_max_tokens_sum") == 5 + 7
    for name in ("modelhost_request_inference_time_seconds", "modelhost_time_per_output_token_seconds"):
        assert grew(f"{name}_count") == 2 and grew(f"{name}_sum") > 0, name
    assert grew("modelhost_iteration_tokens_total_count") >= 5 + 7 - 1  # a step per token after a prefill
    assert grew("modelhost_iteration_tokens_total_sum") == grew("modelhost_batch_tokens_sum")
    config = [s for s in after if s.name == "modelhost_cache_config_info" and s.labels["model_name"] == "tiny"]
    assert len(config) == 1 and config[0].value == 1 and int(config[0].labels["num_slots"]) >= 1, config


def test_a_failed_request_counts_as_a_failure_with_its_code_and_not_as_a_success(tiny: HttpServer) -> None:
    before = scrape(tiny.url)
    refused = complete(tiny.url, prompt="hello", max_tokens=4, top_k=-3)
    assert refused.status_code == 400, refused.text
    code = refused.json()["error"]["code"]
    after = scrape(tiny.url)
    failed = "modelhost_request_failure_total"
    assert value(after, failed, model_name="tiny", code=code) == value(before, failed, model_name="tiny", code=code) + 1
    assert value(after, failed) == value(before, failed) + 1
    success = "modelhost_request_success_total"
    assert value(after, success) == value(before, success)
    assert not [s for s in after if s.name == success and s.labels.get("finished_reason") == "error"]


def test_an_embedding_the_model_cannot_take_is_a_failure_with_its_code(tiny: HttpServer) -> None:
    before = scrape(tiny.url)
    too_long = " ".join(["hello"] * 400)  # about 800 tokens: over the tiny model's 512, found when it tokenizes
    refused = httpx.post(
        f"{tiny.url}/v1/embeddings", json={"model": "tiny", "input": too_long}, timeout=STATE_WAIT_SECONDS
    )
    assert refused.status_code == 400, refused.text
    code = refused.json()["error"]["code"]
    after = scrape(tiny.url)
    failed = "modelhost_request_failure_total"
    assert value(after, failed, code=code) == value(before, failed, code=code) + 1
    assert value(after, failed) == value(before, failed) + 1
    embedded = "modelhost_embedding_requests_total"
    assert value(after, embedded, outcome="error") == value(before, embedded, outcome="error") + 1


def test_kv_cache_usage_is_a_fraction_idle_at_zero_and_holds_a_long_prompt_while_it_runs(tiny: HttpServer) -> None:
    kv = "modelhost_kv_cache_usage_perc"
    idle = scrape(tiny.url)
    assert value(idle, kv, model_name="tiny") == 0.0  # nothing runs: cached prefixes of idle slots count as free
    assert [s.name for s in idle].count(kv) == 1  # shown from the start, before a request filled it
    cells = 512 * value(idle, "modelhost_batch_slots", model_name="tiny")  # the tiny model's context per slot
    prompt = " ".join(["hello"] * 140)  # about 280 tokens of the tiny vocabulary: with its answer, inside 512
    seen: list[float] = []
    answers: list[httpx.Response] = []
    # The tiny model answers in a fraction of a second, so a scrape may miss one request: up to 30 tries (each a
    # poll of /metrics for as long as the request streams) to see it running; one is plenty on any machine so far.
    for _ in range(30):
        done = threading.Event()

        def stream(done: threading.Event = done) -> None:
            try:
                answers.append(complete(tiny.url, prompt=prompt, max_tokens=150, ignore_eos=True, temperature=0))
            finally:
                done.set()

        threading.Thread(target=stream, daemon=True).start()
        while not done.is_set():
            now = value(scrape(tiny.url), kv, model_name="tiny")
            assert 0.0 <= now <= 1.0
            if now > 0:
                seen.append(now)
        done.wait(STATE_WAIT_SECONDS)
        assert answers and answers[-1].status_code == 200, answers[-1].text if answers else "no answer"
        if seen:
            break
    assert seen, "the gauge never showed the running request"
    # While it runs, the request holds its prompt's cells (prefilled in its first step) and at most its answer's.
    prompt_tokens = answers[-1].json()["usage"]["prompt_tokens"]
    assert all(prompt_tokens / cells <= v <= (prompt_tokens + 150) / cells for v in seen), (seen, prompt_tokens)
    assert value(scrape(tiny.url), kv, model_name="tiny") == 0.0  # back to idle once it finished


def test_process_metrics_are_exported_once_per_door(tiny: HttpServer) -> None:
    samples = scrape(tiny.url)
    resident = [s for s in samples if s.name == "process_resident_memory_bytes"]
    assert len(resident) == 1
    assert resident[0].value > 10 * 2**20  # this process holds Python, llama.cpp and a model: tens of MB at least
    assert value(samples, "process_cpu_seconds_total") > 0


def test_process_metrics_once_when_several_models_share_the_registry(loop_thread: LoopThread) -> None:
    models = Models([ModelSpec(name, scripted_model) for name in ("alpha", "beta", "gamma")])
    server = HttpServer(models, port=0)
    loop_thread.run(server.start())
    loop_thread.run(models.start())
    try:
        samples = scrape(server.url)
        assert [s.name for s in samples].count("process_resident_memory_bytes") == 1
        assert [s.name for s in samples].count("process_start_time_seconds") == 1
    finally:
        loop_thread.run(server.aclose())
        loop_thread.run(models.aclose(grace=1))

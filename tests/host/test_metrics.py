"""The host's metrics where a door cannot reach them: a model that fails mid-answer (a stand-in made to fail, the
point of the test) and the registry the process_* series go on."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

from modelhost.host import Failed, GenerationRequest, Host, HostMetrics
from modelhost.testing.standins import ScriptedModel


def test_a_model_failing_mid_answer_is_a_failure_by_its_code_and_feeds_no_request_histogram() -> None:
    async def main() -> None:
        host = Host.from_model(ScriptedModel(fail_after=2), name="failing")
        await host.start()
        events = [e async for e in host.generate(GenerationRequest(prompt="p", options={"max_tokens": 10}))]
        await host.aclose()
        assert isinstance(events[-1], Failed)
        get = host.metrics.registry.get_sample_value
        labels = {"model_name": "failing"}
        assert get("modelhost_request_failure_total", {**labels, "code": events[-1].code}) == 1
        assert get("modelhost_request_success_total", {**labels, "finished_reason": "error"}) is None
        assert get("modelhost_request_prompt_tokens_count", labels) is None
        assert get("modelhost_e2e_request_latency_seconds_count", labels) == 1  # it did take the model's time

    asyncio.run(main())


def test_process_metrics_on_the_hosts_own_registry_and_never_twice_on_a_callers() -> None:
    own = generate_latest(HostMetrics("a").registry).decode()
    assert own.count("\nprocess_resident_memory_bytes ") == 1
    theirs = CollectorRegistry()
    ProcessCollector(registry=theirs)  # as prometheus_client's default REGISTRY comes
    shared = generate_latest(HostMetrics("b", registry=theirs).registry).decode()
    assert shared.count("\nprocess_resident_memory_bytes ") == 1
    assert "modelhost_num_requests_running" in shared

"""Scheduler semantics: admission, bounded queue, cancellation wherever a request is, shutdown.

The model here is a stand-in (`ScriptedModel`: the letters a, b, c, ... one a token, each waiting for the test's
gate when it has one) that produces tokens at a pace the test controls: these tests pin the scheduler's
own logic (ordering, bounds, cancellation points), which a real model's speed would only blur. The end-to-end
behaviour on real models is tested through the doors.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from modelhost.errors import (
    HostClosedError,
    InvalidInputError,
    InvalidOptionError,
    QueueFullError,
    UnsupportedAttachmentError,
)
from modelhost.host import Delta, Done, Failed, GenerationRequest, Host, Started
from modelhost.inference.types import Message
from modelhost.testing.standins import ScriptedModel
from modelhost.testing.waiting import STATE_WAIT_SECONDS


async def started_host(model: ScriptedModel, max_queue: int = 4) -> Host:
    host = Host.from_model(model, name="paced", max_queue=max_queue)
    await host.start()
    return host


async def collect(host: Host, prompt: str, **options: Any) -> list[Any]:
    return [e async for e in host.generate(GenerationRequest(prompt=prompt, options=options))]


def test_stream_has_started_deltas_and_done() -> None:
    async def main() -> None:
        host = await started_host(ScriptedModel())
        events = await collect(host, "p", max_tokens=3)
        assert isinstance(events[0], Started)
        assert [e.text for e in events if isinstance(e, Delta)] == ["a", "b", "c"]
        done = events[-1]
        assert isinstance(done, Done) and done.finish_reason == "length" and done.completion_tokens == 3
        await host.aclose()

    asyncio.run(main())


def test_invalid_option_and_image_refused_before_queueing() -> None:
    async def main() -> None:
        model = ScriptedModel()
        host = await started_host(model)
        with pytest.raises(InvalidOptionError, match="max_tokens"):
            host.submit(GenerationRequest(prompt="p", options={"max_tokens": -1}))
        with pytest.raises(UnsupportedAttachmentError) as info:
            host.submit(GenerationRequest(messages=[Message("user", "see", images=(b"png",))]))
        assert info.value.code == "attachment_unsupported"
        assert model.prompts == [] and host.waiting == 0
        await host.aclose()

    asyncio.run(main())


def test_queue_is_bounded_and_cancelled_waiters_free_their_slot() -> None:
    async def main() -> None:
        gate = threading.Semaphore(0)
        model = ScriptedModel(gate=gate)
        host = await started_host(model, max_queue=2)
        running = host.submit(GenerationRequest(prompt="running", options={"max_tokens": 2}))
        first = running.__aiter__()
        assert isinstance(await first.__anext__(), Started)  # the model took it; the queue is empty again
        waiting = [host.submit(GenerationRequest(prompt=f"w{i}", options={"max_tokens": 1})) for i in range(2)]
        with pytest.raises(QueueFullError):
            host.submit(GenerationRequest(prompt="overflow"))
        await waiting[0].aclose()  # a cancelled waiter leaves the queue at once
        assert host.waiting == 1
        late = host.submit(GenerationRequest(prompt="late", options={"max_tokens": 1}))
        for _ in range(8):
            gate.release()
        rest = [e async for e in first]
        assert isinstance(rest[-1], Done) and rest[-1].finish_reason == "length"
        assert [e async for e in waiting[1]][-1].finish_reason == "length"  # type: ignore[union-attr]
        assert [e async for e in late][-1].finish_reason == "length"  # type: ignore[union-attr]
        assert model.prompts == ["running", "w1", "late"], "the cancelled waiter must never reach the model"
        await host.aclose()

    asyncio.run(main())


def test_closing_a_running_stream_stops_the_model_and_serves_the_next() -> None:
    async def main() -> None:
        gate = threading.Semaphore(0)
        model = ScriptedModel(gate=gate)
        host = await started_host(model)
        stream = host.submit(GenerationRequest(prompt="long", options={"max_tokens": 1000}))
        gate.release()
        async for event in stream:
            if isinstance(event, Delta):
                break
        await stream.aclose()
        gate.release()  # let the model reach its next cancellation check
        nxt = host.submit(GenerationRequest(prompt="next", options={"max_tokens": 1}))
        for _ in range(4):
            gate.release()
        events = [e async for e in nxt]
        assert isinstance(events[-1], Done) and events[-1].completion_tokens == 1
        assert model.metrics().generated_tokens == 1
        assert model.prompts == ["long", "next"]
        await host.aclose()

    asyncio.run(main())


def test_engine_error_becomes_failed_after_the_text_so_far() -> None:
    async def main() -> None:
        host = await started_host(ScriptedModel(fail_after=2))
        events = await collect(host, "p", max_tokens=10)
        assert [e.text for e in events if isinstance(e, Delta)] == ["a", "b"]
        failed = events[-1]
        assert isinstance(failed, Failed) and failed.code == "internal" and "exploded" in failed.message
        events = await collect(host, "again", max_tokens=1)  # the host carries on with the next request
        assert isinstance(events[-1], Done) and events[-1].completion_tokens == 1
        await host.aclose()

    asyncio.run(main())


def test_shutdown_finishes_inflight_then_refuses_and_closes_model() -> None:
    async def main() -> None:
        model = ScriptedModel()
        host = await started_host(model)
        stream = host.submit(GenerationRequest(prompt="p", options={"max_tokens": 5}))
        await host.aclose(grace=5)
        events = [e async for e in stream]
        assert isinstance(events[-1], Done) and events[-1].completion_tokens == 5
        assert model.closed
        with pytest.raises(HostClosedError):
            host.submit(GenerationRequest(prompt="p"))

    asyncio.run(main())


def test_load_failure_is_raised_by_start() -> None:
    def broken() -> Any:
        raise RuntimeError("no such weights")

    async def main() -> None:
        host = Host(broken, name="broken")
        with pytest.raises(RuntimeError, match="no such weights"):
            await host.start()
        assert host.state == "failed" and not host.ready

    asyncio.run(main())


def test_submit_while_loading_says_loading_and_the_metrics_never_show_a_request_twice() -> None:
    from modelhost.errors import ModelLoadingError

    release = threading.Event()
    model = ScriptedModel()

    def slow_loader() -> Any:
        release.wait(STATE_WAIT_SECONDS)
        return model

    async def main() -> None:
        host = Host(slow_loader, name="slow")
        starting = asyncio.ensure_future(host.start())
        async with asyncio.timeout(STATE_WAIT_SECONDS):  # until the load has begun (it then waits for `release`)
            while host.state != "loading":
                await asyncio.sleep(0.01)
        with pytest.raises(ModelLoadingError) as info:
            host.submit(GenerationRequest(prompt="p"))
        assert info.value.code == "model_loading" and host.state == "loading"
        release.set()
        await starting
        await collect(host, "p", max_tokens=2)
        m = host.metrics
        assert m.requests_running.labels("slow")._value.get() == 0
        assert m.requests_finished.labels("slow", "length")._value.get() == 1
        await host.aclose()

    asyncio.run(main())


def test_a_dead_model_thread_fails_its_requests_and_stops_admitting() -> None:
    class Interrupted(ScriptedModel):
        def script(self, prompt: str) -> Iterator[bytes | None]:
            yield b"a"
            raise KeyboardInterrupt  # not an Exception: _serve lets it through, as it must

    async def main() -> None:
        host = await started_host(Interrupted())
        events = await collect(host, "p", max_tokens=5)
        failed = events[-1]
        assert isinstance(failed, Failed) and failed.code == "internal" and "model thread stopped" in failed.message
        assert host.state == "failed" and not host.ready
        with pytest.raises(HostClosedError):
            host.submit(GenerationRequest(prompt="p"))
        await host.aclose()

    asyncio.run(main())


def test_a_prompt_over_the_models_byte_bound_is_refused_at_submit_without_tokenizing() -> None:
    class Bounded(ScriptedModel):
        def prompt_byte_limit(self) -> int:
            return 100

    async def main() -> None:
        model = Bounded(["ok"], max_tokens=5)
        host = await started_host(model)
        with pytest.raises(InvalidInputError, match="101 bytes"):
            host.submit(GenerationRequest(prompt="x" * 101))
        with pytest.raises(InvalidInputError, match="messages: 102 bytes"):  # the turns' text, before any template
            host.submit(GenerationRequest(messages=[Message("user", "é" * 30), Message("user", "y" * 42)]))
        await host.precheck(GenerationRequest(prompt="é" * 50))  # 50 characters, 100 bytes: within the bound
        with pytest.raises(InvalidInputError):
            await host.precheck(GenerationRequest(prompt="é" * 51))
        assert model.prompts == [] and host.waiting == 0
        assert host.metrics.requests_rejected.labels(host.name, "invalid_input")._value.get() == 3
        events = await collect(host, "é" * 50, max_tokens=1)
        assert isinstance(events[-1], Done) and model.prompts == ["é" * 50]
        await host.aclose()

    asyncio.run(main())

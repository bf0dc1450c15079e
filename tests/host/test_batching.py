"""The continuous scheduler: requests join between steps, cancelled ones leave within one step, all doors share it.

The scheduler's own logic is pinned with a stand-in engine whose steps the test paces (a gate per step); the real
thing, the llama_cpp engine on the tiny GGUF, then shows concurrent requests through the host getting exactly the
tokens they get one at a time.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from pathlib import Path
from typing import Any

import pytest

from modelhost.host import Delta, Done, Failed, GenerationRequest, Host, Started
from modelhost.inference.engine import Admitted, EngineOutput, EngineRequest, StepResult
from modelhost.inference.types import GenerateMetrics, Message, Token
from modelhost.testing.standins import ScriptedModel
from modelhost.testing.waiting import STATE_WAIT_SECONDS


class PacedEngine:
    """An Engine whose slots say a, b, c ... (one letter a step) up to max_tokens; each step takes the gate."""

    def __init__(self, slots: int, gate: threading.Semaphore | None) -> None:
        self.slots = slots
        self.gate = gate
        self.steps = 0
        self.busy: dict[int, list[int]] = {}  # handle -> [slot, produced, max_tokens]
        self.log: list[tuple[int, str, int]] = []  # (step, "admit"/"release", slot)
        self.closed = False
        self._handles = itertools.count(1)

    def free_slots(self) -> int:
        return self.slots - len(self.busy)

    def admit(self, request: EngineRequest) -> Admitted:
        options = request.options
        if request.prompt == "refuse":
            from modelhost.errors import InvalidInputError

            raise InvalidInputError("refused at admission")
        slot = min(set(range(self.slots)) - {state[0] for state in self.busy.values()})
        handle = next(self._handles)
        self.busy[handle] = [slot, 0, options.max_tokens if options.max_tokens is not None else 16]
        self.log.append((self.steps, "admit", slot))
        return Admitted(handle, 3, 1)

    def step(self) -> StepResult:
        if self.gate is not None:
            assert self.gate.acquire(timeout=STATE_WAIT_SECONDS)  # a bound on a hang, not on a slow test
        self.steps += 1
        outputs = {}
        for handle, state in list(self.busy.items()):
            state[1] += 1
            token = Token(state[1], chr(96 + state[1]))
            if state[1] >= state[2]:
                del self.busy[handle]
                m = GenerateMetrics(prompt_tokens=3, generated_tokens=state[1], finish_reason="length")
                outputs[handle] = EngineOutput(handle, (token,), "length", m)
            else:
                outputs[handle] = EngineOutput(handle, (token,))
        return StepResult(outputs, len(outputs), len(outputs), 0)

    def release(self, handle: int) -> GenerateMetrics | None:
        state = self.busy.pop(handle, None)
        if state is None:
            return None
        self.log.append((self.steps, "release", state[0]))
        return GenerateMetrics(generated_tokens=state[1], finish_reason="cancelled")

    def close(self) -> None:
        self.closed = True


class BatchingScripted(ScriptedModel):
    def __init__(self, slots: int = 2, gate: threading.Semaphore | None = None) -> None:
        super().__init__()
        self.paced = PacedEngine(slots, gate)

    def engine(self) -> PacedEngine:
        return self.paced


async def text_of(stream: Any) -> tuple[str, Any]:
    events = [e async for e in stream]
    return "".join(e.text for e in events if isinstance(e, Delta)), events[-1]


def test_requests_run_together_and_a_third_joins_when_a_slot_frees() -> None:
    async def main() -> None:
        model = BatchingScripted(slots=2)
        host = Host.from_model(model, name="batched")
        await host.start()
        assert host.slots == 2 and host.metrics.batch_slots.labels("batched")._value.get() == 2
        streams = [
            host.submit(GenerationRequest(prompt=f"p{i}", options={"max_tokens": n})) for i, n in enumerate((2, 4, 3))
        ]
        results = [await text_of(s) for s in streams]
        assert [r[0] for r in results] == ["ab", "abcd", "abc"]
        assert all(isinstance(r[1], Done) and r[1].finish_reason == "length" for r in results)
        admits = [(step, slot) for step, kind, slot in model.paced.log if kind == "admit"]
        # The first two start together; the third joins the running batch in the slot the 2-token one freed,
        # after step 2 and while the 4-token one is still decoding.
        assert admits == [(0, 0), (0, 1), (2, 0)]
        m = host.metrics
        assert m.batch_sequences.labels("batched")._sum.get() == 2 + 2 + 2 + 2 + 1  # sequences per step
        assert m.prompt_tokens_cached.labels("batched")._value.get() == 0  # the stand-in's metrics say none
        assert m.requests_running.labels("batched")._value.get() == 0
        # Idle again: no slot is used (the gauge once kept the 1 of the last step's batch until the next request).
        for _ in range(12000):  # a state polled for up to two minutes, not a deadline
            if m.batch_slots_used.labels("batched")._value.get() == 0:
                break
            await asyncio.sleep(0.01)
        assert m.batch_slots_used.labels("batched")._value.get() == 0
        await host.aclose()
        assert model.paced.closed and model.closed

    asyncio.run(main())


def test_a_cancelled_request_frees_its_slot_before_the_next_step() -> None:
    async def main() -> None:
        gate = threading.Semaphore(0)
        model = BatchingScripted(slots=2, gate=gate)
        host = Host.from_model(model, name="batched")
        await host.start()
        long = host.submit(GenerationRequest(prompt="long", options={"max_tokens": 100}))
        other = host.submit(GenerationRequest(prompt="other", options={"max_tokens": 100}))
        waiting = host.submit(GenerationRequest(prompt="waiting", options={"max_tokens": 1}))
        for stream in (long, other):
            assert isinstance(await stream.__anext__(), Started)
        gate.release()
        assert isinstance(await long.__anext__(), Delta)
        assert host.running == 2 and host.waiting == 1
        await long.aclose()
        step_at_cancel = model.paced.steps
        gate.release()  # the step in flight when the cancel landed may finish; the next one runs without it
        gate.release()
        text, done = await text_of(waiting)
        assert text == "a" and isinstance(done, Done)
        release = [(step, slot) for step, kind, slot in model.paced.log if kind == "release"]
        assert release and release[0][0] <= step_at_cancel + 1
        gate.release(1_000)  # nothing is paced from here: the loop steps freely to its close, not to the gate's bound
        await other.aclose()
        await host.aclose()

    asyncio.run(main())


def test_a_request_refused_at_admission_fails_alone() -> None:
    async def main() -> None:
        host = Host.from_model(BatchingScripted(slots=2), name="batched")
        await host.start()
        bad = host.submit(GenerationRequest(prompt="refuse"))
        good = host.submit(GenerationRequest(prompt="fine", options={"max_tokens": 2}))
        _, failed = await text_of(bad)
        assert isinstance(failed, Failed) and failed.code == "invalid_input"
        text, done = await text_of(good)
        assert text == "ab" and isinstance(done, Done)
        await host.aclose()

    asyncio.run(main())


def test_concurrent_requests_through_the_host_get_their_one_at_a_time_tokens(tiny_llama_gguf: Path) -> None:
    pytest.importorskip("llama_cpp")
    from modelhost.backends.llama_cpp import LlamaCppBackend

    prompts = ["The quick brown fox", "Once upon a time", "hello", "A long time ago", "Lorem ipsum"]
    opts = {"max_tokens": 16, "min_tokens": 16, "temperature": 0}
    model = LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=4)
    expected = ["".join(t.text for t in model.generate(p, **opts)) for p in prompts]
    chat = [Message("user", "hi")]
    expected_chat = "".join(t.text for t in model.chat(chat, **opts))

    async def main() -> None:
        host = Host.from_model(model, name="tiny")
        await host.start()
        assert host.slots == 4
        streams = [host.submit(GenerationRequest(prompt=p, options=opts)) for p in prompts]
        streams.append(host.submit(GenerationRequest(messages=chat, options=opts)))
        results = await asyncio.gather(*(text_of(s) for s in streams))
        assert [r[0] for r in results] == [*expected, expected_chat]
        m = host.metrics
        assert m.batch_sequences.labels("tiny")._sum.get() > 16 * 4  # steps carried several sequences
        evaluated = m.prompt_tokens_evaluated.labels("tiny")._value.get()
        cached = m.prompt_tokens_cached.labels("tiny")._value.get()
        assert evaluated + cached == m.prompt_tokens.labels("tiny")._value.get() and evaluated > 0
        await host.aclose()

    asyncio.run(main())


def test_serve_passes_parallel_to_the_load_and_the_cli_refuses_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import signal

    from typer.testing import CliRunner

    from modelhost import serve as serving
    from modelhost.cli import app

    refused = CliRunner().invoke(app, ["serve", "--no-socket", "--parallel", "0"])
    assert refused.exit_code == 2, refused.output
    seen: dict[str, Any] = {}

    def load(path: str, backend: str | None, **opts: Any) -> BatchingScripted:
        seen.update(opts)
        return BatchingScripted(slots=opts["parallel"])

    monkeypatch.setattr(serving.catalogue, "resolve", lambda model: model)
    monkeypatch.setattr(serving.registry, "load_model", load)
    lines: list[str] = []

    async def main() -> None:
        task = asyncio.create_task(serving.serve(serving.ServeConfig(model="x", parallel=3), say=lines.append))
        for _ in range(500):
            if any("ready" in line for line in lines):
                break
            await asyncio.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(task, 10)

    asyncio.run(main())
    assert seen == {"parallel": 3}


def test_requests_from_the_socket_and_http_doors_share_the_slots(tiny_llama_gguf: Path, tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    import json

    import httpx

    from modelhost.backends.llama_cpp import LlamaCppBackend
    from modelhost.http import HttpServer
    from modelhost.wire.client import Client
    from modelhost.wire.server import WireServer

    questions = ["hi", "hello there", "what is this", "tell me more"]
    opts = {"max_tokens": 24, "temperature": 0}
    model = LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=4)
    expected = ["".join(t.text for t in model.chat([Message("user", q)], **opts)) for q in questions]
    # The engine's first step waits until all four requests have reached the host, so they decode together however
    # slowly a loaded machine delivers them (24 tokens of the tiny model take milliseconds: without the gate, one
    # request could finish before the next arrived, and the test would pin scheduling luck instead of sharing).
    everyone_in = threading.Event()
    engine = model.engine()
    step = engine.step

    def gated_step() -> Any:
        everyone_in.wait(STATE_WAIT_SECONDS)
        return step()

    engine.step = gated_step  # type: ignore[method-assign]

    def over_socket(path: str, question: str) -> str:
        with Client(path, timeout=STATE_WAIT_SECONDS) as client:
            return "".join(client.chat([Message("user", question)], **opts))

    async def over_http(url: str, question: str) -> str:
        body = {"model": "tiny", "messages": [{"role": "user", "content": question}], "stream": True, **opts}
        text = ""
        async with httpx.AsyncClient(timeout=STATE_WAIT_SECONDS) as client, client.stream("POST", url, json=body) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: {"):
                    choices = json.loads(line[6:]).get("choices") or []
                    text += (choices[0].get("delta", {}).get("content") or "") if choices else ""
        return text

    async def main() -> list[str]:
        host = Host.from_model(model, name="tiny")
        await host.start()
        wire = WireServer(host, tmp_path / "m.sock")
        http = HttpServer(host, port=0)
        await wire.start()
        await http.start()

        async def open_gate_when_all_arrived() -> None:
            while host.waiting + host.running < len(questions):
                await asyncio.sleep(0.01)
            everyone_in.set()

        try:
            loop = asyncio.get_running_loop()
            url = f"{http.url}/v1/chat/completions"
            gate = asyncio.create_task(open_gate_when_all_arrived())
            return list(
                await asyncio.gather(
                    loop.run_in_executor(None, over_socket, wire.path, questions[0]),
                    over_http(url, questions[1]),
                    loop.run_in_executor(None, over_socket, wire.path, questions[2]),
                    over_http(url, questions[3]),
                )
            )
        finally:
            everyone_in.set()
            gate.cancel()
            await wire.aclose()
            await http.aclose()
            steps = host.metrics.batch_sequences.labels("tiny")
            await host.aclose()
            # Some step drew tokens for all four requests at once: the doors' requests ran together.
            assert sum(b.get() for b in steps._buckets[3:]) > 0  # the buckets above 1, 2 and 3 sequences

    assert asyncio.run(main()) == expected


def test_precheck_tokenizes_off_the_model_thread_and_the_answer_is_the_same(tiny_llama_gguf: Path) -> None:
    pytest.importorskip("llama_cpp")
    from modelhost.backends.llama_cpp import LlamaCppBackend

    model = LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=2)
    chat = [Message("user", "hi there")]
    opts = {"max_tokens": 8, "temperature": 0}
    expected = "".join(t.text for t in model.chat(chat, **opts))
    engine = model.engine()
    seen: list[tuple[str, str, bool]] = []  # (call, thread, had prompt ids)
    prepare, admit = engine.prepare, engine.admit

    def recording_prepare(request: EngineRequest) -> EngineRequest:
        seen.append(("prepare", threading.current_thread().name, request.prompt_ids is not None))
        return prepare(request)

    def recording_admit(request: EngineRequest) -> Admitted:
        seen.append(("admit", threading.current_thread().name, request.prompt_ids is not None))
        return admit(request)

    engine.prepare = recording_prepare  # type: ignore[method-assign]
    engine.admit = recording_admit  # type: ignore[method-assign]

    async def main() -> None:
        host = Host.from_model(model, name="tiny")
        await host.start()
        request = GenerationRequest(messages=chat, options=opts)
        admission = await host.precheck(request)
        prechecked, _ = await text_of(host.submit(admission))
        plain, _ = await text_of(host.submit(GenerationRequest(messages=chat, options=opts)))  # no precheck
        assert prechecked == plain == expected
        await host.aclose()

    asyncio.run(main())
    model_thread = "modelhost-model-tiny"
    assert seen[0][0] == "prepare" and seen[0][1] != model_thread and not seen[0][2]
    assert seen[1] == ("admit", model_thread, True), "the model thread admits the prepared tokens"
    assert seen[2] == ("admit", model_thread, False), "a request that was not prechecked is tokenized at admit"

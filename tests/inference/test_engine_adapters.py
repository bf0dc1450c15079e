"""Every model is driven as an Engine: the adapters (inference/adapters.py) on the tiny GGUF and on stand-ins.

One slot over a model's own streams must pass the engine conformance kit and give the model's own greedy tokens;
a slot-keyed BatchEngine behind handles must never hand out a handle twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelhost.inference import engine_conformance
from modelhost.inference.adapters import SlotEngine, StreamEngine, engine_of
from modelhost.inference.engine import EngineRequest
from modelhost.inference.engine_conformance import EngineKit, drive
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Admission, GenerateMetrics, SlotOutput, StepReport, Token
from modelhost.testing.standins import ScriptedModel

pytest.importorskip("llama_cpp")

from modelhost.backends.llama_cpp import LlamaCppBackend

PROMPTS = ("The quick brown fox", "Once upon a time", "hello", "A long time ago in a galaxy")
GREEDY = {"temperature": 0, "max_tokens": 12}


@pytest.fixture(scope="module")
def llama(tiny_llama_gguf: Path) -> Iterator[Any]:
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=3) as m:
        yield m


def requests() -> list[EngineRequest]:
    return [EngineRequest(prompt=p, options=GREEDY) for p in PROMPTS]


@pytest.mark.parametrize("check", engine_conformance.CHECKS, ids=lambda c: c.__name__)
def test_one_slot_over_a_models_streams_keeps_the_engine_contract(llama: Any, check: Any) -> None:
    check(EngineKit(StreamEngine(llama), requests()))


def test_one_slot_over_the_models_streams_gives_its_own_greedy_tokens(llama: Any) -> None:
    expected = [[t.id for t in llama.generate(p, **GREEDY)] for p in PROMPTS]
    assert [r.ids for r in drive(StreamEngine(llama), requests())] == expected
    assert [r.ids for r in drive(llama.engine(), requests())] == expected  # the model's own engine


class Slots:
    """A slot-keyed BatchEngine stand-in: each slot says "x" once a step until its max_tokens."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.busy: dict[int, list[int]] = {}
        self.closed = False

    def free_slots(self) -> int:
        return self.slots - len(self.busy)

    def admit(self, prompt: str | None = None, messages: Any = (), **opts: Any) -> Admission:
        max_tokens = GenerateOptions.parse(opts).max_tokens
        slot = min(set(range(self.slots)) - set(self.busy))
        self.busy[slot] = [0, 3 if max_tokens is None else max_tokens]
        return Admission(slot, 2, 0)

    def step(self) -> StepReport:
        outputs = []
        for slot, state in list(self.busy.items()):
            state[0] += 1
            done = state[0] >= state[1]
            if done:
                del self.busy[slot]
            outputs.append(
                SlotOutput(slot, Token(7, "x"), "length" if done else None, GenerateMetrics() if done else None)
            )
        return StepReport(tuple(outputs), len(outputs), len(outputs))

    def release(self, slot: int) -> GenerateMetrics | None:
        return GenerateMetrics(finish_reason="cancelled") if self.busy.pop(slot, None) else None

    def close(self) -> None:
        self.closed = True


class BatchingStandIn(ScriptedModel):
    def __init__(self) -> None:
        super().__init__()
        self.batch = Slots(2)

    def batch_slots(self) -> int:
        return 2

    def open_batch(self) -> Slots:
        return self.batch


def test_a_slot_keyed_batch_engine_behind_handles_never_reuses_one() -> None:
    model = BatchingStandIn()
    engine = engine_of(model)
    assert isinstance(engine, SlotEngine) and engine.slots == 2
    runs = drive(
        engine, [EngineRequest(prompt=p, options={"max_tokens": n}) for p, n in (("a", 2), ("b", 3), ("c", 1))]
    )
    assert [r.text for r in runs] == ["xx", "xxx", "x"] and all(r.finish_reason == "length" for r in runs)
    first = engine.admit(EngineRequest(prompt="d", options={"max_tokens": 5}))
    assert engine.release(first.handle) is not None and engine.release(first.handle) is None
    second = engine.admit(EngineRequest(prompt="e"))  # the same slot again, a new handle
    assert second.handle != first.handle and engine.release(first.handle) is None and engine.free_slots() == 1
    engine.close()
    assert model.batch.closed


def test_engine_of_picks_the_models_own_engine_else_its_streams(llama: Any) -> None:
    assert isinstance(engine_of(ScriptedModel(["a", "b"])), StreamEngine)
    assert engine_of(llama) is llama.engine()


def test_a_stream_engine_turns_a_models_failure_into_an_error_output_after_its_tokens() -> None:
    (run,) = drive(StreamEngine(ScriptedModel(fail_after=2)), [EngineRequest(prompt="p", options={"max_tokens": 9})])
    assert run.text == "ab" and run.finish_reason == "error" and "exploded" in str(run.error)
    (run,) = drive(StreamEngine(ScriptedModel(["x", "y"], max_tokens=5)), [EngineRequest(prompt="p")])
    assert run.text == "xy" and run.finish_reason == "stop" and run.error is None

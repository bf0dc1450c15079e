"""The transformers engine on the tiny random Llama: the engine conformance kit, then what the kit cannot see.

Rows join a running batch (their caches spliced in, left-padded) and leave it as they finish; greedy output must
equal the one-slot engine's (and so `generate`'s) for every row, and per-row options must stay per row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

from modelhost.backends.transformers import TransformersBackend
from modelhost.backends.transformers.engine import TransformersEngine
from modelhost.backends.transformers.model import TransformersModel
from modelhost.errors import InvalidInputError, InvalidOptionError
from modelhost.inference import engine_conformance
from modelhost.inference.engine import Engine, EngineModel, EngineRequest
from modelhost.inference.engine_conformance import EngineKit, drive
from modelhost.inference.types import Message

PROMPTS = [
    "Hello",
    "The quick brown fox jumps over the lazy dog.",
    "1 2 3",
    "What is the answer?",
    "Once upon a time there was",
    "hello world",
]


@pytest.fixture(scope="module")
def model(tiny_llama_dir: Path) -> Iterator[TransformersModel]:
    with TransformersBackend().load_model(str(tiny_llama_dir), threads=1) as m:
        assert isinstance(m, TransformersModel)
        yield m


@pytest.fixture(scope="module")
def single(tiny_llama_dir: Path) -> Iterator[TransformersModel]:
    with TransformersBackend().load_model(str(tiny_llama_dir), threads=1, parallel=1) as m:
        assert isinstance(m, TransformersModel)
        yield m


@pytest.mark.parametrize("check", engine_conformance.CHECKS, ids=lambda c: c.__name__)
def test_engine_conformance(model: TransformersModel, single: TransformersModel, check: Any) -> None:
    requests = [EngineRequest(prompt=p, options={"max_tokens": 6, "temperature": 0}) for p in PROMPTS[:4]]
    check(EngineKit(model.engine(), requests, single=single.engine()))


def test_the_model_is_an_engine_model_with_four_slots_by_default(model: TransformersModel) -> None:
    assert isinstance(model, EngineModel)
    engine = model.engine()
    assert isinstance(engine, Engine) and isinstance(engine, TransformersEngine)
    assert engine is model.engine(), "a model has one engine"
    assert engine.slots == 4 and engine.free_slots() == 4


def test_batched_greedy_output_equals_sequential_as_rows_join_and_leave(model: TransformersModel) -> None:
    requests = [
        EngineRequest(prompt=p, options={"max_tokens": n, "temperature": 0})
        for p, n in zip(PROMPTS, (12, 5, 9, 14, 7, 10), strict=True)
    ]
    expected = [[t.id for t in model.generate(r.prompt or "", **r.options.as_kwargs())] for r in requests]
    runs = drive(model.engine(), requests, joins={i: i * 2 for i in range(len(requests))})  # a new row every other step
    assert [r.ids for r in runs] == expected


def test_per_row_options_and_chat(model: TransformersModel) -> None:
    chat = (Message("user", "hi"),)
    requests = [
        EngineRequest(prompt=PROMPTS[0], options={"max_tokens": 6, "temperature": 0, "suppress_tokens": [5, 6, 7]}),
        EngineRequest(prompt=PROMPTS[1], options={"max_tokens": 0}),
        EngineRequest(prompt=PROMPTS[2], options={"max_tokens": 8, "temperature": 0.8, "seed": 3}),
        EngineRequest(messages=chat, options={"max_tokens": 6, "temperature": 0}),
    ]
    expected = [
        [
            t.id
            for t in (
                model.chat(r.messages, **r.options.as_kwargs())
                if r.messages
                else model.generate(r.prompt or "", **r.options.as_kwargs())
            )
        ]
        for r in requests
    ]
    runs = drive(model.engine(), requests)
    assert [r.ids for r in runs] == expected
    assert runs[1].finish_reason == "length" and runs[1].tokens == []


def test_release_drops_the_row_and_the_rest_decode_on(model: TransformersModel) -> None:
    engine = model.engine()
    a = engine.admit(EngineRequest(prompt=PROMPTS[0], options={"max_tokens": 30, "temperature": 0}))
    b = engine.admit(EngineRequest(prompt=PROMPTS[1], options={"max_tokens": 30, "temperature": 0}))
    for _ in range(3):
        engine.step()
    m = engine.release(a.handle)
    assert m is not None and m.finish_reason == "cancelled" and engine.release(a.handle) is None
    assert set(engine.step().outputs) == {b.handle}
    with pytest.raises(InvalidOptionError):
        engine.admit(EngineRequest(prompt=PROMPTS[0], options={"temperature": -1}))
    assert engine.free_slots() == 3
    engine.release(b.handle)
    assert engine.free_slots() == 4


def test_prompt_ids_are_checked_and_run_as_the_text_they_spell(model: TransformersModel) -> None:
    opts = {"max_tokens": 6, "temperature": 0}
    ids = model.prompts.raw(PROMPTS[1]).ids
    (by_ids,) = drive(model.engine(), [EngineRequest(prompt_ids=ids, options=opts)])
    assert by_ids.ids == [t.id for t in model.generate(PROMPTS[1], **opts)]
    vocab = model.info().vocab_size
    for bad in ((), (1, vocab), (1, -1)):
        with pytest.raises(InvalidInputError):
            model.engine().admit(EngineRequest(prompt_ids=bad, options=opts))
    assert model.engine().free_slots() == model.engine().slots, "a refused request takes no slot"


def test_a_step_that_fails_ends_every_request_it_cut_short(
    model: TransformersModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = model.engine()
    running = engine.admit(EngineRequest(prompt=PROMPTS[0], options={"max_tokens": 30, "temperature": 0}))
    engine.step()  # prefilled, decoding from the next step
    joining = engine.admit(EngineRequest(prompt=PROMPTS[1], options={"max_tokens": 30, "temperature": 0}))

    real = model.runner.forward
    calls: list[int] = []

    def prefill_fails(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:  # the step's decode forward runs; the joining row's prefill fails
            raise RuntimeError("simulated device failure")
        return real(*args, **kwargs)

    monkeypatch.setattr(model.runner, "forward", prefill_fails)
    outputs = engine.step().outputs
    monkeypatch.undo()
    for handle in (running.handle, joining.handle):  # the decoding row, and the row whose prefill failed
        assert outputs[handle].finish_reason == "error" and "simulated device failure" in str(outputs[handle].error)
    assert len(outputs[running.handle].tokens) == 1, "the token the step's decode made is still shown"
    assert engine.free_slots() == engine.slots
    (after,) = drive(engine, [EngineRequest(prompt=PROMPTS[2], options={"max_tokens": 3, "temperature": 0})])
    assert after.finish_reason == "length" and len(after.tokens) == 3, "the engine serves on after a failed step"


def test_concurrent_requests_through_the_host(model: TransformersModel, tiny_llama_dir: Path) -> None:
    from modelhost.host import Delta, GenerationRequest, Host

    own = TransformersBackend().load_model(str(tiny_llama_dir), threads=1, parallel=2)
    opts = {"max_tokens": 8, "temperature": 0}
    expected = ["".join(t.text for t in own.generate(p, **opts)) for p in PROMPTS[:4]]

    async def main() -> list[str]:
        host = Host.from_model(own, name="tiny")
        await host.start()
        assert host.slots == 2
        streams = [host.submit(GenerationRequest(prompt=p, options=opts)) for p in PROMPTS[:4]]
        texts = ["".join([e.text async for e in s if isinstance(e, Delta)]) for s in streams]
        await host.aclose()
        return texts

    assert asyncio.run(main()) == expected

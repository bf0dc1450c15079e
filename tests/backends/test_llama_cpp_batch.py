"""The llama_cpp engine (engine.py) on the tiny random Llama GGUF: one context of `parallel` slots, the engine
conformance kit, and what the kit cannot see (prefix reuse per slot, bounded prefill, the slot's context).

Greedy output must not depend on the company a request keeps: the engine evaluates each prompt chunk and each
decode token the same way whatever else runs beside it (see engine.py). A random model has no meaning to check,
so every test compares the engine with itself: N slots against one slot, together against alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp")

from modelhost.backends.llama_cpp import LlamaCppBackend
from modelhost.backends.llama_cpp.engine import PREFILL_CHUNK, LlamaEngine, chunk_size
from modelhost.backends.llama_cpp.model import LlamaCppModel
from modelhost.errors import InvalidInputError, InvalidOptionError
from modelhost.inference import engine_conformance
from modelhost.inference.adapters import engine_of
from modelhost.inference.capabilities import as_capability
from modelhost.inference.engine import Engine, EngineModel, EngineRequest
from modelhost.inference.engine_conformance import EngineKit, drive
from modelhost.inference.types import Message

PROMPTS = [
    "The quick brown fox",
    "Once upon a time",
    "A long time ago in a galaxy",
    "hello",
    "Lorem ipsum dolor sit amet",
    "The quick brown dog jumps",
]
GREEDY = {"max_tokens": 24, "min_tokens": 24, "temperature": 0}


@pytest.fixture(scope="module")
def model(tiny_llama_gguf: Path) -> Iterator[LlamaCppModel]:
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=4) as m:
        assert isinstance(m, LlamaCppModel)
        yield m


@pytest.fixture(scope="module")
def one(tiny_llama_gguf: Path) -> Iterator[LlamaCppModel]:
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=1) as m:
        assert isinstance(m, LlamaCppModel)
        yield m


def request(prompt: str, **opts: Any) -> EngineRequest:
    return EngineRequest(prompt=prompt, options=opts)


def sequential(model: LlamaCppModel, prompt: str, **opts: Any) -> list[int]:
    return [t.id for t in model.generate(prompt, **opts)]


@pytest.mark.parametrize("check", engine_conformance.CHECKS, ids=lambda c: c.__name__)
def test_engine_conformance(model: LlamaCppModel, one: LlamaCppModel, check: Any) -> None:
    check(EngineKit(model.engine(), [request(p, max_tokens=12, temperature=0) for p in PROMPTS], one.engine()))


@pytest.mark.parametrize("check", engine_conformance.CHECKS, ids=lambda c: c.__name__)
def test_engine_conformance_at_one_slot(one: LlamaCppModel, check: Any) -> None:
    check(EngineKit(one.engine(), [request(p, max_tokens=12, temperature=0) for p in PROMPTS]))


def test_the_engine_is_the_models_one_and_parallel_sets_its_slots(model: LlamaCppModel, one: LlamaCppModel) -> None:
    engine = model.engine()
    assert as_capability(model, EngineModel) is model and engine_of(model) is engine is model.engine()
    assert isinstance(engine, Engine) and isinstance(engine, LlamaEngine)
    assert engine.slots == model.batch_slots() == 4 and engine.free_slots() == 4
    assert engine.slot_context == model.context_length
    assert one.engine().slots == one.batch_slots() == 1


def test_batched_greedy_output_equals_one_slot(model: LlamaCppModel, one: LlamaCppModel) -> None:
    expected = [sequential(one, p, **GREEDY) for p in PROMPTS]
    assert [sequential(model, p, **GREEDY) for p in PROMPTS] == expected  # the Python API over the N-slot engine
    # Six requests over four slots: two join mid-stream, as slots free up, while the others decode.
    assert [r.ids for r in drive(model.engine(), [request(p, **GREEDY) for p in PROMPTS])] == expected
    # Again, now with every slot's cache holding an earlier prompt (prefix reuse on the same engine).
    again = drive(model.engine(), [request(p, **GREEDY) for p in reversed(PROMPTS)])
    assert [r.ids for r in again] == expected[::-1]


def test_each_slot_keeps_its_own_options(model: LlamaCppModel, one: LlamaCppModel) -> None:
    requests: list[dict[str, Any]] = [
        {"prompt": PROMPTS[0], "max_tokens": 3, "temperature": 0},
        {"prompt": PROMPTS[1], "max_tokens": 12, "temperature": 0, "stop_tokens": [5]},
        {"prompt": PROMPTS[2], "max_tokens": 10, "temperature": 0.9, "seed": 7},
        {"prompt": PROMPTS[3], "max_tokens": 0},
        {"prompt": PROMPTS[4], "max_tokens": 9, "temperature": 0, "suppress_tokens": [5, 6, 7]},
    ]
    expected = [sequential(one, **r) for r in requests]
    got = drive(model.engine(), [request(**r) for r in requests])
    assert [r.ids for r in got] == expected
    assert expected[3] == [] and len(expected[0]) == 3


def test_prefix_reuse_picks_the_slot_with_the_longest_shared_prefix(model: LlamaCppModel) -> None:
    engine = model.engine()
    opts = {"max_tokens": 2, "temperature": 0}
    drive(engine, [request(p, **opts) for p in ("zzz unrelated", "yyy other", "xxx third", "www fourth")])
    first = engine.admit(request(PROMPTS[0], **opts))
    other = engine.admit(request(PROMPTS[2], **opts))
    assert first.cached_prompt_tokens == 0 and other.cached_prompt_tokens == 0
    while engine.free_slots() < 4:
        engine.step()
    again = engine.admit(request(PROMPTS[5], **opts))  # shares "The quick brown" with PROMPTS[0]
    assert 0 < again.cached_prompt_tokens < again.prompt_tokens
    result = engine.step()
    assert result.prompt_tokens == again.prompt_tokens - again.cached_prompt_tokens
    final = None
    while engine.free_slots() < 4:
        final = engine.step().outputs.get(again.handle) or final
    assert final is not None and final.metrics is not None
    assert final.metrics.cached_prompt_tokens == again.cached_prompt_tokens


def test_prefill_is_bounded_per_step_and_decoding_slots_keep_flowing(model: LlamaCppModel) -> None:
    engine = model.engine()
    long_prompt = " ".join(["word"] * 150)  # ~300 tokens: two chunks
    running = engine.admit(request(PROMPTS[0], max_tokens=40, min_tokens=40, temperature=0))
    engine.step()  # its prefill, and its first token
    long = engine.admit(request(long_prompt, max_tokens=4, temperature=0))
    try:
        assert long.prompt_tokens > PREFILL_CHUNK
        steps = 0
        while True:
            result = engine.step()
            steps += 1
            assert result.prompt_tokens <= PREFILL_CHUNK
            assert result.outputs[running.handle].tokens, "the decoding request must get a token every step"
            if long.handle in result.outputs:
                break
        assert steps >= 2
    finally:
        engine.release(running.handle)
        engine.release(long.handle)
    assert chunk_size(17, 16) == 15 and chunk_size(16, 16) == 16 and chunk_size(2, 1) == 0


def test_a_lone_prompt_is_prefilled_in_one_step(one: LlamaCppModel) -> None:
    engine = one.engine()
    long_prompt = " ".join(["word"] * 150)
    admitted = engine.admit(request(long_prompt, max_tokens=2, temperature=0))
    result = engine.step()
    assert result.prompt_tokens == admitted.prompt_tokens - admitted.cached_prompt_tokens
    assert admitted.handle in result.outputs  # its first token already
    engine.release(admitted.handle)


def test_release_frees_the_slot_at_once_and_the_engine_goes_on(model: LlamaCppModel) -> None:
    engine = model.engine()
    opts = {"max_tokens": 50, "min_tokens": 50, "temperature": 0}
    a = engine.admit(request(PROMPTS[0], **opts))
    b = engine.admit(request(PROMPTS[1], **opts))
    for _ in range(3):
        engine.step()
    metrics = engine.release(a.handle)
    assert metrics is not None and metrics.finish_reason == "cancelled" and metrics.generated_tokens == 3
    assert engine.release(a.handle) is None  # idempotent
    assert engine.free_slots() == 3
    assert set(engine.step().outputs) == {b.handle}
    engine.release(b.handle)


def test_bad_requests_are_refused_at_admission_and_take_no_slot(model: LlamaCppModel) -> None:
    engine = model.engine()
    with pytest.raises(InvalidOptionError):
        engine.admit(request(PROMPTS[0], max_tokens=-1))
    with pytest.raises(InvalidInputError):
        engine.admit(request(" ".join(["word"] * 2000)))
    with pytest.raises(InvalidInputError, match="prompt_ids"):
        engine.admit(EngineRequest(prompt_ids=(1, 10**9)))
    assert engine.free_slots() == 4
    handles = [engine.admit(request(PROMPTS[0], max_tokens=1)).handle for _ in range(4)]
    with pytest.raises(RuntimeError, match="no free slot"):
        engine.admit(request(PROMPTS[0]))
    for handle in handles:
        engine.release(handle)


def test_prompt_ids_are_a_prompt_too(model: LlamaCppModel) -> None:
    ids = tuple(model.vocab.encode(PROMPTS[0], chat=False, limit=model.context_length))
    (run,) = drive(model.engine(), [EngineRequest(prompt_ids=ids, options={"max_tokens": 8, "temperature": 0})])
    assert run.ids == sequential(model, PROMPTS[0], max_tokens=8, temperature=0)


def test_a_full_slot_context_ends_with_length(tiny_llama_gguf: Path) -> None:
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=2, context_length=16) as m:
        alone = LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=1, context_length=16)
        with alone:
            expected = sequential(alone, PROMPTS[0], max_tokens=100, temperature=0)
        (run,) = drive(m.engine(), [request(PROMPTS[0], max_tokens=100, temperature=0)])
        assert run.finish_reason == "length" and run.ids == expected


def test_a_long_prompt_is_the_same_at_one_slot_and_at_four_and_its_prefix_is_reused(tiny_llama_gguf: Path) -> None:
    # Each slot holds a whole context_length, so a prompt that needs most of it runs at any slot count.
    long_prompt = " ".join(PROMPTS * 12)
    opts = {"max_tokens": 8, "temperature": 0}
    load = LlamaCppBackend().load_model
    with load(str(tiny_llama_gguf), threads=1, parallel=4, context_length=1024) as m:
        n = len(m.encode(long_prompt))
        assert PREFILL_CHUNK < n < m.context_length
        batched = drive(m.engine(), [request(long_prompt, **opts), request(PROMPTS[0], **opts)])[0].ids
        assert sequential(m, long_prompt, **opts) == batched
        assert sequential(m, long_prompt, max_tokens=1, temperature=0) == batched[:1]
        assert m.metrics().cached_prompt_tokens == n - 1
    with load(str(tiny_llama_gguf), threads=1, parallel=1, context_length=1024) as single:
        assert sequential(single, long_prompt, **opts) == batched


def test_chat_messages_are_admitted_with_the_template(model: LlamaCppModel) -> None:
    messages = (Message("user", "hi there"),)
    expected = [t.id for t in model.chat(messages, max_tokens=6, temperature=0)]
    (run,) = drive(model.engine(), [EngineRequest(messages=messages, options={"max_tokens": 6, "temperature": 0})])
    assert run.ids == expected


def test_prompts_arriving_together_start_together_and_answer_as_alone(model: LlamaCppModel, one: LlamaCppModel) -> None:
    # Short prompts fit one step's budget: all four are prefilled in the first step (a decode step saved for each
    # but the first, issue 36), each in its own chunk as before, so each answers as it does alone.
    engine = model.engine()
    drive(engine, [request(p + " fresh", max_tokens=1) for p in PROMPTS[:4]])  # caches that share nothing useful
    admitted = [engine.admit(request(p, **GREEDY)) for p in PROMPTS[:4]]
    result = engine.step()
    assert result.prompt_tokens == sum(a.prompt_tokens - a.cached_prompt_tokens for a in admitted)
    assert all(a.handle in result.outputs and result.outputs[a.handle].tokens for a in admitted)
    ids = {a.handle: [t.id for t in result.outputs[a.handle].tokens] for a in admitted}
    while engine.free_slots() < 4:
        for handle, out in engine.step().outputs.items():
            ids[handle] += [t.id for t in out.tokens]
    assert [ids[a.handle] for a in admitted] == [sequential(one, p, **GREEDY) for p in PROMPTS[:4]]


def test_a_prompt_beyond_the_steps_budget_waits_for_the_next_step(model: LlamaCppModel) -> None:
    engine = model.engine()
    running = engine.admit(request(PROMPTS[0], max_tokens=40, min_tokens=40, temperature=0))
    engine.step()  # its prefill, and its first token: from now on a step's prompts share PREFILL_CHUNK tokens
    long = engine.admit(request(" ".join(["word"] * 100), max_tokens=2, temperature=0))  # ~200 tokens: one chunk
    short = engine.admit(request(" ".join(["sea"] * 60), max_tokens=2, temperature=0))  # ~120: not beside it
    try:
        assert long.prompt_tokens + short.prompt_tokens > PREFILL_CHUNK >= long.prompt_tokens
        first = engine.step()
        assert long.handle in first.outputs and short.handle not in first.outputs
        assert first.prompt_tokens == long.prompt_tokens - long.cached_prompt_tokens
        assert short.handle in engine.step().outputs
    finally:
        for handle in (running.handle, long.handle, short.handle):
            engine.release(handle)


def test_classify_requests_run_beside_generation(model: LlamaCppModel) -> None:
    engine = model.engine()
    runs = drive(
        engine,
        [
            request(PROMPTS[0], max_tokens=6, temperature=0),
            EngineRequest(prompt=PROMPTS[1], options={"temperature": 0, "logits": True}, classify=True),
        ],
    )
    assert runs[1].finish_reason == "length" and len(runs[1].tokens) == 1
    assert runs[1].outputs[-1].logits.shape == (model.info().vocab_size,)
    assert runs[1].ids == sequential(model, PROMPTS[1], max_tokens=1, temperature=0)
    assert runs[0].ids == sequential(model, PROMPTS[0], max_tokens=6, temperature=0)

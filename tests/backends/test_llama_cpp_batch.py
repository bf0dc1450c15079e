"""The llama_cpp continuous-batching engine on the tiny random Llama GGUF: the same tokens as one at a time.

Greedy output under batching must equal the one-at-a-time output (the engine evaluates each prompt chunk and each
decode token the way the one-at-a-time path does; see batch.py). A random model has no meaning to check, so every
test compares the engine with the model's own `generate`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp")

from modelhost.backends.llama_cpp import LlamaCppBackend
from modelhost.backends.llama_cpp.batch import LlamaBatchEngine, _chunk_size
from modelhost.backends.llama_cpp.model import LlamaCppModel
from modelhost.errors import InvalidInputError, InvalidOptionError
from modelhost.inference.capabilities import BatchEngine, BatchingModel, as_capability, batch_slots

PROMPTS = [
    "The quick brown fox",
    "Once upon a time",
    "A long time ago in a galaxy",
    "hello",
    "Lorem ipsum dolor sit amet",
    "The quick brown dog jumps",
]


@pytest.fixture(scope="module")
def model(tiny_llama_gguf: Path) -> Iterator[LlamaCppModel]:
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=4) as m:
        assert isinstance(m, LlamaCppModel)
        yield m


def drive(engine: LlamaBatchEngine, requests: list[tuple[int, dict[str, Any]]]) -> dict[int, list[int]]:
    """Admit (step, options) requests as their step comes and slots free up; run to the end; ids per request."""
    out: dict[int, list[int]] = {i: [] for i in range(len(requests))}
    waiting = list(enumerate(requests))
    live: dict[int, int] = {}
    step = 0
    while waiting or live:
        while waiting and waiting[0][1][0] <= step and engine.free_slots():
            i, (_, opts) = waiting.pop(0)
            live[engine.admit(**opts).slot] = i
        report = engine.step()
        step += 1
        for o in report.outputs:
            if o.token is not None:
                out[live[o.slot]].append(o.token.id)
            if o.finish_reason is not None:
                assert o.error is None, o.error
                del live[o.slot]
    return out


def sequential(model: LlamaCppModel, prompt: str, **opts: Any) -> list[int]:
    return [t.id for t in model.generate(prompt, **opts)]


def test_the_capability_is_discovered_and_parallel_sets_the_slots(model: LlamaCppModel, tiny_llama_gguf: Path) -> None:
    assert isinstance(model, BatchingModel) and as_capability(model, BatchingModel) is model
    assert batch_slots(model) == 4
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=1) as one:
        assert batch_slots(one) == 1
    with model.open_batch() as engine:
        assert isinstance(engine, BatchEngine)
        assert engine.slots == 4 and engine.free_slots() == 4 and engine.slot_context == model.context_length


def test_batched_greedy_output_equals_sequential(model: LlamaCppModel) -> None:
    opts = {"max_tokens": 24, "min_tokens": 24, "temperature": 0}
    expected = [sequential(model, p, **opts) for p in PROMPTS]
    with model.open_batch() as engine:
        # Six requests over four slots: two join mid-stream, as slots free up, while the others decode.
        got = drive(engine, [(i, {"prompt": p, **opts}) for i, p in enumerate(PROMPTS)])
        assert [got[i] for i in range(len(PROMPTS))] == expected
        # Again, now with every slot's cache holding an earlier prompt (prefix reuse on the same engine).
        got = drive(engine, [(0, {"prompt": p, **opts}) for p in reversed(PROMPTS)])
        assert [got[i] for i in range(len(PROMPTS))] == expected[::-1]


def test_each_slot_keeps_its_own_options(model: LlamaCppModel) -> None:
    requests: list[dict[str, Any]] = [
        {"prompt": PROMPTS[0], "max_tokens": 3, "temperature": 0},
        {"prompt": PROMPTS[1], "max_tokens": 12, "temperature": 0, "stop_tokens": [5]},
        {"prompt": PROMPTS[2], "max_tokens": 10, "temperature": 0.9, "seed": 7},
        {"prompt": PROMPTS[3], "max_tokens": 0},
        {"prompt": PROMPTS[4], "max_tokens": 9, "temperature": 0, "suppress_tokens": [5, 6, 7]},
    ]
    expected = [sequential(model, **r) for r in requests]
    with model.open_batch() as engine:
        got = drive(engine, [(0, r) for r in requests])
    assert [got[i] for i in range(len(requests))] == expected
    assert expected[3] == [] and len(expected[0]) == 3


def test_prefix_reuse_picks_the_slot_with_the_longest_shared_prefix(model: LlamaCppModel) -> None:
    opts = {"max_tokens": 2, "temperature": 0}
    with model.open_batch() as engine:
        first = engine.admit(PROMPTS[0], **opts)
        other = engine.admit(PROMPTS[2], **opts)
        assert first.cached_prompt_tokens == 0 and other.cached_prompt_tokens == 0
        while engine.free_slots() < 4:
            engine.step()
        again = engine.admit(PROMPTS[5], **opts)  # shares "The quick brown" with PROMPTS[0]
        assert again.slot == first.slot and 0 < again.cached_prompt_tokens < again.prompt_tokens
        report = engine.step()
        assert report.prompt_tokens == again.prompt_tokens - again.cached_prompt_tokens
        while engine.free_slots() < 4:
            report = engine.step()
        finished = [o for o in report.outputs if o.finish_reason is not None]
        assert finished and finished[0].metrics is not None
        assert finished[0].metrics.cached_prompt_tokens == again.cached_prompt_tokens


def test_prefill_is_bounded_per_step_and_decoding_slots_keep_flowing(model: LlamaCppModel) -> None:
    long_prompt = " ".join(["word"] * 60)
    opts = {"temperature": 0}
    with LlamaBatchEngine(model, 2, prefill_chunk=16) as engine:
        running = engine.admit(PROMPTS[0], max_tokens=40, **opts)
        engine.step()  # its prefill, and its first token
        long = engine.admit(long_prompt, max_tokens=4, **opts)
        assert long.prompt_tokens > 32
        steps = 0
        while True:
            report = engine.step()
            steps += 1
            assert report.prompt_tokens <= 16
            assert any(o.slot == running.slot and o.token is not None for o in report.outputs)
            if any(o.slot == long.slot for o in report.outputs):
                break
        assert steps >= long.prompt_tokens // 16
    assert _chunk_size(17, 16) == 15 and _chunk_size(16, 16) == 16 and _chunk_size(2, 1) == 0


def test_release_frees_the_slot_at_once_and_the_engine_goes_on(model: LlamaCppModel) -> None:
    opts = {"max_tokens": 50, "temperature": 0}
    with model.open_batch() as engine:
        a = engine.admit(PROMPTS[0], **opts)
        b = engine.admit(PROMPTS[1], **opts)
        for _ in range(3):
            engine.step()
        metrics = engine.release(a.slot)
        assert metrics is not None and metrics.finish_reason == "cancelled" and metrics.generated_tokens == 3
        assert engine.release(a.slot) is None  # idempotent
        assert engine.free_slots() == 3
        report = engine.step()
        assert {o.slot for o in report.outputs} == {b.slot}


def test_bad_requests_are_refused_at_admission_and_take_no_slot(model: LlamaCppModel) -> None:
    with model.open_batch() as engine:
        with pytest.raises(InvalidOptionError):
            engine.admit(PROMPTS[0], max_tokens=-1)
        with pytest.raises(InvalidInputError):
            engine.admit(" ".join(["word"] * 2000))
        assert engine.free_slots() == 4
        for _ in range(4):
            engine.admit(PROMPTS[0], max_tokens=1)
        with pytest.raises(RuntimeError, match="no free slot"):
            engine.admit(PROMPTS[0])


def test_a_full_slot_context_ends_with_length(tiny_llama_gguf: Path) -> None:
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=2, context_length=16) as m:
        expected = sequential(m, PROMPTS[0], max_tokens=100, temperature=0)
        with m.open_batch() as engine:
            engine.admit(PROMPTS[0], max_tokens=100, temperature=0)
            tokens, reason = [], None
            while reason is None:
                for o in engine.step().outputs:
                    tokens += [o.token.id] if o.token is not None else []
                    reason = o.finish_reason
        assert reason == "length" and tokens == expected


def test_a_batching_model_holds_only_a_standby_context_until_a_one_at_a_time_call(tiny_llama_gguf: Path) -> None:
    # The memory win: the engine's context serves every batched request, so the Llama's own context stays at
    # llama.cpp's minimum (256 cells) instead of holding a second, idle copy of a whole context.
    long_prompt = " ".join(PROMPTS * 12)
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=4, context_length=1024) as m:
        standby = m._llm.n_ctx()
        assert standby < m.context_length
        n = len(m.encode(long_prompt))
        assert standby < n < m.context_length  # a prompt the standby context could not hold
        with m.open_batch() as engine:
            batched = drive(engine, [(0, {"prompt": long_prompt, "max_tokens": 8, "temperature": 0})])[0]
            assert m._llm.n_ctx() == standby
        # The first one-at-a-time call grows the context to context_length; the long prompt works, gives the
        # engine's tokens, and the grown context reuses its prefix as before.
        assert sequential(m, long_prompt, max_tokens=8, temperature=0) == batched
        assert m._llm.n_ctx() >= m.context_length
        assert sequential(m, long_prompt, max_tokens=1, temperature=0) == batched[:1]
        assert m.metrics().cached_prompt_tokens == n - 1
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=1, context_length=1024) as one:
        assert one._llm.n_ctx() >= one.context_length  # served one at a time: full size from the load


def test_chat_messages_are_admitted_with_the_template(model: LlamaCppModel) -> None:
    from modelhost.inference.types import Message

    messages = [Message("user", "hi there")]
    expected = [t.id for t in model.chat(messages, max_tokens=6, temperature=0)]
    with model.open_batch() as engine:
        got = drive(engine, [(0, {"messages": messages, "max_tokens": 6, "temperature": 0})])
    assert got[0] == expected


def test_prompts_arriving_together_start_one_step_apart(model: LlamaCppModel) -> None:
    # A step's outputs leave together: one prompt per step lets the first stream start after its own prefill.
    with model.open_batch() as engine:
        slots = [engine.admit(p, max_tokens=8, temperature=0).slot for p in PROMPTS[:4]]
        started: list[int] = []
        for _ in range(4):
            report = engine.step()
            assert report.prompt_tokens > 0
            started += [o.slot for o in report.outputs if o.slot not in started]
            assert started == slots[: len(started)]
        assert started == slots

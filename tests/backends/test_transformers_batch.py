"""The transformers continuous-batching engine on the tiny random Llama: the same tokens as one at a time.

Rows join a running batch (their caches spliced in, left-padded) and leave it as they finish; greedy output must
equal `generate` for every row, and per-row options must stay per row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

from modelhost.backends.transformers import TransformersBackend
from modelhost.backends.transformers.batch import TransformersBatchEngine
from modelhost.backends.transformers.model import TransformersModel
from modelhost.errors import InvalidOptionError
from modelhost.inference.capabilities import BatchEngine, BatchingModel, batch_slots
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


def drive(engine: TransformersBatchEngine, requests: list[tuple[int, dict[str, Any]]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {i: [] for i in range(len(requests))}
    waiting = list(enumerate(requests))
    live: dict[int, int] = {}
    step = 0
    while waiting or live:
        while waiting and waiting[0][1][0] <= step and engine.free_slots():
            i, (_, opts) = waiting.pop(0)
            live[engine.admit(**opts).slot] = i
        step += 1
        for o in engine.step().outputs:
            if o.token is not None:
                out[live[o.slot]].append(o.token.id)
            if o.finish_reason is not None:
                assert o.error is None, o.error
                del live[o.slot]
    return out


def test_the_capability_defaults_to_four_slots(model: TransformersModel) -> None:
    assert isinstance(model, BatchingModel) and batch_slots(model) == 4
    with model.open_batch() as engine:
        assert isinstance(engine, BatchEngine) and engine.slots == 4 and engine.free_slots() == 4


def test_batched_greedy_output_equals_sequential_as_rows_join_and_leave(model: TransformersModel) -> None:
    requests: list[dict[str, Any]] = [
        {"prompt": p, "max_tokens": n, "temperature": 0} for p, n in zip(PROMPTS, (12, 5, 9, 14, 7, 10), strict=True)
    ]
    expected = [[t.id for t in model.generate(**r)] for r in requests]
    with model.open_batch() as engine:
        got = drive(engine, [(i * 2, r) for i, r in enumerate(requests)])  # a new row every other step
    assert [got[i] for i in range(len(requests))] == expected


def test_per_row_options_and_chat(model: TransformersModel) -> None:
    chat = [Message("user", "hi")]
    requests: list[dict[str, Any]] = [
        {"prompt": PROMPTS[0], "max_tokens": 6, "temperature": 0, "suppress_tokens": [5, 6, 7]},
        {"prompt": PROMPTS[1], "max_tokens": 0},
        {"prompt": PROMPTS[2], "max_tokens": 8, "temperature": 0.8, "seed": 3},
        {"messages": chat, "max_tokens": 6, "temperature": 0},
    ]
    expected = [
        [t.id for t in (model.chat(**r) if "messages" in r else model.generate(**r))]  # type: ignore[arg-type]
        for r in requests
    ]
    with model.open_batch() as engine:
        got = drive(engine, [(0, r) for r in requests])
    assert [got[i] for i in range(len(requests))] == expected


def test_release_drops_the_row_and_the_rest_decode_on(model: TransformersModel) -> None:
    with model.open_batch() as engine:
        a = engine.admit(PROMPTS[0], max_tokens=30, temperature=0)
        b = engine.admit(PROMPTS[1], max_tokens=30, temperature=0)
        for _ in range(3):
            engine.step()
        m = engine.release(a.slot)
        assert m is not None and m.finish_reason == "cancelled" and engine.release(a.slot) is None
        assert {o.slot for o in engine.step().outputs} == {b.slot}
        with pytest.raises(InvalidOptionError):
            engine.admit(PROMPTS[0], temperature=-1)
        assert engine.free_slots() == 3


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

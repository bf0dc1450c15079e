"""Every model is driven as an Engine: the adapters (inference/adapters.py), the Python API over an engine
(inference/over_engine.py) and the engine conformance kit, on the tiny GGUF through llama.cpp and on stand-ins.

The llama.cpp batch engine behind handles and one slot over the model's own streams must both pass the engine kit
and give the model's own greedy tokens; a model whose API is written over an engine must pass the model kit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelhost.errors import InvalidInputError, InvalidOptionError
from modelhost.inference import conformance, engine_conformance
from modelhost.inference.adapters import SlotEngine, StreamEngine, engine_of
from modelhost.inference.engine import Engine, EngineRequest
from modelhost.inference.engine_conformance import EngineKit, drive
from modelhost.inference.over_engine import OverEngine
from modelhost.inference.types import ModelInfo
from modelhost.testing.standins import ScriptedModel

pytest.importorskip("llama_cpp")

from modelhost.backends.llama_cpp import LlamaCppBackend

PROMPTS = ("The quick brown fox", "Once upon a time", "hello", "A long time ago in a galaxy")
GREEDY = {"temperature": 0, "max_tokens": 12}


@pytest.fixture(scope="module")
def llama(tiny_llama_gguf: Path) -> Iterator[Any]:
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=3) as m:
        yield m


@pytest.fixture(scope="module")
def batch_engine(llama: Any) -> Iterator[Engine]:
    engine = SlotEngine(llama.open_batch())
    yield engine
    engine.close()


def requests() -> list[EngineRequest]:
    return [EngineRequest(prompt=p, options=GREEDY) for p in PROMPTS]


@pytest.mark.parametrize("check", engine_conformance.CHECKS, ids=lambda c: c.__name__)
def test_the_llama_batch_engine_behind_handles_keeps_the_engine_contract(
    batch_engine: Engine, llama: Any, check: Any
) -> None:
    check(EngineKit(batch_engine, requests(), single=StreamEngine(llama)))


@pytest.mark.parametrize("check", engine_conformance.CHECKS, ids=lambda c: c.__name__)
def test_one_slot_over_a_models_streams_keeps_the_engine_contract(llama: Any, check: Any) -> None:
    check(EngineKit(StreamEngine(llama), requests()))


def test_both_engines_give_the_models_own_greedy_tokens(llama: Any, batch_engine: Engine) -> None:
    expected = [[t.id for t in llama.generate(p, **GREEDY)] for p in PROMPTS]
    assert [r.ids for r in drive(StreamEngine(llama), requests())] == expected
    assert [r.ids for r in drive(batch_engine, requests())] == expected


class OverLlama(OverEngine):
    """A model whose whole Python API is the shared implementation over the llama batch engine."""

    model_type = "llama"

    def __init__(self, llama: Any) -> None:
        super().__init__()
        self._llama = llama
        self._engine = SlotEngine(llama.open_batch())

    def engine(self) -> Engine:
        return self._engine

    def info(self) -> ModelInfo:
        info: ModelInfo = self._llama.info()
        return info

    def close(self) -> None:
        self._engine.close()

    def __enter__(self) -> OverLlama:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The old slot-keyed batch engine has no classify requests and no embeddings; the rest of the kit holds.
@pytest.mark.parametrize(
    "check",
    [c for c in conformance.CHECKS if c not in (conformance.check_embeddings, conformance.check_classify)],
    ids=lambda c: c.__name__,
)
def test_the_python_api_over_an_engine_keeps_the_model_contract(llama: Any, check: Any) -> None:
    with OverLlama(llama) as model:
        check(model)


def test_the_api_over_an_engine_gives_the_models_own_answers(llama: Any) -> None:
    with OverLlama(llama) as over:
        for prompt in PROMPTS:
            assert [t.id for t in over.generate(prompt, **GREEDY)] == [t.id for t in llama.generate(prompt, **GREEDY)]
        together = over.batch_generate([*PROMPTS, 7], **GREEDY)  # type: ignore[list-item]
        alone = ["".join(t.text for t in llama.generate(p, **GREEDY)) for p in PROMPTS]
        assert [r.text for r in together[:-1]] == alone
        assert isinstance(together[-1].error, InvalidInputError) and together[-1].finish_reason == "error"
        assert over.metrics().generated_tokens == sum(len(r.tokens) for r in together)
        with pytest.raises(InvalidOptionError):
            over.batch_generate(list(PROMPTS), max_tokens=-1)
        # One operation at a time: a new stream ends the one its caller left suspended.
        first = over.generate(PROMPTS[0], **GREEDY)
        next(first)
        second = list(over.generate(PROMPTS[1], **GREEDY))
        assert second and list(first) == [] and over.engine().free_slots() == 3


def test_engine_of_picks_the_models_own_then_its_batch_then_its_streams(llama: Any) -> None:
    scripted = ScriptedModel(["a", "b"])
    assert isinstance(engine_of(scripted), StreamEngine)
    batch = engine_of(llama)
    assert isinstance(batch, SlotEngine) and batch.slots == 3
    batch.close()
    with OverLlama(llama) as over:
        assert engine_of(over) is over.engine()


def test_a_stream_engine_turns_a_models_failure_into_an_error_output_after_its_tokens() -> None:
    (run,) = drive(StreamEngine(ScriptedModel(fail_after=2)), [EngineRequest(prompt="p", options={"max_tokens": 9})])
    assert run.text == "ab" and run.finish_reason == "error" and "exploded" in str(run.error)
    (run,) = drive(StreamEngine(ScriptedModel(["x", "y"], max_tokens=5)), [EngineRequest(prompt="p")])
    assert run.text == "xy" and run.finish_reason == "stop" and run.error is None

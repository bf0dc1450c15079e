"""Every model is driven as an Engine: the adapters (inference/adapters.py) on the tiny GGUF and on stand-ins.

One slot over a model's own streams must pass the engine conformance kit and give the model's own greedy tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelhost.inference import engine_conformance
from modelhost.inference.adapters import StreamEngine, engine_of
from modelhost.inference.engine import EngineRequest
from modelhost.inference.engine_conformance import EngineKit, drive
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


def test_engine_of_picks_the_models_own_engine_else_its_streams(llama: Any) -> None:
    assert isinstance(engine_of(ScriptedModel(["a", "b"])), StreamEngine)
    assert engine_of(llama) is llama.engine()


def test_a_stream_engine_turns_a_models_failure_into_an_error_output_after_its_tokens() -> None:
    (run,) = drive(StreamEngine(ScriptedModel(fail_after=2)), [EngineRequest(prompt="p", options={"max_tokens": 9})])
    assert run.text == "ab" and run.finish_reason == "error" and "exploded" in str(run.error)
    (run,) = drive(StreamEngine(ScriptedModel(["x", "y"], max_tokens=5)), [EngineRequest(prompt="p")])
    assert run.text == "xy" and run.finish_reason == "stop" and run.error is None

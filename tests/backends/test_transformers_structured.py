"""json_schema, logprobs and the thought channel on the transformers backend, over tiny random Llamas.

A random model follows no instruction, so a valid answer can only come from the grammar's mask: every answer here
must parse and validate, one at a time, side by side in the engine's slots and through batch_generate.
Log-probabilities are the model's own (raw logits), so they must equal log_softmax of `classify(logits=True)`'s
logits for the same prompt.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("llguidance")

from modelhost.backends.transformers import TransformersBackend
from modelhost.backends.transformers.grammar import NUMBER_BOUND, bounded
from modelhost.backends.transformers.model import TransformersModel
from modelhost.errors import InvalidOptionError
from modelhost.inference.capabilities import OptionChecker, as_capability
from modelhost.inference.engine import EngineRequest
from modelhost.inference.engine_conformance import drive
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Message

jsonschema = pytest.importorskip("jsonschema")

#: Every value bounded (maxLength, enum, maxItems), so even a random model ends well inside MAX_TOKENS.
SCHEMAS: dict[str, dict[str, Any]] = {
    "object": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "colour": {"enum": ["red", "green", "blue"]},
        },
        "required": ["name", "age", "colour"],
        "additionalProperties": False,
    },
    "enum": {"enum": ["yes", "no", 3, None]},
    "array": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 4},
    "nested": {
        "type": "object",
        "properties": {
            "point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
                "required": ["x", "tags"],
                "additionalProperties": False,
            }
        },
        "required": ["point"],
        "additionalProperties": False,
    },
}
MAX_TOKENS = 200
SAMPLINGS: tuple[dict[str, Any], ...] = ({"temperature": 0}, {"temperature": 1.0, "seed": 3})


def load(path: Path) -> TransformersModel:
    model = TransformersBackend().load_model(str(path))
    assert isinstance(model, TransformersModel)
    return model


@pytest.fixture(scope="module")
def model(tiny_llama_dir: Path) -> Iterator[TransformersModel]:
    with load(tiny_llama_dir) as m:
        yield m


def text(tokens: Any) -> str:
    return "".join(t.text for t in tokens)


def valid(answer: str, schema: dict[str, Any]) -> None:
    jsonschema.validate(json.loads(answer), schema)


# --- json_schema ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_a_random_model_answers_valid_json_one_at_a_time(model: TransformersModel, name: str) -> None:
    schema = SCHEMAS[name]
    for sampling in SAMPLINGS:
        answer = text(model.generate("hi", json_schema=schema, max_tokens=MAX_TOKENS, **sampling))
        assert model.metrics().finish_reason == "stop", answer
        valid(answer, schema)
    chat = text(model.chat([Message("user", "hi")], json_schema=schema, max_tokens=MAX_TOKENS, temperature=0))
    valid(chat, schema)


#: Schemas that leave values unbounded: an integer, a number, an object that does not say `additionalProperties`.
#: llguidance, left to the letter of JSON Schema, let the tiny model run on until max_tokens cut the answer (17 of 18
#: object answers unparseable: an extra key's string never closed); bounded as llama.cpp's grammar bounds them, each
#: answer ends well inside max_tokens (test_llama_cpp_grammar.py asks llama.cpp the same).
OPEN_SCHEMAS: tuple[dict[str, Any], ...] = (
    {"type": "integer"},
    {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}, "required": ["n", "x"]},
)


@pytest.mark.parametrize("schema", OPEN_SCHEMAS, ids=["integer", "object"])
def test_unbounded_numbers_and_unsaid_extra_keys_end_as_on_llama_cpp(model: TransformersModel,
                                                                      schema: dict[str, Any]) -> None:  # fmt: skip
    for prompt in ("hi", "1 2 3", "The answer is"):
        for seed in range(4):
            answer = text(model.generate(prompt, json_schema=schema, max_tokens=40, temperature=1.0, seed=seed))
            assert model.metrics().finish_reason == "stop", answer
            value = json.loads(answer)
            jsonschema.validate(value, schema)
            numbers = [value] if isinstance(value, int) else [value["n"], value["x"]]
            assert all(len(str(int(abs(v)))) <= 16 for v in numbers), answer
            if isinstance(value, dict):
                assert set(value) == {"n", "x"}, answer  # closed, as llama.cpp's converter closes it
    assert json.loads(text(model.generate("hi", json_schema={"type": "number"}, max_tokens=40, temperature=0))) < 1e16


def test_bounding_leaves_the_callers_own_bounds_and_open_objects_alone() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}, "x": {"type": ["number", "null"], "multipleOf": 0.5}},
        "additionalProperties": True,
    }
    got = bounded(schema)
    assert got["properties"]["n"] == {"type": "integer", "minimum": 1, "maximum": NUMBER_BOUND}
    assert got["properties"]["x"] == {"type": ["number", "null"], "multipleOf": 0.5, "minimum": -NUMBER_BOUND,
                                      "maximum": NUMBER_BOUND}  # fmt: skip
    assert got["additionalProperties"] is True and schema["properties"]["n"] == {"type": "integer", "minimum": 1}
    # Closing each branch of an allOf would forbid the keys the other branches name.
    assert bounded({"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]}) == {
        "allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]
    }


def test_each_batch_slot_follows_its_own_schema(model: TransformersModel) -> None:
    names = sorted(SCHEMAS)
    engine = model.engine()
    assert engine.slots >= len(names)
    requests = [
        EngineRequest(
            prompt=f"prompt {i}",
            options={"json_schema": SCHEMAS[name], "temperature": 1.0, "seed": i, "max_tokens": MAX_TOKENS},
        )
        for i, name in enumerate(names)
    ]
    runs = drive(engine, requests)  # all admitted at once: every step decodes every slot together
    assert {r.finish_reason for r in runs} == {"stop"}
    for run, name in zip(runs, names, strict=True):
        valid(run.text, SCHEMAS[name])


def test_batch_generate_rows_all_answer_valid_json(model: TransformersModel) -> None:
    schema = SCHEMAS["object"]
    results = model.batch_generate(["a", "the quick brown fox", "1 2 3"], json_schema=schema, temperature=1.0, seed=9,
                                   max_tokens=MAX_TOKENS)  # fmt: skip
    for result in results:
        assert result.error is None and result.finish_reason == "stop"
        valid(text(result.tokens), schema)


def test_max_tokens_cuts_a_schema_answer_as_a_length_stop(model: TransformersModel) -> None:
    tokens = list(model.generate("hi", json_schema=SCHEMAS["object"], max_tokens=3, temperature=0))
    assert len(tokens) == 3 and model.metrics().finish_reason == "length"
    assert text(tokens).startswith("{")


def test_unenforceable_schemas_are_refused_at_submission_naming_json_schema(model: TransformersModel) -> None:
    checker = as_capability(model, OptionChecker)
    assert checker is not None
    before = model.metrics()
    for schema in ({"type": "array", "uniqueItems": True}, {"not": {"type": "string"}}, {"type": "frob"}):
        with pytest.raises(InvalidOptionError) as caught:
            checker.check_options(GenerateOptions.parse({"json_schema": schema}))
        assert caught.value.option == "json_schema"
        with pytest.raises(InvalidOptionError):
            model.generate("hi", json_schema=schema)
    with pytest.raises(InvalidOptionError) as caught:
        checker.check_options(GenerateOptions.parse({"json_schema": SCHEMAS["object"], "min_tokens": 3}))
    assert caught.value.option == "min_tokens"
    checker.check_options(GenerateOptions.parse({"json_schema": SCHEMAS["nested"], "logprobs": 2}))  # enforceable
    assert model.metrics() is before, "a refused request must cost nothing"


# --- logprobs ---------------------------------------------------------------------------------------------------------


def log_softmax(row: np.ndarray) -> np.ndarray:
    row = row.astype(np.float64)
    return row - (row.max() + math.log(float(np.exp(row - row.max()).sum())))


def test_logprobs_are_log_softmax_of_classify_logits(model: TransformersModel) -> None:
    prompt = "The quick brown fox"
    result = model.classify([prompt], logits=True, temperature=0)[0]
    assert result.logits is not None
    expected = log_softmax(result.logits)
    # Sampled hot and under a schema: the reported distribution is still the raw one, before either.
    for opts in ({"temperature": 0}, {"temperature": 1.7, "seed": 1, "top_p": 0.5}):
        first = next(iter(model.generate(prompt, logprobs=4, max_tokens=1, **opts)))
        assert first.logprob is not None
        assert first.logprob.logprob == pytest.approx(expected[first.id], abs=1e-6)
        top = first.logprob.top
        assert [t.logprob for t in top] == sorted((t.logprob for t in top), reverse=True) and len(top) == 4
        assert top[0].logprob == pytest.approx(expected.max(), abs=1e-6)
        assert top[0].bytes == model.runner.piece(int(np.argmax(expected)))


def test_logprobs_in_batch_slots_match_one_at_a_time(model: TransformersModel) -> None:
    alone = list(model.generate("hello there", logprobs=2, max_tokens=6, temperature=0))
    rows = model.batch_generate(["hi", "hello there"], logprobs=2, max_tokens=6, temperature=0)
    batched = rows[1].tokens
    assert [t.id for t in batched] == [t.id for t in alone]
    for a, b in zip(alone, batched, strict=True):
        assert a.logprob is not None and b.logprob is not None
        assert b.logprob.logprob == pytest.approx(a.logprob.logprob, abs=1e-4)
        assert len(b.logprob.top) == 2
    company = EngineRequest(prompt="hi", options={"max_tokens": 6, "temperature": 0})
    asked = EngineRequest(prompt="hello there", options={"logprobs": 0, "max_tokens": 6, "temperature": 0})
    got = drive(model.engine(), [company, asked])[1].tokens
    assert [t.logprob.logprob for t in got if t.logprob] == pytest.approx([t.logprob.logprob for t in alone], abs=1e-4)  # type: ignore[union-attr]
    assert all(t.logprob is not None and t.logprob.top == () for t in got)
    assert all(t.logprob is None for t in model.generate("hi", max_tokens=3, temperature=0))


# --- the thought channel ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def thinker(tiny_thinking_dir: Path) -> Iterator[TransformersModel]:
    with load(tiny_thinking_dir) as m:
        yield m


def test_the_thinking_model_splits_its_thought(thinker: TransformersModel) -> None:
    # Its template opens `<think>` in the prompt; a budget of 3 forces `</think>` after three thought tokens.
    ask = [Message("user", "hi")]
    tokens = list(thinker.chat(ask, max_tokens=8, min_tokens=8, temperature=0, thinking_budget=3))
    assert [t.channel for t in tokens] == ["thought"] * 3 + ["marker"] + ["content"] * 4
    assert tokens[3].text == "</think>"
    company = EngineRequest(prompt="hello", options={"max_tokens": 8, "temperature": 0})
    budgeted = {"max_tokens": 8, "min_tokens": 8, "temperature": 0, "thinking_budget": 3}
    batched = drive(thinker.engine(), [company, EngineRequest(messages=tuple(ask), options=budgeted)])[1].tokens
    assert [t.channel for t in batched] == [t.channel for t in tokens]
    plain = list(thinker.chat(ask, max_tokens=4, temperature=0, enable_thinking=False))
    assert {t.channel for t in plain} == {"content"}


def test_a_model_without_markers_answers_only_content(model: TransformersModel) -> None:
    assert {t.channel for t in model.generate("hi <think>", max_tokens=6, temperature=0)} == {"content"}


def test_a_slow_or_failed_mask_ends_the_request(model: TransformersModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-step bound (grammar.STEP_SECONDS) lowered below any mask's cost: a SchemaError saying so, not a token
    the matcher refused; the next request is answered."""
    from modelhost.backends.transformers import grammar
    from modelhost.errors import SchemaError

    schema = SCHEMAS[next(iter(SCHEMAS))]
    monkeypatch.setattr(grammar, "STEP_SECONDS", -1.0)
    with pytest.raises(SchemaError, match="one constrained step took"):
        text(model.chat([Message("user", "hi")], json_schema=schema, max_tokens=8, temperature=0))
    monkeypatch.setattr(grammar, "STEP_SECONDS", 2.0)
    valid(text(model.chat([Message("user", "hi")], json_schema=schema, max_tokens=200, temperature=0)), schema)

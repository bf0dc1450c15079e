"""Structured output on llama.cpp: a JSON Schema enforced by a grammar, on the tiny random Llama GGUF.

A random model is the hard case: left alone it never writes JSON, so every answer that parses and validates here
was made to by the grammar. The schemas bound every value (integers, booleans, enums, short strings) so an answer
ends well inside `max_tokens`: a grammar guarantees the shape, not that a random model ever closes a free string.
Names are ASCII patterns: a random model over byte tokens can write overlong UTF-8 that llama.cpp's grammar counts
as one character and Python as several replacement characters (grammar.py), which would fail a maxLength.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp")

from modelhost.backends.llama_cpp import LlamaCppBackend
from modelhost.backends.llama_cpp.grammar import gbnf_for_schema
from modelhost.backends.llama_cpp.model import LlamaCppModel
from modelhost.errors import InvalidOptionError
from modelhost.inference.options import MAX_JSON_SCHEMA_CHARS, GenerateOptions
from modelhost.inference.types import Message

jsonschema = pytest.importorskip("jsonschema")

PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z ]{1,8}$"},
        "age": {"type": "integer"},
        "admin": {"type": "boolean"},
        "colour": {"enum": ["red", "green", "blue"]},
        "tags": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
    },
    "required": ["name", "age", "admin", "colour", "tags"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def model(tiny_llama_gguf: Path) -> Iterator[LlamaCppModel]:
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, parallel=2) as m:
        assert isinstance(m, LlamaCppModel)
        yield m


def valid(text: str, schema: dict[str, Any] = PERSON) -> Any:
    value = json.loads(text)
    jsonschema.validate(value, schema)
    return value


@pytest.mark.parametrize(
    "sampling", [{"temperature": 0}, {"temperature": 1.0, "seed": 3}, {"temperature": 1.5, "seed": 9}]
)
def test_a_random_model_answers_valid_json_of_the_schema(model: LlamaCppModel, sampling: dict[str, Any]) -> None:
    text = "".join(t.text for t in model.generate("hello", json_schema=PERSON, max_tokens=300, **sampling))
    assert model.metrics().finish_reason == "stop", text
    valid(text)
    chat = "".join(t.text for t in model.chat([Message("user", "hi")], json_schema=PERSON, max_tokens=300, **sampling))
    valid(chat)


def test_the_batch_engine_applies_each_slots_own_grammar(model: LlamaCppModel) -> None:
    flags = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    requests: list[dict[str, Any]] = [
        {"prompt": "hello", "json_schema": PERSON, "max_tokens": 300, "temperature": 0},
        {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0},  # no grammar beside one
        {"prompt": "The quick brown fox", "json_schema": flags, "max_tokens": 300, "temperature": 0},
    ]
    expected = [[t.id for t in model.generate(**r)] for r in requests]
    with model.open_batch() as engine:
        got: dict[int, list[int]] = {i: [] for i in range(len(requests))}
        waiting, live = list(enumerate(requests)), {}
        while waiting or live:
            while waiting and engine.free_slots():
                i, r = waiting.pop(0)
                live[engine.admit(**r).slot] = i
            for o in engine.step().outputs:
                if o.token is not None:
                    got[live[o.slot]].append(o.token.id)
                if o.finish_reason is not None:
                    assert o.error is None and o.finish_reason != "error"
                    del live[o.slot]
    assert [got[i] for i in range(len(requests))] == expected  # greedy: the same tokens as one at a time
    valid(model.decode(got[0]))
    valid(model.decode(got[2]), flags)


def test_json_mode_is_any_object(model: LlamaCppModel) -> None:
    # A free object from a random model may not close within max_tokens; what is out must be a JSON object's start.
    text = "".join(t.text for t in model.generate("hello", json_schema={"type": "object"}, max_tokens=8, temperature=0))
    assert text.lstrip().startswith("{")


def test_bad_schemas_and_conflicting_options_are_refused_before_compute(model: LlamaCppModel) -> None:
    with pytest.raises(InvalidOptionError) as info:
        model.generate("hello", json_schema={"type": "frob"})
    assert info.value.option == "json_schema"
    with pytest.raises(InvalidOptionError, match="maximum"):  # a keyword the grammar would drop is refused
        model.generate("hello", json_schema={"type": "object", "properties": {"n": {"type": "integer", "maximum": 9}}})
    for name, value in (("min_tokens", 3), ("suppress_tokens", [5]), ("thinking_budget", 4)):
        with pytest.raises(InvalidOptionError) as info:
            model.generate("hello", json_schema=PERSON, **{name: value})
        assert info.value.option == name
    with model.open_batch() as engine:
        with pytest.raises(InvalidOptionError):
            engine.admit("hello", json_schema={"$ref": "https://example.com/schema.json"})
        assert engine.free_slots() == engine.slots  # the refused request took no slot


def test_the_option_is_validated_and_held_as_compact_json() -> None:
    assert GenerateOptions.parse(json_schema={"type": "object"}).json_schema == '{"type":"object"}'
    assert GenerateOptions.parse(json_schema='{"type": "object"}').json_schema == '{"type":"object"}'
    for bad in (["type"], "{not json", {"big": "x" * MAX_JSON_SCHEMA_CHARS}, {"x": float("nan")}):
        with pytest.raises(InvalidOptionError) as info:
            GenerateOptions.parse(json_schema=bad)
        assert info.value.option == "json_schema"


def test_strings_cannot_hold_raw_control_characters() -> None:
    # llama-cpp-python's converter lets a raw newline into a JSON string; json.loads refuses such a string.
    assert r'char ::= [^"\\\x7F\x00-\x1F\uD800-\uDFFF]' in gbnf_for_schema('{"type":"string"}')

"""Structured output on llama.cpp: a JSON Schema enforced by a grammar, on the tiny random Llama GGUF.

A random model is the hard case: left alone it never writes JSON, so every answer that parses and validates here
was made to by the grammar. The schemas bound every value (integers, booleans, enums, short strings) so an answer
ends well inside `max_tokens`: a grammar guarantees the shape, not that a random model ever closes a free string.
Names are ASCII patterns: a random model over byte tokens can write overlong UTF-8 that llama.cpp's grammar counts
as one character and Python as several replacement characters (grammar.py), which would fail a maxLength.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp")

from modelhost.backends.llama_cpp import LlamaCppBackend
from modelhost.backends.llama_cpp.grammar import gbnf_for_schema, integer_range_rule
from modelhost.backends.llama_cpp.model import LlamaCppModel
from modelhost.errors import InvalidOptionError
from modelhost.inference.engine import EngineRequest
from modelhost.inference.engine_conformance import drive
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
    runs = drive(model.engine(), [EngineRequest(prompt=r.pop("prompt"), options=r) for r in requests])
    assert all(run.error is None and run.finish_reason != "error" for run in runs)
    got = {i: run.ids for i, run in enumerate(runs)}
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
    with pytest.raises(InvalidOptionError, match="multipleOf"):  # a keyword the grammar would drop is refused
        model.generate(
            "hello", json_schema={"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}
        )
    for unenforced in ({"type": "number", "maximum": 1}, {"type": ["integer", "null"], "minimum": 0},
                       {"enum": [1, 2], "minimum": 2}, {"type": "integer", "minimum": 5, "maximum": 4}):  # fmt: skip
        with pytest.raises(InvalidOptionError) as info:
            model.generate("hello", json_schema={"type": "object", "properties": {"n": unenforced}})
        assert info.value.option == "json_schema"
    for name, value in (("min_tokens", 3), ("suppress_tokens", [5]), ("thinking_budget", 4)):
        with pytest.raises(InvalidOptionError) as info:
            model.generate("hello", json_schema=PERSON, **{name: value})
        assert info.value.option == name
    engine = model.engine()
    with pytest.raises(InvalidOptionError):
        engine.admit(
            EngineRequest(prompt="hello", options={"json_schema": {"$ref": "https://example.com/schema.json"}})
        )
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
    assert r'char ::= [^"\\\x7F\x00-\x1F\uD800-\uDFFF' in gbnf_for_schema('{"type":"string"}')


#: The schemas test_transformers_structured.py asks llguidance: an unbounded integer and number, and an object that
#: does not say `additionalProperties`. llama.cpp's converter caps a number at 16 digits and closes such an object;
#: both backends must end each answer inside a modest max_tokens, and agree on the keys.
OPEN_SCHEMAS: tuple[dict[str, Any], ...] = (
    {"type": "integer"},
    {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}, "required": ["n", "x"]},
)


@pytest.mark.parametrize("schema", OPEN_SCHEMAS, ids=["integer", "object"])
def test_unbounded_numbers_and_unsaid_extra_keys_end(model: LlamaCppModel, schema: dict[str, Any]) -> None:
    for prompt in ("hi", "1 2 3"):
        for seed in range(4):
            text = "".join(t.text for t in model.generate(prompt, json_schema=schema, max_tokens=48, temperature=1.0,
                                                          seed=seed))  # fmt: skip
            assert model.metrics().finish_reason == "stop", text
            value = valid(text, schema)
            if isinstance(value, dict):
                assert set(value) == {"n", "x"}, text


#: Integer bounds as tool parameters use them (a count from 1, a percentage, a negative offset, exclusive bounds).
BOUNDED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 1},
        "percent": {"type": "integer", "minimum": 0, "maximum": 100},
        "offset": {"type": "integer", "exclusiveMinimum": -10, "exclusiveMaximum": 0},
        "year": {"type": "integer", "minimum": 1990.5, "maximum": 2026},
    },
    "required": ["count", "percent", "offset", "year"],
    "additionalProperties": False,
}


def test_integer_bounds_are_enforced_by_the_grammar(model: LlamaCppModel) -> None:
    # llama-cpp-python's converter drops minimum/maximum (they used to be refused); ours writes a digit-range rule.
    for sampling in ({"temperature": 0}, *({"temperature": 1.5, "seed": s} for s in range(5))):
        text = "".join(t.text for t in model.generate("hello", json_schema=BOUNDED, max_tokens=120, **sampling))
        assert model.metrics().finish_reason == "stop", text
        valid(text, BOUNDED)


def _as_regex(expression: str) -> re.Pattern[str]:
    # The range rule uses only quoted digits and "-", digit classes, spaces, groups and alternation: as a regex,
    # the same language once the quotes and spaces go.
    return re.compile(expression.replace('"', "").replace(" ", ""))


def test_the_integer_range_rule_matches_exactly_the_range() -> None:
    rng = random.Random(1)
    ranges = [(0, 0), (1, 120), (-5, 5), (-120, -7), (10, 99), (99, 101), (-1000, 999), (-(10**16 - 1), 10**16 - 1)]
    for _ in range(200):
        low = rng.randint(-(10**6), 10**6)
        ranges.append((low, low + rng.choice([0, 7, 500, 10**5, 10**8])))
    for low, high in ranges:
        rule = _as_regex(integer_range_rule(low, high))
        near = {*range(low - 30, low + 30), *range(high - 30, high + 30), *(rng.randint(low, high) for _ in range(30))}
        for value in near | {0, -1, 1}:
            assert bool(rule.fullmatch(str(value))) == (low <= value <= high), (low, high, value)
        assert not any(rule.fullmatch(bad) for bad in ("-0", "00", "01", "-01", "+1")), (low, high)


def test_a_string_never_takes_a_byte_that_starts_no_utf8_character(model: LlamaCppModel) -> None:
    """llama.cpp decodes a token's bytes to code points leniently: a lone 0xF5-0xFF byte (which starts no UTF-8
    character) followed by continuation bytes reads as a code point past U+10FFFF, and the converter's character
    rule let it into a string, where Python shows U+FFFD and `maxLength` no longer holds. The tiny model's byte
    tokens draw such a byte within a few seeds; the rule now refuses every code point past U+10FFFF."""
    schema = {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}
    for seed in range(8):
        tokens = list(model.chat([Message("user", "Weather?")], max_tokens=60, seed=seed, temperature=1.0,
                                 json_schema=schema))  # fmt: skip
        bad = [t.id for t in tokens if model.vocab.piece(t.id)[:1] >= b"\xf5"]
        assert not bad, f"seed {seed}: tokens {bad} start with a byte no UTF-8 character starts with"


def test_an_empty_mask_ends_the_request_instead_of_aborting_the_process(
    model: LlamaCppModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grammar that opens the answer and then allows nothing, as an unsatisfiable schema the up-front checks cannot
    see would: every token is masked, and before issue 25 the masked draw still returned one, which llama.cpp's
    accept answered with GGML_ABORT (the whole process). Now the request ends with a SchemaError, greedy or sampled,
    and the model serves the next request."""
    from modelhost.backends.llama_cpp import grammar as constrained
    from modelhost.errors import SchemaError

    checked = constrained.check
    monkeypatch.setattr(
        constrained, "check", lambda opts, vocab: 'root ::= "{" [^\\x00-\\U7FFFFFFF]' if opts.json_schema else None
    )
    for sampling in ({"temperature": 0}, {"temperature": 1.0, "seed": 1}):
        with pytest.raises(SchemaError, match="allows no token here"):
            list(model.chat([Message("user", "hi")], json_schema={"type": "object"}, max_tokens=8, **sampling))
    monkeypatch.setattr(constrained, "check", checked)
    answer = "".join(
        t.text for t in model.chat([Message("user", "hi")], json_schema=PERSON, max_tokens=120, temperature=0)
    )
    valid(answer)


def test_a_masked_step_over_the_bound_ends_the_request(model: LlamaCppModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-step bound (grammar.STEP_SECONDS), lowered below any step's cost: the request ends with a SchemaError
    saying so at its first masked step (a random model's first token is never the grammar's `{`), and the model
    thread is free for the next request."""
    from modelhost.backends.llama_cpp import grammar as constrained
    from modelhost.errors import SchemaError

    monkeypatch.setattr(constrained, "STEP_SECONDS", -1.0)
    with pytest.raises(SchemaError, match="one constrained step took"):
        list(model.chat([Message("user", "hi")], json_schema=PERSON, max_tokens=8, temperature=0))
    monkeypatch.setattr(constrained, "STEP_SECONDS", 2.0)
    answer = "".join(
        t.text for t in model.chat([Message("user", "hi")], json_schema=PERSON, max_tokens=120, temperature=0)
    )
    valid(answer)


def test_llama_cpp_refuses_counts_its_parser_cannot_take_before_parsing() -> None:
    """maxLength 1,500 is within the contract's bounds but past llama.cpp's nested-repetition limit (~1,000; its
    parser overflows the C stack at ~20,000): refused by grammar.LIMITS, naming where, before llama.cpp sees it."""
    from modelhost.errors import SchemaError

    with pytest.raises(SchemaError, match="the limit is 1000") as refused:
        gbnf_for_schema(json.dumps({"type": "object", "properties": {"s": {"type": "string", "maxLength": 1500}}}))
    assert refused.value.at == ("properties", "s", "maxLength")


@pytest.mark.parametrize("pattern", ["^((aa[^a])){7}$", "^(a(.)){5}$"])
def test_a_negated_class_in_a_pattern_writes_only_what_a_json_string_holds(model: LlamaCppModel, pattern: str) -> None:
    """Found by the schema fuzzer: the converter writes `[^a]` (and `.`) raw, outside the string's character rule,
    so a random model put a raw control character (json.loads refused the answer) or lenient-UTF-8 bytes (read as
    U+FFFD, failing the pattern) into the string. Each negated class now excludes them too."""
    schema = {"type": "string", "pattern": pattern}
    for seed in range(6):
        answer = "".join(
            t.text
            for t in model.chat([Message("user", "hi")], json_schema=schema, max_tokens=60, temperature=1.5, seed=seed)
        )
        if model.metrics().finish_reason == "length":
            continue
        jsonschema.validate(json.loads(answer), schema)


def test_a_pattern_naming_a_control_character_is_refused_on_llama_cpp() -> None:
    from modelhost.errors import SchemaError

    for pattern in ("^(a|\\x00)$", "^[\\x00-\\x7f]$"):
        with pytest.raises(SchemaError, match="only escaped"):
            gbnf_for_schema(json.dumps({"type": "string", "pattern": pattern}))
    gbnf_for_schema(json.dumps({"type": "string", "pattern": "^[\\x20-\\x7e]$"}))  # printable ASCII is fine


def test_lengths_beside_a_pattern_are_refused_rather_than_dropped() -> None:
    """Found by the schema fuzzer: llama.cpp's converter follows a pattern alone, so `minLength: 1` beside
    `^(a)?$` let the empty string through. Refused, naming where, as every keyword it would drop is."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "minLength": 1, "pattern": "^(a)?$"}}}
    with pytest.raises(InvalidOptionError, match="beside a pattern \\(at /properties/s\\)"):
        gbnf_for_schema(json.dumps(schema))

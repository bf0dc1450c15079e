"""The contract's JSON Schema bounds (inference/schema_limits.py): what is refused, where, and what still passes."""

from __future__ import annotations

from typing import Any

import pytest

from modelhost.errors import InvalidOptionError, SchemaError
from modelhost.inference.options import GenerateOptions
from modelhost.inference.schema_limits import DEFAULT_LIMITS, SchemaLimits, check_schema


@pytest.mark.parametrize(
    ("schema", "at", "says"),
    [
        ({"type": "string", "pattern": "^[b-a]$"}, ("pattern",), "bad character range"),
        ({"type": "string", "pattern": "^\\x00$"}, ("pattern",), "no string matches"),
        ({"type": "string", "pattern": "^\\x7f$"}, ("pattern",), "no string matches"),
        ({"type": "string", "pattern": "^[^\\x00-\\U0010FFFF]$"}, ("pattern",), "no string matches"),
        ({"type": "string", "pattern": "^a(\\x00|\\x01)$"}, ("pattern",), "no string matches"),
        ({"type": "string", "maxLength": 20000}, ("maxLength",), "the limit is 10000"),
        ({"type": "array", "maxItems": 1000000}, ("maxItems",), "the limit is 10000"),
        ({"type": "string", "pattern": "^a{0,100000}$"}, ("pattern",), "repetition count"),
        ({"type": "string", "minLength": 10**9}, ("minLength",), "the limit is 10000"),
        ({"type": "string", "pattern": "^(x?){1000}$"}, ("pattern",), "optional items in a row"),
        ({"type": "string", "pattern": "^(a?b?){50}$"}, ("pattern",), "optional items in a row"),
        ({"type": "string", "pattern": "^" + "x?" * 40 + "$"}, ("pattern",), "optional items in a row"),
        ({"type": "integer", "maximum": int("9" * 400)}, ("maximum",), "a double can hold"),
        ({"type": "string", "minLength": 5, "maxLength": 2}, ("minLength",), "greater than 'maxLength'"),
        ({"type": "string", "maxLength": -1}, ("maxLength",), "non-negative integer"),
        ({"type": "string", "maxLength": 2.5}, ("maxLength",), "non-negative integer"),
        ({"type": "string", "pattern": "^(a)\\1$"}, ("pattern",), "no grammar engine"),
        ({"type": "string", "pattern": "^a(?=b)$"}, ("pattern",), "no grammar engine"),
        ({"type": "string", "pattern": "(" * 40 + "a" + ")" * 40}, ("pattern",), "deeper than"),
        (
            {"properties": {"a": {"properties": {"b/c": {"maxLength": -1}}}}},
            ("properties", "a", "properties", "b/c", "maxLength"),
            "non-negative",
        ),
    ],
)
def test_a_hostile_schema_is_refused_naming_where(schema: dict[str, Any], at: tuple[str, ...], says: str) -> None:
    with pytest.raises(SchemaError) as refused:
        check_schema(schema)
    assert refused.value.at == at
    assert says in refused.value.reason
    assert refused.value.option == "json_schema"
    # The options parser runs the same check, so every door (and the Python API) refuses it before an engine.
    with pytest.raises(InvalidOptionError, match=says.replace("(", "\\(")):
        GenerateOptions.parse(json_schema=schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "^[a-z ]{1,8}$"},
        {"type": "string", "pattern": "^\\d{3}-\\d{4}$"},
        {"type": "string", "pattern": "^a{0,1000}$"},  # nests: one way to stop at each point, however long
        {"type": "string", "pattern": "^(x?){20}$"},
        {"type": "string", "pattern": "^[^\\x00-\\x1f]+$"},  # the complement still holds printable characters
        {"type": "string", "minLength": 2, "maxLength": 2},
        {"type": "string", "maxLength": 5.0},  # JSON Schema counts 5.0 as the integer 5
        {"type": "integer", "minimum": -(10**15), "maximum": 10**15},
        {"type": "object", "properties": {"minLength": {"type": "string"}, "pattern": {"type": "integer"}}},
        {"enum": [{"maxLength": -1}, "x"]},  # data, not a schema: its keys are not keywords
        {"const": {"pattern": "[b-a]"}},
    ],
)
def test_an_ordinary_schema_passes(schema: dict[str, Any]) -> None:
    check_schema(schema)
    GenerateOptions.parse(json_schema=schema)


def test_nesting_and_totals_are_bounded() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(DEFAULT_LIMITS.max_depth + 1):  # a path one step past the bound
        deep = {"type": "array", "items": deep}
    with pytest.raises(SchemaError, match="nests deeper"):
        check_schema(deep)
    # Each count within bounds, their sum not: 20 strings of minLength 10,000 would be a grammar of 200,000 chars.
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string", "minLength": 10_000} for i in range(20)}}
    with pytest.raises(SchemaError, match="add up to more than"):
        check_schema(wide)
    check_schema(wide, SchemaLimits(max_total=10**6))


def test_an_engine_can_ask_for_lower_limits() -> None:
    schema = {"type": "string", "maxLength": 1500}
    check_schema(schema)
    with pytest.raises(SchemaError, match="the limit is 1000"):
        check_schema(schema, SchemaLimits(max_count=1000))

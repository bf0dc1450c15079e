"""The conformance kit's structured-output check, against stand-in models that keep or break its contract."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from modelhost.errors import InvalidOptionError
from modelhost.inference import conformance
from modelhost.inference.types import Token
from modelhost.testing.standins import ScriptedModel


class IgnoresSchema(ScriptedModel):
    """Takes json_schema and plays its script regardless, as a backend that dropped the option would."""

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        opts.pop("json_schema", None)
        return super().generate(prompt, **opts)


class RefusesUnderAnotherName(ScriptedModel):
    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        raise InvalidOptionError("tools", "not supported")


def test_a_model_that_refuses_json_schema_by_name_passes() -> None:
    conformance.check_structured_output(ScriptedModel(["hi"]))  # refuses json_schema, naming it


def test_an_answer_that_follows_the_schema_passes() -> None:
    conformance.check_structured_output(IgnoresSchema(['{"ok": ', 'true, "pick": 3, ', '"flags": [false]}']))


@pytest.mark.parametrize(
    "model",
    [
        IgnoresSchema(["not ", "JSON"]),
        IgnoresSchema(['{"ok": true, "pick": "c", "flags": []}']),  # outside the enum
        IgnoresSchema(['{"ok": true, "pick": true, "flags": []}']),  # a boolean is not the enum's 3
        IgnoresSchema(['{"ok": true, "pick": "a", "flags": [], "extra": 1}']),  # additionalProperties false
        IgnoresSchema(None),  # never ends: max_tokens cuts it, a length stop
        RefusesUnderAnotherName(["hi"]),
    ],
    ids=["not-json", "enum", "bool-for-int", "extra-key", "cut", "wrong-name"],
)
def test_a_model_that_breaks_the_contract_fails(model: ScriptedModel) -> None:
    with pytest.raises(AssertionError):
        conformance.check_structured_output(model)


def test_the_check_runs_for_every_backend() -> None:
    assert conformance.check_structured_output in conformance.CHECKS

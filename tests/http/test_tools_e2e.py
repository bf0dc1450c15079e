"""Tool calling through the HTTP door with the real `openai` client, on the tiny random Llama GGUF (llama.cpp).

A required (or named) call is constrained by the JSON Schema of a call, so even a random model makes a call of a
known tool whose arguments validate against its `parameters`; with "auto" it may answer in prose.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from http_support import LoopThread, serving

import modelhost.inference
from modelhost.host import Host
from modelhost.http.tools import ToolPlan, plan

pytest.importorskip("llama_cpp")
jsonschema = pytest.importorskip("jsonschema")

pytestmark = pytest.mark.slow

WEATHER = {
    "type": "object",
    "properties": {"city": {"enum": ["Paris", "Rome"]}, "days": {"type": "integer"}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
TIME = {
    "type": "object",
    "properties": {"utc": {"type": "boolean"}},
    "required": ["utc"],
    "additionalProperties": False,
}
TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "weather", "description": "Forecast", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "clock", "parameters": TIME}},
]
PARAMS = {"weather": WEATHER, "clock": TIME}


@pytest.fixture(scope="module")
def client(loop_thread: LoopThread, tiny_llama_gguf: Path) -> Iterator[openai.OpenAI]:
    host = Host(lambda: modelhost.inference.load_model(str(tiny_llama_gguf), backend="llama_cpp"), name="tiny")
    with serving(loop_thread, host) as server:
        yield openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)


def ask(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "clock"}}])
def test_a_required_call_has_valid_arguments(client: openai.OpenAI, choice: Any) -> None:
    for sampling in ({"temperature": 0}, {"temperature": 1.0, "seed": 4}):
        answer = client.chat.completions.create(
            model="tiny", messages=ask("weather?"), tools=TOOLS, tool_choice=choice, max_tokens=200, **sampling
        )
        result = answer.choices[0]
        assert result.finish_reason == "tool_calls" and result.message.content is None
        calls = result.message.tool_calls or []
        assert len(calls) == 1 and calls[0].type == "function" and calls[0].id.startswith("call_")
        name = calls[0].function.name  # type: ignore[union-attr]
        assert name in PARAMS and (choice == "required" or name == "clock")
        jsonschema.validate(json.loads(calls[0].function.arguments), PARAMS[name])  # type: ignore[union-attr]


def test_streamed_call_deltas_reassemble_and_a_tool_result_is_taken_back(client: openai.OpenAI) -> None:
    kw: dict[str, Any] = {
        "model": "tiny",
        "tools": TOOLS,
        "tool_choice": "required",
        "max_tokens": 200,
        "temperature": 0,
    }
    whole = client.chat.completions.create(messages=ask("weather?"), **kw).choices[0].message.tool_calls or []
    pieces: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in client.chat.completions.create(messages=ask("weather?"), stream=True, **kw):
        for delta_call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            entry = pieces.setdefault(delta_call.index, {"name": "", "arguments": ""})
            entry["name"] += (delta_call.function.name or "") if delta_call.function else ""
            entry["arguments"] += (delta_call.function.arguments or "") if delta_call.function else ""
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
    assert finish == "tool_calls" and len(whole) == 1
    assert pieces == {0: {"name": whole[0].function.name, "arguments": whole[0].function.arguments}}  # type: ignore[union-attr]
    # The call and its result go back in the conversation; the model answers on.
    call = whole[0]
    history: list[Any] = [
        *ask("weather?"),
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"forecast": "sun"}'},
    ]
    # (Without the tools' system turn: the tiny model's 512-token context cannot hold both.)
    after = client.chat.completions.create(model="tiny", messages=history, max_tokens=8, temperature=0)
    assert after.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_auto_answers_in_prose_or_a_call_and_bad_choices_are_400s(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(model="tiny", messages=ask("hi"), tools=TOOLS, max_tokens=8, temperature=0)
    message = answer.choices[0].message
    assert (message.content is not None) != bool(message.tool_calls)
    for kw, param in (
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [{"type": "function", "function": {"name": "x", "parameters": {"type": "frob"}}}],
          "tool_choice": "required"}, "tools"),
    ):  # fmt: skip
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="tiny", messages=ask("hi"), **kw)
        assert info.value.body["param"] == param  # type: ignore[index]


def test_an_auto_answer_is_read_as_a_call_only_when_it_is_exactly_one() -> None:
    tool_plan = plan(TOOLS, "auto", lambda p, m: ValueError(m))
    assert isinstance(tool_plan, ToolPlan)
    call = '{"name": "clock", "arguments": {"utc": true}}'
    for text in (call, f"<tool_call>{call}</tool_call>", f"```json\n{call}\n```"):
        assert [c.name for c in tool_plan.parse(text)] == ["clock"]
    for text in ("It is noon.", '{"name": "other", "arguments": {}}', '{"name": "clock"}'):
        assert tool_plan.parse(text) == []
    assert tool_plan.may_be_call("  {") and tool_plan.may_be_call("``") and not tool_plan.may_be_call("Sure")

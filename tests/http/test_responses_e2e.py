"""OpenAI's Responses API (`POST /v1/responses`) through the real `openai` client's `responses.create`, streamed and
not, against a real server on loopback: the embedded SmolLM2 GGUF for text, structured output and tool calls (a
required call is constrained by the grammar, so even a 135M model makes it), and a tiny thinking model (transformers)
for the reasoning item. Greedy and short, so answers repeat and the module stays quick on 2 cores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from http_support import LoopThread, embedded_gguf_or_skip, serving

import modelhost.inference
from modelhost.host import Host
from modelhost.http import HttpServer
from modelhost.testing import tinymodels
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytestmark = pytest.mark.slow

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def smol(loop_thread: LoopThread) -> Iterator[HttpServer]:
    embedded_gguf_or_skip()
    with serving(loop_thread, Host(lambda: modelhost.inference.load_model("default"), name="default")) as server:
        yield server


@pytest.fixture
def client(smol: HttpServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{smol.url}/v1", api_key="unused", max_retries=0, timeout=STATE_WAIT_SECONDS)


def test_a_text_response_whole_and_streamed_say_the_same(client: openai.OpenAI) -> None:
    whole = client.responses.create(
        model="default",
        instructions="Answer briefly.",
        input="What is the capital of France?",
        max_output_tokens=12,
        temperature=0,
    )
    assert whole.status in ("completed", "incomplete") and whole.output_text
    assert whole.usage is not None and whole.usage.input_tokens > 5 and 0 < whole.usage.output_tokens <= 12
    assert [item.type for item in whole.output] == ["message"]
    events = list(
        client.responses.create(
            model="default",
            instructions="Answer briefly.",
            input="What is the capital of France?",
            max_output_tokens=12,
            temperature=0,
            stream=True,
        )
    )
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text
    done = [e for e in events if e.type == "response.output_text.done"]
    assert len(done) == 1 and done[0].text == text
    final = events[-1].response  # type: ignore[union-attr]
    assert final.output_text == text and final.usage is not None
    assert final.usage.output_tokens == whole.usage.output_tokens


def test_max_output_tokens_makes_an_incomplete_response(client: openai.OpenAI) -> None:
    cut = client.responses.create(model="default", input="Write a long story about a dragon.", max_output_tokens=3)
    assert cut.status == "incomplete" and cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens" and cut.usage is not None
    assert cut.usage.output_tokens == 3


def test_structured_output_through_text_format(client: openai.OpenAI) -> None:
    fmt: Any = {"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}}
    out = client.responses.create(
        model="default", input="Invent a person.", text=fmt, max_output_tokens=48, temperature=0
    )
    person = json.loads(out.output_text)
    assert set(person) == {"name", "age"} and isinstance(person["age"], int)
    assert out.text is not None and out.text.format.type == "json_schema"


def test_a_required_tool_call_and_its_answer_round_trip(client: openai.OpenAI) -> None:
    asked: Any = [{"role": "user", "content": "What is the weather in Paris?"}]
    out = client.responses.create(
        model="default", input=asked, tools=[WEATHER], tool_choice="required", max_output_tokens=48, temperature=0
    )  # type: ignore[list-item]
    calls = [item for item in out.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather"
    assert set(json.loads(calls[0].arguments)) == {"city"} and calls[0].call_id
    events = list(
        client.responses.create(
            model="default",
            input=asked,
            tools=[WEATHER],
            tool_choice="required",
            max_output_tokens=48,
            temperature=0,
            stream=True,
        )  # type: ignore[list-item]
    )
    streamed = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert streamed == calls[0].arguments
    added = [e.item for e in events if e.type == "response.output_item.added"]  # type: ignore[union-attr]
    assert [i.type for i in added] == ["function_call"] and added[0].name == "get_weather"
    # The call and its output go back as input items; the model then answers in prose.
    follow = client.responses.create(
        model="default",
        input=[
            *asked,
            {
                "type": "function_call",
                "call_id": calls[0].call_id,
                "name": "get_weather",
                "arguments": calls[0].arguments,
            },
            {"type": "function_call_output", "call_id": calls[0].call_id, "output": "Sunny, 21 C"},
        ],
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice="none",
        max_output_tokens=16,
        temperature=0,
    )
    assert [item.type for item in follow.output] == ["message"] and follow.output_text


def test_what_needs_a_stored_response_or_another_tool_is_refused(client: openai.OpenAI) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"previous_response_id": "resp_1"}, "previous_response_id"),
        # A required call's schema is the tool's parameters: a bound past the contract's names the tool.
        (
            {
                "tools": [
                    {
                        **WEATHER,
                        "parameters": {"type": "object", "properties": {"x": {"type": "string", "maxLength": 10**6}}},
                    }
                ],
                "tool_choice": "required",
            },
            "tools[0].parameters",
        ),
        ({"background": True}, "background"),
        ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"input": [{"type": "file_search_call", "id": "x"}]}, "input[0].type"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]}]},
            "input[0].content[0].image_url",
        ),
    ]
    for extra, param in cases:
        kwargs: dict[str, Any] = {"input": "hi", "max_output_tokens": 2, **extra}
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="default", **kwargs)
        assert caught.value.body["param"] == param, caught.value.body  # type: ignore[index]
    hinted = client.responses.create(
        model="default", input="hi", max_output_tokens=2, store=True, metadata={"a": "b"}, user="u", truncation="auto"
    )
    assert hinted.metadata == {"a": "b"} and hinted.output_text is not None


@pytest.fixture(scope="module")
def thinker(
    loop_thread: LoopThread, tiny_thinking_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpServer]:
    pytest.importorskip("llama_cpp")
    gguf = tinymodels.write_llama_gguf(tiny_thinking_dir, tmp_path_factory.mktemp("thinking_gguf") / "think.gguf")
    host = Host(lambda: modelhost.inference.load_model(str(gguf), backend="llama_cpp"), name="think")
    with serving(loop_thread, host) as server:
        yield server


def test_a_thought_is_a_reasoning_item_streamed_or_not(thinker: HttpServer) -> None:
    """The tiny thinking model's template opens `<think>` in the prompt, so its answer starts with a thought."""
    client = openai.OpenAI(base_url=f"{thinker.url}/v1", api_key="x", max_retries=0, timeout=STATE_WAIT_SECONDS)
    whole = client.responses.create(model="think", input="hi", max_output_tokens=20, temperature=0)
    assert whole.output[0].type == "reasoning"
    content = whole.output[0].content  # type: ignore[union-attr]
    thought = "".join(c.text for c in content or [])
    assert thought and "<think>" not in thought and "</think>" not in thought
    events = list(client.responses.create(model="think", input="hi", max_output_tokens=20, temperature=0, stream=True))
    assert "".join(e.delta for e in events if e.type == "response.reasoning_text.delta") == thought
    done = [e.item.type for e in events if e.type == "response.output_item.done"]  # type: ignore[union-attr]
    assert done == [item.type for item in whole.output]
    # Reasoning off: the template closes an empty thought in the prompt, so the answer is all reply.
    off = client.responses.create(
        model="think", input="hi", max_output_tokens=8, temperature=0, reasoning={"effort": "none"}
    )
    assert [item.type for item in off.output] == ["message"] and off.output_text

"""Tool calls read from a model's answer, whole or as it streams (tools.CallReader), and their wire shapes: OpenAI's
tool_calls deltas and message, Ollama's message; tool turns and `tools` parsed from both doors into the contract."""

from __future__ import annotations

import json
from typing import Any

import pytest

from modelhost.host import Done
from modelhost.http import relay
from modelhost.http import tools as tooling
from modelhost.http.ollama import schema as ollama_schema
from modelhost.http.ollama import streams as ollama_streams
from modelhost.http.openai import schema as openai_schema
from modelhost.http.openai import streams as openai_streams
from modelhost.inference.types import GenerateMetrics, ToolCall

TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "weather", "description": "Forecast", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "clock"}},
]
CALL = '{"name": "clock", "arguments": {"utc": true}}'
TWO = (
    '<tool_call>\n{"name": "clock", "arguments": {"utc": true}}\n</tool_call>\n'
    '<tool_call>\n{"name": "weather", "arguments": {"city": "P{a}\\"ris", "d": [1, {"x": 2}]}}\n</tool_call>'
)


def plan(choice: Any = "auto", parallel: bool | None = None) -> tooling.ToolPlan:
    result = tooling.plan(TOOLS, choice, lambda p, m: ValueError(f"{p}: {m}"), parallel)
    assert result is not None
    return result


def read_in_pieces(text: str, size: int, tool_plan: tooling.ToolPlan | None = None) -> list[tooling.ReadEvent]:
    reader = (tool_plan or plan()).reader()
    events = []
    for i in range(0, len(text), size):
        events += reader.feed(text[i : i + size])
    return events + reader.close()


def done(reason: str = "stop") -> Done:
    return Done(reason, 5, 7, GenerateMetrics())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        (CALL, [("clock", '{"utc": true}')]),
        (f"<tool_call>{CALL}</tool_call>", [("clock", '{"utc": true}')]),
        (f"```json\n{CALL}\n```", [("clock", '{"utc": true}')]),
        ('{"name": "weather", "parameters": {"city": "Rome"}}', [("weather", '{"city": "Rome"}')]),  # Llama 3
        (f"[{CALL}, {CALL}]", [("clock", '{"utc": true}')] * 2),
        (TWO, [("clock", '{"utc": true}'), ("weather", '{"city": "P{a}\\"ris", "d": [1, {"x": 2}]}')]),
    ],
)
def test_calls_are_read_in_each_format_whole_and_piece_by_piece(text: str, calls: list[tuple[str, str]]) -> None:
    read = plan().read(text)
    assert read.content is None and [(c.name, c.arguments) for c in read.calls] == calls
    for size in (1, 2, 7):
        events = read_in_pieces(text, size)
        assert not [e for e in events if isinstance(e, tooling.Content)]
        starts = [e for e in events if isinstance(e, tooling.CallStart)]
        assert [(e.index, e.name) for e in starts] == [(i, name) for i, (name, _) in enumerate(calls)]
        for i, (_, arguments) in enumerate(calls):
            fragments = [e.text for e in events if isinstance(e, tooling.Arguments) and e.index == i]
            assert "".join(fragments) == arguments
            assert size > 1 or len(fragments) == len(arguments)  # one character at a time: one fragment each


@pytest.mark.parametrize(
    "text",
    [
        "It is noon.",
        '{"name": "other", "arguments": {}}',  # not a tool
        '{"name": "clock"}',  # no arguments
        '{"arguments": {}, "name": "clock"}',  # the name must come first (so a call can stream)
        '{"name": "clock", "arguments": {"utc": true',  # cut off
        "<tool_call>",
        "  [1] first",
        "",
    ],
)
def test_what_is_not_a_call_is_content_and_never_lost(text: str) -> None:
    assert plan().read(text) == tooling.ReadAnswer(text, [])
    for size in (1, 3):
        events = read_in_pieces(text, size)
        starts = [e for e in events if isinstance(e, tooling.CallStart)]
        if not starts:  # a cut-off call streamed as a call; everything else is content, all of it
            assert "".join(e.text for e in events if isinstance(e, tooling.Content)) == text


def test_prose_streams_at_once_and_text_after_calls_is_content() -> None:
    reader = plan().reader()
    assert reader.feed("Hel") == [tooling.Content("Hel")]  # not an opening of a call: no holding back
    assert reader.feed("{") == [tooling.Content("{")]
    read = plan().read(f"{CALL}\nThat is the call.")
    assert read.content == "\nThat is the call." and [c.name for c in read.calls] == ["clock"]


def test_a_header_that_never_ends_is_given_up_as_content() -> None:
    # Past a bounded look-ahead the reader decides it is not a call, rather than re-reading a growing header.
    for text in ('{"name": "' + "x" * 5000, "{" + "\n" * 5000, f"<tool_call>{CALL}" + " " * 5000):
        reader = plan().reader()
        events = [e for i in range(0, len(text), 10) for e in reader.feed(text[i : i + 10])]
        assert isinstance(events[-1], tooling.Content), "content streams before the answer ends"
        if not reader.calls:
            assert "".join(e.text for e in events if isinstance(e, tooling.Content)) == text


def test_parallel_tool_calls_false_reads_one_call() -> None:
    read = plan(parallel=False).read(TWO)
    assert [c.name for c in read.calls] == ["clock"] and read.content is not None and "weather" in read.content


def test_a_required_call_is_constrained_by_the_schema_of_a_bare_call() -> None:
    schema = plan("required").schema()
    assert schema is not None and [c["properties"]["name"] for c in schema["anyOf"]] == [
        {"const": "weather"},
        {"const": "clock"},
    ]
    named = plan({"type": "function", "function": {"name": "clock"}}).schema()
    assert named == {
        "type": "object",
        "properties": {"name": {"const": "clock"}, "arguments": {"type": "object"}},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }
    assert plan().schema() is None


def sse_events(body: bytes) -> list[Any]:
    return [json.loads(line[6:]) for line in body.decode().split("\n\n") if line.startswith("data: {")]


def test_the_openai_stream_sends_call_deltas_in_openais_shape() -> None:
    writer = openai_streams.OpenAIToolStream("m", False, plan())
    out = b"".join(writer.delta(TWO[i : i + 4]) for i in range(0, len(TWO), 4)) + writer.finish(done())
    chunks = sse_events(out)
    calls = [c for chunk in chunks for choice in chunk["choices"] for c in choice["delta"].get("tool_calls", [])]
    firsts = [c for c in calls if "id" in c]
    assert [(c["index"], c["type"], c["function"]) for c in firsts] == [
        (0, "function", {"name": "clock", "arguments": ""}),
        (1, "function", {"name": "weather", "arguments": ""}),
    ]
    for index, expected in enumerate(c.arguments for c in plan().read(TWO).calls):
        fragments = [c for c in calls if c["index"] == index and "id" not in c]
        assert len(fragments) > 1 and all(set(c) == {"index", "function"} for c in fragments)
        assert "".join(c["function"]["arguments"] for c in fragments) == expected
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert not any(choice["delta"].get("content") for chunk in chunks for choice in chunk["choices"])


def test_the_openai_stream_sends_what_was_not_a_call_as_content() -> None:
    text = '{"name": "nope", "arguments": {}} and prose'
    writer = openai_streams.OpenAIToolStream("m", False, plan())
    out = b"".join(writer.delta(ch) for ch in text) + writer.finish(done())
    chunks = sse_events(out)
    assert "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks if ch["choices"]) == text
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    cut = openai_streams.OpenAIToolStream("m", False, plan())
    cut_out = cut.delta('{"name": "clock", "arguments": {"utc"') + cut.finish(done("length"))
    assert sse_events(cut_out)[-1]["choices"][0]["finish_reason"] == "length"  # a call cut off by max_tokens


def test_the_whole_openai_answer_carries_the_calls() -> None:
    body = json.loads(openai_schema.chat_completion("m", [relay.Answer(TWO, done())], plan()))
    message = body["choices"][0]["message"]
    assert body["choices"][0]["finish_reason"] == "tool_calls" and message["content"] is None
    assert [(c["type"], c["function"]["name"]) for c in message["tool_calls"]] == [
        ("function", "clock"),
        ("function", "weather"),
    ]
    assert all(c["id"].startswith("call_") for c in message["tool_calls"])


def test_openai_tool_turns_become_the_contracts_messages() -> None:
    parsed = openai_schema.parse_chat_completion(
        {
            "messages": [
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"a": 1}'}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "sun", "name": "weather"},
            ],
            "tools": TOOLS,
            "parallel_tool_calls": True,
        }
    )
    messages = parsed.generation.messages
    assert messages[1].tool_calls == (ToolCall("weather", '{"a": 1}', "c1"),) and messages[1].content == ""
    assert (messages[2].tool_call_id, messages[2].name) == ("c1", "weather")
    assert parsed.generation.options["tools"] == TOOLS and parsed.wire_names["tools"] == "tools"
    assert parsed.tools is not None and parsed.tools.parallel
    assert "json_schema" not in parsed.generation.options  # "auto": no grammar
    required = openai_schema.parse_chat_completion({"messages": [messages and {"role": "user", "content": "x"}],
                                        "tools": TOOLS, "tool_choice": "required"})  # fmt: skip
    assert required.wire_names["json_schema"] == "tools" and "anyOf" in required.generation.options["json_schema"]


def test_ollama_tools_and_tool_turns_are_parsed_and_answered_in_its_shape() -> None:
    parsed = ollama_schema.parse_ollama_chat(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "weather",
                                                                                  "arguments": {"a": 1}}}]},
                {"role": "tool", "content": "sun", "tool_name": "weather"},
            ],
            "tools": TOOLS,
        }
    )  # fmt: skip
    messages = parsed.generation.messages
    assert messages[1].tool_calls == (ToolCall("weather", '{"a": 1}'),) and messages[2].name == "weather"
    assert parsed.generation.options["tools"] == TOOLS and parsed.tools is not None
    whole = json.loads(ollama_streams.OllamaStream("m", "chat", parsed.tools).done(done(), 1.0, TWO))
    assert whole["message"]["tool_calls"] == [
        {"function": {"name": "clock", "arguments": {"utc": True}}},
        {"function": {"name": "weather", "arguments": {"city": 'P{a}"ris', "d": [1, {"x": 2}]}}},
    ]
    assert whole["message"]["content"] == "" and whole["done"]
    writer = ollama_streams.OllamaStream("m", "chat", parsed.tools)
    out = b"".join(writer.delta(TWO[i : i + 3]) for i in range(0, len(TWO), 3)) + writer.done(done(), 1.0)
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["message"].get("tool_calls") for line in lines] == [whole["message"]["tool_calls"], None]
    assert lines[-1]["done"] and not any(line["message"]["content"] for line in lines)
    prose = ollama_streams.OllamaStream("m", "chat", parsed.tools)
    text = '{"name": "clock", "arguments": {"utc": tr'  # cut off: sent as content, whole
    out = b"".join(prose.delta(ch) for ch in text) + prose.done(done("length"), 1.0)
    assert "".join(json.loads(line)["message"]["content"] for line in out.splitlines()) == text

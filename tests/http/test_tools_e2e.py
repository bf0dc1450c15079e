"""Tool calling through the HTTP door with the real `openai` client (and Ollama's /api/chat through httpx), on real
models served by llama.cpp: a tiny random Llama whose chat template renders tools (Qwen2.5-style `<tools>` and
`<tool_call>`), the plain tiny random Llama and the embedded SmolLM2 (templates without tools: the generic turn).

A required (or named) call is constrained by the JSON Schema of a call, so even a random model makes a call of a
known tool whose arguments validate against its `parameters`; with "auto" it may answer in prose.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from http_support import LoopThread, serving

import modelhost.inference
from modelhost.host import Host
from modelhost.http import HttpServer
from modelhost.inference.chat_tools import generic_prompt
from modelhost.testing import tinymodels
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytest.importorskip("llama_cpp")
jsonschema = pytest.importorskip("jsonschema")

pytestmark = pytest.mark.slow

#: `days` as tool parameters commonly say it: an integer from 1 (llama.cpp's grammar enforces the bound with our
#: digit-range rule, llguidance natively; both end an integer at 16 digits). Short: the tiny model holds 512 tokens.
WEATHER = {
    "type": "object",
    "properties": {"city": {"enum": ["Paris", "Rome"]}, "days": {"type": "integer", "minimum": 1}},
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
#: The JSON Schema of a call, for Ollama (which has no tool_choice): its `format` makes the answer a call.
WEATHER_CALL = {
    "type": "object",
    "properties": {"name": {"const": "weather"}, "arguments": WEATHER},
    "required": ["name", "arguments"],
    "additionalProperties": False,
}


def _serve(
    loop_thread: LoopThread, path: Path | str, name: str, backend: str | None = "llama_cpp"
) -> Iterator[HttpServer]:
    backend = None if path == "default" else backend
    host = Host(lambda: modelhost.inference.load_model(str(path), backend=backend), name=name)
    with serving(loop_thread, host) as server:
        yield server


@pytest.fixture(scope="module")
def tools_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama whose template renders tools (TOOLS_CHATML_TEMPLATE)."""
    return tinymodels.build_tiny_tools_llama(tmp_path_factory.mktemp("tiny_tools"), seed=0)


@pytest.fixture(scope="module")
def tools_gguf(tools_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same model as a GGUF (its template travels in the GGUF's metadata)."""
    return tinymodels.write_llama_gguf(tools_dir, tmp_path_factory.mktemp("tiny_tools_gguf") / "tiny-tools.gguf")


def hf_prompt_tokens(folder: Path, messages: list[Any], **kw: Any) -> int:
    """How many tokens transformers' own `apply_chat_template` makes of a conversation: the reference render."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kw)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


@pytest.fixture(scope="module")
def tiny(loop_thread: LoopThread, tools_gguf: Path) -> Iterator[HttpServer]:
    yield from _serve(loop_thread, tools_gguf, "tiny")


@pytest.fixture(scope="module")
def tf(loop_thread: LoopThread, tools_dir: Path) -> Iterator[HttpServer]:
    """The tools model on the transformers backend (apply_chat_template; llguidance for the call's grammar)."""
    pytest.importorskip("transformers")
    yield from _serve(loop_thread, tools_dir, "tf", backend="transformers")


@pytest.fixture(scope="module")
def plain(loop_thread: LoopThread, tiny_llama_gguf: Path) -> Iterator[HttpServer]:
    yield from _serve(loop_thread, tiny_llama_gguf, "plain")


@pytest.fixture(scope="module")
def smol(loop_thread: LoopThread) -> Iterator[HttpServer]:
    yield from _serve(loop_thread, "default", "default")


def client_of(server: HttpServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=STATE_WAIT_SECONDS)


def ask(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def assert_valid_call(call: Any, only: str | None = None) -> None:
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name in PARAMS and (only is None or call.function.name == only)
    jsonschema.validate(json.loads(call.function.arguments), PARAMS[call.function.name])


@pytest.mark.parametrize("server_name", ["tiny", "plain", "smol", "tf"])
@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "clock"}}])
def test_a_required_call_has_valid_arguments(server_name: str, choice: Any, request: pytest.FixtureRequest) -> None:
    client = client_of(request.getfixturevalue(server_name))
    for sampling in ({"temperature": 0}, {"temperature": 1.0, "seed": 4}):
        answer = client.chat.completions.create(
            model=server_name if server_name != "smol" else "default",
            messages=ask("What is the weather in Paris for 3 days?"),
            tools=TOOLS,
            tool_choice=choice,
            max_tokens=200,
            **sampling,
        )
        result = answer.choices[0]
        assert result.finish_reason == "tool_calls" and result.message.content is None
        calls = result.message.tool_calls or []
        assert len(calls) == 1
        assert_valid_call(calls[0], None if choice == "required" else "clock")


def test_tools_reach_the_prompt_through_the_template_or_the_generic_turn(
    tiny: HttpServer, plain: HttpServer, tools_dir: Path, tiny_llama_dir: Path
) -> None:
    # The served prompt is exactly what transformers renders: the tools through the template that knows them, and
    # in the generic system turn for the template that does not.
    expected = {
        "tiny": hf_prompt_tokens(tools_dir, ask("hi"), tools=TOOLS),
        "plain": hf_prompt_tokens(tiny_llama_dir, [{"role": "system", "content": generic_prompt(TOOLS)}, *ask("hi")]),
    }
    for server, name in ((tiny, "tiny"), (plain, "plain")):
        client = client_of(server)
        answer = client.chat.completions.create(model=name, messages=ask("hi"), tools=TOOLS, max_tokens=1)
        assert answer.usage is not None and answer.usage.prompt_tokens == expected[name]


@pytest.mark.parametrize("server_name", ["tiny", "smol", "tf"])
def test_streamed_call_deltas_reassemble_to_the_whole_call(server_name: str, request: pytest.FixtureRequest) -> None:
    client = client_of(request.getfixturevalue(server_name))
    kw: dict[str, Any] = {
        "model": "default" if server_name == "smol" else server_name,
        "messages": ask("What is the weather in Rome for 5 days?"),
        "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "weather"}},
        "max_tokens": 200,
        "temperature": 0,
    }
    whole = client.chat.completions.create(**kw).choices[0].message.tool_calls or []
    assert len(whole) == 1
    # Raw chunks: the first delta of the call carries index, id, type, name and empty arguments; later ones only
    # index and fragments.
    deltas = []
    finish = None
    for chunk in client.chat.completions.create(stream=True, **kw):
        for choice in chunk.choices:
            deltas.extend(choice.delta.tool_calls or [])
            finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    first, rest = deltas[0], deltas[1:]
    assert first.index == 0 and first.id and first.id.startswith("call_") and first.type == "function"
    assert first.function is not None and first.function.name == "weather" and first.function.arguments == ""
    assert len(rest) > 1 and all(d.index == 0 and d.id is None and d.function.name is None for d in rest)  # type: ignore[union-attr]
    assert "".join(d.function.arguments for d in rest) == whole[0].function.arguments  # type: ignore[union-attr,misc]
    # The openai client's own stream helper reassembles the same call.
    argument_events = 0
    with client.chat.completions.stream(**kw) as stream:
        for event in stream:
            argument_events += event.type == "tool_calls.function.arguments.delta"
        final = stream.get_final_completion().choices[0]
    assert argument_events > 1 and final.finish_reason == "tool_calls"
    calls = final.message.tool_calls or []
    assert [(c.function.name, c.function.arguments) for c in calls] == [("weather", whole[0].function.arguments)]  # type: ignore[union-attr]
    assert_valid_call(calls[0], "weather")


def test_a_call_and_its_result_go_back_through_the_template(
    tiny: HttpServer, plain: HttpServer, tools_dir: Path
) -> None:
    for server, name in ((tiny, "tiny"), (plain, "plain")):
        client = client_of(server)
        history: list[Any] = [
            *ask("weather?"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Paris", "days": 3}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"forecast": "sun"}'},
        ]
        before = client.chat.completions.create(model=name, messages=history[:1], max_tokens=1, temperature=0)
        after = client.chat.completions.create(model=name, messages=history, tools=TOOLS, max_tokens=8, temperature=0)
        assert after.choices[0].finish_reason in ("stop", "length", "tool_calls")
        # The call and its result are in the prompt (rendered by the template, or written in by the generic turn).
        assert after.usage is not None and before.usage is not None
        assert after.usage.prompt_tokens > before.usage.prompt_tokens + 20
        if name == "tiny":  # exactly the template's own rendering of the call and its result (arguments as a mapping)
            call = history[1]["tool_calls"][0]
            reference = [
                history[0],
                {**history[1], "tool_calls": [{**call, "function": {"name": "weather",
                                                                    "arguments": {"city": "Paris", "days": 3}}}]},
                history[2],
            ]  # fmt: skip
            assert after.usage.prompt_tokens == hf_prompt_tokens(tools_dir, reference, tools=TOOLS)


def test_auto_answers_in_prose_or_a_call_and_streams_the_same(tiny: HttpServer) -> None:
    client = client_of(tiny)
    kw: dict[str, Any] = {"model": "tiny", "messages": ask("hi"), "tools": TOOLS, "max_tokens": 8, "temperature": 0}
    message = client.chat.completions.create(**kw).choices[0].message
    assert (message.content is not None) != bool(message.tool_calls)
    pieces = []
    for chunk in client.chat.completions.create(stream=True, **kw):
        pieces.extend(c.delta.content or "" for c in chunk.choices)
    # Held-back text is never lost: the streamed content is the whole answer.
    assert "".join(pieces) == (message.content or "")


def test_tool_choice_none_shows_the_tools_but_never_reads_a_call(
    tiny: HttpServer, plain: HttpServer, tools_dir: Path, tiny_llama_dir: Path
) -> None:
    # As OpenAI and vLLM do: the model sees its tools (through the template, or the generic turn), only the call is
    # forbidden. The answer is made to be a call's very text (response_format holds it to a call's JSON Schema),
    # which "auto" would read as a call; under "none" it is content, whole and streamed.
    expected = {
        "tiny": hf_prompt_tokens(tools_dir, ask("hi"), tools=TOOLS),
        "plain": hf_prompt_tokens(tiny_llama_dir, [{"role": "system", "content": generic_prompt(TOOLS)}, *ask("hi")]),
    }
    call_format: Any = {"type": "json_schema", "json_schema": {"name": "call", "schema": WEATHER_CALL}}
    for server, name in ((tiny, "tiny"), (plain, "plain")):
        client = client_of(server)
        kw: dict[str, Any] = {"model": name, "messages": ask("hi"), "tools": TOOLS, "tool_choice": "none",
                              "response_format": call_format, "max_tokens": 200, "temperature": 0}  # fmt: skip
        answer = client.chat.completions.create(**kw)
        assert answer.usage is not None and answer.usage.prompt_tokens == expected[name]
        result = answer.choices[0]
        assert result.finish_reason == "stop" and not result.message.tool_calls
        assert json.loads(result.message.content or "")["name"] == "weather"
        auto = client.chat.completions.create(**{**kw, "tool_choice": "auto"}).choices[0]
        assert auto.finish_reason == "tool_calls", "the same text is a call under auto"
        pieces, finish = [], None
        for chunk in client.chat.completions.create(stream=True, **kw):
            for choice in chunk.choices:
                assert not choice.delta.tool_calls
                pieces.append(choice.delta.content or "")
                finish = choice.finish_reason or finish
        assert "".join(pieces) == result.message.content and finish == "stop"


def test_ollama_chat_takes_tools_and_answers_calls_in_its_shape(tiny: HttpServer) -> None:
    body: dict[str, Any] = {
        "model": "tiny",
        "messages": ask("weather?"),
        "tools": TOOLS,
        "format": WEATHER_CALL,  # Ollama has no tool_choice; a call-shaped format makes the answer a call
        "options": {"temperature": 0, "num_predict": 200},
    }
    answer = httpx.post(f"{tiny.url}/api/chat", json={**body, "stream": False}, timeout=STATE_WAIT_SECONDS).json()
    calls = answer["message"]["tool_calls"]
    assert len(calls) == 1 and calls[0]["function"]["name"] == "weather" and answer["done"]
    jsonschema.validate(calls[0]["function"]["arguments"], WEATHER)  # an object, as Ollama sends it
    answer_lines = httpx.post(f"{tiny.url}/api/chat", json=body, timeout=STATE_WAIT_SECONDS).text.splitlines()
    lines = [json.loads(line) for line in answer_lines]
    streamed = [line["message"]["tool_calls"] for line in lines if line["message"].get("tool_calls")]
    assert streamed == [calls] and lines[-1]["done"]
    # Its history form: an assistant's tool_calls (arguments as an object) and a tool message with tool_name.
    history = [
        *ask("weather?"),
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": '{"forecast": "sun"}', "tool_name": "weather"},
    ]
    later = httpx.post(
        f"{tiny.url}/api/chat",
        json={"model": "tiny", "messages": history, "tools": TOOLS, "stream": False, "options": {"num_predict": 4}},
        timeout=STATE_WAIT_SECONDS,
    )
    assert later.status_code == 200 and later.json()["done"]


@pytest.mark.parametrize(
    ("messages", "extra", "param"),
    [
        (ask("hi"), {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        (ask("hi"), {"tool_choice": "required"}, "tool_choice"),
        (ask("hi"), {"tools": [{"type": "function", "function": {"name": "x", "parameters": {"type": "frob"}}}],
                     "tool_choice": "required"}, "tools"),
        (ask("hi"), {"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools"),
        (ask("hi"), {"tools": [{"type": "retrieval"}]}, "tools"),
        ([*ask("hi"), {"role": "tool", "content": "42"}], {}, "messages[1].tool_call_id"),
        ([*ask("hi"), {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                          "function": {"name": "clock", "arguments": "{not json"}}]}],
         {}, "messages[1].tool_calls[0].function.arguments"),
        ([*ask("hi"), {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {}}]}],
         {}, "messages[1].tool_calls[0].function.name"),
        ([{"role": "user", "content": "hi", "tool_calls": [{"type": "function", "function": {"name": "clock"}}]}],
         {}, "messages[0].tool_calls"),
    ],
)  # fmt: skip
def test_malformed_tools_and_tool_messages_are_400s_naming_the_parameter(
    plain: HttpServer, messages: list[Any], extra: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client_of(plain).chat.completions.create(model="plain", messages=messages, max_tokens=4, **extra)
    assert info.value.body["param"] == param  # type: ignore[index]


def test_ollama_malformed_tools_are_400s_naming_the_parameter(plain: HttpServer) -> None:
    for body, param in (
        ({"messages": ask("hi"), "tools": [{"type": "function", "function": {"parameters": {}}}]}, "tools"),
        ({"messages": [*ask("hi"), {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}]},
         "messages[1].tool_calls[0].function.arguments"),
        ({"messages": [{"role": "user", "content": "hi", "tool_name": "f"}]}, "messages[0].tool_name"),
    ):  # fmt: skip
        answer = httpx.post(
            f"{plain.url}/api/chat", json={"model": "plain", "stream": False, **body}, timeout=STATE_WAIT_SECONDS
        )
        assert answer.status_code == 400 and param in answer.text, answer.text
    generate = httpx.post(f"{plain.url}/api/generate", json={"model": "plain", "prompt": "hi", "tools": TOOLS})
    assert generate.status_code == 400 and "tools" in generate.text


def test_n_choices_each_make_their_own_call_streamed_as_whole(tiny: HttpServer) -> None:
    """`n` with a required call: every choice is a valid call of its own (sampled with seed + i), and the stream's
    deltas, told apart by choice index, join to the same calls as the whole answer."""
    client = client_of(tiny)
    kw: dict[str, Any] = {
        "model": "tiny", "messages": ask("Weather in Oslo?"), "tools": TOOLS, "tool_choice": "required",
        "max_tokens": 200, "temperature": 1.0, "seed": 11, "n": 3,
    }  # fmt: skip
    whole = client.chat.completions.create(**kw)
    assert [c.index for c in whole.choices] == [0, 1, 2]
    for choice in whole.choices:
        assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls or []) == 1
        assert_valid_call((choice.message.tool_calls or [])[0])
    arguments = ["", "", ""]
    names: dict[int, str] = {}
    for chunk in client.chat.completions.create(stream=True, **kw):
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                if delta.function is not None and delta.function.name:
                    names[choice.index] = delta.function.name
                arguments[choice.index] += (delta.function.arguments or "") if delta.function is not None else ""
    assert arguments == [(c.message.tool_calls or [])[0].function.arguments for c in whole.choices]  # type: ignore[union-attr]
    assert names == {c.index: (c.message.tool_calls or [])[0].function.name for c in whole.choices}  # type: ignore[union-attr]

"""Tools and tool turns rendered through a model's own chat template (llama_cpp's renderer and transformers'
`apply_chat_template`), the probe that tells a template that renders tools from one that does not, and the generic
tools turn for the latter; plus the contract's `tools` option and Message's tool fields."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelhost.backends.llama_cpp import chat
from modelhost.errors import InvalidOptionError
from modelhost.inference import chat_tools
from modelhost.inference.options import MAX_TOOLS, MAX_TOOLS_CHARS, GenerateOptions
from modelhost.inference.types import Message, ToolCall
from modelhost.testing import tinymodels

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Forecast for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
CALL = ToolCall("get_weather", '{"city": "Paris"}', "call_7")
HISTORY = [
    Message("system", "Be brief."),
    Message("user", "Weather in Paris?"),
    Message("assistant", "", tool_calls=[CALL]),
    Message("tool", '{"forecast": "sun"}', tool_call_id="call_7", name="get_weather"),
]


def render(template: str | None, messages: list[Message], tools: list[dict[str, Any]] = TOOLS) -> str:
    return chat.render(template, messages, bos_token="<|im_start|>", eos_token="<|im_end|>", tools=tools)


def test_a_template_that_renders_tools_gets_them_and_the_calls_in_its_own_format() -> None:
    assert chat.tool_support(tinymodels.TOOLS_CHATML_TEMPLATE, "<|im_start|>", "<|im_end|>") == chat_tools.ToolSupport(
        True, True
    )
    text = render(tinymodels.TOOLS_CHATML_TEMPLATE, HISTORY)
    tools_block = text[text.index("<tools>\n") : text.index("\n</tools>")]
    assert "get_weather" in tools_block and "Forecast for a city" in tools_block
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools")  # the system turn merged by the template
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    assert '<tool_response>\n{"forecast": "sun"}\n</tool_response>' in text
    assert "You can call these tools" not in text  # no generic turn when the template has its own


def test_a_template_without_tools_gets_the_generic_turn_and_calls_written_into_the_text() -> None:
    for template in (tinymodels.CHATML_TEMPLATE, None):  # the tiny ChatML, and the fallback for a GGUF without one
        assert chat.tool_support(template, "<|im_start|>", "<|im_end|>") == chat_tools.NO_SUPPORT
        text = render(template, HISTORY)
        system = text[: text.index("<|im_end|>")]
        assert system.startswith("<|im_start|>system\nBe brief.\n\nYou can call these tools:")
        assert "get_weather" in system and "Forecast for a city" in system
        assert '<|im_start|>assistant\n{"name": "get_weather", "arguments": {"city": "Paris"}}<|im_end|>' in text
        assert '<|im_start|>tool\n{"forecast": "sun"}<|im_end|>' in text


def test_without_tools_or_calls_a_render_is_what_it_was() -> None:
    plain = [Message("user", "hi")]
    for template in (tinymodels.TOOLS_CHATML_TEMPLATE, tinymodels.CHATML_TEMPLATE):
        assert render(template, plain, []) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_a_template_that_raises_on_the_probe_counts_as_not_rendering_tools() -> None:
    refusing = "{% if tools %}{{ raise_exception('no tools here') }}{% endif %}" + tinymodels.CHATML_TEMPLATE
    assert chat.tool_support(refusing, "", "") == chat_tools.NO_SUPPORT
    assert "You can call these tools" in render(refusing, [Message("user", "hi")])


def test_the_template_stays_sandboxed() -> None:
    # A template reaching for Python internals through the tools is stopped by the sandbox (the probe too: such a
    # template counts as one without tools).
    from jinja2.exceptions import SecurityError

    hostile = "{% if tools %}{{ tools.__class__.__init__.__globals__ }}{% endif %}" + tinymodels.CHATML_TEMPLATE
    with pytest.raises(SecurityError):
        chat.compile_template(hostile).render(messages=[], tools=TOOLS, add_generation_prompt=False)
    assert chat.tool_support(hostile, "", "") == chat_tools.NO_SUPPORT


# --- the transformers backend ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tools_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("transformers")
    from modelhost.backends.transformers.backend import TransformersBackend

    folder = tinymodels.build_tiny_tools_llama(tmp_path_factory.mktemp("tiny_tools_tf"), seed=0)
    with TransformersBackend().load_model(str(folder)) as model:
        yield model


def test_transformers_renders_tools_and_tool_turns_through_apply_chat_template(tools_model: Any) -> None:
    prompt = tools_model.prompts.chat(HISTORY, tools_model.runner.options({"tools": TOOLS}))
    text = tools_model.checkpoint.tokenizer.decode(prompt.ids)
    # The same text llama.cpp's renderer makes from the same template: both backends agree on the format.
    assert text == render(tinymodels.TOOLS_CHATML_TEMPLATE, HISTORY)
    assert "Forecast for a city" in text and "<tool_response>" in text


def test_transformers_answers_a_chat_with_tools(tools_model: Any) -> None:
    tokens = list(tools_model.chat(HISTORY, tools=TOOLS, max_tokens=3, temperature=0))
    assert len(tokens) == 3
    assert tools_model.metrics().prompt_tokens > len(
        tools_model.prompts.chat(HISTORY[:2], tools_model.runner.options({})).ids
    )


def test_transformers_gives_a_template_without_tools_the_generic_turn(tiny_llama_dir: Path) -> None:
    from modelhost.backends.transformers.backend import TransformersBackend

    with TransformersBackend().load_model(str(tiny_llama_dir)) as model:
        text = model.checkpoint.tokenizer.decode(
            model.prompts.chat(HISTORY, model.runner.options({"tools": TOOLS})).ids
        )
    assert text == render(tinymodels.CHATML_TEMPLATE, HISTORY)


# --- the contract -------------------------------------------------------------------------------------------------


def test_message_tool_fields_default_and_freeze() -> None:
    assert Message("user", "hi") == Message("user", "hi", (), (), "", "")
    turn = Message("assistant", "", tool_calls=[CALL])  # a list is frozen into a tuple
    assert turn.tool_calls == (CALL,) and hash(turn) == hash(Message("assistant", "", tool_calls=(CALL,)))


def test_the_tools_option_is_validated_and_bounded() -> None:
    parsed = GenerateOptions.parse(tools=TOOLS)
    assert parsed.tool_specs() == TOOLS and isinstance(parsed.tools, str)
    assert GenerateOptions.parse(tools=json.dumps(TOOLS)).tools == parsed.tools
    assert GenerateOptions().tool_specs() == []
    many = [{"type": "function", "function": {"name": f"f{i}"}} for i in range(MAX_TOOLS + 1)]
    big = [{"type": "function", "function": {"name": "f", "description": "x" * MAX_TOOLS_CHARS}}]
    for bad in (
        {"type": "function"},
        [],
        many,
        big,
        [{"type": "code"}],
        [{"type": "function", "function": {"description": "no name"}}],
        [{"type": "function", "function": {"name": "f", "parameters": "object"}}],
        [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}],
        "[not json",
    ):
        with pytest.raises(InvalidOptionError) as info:
            GenerateOptions.parse(tools=bad)
        assert info.value.option == "tools"

"""Tools in a chat template: the conversation as a Jinja template's variables, HF's way.

A model tuned for tool calling was tuned on its own template's format (Qwen2.5's `<tools>` block and `<tool_call>`
tags, Llama 3's JSON calls), so tools reach it through that template, as transformers' `apply_chat_template(tools=)`
and llama.cpp's server pass them: a `tools` variable (OpenAI's `{"type": "function", "function": {...}}` dicts) and,
on an assistant turn, `tool_calls` (`{"id", "type": "function", "function": {"name", "arguments": {object}}}`),
on a tool turn `tool_call_id` and `name`.

Whether a template renders them is found out as llama.cpp does: render once with a probe tool (and a probe call) and
see whether its name appears; a template that ignores them would otherwise drop the tools without a word. For such a
template the tools go in a generic system turn instead (the format llama-server falls back to: one JSON object
`{"name": ..., "arguments": {...}}` is a call) and earlier calls are written into the assistant's text that way.
Every backend that renders templates (llama_cpp, transformers, vllm) uses this module, so they agree on the format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from modelhost.inference.types import Message, ToolCall

#: A tool whose name no template writes by chance: seeing it in the probe's text means the template renders tools.
PROBE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "modelhost_probe_tool_x7q",
        "description": "Probe of the chat template",
        "parameters": {"type": "object", "properties": {}},
    },
}

#: A call (of another name than the probe tool, so the tools listing cannot be mistaken for it) in an assistant turn.
PROBE_CALL = ToolCall("modelhost_probe_call_k3z", "{}", "call_probe")


@dataclass(frozen=True, slots=True)
class ToolSupport:
    """What a chat template renders: the `tools` variable, and assistant turns' `tool_calls`."""

    tools: bool
    calls: bool


def call_dict(call: ToolCall) -> dict[str, Any]:
    """A call as templates read it (HF's convention): arguments as a mapping, which templates `tojson`."""
    try:
        arguments: Any = json.loads(call.arguments)
    except ValueError:
        arguments = call.arguments  # not JSON: passed as the text it is rather than lost
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def probe(render: Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], str]) -> ToolSupport:
    """Whether the template behind `render(messages, tools)` renders tools and calls (render with probes, look)."""

    def shows(name: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> bool:
        try:
            return name in render(messages, tools)
        except Exception:  # a template that refuses the probe does not support it; the request goes on
            return False

    user = {"role": "user", "content": "probe"}
    tools = shows(PROBE_TOOL["function"]["name"], [user], [PROBE_TOOL])
    turn = {"role": "assistant", "content": "", "tool_calls": [call_dict(PROBE_CALL)]}
    calls = shows(PROBE_CALL.name, [user, turn, {"role": "user", "content": "probe"}], [PROBE_TOOL] if tools else None)
    return ToolSupport(tools, calls)


def needs_tools(messages: Sequence[Message], tools: Sequence[Any]) -> bool:
    """True when a render has tools or earlier calls to place (only then is a template probed)."""
    return bool(tools) or any(m.tool_calls for m in messages)


def generic_prompt(tools: Sequence[Mapping[str, Any]]) -> str:
    """The system turn that tells a model whose template knows no tools what it can call and how."""
    listing = json.dumps(
        [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description") or "",
                "parameters": t["function"].get("parameters") or {},
            }
            for t in tools
        ],
        ensure_ascii=False,
    )
    how = 'To call a tool, reply with only a JSON object: {"name": <tool name>, "arguments": <its arguments>}.'
    return f"You can call these tools:\n{listing}\n{how} Otherwise, answer normally."


def calls_text(calls: Sequence[ToolCall]) -> str:
    """Earlier calls written as the generic turn tells a model to write them (one JSON object a line)."""
    return "\n".join(json.dumps({"name": c.name, "arguments": call_dict(c)["function"]["arguments"]}) for c in calls)


def text_of(message: Message, support: ToolSupport) -> str:
    """A turn's text, with its earlier calls written in when the template would not render them."""
    if not message.tool_calls or support.calls:
        return message.content
    calls = calls_text(message.tool_calls)
    return f"{message.content}\n{calls}" if message.content else calls


def turn(message: Message, content: Any, support: ToolSupport) -> dict[str, Any]:
    """One turn as a template reads it: `content` (text or parts), plus the tool fields the template renders."""
    out: dict[str, Any] = {"role": message.role, "content": content}
    if message.tool_calls and support.calls:
        out["tool_calls"] = [call_dict(c) for c in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.name:
        out["name"] = message.name
    return out


def with_generic_tools(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> list[Message]:
    """The conversation with the generic tools turn first (merged into a leading system turn: many templates allow
    only one, at the start)."""
    prompt = generic_prompt(tools)
    if messages and messages[0].role == "system":
        first = messages[0]
        return [Message("system", f"{first.content}\n\n{prompt}", first.images), *messages[1:]]
    return [Message("system", prompt), *messages]


@dataclass(frozen=True, slots=True)
class TemplateInputs:
    """A conversation ready for its template: the turns to render (with the generic tools turn when the template
    cannot show `tools`), the template's `tools` variable (None when it has none to show), and what the template
    renders of tools and calls."""

    turns: list[Message]
    tools: list[dict[str, Any]] | None
    support: ToolSupport

    def variables(self) -> dict[str, Any]:
        """The template variables this adds beside the messages: `tools`, when there are tools to show."""
        return {} if self.tools is None else {"tools": self.tools}

    def text_turns(self) -> list[dict[str, Any]]:
        """The turns as a text template reads them (see `template_messages`)."""
        return template_messages(self.turns, self.support)


def template_inputs(
    messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], support_of: Callable[[], ToolSupport]
) -> TemplateInputs:
    """The conversation and `tools` (OpenAI function specs) as a template takes them. `support_of` says what the
    template renders (a probe, run once per template by the caller's cache); it is asked only when there are tools
    or earlier calls to place, so a plain chat never renders a probe."""
    support = support_of() if needs_tools(messages, tools) else NO_SUPPORT
    if tools and not support.tools:
        return TemplateInputs(with_generic_tools(messages, tools), None, support)
    return TemplateInputs(list(messages), [dict(t) for t in tools] if tools else None, support)


def probe_hf(renderer: Any) -> ToolSupport:
    """`probe` over a Hugging Face tokenizer's or processor's `apply_chat_template` (the transformers and vllm
    backends render through it)."""

    def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        return str(renderer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False))

    return probe(render)


def template_messages(messages: Sequence[Message], support: ToolSupport) -> list[dict[str, Any]]:
    """Text turns as a template reads them (see `turn`)."""
    return [turn(m, text_of(m, support), support) for m in messages]


#: A template that renders neither: what every render without tools or calls assumes (no probe needed).
NO_SUPPORT = ToolSupport(False, False)

"""Tool calling on the OpenAI door: `tools` and `tool_choice` in, `tool_calls` out.

How the model learns of the tools: a system turn, in the generic format llama-server falls back to for templates
without tool support (one JSON object `{"name": ..., "arguments": {...}}` is a call). It is not rendered through a
model's own tool template yet: that needs the contract's Message to carry tools and calls into the templates.

How a call is made sure of: when one is required (`tool_choice` "required" or a named function), the answer is
constrained by the JSON Schema of a call (the contract's `json_schema` option: a grammar on llama.cpp), so its name
is one of the tools and its arguments match that tool's `parameters`, even from a tiny random model. With "auto" the
model may answer in prose; its answer is read as a call only when it is exactly a call of a known tool (bare, in a
```json fence, or in <tool_call> tags as Hermes-style models write it).

Streaming: a required call is sent whole as one tool_calls delta at the end (its text is JSON nobody should show).
With "auto", text streams as usual unless it starts like a call ({, ``` or <tool_call>), which is held back until the
answer is complete and then sent as a call or, if it was not one, as content.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from modelhost.inference.types import Message

ToolChoice = Literal["auto", "required", "named"]

#: How a call may be wrapped in the answer: Hermes-style tags or a Markdown fence; the JSON inside is the call.
_WRAPPED = re.compile(r"^(?:<tool_call>\s*(?P<tag>.*?)\s*</tool_call>|```(?:json)?\s*(?P<fence>.*?)\s*```)$", re.S)

#: Openings of an "auto" answer that may be a call and so are held back while streaming.
_CALL_STARTS = ("{", "```", "<tool_call>")


class _Function(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None  # the arguments always follow `parameters` when a call is required


class _Tool(msgspec.Struct, forbid_unknown_fields=True, tag_field="type", tag="function"):
    function: _Function


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model made: its id (ours), the tool's name and its arguments as JSON text (OpenAI's shape)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """The tools of one request and how a call is chosen."""

    tools: tuple[_Function, ...]
    choice: ToolChoice
    named: str | None = None

    def system_prompt(self) -> str:
        """The turn that tells the model its tools and how to call one."""
        listing = json.dumps(
            [{"name": t.name, "description": t.description or "", "parameters": t.parameters or {}} for t in self.tools]
        )
        how = 'To call a tool, reply with only a JSON object: {"name": <tool name>, "arguments": <its arguments>}.'
        if self.choice == "auto":
            how += " Otherwise, answer normally."
        return f"You can call these tools:\n{listing}\n{how}"

    def schema(self) -> dict[str, Any] | None:
        """The JSON Schema a required call must match (None when the model may answer in prose)."""
        if self.choice == "auto":
            return None
        chosen = [t for t in self.tools if self.choice == "required" or t.name == self.named]
        calls = [
            {
                "type": "object",
                "properties": {
                    "name": {"const": t.name},
                    "arguments": t.parameters or {"type": "object"},
                },
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for t in chosen
        ]
        return calls[0] if len(calls) == 1 else {"anyOf": calls}

    def parse(self, text: str) -> list[ToolCall]:
        """The calls in a complete answer; empty when it is not exactly a call of a known tool."""
        body = text.strip()
        wrapped = _WRAPPED.match(body)
        if wrapped:
            body = wrapped.group("tag") if wrapped.group("tag") is not None else wrapped.group("fence")
        try:
            value = json.loads(body)
        except ValueError:
            return []
        items = value if isinstance(value, list) else [value]
        names = {t.name for t in self.tools}
        calls = []
        for item in items:
            if not (isinstance(item, dict) and item.get("name") in names and isinstance(item.get("arguments"), dict)):
                return []
            calls.append(ToolCall(f"call_{uuid.uuid4().hex[:24]}", item["name"], json.dumps(item["arguments"])))
        return calls

    def may_be_call(self, text: str) -> bool:
        """True while an "auto" answer's start could still be a call (so a stream holds it back)."""
        head = text.lstrip()
        return not head or any(head.startswith(s) or s.startswith(head) for s in _CALL_STARTS)


def plan(tools: Sequence[Any] | None, tool_choice: Any, errors: Any) -> ToolPlan | None:
    """The ToolPlan of a request's `tools` and `tool_choice`, or None when no tool may be called.

    `errors(param, message)` builds the door's 400 (so this module spells no status codes)."""
    if not tools:
        if tool_choice not in (None, "none", "auto"):
            raise errors("tool_choice", "names a tool choice but the request has no tools")
        return None
    try:
        specs = tuple(msgspec.convert(t, _Tool, strict=True).function for t in tools)
    except msgspec.ValidationError as exc:
        raise errors("tools", f"invalid tools: {exc}") from None
    names = [t.name for t in specs]
    if len(set(names)) != len(names):
        raise errors("tools", "tool names must be unique")
    if tool_choice in (None, "auto"):
        return ToolPlan(specs, "auto")
    if tool_choice == "none":
        return None
    if tool_choice == "required":
        return ToolPlan(specs, "required")
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        name = (tool_choice.get("function") or {}).get("name")
        if name not in names:
            raise errors("tool_choice", f"names function {name!r}, which is not in tools")
        return ToolPlan(specs, "named", name)
    raise errors("tool_choice", 'must be "none", "auto", "required" or {"type": "function", "function": {"name"}}')


def with_tools(messages: list[Message], tool_plan: ToolPlan) -> list[Message]:
    """The conversation with the tools' system turn first (merged into a leading system turn: many templates
    allow only one, at the start)."""
    prompt = tool_plan.system_prompt()
    if messages and messages[0].role == "system":
        first = messages[0]
        return [Message("system", f"{first.content}\n\n{prompt}", first.images), *messages[1:]]
    return [Message("system", prompt), *messages]


def call_text(calls: Sequence[Any]) -> str:
    """An assistant turn's earlier `tool_calls`, written back as the model was told to write them."""
    out = []
    for call in calls:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        arguments = function.get("arguments", "{}")
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            parsed = {}
        out.append(json.dumps({"name": function.get("name", ""), "arguments": parsed}))
    return "\n".join(out)

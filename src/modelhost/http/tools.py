"""Tool calling on the HTTP doors: `tools` and `tool_choice` in, `tool_calls` out.

How the model learns of the tools: through its own chat template. The door passes the tools as the contract's
`tools` option and earlier calls / tool results as the turns' `tool_calls` / `tool_call_id` / `name`; the backend
renders them with the template (Qwen2.5's `<tools>` block, Llama 3's JSON) or, for a template that renders no
tools, with a generic system turn (`modelhost.inference.chat_tools`).

How a call is made sure of: when one is required (`tool_choice` "required" or a named function), the answer is
constrained by the JSON Schema of a call (the contract's `json_schema` option: a grammar on llama.cpp), so its name
is one of the tools and its arguments match that tool's `parameters`, even from a tiny random model. The grammar
describes the bare JSON object `{"name": ..., "arguments": {...}}` (a grammar over JSON cannot add a template's tags),
and the reader below takes bare JSON as a call as readily as a tagged one, so a required call always parses.

How calls are read: `CallReader` reads the answer as it is generated, in the formats models write: Hermes/Qwen
`<tool_call>{...}</tool_call>` (several in a row), bare JSON `{"name": ..., "arguments"|"parameters": {...}}` (Llama 3
writes "parameters"), a JSON list of such objects, or one in a ```json fence. The name must come first (every one of
those formats writes it first), which is what lets a call stream: once the reader has seen `{"name": "<a known
tool>", "arguments": {` the answer is known to be a call, and every later piece of the arguments object goes out as it
is generated. Text before that point is held back; if it turns out not to be a call it is sent as content, so held
text is never lost. The arguments are the model's own JSON text (not re-serialised), so streamed fragments join to
exactly the non-streamed call.

`tool_choice: "none"`: the tools still reach the prompt, as for "auto" (OpenAI and vLLM show the model its tools and
forbid only the call; a model that never sees the tools of a conversation full of earlier calls and results answers
worse), and the answer is never read as a call: it is content, even when it is a call's text.

Several calls: honoured (`parallel_tool_calls` true or absent) when the model writes several, since the tagged and
list formats carry them naturally; `parallel_tool_calls: false` reads only the first call, and any text after it is
content. A required call's grammar allows one call, so a required answer has exactly one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from modelhost.inference.types import ToolCall

ToolChoice = Literal["none", "auto", "required", "named"]

#: Openings of a call (or of a run of calls) in an answer, tried in this order ("```json" before its prefix "```").
_OPENERS = ("<tool_call>", "```json", "```", "[", "{")
#: What closes a call of each wrapper after its JSON object.
_CLOSERS = {"<tool_call>": "</tool_call>", "```json": "```", "```": "```", "[": "", "{": ""}

#: How far past the start of a call's header (or of its closing tag) the reader looks before deciding it is not a
#: call (plus the longest tool name). Each new piece of the answer re-reads that stretch, so an unbounded one (a model
#: writing a never-ending "name" string, or whitespace) would cost time quadratic in the answer, on the event loop;
#: real headers are a few dozen characters.
_LOOKAHEAD = 256

_NEED = -1  # scanning ran out of text: the answer so far is a prefix of what was looked for
_FAIL = -2  # the text cannot be what was looked for


class _Function(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None  # the arguments always follow `parameters` when a call is required


class _Tool(msgspec.Struct, forbid_unknown_fields=True, tag_field="type", tag="function"):
    function: _Function


@dataclass(frozen=True, slots=True)
class CallStart:
    """A call began: the first delta of a call carries its index, id and name."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class Arguments:
    """A fragment of a call's arguments (JSON text), in order."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class Content:
    """Answer text that is not a call."""

    text: str


ReadEvent = CallStart | Arguments | Content


def _ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t\r\n":
        i += 1
    return i


def _literal(s: str, i: int, lit: str) -> int:
    """The index after `lit` (skipping whitespace before it), _NEED or _FAIL."""
    i = _ws(s, i)
    if s.startswith(lit, i):
        return i + len(lit)
    return _NEED if lit.startswith(s[i:]) else _FAIL


def _string(s: str, i: int) -> tuple[int, str]:
    """A JSON string at `i` (after whitespace): (index after it, its value), or (_NEED | _FAIL, "")."""
    i = _ws(s, i)
    if i >= len(s):
        return _NEED, ""
    if s[i] != '"':
        return _FAIL, ""
    j, escaped = i + 1, False
    while j < len(s):
        c = s[j]
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == '"':
            try:
                return j + 1, str(json.loads(s[i : j + 1]))
            except ValueError:
                return _FAIL, ""
        j += 1
    return _NEED, ""


def _header(s: str, i: int) -> tuple[int, str]:
    """`{"name": "<name>", "arguments"|"parameters": ` then the `{` of the arguments: (index of that `{`, name), or
    (_NEED | _FAIL, "")."""
    for lit in ("{", '"name"', ":"):
        i = _literal(s, i, lit)
        if i < 0:
            return i, ""
    i, name = _string(s, i)
    if i < 0:
        return i, ""
    i = _literal(s, i, ",")
    if i < 0:
        return i, ""
    keys = [_literal(s, i, key) for key in ('"arguments"', '"parameters"')]
    ok = [k for k in keys if k >= 0]
    if not ok:
        return (_NEED if _NEED in keys else _FAIL), ""
    i = _literal(s, ok[0], ":")
    if i < 0:
        return i, ""
    i = _ws(s, i)
    if i >= len(s):
        return _NEED, ""
    return (i, name) if s[i] == "{" else (_FAIL, "")


class CallReader:
    """Reads an answer, fed in pieces as generated, into content and tool calls (see the module docstring).

    `feed` returns the events the new text settles; `close` the rest once the answer is complete. Afterwards
    `calls` are the calls read and `complete` says whether each one's JSON ended (False when the answer was cut off,
    or went on with something that is not JSON, inside a call).
    """

    def __init__(self, names: frozenset[str], max_calls: int | None = None) -> None:
        self._names = names
        self._max_calls = max_calls
        self._lookahead = _LOOKAHEAD + max((len(n) for n in names), default=0)
        self._buf = ""
        self._pos = 0  # text before this is read
        self._held = 0  # text from here to _pos is held back: it may still be (part of) a call
        self._state: Literal["start", "header", "arguments", "end", "list", "between", "text"] = "start"
        self._opener = ""  # how the current call was opened (a key of _CLOSERS)
        self._in_list = False
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._started: list[CallStart] = []
        self._arguments: list[list[str]] = []
        self._ended = 0  # calls whose JSON (and closer) ended

    @property
    def calls(self) -> list[ToolCall]:
        """The calls read so far, with their arguments as the model wrote them."""
        return [ToolCall(s.name, "".join(a), s.id) for s, a in zip(self._started, self._arguments, strict=True)]

    @property
    def complete(self) -> bool:
        """True when every call read ended (its JSON object closed, and its tag or fence too)."""
        return self._ended == len(self._started) and self._state != "end"

    def feed(self, text: str) -> list[ReadEvent]:
        """Read more of the answer; the events it settles."""
        self._buf += text
        events: list[ReadEvent] = []
        while self._step(events):
            pass
        if self._state == "text":
            self._release(events)
        return events

    def close(self) -> list[ReadEvent]:
        """The answer is complete: what was held back and is not a call goes out as content."""
        events = self.feed("")
        rest = self._buf[self._held :]
        if self._state in ("start", "header") and not self._started:
            self._release(events)  # an answer that only began like a call: all of it is content
        elif self._state in ("between", "header", "list") and rest.strip():
            self._release(events)  # text after the calls that only began like another call
        self._held = self._pos = len(self._buf)
        return events

    # --- the states ------------------------------------------------------------------------------------------------

    def _release(self, events: list[ReadEvent]) -> None:
        if self._held < len(self._buf):
            events.append(Content(self._buf[self._held :]))
        self._held = self._pos = len(self._buf)

    def _fail(self) -> bool:
        # Not (or no longer) a call: the rest of the answer is content, from what was held back on.
        self._state = "text"
        return False

    def _open(self, at: int) -> bool:
        """At a possible call opening: take it, wait for more text, or give up on calls."""
        rest = self._buf[at:]
        if not rest:
            return False
        waiting = False
        for opener in _OPENERS:
            if self._started and opener == "[":
                continue  # a list is one run of calls; it does not follow other calls
            if rest.startswith(opener):
                if waiting:
                    return False  # a longer opening ("```json") may still come: wait before taking "```"
                if self._max_calls is not None and len(self._started) >= self._max_calls:
                    return self._fail()
                self._opener = opener
                self._in_list = opener == "["
                self._pos = at if opener == "{" else at + len(opener)
                self._state = "header"
                return True
            waiting = waiting or opener.startswith(rest)
        return False if waiting else self._fail()

    def _step(self, events: list[ReadEvent]) -> bool:
        """One move of the reader; False when it needs more text (or has given up on calls)."""
        buf = self._buf
        if self._state == "start" or self._state == "between":
            self._pos = _ws(buf, self._pos)  # skipped whitespace stays held (from _held on), never lost
            return self._open(self._pos)
        if self._state == "header":
            end, name = _header(buf, self._pos)
            if end == _NEED:
                return False if len(buf) - self._pos <= self._lookahead else self._fail()
            if end == _FAIL or name not in self._names:
                return self._fail()
            start = CallStart(len(self._started), f"call_{uuid.uuid4().hex[:24]}", name)
            self._started.append(start)
            self._arguments.append([])
            events.append(start)
            self._held = self._pos = end
            self._depth, self._in_string, self._escaped = 0, False, False
            self._state = "arguments"
            return True
        if self._state == "arguments":
            return self._scan_arguments(events)
        if self._state == "end":
            return self._end_call()
        if self._state == "list":
            return self._next_in_list()
        return False

    def _scan_arguments(self, events: list[ReadEvent]) -> bool:
        buf, j, closed = self._buf, self._pos, False
        while j < len(buf):
            c = buf[j]
            j += 1
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif c == "\\":
                    self._escaped = True
                elif c == '"':
                    self._in_string = False
            elif c == '"':
                self._in_string = True
            elif c in "{[":
                self._depth += 1
            elif c in "}]":
                self._depth -= 1
                if self._depth == 0:
                    closed = True
                    break
        if j > self._pos:
            fragment = buf[self._pos : j]
            self._arguments[-1].append(fragment)
            events.append(Arguments(len(self._started) - 1, fragment))
        self._held = self._pos = j
        if closed:
            self._state = "end"
        return closed

    def _end_call(self) -> bool:
        # The call object's own `}`, then its wrapper's closer (none for bare JSON and inside a list).
        i = _literal(self._buf, self._pos, "}")
        closer = "" if self._in_list else _CLOSERS[self._opener]
        if i >= 0 and closer:
            i = _literal(self._buf, i, closer)
        if i == _NEED:
            return False if len(self._buf) - self._pos <= self._lookahead else self._fail()
        if i == _FAIL:
            return self._fail()
        self._ended += 1
        self._held = self._pos = i
        self._state = "list" if self._in_list else "between"
        return True

    def _next_in_list(self) -> bool:
        i = self._pos = _ws(self._buf, self._pos)
        if i >= len(self._buf):
            return False  # wait for "," or "]"
        if self._buf[i] == "]":
            self._in_list = False
            self._held = self._pos = i + 1
            self._state = "between"
            return True
        if self._buf[i] == "," and (self._max_calls is None or len(self._started) < self._max_calls):
            self._pos = i + 1
            self._state = "header"
            return True
        return self._fail()


@dataclass(frozen=True, slots=True)
class ReadAnswer:
    """A complete answer read: its content (None when it is only calls) and its calls."""

    content: str | None
    calls: list[ToolCall]


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """The tools of one request and how a call is chosen."""

    tools: tuple[_Function, ...]
    choice: ToolChoice
    named: str | None = None
    parallel: bool = True  # several calls in one answer are read (`parallel_tool_calls`)

    def specs(self) -> list[dict[str, Any]]:
        """The tools as the contract's `tools` option takes them (OpenAI's shape, unset fields left out)."""
        out = []
        for t in self.tools:
            function: dict[str, Any] = {"name": t.name}
            if t.description is not None:
                function["description"] = t.description
            if t.parameters is not None:
                function["parameters"] = t.parameters
            out.append({"type": "function", "function": function})
        return out

    @property
    def reads_calls(self) -> bool:
        """False for `tool_choice: "none"`: the answer is content whatever it says."""
        return self.choice != "none"

    def schema(self) -> dict[str, Any] | None:
        """The JSON Schema a required call must match (None when the model may answer in prose)."""
        if self.choice in ("auto", "none"):
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

    def schema_params(self) -> dict[tuple[str, ...], str]:
        """Where each chosen tool's parameters sit in `schema()` (JSON pointer parts) -> the request's name for
        them, so a refusal inside the call schema names the tool the client sent (`tools[2].function.parameters`)."""
        if self.choice in ("auto", "none"):
            return {}
        chosen = [i for i, t in enumerate(self.tools) if self.choice == "required" or t.name == self.named]
        single = len(chosen) == 1
        return {
            (*(() if single else ("anyOf", str(k))), "properties", "arguments"): f"tools[{i}].function.parameters"
            for k, i in enumerate(chosen)
        }

    def reader(self) -> CallReader:
        """A reader for one answer to this request."""
        return CallReader(frozenset(t.name for t in self.tools), None if self.parallel else 1)

    def read(self, text: str) -> ReadAnswer:
        """A complete answer as content and calls. A call that did not end, or whose arguments are not a JSON
        object, makes the whole answer content: a client must not run a call it cannot parse."""
        reader = self.reader()
        events = reader.feed(text) + reader.close()
        calls = reader.calls
        if not calls or not reader.complete or not all(is_object(c.arguments) for c in calls):
            return ReadAnswer(text, [])
        content = "".join(e.text for e in events if isinstance(e, Content))
        return ReadAnswer(content if content.strip() else None, calls)


def is_object(text: str) -> bool:
    """True when `text` is JSON of an object (a call's arguments must be one)."""
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


Errors = Callable[[str, str], Exception]


def plan(
    tools: Sequence[Any] | None, tool_choice: Any, errors: Errors, parallel: bool | None = None
) -> ToolPlan | None:
    """The ToolPlan of a request's `tools`, `tool_choice` and `parallel_tool_calls`, or None when it has no tools
    (a "none" plan still carries them to the prompt). `errors(param, message)` builds the door's 400 (so this
    module spells no status codes)."""
    if not tools:
        if tool_choice not in (None, "none", "auto"):
            raise errors("tool_choice", "names a tool choice but the request has no tools")
        return None
    try:
        specs = tuple(msgspec.convert(t, _Tool, strict=True).function for t in tools)
    except msgspec.ValidationError as exc:
        raise errors("tools", f"invalid tools: {exc}") from None
    names = [t.name for t in specs]
    if not all(names):
        raise errors("tools", "every tool needs a non-empty function name")
    if len(set(names)) != len(names):
        raise errors("tools", "tool names must be unique")
    several = parallel is not False
    if tool_choice in (None, "auto"):
        return ToolPlan(specs, "auto", parallel=several)
    if tool_choice == "none":
        return ToolPlan(specs, "none", parallel=several)
    if tool_choice == "required":
        return ToolPlan(specs, "required", parallel=several)
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        name = (tool_choice.get("function") or {}).get("name")
        if name not in names:
            raise errors("tool_choice", f"names function {str(name)[:100]!r}, which is not in tools")
        return ToolPlan(specs, "named", name, parallel=several)
    raise errors("tool_choice", 'must be "none", "auto", "required" or {"type": "function", "function": {"name"}}')


def _arguments_text(value: Any, param: str, errors: Errors) -> str:
    """Arguments as JSON text of an object: OpenAI sends text, Ollama an object."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            raise errors(param, "must be JSON text of an object") from None
    else:
        parsed = value
    if not isinstance(parsed, dict):
        raise errors(param, "must be a JSON object")
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def message_calls(calls: Sequence[Any], param: str, errors: Errors) -> tuple[ToolCall, ...]:
    """An assistant turn's earlier `tool_calls` (OpenAI's `{"id", "type", "function": {"name", "arguments": text}}`
    or Ollama's `{"function": {"name", "arguments": {object}}}`) as the contract's calls."""
    out = []
    for j, call in enumerate(calls):
        where = f"{param}[{j}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or call.get("type", "function") != "function":
            raise errors(where, 'must be {"type": "function", "function": {"name", "arguments"}}')
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise errors(f"{where}.function.name", "must be a non-empty string")
        call_id = call.get("id", "")
        if not isinstance(call_id, str):
            raise errors(f"{where}.id", "must be a string")
        arguments = _arguments_text(function.get("arguments", {}), f"{where}.function.arguments", errors)
        out.append(ToolCall(name, arguments, call_id))
    return tuple(out)

"""The part of Go's text/template that Ollama's TEMPLATE instructions use, to render a created model's chats.

An Ollama Modelfile's TEMPLATE is Go template text over `.System`, `.Prompt`, `.Response` and `.Messages` (each with
`.Role` and `.Content`). This renders the constructs Ollama's own library templates are made of: `{{ .Field }}`,
`{{ $.Field }}`, `{{ if X }}`, `{{ else if X }}`, `{{ else }}`, `{{ range .Messages }}` (optionally `range $i, $m :=`),
`{{ end }}`, the functions `eq`, `ne`, `and`, `or`, `not` and `len`, string literals, `{{/* comments */}}` and the
`{{-`/`-}}` trim markers. Anything else is refused when the template is parsed (at create), naming what it met, so a
template is never half run. A template is bounded (MAX_DEPTH, MAX_NODES) and so is a run (MAX_STEPS_PER_ITEM,
MAX_RENDER_CHARS): a hostile template (ranges within ranges over the chat) is refused at the request it would render
rather than run for ever.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelhost.errors import InvalidInputError

#: A TEMPLATE is a few lines; a bound on its nesting keeps a hostile one from recursing the parser away.
MAX_DEPTH = 32
#: Nodes (text runs and actions) a TEMPLATE has at most, refused at create past it: Ollama's library templates, tools
#: and all, have a few hundred at most.
MAX_NODES = 1024
#: Nodes a render visits at most, per element of the lists it is given (the chat's messages) plus one: a template
#: visits each of its at most MAX_NODES nodes once per message, so a linear one always fits; ranges nested over the
#: messages (messages**depth passes) stop here instead of holding the thread that renders them.
MAX_STEPS_PER_ITEM = MAX_NODES
#: Characters a render writes at most: twice the HTTP door's largest body (32 MiB), since a template puts markup
#: around the chat's text rather than copies of it; a range that copies the system prompt per message stops here.
MAX_RENDER_CHARS = 64 * 1024 * 1024

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)
_RANGE = re.compile(r"^range\s+(?:(\$\w+)\s*,\s*(\$\w+)\s*:=\s*)?(.+)$", re.S)


@dataclass
class _Node:
    kind: str  # "text", "value", "if", "range"
    text: str = ""
    expr: list[str] = field(default_factory=list)
    body: list[_Node] = field(default_factory=list)
    orelse: list[_Node] = field(default_factory=list)
    names: tuple[str, str] | None = None  # range's $index, $element


@dataclass(frozen=True)
class Template:
    """A parsed TEMPLATE: `render(data)` runs it over `data` (the root, `.` and `$`)."""

    source: str
    nodes: list[_Node]

    @property
    def uses_messages(self) -> bool:
        """Whether the template walks `.Messages` itself (Ollama's newer templates); otherwise it renders one turn
        from `.System`, `.Prompt` and `.Response` (the older ones)."""
        return ".Messages" in self.source

    def render(self, data: Mapping[str, Any]) -> str:
        """The template run over `data`; InvalidInputError when the run goes past MAX_STEPS_PER_ITEM for each of
        `data`'s list elements (plus one) or writes more than MAX_RENDER_CHARS."""
        items = sum(len(v) for v in data.values() if isinstance(v, list | tuple))
        run = _Run(steps_left=MAX_STEPS_PER_ITEM * (items + 1))
        run.nodes(self.nodes, data, {"$": data})
        return "".join(run.out)


def parse(source: str) -> Template:
    """Parse an Ollama TEMPLATE; InvalidInputError naming the construct this subset does not run."""
    pieces: list[tuple[str, str]] = []  # ("text", s) or ("action", s)
    at = 0
    for match in _ACTION.finditer(source):
        text = source[at : match.start()]
        if match.group(1):
            text = text.rstrip()
        if pieces and pieces[-1][0] == "trim":
            pieces.pop()
            text = text.lstrip()
        pieces.append(("text", text))
        pieces.append(("action", match.group(2).strip()))
        if match.group(3):
            pieces.append(("trim", ""))
        at = match.end()
    tail = source[at:]
    if pieces and pieces[-1][0] == "trim":
        pieces.pop()
        tail = tail.lstrip()
    pieces.append(("text", tail))
    if "{{" in tail:
        raise InvalidInputError("template: a {{ is never closed by }}")
    nodes, stop, _ = _block(pieces, 0, 0)
    if stop is not None:
        raise InvalidInputError(f"template: {{{{ {stop} }}}} without the if or range it closes")
    if _count(nodes) > MAX_NODES:
        raise InvalidInputError(f"template: more than {MAX_NODES} text runs and actions")
    return Template(source, nodes)


def _count(nodes: list[_Node]) -> int:
    return sum(1 + _count(node.body) + _count(node.orelse) for node in nodes)


def _block(pieces: list[tuple[str, str]], i: int, depth: int) -> tuple[list[_Node], str | None, int]:
    """Nodes up to an `end` or `else` (returned as the stop, with the index after it) or the end of the text."""
    if depth > MAX_DEPTH:
        raise InvalidInputError(f"template: nested more than {MAX_DEPTH} deep")
    nodes: list[_Node] = []
    while i < len(pieces):
        kind, text = pieces[i]
        i += 1
        if kind == "text":
            if text:
                nodes.append(_Node("text", text=text))
            continue
        if text.startswith("/*") and text.endswith("*/"):
            continue
        if text == "end" or text == "else" or text.startswith("else if "):
            return nodes, text, i
        if text.startswith("if "):
            node, i = _if(pieces, i, _expr(text[3:]), depth)
            nodes.append(node)
        elif text.startswith("range "):
            found = _RANGE.match(text)
            assert found is not None  # "range " followed by anything matches
            body, stop, i = _block(pieces, i, depth + 1)
            if stop != "end":
                raise InvalidInputError("template: a range is never closed by {{ end }}")
            names = (found.group(1), found.group(2)) if found.group(1) else None
            nodes.append(_Node("range", expr=_expr(found.group(3)), body=body, names=names))
        else:
            nodes.append(_Node("value", expr=_expr(text)))
    return nodes, None, i


def _if(pieces: list[tuple[str, str]], i: int, expr: list[str], depth: int) -> tuple[_Node, int]:
    body, stop, i = _block(pieces, i, depth + 1)
    node = _Node("if", expr=expr, body=body)
    if stop is None:
        raise InvalidInputError("template: an if is never closed by {{ end }}")
    if stop.startswith("else if "):
        inner, i = _if(pieces, i, _expr(stop[8:]), depth + 1)
        node.orelse = [inner]
    elif stop == "else":
        node.orelse, stop, i = _block(pieces, i, depth + 1)
        if stop != "end":
            raise InvalidInputError("template: an else is never closed by {{ end }}")
    return node, i


#: Each function's arguments, at least and at most (Go's: eq compares its first with each other one).
_ARITY: dict[str, tuple[int, int]] = {"eq": (2, 1 << 30), "ne": (2, 2), "and": (1, 1 << 30), "or": (1, 1 << 30),
                                      "not": (1, 1), "len": (1, 1)}  # fmt: skip
_FUNCTIONS = frozenset(_ARITY)


def _expr(text: str) -> list[str]:
    """An action's words: a field (`.X`, `$.X`, `$v.X`, `.`), a string literal, or a function and its arguments
    (parenthesised sub-expressions are not in this subset)."""
    if "(" in text or "|" in text or ":=" in text:
        raise InvalidInputError(f"template: {{{{ {text} }}}} is beyond what modelhost runs (pipes, sub-expressions "
                                "and variables other than range's)")  # fmt: skip
    try:
        words = shlex.split(text, posix=False)
    except ValueError:
        raise InvalidInputError(f"template: cannot read {{{{ {text} }}}}") from None
    if not words:
        raise InvalidInputError("template: an empty {{ }}")
    if len(words) > 1 and words[0] not in _FUNCTIONS:
        raise InvalidInputError(f"template: {words[0]!r} is not a function modelhost runs ({', '.join(_FUNCTIONS)})")
    for word in words[1:] if len(words) > 1 else words:
        if not (word.startswith((".", "$")) or (word.startswith('"') and _literal(word) is not None)):
            raise InvalidInputError(f"template: cannot read {word!r} in {{{{ {text} }}}}")
    if len(words) > 1:
        least, most = _ARITY[words[0]]
        if not least <= len(words) - 1 <= most:
            raise InvalidInputError(f"template: {words[0]} takes {least}{'' if least == most else ' or more'} "
                                    f"arguments, not {len(words) - 1}, in {{{{ {text} }}}}")  # fmt: skip
    return words


def _literal(word: str) -> str | None:
    """A double-quoted string literal's value (Go's escapes are Python's for what templates use: \\n, \\t, \\",
    \\uXXXX); None when `word` is not one."""
    try:
        value = ast.literal_eval(word)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def _value(word: str, dot: Any, scope: Mapping[str, Any]) -> Any:
    if word.startswith('"'):
        return _literal(word)
    if word.startswith("$"):
        name, _, path = word.partition(".")
        base = scope.get(name)
        return _field(base, path) if path else base
    return dot if word == "." else _field(dot, word[1:])


def _field(base: Any, path: str) -> Any:
    for part in path.split("."):
        base = base.get(part) if isinstance(base, Mapping) else None
    return base


def _eval(words: list[str], dot: Any, scope: Mapping[str, Any]) -> Any:
    if len(words) == 1:
        return _value(words[0], dot, scope)
    args = [_value(w, dot, scope) for w in words[1:]]
    match words[0]:
        case "eq":
            return any(args[0] == other for other in args[1:])
        case "ne":
            return args[0] != args[1]
        case "and":
            return all(_truth(a) for a in args)
        case "or":
            return any(_truth(a) for a in args)
        case "not":
            return not _truth(args[0])
        case _:  # len
            if args[0] is not None and not isinstance(args[0], str | list | tuple | Mapping):
                raise InvalidInputError(f"template: len of {type(args[0]).__name__} in {{{{ {' '.join(words)} }}}}")
            return len(args[0]) if args[0] is not None else 0


def _truth(value: Any) -> bool:
    return bool(value)  # Go's: false, 0, "", nil and empty collections are false, as in Python


def too_long() -> InvalidInputError:
    """The refusal of a chat whose rendering passes MAX_RENDER_CHARS (one render's, or a chat's renders together)."""
    return InvalidInputError(f"template: renders more than {MAX_RENDER_CHARS} characters for this chat")


@dataclass
class _Run:
    """One render: what it has written and the steps it may still take (Template.render's bounds)."""

    steps_left: int
    out: list[str] = field(default_factory=list)
    chars: int = 0

    def write(self, text: str) -> None:
        self.chars += len(text)
        if self.chars > MAX_RENDER_CHARS:
            raise too_long()
        self.out.append(text)

    def nodes(self, nodes: list[_Node], dot: Any, scope: dict[str, Any]) -> None:
        for node in nodes:
            self.steps_left -= 1
            if self.steps_left < 0:
                raise InvalidInputError(f"template: runs more than {MAX_STEPS_PER_ITEM} steps per message of this "
                                        "chat (ranges within ranges over it?)")  # fmt: skip
            if node.kind == "text":
                self.write(node.text)
            elif node.kind == "value":
                value = _eval(node.expr, dot, scope)
                self.write("" if value is None else str(value))
            elif node.kind == "if":
                self.nodes(node.body if _truth(_eval(node.expr, dot, scope)) else node.orelse, dot, scope)
            else:
                items = _eval(node.expr, dot, scope) or []
                if not isinstance(items, list | tuple):  # Go ranges over lists (and maps, which a chat has none of)
                    raise InvalidInputError(f"template: cannot range over {' '.join(node.expr)}, a "
                                            f"{type(items).__name__}")  # fmt: skip
                for index, item in enumerate(items):
                    inner = dict(scope)
                    if node.names is not None:
                        inner[node.names[0]], inner[node.names[1]] = index, item
                    self.nodes(node.body, item, inner)

"""The part of Go's text/template that Ollama's TEMPLATE instructions use, to render a created model's chats.

An Ollama Modelfile's TEMPLATE is Go template text over `.System`, `.Prompt`, `.Response` and `.Messages` (each with
`.Role` and `.Content`). This renders the constructs Ollama's own library templates are made of: `{{ .Field }}`,
`{{ $.Field }}`, `{{ if X }}`, `{{ else if X }}`, `{{ else }}`, `{{ range .Messages }}` (optionally `range $i, $m :=`),
`{{ end }}`, the functions `eq`, `ne`, `and`, `or`, `not` and `len`, string literals, `{{/* comments */}}` and the
`{{-`/`-}}` trim markers. Anything else is refused when the template is parsed (at create), naming what it met, so a
template is never half run.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelhost.errors import InvalidInputError

#: A TEMPLATE is a few lines; a bound on its nesting keeps a hostile one from recursing the parser away.
MAX_DEPTH = 32

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
        out: list[str] = []
        _run(self.nodes, data, {"$": data}, out)
        return "".join(out)


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
    return Template(source, nodes)


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


_FUNCTIONS = frozenset({"eq", "ne", "and", "or", "not", "len"})


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
        if not (word.startswith((".", "$")) or word.startswith('"')):
            raise InvalidInputError(f"template: cannot read {word!r} in {{{{ {text} }}}}")
    return words


def _value(word: str, dot: Any, scope: Mapping[str, Any]) -> Any:
    if word.startswith('"'):
        return word[1:-1].encode().decode("unicode_escape")
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
            return len(args[0]) if args[0] is not None else 0


def _truth(value: Any) -> bool:
    return bool(value)  # Go's: false, 0, "", nil and empty collections are false, as in Python


def _run(nodes: list[_Node], dot: Any, scope: dict[str, Any], out: list[str]) -> None:
    for node in nodes:
        if node.kind == "text":
            out.append(node.text)
        elif node.kind == "value":
            value = _eval(node.expr, dot, scope)
            out.append("" if value is None else str(value))
        elif node.kind == "if":
            _run(node.body if _truth(_eval(node.expr, dot, scope)) else node.orelse, dot, scope, out)
        else:
            items = _eval(node.expr, dot, scope) or []
            for index, item in enumerate(items):
                inner = dict(scope)
                if node.names is not None:
                    inner[node.names[0]], inner[node.names[1]] = index, item
                _run(node.body, item, inner, out)

"""Bounds on a JSON Schema, checked before any grammar engine sees it: one schema must not kill or wedge the host.

Each grammar engine turns a schema into something whose size and per-token cost follow the schema's numbers, not
its length in bytes, and each fails badly past some size (measured, issue 25, on SmolLM2's 49k vocabulary):

- llama.cpp's converter writes a `maxLength`/`maxItems`/pattern `{m,n}` of N as N nested optional groups, and
  llama.cpp's recursive grammar parser overflows the C stack (SIGSEGV, the whole process) at ~20,000; a
  `minLength` of N is N copies of the character rule (10**9: a multi-GB string, OOM-killed).
- A repeated group that can match nothing (`^(x?){N}$`, `^(a?b?){N}$`) leaves llama.cpp one grammar stack per way
  to skip ahead, and one masked step walks the vocabulary through every stack: 13 ms at 20 skippable items,
  30 ms at 40, 163 ms at 80, 14 s for `(a?b?){50}` (100 items), and minutes at 1,000 (the model thread held,
  SIGTERM ignored). A normal masked step is 10-30 ms. The run is a proxy: what costs is the number of ways the
  grammar can match one token's characters (`(.?){24}`, 24 items, took 32 s a step), which `pattern_paths.py`
  counts, with its own work bounded, for an engine whose limits ask (`max_paths`: llama.cpp's, issue 35).
- A pattern no string can match (`^[b-a]$`, `^\\x00$`: strings exclude control characters, `[^\\x00-\\U0010FFFF]`)
  leaves the grammar nothing to allow, and llama.cpp aborts the process (GGML_ABORT) when the sampler then
  accepts a token it refused.
- A 400-digit `maximum` overflows a float in the bounds code (a 500).

So every door's schema is walked once here (`GenerateOptions.parse` calls `check_schema` with DEFAULT_LIMITS)
and refused with a SchemaError naming the keyword and where it is; an engine with lower limits checks again
with its own SchemaLimits (llama.cpp's, through the OptionChecker capability). This catches what is cheap to see
in the schema; what is not (an unsatisfiable combination of keywords) the sampler still ends cleanly: an empty
mask is an error, never a token the grammar refused (backends' grammar.py).

Patterns are parsed with the standard library's own regular-expression parser (`re._parser`, the one `re.compile`
uses: private, but part of CPython since 3.0 and stable in shape), not a hand-written one; JSON Schema's ECMA-262
dialect is close enough to Python's for counting repetitions and character sets.
"""

from __future__ import annotations

import math
import re._constants as _sre  # Python 3.11+ names them so (the old sre_parse aliases are deprecated)
import re._parser as _sre_parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from modelhost.errors import SchemaError
from modelhost.inference.pattern_paths import TooCostly, class_ranges, pattern_paths


@dataclass(frozen=True, slots=True)
class SchemaLimits:
    """What one schema may ask of a grammar engine. DEFAULT_LIMITS holds for every engine; an engine that fails
    earlier (llama.cpp) checks again with lower values of its own."""

    #: Nesting of objects and lists in the schema itself. Real schemas nest under 20; each level adds a few groups
    #: to a recursive grammar parser's stack.
    max_depth: int = 64
    #: Largest count one keyword may ask for: minLength, maxLength, minItems, maxItems, a pattern's {m,n}.
    max_count: int = 10_000
    #: Sum of every count in the schema and of every pattern's expanded size: what the grammar grows with when
    #: each keyword stays under max_count (2,000 properties of minLength 10,000 would be a 100 MB grammar).
    max_total: int = 100_000
    #: Longest run of pattern items that can each match nothing, after expanding repetitions (`(x?){N}` is N):
    #: each is one more grammar stack for every masked step to walk (the module docstring has the measurements).
    max_skippable: int = 32
    #: Nesting of groups inside one pattern.
    max_pattern_depth: int = 32
    #: Most ways one pattern may match one token's characters (pattern_paths.py: what a grammar that follows every
    #: way at once walks per refused token), and the most for all of a schema's patterns together (alternatives
    #: of an anyOf are walked side by side). None: not counted, for an engine whose matcher bounds its own work
    #: (llguidance's fuel); llama.cpp's grammar does not, so its limits set them.
    max_paths: int | None = None
    max_paths_total: int | None = None
    #: Whether a pattern may name a character a JSON string holds only escaped (a control character, a surrogate):
    #: an engine that writes the pattern's characters raw into the string (llama.cpp's converter) says False, since
    #: a raw control character is not JSON (the answer would not parse).
    escaped_characters: bool = True


DEFAULT_LIMITS = SchemaLimits()

#: Keywords whose value maps names to schemas, and keywords whose value is data, not a schema.
_NAMED = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_DATA = frozenset({"enum", "const", "default", "examples", "required", "dependentRequired"})
#: Count keywords: non-negative integers, at most max_count, each min not above its max.
_COUNTS = (("minLength", "maxLength"), ("minItems", "maxItems"), ("minProperties", "maxProperties"))
#: Numeric keywords a bound is computed from: each must be a number a double can hold.
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")

#: What a JSON string may hold under the grammars' string rule (llama.cpp's grammar.py says why): no control
#: characters (U+0000-U+001F, U+007F), no surrogates, nothing past U+10FFFF. Inclusive ranges.
_ALLOWED = ((0x20, 0x7E), (0x80, 0xD7FF), (0xE000, 0x10FFFF))

#: The parser's repetition operators: greedy, lazy and possessive (`x{2,5}`, `x{2,5}?`, `x{2,5}+`).
_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT)


def check_schema(schema: Any, limits: SchemaLimits = DEFAULT_LIMITS) -> None:
    """Raise SchemaError (an InvalidOptionError naming `json_schema`) when `schema` exceeds `limits` or asks for
    what no value can satisfy; the error says which keyword, where (a JSON pointer) and why."""
    total = paths = 0
    for at, node in _nodes(schema, (), limits):
        total += _check_counts(node, at, limits)
        _check_numbers(node, at)
        pattern = node.get("pattern")
        if pattern is not None:
            size, ways = _check_pattern(pattern, (*at, "pattern"), limits)
            total += size
            paths += ways
            if limits.max_paths_total is not None and paths > limits.max_paths_total:
                raise SchemaError(
                    at, f"the schema's patterns can be matched {paths} ways along one token's characters together "
                    f"(the bound is {limits.max_paths_total}): each is walked for every token a masked step refuses",
                )  # fmt: skip
        if total > limits.max_total:
            raise SchemaError(
                at, f"the schema's counts and patterns add up to more than {limits.max_total} (the grammar would "
                "grow with them)",
            )  # fmt: skip


def _nodes(node: Any, at: tuple[str, ...], limits: SchemaLimits) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every subschema of `node` with its JSON pointer, refusing nesting past max_depth (counted through data too:
    a deep `const` is as deep for a recursive parser). A map of names to schemas (`properties`) is not a schema
    itself, and data (`enum`, `const`, `default`) holds none, so their keys are never read as keywords."""
    stack: list[tuple[Any, tuple[str, ...], str]] = [(node, at, "schema")]
    while stack:
        item, where, kind = stack.pop()
        if len(where) > limits.max_depth:
            raise SchemaError(where, f"the schema nests deeper than {limits.max_depth} levels")
        if isinstance(item, dict):
            if kind == "schema":
                yield where, item
            for key, value in item.items():
                if isinstance(value, dict | list):
                    inner = "data" if kind == "data" or key in _DATA else "names" if key in _NAMED else "schema"
                    stack.append((value, (*where, str(key)), "schema" if kind == "names" else inner))
        elif isinstance(item, list):
            stack.extend((v, (*where, str(i)), kind) for i, v in enumerate(item) if isinstance(v, dict | list))


def _count(node: dict[str, Any], key: str, at: tuple[str, ...], limits: SchemaLimits) -> int | None:
    if key not in node:
        return None
    value = node[key]
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON Schema counts 5.0 as the integer 5
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SchemaError((*at, key), f"'{key}' must be a non-negative integer, got {_shown(value)}")
    if value > limits.max_count:
        raise SchemaError((*at, key), f"'{key}' is {_shown(value)}; the limit is {limits.max_count}")
    return value


def _check_counts(node: dict[str, Any], at: tuple[str, ...], limits: SchemaLimits) -> int:
    """Check the count keywords of one node; the sum of what they ask for (its share of max_total)."""
    total = 0
    for low_key, high_key in _COUNTS:
        low, high = _count(node, low_key, at, limits), _count(node, high_key, at, limits)
        if low is not None and high is not None and low > high:
            raise SchemaError(
                (*at, low_key), f"'{low_key}' ({low}) is greater than '{high_key}' ({high}): no value can satisfy both"
            )
        total += max(low or 0, high or 0)
    return total


def _check_numbers(node: dict[str, Any], at: tuple[str, ...]) -> None:
    for key in _NUMBERS:
        value = node.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue  # not a number: the engine's own compiler names it (a bound of "abc" is its error to word)
        try:
            finite = math.isfinite(float(value))
        except OverflowError:  # an integer literal past a double's range (a 400-digit maximum)
            finite = False
        if not finite:
            raise SchemaError((*at, key), f"'{key}' must be a number a double can hold, got {_shown(value)}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


# -- patterns --------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Shape:
    """What the checks need to know of a (sub)pattern."""

    satisfiable: bool  # some string of allowed characters matches it
    nullable: bool  # it can match the empty string
    size: int  # items once every repetition is written out (what a converter writes)
    skippable: int  # items in a row that can each match nothing, as a whole (0 when not nullable)
    longest_skip: int  # the longest such run anywhere inside it


def check_pattern(pattern: Any, at: tuple[str, ...], limits: SchemaLimits = DEFAULT_LIMITS) -> int:
    """Refuse a `pattern` that is not a regular expression, that no allowed string matches, or whose expansion
    (or, when `limits` count them, its ways to match) exceeds `limits`; return its expanded size (its share of
    max_total)."""
    return _check_pattern(pattern, at, limits)[0]


def _check_pattern(pattern: Any, at: tuple[str, ...], limits: SchemaLimits) -> tuple[int, int]:
    """check_pattern's checks; its expanded size and its ways to match one token (0 when not counted)."""
    if not isinstance(pattern, str):
        raise SchemaError(at, f"'pattern' must be a string, got {type(pattern).__name__}")
    try:
        parsed = _sre_parse.parse(pattern)
    except RecursionError:
        raise SchemaError(at, f"the pattern nests groups deeper than {limits.max_pattern_depth}") from None
    except Exception as exc:  # re.error, OverflowError on a count past the parser's own bound
        raise SchemaError(at, f"the pattern is not a regular expression we can check: {exc}") from None
    shape = _Walker(at, limits).sequence(list(parsed), 0)
    if not shape.satisfiable:
        raise SchemaError(
            at, "no string matches this pattern (JSON strings here exclude control characters, surrogates and "
            "code points past U+10FFFF)",
        )  # fmt: skip
    if limits.max_paths is None:
        return shape.size, 0
    try:  # after the walker: the expansion it bounded is what the count builds
        ways = pattern_paths(list(parsed), limits.max_paths)
    except TooCostly as exc:
        raise SchemaError(
            at, f"{exc}; write x{{0,N}} rather than (x?){{N}}, and avoid alternatives that overlap"
        ) from None
    return shape.size, ways


class _Walker:
    def __init__(self, at: tuple[str, ...], limits: SchemaLimits) -> None:
        self.at = at
        self.limits = limits

    def refuse(self, why: str) -> SchemaError:
        return SchemaError(self.at, why)

    def sequence(self, items: list[Any], depth: int) -> _Shape:
        if depth > self.limits.max_pattern_depth:
            raise self.refuse(f"the pattern nests groups deeper than {self.limits.max_pattern_depth}")
        satisfiable, nullable, size, run, longest = True, True, 0, 0, 0
        for op, arg in items:
            shape = self.item(op, arg, depth)
            satisfiable &= shape.satisfiable
            nullable &= shape.nullable
            size += shape.size
            run = run + shape.skippable if shape.nullable else 0
            longest = max(longest, run, shape.longest_skip)
            self._bound(size, longest)
        return _Shape(satisfiable, nullable, size, run if nullable else 0, longest)

    def _bound(self, size: int, longest: int) -> None:
        if size > self.limits.max_total:
            raise self.refuse(f"the pattern expands to more than {self.limits.max_total} items")
        if longest > self.limits.max_skippable:
            raise self.refuse(
                f"the pattern has more than {self.limits.max_skippable} optional items in a row once repetitions are "
                "written out (such as (x?){N}); each costs every constrained step a walk of the vocabulary: write "
                "x{0,N} instead",
            )  # fmt: skip

    def item(self, op: Any, arg: Any, depth: int) -> _Shape:
        if op is _sre.LITERAL:
            self._raw((arg, arg))
            return _Shape(_allowed(arg, arg), False, 1, 0, 0)
        if op in (_sre.NOT_LITERAL, _sre.ANY, _sre.CATEGORY):
            return _Shape(True, False, 1, 0, 0)
        if op is _sre.IN:
            if not (arg and arg[0][0] is _sre.NEGATE):
                self._raw(*(v if o is _sre.RANGE else (v, v) for o, v in arg if o in (_sre.LITERAL, _sre.RANGE)))
            return _Shape(_set_satisfiable(arg), False, 1, 0, 0)
        if op is _sre.AT:
            return _Shape(True, True, 0, 0, 0)
        if op is _sre.SUBPATTERN:
            return self.sequence(list(arg[-1]), depth + 1)
        if op is _sre.BRANCH:
            shapes = [self.sequence(list(branch), depth + 1) for branch in arg[1]]
            return _Shape(
                any(s.satisfiable for s in shapes),
                any(s.nullable for s in shapes),
                sum(s.size for s in shapes),
                sum(s.skippable for s in shapes),  # each skippable branch is its own way ahead: they add up
                max(s.longest_skip for s in shapes),
            )
        if op in _REPEATS:
            low, high, body = arg
            return self.repeat(low, high, body, depth)
        if op is _sre.ATOMIC_GROUP:
            return self.sequence(list(arg), depth + 1)
        # Back-references and look-around: neither engine can write them as a grammar.
        raise self.refuse(f"the pattern uses {str(op).lower()}, which no grammar engine here can enforce")

    def _raw(self, *ranges: tuple[int, int]) -> None:
        """Refuse a character the engine would write raw although JSON holds it only escaped (escaped_characters)."""
        if self.limits.escaped_characters:
            return
        for low, high in ranges:
            if not any(a <= low and high <= b for a, b in _ALLOWED):
                named = f"U+{low:04X}" if low == high else f"U+{low:04X}-U+{high:04X}"
                raise self.refuse(
                    f"the pattern names {named}: a JSON string carries control characters and surrogates only "
                    "escaped, and this engine writes the pattern's characters raw (the answer would not parse)"
                )

    def repeat(self, low: int, high: Any, body: Any, depth: int) -> _Shape:
        bounded = high is not _sre.MAXREPEAT
        for count in (low, high) if bounded else (low,):
            if count > self.limits.max_count:
                raise self.refuse(f"a repetition count in the pattern is {count}; the limit is {self.limits.max_count}")
        inner = self.sequence(list(body), depth + 1)
        copies = high if bounded else low + 1  # a converter writes `low` copies, then the rest (or a star)
        # x{0,N} of a body that is never empty nests: one way to stop at each point, whatever N.
        skippable = copies * max(inner.skippable, 1) if inner.nullable else int(low == 0)
        shape = _Shape(
            inner.satisfiable or low == 0,
            inner.nullable or low == 0,
            copies * max(inner.size, 1),
            skippable,
            max(inner.longest_skip, skippable if inner.nullable else 0),
        )
        self._bound(shape.size, shape.longest_skip)
        return shape


def _allowed(low: int, high: int) -> bool:
    """Some code point in [low, high] is allowed in a JSON string."""
    return any(low <= b and a <= high for a, b in _ALLOWED)


def _set_satisfiable(items: list[Any]) -> bool:
    """A character class `[...]` holds some allowed character."""
    return any(_allowed(a, b) for a, b in class_ranges(items))

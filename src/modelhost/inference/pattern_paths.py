"""How much work a pattern makes for a grammar engine that follows every way of matching at once: counted from the
pattern alone, with the counting itself bounded, before any engine is given it.

Why: llama.cpp's grammar masks a step by walking each vocabulary token's characters through the grammar's stacks,
and a token that no stack accepts is walked along *every* way the pattern could have matched its characters
(llama-grammar.cpp's `reject_candidates` passes a candidate on to the next stack only once the one before refused
it). A repetition of something that may match nothing multiplies those ways: `^(.?){N}$` matches d characters in
C(N, d) ways. Measured on SmolLM2's 49k vocabulary, one masked step right after the opening quote (one thread of
CPU; a normal step 6-30 ms; `.{0,32}` 23 ms, `.*` 29 ms):

| pattern | `(.?){2}` | `(.?){4}` | `(.?){6}` | `(.?){8}` | `(.?){12}` | `(.?){16}` | `(.?){20}` | `(.?){24}` |
|---|---|---|---|---|---|---|---|---|
| ms a step | 14 | 49 | 144 | 379 | 979 | 1,495 | 3,610 | 32,465 |

while `(x?){32}` costs 17 ms there (few tokens spell many x's). The bound after a step (`STEP_SECONDS` in the
backends) cannot stop a step that is already running in C, so a `{24}` request held the model thread for 18 s
before it was refused, and every other request waited.

What is counted: the grammar is modelled as the pattern's position automaton, written as llama.cpp's converter
writes repetitions (`x{m,n}`: m copies, then n-m nested optionals; `x*` a loop), and `paths` is an upper bound on
the stacks one masked step can walk: for each set of positions a prefix can leave the grammar in, the ways a
token of up to DEPTH characters continues from them, the characters chosen adversarially (at each character the
most ways any one character class allows). That is what the vocabulary could make the engine do, so it does not
depend on which tokens exist: `(x?){N}` counts as `(.?){N}` does.

The count stops as soon as it passes the caller's cap, and gives up (refusing) past WORK units of its own work,
so counting a hostile pattern is itself bounded.
"""

from __future__ import annotations

import re._constants as _sre  # the same parser schema_limits reads patterns with
from collections.abc import Iterable, Sequence
from typing import Any

#: The most characters of one token the count follows. A masked step walks a token no deeper than its characters:
#: SmolLM2's longest token is 32 characters (99.9% are 16 or fewer); a longer token of a larger vocabulary is a
#: run of one character (spaces, dashes), which most patterns refuse early.
DEPTH = 32
#: The most units of work (automaton nodes built, closure entries, per-position updates) the count may do before
#: it refuses the pattern as too costly to check: up to ~0.4 s of Python on the shared 2-core machine, spent once per
#: distinct schema on a worker thread, never on the model thread.
WORK = 1_000_000
#: The most distinct strings' worth of ways the count follows at once; past it they are merged into their
#: elementwise maximum (still an upper bound, looser): the count's work stays bounded whatever the pattern.
FRONTIER = 32
#: The code points a character class is split over (JSON strings hold no more).
_MAX_CHAR = 0x10FFFF
#: `.` as llama.cpp's converter writes it (`[^\x0A\x0D]`: no DOTALL).
_DOT = ((0x0A, 0x0A), (0x0D, 0x0D))
#: The classes `\d`, `\s`, `\w` stand for (ASCII, as the converter writes them), and their opposites.
_CATEGORIES: dict[Any, tuple[bool, tuple[tuple[int, int], ...]]] = {
    _sre.CATEGORY_DIGIT: (False, ((0x30, 0x39),)),
    _sre.CATEGORY_NOT_DIGIT: (True, ((0x30, 0x39),)),
    _sre.CATEGORY_SPACE: (False, ((0x09, 0x0D), (0x20, 0x20))),
    _sre.CATEGORY_NOT_SPACE: (True, ((0x09, 0x0D), (0x20, 0x20))),
    _sre.CATEGORY_WORD: (False, ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))),
    _sre.CATEGORY_NOT_WORD: (True, ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))),
}
_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT)
_END = -1  # the node after the pattern (the string's closing quote)


class TooCostly(Exception):
    """The pattern's ways pass the cap, or counting them passed WORK; `str()` says which, in words for a 400."""


class _Automaton:
    """The pattern's positions (character nodes) and the splits between them, built right to left."""

    def __init__(self) -> None:
        self.ranges: list[tuple[tuple[int, int], ...] | None] = []  # a character node's allowed code points
        self.next: list[list[int]] = []  # a character node's one successor, or a split's successors
        self.work = 0

    def spend(self, units: int) -> None:
        self.work += units
        if self.work > WORK:
            raise TooCostly(f"the pattern is too costly to check (more than {WORK} steps of counting)")

    def node(self, ranges: tuple[tuple[int, int], ...] | None, successors: list[int]) -> int:
        self.spend(1)
        self.ranges.append(ranges)
        self.next.append(successors)
        return len(self.ranges) - 1

    def sequence(self, items: Iterable[tuple[Any, Any]], follow: int) -> int:
        for op, arg in reversed(list(items)):
            follow = self.item(op, arg, follow)
        return follow

    def item(self, op: Any, arg: Any, follow: int) -> int:
        if op is _sre.LITERAL:
            return self.node(((arg, arg),), [follow])
        if op is _sre.NOT_LITERAL:
            return self.node(_complement(((arg, arg),)), [follow])
        if op is _sre.ANY:
            return self.node(_complement(_DOT), [follow])
        if op is _sre.IN:
            return self.node(class_ranges(arg), [follow])
        if op is _sre.CATEGORY:
            negated, ranges = _CATEGORIES.get(arg, (True, ()))
            return self.node(_complement(ranges) if negated else ranges, [follow])
        if op is _sre.SUBPATTERN:
            return self.sequence(arg[-1], follow)
        if op is _sre.ATOMIC_GROUP:
            return self.sequence(arg, follow)
        if op is _sre.BRANCH:
            return self.node(None, [self.sequence(branch, follow) for branch in arg[1]])
        if op in _REPEATS:
            low, high, body = arg
            if high is _sre.MAXREPEAT:  # a loop: the body again, or on
                loop = self.node(None, [])
                self.next[loop] = [self.sequence(body, loop), follow]
                tail = loop
            else:  # the converter's nested optionals: (x (x (x)?)?)?, each a way to stop
                tail = follow
                for _ in range(high - low):
                    tail = self.node(None, [self.sequence(body, tail), follow])
            for _ in range(low):
                tail = self.sequence(body, tail)
            return tail
        return follow  # anchors (^, $, \b): they match no character


def class_ranges(items: Sequence[tuple[Any, Any]]) -> tuple[tuple[int, int], ...]:
    """The code points a parsed character class (`[...]`, the parser's IN items) holds, as merged ranges."""
    negated = bool(items) and items[0][0] is _sre.NEGATE
    ranges: list[tuple[int, int]] = []
    for op, arg in items[1:] if negated else items:
        if op is _sre.LITERAL:
            ranges.append((arg, arg))
        elif op is _sre.RANGE:
            ranges.append(arg)
        elif op is _sre.CATEGORY:
            inner_negated, inner = _CATEGORIES.get(arg, (True, ()))
            ranges.extend(_complement(inner) if inner_negated else inner)
    merged = _merge(ranges)
    return _complement(merged) if negated else merged


def _merge(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return tuple(out)


def _complement(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out, point = [], 0
    for low, high in _merge(ranges):
        if low > point:
            out.append((point, low - 1))
        point = max(point, high + 1)
    if point <= _MAX_CHAR:
        out.append((point, _MAX_CHAR))
    return tuple(out)


def pattern_paths(parsed: Sequence[tuple[Any, Any]], cap: int) -> int:
    """The most grammar stacks one masked step can walk for the parsed pattern `parsed` (see the module doc), as
    long as it is at most `cap`; raises TooCostly, saying why in words, when it passes `cap` or the counting
    passes WORK, or when the pattern repeats something that may match nothing without bound (endless ways)."""
    machine = _Automaton()
    start = machine.sequence(parsed, _END)
    closures: dict[int, dict[int, int]] = {}

    def closure(node: int) -> dict[int, int]:
        """The character nodes reachable from `node` without consuming, each with its number of ways."""
        if node in closures:
            return closures[node]
        order, stack, seen = [], [node], {node}
        while stack:  # iterative post-order: nested optionals nest thousands deep
            current = stack[-1]
            pending = [n for n in machine.next[current] if n != _END and n not in closures and n not in seen]
            if machine.ranges[current] is None and pending:
                seen.update(pending)
                stack.extend(pending)
                continue
            stack.pop()
            order.append(current)
            if machine.ranges[current] is not None:
                closures[current] = {current: 1}
                continue
            merged: dict[int, int] = {}
            for successor in machine.next[current]:
                if successor == _END:
                    continue
                if successor not in closures:  # on the stack still: an empty way back to itself
                    raise TooCostly("the pattern repeats something that may match nothing without bound (endless "
                                    "ways to match one string)")  # fmt: skip
                for target, ways in closures[successor].items():
                    merged[target] = merged.get(target, 0) + ways
            machine.spend(len(merged) + 1)
            closures[current] = merged
        return closures[node]

    def advance(ways: dict[int, int], group: frozenset[int]) -> dict[int, int]:
        """The ways on from `ways` after one character that the positions in `group` (and no others) accept."""
        step: dict[int, int] = {}
        for node in group:
            for successor in machine.next[node]:
                if successor == _END:
                    continue
                for target, count in closure(successor).items():
                    step[target] = step.get(target, 0) + ways[node] * count
            machine.spend(len(step) + 1)
        return step

    most = 0
    positions = frozenset(closure(start)) if start != _END else frozenset()
    visited: set[frozenset[int]] = set()
    while positions and positions not in visited:
        visited.add(positions)
        # The engine keeps each distinct stack once between tokens; then each kind of character (a group of the
        # positions it advances) gives the token's walk its own ways.
        frontier = [dict.fromkeys(positions, 1)]
        reached: set[int] = set()
        for depth in range(DEPTH):
            following: dict[tuple[tuple[int, int], ...], dict[int, int]] = {}
            for ways in frontier:
                for group in _groups(machine, ways):
                    step = advance(ways, group)
                    if step:
                        following[tuple(sorted(step.items()))] = step
            frontier = _undominated(list(following.values()), machine)
            if depth == 0:
                reached = {p for ways in frontier for p in ways} | {p for s in following.values() for p in s}
            if not frontier:
                break
            most = max(most, max(sum(ways.values()) for ways in frontier))
            if most > cap:
                raise TooCostly(f"the pattern can be matched {most} ways along one token's characters (the bound is "
                                f"{cap}): each is walked for every token a masked step refuses")  # fmt: skip
        positions = frozenset(reached)
    return most


def _undominated(vectors: list[dict[int, int]], machine: _Automaton) -> list[dict[int, int]]:
    """The vectors of ways no other one covers (a covered one can only lead to fewer ways); past FRONTIER of them,
    their elementwise maximum alone, which covers them all: a looser bound, but bounded work."""
    if len(vectors) <= 1:
        return vectors
    machine.spend(len(vectors) ** 2)
    kept = [v for v in vectors if not any(o is not v and _covers(o, v) for o in vectors)]
    if len(kept) <= FRONTIER:
        return kept
    merged: dict[int, int] = {}
    for ways in kept:
        for node, count in ways.items():
            merged[node] = max(merged.get(node, 0), count)
    return [merged]


def _covers(big: dict[int, int], small: dict[int, int]) -> bool:
    return big != small and all(big.get(node, 0) >= count for node, count in small.items())


def _groups(machine: _Automaton, ways: dict[int, int]) -> list[frozenset[int]]:
    """The positions of `ways` that one character can advance together, for each kind of character: the most
    inclusive groups only (a group inside another advances fewer ways)."""
    nodes = list(ways)
    if len(nodes) == 1:  # the common case, a pattern that is not ambiguous here
        return [frozenset(nodes)] if machine.ranges[nodes[0]] else []
    edges = sorted({p for n in nodes for low, high in machine.ranges[n] or () for p in (low, high + 1)})
    groups: set[frozenset[int]] = set()
    for low in edges:
        group = frozenset(n for n in nodes if any(a <= low <= b for a, b in machine.ranges[n] or ()))
        if group:
            groups.add(group)
    machine.spend(len(edges) * max(1, len(nodes)))
    return [g for g in groups if not any(g < other for other in groups)]

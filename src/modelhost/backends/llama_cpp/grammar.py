"""Constrained decoding for llama.cpp: a JSON Schema becomes a GBNF grammar, and the grammar a sampler step.

llama-cpp-python ships llama.cpp's own JSON-Schema-to-GBNF converter (`llama_grammar.json_schema_to_gbnf`); the
grammar sampler (`llama_sampler_init_grammar`) then masks, at every step, each token that would leave the grammar,
so the output is valid JSON of the schema by construction, even from a random model, as long as it is not cut
short (`max_tokens`, a stop string, the context's end).

What we add to the converter's output, each for a failure seen or read in llama.cpp:

- Strings exclude control characters. The converter's `char` rule is `[^"\\\\]`, which lets a raw newline or tab
  into a JSON string; Python's `json.loads` (and JSON itself) refuses those, so a small model's stray newline made
  the whole answer unparseable. Upstream llama.cpp later tightened its own rule the same way. Surrogates go too,
  and so does every "code point" past U+10FFFF: llama.cpp decodes a token's bytes leniently, so a byte no UTF-8
  character starts with (0xF5-0xFF, a lone byte token of a byte-level vocabulary) followed by continuation bytes
  reads as a value up to 0x3FFFFF, which Python shows as U+FFFD replacement characters (seen on the tiny model:
  FE A6 90 B0 inside a string broke its `maxLength`).

  What stays open: an *overlong* UTF-8 sequence (C1 81 for "A", E0 8C B5 for U+0335) still passes the grammar as
  the character it spells, and Python decodes it as U+FFFD replacement characters; only a byte-level check of each
  token against the pending bytes could refuse it. The JSON still parses, but a string can then fail
  `maxLength`/`pattern` when validated. Real tokenizers do not make such sequences; a random model over byte
  tokens can (seen on the tiny test model).
- Integer bounds (`minimum`, `maximum` and their exclusive forms), which the converter drops (a TODO in its
  source) and llama.cpp's C++ converter enforces: common tool parameters (`{"type": "integer", "minimum": 1}`)
  need them. Our converter subclass writes a digit-range rule: the set of integers in a range is a finite union of
  digit-class sequences per length, so the rule is exact, with no leading zero and no -0. An open side ends at 16
  digits, as an unbounded integer does. Bounds on a `number` stay refused: its range holds endless decimals, so a
  grammar must cap them and then refuses valid values; an integer or an enum says the same thing exactly.
- The grammar checks the drawn token first, and masks the whole vocabulary only when that token is refused (what
  llama.cpp's own `common_sampler` does). Masking costs a walk of every token's text through the grammar's stacks
  (measured on SmolLM2's 49k vocabulary, 2 shared cores: 5-15 ms a step, about one decode step, so the grammar
  alone would halve the speed); a check of one token costs microseconds, and a capable model's drawn token is
  allowed nearly every time. Greedy output is the same either way (the argmax, if allowed, is the masked
  argmax), and a sampled token is drawn from the same masked distribution: p(t) + P(refused) * p(t) / Z = p(t) / Z.
- A grammar is checked once, when the request is admitted: a schema the converter cannot handle (an unknown type,
  a remote `$ref`) or a grammar llama.cpp cannot parse is a 400 naming `json_schema`, before any compute. Before
  the converter sees a schema it is checked against LIMITS (the contract's schema_limits, with llama.cpp's lower
  counts and its bound on a pattern's ways to match one token, which a step cannot stop once it runs in C:
  inference/pattern_paths.py), and the grammar it writes against MAX_GBNF_CHARS. The check runs in the host's
  precheck, on a worker thread (`Host.precheck`, through the engine's `prepare`), and is cached for the model
  thread's admission.
- The sampler never hands llama.cpp a token its grammar refused: a masked step that leaves no token allowed (an
  unsatisfiable schema the checks could not see) ends the request with a SchemaError, and so does a masked step
  costing more than STEP_SECONDS of CPU (a grammar costlier than the checks measured), so one request cannot hold
  the model thread; the request ends, the thread serves the next.

What the grammar makes dangerous: llama.cpp *aborts the process* when a token outside the grammar is accepted (its
grammar code calls GGML_ABORT). So options that force or forbid tokens behind the grammar's back (`min_tokens`,
which bans the end the grammar may demand; `suppress_tokens`, which may ban every token it allows; a thinking
budget, which forces `</think>`) are refused together with `json_schema` rather than risked.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import re
import threading
import time
from collections import OrderedDict
from functools import lru_cache
from typing import Any

import numpy as np

from modelhost.errors import InvalidOptionError, SchemaError
from modelhost.inference.options import GenerateOptions
from modelhost.inference.schema_limits import DEFAULT_LIMITS, SchemaLimits, check_schema

#: The contract's schema bounds with llama.cpp's lower counts: its parser refuses a nested repetition past ~1,000
#: ("exceeds sane defaults", after printing the whole grammar to stderr) and overflows the C stack at ~20,000
#: (SIGSEGV); maxLength 1000 parses and masks in ~15 ms a step on SmolLM2 (measured, issue 25).
LIMITS = SchemaLimits(
    max_depth=DEFAULT_LIMITS.max_depth,
    max_count=1000,
    max_total=20_000,
    max_skippable=DEFAULT_LIMITS.max_skippable,
    max_pattern_depth=DEFAULT_LIMITS.max_pattern_depth,
    # A pattern's ways to match one token (inference/pattern_paths.py, where the step costs are measured): real
    # patterns count 1-48 (an e-mail 21, a phone number 40, semver's official pattern 48), `(.?){6}` 20 (144 ms a
    # step on SmolLM2), `(.?){8}` 70 (379 ms), `(.?){24}` 2.7 million (32 s). Past 64 a step can cost seconds.
    max_paths=64,
    # Four such patterns side by side (an anyOf of strings), each walked for every refused token.
    max_paths_total=256,
    escaped_characters=False,  # the converter writes a pattern's characters raw (`_tighten_negations` says more)
)
#: Largest GBNF text handed to llama.cpp's parser: minLength 20,000 writes ~100 KB; a grammar several times that
#: is a schema the limits above let through by breadth (many properties), and parsing costs with its size.
MAX_GBNF_CHARS = 1 << 20
#: Most CPU time one masked step may take before the request is ended. CPU time of the model thread, not wall
#: time: on a loaded machine (load 14 on 2 cores) a normal step's wall time grew tenfold (15-30 ms to 110-270 ms)
#: while its CPU time did not, and a wall-clock bound would end sound requests there. A normal step costs 10-30 ms
#: of CPU on SmolLM2's 49k vocabulary (a 150k vocabulary about three times that); two seconds is a margin of ~20x
#: over the worst normal step, yet ends a wedging grammar (minutes a step) before it holds the model thread.
STEP_SECONDS = 2.0

#: Options that cannot be combined with a grammar (see the module docstring): each could make llama.cpp accept a
#: token the grammar forbids, and that aborts the process instead of raising.
CONFLICTS = ("min_tokens", "suppress_tokens", "thinking_budget")

#: The converter's string character rule, and ours: no raw control characters (JSON forbids them in strings), no
#: surrogates, no value past U+10FFFF (what llama.cpp reads from a byte no UTF-8 character starts with).
#: (The module doc says why each.)
_CHAR_RULE = re.compile(r'^char ::= \[\^"\\\\\]', re.MULTILINE)
_STRICT_CHAR = r'char ::= [^"\\\x7F\x00-\x1F\uD800-\uDFFF\U00110000-\U7FFFFFFF]'

#: JSON Schema keywords llama-cpp-python's converter does not turn into grammar (it reads type, format, $ref,
#: properties, required, additionalProperties, items, prefixItems, min/maxItems, min/maxLength, pattern, const,
#: enum, anyOf, oneOf, allOf, and skips the rest). A schema using one is refused: silently dropped, an answer with
#: `"age": 121545` against `"maximum": 120` would look enforced and fail the caller's own validation. The numeric
#: bounds (BOUNDS) are the exception we enforce ourselves, on integers: see `_Converter`.
UNENFORCED = frozenset(
    {
        "multipleOf", "uniqueItems", "contains",
        "minContains", "maxContains", "minProperties", "maxProperties", "patternProperties", "propertyNames",
        "dependentRequired", "dependentSchemas", "dependencies", "not", "if", "then", "else",
        "unevaluatedProperties", "unevaluatedItems",
    }
)  # fmt: skip

#: String lengths, which the converter drops when the same string has a `pattern`.
LENGTHS = frozenset({"minLength", "maxLength"})

#: Keywords whose value is one schema, a list of schemas, or a map of names to schemas (walked for UNENFORCED).
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_NAMED = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")

#: GBNF texts that llama.cpp already parsed once: parsing does not depend on the vocabulary for these grammars
#: (they name characters, never tokens), so one check per distinct schema is enough. Bounded, oldest first out:
#: every distinct schema a client sends would otherwise stay in memory for the life of the process.
_checked: OrderedDict[str, None] = OrderedDict()
_CHECKED_KEPT = 256


#: Numeric bounds: enforced by our own digit-range rule on a plain `"type": "integer"`, refused anywhere else.
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
#: The widest integer llama.cpp's converter writes (`integral-part`: 16 digits); a side the caller left open ends
#: here, so a bounded integer is never longer than an unbounded one.
INTEGER_LIMIT = 10**16 - 1
#: Keywords that the converter reads before `type` (llama_grammar.SchemaConverter.visit); a node with one of them is
#: not a plain integer, and its bounds would be dropped, so they are refused there.
_BEFORE_TYPE = ("$ref", "anyOf", "oneOf", "allOf", "const", "enum")


def _refuse_unenforced(node: Any, path: str = "") -> None:
    if isinstance(node, list):
        for i, item in enumerate(node):
            _refuse_unenforced(item, f"{path}[{i}]")
        return
    if not isinstance(node, dict):
        return
    for key in UNENFORCED.intersection(node):
        raise InvalidOptionError("json_schema", f"'{key}' (at {path or '/'}) cannot be enforced by llama.cpp's grammar")
    if "pattern" in node and LENGTHS.intersection(node):
        # Found by the schema fuzzer: the converter follows the pattern alone, so minLength 1 beside ^(a)?$ let "".
        raise InvalidOptionError(
            "json_schema", f"minLength/maxLength beside a pattern (at {path or '/'}) cannot be enforced by llama.cpp's "
            "grammar (its converter follows the pattern alone): write the length into the pattern, as {m,n}",
        )  # fmt: skip
    if any(key in node for key in BOUNDS):
        integer_bounds(node, path)  # refuses bounds it cannot enforce
    for key in _ONE + _MANY:
        if key in node:
            _refuse_unenforced(node[key], f"{path}/{key}")
    for key in _NAMED:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                _refuse_unenforced(sub, f"{path}/{key}/{name}")


def integer_bounds(node: dict[str, Any], path: str = "") -> tuple[int, int]:
    """The inclusive range [low, high] a bounded integer schema allows (an open side ends at +-INTEGER_LIMIT).

    Raises InvalidOptionError naming `json_schema` for bounds the grammar cannot enforce: on anything but a plain
    `"type": "integer"` (a number's range is not a finite set of digit strings: 0.5 < x < 1 has endless decimals,
    so a grammar would have to cap them and quietly refuse valid values), on a non-number, or an empty range.
    """
    where = path or "/"
    if node.get("type") != "integer" or any(key in node for key in _BEFORE_TYPE):
        raise InvalidOptionError(
            "json_schema", f"minimum/maximum (at {where}) are enforced by llama.cpp's grammar only on a plain "
            '"type": "integer" (not a number, a union, an enum or a $ref)',
        )  # fmt: skip
    values = {key: node[key] for key in BOUNDS if key in node}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
            raise InvalidOptionError("json_schema", f"'{key}' (at {where}) must be a finite number")
    # Integer bounds from any number: x >= 0.5 is x >= 1, x > 2 is x >= 3, x > 2.5 is x >= 3.
    lows = [math.ceil(values["minimum"])] if "minimum" in values else []
    if "exclusiveMinimum" in values:
        lows.append(math.floor(values["exclusiveMinimum"]) + 1)
    highs = [math.floor(values["maximum"])] if "maximum" in values else []
    if "exclusiveMaximum" in values:
        highs.append(math.ceil(values["exclusiveMaximum"]) - 1)
    low, high = max(lows, default=-INTEGER_LIMIT), min(highs, default=INTEGER_LIMIT)
    if low > high:
        why = "is empty" if lows and highs else f"lies beyond the {len(str(INTEGER_LIMIT))}-digit integers it writes"
        raise InvalidOptionError("json_schema", f"the integer range at {where} {why} ({low} > {high})")
    return low, high


def _finite(value: float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer literal past a double (a 400-digit maximum): a 500 before issue 25
        return False


def integer_range_rule(low: int, high: int) -> str:
    """A GBNF expression matching exactly the JSON integers in [low, high] (no leading zeros, no -0)."""
    parts = []
    if low < 0:
        parts.append('"-" ' + _natural_range(max(1, -high), -low))
    if high >= 0:
        parts.append(_natural_range(max(0, low), high))
    return "(" + " | ".join(parts) + ")"


def _natural_range(low: int, high: int) -> str:
    """[low, high] of non-negative integers, split by digit count so that only 0 itself starts with a 0."""
    parts = []
    for digits in range(len(str(low)), len(str(high)) + 1):
        first = 0 if digits == 1 else 10 ** (digits - 1)
        lo, hi = max(low, first), min(high, 10**digits - 1)
        parts.append(_same_length(str(lo), str(hi)))
    return "(" + " | ".join(parts) + ")"


def _same_length(lo: str, hi: str) -> str:
    """Digit strings of len(lo) == len(hi) between lo and hi (inner positions may be 0)."""
    if len(lo) == 1:
        return f"[{lo}-{hi}]"
    rest = len(lo) - 1
    if lo[0] == hi[0]:
        return f'"{lo[0]}" {_same_length(lo[1:], hi[1:])}'
    # lo's first digit with any tail >= lo's tail, then the whole digits strictly between, then hi's first digit
    # with any tail <= hi's tail; a tail of all 0s (or all 9s) lets its digit join the middle class instead.
    alternatives = []
    start, end = int(lo[0]), int(hi[0])
    if lo[1:] != "0" * rest:
        alternatives.append(f'"{lo[0]}" {_same_length(lo[1:], "9" * rest)}')
        start += 1
    high_tail = hi[1:] != "9" * rest
    if high_tail:
        end -= 1
    if start <= end:
        alternatives.append(f"[{start}-{end}]" + " [0-9]" * rest)
    if high_tail:
        alternatives.append(f'"{hi[0]}" {_same_length("0" * rest, hi[1:])}')
    return "(" + " | ".join(alternatives) + ")"


@lru_cache(maxsize=1)
def _converter_class() -> type:
    from llama_cpp import llama_grammar

    class _Converter(llama_grammar.SchemaConverter):  # type: ignore[misc,name-defined]
        """llama-cpp-python's converter, plus integer bounds: its own `visit` drops them (a TODO in its source),
        where llama.cpp's C++ converter writes a digit-range rule; this writes one of ours."""

        def visit(self, schema: Any, name: str) -> Any:
            if isinstance(schema, dict) and any(key in schema for key in BOUNDS):
                low, high = integer_bounds(schema)
                rule_name = name + "-" if name in llama_grammar.RESERVED_NAMES else name or "root"
                return self._add_rule(rule_name, integer_range_rule(low, high) + " space")
            return super().visit(schema, name)

    return _Converter


def _schema_to_gbnf(schema_json: str) -> str:
    """llama_grammar.json_schema_to_gbnf with our converter (the same settings: no fetching, no property order)."""
    converter = _converter_class()(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    schema = converter.resolve_refs(json.loads(schema_json), "stdin")
    converter.visit(schema, "")
    return str(converter.format_grammar())


#: Digests of the schemas that passed LIMITS, so that a grammar dropped from gbnf_for_schema's cache (more distinct
#: schemas in flight than it keeps) is rebuilt without counting its patterns' ways again (up to pattern_paths.WORK,
#: ~0.4 s) where the rebuild happens: the host's precheck counted them on a worker thread, and the event loop's
#: submit or the model thread's admission must not count them twice. 32 bytes each.
_passed: OrderedDict[bytes, None] = OrderedDict()
_PASSED_KEPT = 4096


_passed_lock = threading.Lock()  # prechecks on worker threads, the event loop and the model thread share it


def _check_limits(schema_json: str, schema: Any) -> None:
    digest = hashlib.sha256(schema_json.encode("utf-8")).digest()
    with _passed_lock:
        if digest in _passed:
            _passed.move_to_end(digest)
            return
    check_schema(schema, LIMITS)  # before the converter: it would write whatever the counts ask (module doc)
    with _passed_lock:
        _passed[digest] = None
        while len(_passed) > _PASSED_KEPT:
            _passed.popitem(last=False)


@lru_cache(maxsize=64)
def gbnf_for_schema(schema_json: str) -> str:
    """The GBNF grammar of a JSON Schema (compact JSON text, as GenerateOptions holds it), within LIMITS."""
    schema = json.loads(schema_json)
    _check_limits(schema_json, schema)
    _refuse_unenforced(schema)
    try:
        grammar = _schema_to_gbnf(schema_json)
    except InvalidOptionError:
        raise
    except Exception as exc:  # the converter asserts, raises KeyError, ValueError ... on schemas it cannot read
        raise InvalidOptionError(
            "json_schema", f"llama.cpp cannot turn this JSON Schema into a grammar: {exc}"
        ) from None
    if len(grammar) > MAX_GBNF_CHARS:
        raise SchemaError((), f"its grammar is {len(grammar)} characters; llama.cpp is given at most {MAX_GBNF_CHARS}")
    return _tighten_negations(_CHAR_RULE.sub(lambda _: _STRICT_CHAR, grammar))


#: What a negated class in a pattern's grammar must not let into a JSON string, as the string rule does not: raw
#: quotes and backslashes (they end or escape the string), control characters, surrogates, values past U+10FFFF.
_NOT_IN_STRINGS = r'"\\\x7F\x00-\x1F\uD800-\uDFFF\U00110000-\U7FFFFFFF'


def _tighten_negations(gbnf: str) -> str:
    """Every negated class (`[^a]`, the pattern's `.` as `[^\x0a\x0d]`) also excludes _NOT_IN_STRINGS.

    The converter writes a pattern's classes raw into the string's grammar, outside our `char` rule, so `[^a]` let
    a raw control character (json.loads refuses the answer) or a lenient-UTF-8 value past U+10FFFF (Python reads
    U+FFFD replacement characters, and the pattern then fails) into the string: found by the schema fuzzer. The
    scan skips literals (`"[^k"` is a property name) and copies escapes whole.
    """
    out: list[str] = []
    i, n = 0, len(gbnf)
    while i < n:
        if gbnf[i] not in '"[':
            out.append(gbnf[i])
            i += 1
            continue
        close = '"' if gbnf[i] == '"' else "]"
        j = i + 1
        while j < n and gbnf[j] != close:
            j += 2 if gbnf[j] == "\\" else 1
        piece = gbnf[i : j + 1]
        tight = not piece.startswith("[^") or piece.startswith("[^" + _NOT_IN_STRINGS)  # the char rule already is
        out.append(piece if tight else "[^" + _NOT_IN_STRINGS + piece[2:])
        i = j + 1
    return "".join(out)


def check(opts: GenerateOptions, vocab: Any) -> str | None:
    """The grammar `opts` asks for (None when none), checked to parse; raises InvalidOptionError naming the option."""
    if opts.json_schema is None:
        return None
    for name in CONFLICTS:
        if getattr(opts, name):
            raise InvalidOptionError(name, "cannot be combined with json_schema (structured output) on llama.cpp")
    gbnf = gbnf_for_schema(opts.json_schema)
    if gbnf in _checked:
        _checked.move_to_end(gbnf)
    else:
        parse(vocab, gbnf)  # raises if llama.cpp refuses it
        _checked[gbnf] = None
        while len(_checked) > _CHECKED_KEPT:
            _checked.popitem(last=False)
    return gbnf


def _init(vocab: Any, gbnf: str) -> Any:
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode("utf-8"), b"root")
    if not sampler:
        raise InvalidOptionError("json_schema", "llama.cpp could not parse the grammar made from this JSON Schema")
    return sampler


def parse(vocab: Any, gbnf: str) -> None:
    """Parse `gbnf` once, raising InvalidOptionError when llama.cpp refuses it."""
    import llama_cpp

    llama_cpp.llama_sampler_free(_init(vocab, gbnf))


class GrammarSampler:
    """A sampler chain with a grammar checked on the drawn token first (see the module docstring).

    Same face as llama_cpp's LlamaSampler (`sample(ctx, idx)`, `accept(token)`, `close()`), so TokenChooser
    drives it like any chain. Owns `chain` (a LlamaSampler without a grammar) from now on.
    """

    _DTYPE = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])

    def __init__(self, chain: Any, vocab: Any, gbnf: str, n_vocab: int, *, step_seconds: float | None = None) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._chain = chain
        self._grammar = _init(vocab, gbnf)
        self._n_vocab = n_vocab
        # One candidate buffer for the life of the generation: every step overwrites its logits (and ids: samplers
        # sort it in place).
        self._cand = np.zeros(n_vocab, dtype=self._DTYPE)
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self._one = (llama_cpp.llama_token_data * 1)()
        self._step_seconds = STEP_SECONDS if step_seconds is None else step_seconds
        self.refused = 0  # steps where the drawn token was outside the grammar (for tests and the bench)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """Draw from `ctx`'s logits at batch row `idx`, honouring the grammar; accepts the token (as llama.cpp's
        llama_sampler_sample does)."""
        lib = self._lib
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n_vocab,))
        token = self._draw(logits, masked=False)
        one = self._one
        one[0] = lib.llama_token_data(token, float(logits[token]), 0.0)
        single = lib.llama_token_data_array(one, 1, -1, False)
        lib.llama_sampler_apply(self._grammar, ctypes.byref(single))
        if one[0].logit == float("-inf"):
            self.refused += 1
            token = self._draw(logits, masked=True)
        self.accept(token)
        return token

    def _draw(self, logits: np.ndarray, *, masked: bool) -> int:
        lib = self._lib
        cand = self._cand
        cand["id"] = self._ids
        cand["logit"] = logits
        cand["p"] = 0.0
        data = cand.ctypes.data_as(ctypes.POINTER(lib.llama_token_data))
        array = lib.llama_token_data_array(data, self._n_vocab, -1, False)
        if masked:
            started = time.thread_time()
            lib.llama_sampler_apply(self._grammar, ctypes.byref(array))
            self._check_mask(cand["logit"], time.thread_time() - started)
        lib.llama_sampler_apply(self._chain.sampler, ctypes.byref(array))
        if array.selected < 0:
            raise RuntimeError("the sampler chain selected no token")
        chosen = array.data[array.selected]
        if masked and chosen.logit == float("-inf"):
            # Accepting it would GGML_ABORT the process (the module docstring); a chain step that can pick a
            # refused token (none of ours can) must end the request instead.
            raise SchemaError((), f"the sampler picked token {chosen.id}, which the grammar refuses")
        return int(chosen.id)

    def _check_mask(self, logits: np.ndarray, seconds: float) -> None:
        """End the request when a masked step leaves nothing allowed or cost more CPU than the bound (module doc)."""
        if seconds > self._step_seconds:
            raise SchemaError(
                (), f"one constrained step took {seconds:.1f} s of CPU (the bound is {self._step_seconds:g} s): this "
                "schema's grammar is too costly to follow",
            )  # fmt: skip
        if not np.isfinite(logits).any():
            raise SchemaError(
                (), "the grammar allows no token here: no text can continue the answer (no value satisfies "
                "this schema from this point)",
            )  # fmt: skip

    def accept(self, token: int) -> None:
        """Advance the chain's and the grammar's state past `token`."""
        self._lib.llama_sampler_accept(self._chain.sampler, token)
        self._lib.llama_sampler_accept(self._grammar, token)

    def close(self) -> None:
        """Free the grammar and the chain. Idempotent."""
        if self._grammar is not None:
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None
        self._chain.close()

"""Constrained decoding for transformers: a JSON Schema becomes an llguidance matcher, and the matcher a token mask.

Chosen by measurement among xgrammar, llguidance and outlines-core (bench/structured.py has the decode-speed ratio;
the choice itself is recorded in the commit that brought it): llguidance compiles a schema in about a millisecond
(outlines-core builds its whole index up front: ~180 ms for a small object schema on SmolLM2's 49k vocabulary),
masks SmolLM2's vocabulary in 0.3-0.5 ms a step (about 1% of a ~50 ms decode step on a CPU), installs as one
8 MB wheel with no dependencies (xgrammar pulls in triton, about 1 GB), and its strings refuse raw control
characters (xgrammar's let a tiny random model put bytes such as 0x03 inside a string, which `json.loads` refuses:
7 of 20 answers). Its JSON compiler also names the keywords it cannot enforce, so a schema is refused rather than
quietly loosened.

How a request uses it: the schema is checked when the options are (`check`), before any compute, and refused as
a 400 naming `json_schema` when llguidance cannot follow it; the contract's bounds (schema_limits.py, run by
`GenerateOptions.parse`) have refused what no engine may be given before that. A mask that leaves no token
allowed, a matcher that gave up (its fuel limits) or a mask costing more than STEP_SECONDS of CPU ends the request
with a SchemaError rather than drawing a token the matcher refuses. Each sequence then gets its own `LLMatcher`, kept in
its RowState; the sampler's `constrain` step sets every token the matcher refuses to -inf (end-of-sequence
included until the grammar accepts; only end-of-sequence once it is complete), and RowState feeds the drawn token
back. `max_tokens` can still cut an answer short, which decode_loop reports as "length", as on llama.cpp.

Before compiling, the schema is `bounded` as llama.cpp's converter bounds it (numbers end at 16 integer digits, an
object that lists its properties is closed unless it says otherwise), so both backends accept the same answers and
a weak model's number or stray key cannot run on. What no grammar can end is a free string (no maxLength) or an
object the caller opened explicitly (`"additionalProperties": true`, whose values may nest objects): measured with
that opening, the tiny random model left 8 of 8 answers unparseable here and 6 of 8 on llama.cpp, and SmolLM2
sampled at temperature 1 nested new keys until max_tokens (200) in 4 of 6 chat answers. A capable model usually
closes them; "length" says when not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from modelhost.errors import InvalidOptionError, SchemaError
from modelhost.inference.options import GenerateOptions

if TYPE_CHECKING:
    import torch
    from llguidance._lib import JsonCompileOptions

#: Options that cannot be combined with a grammar: each forces or forbids tokens behind the matcher's back
#: (`min_tokens` bans the end a finished grammar demands, `suppress_tokens` may ban every token it allows, a
#: thinking budget forces `</think>`), leaving a row with no allowed token or the matcher out of step with the
#: text. The same set llama.cpp refuses, so a request is accepted or refused alike on both backends.
CONFLICTS = ("min_tokens", "suppress_tokens", "thinking_budget")

#: llguidance's JSON options. Compact separators: the flexible-whitespace default lets a weak model spend its
#: whole max_tokens on spaces and newlines between values (llama.cpp's converter allows at most a little).
_JSON_DEFAULTS: JsonCompileOptions = {"whitespace_flexible": False}

#: Most CPU time one mask may take before the request is ended, as on llama.cpp (its grammar.py says why CPU time
#: and how the value was chosen):
#: llguidance's own fuel (LLParserLimits: step_lexer_fuel, step_max_items) already stops a step in ~15 ms of work
#: and puts the matcher in its error state; this bound catches what fuel does not count.
STEP_SECONDS = 2.0


#: The largest integer part a number may have: 16 digits, as llama.cpp's converter allows (`integral-part` is one
#: digit and up to 15 more), so an answer is accepted or cut alike on both backends.
NUMBER_BOUND = 10**16 - 1
#: The finest step of a number without one of its own: ten decimals. llguidance bounds decimals only through
#: `multipleOf`, and refuses a step finer than 1e-10 ("too many digits": it reads the step as an f64's digits);
#: llama.cpp allows 16 decimals, so a value such as pi is cut to 3.1415926535 here.
NUMBER_STEP = 1e-10
#: Keywords whose value is one schema, a list of schemas, or a map of names to schemas (walked by `bounded`).
#: Not `not`: a bound inside it would widen what it forbids (llguidance refuses `not` anyway).
_ONE = ("items", "additionalProperties", "if", "then", "else", "contains", "additionalItems")
_MANY = ("anyOf", "oneOf", "prefixItems")
_NAMED = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")


def bounded(schema: Any, *, in_all_of: bool = False) -> Any:
    """A copy of `schema` in which every value can end, as llama.cpp's grammar makes it end; the caller's schema is
    untouched (an answer is still validated, by the caller, against the schema they sent).

    llguidance follows JSON Schema to the letter where llama.cpp's converter does not, and to the letter a random or
    weak model runs on until `max_tokens` cuts the answer into text that does not parse (seen on the tiny test
    model, 8 answers of 8: an object with `properties` and no `additionalProperties` got one extra key whose string
    never closed; a number's exponent ran to 50 digits). So, as llama.cpp's converter does:

    - an integer or number gets at most 16 integer digits (`minimum`/`maximum` of +-NUMBER_BOUND, only where the
      caller set no bound of that side), a number at most ten decimals (`multipleOf` NUMBER_STEP, only where the
      caller set none), and therefore no exponent (llguidance refuses one on a bounded number);
    - an object that lists `properties` and says nothing of `additionalProperties` is closed. That is what OpenAI's
      strict mode demands of every object, what vLLM's xgrammar backend does by default, and what llama.cpp's
      converter already does; a caller who wants extra keys says `"additionalProperties": true` (or a schema), and
      gets them on both backends. Not inside `allOf`: closing each branch would forbid the keys of the others.
    """
    if isinstance(schema, list):
        return [bounded(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _ONE + _MANY:
        if key in out:
            out[key] = bounded(out[key])
    if isinstance(out.get("allOf"), list):
        out["allOf"] = [bounded(branch, in_all_of=True) for branch in out["allOf"]]
    for key in _NAMED:
        if isinstance(out.get(key), dict):
            out[key] = {name: bounded(sub) for name, sub in out[key].items()}
    types = out.get("type")
    types = set(types) if isinstance(types, list) else {types}
    if types & {"integer", "number"}:
        # JSON Schema applies these keywords to numbers only, so a `["integer", "null"]` union keeps its null. A
        # caller's own bound beyond ours (a minimum of 1e20) asks for longer numbers: that side is left open.
        low = _number(out.get("minimum", out.get("exclusiveMinimum")))
        high = _number(out.get("maximum", out.get("exclusiveMaximum")))
        if low is None and (high is None or high >= -NUMBER_BOUND):
            out["minimum"] = -NUMBER_BOUND
        if high is None and (low is None or low <= NUMBER_BOUND):
            out["maximum"] = NUMBER_BOUND
        if "number" in types and "multipleOf" not in out:
            out["multipleOf"] = NUMBER_STEP
    if "properties" in out and "additionalProperties" not in out and not in_all_of:
        out["additionalProperties"] = False
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@lru_cache(maxsize=64)
def grammar_for_schema(schema_json: str) -> str:
    """llguidance's grammar text for a JSON Schema (compact JSON text, as GenerateOptions holds it), checked.

    Raises InvalidOptionError naming `json_schema` when llguidance cannot enforce the schema (an unknown type, a
    keyword it does not implement such as `uniqueItems` or `not`, a remote `$ref`, a look-around in a pattern).
    """
    import llguidance

    try:
        schema = bounded(json.loads(schema_json))
        grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults=_JSON_DEFAULTS)
        failed, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    except Exception as exc:  # the compiler raises ValueError/TypeError on schemas it cannot read at all
        raise InvalidOptionError("json_schema", f"llguidance cannot compile this JSON Schema: {exc}") from None
    if failed:
        why = "; ".join(messages) or "it refused the schema"
        raise InvalidOptionError("json_schema", f"llguidance cannot enforce this JSON Schema: {why}")
    return str(grammar)


def check(opts: GenerateOptions) -> str | None:
    """The grammar `opts` asks for (None when none), checked; raises InvalidOptionError naming the option."""
    if opts.json_schema is None:
        return None
    for name in CONFLICTS:
        if getattr(opts, name):
            raise InvalidOptionError(name, "cannot be combined with json_schema (structured output) on transformers")
    return grammar_for_schema(opts.json_schema)


class Grammars:
    """One model's bridge to llguidance: its tokenizer as llguidance sees it, built on first use (about a second
    for a 49k vocabulary, so a model that never gets a schema never pays it), and a matcher per sequence."""

    def __init__(self, tokenizer: Any, *, vocab_size: int, eos_ids: Collection[int]) -> None:
        self._tokenizer = tokenizer
        self._vocab_size = vocab_size  # the logits' width, which can exceed the tokenizer's (padded LM heads)
        self._eos = sorted(eos_ids)
        self._ll: Any = None

    def matcher(self, opts: GenerateOptions) -> Any | None:
        """A fresh matcher for one sequence of a request, or None when the request has no schema. `opts` were
        checked (`check`) when the request was: the compiled grammar comes from that check's cache, and the
        conflicting options are not looked at again."""
        if opts.json_schema is None:
            return None
        grammar = grammar_for_schema(opts.json_schema)
        import llguidance

        matcher = llguidance.LLMatcher(self._lltokenizer(), grammar)
        if matcher.is_error():
            raise InvalidOptionError("json_schema", f"llguidance refused this JSON Schema: {matcher.get_error()}")
        return matcher

    def _lltokenizer(self) -> Any:
        if self._ll is None:
            import llguidance.hf

            try:
                self._ll = llguidance.hf.from_tokenizer(
                    self._tokenizer, n_vocab=self._vocab_size, eos_token=self._eos or None
                )
            except Exception as exc:  # a slow (Python-only) tokenizer: llguidance reads the Rust tokenizers JSON
                raise InvalidOptionError(
                    "json_schema", f"structured output needs a fast tokenizer here: {exc}"
                ) from None
        return self._ll


def constrain(logits: torch.Tensor, matchers: Sequence[Any | None]) -> torch.Tensor:
    """Set every token a row's matcher refuses to -inf; `matchers` holds one per row of `logits`, None for a row
    without a schema (left alone). Takes matchers, not the sampler's rows, so this module needs nothing of the
    sampler (sampling.py wraps it as a logits step)."""
    import torch

    constrained = [r for r, matcher in enumerate(matchers) if matcher is not None]
    if not constrained:
        return logits
    width = logits.shape[-1]
    # One bit per token, 32 to a word. Filled straight through the matcher's pointer API rather than through
    # llguidance.torch, whose import torch.compile-decorates its kernels (deprecation warnings, and a first apply
    # that needs a C compiler and seconds of compilation on the serving thread).
    words = np.full((len(constrained), (width + 31) // 32), -1, dtype="<i4")
    for i, r in enumerate(constrained):
        matcher: Any = matchers[r]
        started = time.thread_time()
        matcher.unsafe_compute_mask_ptr(words[i].ctypes.data, words[i].nbytes)
        _check_step(matcher, time.thread_time() - started)
    # Bit j of little-endian word w is token 32*w + j, so the bytes unpack in little bit order into token order.
    bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little")[:, :width]
    refused = torch.from_numpy(bits == 0).to(logits.device)
    index = torch.tensor(constrained, device=logits.device)
    logits[index] = logits[index].masked_fill(refused, float("-inf"))
    if not torch.isfinite(logits[index]).any(dim=-1).all():
        # An empty mask: argmax or a draw would still pick a token the matcher refuses. End the request instead.
        raise SchemaError(
            (), "the grammar allows no token here: no text can continue the answer (no value satisfies this "
            "schema from this point)",
        )  # fmt: skip
    return logits


def _check_step(matcher: Any, seconds: float) -> None:
    """End the request when the matcher gave up (a resource limit, an unsatisfiable grammar) or was too slow."""
    if matcher.is_error():
        raise SchemaError((), f"llguidance stopped following the schema: {matcher.get_error()}")
    if seconds > STEP_SECONDS:
        raise SchemaError(
            (), f"one constrained step took {seconds:.1f} s of CPU (the bound is {STEP_SECONDS:g} s): this schema's "
            "grammar is too costly to follow",
        )  # fmt: skip


def advance(matcher: Any, token: int) -> None:
    """Feed the drawn token to a sequence's matcher; a refusal means the mask and the draw disagreed (a bug)."""
    if not matcher.consume_token(token):
        raise SchemaError((), f"the structured-output grammar refused token {token}: {matcher.get_error()}")

"""Constrained decoding for llama.cpp: a JSON Schema becomes a GBNF grammar, and the grammar a sampler step.

llama-cpp-python ships llama.cpp's own JSON-Schema-to-GBNF converter (`llama_grammar.json_schema_to_gbnf`); the
grammar sampler (`llama_sampler_init_grammar`) then masks, at every step, each token that would leave the grammar,
so the output is valid JSON of the schema by construction, even from a random model, as long as it is not cut
short (`max_tokens`, a stop string, the context's end).

Two things we add to the converter's output, each for a failure seen or read in llama.cpp:

- Strings exclude control characters. The converter's `char` rule is `[^"\\\\]`, which lets a raw newline or tab
  into a JSON string; Python's `json.loads` (and JSON itself) refuses those, so a small model's stray newline made
  the whole answer unparseable. Upstream llama.cpp later tightened its own rule the same way. Surrogates go too.

  What stays open: llama.cpp decodes a token's bytes to code points leniently, so an *overlong* UTF-8 sequence
  (C1 81 for "A") passes the grammar as the character it spells, and Python decodes it as U+FFFD replacement
  characters. The JSON still parses, but a string can then fail `maxLength`/`pattern` when validated. Real
  tokenizers do not make such sequences; a random model over byte tokens can (seen on the tiny test model).
- The grammar checks the drawn token first, and masks the whole vocabulary only when that token is refused (what
  llama.cpp's own `common_sampler` does). Masking costs a walk of every token's text through the grammar's stacks
  (measured on SmolLM2's 49k vocabulary, 2 shared cores: 5-15 ms a step, about one decode step, so the grammar
  alone would halve the speed); a check of one token costs microseconds, and a capable model's drawn token is
  allowed nearly every time. Greedy output is the same either way (the argmax, if allowed, is the masked
  argmax), and a sampled token is drawn from the same masked distribution: p(t) + P(refused) * p(t) / Z = p(t) / Z.
- A grammar is checked once, when the request is admitted: a schema the converter cannot handle (an unknown type,
  a remote `$ref`) or a grammar llama.cpp cannot parse is a 400 naming `json_schema`, before any compute.

What the grammar makes dangerous: llama.cpp *aborts the process* when a token outside the grammar is accepted (its
grammar code calls GGML_ABORT). So options that force or forbid tokens behind the grammar's back (`min_tokens`,
which bans the end the grammar may demand; `suppress_tokens`, which may ban every token it allows; a thinking
budget, which forces `</think>`) are refused together with `json_schema` rather than risked.
"""

from __future__ import annotations

import ctypes
import re
from functools import lru_cache
from typing import Any

import numpy as np

from modelhost.errors import InvalidOptionError
from modelhost.inference.options import GenerateOptions

#: Options that cannot be combined with a grammar (see the module docstring): each could make llama.cpp accept a
#: token the grammar forbids, and that aborts the process instead of raising.
CONFLICTS = ("min_tokens", "suppress_tokens", "thinking_budget")

#: The converter's string character rule, and ours: no raw control characters (JSON forbids them in strings).
_CHAR_RULE = re.compile(r'^char ::= \[\^"\\\\\]', re.MULTILINE)
_STRICT_CHAR = r'char ::= [^"\\\x7F\x00-\x1F\uD800-\uDFFF]'

#: JSON Schema keywords llama-cpp-python's converter does not turn into grammar (it reads type, format, $ref,
#: properties, required, additionalProperties, items, prefixItems, min/maxItems, min/maxLength, pattern, const,
#: enum, anyOf, oneOf, allOf, and skips the rest). A schema using one is refused: silently dropped, an answer with
#: `"age": 121545` against `"maximum": 120` would look enforced and fail the caller's own validation.
UNENFORCED = frozenset(
    {
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "uniqueItems", "contains",
        "minContains", "maxContains", "minProperties", "maxProperties", "patternProperties", "propertyNames",
        "dependentRequired", "dependentSchemas", "dependencies", "not", "if", "then", "else",
        "unevaluatedProperties", "unevaluatedItems",
    }
)  # fmt: skip

#: Keywords whose value is one schema, a list of schemas, or a map of names to schemas (walked for UNENFORCED).
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_NAMED = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")

#: GBNF texts that llama.cpp already parsed once: parsing does not depend on the vocabulary for these grammars
#: (they name characters, never tokens), so one check per distinct schema is enough.
_checked: set[str] = set()


def _refuse_unenforced(node: Any, path: str = "") -> None:
    if isinstance(node, list):
        for i, item in enumerate(node):
            _refuse_unenforced(item, f"{path}[{i}]")
        return
    if not isinstance(node, dict):
        return
    for key in UNENFORCED.intersection(node):
        raise InvalidOptionError("json_schema", f"'{key}' (at {path or '/'}) cannot be enforced by llama.cpp's grammar")
    for key in _ONE + _MANY:
        if key in node:
            _refuse_unenforced(node[key], f"{path}/{key}")
    for key in _NAMED:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                _refuse_unenforced(sub, f"{path}/{key}/{name}")


@lru_cache(maxsize=64)
def gbnf_for_schema(schema_json: str) -> str:
    """The GBNF grammar of a JSON Schema (compact JSON text, as GenerateOptions holds it)."""
    import json

    from llama_cpp.llama_grammar import json_schema_to_gbnf

    _refuse_unenforced(json.loads(schema_json))
    try:
        grammar = json_schema_to_gbnf(schema_json)
    except Exception as exc:  # the converter asserts, raises KeyError, ValueError ... on schemas it cannot read
        raise InvalidOptionError(
            "json_schema", f"llama.cpp cannot turn this JSON Schema into a grammar: {exc}"
        ) from None
    return _CHAR_RULE.sub(lambda _: _STRICT_CHAR, grammar)


def check(opts: GenerateOptions, vocab: Any) -> str | None:
    """The grammar `opts` asks for (None when none), checked to parse; raises InvalidOptionError naming the option."""
    if opts.json_schema is None:
        return None
    for name in CONFLICTS:
        if getattr(opts, name):
            raise InvalidOptionError(name, "cannot be combined with json_schema (structured output) on llama.cpp")
    gbnf = gbnf_for_schema(opts.json_schema)
    if gbnf not in _checked:
        parse(vocab, gbnf)  # raises if llama.cpp refuses it
        _checked.add(gbnf)
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

    def __init__(self, chain: Any, vocab: Any, gbnf: str, n_vocab: int) -> None:
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
            lib.llama_sampler_apply(self._grammar, ctypes.byref(array))
        lib.llama_sampler_apply(self._chain.sampler, ctypes.byref(array))
        if array.selected < 0:
            raise RuntimeError("the sampler chain selected no token")
        return int(array.data[array.selected].id)

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

"""Resolved options to a llama.cpp sampler chain, built from small steps, each added only when it changes anything.

The chain runs in C on every decode step, so a step that would be a no-op (top_k 0, top_p 1, min_p 0, a repeat
penalty of 1) is left out rather than paid for on a 50k-token vocabulary. Order follows llama.cpp's own default:
bans, penalties, top-k, top-p, min-p, temperature, then the draw; greedy skips straight to argmax (temperature 0 or
top_k 1), so greedy output does not depend on a seed.

`TokenChooser` is one request's whole draw (its chain, the `min_tokens` ban, the thinking budget's forced close,
the chosen token's log-probability), the same for every slot of the engine.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from modelhost.backends.llama_cpp import grammar as constrained
from modelhost.backends.llama_cpp import lowlevel
from modelhost.errors import InvalidOptionError
from modelhost.inference.decoding import ThoughtTracker
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import TokenLogprob

#: How many recent tokens the repeat penalty looks at: llama.cpp's default `penalty_last_n`.
PENALTY_WINDOW = 64

#: llama.cpp's "pick a random seed" value; a caller's seed must never collide with it.
RANDOM_SEED = 0xFFFFFFFF


def native_seed(seed: int | None) -> int:
    """Fold a 64-bit option seed into llama.cpp's 32-bit one; None asks llama.cpp for a random seed."""
    if seed is None:
        return RANDOM_SEED
    folded = (seed ^ (seed >> 32)) & 0xFFFFFFFF
    return folded if folded != RANDOM_SEED else RANDOM_SEED - 1


def check_supported(opts: GenerateOptions) -> None:
    """Refuse values llama.cpp's samplers cannot honour, naming the option (before any compute)."""
    if opts.repeat_penalty is not None and opts.repeat_penalty <= 0:
        # llama.cpp divides positive logits by the penalty: 0 would turn them into infinities.
        raise InvalidOptionError("repeat_penalty", "must be greater than 0 for llama.cpp (1.0 disables it)")


def build_sampler(
    opts: GenerateOptions,
    *,
    n_vocab: int,
    ban: Collection[int] = (),
    history: Sequence[int] = (),
    grammar: tuple[Any, str] | None = None,
) -> Any:
    """A llama.cpp sampler chain (`lowlevel.new_sampler`) for resolved `opts`; the caller closes it.

    `ban` adds token ids that may not be drawn (on top of `suppress_tokens`): the model's stops while `min_tokens`
    is not yet reached. `history` are the tokens already in context (the prompt's tail) that the repeat penalty
    should see, as transformers' repetition_penalty does. `grammar` is (vocab, GBNF text): the chain is then
    wrapped in a GrammarSampler, which checks the drawn token against the grammar (grammar.py says why).
    """
    sampler = lowlevel.new_sampler()
    banned = {int(t): float("-inf") for t in (*opts.suppress_tokens, *ban) if 0 <= t < n_vocab}
    if banned:
        sampler.add_logit_bias(n_vocab, banned)
    penalty = opts.repeat_penalty if opts.repeat_penalty is not None else 1.0
    if penalty != 1.0:
        sampler.add_penalties(n_vocab, PENALTY_WINDOW, penalty, 0.0, 0.0)
    if opts.greedy:
        sampler.add_greedy()
    else:
        if opts.top_k:
            sampler.add_top_k(opts.top_k)
        if opts.top_p is not None and opts.top_p < 1.0:
            sampler.add_top_p(opts.top_p, 1)
        if opts.min_p:
            sampler.add_min_p(opts.min_p, 1)
        sampler.add_temp(opts.temperature if opts.temperature is not None else 1.0)
        sampler.add_dist(native_seed(opts.seed))
    if penalty != 1.0:
        for token in history[-PENALTY_WINDOW:]:
            sampler.accept(int(token))
    if grammar is not None:
        return constrained.GrammarSampler(sampler, *grammar, n_vocab=n_vocab)
    return sampler


class TokenChooser:
    """Picks each next token of one generation: its sampler chain, the `min_tokens` ban, the thinking budget.

    One per generation, in the one-at-a-time path and in each batch slot alike, so both draw tokens the same way.
    Until `min_tokens` are out, the stops are banned outright by a second chain kept in step with the main one, so
    the model says something else instead of emitting an end it is not allowed to have.
    """

    def __init__(
        self,
        opts: GenerateOptions,
        *,
        n_vocab: int,
        stops: Collection[int],
        history: Sequence[int],
        thought: ThoughtTracker,
        grammar: tuple[Any, str] | None = None,
        piece: Any = None,
    ) -> None:
        self.produced = 0
        self._top = opts.logprobs
        self._piece = piece
        self._n_vocab = n_vocab
        #: Where the request stands in its thought channel (the shared rules: inference.decoding; the decoder moves
        #: it along with each pushed token); the thinking budget's forced closing marker is drawn here instead of
        #: a sample.
        self.thought = thought
        #: The log-probability of the token chosen last, when the `logprobs` option asked for it.
        self.logprob: TokenLogprob | None = None
        self._min_tokens = opts.min_tokens
        self._sampler = build_sampler(opts, n_vocab=n_vocab, history=history, grammar=grammar)
        self._early = (
            build_sampler(opts, n_vocab=n_vocab, ban=stops, history=history, grammar=grammar)
            if opts.min_tokens
            else None
        )

    def choose(self, ctx: Any, index: int) -> int:
        """The next token, from the logits at batch position `index` of `ctx` (a llama_cpp LlamaContext)."""
        forced = self.thought.forced_token()
        if forced is not None:
            token = forced
            self._sampler.accept(token)
        elif self._early is not None and self.produced < self._min_tokens:
            token = int(self._early.sample(ctx, index))
            self._sampler.accept(token)
        else:
            token = int(self._sampler.sample(ctx, index))
        self.produced += 1
        if self._top is not None:
            self.logprob = self._logprob(ctx, index, token, self._top)
        return token

    def _logprob(self, ctx: Any, index: int, token: int, top: int) -> TokenLogprob:
        # The model's own distribution (the raw logits row; samplers work on a copy), as OpenAI and vLLM report it.
        import llama_cpp

        n = self._n_vocab
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, index), shape=(n,)).astype(np.float64)
        peak = row.max()
        logsum = peak + math.log(float(np.exp(row - peak).sum()))
        alternatives: tuple[TokenLogprob, ...] = ()
        if top:
            best = np.argpartition(-row, min(top, n - 1))[:top]
            best = best[np.argsort(-row[best], kind="stable")]
            alternatives = tuple(self._entry(int(i), float(row[i] - logsum)) for i in best)
        chosen = self._entry(token, float(row[token] - logsum))
        return TokenLogprob(chosen.text, chosen.bytes, chosen.logprob, alternatives)

    def _entry(self, token: int, logprob: float) -> TokenLogprob:
        data: bytes = self._piece(token)
        return TokenLogprob(data.decode("utf-8", "replace"), data, logprob)

    def close(self) -> None:
        """Free the native sampler chains now rather than when the garbage collector gets to them."""
        self._sampler.close()
        if self._early is not None:
            self._early.close()

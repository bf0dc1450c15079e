"""Resolved options to a llama.cpp sampler chain, built from small steps, each added only when it changes anything.

The chain runs in C on every decode step, so a step that would be a no-op (top_k 0, top_p 1, min_p 0, a repeat
penalty of 1) is left out rather than paid for on a 50k-token vocabulary. Order follows llama.cpp's own default:
bans, penalties, top-k, top-p, min-p, temperature, then the draw; greedy skips straight to argmax (temperature 0 or
top_k 1), so greedy output does not depend on a seed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from modelhost.errors import InvalidOptionError
from modelhost.inference.options import GenerateOptions

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
    """A `llama_cpp._internals.LlamaSampler` for resolved `opts`; the caller closes it.

    `ban` adds token ids that may not be drawn (on top of `suppress_tokens`): the model's stops while `min_tokens`
    is not yet reached. `history` are the tokens already in context (the prompt's tail) that the repeat penalty
    should see, as transformers' repetition_penalty does. `grammar` is (vocab, GBNF text): the chain is then
    wrapped in a GrammarSampler, which checks the drawn token against the grammar (grammar.py says why).
    """
    from llama_cpp import _internals

    from modelhost.backends.llama_cpp import grammar as constrained

    sampler = _internals.LlamaSampler()
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

"""Choosing the next token: small logits steps chained per request, then argmax or a seeded draw.

Built the way mlx-lm builds its sampler: each step is a tiny function of (logits, rows) -> logits, `make_sampler`
picks the steps a request needs (a step whose option is off is not in the chain at all), and temperature 0 goes
straight to argmax. Every step works on a batch of rows (classify's padded batch is one call); per-row state
(what a row has generated, its json_schema matcher, the id its thinking budget forces) lives in `RowState`. The
grammar's mask (grammar.py) is the last step, so it has the final word on what may follow.

The thought channel and the thinking budget's rule are the contract's (inference/decoding.py's ThoughtTracker, the
same for every engine): the engine asks the tracker before each draw and puts the id it forces in
`RowState.forced`, which the `force` step makes the only possible token. For the `logprobs` option each chosen
token's log-probability is taken under the raw logits, before any step, temperature or mask (what OpenAI, vLLM and
our llama.cpp backend report), and left in RowState for the engine to hand to the decoder.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modelhost.backends.transformers import grammar
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import TokenLogprob

if TYPE_CHECKING:
    import torch

#: How many recent tokens the repeat penalty looks at: llama.cpp's default `repeat_last_n`, so both engines
#: penalise the same window.
REPEAT_LAST_N = 64


@dataclass(slots=True)
class RowState:
    """One sequence being decoded: what the steps need to know about its past, and what the sampler leaves for the
    engine about the token it chose."""

    context: list[int]  # prompt then generated ids; the repeat penalty reads its tail
    generated: int = 0
    matcher: Any = None  # the row's llguidance matcher when its request has a json_schema (grammar.py)
    forced: int | None = None  # the id this draw must choose (the thinking budget's closing marker), set per draw
    logprob: TokenLogprob | None = None  # of the token accepted last, when the request asked for logprobs

    def accept(self, token: int) -> None:
        """Record the token this row just sampled."""
        self.context.append(token)
        self.generated += 1
        if self.matcher is not None:
            grammar.advance(self.matcher, token)


LogitsStep = Callable[["torch.Tensor", Sequence[RowState]], "torch.Tensor"]


def suppress(ids: Collection[int]) -> LogitsStep:
    """Never choose these ids."""
    chosen = sorted(set(ids))

    def step(logits: torch.Tensor, rows: Sequence[RowState]) -> torch.Tensor:
        valid = [i for i in chosen if i < logits.shape[-1]]
        logits[:, valid] = float("-inf")
        return logits

    return step


def min_tokens(count: int, stop_ids: Collection[int]) -> LogitsStep:
    """Keep a row from ending (end-of-sequence and stop ids) until it has generated `count` tokens."""
    stops = sorted(set(stop_ids))

    def step(logits: torch.Tensor, rows: Sequence[RowState]) -> torch.Tensor:
        valid = [i for i in stops if i < logits.shape[-1]]
        for r, row in enumerate(rows):
            if row.generated < count:
                logits[r, valid] = float("-inf")
        return logits

    return step


def repeat_penalty(penalty: float, last_n: int = REPEAT_LAST_N) -> LogitsStep:
    """Make recently seen tokens less likely: positive logits divided by `penalty`, negative ones multiplied.

    The same rule as llama.cpp and transformers' repetition penalty, over the last `last_n` tokens of context.
    """
    import torch

    def step(logits: torch.Tensor, rows: Sequence[RowState]) -> torch.Tensor:
        for r, row in enumerate(rows):
            recent = sorted(set(row.context[-last_n:]))
            if not recent:
                continue
            index = torch.tensor(recent, device=logits.device)
            seen = logits[r, index]
            logits[r, index] = torch.where(seen > 0, seen / penalty, seen * penalty)
        return logits

    return step


def force(logits: torch.Tensor, rows: Sequence[RowState]) -> torch.Tensor:
    """A row with a `forced` id can choose only that id (finite even if an earlier step masked it: forcing wins,
    as the thinking budget needs), so argmax and any draw both pick it."""
    for r, row in enumerate(rows):
        if row.forced is not None:
            logits[r, :] = float("-inf")
            logits[r, row.forced] = 0.0
    return logits


def grammar_mask(logits: torch.Tensor, rows: Sequence[RowState]) -> torch.Tensor:
    """The rows' json_schema matchers as a logits step (grammar.constrain, looked up per call so a benchmark's
    timing wrapper of it is what runs)."""
    return grammar.constrain(logits, [row.matcher for row in rows])


def apply_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k highest logits of each row."""
    if k <= 0 or k >= logits.shape[-1]:
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def apply_top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose probability reaches `p` (always at least one)."""
    import torch

    if p >= 1.0:
        return logits
    ordered, order = logits.sort(dim=-1, descending=True)
    cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
    # Drop a token when the tokens before it already reach p; the first token always stays.
    drop = (cumulative - ordered.softmax(dim=-1)) >= p
    drop[..., 0] = False
    mask = torch.zeros_like(drop).scatter(-1, order, drop)
    return logits.masked_fill(mask, float("-inf"))


def apply_min_p(logits: torch.Tensor, min_p: float) -> torch.Tensor:
    """Drop tokens whose probability is below `min_p` times the most likely token's."""
    if min_p <= 0.0:
        return logits
    probs = logits.softmax(dim=-1)
    floor = probs.max(dim=-1, keepdim=True).values * min_p
    return logits.masked_fill(probs < floor, float("-inf"))


@dataclass(slots=True)
class Sampler:
    """One request's token chooser: logits steps, then argmax or a seeded draw. Call it once per decode step."""

    steps: list[LogitsStep]
    greedy: bool
    temperature: float
    top_k: int
    top_p: float
    min_p: float
    generator: torch.Generator | None
    logprobs: int | None = None  # the `logprobs` option: record each chosen token's log-probability, and this many
    piece: Callable[[int], bytes] | None = None  # alternatives; `piece` spells them

    def __call__(self, logits: torch.Tensor, rows: Sequence[RowState]) -> list[int]:
        """Choose one token per row from `logits` (rows x vocabulary) and record it in each row's state."""
        import torch

        # A float32 copy: the steps write in place, and the caller may keep the raw logits (classify's logits=True).
        scores = logits.to(torch.float32, copy=True)
        for step in self.steps:
            scores = step(scores, rows)
        if self.greedy:
            chosen = scores.argmax(dim=-1)
        else:
            scores = scores / self.temperature
            scores = apply_min_p(apply_top_p(apply_top_k(scores, self.top_k), self.top_p), self.min_p)
            chosen = torch.multinomial(scores.softmax(dim=-1), 1, generator=self.generator).squeeze(-1)
        ids = [int(t) for t in chosen.tolist()]
        if self.logprobs is not None:
            for r, (row, token) in enumerate(zip(rows, ids, strict=True)):
                row.logprob = self._logprob(logits[r], token)
        for row, token in zip(rows, ids, strict=True):
            row.accept(token)
        return ids

    def _logprob(self, raw: torch.Tensor, token: int) -> TokenLogprob:
        # The model's own distribution: log_softmax of the raw logits row, before any step, temperature or grammar
        # (as OpenAI, vLLM and our llama.cpp backend report it), in float64 as llama.cpp's path computes it.
        import torch

        logp = torch.log_softmax(raw.to(torch.float64), dim=-1)
        top = min(self.logprobs or 0, logp.shape[-1])
        alternatives: tuple[TokenLogprob, ...] = ()
        if top:
            values, order = logp.topk(top, sorted=True)
            alternatives = tuple(
                self._entry(int(i), float(v)) for v, i in zip(values.tolist(), order.tolist(), strict=True)
            )
        chosen = self._entry(token, float(logp[token]))
        return TokenLogprob(chosen.text, chosen.bytes, chosen.logprob, alternatives)

    def _entry(self, token: int, logprob: float) -> TokenLogprob:
        data = self.piece(token) if self.piece is not None else b""
        return TokenLogprob(data.decode("utf-8", "replace"), data, logprob)


def make_sampler(
    opts: GenerateOptions,
    *,
    stop_ids: Collection[int],
    device: torch.device,
    piece: Callable[[int], bytes] | None = None,
) -> Sampler:
    """The sampler for one request. `opts` must be resolved; `stop_ids` are end-of-sequence plus requested stops;
    `piece` spells tokens for the `logprobs` option."""
    import torch

    steps: list[LogitsStep] = []
    if opts.suppress_tokens:
        steps.append(suppress(opts.suppress_tokens))
    if opts.min_tokens > 0:
        steps.append(min_tokens(opts.min_tokens, stop_ids))
    if opts.repeat_penalty is not None and opts.repeat_penalty != 1.0:
        steps.append(repeat_penalty(opts.repeat_penalty))
    if opts.thinking_budget > 0:
        # After the other steps, so that forcing the close token overrides them. The tracker forces nothing on a
        # model without a thought channel: there is nothing to close.
        steps.append(force)
    if opts.json_schema is not None:
        # Last: the mask is the final word on what may follow (the conflicting steps are refused in grammar.check).
        steps.append(grammar_mask)
    greedy = opts.greedy
    generator = None
    if not greedy:
        # CPU generator even for GPU logits would need a copy; torch.multinomial wants one on the logits' device.
        generator = torch.Generator(device=device)
        generator.manual_seed(opts.seed if opts.seed is not None else secrets.randbits(63))
    return Sampler(
        steps=steps,
        greedy=greedy,
        temperature=float(opts.temperature or 1.0),
        top_k=int(opts.top_k or 0),
        top_p=float(opts.top_p if opts.top_p is not None else 1.0),
        min_p=float(opts.min_p or 0.0),
        generator=generator,
        logprobs=opts.logprobs,
        piece=piece,
    )

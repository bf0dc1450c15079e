"""Choosing the next token: small logits steps chained per request, then argmax or a seeded draw.

Built the way mlx-lm builds its sampler: each step is a tiny function of (logits, rows) -> logits, `make_sampler`
picks the steps a request needs (a step whose option is off is not in the chain at all), and temperature 0 goes
straight to argmax. Every step works on a batch of rows, so a single generation and `batch_generate` share the same
code; per-row state (what a row has generated, whether it is inside a thought) lives in `RowState`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from modelhost.inference.options import GenerateOptions

if TYPE_CHECKING:
    import torch

#: How many recent tokens the repeat penalty looks at: llama.cpp's default `repeat_last_n`, so both engines
#: penalise the same window.
REPEAT_LAST_N = 64

#: Thought-channel markers, tried in order; the first pair the tokenizer has as single tokens is the channel.
THOUGHT_MARKERS: tuple[tuple[str, str], ...] = (("<think>", "</think>"), ("<thinking>", "</thinking>"))


@dataclass(frozen=True, slots=True)
class ThoughtTokens:
    """The ids that open and close a model's thought channel."""

    open_id: int
    close_id: int

    @classmethod
    def find(cls, vocab: dict[str, int]) -> ThoughtTokens | None:
        """The first marker pair the vocabulary holds as single tokens, or None (the model cannot think aloud)."""
        for open_text, close_text in THOUGHT_MARKERS:
            if open_text in vocab and close_text in vocab:
                return cls(vocab[open_text], vocab[close_text])
        return None

    def inside_after(self, ids: Sequence[int]) -> bool:
        """True when `ids` (a prompt) leaves the model inside an open thought: its last marker is the opener."""
        for token in reversed(ids):
            if token == self.close_id:
                return False
            if token == self.open_id:
                return True
        return False


@dataclass(slots=True)
class RowState:
    """One sequence being decoded: what the steps need to know about its past."""

    context: list[int]  # prompt then generated ids; the repeat penalty reads its tail
    generated: int = 0
    in_thought: bool = False
    thought_tokens: int = 0
    forcing: bool = False  # the budget step masked this row to the close token on this step
    budget_forced: bool = False  # the close token was forced at least once

    def accept(self, token: int, thought: ThoughtTokens | None) -> None:
        """Record the token this row just sampled."""
        self.context.append(token)
        self.generated += 1
        if self.forcing:
            self.budget_forced = True
            self.forcing = False
        if thought is None:
            return
        if token == thought.open_id:
            self.in_thought = True
        elif token == thought.close_id:
            self.in_thought = False
        elif self.in_thought:
            self.thought_tokens += 1


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


def thinking_budget(budget: int, thought: ThoughtTokens) -> LogitsStep:
    """Once a row has spent `budget` tokens inside its thought, force the close token (one step, then it is out)."""

    def step(logits: torch.Tensor, rows: Sequence[RowState]) -> torch.Tensor:
        for r, row in enumerate(rows):
            if row.in_thought and row.thought_tokens >= budget:
                # Only the close token stays possible (finite even if an earlier step masked it: forcing wins),
                # so argmax and any draw both pick it.
                logits[r, :] = float("-inf")
                logits[r, thought.close_id] = 0.0
                row.forcing = True
        return logits

    return step


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
    thought: ThoughtTokens | None

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
        for row, token in zip(rows, ids, strict=True):
            row.accept(token, self.thought)
        return ids


def make_sampler(
    opts: GenerateOptions,
    *,
    stop_ids: Collection[int],
    thought: ThoughtTokens | None,
    device: torch.device,
) -> Sampler:
    """The sampler for one request. `opts` must be resolved; `stop_ids` are end-of-sequence plus requested stops."""
    import torch

    steps: list[LogitsStep] = []
    if opts.suppress_tokens:
        steps.append(suppress(opts.suppress_tokens))
    if opts.min_tokens > 0:
        steps.append(min_tokens(opts.min_tokens, stop_ids))
    if opts.repeat_penalty is not None and opts.repeat_penalty != 1.0:
        steps.append(repeat_penalty(opts.repeat_penalty))
    if opts.thinking_budget > 0 and thought is not None:
        # Last, so that forcing the close token overrides every other step. A model without a thought channel
        # ignores the budget: there is nothing to close.
        steps.append(thinking_budget(opts.thinking_budget, thought))
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
        thought=thought,
    )

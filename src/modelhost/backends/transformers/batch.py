"""Continuous batching for the transformers backend: the decode steps of running requests go in one forward.

Requests join and leave between steps. A new request's prompt is prefilled alone (a batch of one, exactly as
`generate` does, pixel values and all) and its KV cache is then spliced into the running batch's cache, left-padded
to a common length: every row's last token sits in the same column, so one decode forward of shape (rows, 1) serves
all of them, with an attention mask over the padding and per-row positions that count real tokens only (a padded
row sees the rotary positions it would see alone). Finished and cancelled rows leave the cache at once, and padding
columns that no row needs any more are trimmed.

Prefill is bounded per step by PREFILL_BUDGET prompt tokens (at least one prompt per step, so a long prompt still
starts); unlike the llama_cpp engine, a prompt is never split into chunks here. Each row has its own sampler and
`decode_loop`, so per-request options, stops and UTF-8 behave as in `generate`; so do a request's json_schema
(its row's own grammar matcher), logprobs and thought channel, which live in the row's RowState.

Only plain (full-attention) cache layers can be spliced this way; a model whose cache has sliding-window or other
layer kinds reports `batch_slots() == 1` and the host serves it one request at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from modelhost.backends.transformers.prompts import Prompt, Prompts
from modelhost.backends.transformers.runner import Runner
from modelhost.backends.transformers.sampling import RowState, Sampler, loop_hooks
from modelhost.errors import GenerationError, ModelHostError
from modelhost.inference.generation import LoopOutcome, MetricsClock, TokenFeed, decode_loop
from modelhost.inference.types import Admission, GenerateMetrics, Message, SlotOutput, StepReport, Token

#: Prompt tokens prefilled per step (beyond the first prompt, which always goes): a long prefill stalls every
#: running stream for its whole forward, so a step takes more prompts only while they fit this budget.
PREFILL_BUDGET = 512


@dataclass(eq=False)
class _Row:
    slot: int
    prompt: Prompt
    sampler: Sampler
    state: RowState
    loop: Iterator[Token]
    feed: TokenFeed
    clock: MetricsClock
    outcome: LoopOutcome
    instant: bool = False
    next_token: int | None = None
    length: int = 0  # real tokens in the cache
    extra: dict[str, Any] = field(default_factory=dict)


class TransformersBatchEngine:
    """A BatchEngine over a loaded checkpoint's runner and prompts. Build with `TransformersModel.open_batch()`;
    drive from one thread."""

    def __init__(self, runner: Runner, prompts: Prompts, slots: int, *, prefill_budget: int = PREFILL_BUDGET) -> None:
        if slots < 1:
            raise ValueError("a batch engine needs at least one slot")
        self._runner = runner
        self._prompts = prompts
        self.slots = slots
        self._budget = prefill_budget
        self._waiting: list[_Row] = []  # admitted, prompt not yet prefilled (oldest first)
        self._rows: list[_Row] = []  # in the cache's batch order
        self._cache: Any = None
        self._mask: torch.Tensor | None = None  # (rows, cache length): 0 over each row's left padding
        self._pos: torch.Tensor | None = None  # (rows, 1): position of each row's last cached token
        self._closed = False

    def free_slots(self) -> int:
        return self.slots - len(self._rows) - len(self._waiting)

    def admit(self, prompt: str | None = None, messages: Sequence[Message] = (), **opts: Any) -> Admission:
        runner = self._runner
        self._check_open()
        options = runner.options(opts)
        prompts = self._prompts
        p = prompts.chat(messages, options) if messages else prompts.raw(prompt if prompt is not None else "")
        used = {r.slot for r in (*self._rows, *self._waiting)}
        free = [s for s in range(self.slots) if s not in used]
        if not free:
            raise RuntimeError("no free slot: admit only while free_slots() > 0")
        feed, clock, outcome = TokenFeed(), MetricsClock(), LoopOutcome()
        state = runner.row(p.ids, options)  # its own grammar matcher, logprob and channel: per slot, as generate has
        row = _Row(
            slot=free[0],
            prompt=p,
            sampler=runner.sampler(options),
            state=state,
            loop=decode_loop(
                feed,
                runner.piece,
                options,
                eos_ids=runner.eos_ids,
                clock=clock,
                outcome=outcome,
                **loop_hooks(options, state),
            ),
            feed=feed,
            clock=clock,
            outcome=outcome,
            instant=options.max_tokens == 0,
        )
        self._waiting.append(row)
        return Admission(row.slot, len(p.ids), 0)

    def step(self) -> StepReport:
        self._check_open()
        outputs: list[SlotOutput] = []
        batch_tokens = sampled = prompt_tokens = 0
        try:
            if self._rows:
                batch_tokens = sampled = len(self._rows)
                outputs.extend(self._decode())
            budget = self._budget
            while self._waiting and (budget > 0 or prompt_tokens == 0):
                row = self._waiting.pop(0)
                if row.instant:
                    outputs.append(self._finish(row, None, "length"))
                    continue
                n = len(row.prompt.ids)
                budget -= n
                prompt_tokens += n
                batch_tokens += n
                sampled += 1
                outputs.append(self._prefill(row))
        except Exception as exc:
            error = exc if isinstance(exc, ModelHostError) else GenerationError(f"batch step failed: {exc}")
            outputs.extend(self._finish(r, None, "error", error) for r in [*self._rows])
            self._rows, self._cache, self._mask, self._pos = [], None, None, None
        return StepReport(tuple(outputs), batch_tokens, sampled, prompt_tokens)

    def release(self, slot: int) -> GenerateMetrics | None:
        for row in self._waiting:
            if row.slot == slot:
                self._waiting.remove(row)
                return self._finish(row, None, "cancelled").metrics
        for i, row in enumerate(self._rows):
            if row.slot == slot:
                self._drop([i])
                return self._finish(row, None, "cancelled").metrics
        return None

    def close(self) -> None:
        if self._closed:
            return
        for row in [*self._waiting, *self._rows]:
            self._finish(row, None, "cancelled")
        self._waiting, self._rows, self._cache, self._mask, self._pos = [], [], None, None, None
        self._closed = True

    def __enter__(self) -> TransformersBatchEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- steps ----------------------------------------------------------------------------------------------------

    def _decode(self) -> list[SlotOutput]:
        """One forward of every running row's pending token; then each row draws its next one."""
        runner = self._runner
        assert self._mask is not None and self._pos is not None
        ids = torch.tensor([[r.next_token] for r in self._rows], device=runner.device)
        self._mask = torch.cat([self._mask, self._mask.new_ones((len(self._rows), 1))], dim=1)
        self._pos = self._pos + 1
        logits = runner.forward(ids, cache=self._cache, attention_mask=self._mask, position_ids=self._pos)
        outputs: list[SlotOutput] = []
        done: list[int] = []
        for i, row in enumerate(self._rows):
            row.length += 1
            out = self._advance(row, logits[i : i + 1])
            outputs.append(out)
            if out.finish_reason is not None:
                done.append(i)
        if done:
            self._drop(done)
        return outputs

    def _prefill(self, row: _Row) -> SlotOutput:
        """The row's prompt alone, as `generate` runs it; then its cache joins the batch (unless it already ended)."""
        runner = self._runner
        cache = runner.new_cache()
        ids = torch.tensor([row.prompt.ids], device=runner.device)
        logits = runner.forward(ids, cache=cache, extra=row.prompt.extra)
        row.length = len(row.prompt.ids)
        out = self._advance(row, logits)
        if out.finish_reason is None:
            self._join(row, cache)
        return out

    def _advance(self, row: _Row, logits: torch.Tensor) -> SlotOutput:
        token = self._runner.sample(row.sampler, logits, [row.state])[0]
        if row.clock.prefill_done_at == 0.0:
            row.clock.prefill_done(len(row.prompt.ids))
        row.feed.push(token)
        try:
            visible = next(row.loop)
        except StopIteration:
            return self._finish(row, None, row.outcome.finish_reason)
        if row.outcome.finish_reason != "cancelled":
            return self._finish(row, visible, row.outcome.finish_reason)
        limit = self._runner.context_length
        if limit and row.length + 1 >= limit:
            tail = next(row.loop, None)  # the feed is empty: a length stop that flushes held-back text
            text = visible.text + (tail.text if tail is not None else "")
            return self._finish(row, Token(visible.id, text), "length")
        row.next_token = token
        return SlotOutput(row.slot, visible)

    def _finish(self, row: _Row, token: Token | None, reason: Any, error: BaseException | None = None) -> SlotOutput:
        close = getattr(row.loop, "close", None)
        if close is not None:
            close()
        metrics = self._runner.metrics(row.clock, reason, thinking_budget_forced=row.state.budget_forced)
        return SlotOutput(row.slot, token, reason, metrics, error)

    # --- the shared cache -------------------------------------------------------------------------------------------

    def _join(self, row: _Row, cache: Any) -> None:
        """Splice a batch-of-one cache into the running batch, left-padding whichever side is shorter."""
        device = self._runner.device
        own_mask = torch.ones((1, row.length), dtype=torch.long, device=device)
        own_pos = torch.tensor([[row.length - 1]], device=device)
        if self._cache is None or not self._rows:
            self._cache, self._mask, self._pos, self._rows = cache, own_mask, own_pos, [row]
            return
        assert self._mask is not None and self._pos is not None
        width = max(self._mask.shape[1], row.length)
        self._mask = torch.cat([_pad_left(self._mask, width, 2), _pad_left(own_mask, width, 2)], dim=0)
        self._pos = torch.cat([self._pos, own_pos], dim=0)
        for ours, theirs in zip(self._cache.layers, cache.layers, strict=True):
            ours.keys = torch.cat([_pad_left(ours.keys, width, 3), _pad_left(theirs.keys, width, 3)], dim=0)
            ours.values = torch.cat([_pad_left(ours.values, width, 3), _pad_left(theirs.values, width, 3)], dim=0)
        self._rows.append(row)

    def _drop(self, indices: list[int]) -> None:
        """Remove rows from the batch, then trim padding columns that no remaining row needs."""
        keep = [i for i in range(len(self._rows)) if i not in set(indices)]
        self._rows = [self._rows[i] for i in keep]
        if not keep:
            self._cache, self._mask, self._pos = None, None, None
            return
        assert self._mask is not None and self._pos is not None
        index = torch.tensor(keep, device=self._mask.device)
        self._cache.batch_select_indices(index)
        self._mask, self._pos = self._mask[index], self._pos[index]
        used = self._mask.any(dim=0).nonzero()
        start = int(used[0]) if used.numel() else 0
        if start:
            self._mask = self._mask[:, start:]
            for layer in self._cache.layers:
                layer.keys = layer.keys[:, :, start:, :]
                layer.values = layer.values[:, :, start:, :]

    def _check_open(self) -> None:
        if self._closed:
            raise GenerationError("this batch engine was closed")
        self._runner.check_open()


def _pad_left(t: torch.Tensor, width: int, dims: int) -> torch.Tensor:
    """`t` left-padded with zeros along its sequence axis (axis 1 of a mask, axis 2 of a KV tensor) to `width`."""
    axis = 1 if dims == 2 else 2
    missing = width - t.shape[axis]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[axis] = missing
    return torch.cat([t.new_zeros(shape), t], dim=axis)


def splicable(model: Any) -> bool:
    """True when every layer of the model's DynamicCache is a plain full-attention layer (see the module doc)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    try:
        cache = DynamicCache(config=model.config)
    except Exception:
        return False
    return all(type(layer) is DynamicLayer for layer in cache.layers) and len(cache.layers) > 0

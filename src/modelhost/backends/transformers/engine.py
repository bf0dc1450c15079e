"""The transformers backend's one engine: every generation (the Python API's and the host's) is a request in it.

Requests join and leave between steps (the contract's loop, inference/engine.py). A new request's prompt is
prefilled alone (a batch of one, pixel values and all) and its KV cache is then spliced into the running batch's
cache, left-padded to a common length: every row's last token sits in the same column, so one decode forward of
shape (rows, 1) serves all of them, with an attention mask over the padding and per-row positions that count real
tokens only (a padded row sees the rotary positions it would see alone, so its greedy output is the one it gets
alone). Finished and released rows leave the cache at once, and padding columns no row needs any more are trimmed.

Prefill is bounded per step by PREFILL_BUDGET prompt tokens (at least one prompt per step, so a long prompt still
starts); a prompt is never split into chunks here. Classify requests waiting in a step go together in one
left-padded forward without a cache (one token chosen at each prompt's last position).

What a request shows is decided by the contract's one decoder (inference/decoding.py: stops, UTF-8, max_tokens,
the thought channel and the thinking budget); this engine draws ids: its row's own sampler (runner.py,
sampling.py), its json_schema matcher, its logprobs, and the closing marker when the budget forces it.

Only plain (full-attention) cache layers can be spliced this way; a model whose cache has sliding-window or other
layer kinds gets a one-slot engine (`splicable`), which never splices.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch

from modelhost.backends.transformers.device import reset_peak_memory
from modelhost.backends.transformers.prompts import Prompt, Prompts
from modelhost.backends.transformers.runner import Runner
from modelhost.backends.transformers.sampling import RowState, Sampler
from modelhost.errors import GenerationError, ModelHostError
from modelhost.inference.decoding import SequenceDecoder, ThoughtTracker
from modelhost.inference.engine import Admitted, EngineOutput, EngineRequest, Handle, StepResult
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import FinishReason, GenerateMetrics, Token

#: Prompt tokens prefilled per step (beyond the first prompt, which always goes): a long prefill stalls every
#: running stream for its whole forward, so a step takes more prompts only while they fit this budget.
PREFILL_BUDGET = 512


@dataclass(eq=False)
class _Row:
    """One admitted request."""

    handle: Handle
    prompt: Prompt
    options: GenerateOptions
    sampler: Sampler
    state: RowState  # what its sampler reads and writes: context, grammar matcher, forced id, last logprob
    decoder: SequenceDecoder  # what it shows: stops, UTF-8, channel, thinking budget, metrics clock
    classify: bool = False
    adapter: str | None = None  # the LoRA adapter the row runs with (served_lora.py), None: the base
    next_token: int | None = None  # sampled, not yet evaluated: the input of the next decode forward
    length: int = 0  # real tokens in the cache


class TransformersEngine:
    """An Engine (the contract's) over a loaded checkpoint's runner and prompts; `TransformersModel.engine()` makes
    the model's one. Drive it from one thread."""

    def __init__(self, runner: Runner, prompts: Prompts, slots: int, *, prefill_budget: int = PREFILL_BUDGET) -> None:
        if slots < 1:
            raise ValueError("an engine needs at least one slot")
        self._runner = runner
        self._prompts = prompts
        self.slots = slots
        self._budget = prefill_budget
        self._handles = itertools.count(1)  # never reused (engine.py says why)
        self._waiting: list[_Row] = []  # admitted, prompt not yet evaluated (oldest first)
        self._rows: list[_Row] = []  # decoding, in the cache's batch order
        self._cache: Any = None
        # While some row has left padding: the mask, (rows, cache length), 0 over each row's padding, and the
        # positions, (rows, 1), of each row's last cached token. None while no row has any: the mask would be all
        # ones and the positions the cache's own, so a decode forward goes without them, exactly as a lone
        # sequence's (building a 4-D mask from a mask of ones, and growing it, every step cost a tiny model ~15% of
        # its single-stream speed).
        self._mask: torch.Tensor | None = None
        self._pos: torch.Tensor | None = None
        self._closed = False

    def free_slots(self) -> int:
        """Slots that can take a request now."""
        return self.slots - len(self._rows) - len(self._waiting)

    def admit(self, request: EngineRequest) -> Admitted:
        """Check the request (options, then prompt) and queue it for the next step; see Engine.admit."""
        runner = self._runner
        self._check_open()
        if self.free_slots() <= 0:
            raise RuntimeError("no free slot: admit only while free_slots() > 0")
        options = runner.options(request.options)
        runner.lora.check(request.adapter)
        prompts = self._prompts
        if request.messages:
            prompt = prompts.chat(request.messages, options)
        elif request.prompt_ids is not None:
            prompt = prompts.from_ids(request.prompt_ids)
        else:
            prompt = prompts.raw(request.prompt if request.prompt is not None else "")
        state = runner.row(prompt.ids, options)
        thought = ThoughtTracker.for_request(runner.thought, options, prompt.ids, constrained=state.matcher is not None)
        decoder = SequenceDecoder(options, runner.piece, eos_ids=runner.eos_ids, thought=thought)
        if not self._rows and not self._waiting:
            reset_peak_memory(runner.device)  # the peak a request reports is of the work since the engine was idle
        row = _Row(next(self._handles), prompt, options, runner.sampler(options), state, decoder, request.classify,
                   request.adapter)  # fmt: skip
        self._waiting.append(row)
        return Admitted(row.handle, len(prompt.ids))

    def step(self) -> StepResult:
        """Decode every running row once, then prefill waiting prompts within the budget; see Engine.step."""
        self._check_open()
        outputs: dict[Handle, EngineOutput] = {}
        batch_tokens = sampled = prompt_tokens = 0
        started: list[_Row] = []  # taken off the waiting list in this step, so an engine failure can end them too
        try:
            if self._rows:
                batch_tokens = sampled = len(self._rows)
                for out in self._decode():
                    outputs[out.handle] = out
            classify = [r for r in self._waiting if r.classify]  # max_tokens does not apply: one token, always
            if classify:
                self._waiting = [r for r in self._waiting if r not in classify]
                started.extend(classify)
                n = sum(len(r.prompt.ids) for r in classify)
                prompt_tokens += n
                batch_tokens += n
                sampled += len(classify)
                for out in self._classify(classify):
                    outputs[out.handle] = out
            budget = self._budget - prompt_tokens
            while self._waiting and (budget > 0 or prompt_tokens == 0):
                row = self._waiting.pop(0)
                started.append(row)
                if row.decoder.done:  # max_tokens=0: nothing may be generated, so nothing is evaluated
                    outputs[row.handle] = self._finish(row, (), "length")
                    continue
                n = len(row.prompt.ids)
                budget -= n
                prompt_tokens += n
                batch_tokens += n
                sampled += 1
                out = self._prefill(row)
                outputs[out.handle] = out
        except Exception as exc:
            error = exc if isinstance(exc, ModelHostError) else GenerationError(f"engine step failed: {exc}")
            for r in (*self._rows, *started):
                shown = outputs.get(r.handle)
                if shown is None or shown.finish_reason is None:  # every request the failure cut short ends here
                    outputs[r.handle] = self._finish(r, shown.tokens if shown is not None else (), "error", error)
            self._rows, self._cache, self._mask, self._pos = [], None, None, None
        return StepResult(outputs, batch_tokens, sampled, prompt_tokens)

    def load_adapter(self, name: str, path: str) -> None:
        """Load a peft adapter folder as `name` (AdapterEngine): its rows share every forward with the others'."""
        self._check_open()
        self._runner.lora.load(name, path)

    def unload_adapter(self, name: str) -> None:
        """Free the adapter `name` (AdapterEngine); its caller made sure no live row uses it."""
        self._runner.lora.unload(name)

    def release(self, handle: Handle) -> GenerateMetrics | None:
        """End a live request now ("cancelled"); None when the handle is not live."""
        for row in self._waiting:
            if row.handle == handle:
                self._waiting.remove(row)
                return self._finish(row, (), "cancelled").metrics
        for i, row in enumerate(self._rows):
            if row.handle == handle:
                self._drop([i])
                return self._finish(row, (), "cancelled").metrics
        return None

    def close(self) -> None:
        """End every live request ("cancelled") and drop the batch's cache. Idempotent."""
        if self._closed:
            return
        for row in [*self._waiting, *self._rows]:
            self._finish(row, (), "cancelled")
        self._waiting, self._rows, self._cache, self._mask, self._pos = [], [], None, None, None
        self._closed = True

    # --- steps ----------------------------------------------------------------------------------------------------

    def _decode(self) -> list[EngineOutput]:
        """One forward of every running row's pending token; then each row draws its next one."""
        runner = self._runner
        ids = torch.tensor([[r.next_token] for r in self._rows], device=runner.device)
        adapters = [r.adapter for r in self._rows]
        if self._mask is not None and self._pos is not None:
            self._mask = torch.cat([self._mask, self._mask.new_ones((len(self._rows), 1))], dim=1)
            self._pos = self._pos + 1
            logits = runner.forward(ids, cache=self._cache, attention_mask=self._mask, position_ids=self._pos,
                                    adapters=adapters)  # fmt: skip
        else:
            logits = runner.forward(ids, cache=self._cache, adapters=adapters)
        outputs: list[EngineOutput] = []
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

    def _prefill(self, row: _Row) -> EngineOutput:
        """The row's prompt alone; then its cache joins the batch (unless the request already ended)."""
        runner = self._runner
        cache = runner.new_cache()
        ids = torch.tensor([row.prompt.ids], device=runner.device)
        logits = runner.forward(ids, cache=cache, extra=row.prompt.extra, adapters=[row.adapter])
        row.length = len(row.prompt.ids)
        out = self._advance(row, logits)
        if out.finish_reason is None:
            self._join(row, cache)
        return out

    def _classify(self, rows: list[_Row]) -> list[EngineOutput]:
        """One left-padded forward over the prompts (no cache); each row's own sampler picks its token, returned
        as it is (a stop token included), with the raw logits row when the request asked for them."""
        runner = self._runner
        logits = runner.prefill_padded([r.prompt.ids for r in rows], cache=None, adapters=[r.adapter for r in rows])[0]
        outputs: list[EngineOutput] = []
        for i, row in enumerate(rows):
            token = runner.sample(row.sampler, logits[i : i + 1], [row.state])[0]
            row.decoder.prefill_done(len(row.prompt.ids))
            row.decoder.clock.generated_tokens = 1
            raw = logits[i].float().cpu().numpy() if row.options.logits else None
            text = runner.piece(token).decode("utf-8", errors="replace")
            out = self._finish(row, (Token(token, text),), "length")
            outputs.append(EngineOutput(out.handle, out.tokens, out.finish_reason, out.metrics, logits=raw))
        return outputs

    def _advance(self, row: _Row, logits: torch.Tensor) -> EngineOutput:
        """Draw the row's next id from its logits and run it through the row's decoder."""
        runner = self._runner
        decoder = row.decoder
        row.state.forced = decoder.thought.forced_token()  # the closing marker, once the thinking budget is spent
        try:
            token = runner.sample(row.sampler, logits, [row.state])[0]
        except ModelHostError as exc:  # this request's own failure (its grammar allows no token): the others go on
            return self._finish(row, (), "error", exc)
        if decoder.clock.prefill_done_at == 0.0:
            decoder.prefill_done(len(row.prompt.ids))
        visible = decoder.push(token, row.state.logprob)
        tokens: tuple[Token, ...] = (visible,) if visible is not None else ()
        if decoder.done:
            return self._finish(row, tokens, decoder.finish_reason)
        limit = runner.context_length
        if limit and row.length + 1 >= limit:
            tail = decoder.out_of_room()  # a length stop that flushes held-back text
            return self._finish(row, (*tokens, tail) if tail is not None else tokens, "length")
        row.next_token = token
        return EngineOutput(row.handle, tokens)

    def _finish(
        self, row: _Row, tokens: tuple[Token, ...], reason: FinishReason, error: BaseException | None = None
    ) -> EngineOutput:
        row.decoder.close()
        metrics = self._runner.metrics(row.decoder.clock, reason, thinking_budget_forced=row.decoder.thought.forced)
        return EngineOutput(row.handle, tokens, reason, metrics, error)

    # --- the shared cache -------------------------------------------------------------------------------------------

    def _join(self, row: _Row, cache: Any) -> None:
        """Splice a batch-of-one cache into the running batch, left-padding whichever side is shorter."""
        if self._cache is None or not self._rows:
            self._cache, self._mask, self._pos, self._rows = cache, None, None, [row]
            return
        device = self._runner.device
        mask, pos = self._geometry()
        width = max(mask.shape[1], row.length)
        own_mask = torch.ones((1, row.length), dtype=torch.long, device=device)
        own_pos = torch.tensor([[row.length - 1]], device=device)
        self._mask = torch.cat([_pad_left(mask, width, 2), _pad_left(own_mask, width, 2)], dim=0)
        self._pos = torch.cat([pos, own_pos], dim=0)
        for ours, theirs in zip(self._cache.layers, cache.layers, strict=True):
            ours.keys = torch.cat([_pad_left(ours.keys, width, 3), _pad_left(theirs.keys, width, 3)], dim=0)
            ours.values = torch.cat([_pad_left(ours.values, width, 3), _pad_left(theirs.values, width, 3)], dim=0)
        self._rows.append(row)
        self._unpad_if_even()

    def _drop(self, indices: list[int]) -> None:
        """Remove rows from the batch, then trim padding columns that no remaining row needs."""
        keep = [i for i in range(len(self._rows)) if i not in set(indices)]
        self._rows = [self._rows[i] for i in keep]
        if not keep:
            self._cache, self._mask, self._pos = None, None, None
            return
        index = torch.tensor(keep, device=self._runner.device)
        self._cache.batch_select_indices(index)
        if self._mask is None or self._pos is None:
            return  # no row had padding: none to trim
        self._mask, self._pos = self._mask[index], self._pos[index]
        used = self._mask.any(dim=0).nonzero()
        start = int(used[0]) if used.numel() else 0
        if start:
            self._mask = self._mask[:, start:]
            for layer in self._cache.layers:
                layer.keys = layer.keys[:, :, start:, :]
                layer.values = layer.values[:, :, start:, :]
        self._unpad_if_even()

    def _geometry(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's mask and positions, made (all ones; every row at the cache's length) when it had none."""
        if self._mask is None or self._pos is None:
            width = int(self._cache.get_seq_length())
            rows, device = len(self._rows), self._runner.device
            self._mask = torch.ones((rows, width), dtype=torch.long, device=device)
            self._pos = torch.full((rows, 1), width - 1, dtype=torch.long, device=device)
        return self._mask, self._pos

    def _unpad_if_even(self) -> None:
        """Forget the mask and positions once no row has padding (see __init__)."""
        if self._mask is not None and bool(self._mask.all()):
            self._mask = self._pos = None

    def _check_open(self) -> None:
        self._runner.check_open()  # a closed model says so (ModelClosedError) before a closed engine does
        if self._closed:
            raise GenerationError("this engine was closed")


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

"""Continuous batching for llama.cpp: one context with a slot (a KV sequence) per request, stepped by the host.

The engine owns a second llama.cpp context on the model's weights, with `n_seq_max` = the `parallel` load option.
Each slot is one sequence id in it and holds up to the model's `context_length` tokens (the same limit a request
has on the one-at-a-time path; the context is `parallel x context_length` cells in all, allocated when the host
opens the engine, not at load). A step is one `llama_decode` of one batch that carries:

- one token for every decoding slot (the token it sampled in the previous step: as on the one-at-a-time path, a
  sampled token is evaluated only when the next one is needed, so a finished request never pays for its last);
- then one chunk (at most `PREFILL_CHUNK` tokens) of the oldest prompt still in prefill, so a long prompt that
  arrives mid-stream delays the running streams by one bounded step at a time, not by its whole prefill.

Each slot has its own sampler chain (TokenChooser, the same one the one-at-a-time path uses) and its own
`SequenceDecoder` (inference.decoding), so stops, `max_tokens`, `min_tokens`, the thinking budget and UTF-8
behave exactly as there.

Prefix reuse per slot: a slot remembers the tokens its KV sequence holds, and a new request goes to the free slot
whose cache shares the longest prefix with its prompt (ties: the least recently used slot, so a recent
conversation's cache survives longest), as llama-server does. Only the rest of the prompt is evaluated.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from modelhost.errors import GenerationError, ModelHostError, ModelLoadError
from modelhost.inference.decoding import SequenceDecoder
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Admission, GenerateMetrics, Message, SlotOutput, StepReport, Token

if TYPE_CHECKING:
    from modelhost.backends.llama_cpp.model import LlamaCppModel, TokenChooser

#: Prompt tokens evaluated per step (one prompt's chunk). A step's cost grows with its tokens, and every decoding
#: slot waits for the whole step: 256 tokens of SmolLM2-135M on 2 cores is ~0.15 s, one stall of a few tokens' time
#: for the running streams, while a chat prompt of a few dozen tokens is still prefilled in one step.
PREFILL_CHUNK = 256

#: Whether the slots share one KV buffer (`kv_unified`): no, each slot gets its own. Measured on SmolLM2-135M Q4_1,
#: 2 threads, 64 greedy tokens per stream, 4 alternating rounds on a shared 2-core machine (engine only): separate
#: buffers decode 84.7 tokens/s for one stream and 109.8 aggregate for four, a unified one 78.8 and 104.0. Both
#: give greedy output equal to the one-at-a-time path once flash attention is on (8 of 8 prompts; without flash
#: attention a unified buffer diverged on 7 of 8 after 11-37 tokens, because each sequence's attention then sums
#: over a span padded to every slot's cells). Requests here do not share prefixes across slots (each slot reuses
#: its own), so a unified buffer buys nothing, and separate ones also keep every slot's context exactly its own.
KV_UNIFIED = False


@dataclass(eq=False)
class _Slot:
    """One sequence of the batch context and the request it serves (when busy)."""

    index: int
    cached: list[int] = field(default_factory=list)  # the tokens whose KV this sequence holds, from position 0
    last_used: int = 0
    busy: bool = False
    admitted: int = 0  # admission order: prefill is served oldest first
    pending: list[int] = field(default_factory=list)  # prompt tokens still to evaluate
    next_token: int | None = None  # sampled, evaluated at the next step
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    chooser: TokenChooser | None = None
    decoder: SequenceDecoder | None = None  # what the request shows: stops, UTF-8, channel, metrics


class LlamaBatchEngine:
    """A BatchEngine over a LlamaCppModel's weights. Build with `model.open_batch()`; drive from one thread."""

    def __init__(
        self,
        model: LlamaCppModel,
        slots: int,
        *,
        kv_unified: bool = KV_UNIFIED,
        prefill_chunk: int = PREFILL_CHUNK,
    ) -> None:
        import llama_cpp
        from llama_cpp import _internals

        from modelhost.backends.llama_cpp.backend import BATCH_SIZE
        from modelhost.backends.llama_cpp.model import apply_adapter

        if slots < 1 or prefill_chunk < 2:
            raise ValueError("a batch engine needs at least one slot and a prefill chunk of at least 2 tokens")
        self._lib = llama_cpp
        self._model = model
        llm = model._llm
        self.slots = slots
        self.slot_context = model.context_length
        self._chunk = prefill_chunk
        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
        params.n_seq_max = slots
        params.kv_unified = kv_unified
        # Without a unified buffer llama.cpp gives each sequence n_ctx / n_seq_max cells.
        params.n_ctx = self.slot_context * slots
        n_batch = max(BATCH_SIZE, slots + prefill_chunk)
        params.n_batch = params.n_ubatch = n_batch
        try:
            self._ctx: Any = _internals.LlamaContext(model=llm._model, params=params, verbose=False)
        except ValueError as exc:
            raise ModelLoadError(f"llama.cpp could not create a context of {slots} x {self.slot_context}") from exc
        per_seq = int(llama_cpp.llama_n_ctx_seq(self._ctx.ctx))
        if per_seq < self.slot_context:
            self._ctx.close()
            raise ModelLoadError(f"llama.cpp gave each slot {per_seq} cells, fewer than {self.slot_context}")
        if not apply_adapter(self._ctx, llm):  # adapters are per context: without it the slots would run the base
            self._ctx.close()
            raise ModelLoadError(f"llama.cpp could not apply the LoRA adapter {model.adapter!r} to the batch context")
        self._n_batch = n_batch
        self._batch: Any = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._mem = llama_cpp.llama_get_memory(self._ctx.ctx)
        self._slots = [_Slot(i) for i in range(slots)]
        self._clock = itertools.count(1)

    # --- the BatchEngine contract ---------------------------------------------------------------------------------

    def free_slots(self) -> int:
        """Slots that can take a request now."""
        return sum(1 for s in self._slots if not s.busy)

    def admit(self, prompt: str | None = None, messages: Sequence[Message] = (), **opts: Any) -> Admission:
        """Take a request into the free slot whose cache shares the longest prefix with its prompt."""
        model = self._model
        model._check_open()
        self._check_open()
        options = model._options(opts)
        tokens = model._chat_tokens(messages, options) if messages else model._encode_prompt(prompt or "")
        free = [s for s in self._slots if not s.busy]
        if not free:
            raise RuntimeError("no free slot: admit only while free_slots() > 0")
        slot = max(free, key=lambda s: (_common_prefix(s.cached, tokens), -s.last_used))
        # The last prompt token is always evaluated: its logits are what the first token is drawn from.
        keep = 0 if model._recurrent else min(_common_prefix(slot.cached, tokens), len(tokens) - 1)
        if not self._lib.llama_memory_seq_rm(self._mem, slot.index, keep, -1):
            self._lib.llama_memory_seq_rm(self._mem, slot.index, -1, -1)
            keep = 0
        self._occupy(slot, options, tokens, cached=tokens[:keep], pending=tokens[keep:], prompt_tokens=len(tokens))
        return Admission(slot.index, len(tokens), keep)

    def _occupy(
        self, slot: _Slot, options: GenerateOptions, request: Any, *, cached: list[int], pending: list[int],
        prompt_tokens: int,
    ) -> None:  # fmt: skip
        """Give `slot` to a request: its sampler (`request` is what the model's chooser takes: the prompt's ids, or a
        vision prompt) and its decoder (inference.decoding, as the one-at-a-time path has). `cached` is the prefix
        whose KV the slot keeps; `pending` the prompt tokens still to evaluate."""
        model = self._model
        chooser = model._chooser(options, request)
        slot.busy, slot.admitted = True, next(self._clock)
        slot.cached, slot.pending, slot.next_token = cached, pending, None
        slot.prompt_tokens, slot.cached_prompt_tokens = prompt_tokens, len(cached)
        slot.chooser = chooser
        slot.decoder = SequenceDecoder(options, model._piece, eos_ids=model._eog, thought=chooser.thought)

    def step(self) -> StepReport:
        """A token for each decoding slot (one llama_decode), then one prompt chunk of up to PREFILL_CHUNK tokens."""
        self._check_open()
        outputs: list[SlotOutput] = []
        decoding: list[_Slot] = []
        for slot in self._slots:
            if not slot.busy:
                continue
            assert slot.decoder is not None
            if slot.decoder.done:  # max_tokens 0: finished without compute
                outputs.append(self._finish(slot, None, "length"))
            elif slot.next_token is not None:
                if len(slot.cached) >= self.slot_context:
                    outputs.append(self._end_of_context(slot))
                else:
                    decoding.append(slot)
        batch_tokens = sampled = prompt_tokens = 0
        if decoding:
            for i, slot in enumerate(decoding):
                assert slot.next_token is not None
                self._put(i, slot.next_token, len(slot.cached), slot.index, True)
                slot.cached.append(slot.next_token)
                slot.next_token = None
            if not self._decode(len(decoding), outputs):
                return StepReport(tuple(outputs), len(decoding))
            outputs.extend(self._advance(slot, i) for i, slot in enumerate(decoding))
            batch_tokens = sampled = len(decoding)
        # One prompt chunk per step, the oldest admission's: a step's outputs reach the host only when it ends, so
        # prefilling four new prompts in one step would hold the first one's first token back until the fourth
        # was evaluated. One at a time, the first prompt starts streaming after its own prefill, the next joins
        # one step later (4 clients arriving together: mean time to first token ~2.5 prefills instead of 4).
        pending = sorted((s for s in self._slots if s.busy and s.pending), key=lambda s: s.admitted)
        for slot in pending[:1]:
            take = _chunk_size(len(slot.pending), self._chunk)
            for i in range(take):
                self._put(i, slot.pending[i], len(slot.cached), slot.index, False)
                slot.cached.append(slot.pending[i])
            del slot.pending[:take]
            last = not slot.pending
            self._batch.logits[take - 1] = last
            prompt_tokens += take
            batch_tokens += take
            if not self._decode(take, outputs):
                break
            if last:
                outputs.append(self._advance(slot, take - 1))
                sampled += 1
        return StepReport(tuple(outputs), batch_tokens, sampled, prompt_tokens)

    def _decode(self, n: int, outputs: list[SlotOutput]) -> bool:
        # One llama_decode per kind of work: every decoding slot's token together, then each prompt chunk alone.
        # Why not one call: llama.cpp splits a batch whose sequences bring different token counts (kv_unified off)
        # so that each sequence's share can end up evaluated one token at a time, and its one-token path rounds
        # differently from its many-token path (measured: 0.7 apart in SmolLM2's logits). Evaluating each chunk
        # exactly as the one-at-a-time path does keeps greedy outputs equal to it.
        self._batch.n_tokens = n
        rc = self._lib.llama_decode(self._ctx.ctx, self._batch)
        if rc != 0:
            outputs.extend(self._fail_all(GenerationError(f"llama_decode failed with status {rc}")))
            return False
        return True

    def release(self, slot: int) -> GenerateMetrics | None:
        """Free a slot (its request was cancelled); returns that request's metrics, or None if it was free."""
        s = self._slots[slot]
        if not s.busy:
            return None
        return self._finish(s, None, "cancelled").metrics

    def close(self) -> None:
        """Release every slot and free the context and the batch. Idempotent."""
        if self._ctx is None:
            return
        for slot in self._slots:
            if slot.busy:
                self._finish(slot, None, "cancelled")
        self._lib.llama_batch_free(self._batch)
        ctx, self._ctx = self._ctx, None
        ctx.close()

    def __enter__(self) -> LlamaBatchEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- per slot -------------------------------------------------------------------------------------------------

    def _put(self, i: int, token: int, pos: int, seq: int, logits: bool) -> None:
        b = self._batch
        b.token[i] = token
        b.pos[i] = pos
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = seq
        b.logits[i] = logits

    def _advance(self, slot: _Slot, row: int) -> SlotOutput:
        """Draw the slot's next token from its logits row and run it through the slot's decoder."""
        chooser, decoder = slot.chooser, slot.decoder
        assert chooser is not None and decoder is not None
        try:
            token = chooser.choose(self._ctx, row)
            if chooser.produced == 1:
                decoder.prefill_done(slot.prompt_tokens, slot.cached_prompt_tokens)
            visible = decoder.push(token, chooser.logprob)
        except Exception as exc:
            # A deliberate error keeps its code (the grammar's SchemaError is the request's fault: a 400, not a 500).
            error = (
                exc if isinstance(exc, ModelHostError) else GenerationError(f"llama.cpp failed while generating: {exc}")
            )
            return self._finish(slot, None, "error", error)
        if decoder.done:
            return self._finish(slot, visible, decoder.finish_reason)
        slot.next_token = token
        return SlotOutput(slot.index, visible)

    def _end_of_context(self, slot: _Slot) -> SlotOutput:
        # The slot's context is full: the decoder ends the request with "length" and flushes its held-back text.
        assert slot.decoder is not None
        return self._finish(slot, slot.decoder.out_of_room(), "length")

    def _finish(self, slot: _Slot, token: Token | None, reason: Any, error: BaseException | None = None) -> SlotOutput:
        metrics = None
        if slot.decoder is not None:
            slot.decoder.close()
            metrics = slot.decoder.metrics(reason)
        if slot.chooser is not None:
            slot.chooser.close()
        slot.busy, slot.decoder, slot.chooser = False, None, None
        slot.pending, slot.next_token = [], None
        slot.last_used = next(self._clock)
        return SlotOutput(slot.index, token, reason, metrics, error)

    def _fail_all(self, error: GenerationError) -> list[SlotOutput]:
        # The KV cache may hold half a step: forget all of it rather than trust it, and fail every request.
        self._lib.llama_memory_clear(self._mem, True)
        outputs = [self._finish(s, None, "error", error) for s in self._slots if s.busy]
        for slot in self._slots:
            slot.cached = []
        return outputs

    def _check_open(self) -> None:
        # The context also goes when its model is closed (llama_cpp frees contexts before their model).
        if self._ctx is None or self._ctx.ctx is None:
            raise GenerationError("this batch engine (or its model) was closed")


def _chunk_size(pending: int, budget: int) -> int:
    """Prompt tokens to evaluate now: up to `budget`, never leaving exactly one behind.

    A prompt's last token alone would take llama.cpp's one-token path, which rounds differently from evaluating it
    with the tokens before it (as the one-at-a-time path does), and greedy output would drift from it.
    """
    take = min(pending, budget)
    return take - 1 if pending - take == 1 else take


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n

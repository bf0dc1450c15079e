"""The llama.cpp engine: one context of `parallel` slots (one slot when `parallel` is 1), stepped by its caller.

Every request of a loaded GGUF runs here, whoever asks: the host drives the engine directly, and the model's
Python API (`generate`, `chat`, `classify`, `batch_generate`) runs over the same engine (inference/over_engine.py).
So a model holds one context, one KV cache per slot, and there is one decoder: no second path to drift from.

The context has `n_seq_max` = slots. Each slot is one sequence id in it and holds up to `context_length` tokens;
the context is `slots x context_length` cells in all, allocated at load. A step is:

- one `llama_decode` of one token for every decoding slot (the token it sampled in the previous step: a sampled
  token is evaluated only when the next one is needed, so a finished request never pays for its last);
- then the prompts still in prefill, oldest first, a chunk each, up to the step's prompt-token budget (at most
  `PREFILL_CHUNK` tokens while other slots decode, so a long prompt arriving mid-stream delays the running streams
  by one bounded step at a time; a whole batch when nothing else decodes, so a lone request prefills as fast as
  one big call, and prompts arriving together start together), or the oldest prompt's images (mtmd evaluates them
  into the slot's sequence in one go).

LoRA adapters served by name (AdapterEngine, lora.py) share the slots: a step makes one decode call per adapter
among its decoding slots, and a slot's cached prefix is reused only by a request of the adapter it was evaluated
with. A new request goes where its adapter's slots stay one run of neighbouring sequence ids (see `_fit`): llama.cpp
evaluates a call's rows in one pass over the weights only when their sequence ids follow each other, so a group
split by other groups' slots costs one pass per piece (measured: docs/adapters.md).

Each slot has its own TokenChooser (sampling.py) and its own SequenceDecoder (inference.decoding), so stops,
`max_tokens`, `min_tokens`, the thinking budget and UTF-8 are decided per request exactly once.

Prefix reuse per slot: a slot remembers the tokens its KV sequence holds, and a new request goes to the free slot
whose cache shares the longest prefix with its prompt (ties: the least recently used slot, so a recent
conversation's cache survives longest), as llama-server does. Only the rest of the prompt is evaluated; the last
prompt token always is (its logits are what the first token is drawn from). An image prompt reuses the text before
its first image; its images and what follows them are evaluated afresh (the cache records image positions as -1,
so no later prompt matches into them).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from modelhost.backends.llama_cpp import lowlevel
from modelhost.backends.llama_cpp.lora import ContextAdapters
from modelhost.backends.llama_cpp.prompts import Prompter
from modelhost.backends.llama_cpp.sampling import TokenChooser, build_sampler
from modelhost.backends.llama_cpp.vision import VisionPrompt, cache_record
from modelhost.errors import GenerationError, ModelHostError, ModelLoadError
from modelhost.inference.decoding import SequenceDecoder, ThoughtTracker
from modelhost.inference.engine import Admitted, EngineOutput, EngineRequest, Handle, StepResult
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import FinishReason, GenerateMetrics, Token, has_images

#: Tokens per llama_decode call during a lone prefill: llama-cpp-python's default, large enough to keep the matrix
#: kernels busy and small enough that the batch buffers stay modest.
BATCH_SIZE = 512

#: Prompt tokens evaluated per step while other slots decode (one prompt's chunk). A step's cost grows with its
#: tokens, and every decoding slot waits for the whole step: 256 tokens of SmolLM2-135M on 2 cores is ~0.15 s, one
#: stall of a few tokens' time for the running streams, while a chat prompt of a few dozen tokens is still
#: prefilled in one step.
PREFILL_CHUNK = 256

#: A cached prefix at least this long wins a request its slot even where the slot splits its adapter's run (`_fit`).
#: Below it, evaluating the prefix again costs less than the run split costs: a split makes each step one more pass
#: over the weights (15-18 ms CPU a step for SmolLM2-135M Q4_1 on 2 cores: bench/adapter_options.py, base in two
#: calls against one) for every token of the answer, while a prefix below a prefill chunk is evaluated again in one
#: step of that chunk.
KEEP_PREFIX_TOKENS = 256

#: Whether the slots share one KV buffer (`kv_unified`): no, each slot gets its own. Measured on SmolLM2-135M Q4_1,
#: 2 threads, 64 greedy tokens per stream, 4 alternating rounds on a shared 2-core machine (engine only): separate
#: buffers decode 84.7 tokens/s for one stream and 109.8 aggregate for four, a unified one 78.8 and 104.0. Both
#: give greedy output equal to one request alone once flash attention is on (8 of 8 prompts; without flash
#: attention a unified buffer diverged on 7 of 8 after 11-37 tokens, because each sequence's attention then sums
#: over a span padded to every slot's cells). Requests here do not share prefixes across slots (each slot reuses
#: its own), so a unified buffer buys nothing, and separate ones also keep every slot's context exactly its own.
KV_UNIFIED = False


_FREE = object()  # a neighbour of a slot that holds no live request (or none at all: the ends)


@dataclass(eq=False)
class _Slot:
    """One sequence of the context and the request it serves (when `handle` is set)."""

    index: int
    cached: list[int] = field(default_factory=list)  # the tokens whose KV this sequence holds, from position 0
    cached_adapter: str | None = None  # the adapter `cached` was evaluated with: a prefix is reused under it only
    last_used: int = 0
    handle: Handle | None = None
    admitted: int = 0  # admission order: prefill is served oldest first
    pending: list[int] = field(default_factory=list)  # prompt tokens still to evaluate as text
    vision: VisionPrompt | None = None  # an image prompt whose chunks are still to evaluate
    next_token: int | None = None  # sampled, evaluated at the next step
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    history: Sequence[int] = ()
    options: GenerateOptions | None = None
    classify: bool = False
    adapter: str | None = None  # the named LoRA adapter the request runs with (lora.py), None: the base
    chooser: TokenChooser | None = None
    decoder: SequenceDecoder | None = None


class LlamaEngine:
    """The Engine of a loaded GGUF (see the module doc). Made by the model at load; drive it from one thread."""

    def __init__(
        self,
        llm: Any,
        prompter: Prompter,
        *,
        slots: int,
        recurrent: bool = False,
        prefill_chunk: int = PREFILL_CHUNK,
        kv_unified: bool = KV_UNIFIED,
        step_prompts: int | None = None,
    ) -> None:
        import llama_cpp

        if slots < 1 or prefill_chunk < 2:
            raise ValueError("an engine needs at least one slot and a prefill chunk of at least 2 tokens")
        self._lib = llama_cpp
        self._llm = llm
        self.prompter = prompter
        self.slots = slots
        #: Tokens each slot holds: the model's context_length (a request's prompt plus its answer).
        self.slot_context = prompter.context_length
        self._recurrent = recurrent
        self._chunk = prefill_chunk
        #: Prompts one step may prefill, oldest first, within its prompt-token budget (None: as many as fit; 1: the
        #: one-prompt-a-step engine issue 36 measured against).
        self._step_prompts = slots if step_prompts is None else max(1, step_prompts)
        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
        params.n_seq_max = slots
        params.kv_unified = kv_unified
        # Without a unified buffer llama.cpp gives each sequence n_ctx / n_seq_max cells.
        params.n_ctx = self.slot_context * slots
        n_batch = max(min(BATCH_SIZE, params.n_ctx), slots + prefill_chunk)
        params.n_batch = params.n_ubatch = n_batch
        try:
            self._ctx: Any = lowlevel.new_context(llm, params)
        except ValueError as exc:
            raise ModelLoadError(f"llama.cpp could not create a context of {slots} x {self.slot_context}") from exc
        per_seq = int(llama_cpp.llama_n_ctx_seq(self._ctx.ctx))
        if per_seq < self.slot_context:
            self._ctx.close()
            raise ModelLoadError(f"llama.cpp gave each slot {per_seq} cells, fewer than {self.slot_context}")
        # Adapters are per context: the load-time one must be applied to this context too, or the slots would run
        # the base; named ones are switched in per decode call (lora.py).
        self._lora = ContextAdapters(llama_cpp, llm, self._ctx)
        try:
            self._lora.use(None)
        except GenerationError as exc:
            self._ctx.close()
            raise ModelLoadError("llama.cpp could not apply the LoRA adapter to the engine's context") from exc
        self._n_batch = n_batch
        self._batch: Any = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._mem = llama_cpp.llama_get_memory(self._ctx.ctx)
        self._slots = [_Slot(i) for i in range(slots)]
        self._clock = itertools.count(1)
        self._handles = itertools.count(1)

    # --- the Engine contract --------------------------------------------------------------------------------------

    def free_slots(self) -> int:
        """Slots that can take a request now."""
        return sum(1 for s in self._slots if s.handle is None)

    def admit(self, request: EngineRequest) -> Admitted:
        """Check the request and take it into the free slot whose cache shares the longest prefix with its prompt."""
        self._check_open()
        prompter = self.prompter
        options = prompter.options(request.options)
        self._lora.check(request.adapter)
        prompt = prompter.prompt(request, options)
        free = [s for s in self._slots if s.handle is None]
        if not free:
            if isinstance(prompt, VisionPrompt):
                prompt.chunks.free()
            raise RuntimeError("no free slot: admit only while free_slots() > 0")
        vision = prompt if isinstance(prompt, VisionPrompt) else None
        text = vision.head if vision is not None else prompt

        # A prefix evaluated under another adapter holds other keys and values: reusable only under the same one.
        def reusable(s: _Slot) -> int:
            return _common_prefix(s.cached, text) if s.cached_adapter == request.adapter else 0

        def preferred(s: _Slot) -> tuple[int, int, int, int, int]:
            cached = reusable(s)
            runs, distance = self._fit(s, request.adapter)
            return (cached if cached >= KEEP_PREFIX_TOKENS else 0, -runs, distance, cached, -s.last_used)

        slot = max(free, key=preferred)
        keep = 0 if self._recurrent else reusable(slot)
        if vision is None:
            keep = min(keep, len(text) - 1)  # the last prompt token is always evaluated: its logits come next
        if not self._lib.llama_memory_seq_rm(self._mem, slot.index, keep, -1):
            self._lib.llama_memory_seq_rm(self._mem, slot.index, -1, -1)
            keep = 0
        total = vision.total_tokens if vision is not None else len(text)
        handle = next(self._handles)
        slot.handle, slot.admitted = handle, next(self._clock)
        slot.cached, slot.pending, slot.vision, slot.next_token = slot.cached[:keep], list(text[keep:]), vision, None
        slot.prompt_tokens, slot.cached_prompt_tokens = total, keep
        slot.history, slot.options, slot.classify = prompt, options, request.classify
        slot.adapter = slot.cached_adapter = request.adapter
        slot.chooser = None if request.classify else prompter.chooser(options, prompt)
        slot.decoder = SequenceDecoder(
            options,
            prompter.vocab.piece,
            eos_ids=prompter.vocab.eog,
            thought=slot.chooser.thought if slot.chooser is not None else ThoughtTracker(None),
        )
        return Admitted(handle, total, keep)

    def prepare(self, request: EngineRequest) -> EngineRequest:
        """The request with its options checked and resolved and its prompt rendered and tokenized (PreparingEngine):
        llama.cpp's tokenizer reads only the vocabulary, so this is safe on another thread while the engine steps.
        Image prompts (mtmd tokenizes them with their bitmaps) and classify requests keep their prompt."""
        prompter = self.prompter
        options = prompter.options(request.options)
        if request.prompt_ids is not None or request.classify or has_images(request.messages):
            return replace(request, options=options)
        prompt = prompter.prompt(request, options)
        return replace(request, prompt=None, messages=(), prompt_ids=tuple(prompt), options=options)

    def step(self) -> StepResult:
        """A token for each decoding slot (one llama_decode), then prompts' chunks up to the budget (or images)."""
        self._check_open()
        outputs: dict[Handle, EngineOutput] = {}
        decoding: list[_Slot] = []
        for slot in self._slots:
            if slot.handle is None:
                continue
            assert slot.decoder is not None
            if slot.decoder.done and not slot.classify:  # max_tokens 0: finished without compute
                self._put_output(outputs, self._finish(slot, None, "length"))
            elif slot.next_token is not None:
                if len(slot.cached) >= self.slot_context:
                    self._put_output(outputs, self._finish(slot, slot.decoder.out_of_room(), "length"))
                else:
                    decoding.append(slot)
        batch_tokens = sampled = prompt_tokens = 0
        # One llama_decode per adapter among the decoding slots (lora.py says why), the adapter the context holds
        # now first: one switch a step fewer (each switch makes llama.cpp reserve its compute graphs again).
        for group in _by_adapter(decoding, first=self._lora.active):
            if not self._use_adapter(group[0].adapter, outputs):
                return StepResult(outputs, batch_tokens)
            for i, slot in enumerate(group):
                assert slot.next_token is not None
                self._put(i, slot.next_token, len(slot.cached), slot.index, True)
                slot.cached.append(slot.next_token)
                slot.next_token = None
            if not self._decode(len(group), outputs):
                return StepResult(outputs, batch_tokens + len(group))
            for i, slot in enumerate(group):
                self._put_output(outputs, self._advance(slot, i))
            batch_tokens += len(group)
            sampled += len(group)
        # Prompts' prefill, oldest admission first, up to the step's prompt-token budget (a whole batch when no slot
        # decodes, PREFILL_CHUNK while some do, as one prompt's chunk was before): the first prompt always gets its
        # chunk, a later one joins only with its whole chunk (never a chunk cut to fit), so each prompt is chunked by
        # the rule it always was and outputs do not change; each chunk is still its own llama_decode (see _decode).
        # Several prompts a step hold the first one's first token back until the step ends, but save a decode step
        # per prompt for the running streams, as llama-server's one batch does (bench/step_prefill.py, SmolLM2-135M,
        # 2 shared cores at load 5-6, 4 alternating rounds, against one prompt a step): 16 streams TTFT p95 2.54 s
        # against 4.35, aggregate 60.5 tokens/s against 55.6, mean TTFT 2.54 s against 2.19; 4 streams p95 0.74 s
        # against 1.01, mean 0.74 against 0.60 (an earlier run: 0.55 against 0.68), aggregate 42.4 against 44.5
        # (issue 36).
        waiting = sorted(
            (s for s in self._slots if s.handle is not None and (s.pending or s.vision is not None)),
            key=lambda s: s.admitted,
        )
        budget = self._n_batch if not decoding else self._chunk
        for n, slot in enumerate(waiting):
            if n >= self._step_prompts or slot.handle is None:  # a failed decode ended every request
                break
            if n > 0 and (not slot.pending or prompt_tokens + self._take(slot, bool(decoding)) > budget):
                break  # a later prompt joins only with its whole chunk, and never with images
            handle = slot.handle
            if not self._use_adapter(slot.adapter, outputs):
                return StepResult(outputs, batch_tokens, sampled, prompt_tokens)
            evaluated = self._prefill(slot, outputs, alone=not decoding)
            prompt_tokens += evaluated
            batch_tokens += evaluated
            first = outputs.get(handle)
            sampled += 1 if first is not None and first.error is None and (first.tokens or first.finish_reason) else 0
        return StepResult(outputs, batch_tokens, sampled, prompt_tokens)

    def load_adapter(self, name: str, path: str) -> None:
        """Load a LoRA GGUF as `name` (AdapterEngine): loaded once on the model, applied per decode call (lora.py)."""
        self._check_open()
        self._lora.load(name, path)

    def unload_adapter(self, name: str) -> None:
        """Free the adapter `name` (AdapterEngine); the slots' prefixes evaluated under it are forgotten."""
        if self.closed:
            return
        self._lora.unload(name)
        for slot in self._slots:
            if slot.cached_adapter == name and slot.handle is None:
                slot.cached, slot.cached_adapter = [], None

    def release(self, handle: Handle) -> GenerateMetrics | None:
        """End a live request ("cancelled") and return its metrics; None when the handle is not live."""
        for slot in self._slots:
            if slot.handle == handle:
                return self._finish(slot, None, "cancelled").metrics
        return None

    def close(self) -> None:
        """End every live request and free the context and the batch. Idempotent."""
        if self._ctx is None:
            return
        for slot in self._slots:
            if slot.handle is not None:
                self._finish(slot, None, "cancelled")
        self._lib.llama_batch_free(self._batch)
        ctx, self._ctx = self._ctx, None
        ctx.close()
        self._lora.close()  # after the context: nothing applies them any more

    @property
    def closed(self) -> bool:
        """True once the engine (or the model it runs on) was closed."""
        return self._ctx is None or self._ctx.ctx is None

    def cache_usage(self) -> float:
        """The fraction of the context's KV cells that live requests hold (CacheReportingEngine): each slot owns
        `slot_context` cells, and a slot holds as many as its sequence has positions. A prefix an idle slot keeps
        for the next request counts as free (it is overwritten as soon as a request needs the cells). Reads Python
        lists only: no call into llama.cpp."""
        held = sum(len(s.cached) for s in self._slots if s.handle is not None)
        return min(1.0, held / (self.slot_context * self.slots))

    def cached_tokens(self) -> tuple[tuple[int, ...], ...]:
        """What each slot's KV sequence holds, from position 0 (-1 for an image position): the prefix the next
        request there may reuse. For operators and tests; reading it changes nothing."""
        return tuple(tuple(s.cached) for s in self._slots)

    def slot_adapters(self) -> tuple[str | None, ...]:
        """The adapter each slot's live request runs with (None: the base, or no request): where the engine placed
        each adapter's requests. For operators and tests; reading it changes nothing."""
        return tuple(s.adapter for s in self._slots)

    # --- per slot -------------------------------------------------------------------------------------------------

    def _fit(self, slot: _Slot, adapter: str | None) -> tuple[int, int]:
        """How a request of `adapter` in the free `slot` fits the live ones: the runs of neighbouring same-adapter
        slots it adds (-1: it joins two, 0: it extends one, 1: it starts one, 2: it also splits another adapter's
        run in two), and its distance to the nearest live slot of another adapter (a new run starts far from the
        others, leaving its own room to grow).

        Why: llama.cpp (its KV cache with a buffer per sequence) evaluates a decode call's rows in one pass only
        while their sequence ids follow each other, and starts a new pass at each gap. A step makes one call per
        adapter, so an adapter whose slots are scattered pays one pass over the model's weights per piece: two
        adapters alternating over 8 slots cost 8 one-row passes a step instead of two four-row ones (0.35-0.40x the
        base's tokens per CPU second against 0.59-0.66x, bench/adapter_options.py)."""
        live = {s.index: s.adapter for s in self._slots if s.handle is not None}
        left, right = live.get(slot.index - 1, _FREE), live.get(slot.index + 1, _FREE)
        joined = (left == adapter) + (right == adapter)
        split = left is not _FREE and left == right and left != adapter
        others = [abs(i - slot.index) for i, a in live.items() if a != adapter]
        return 1 - joined + int(split), min(others, default=self.slots)

    def _prefill(self, slot: _Slot, outputs: dict[Handle, EngineOutput], *, alone: bool) -> int:
        """Evaluate the next chunk of `slot`'s prompt (text, or its images once the text before them is in);
        the slot's first token is drawn when the prompt is complete. Returns the prompt tokens evaluated."""
        if not slot.pending:
            return self._prefill_images(slot, outputs)
        take = self._take(slot, not alone)
        for i in range(take):
            self._put(i, slot.pending[i], len(slot.cached), slot.index, False)
            slot.cached.append(slot.pending[i])
        del slot.pending[:take]
        last = not slot.pending and slot.vision is None
        self._batch.logits[take - 1] = last
        if self._decode(take, outputs) and last:
            self._put_output(outputs, self._first(slot, take - 1))
        return take

    def _take(self, slot: _Slot, decoding: bool) -> int:
        """Prompt tokens `slot`'s next chunk evaluates: up to a whole batch when no slot decodes, else PREFILL_CHUNK."""
        return chunk_size(len(slot.pending), self._chunk if decoding else self._n_batch)

    def _prefill_images(self, slot: _Slot, outputs: dict[Handle, EngineOutput]) -> int:
        vision = slot.vision
        assert vision is not None and self.prompter.projector is not None
        slot.vision = None
        projector = self.prompter.projector
        start = 1 if vision.head else 0  # the text before the first image is in the cache already
        try:
            n_past = projector.eval(
                self._ctx.ctx, vision.chunks, start, len(slot.cached), seq_id=slot.index, n_batch=self._n_batch
            )
            slot.cached = cache_record(vision.chunks, n_past, projector.mrope)
        except GenerationError as exc:
            self._lib.llama_memory_seq_rm(self._mem, slot.index, -1, -1)
            slot.cached = []
            self._put_output(outputs, self._finish(slot, None, "error", exc))
            return 0
        finally:
            vision.chunks.free()
        self._put_output(outputs, self._first(slot, -1))
        return vision.total_tokens - len(vision.head)

    def _first(self, slot: _Slot, row: int) -> EngineOutput:
        """The prompt is in: draw the first token (or answer a classify request)."""
        assert slot.decoder is not None
        slot.decoder.prefill_done(slot.prompt_tokens, slot.cached_prompt_tokens)
        if slot.classify:
            return self._classify(slot, row)
        return self._advance(slot, row)

    def _advance(self, slot: _Slot, row: int) -> EngineOutput:
        """Draw the slot's next token from its logits row and run it through the slot's decoder."""
        chooser, decoder = slot.chooser, slot.decoder
        assert chooser is not None and decoder is not None and slot.handle is not None
        try:
            token = chooser.choose(self._ctx, row)
            visible = decoder.push(token, chooser.logprob)
        except Exception as exc:
            return self._finish(slot, None, "error", _as_error(exc))
        if decoder.done:
            return self._finish(slot, visible, decoder.finish_reason)
        slot.next_token = token
        return EngineOutput(slot.handle, (visible,) if visible is not None else ())

    def _classify(self, slot: _Slot, row: int) -> EngineOutput:
        """One token drawn at the prompt's last position, as it is (a stop token too), with the raw logits row when
        the `logits` option asks for it."""
        options, decoder = slot.options, slot.decoder
        assert options is not None and decoder is not None
        vocab = self.prompter.vocab
        try:
            logits = None
            if options.logits:
                raw = self._lib.llama_get_logits_ith(self._ctx.ctx, row)
                logits = np.ctypeslib.as_array(raw, shape=(vocab.size,)).copy()
            grammar = self.prompter.grammar(options)
            sampler = build_sampler(options, n_vocab=vocab.size, history=slot.history, grammar=grammar)
            try:
                token = int(sampler.sample(self._ctx, row))
            finally:
                sampler.close()
        except Exception as exc:
            return self._finish(slot, None, "error", _as_error(exc))
        decoder.clock.generated_tokens = 1
        chosen = Token(token, vocab.piece(token).decode("utf-8", "replace"))
        out = self._finish(slot, chosen, "length")
        return EngineOutput(out.handle, out.tokens, out.finish_reason, out.metrics, None, logits)

    def _finish(
        self, slot: _Slot, token: Token | None, reason: FinishReason, error: BaseException | None = None
    ) -> EngineOutput:
        handle = slot.handle
        assert handle is not None
        metrics = None
        if slot.decoder is not None:
            slot.decoder.close()
            metrics = slot.decoder.metrics(reason)
        if slot.chooser is not None:
            slot.chooser.close()
        if slot.vision is not None:  # ended (cancelled, closed) before its images were evaluated
            slot.vision.chunks.free()
        slot.handle, slot.decoder, slot.chooser, slot.vision, slot.options = None, None, None, None, None
        slot.pending, slot.next_token, slot.history, slot.classify = [], None, (), False
        slot.adapter = None
        slot.last_used = next(self._clock)
        return EngineOutput(handle, (token,) if token is not None else (), reason, metrics, error)

    def _put(self, i: int, token: int, pos: int, seq: int, logits: bool) -> None:
        b = self._batch
        b.token[i] = token
        b.pos[i] = pos
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = seq
        b.logits[i] = logits

    def _decode(self, n: int, outputs: dict[Handle, EngineOutput]) -> bool:
        # One llama_decode per kind of work: every decoding slot's token together, then each prompt chunk alone.
        # Why not one call: llama.cpp splits a batch whose sequences bring different token counts (kv_unified off)
        # so that each sequence's share can end up evaluated one token at a time, and its one-token path rounds
        # differently from its many-token path (measured: 0.7 apart in SmolLM2's logits). Evaluating each chunk
        # alone keeps greedy outputs equal whatever else runs beside a request.
        self._batch.n_tokens = n
        rc = self._lib.llama_decode(self._ctx.ctx, self._batch)
        if rc != 0:
            self._fail_all(GenerationError(f"llama_decode failed with status {rc}"), outputs)
            return False
        return True

    def _use_adapter(self, name: str | None, outputs: dict[Handle, EngineOutput]) -> bool:
        """Apply `name`'s adapter to the context for the next decode; on failure every request fails, as when a
        decode fails (the context's adapters are then unknown)."""
        try:
            self._lora.use(name)
        except GenerationError as exc:
            self._fail_all(exc, outputs)
            return False
        return True

    def _fail_all(self, error: GenerationError, outputs: dict[Handle, EngineOutput]) -> None:
        # The KV cache may hold half a step: forget all of it rather than trust it, and fail every request.
        self._lib.llama_memory_clear(self._mem, True)
        for slot in self._slots:
            if slot.handle is not None:
                self._put_output(outputs, self._finish(slot, None, "error", error))
            slot.cached = []

    @staticmethod
    def _put_output(outputs: dict[Handle, EngineOutput], out: EngineOutput) -> None:
        outputs[out.handle] = out

    def _check_open(self) -> None:
        # The context also goes when its model is closed (llama_cpp frees contexts before their model).
        if self.closed:
            raise GenerationError("this engine (or its model) was closed")


def _as_error(exc: BaseException) -> ModelHostError:
    # A deliberate error keeps its code (the grammar's SchemaError is the request's fault: a 400, not a 500).
    return exc if isinstance(exc, ModelHostError) else GenerationError(f"llama.cpp failed while generating: {exc}")


def chunk_size(pending: int, budget: int) -> int:
    """Prompt tokens to evaluate now: up to `budget`, never leaving exactly one behind.

    A prompt's last token alone would take llama.cpp's one-token path, which rounds differently from evaluating it
    with the tokens before it, and greedy output would then depend on where the chunks fell.
    """
    take = min(pending, budget)
    return take - 1 if pending - take == 1 else take


def _by_adapter(slots: list[_Slot], *, first: object = None) -> list[list[_Slot]]:
    """The slots grouped by their adapter, each group in slot order: the group of adapter `first` (the one the
    context holds now) first, then the base's, then the others by name."""
    groups: dict[str | None, list[_Slot]] = {}
    for slot in slots:
        groups.setdefault(slot.adapter, []).append(slot)
    return [groups[k] for k in sorted(groups, key=lambda k: (k != first, k is not None, k or ""))]


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n

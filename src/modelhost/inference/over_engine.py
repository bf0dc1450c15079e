"""The Python API over any Engine: one implementation of generate, chat, classify, batch_generate, metrics and err.

A backend writes its Engine (engine.py) and its static facts (info, close, capabilities), subclasses `OverEngine`,
and gets the whole TextModel contract from here, the same for every backend:

- `generate`/`chat` admit the request at once (its options and prompt are checked now: a bad one raises before
  any compute) and return a stream that steps the engine as it is iterated, so a caller who stops reading stops
  the compute within one step, and one that never reads costs nothing but the slot.
- One operation at a time, as the contract promises: a new operation first releases a stream its caller left
  suspended ("cancelled"), so two interleaved loops never share the engine's slots behind each other's back.
- `batch_generate` admits as many prompts as the engine has free slots and steps them together: on a batching
  engine the batch really is decoded together, and a prompt's failure lands in its own result.
- `classify` runs each prompt as an engine classify request (one forward pass, the token at its last position).
- `metrics()` is the last finished operation's; `err()` the last generate/chat's error, None after a clean end.

The host does not use this module: it drives the same engine directly (host/loop.py), so a model serves
the Python API and the host with one engine and one set of caches.
"""

from __future__ import annotations

import collections
import contextlib
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from modelhost.errors import InvalidInputError
from modelhost.inference.engine import Engine, EngineRequest, Handle
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import BatchResult, ClassifyResult, FinishReason, GenerateMetrics, Message, Token


def add_metrics(total: GenerateMetrics | None, m: GenerateMetrics) -> GenerateMetrics:
    """Sum of two operations' metrics (batch_generate and classify report the whole call); rates recomputed from
    the sums; the finish reason is the later one's."""
    if total is None:
        return m
    prefill = total.prefill_seconds + m.prefill_seconds
    decode = total.decode_seconds + m.decode_seconds
    prompt = total.prompt_tokens + m.prompt_tokens
    generated = total.generated_tokens + m.generated_tokens
    return replace(
        total,
        prompt_tokens=prompt,
        generated_tokens=generated,
        prefill_seconds=prefill,
        decode_seconds=decode,
        total_seconds=total.total_seconds + m.total_seconds,
        prefill_tokens_per_second=prompt / prefill if prefill > 0 else 0.0,
        decode_tokens_per_second=generated / decode if decode > 0 else 0.0,
        thinking_budget_forced=total.thinking_budget_forced or m.thinking_budget_forced,
        finish_reason=m.finish_reason,
        cached_prompt_tokens=total.cached_prompt_tokens + m.cached_prompt_tokens,
        peak_memory_bytes=max(total.peak_memory_bytes, m.peak_memory_bytes),
        active_memory_bytes=m.active_memory_bytes,
    )


class EngineStream(Iterator[Token]):
    """One request's tokens, drawn by stepping the engine; `close()` (or dropping it) releases the request."""

    def __init__(self, owner: OverEngine, engine: Engine, handle: Handle) -> None:
        self._owner = owner
        self._engine = engine
        self.handle = handle
        self._ready: collections.deque[Token] = collections.deque()
        self._done = False
        self._error: BaseException | None = None

    def __iter__(self) -> EngineStream:
        return self

    def __next__(self) -> Token:
        while not self._ready:
            if self._done:
                error, self._error = self._error, None
                if error is not None:
                    raise error  # after every token produced before it, as the contract says
                raise StopIteration
            self._pump()
        return self._ready.popleft()

    def _pump(self) -> None:
        try:
            result = self._engine.step()
        except Exception as exc:
            self._engine.release(self.handle)
            self._end(GenerateMetrics(finish_reason="error"), exc)
            return
        out = result.outputs.get(self.handle)
        if out is None:
            return  # still in prefill this step
        self._ready.extend(out.tokens)
        if out.finish_reason is not None:
            self._end(out.metrics or GenerateMetrics(finish_reason=out.finish_reason), out.error)

    def _end(self, metrics: GenerateMetrics, error: BaseException | None) -> None:
        self._done = True
        self._owner._finished(self, metrics, error)
        self._error = error

    def close(self) -> None:
        """Stop the request now (its metrics say "cancelled"); idempotent, harmless after its end."""
        self._ready.clear()
        self._error = None
        if not self._done:
            self._done = True
            metrics = self._engine.release(self.handle)
            self._owner._finished(self, metrics or GenerateMetrics(finish_reason="cancelled"), None)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # the engine went with its model: nothing is left to release
            self.close()


class OverEngine:
    """The TextModel methods over `self.engine()`; see the module doc. Subclasses call `super().__init__()`."""

    def __init__(self) -> None:
        self._metrics = GenerateMetrics()
        self._err: BaseException | None = None
        self._live: weakref.ref[EngineStream] | None = None

    def engine(self) -> Engine:
        """The model's one engine (EngineModel): a subclass returns it."""
        raise NotImplementedError

    # --- the TextModel contract -------------------------------------------------------------------------------

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        """Stream tokens for a raw prompt. Options and the prompt are checked now; compute starts on iteration."""
        return self._open(EngineRequest(prompt=prompt, options=GenerateOptions.parse(opts)))

    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        """Stream the assistant's reply to `messages` (the engine applies the model's chat template)."""
        if not messages:  # an empty chat would read as a raw empty prompt: refused as what it is
            raise InvalidInputError("chat needs at least one message")
        return self._open(EngineRequest(messages=tuple(messages), options=GenerateOptions.parse(opts)))

    def classify(self, prompts: Sequence[str], **opts: Any) -> list[ClassifyResult]:
        """One forward pass per prompt, one token chosen at its last position (argmax when greedy)."""
        self._release_live()
        options = GenerateOptions.parse(opts)  # once for every prompt
        requests = [EngineRequest(prompt=p, options=options, classify=True) for p in prompts]
        results: dict[int, ClassifyResult] = {}
        total: GenerateMetrics | None = None

        def finished(index: int, out: Any) -> None:
            nonlocal total
            if out.error is not None:
                raise out.error
            results[index] = ClassifyResult(out.tokens[0], out.logits)
            if out.metrics is not None:
                total = add_metrics(total, out.metrics)

        self._drive(requests, finished, on_refused=None)
        self._metrics = replace(total, finish_reason="length") if total else GenerateMetrics(finish_reason="length")
        return [results[i] for i in range(len(prompts))]

    def batch_generate(self, prompts: Sequence[str], **opts: Any) -> list[BatchResult]:
        """Generate for every prompt, as many together as the engine has slots; a prompt's failure is kept in its
        own result and the others go on. A set `cancel` ends the rest ("cancelled")."""
        self._release_live()
        cancel = opts.get("cancel")
        options = GenerateOptions.parse(opts)  # once for every prompt
        requests = [EngineRequest(prompt=p, options=options) for p in prompts]
        results: dict[int, BatchResult] = {}
        tokens: dict[int, list[Token]] = collections.defaultdict(list)
        total: GenerateMetrics | None = None

        def finished(index: int, out: Any) -> None:
            nonlocal total
            tokens[index].extend(out.tokens)
            if out.finish_reason is None:
                return
            reason: FinishReason = "error" if out.error is not None else out.finish_reason
            results[index] = BatchResult(tuple(tokens.pop(index, [])), out.error, reason)
            if out.metrics is not None:
                total = add_metrics(total, out.metrics)

        def refused(index: int, exc: BaseException) -> bool:
            if isinstance(exc, InvalidInputError):  # this prompt's fault: refused before any compute
                results[index] = BatchResult((), exc, "error")
                return True
            return False

        def skip(index: int) -> bool:
            if cancel is not None and cancel.is_set():
                results[index] = BatchResult(finish_reason="cancelled")
                return True
            return False

        self._drive(requests, finished, on_refused=refused, skip=skip, partial=True)
        self._metrics = total or GenerateMetrics(finish_reason="length")
        self._err = None  # per-prompt errors live in their results; the batch itself succeeded
        return [results[i] for i in range(len(prompts))]

    def metrics(self) -> GenerateMetrics:
        """Metrics of the last finished operation."""
        return self._metrics

    def err(self) -> BaseException | None:
        """The error of the last generate/chat, or None after a clean (or abandoned) end."""
        return self._err

    # --- internals --------------------------------------------------------------------------------------------

    def _open(self, request: EngineRequest) -> EngineStream:
        self._release_live()
        engine = self.engine()
        admitted = engine.admit(request)
        self._err = None
        stream = EngineStream(self, engine, admitted.handle)
        self._live = weakref.ref(stream)
        return stream

    def _finished(self, stream: EngineStream, metrics: GenerateMetrics, error: BaseException | None) -> None:
        self._metrics = metrics
        self._err = error
        if self._live is not None and self._live() is stream:
            self._live = None

    def _release_live(self) -> None:
        # One operation at a time: a stream left suspended by its caller is finished ("cancelled") first.
        live = self._live() if self._live is not None else None
        self._live = None
        if live is not None:
            live.close()

    def _drive(
        self,
        requests: Sequence[EngineRequest],
        finished: Any,
        *,
        on_refused: Any,
        skip: Any = None,
        partial: bool = False,
    ) -> None:
        """Admit `requests` in order while slots are free, step until all are done; `finished(index, output)` sees
        every output (only final ones unless `partial`). A refusal `on_refused` does not take raises, after the
        requests already admitted are released."""
        engine = self.engine()
        waiting = collections.deque(enumerate(requests))
        live: dict[Handle, int] = {}
        try:
            while waiting or live:
                while waiting and engine.free_slots() > 0:
                    index, request = waiting.popleft()
                    if skip is not None and skip(index):
                        continue
                    try:
                        live[engine.admit(request).handle] = index
                    except Exception as exc:
                        if on_refused is None or not on_refused(index, exc):
                            raise
                if not live:
                    continue
                outputs: Mapping[Handle, Any] = engine.step().outputs
                for handle, out in outputs.items():
                    index = live.get(handle, -1)
                    if index < 0:
                        continue
                    if out.finish_reason is not None:
                        del live[handle]
                    if partial or out.finish_reason is not None:
                        finished(index, out)
        finally:
            for handle in live:
                engine.release(handle)

"""An engine over what is not one, so whoever drives models drives one kind of thing: an Engine.

- `StreamEngine`: one slot over any TextModel's own streams (`generate`/`chat` iterators; `classify` for a
  classify request). Each step draws one token from the live stream, so a caller that steps it (the host) can do
  other work between two tokens, exactly as between two steps of a batching engine. A model that cannot step at
  all (the OCR pipeline) is served the same way: its stream yields its whole answer, and the step that draws the
  first token is simply long.
- `engine_of(model)`: the model's own engine (EngineModel), else a StreamEngine: the one question the host asks
  at load.

Why here, in the contract: this is how a plain TextModel (a stand-in, a wrapper, a model that cannot step) meets
the step shape, and it knows no backend; a new backend implements Engine itself (see engine.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from modelhost.errors import InvalidInputError
from modelhost.inference.capabilities import as_capability
from modelhost.inference.engine import Admitted, Engine, EngineModel, EngineOutput, EngineRequest, Handle, StepResult
from modelhost.inference.model import TextModel
from modelhost.inference.types import GenerateMetrics, Token


@dataclass(eq=False, slots=True)
class _Live:
    handle: Handle
    request: EngineRequest
    tokens: Iterator[Token] | None  # None for a classify request (run whole in its step)


class StreamEngine:
    """An Engine of one slot over a TextModel's streams; see the module doc."""

    slots = 1

    def __init__(self, model: TextModel) -> None:
        self._model = model
        self._live: _Live | None = None
        self._handles = itertools.count(1)

    def free_slots(self) -> int:
        """1 when no request is live, else 0."""
        return 0 if self._live is not None else 1

    def admit(self, request: EngineRequest) -> Admitted:
        """Open the model's stream for the request now: the model checks its options and prompt here (its own
        errors raise, no slot taken); its compute starts when the stream is first drawn from, at `step()`."""
        if self._live is not None:
            raise RuntimeError("no free slot: admit only while free_slots() > 0")
        if request.prompt_ids is not None:
            raise InvalidInputError("this model takes a prompt as text or chat messages, not token ids")
        opts = request.options.as_kwargs()
        tokens: Iterator[Token] | None = None
        if request.classify:
            pass  # classify runs whole in its step: nothing to open
        elif request.messages:
            tokens = iter(self._model.chat(request.messages, **opts))
        else:
            tokens = iter(self._model.generate(request.prompt or "", **opts))
        self._live = _Live(next(self._handles), request, tokens)
        return Admitted(self._live.handle, 0, 0)

    def step(self) -> StepResult:
        """Draw one token from the live stream (or run a classify request whole). Only an Exception becomes the
        request's "error"; anything else (KeyboardInterrupt, SystemExit) goes through to the caller, as it must."""
        live = self._live
        if live is None:
            return StepResult()
        if live.tokens is None:
            return StepResult({live.handle: self._classify(live)}, sampled=1)
        try:
            token = next(live.tokens)
        except StopIteration:
            self._live = None
            error = self._model.err()
            m = self._model.metrics()
            reason = "error" if error is not None else (m.finish_reason or "stop")
            return StepResult({live.handle: EngineOutput(live.handle, (), reason, m, error)})
        except Exception as exc:
            self._live = None
            return StepResult({live.handle: EngineOutput(live.handle, (), "error", self._model.metrics(), exc)})
        # No batch size: a stream does not say what its step evaluated (the host's batch histograms stay empty).
        return StepResult({live.handle: EngineOutput(live.handle, (token,))}, sampled=1)

    def _classify(self, live: _Live) -> EngineOutput:
        self._live = None
        try:
            (result,) = self._model.classify([live.request.prompt or ""], **live.request.options.as_kwargs())
        except Exception as exc:
            return EngineOutput(live.handle, (), "error", self._model.metrics(), exc)
        return EngineOutput(live.handle, (result.token,), "length", self._model.metrics(), logits=result.logits)

    def release(self, handle: Handle) -> GenerateMetrics | None:
        """Close the live stream (the model stops within one token); its metrics say "cancelled"."""
        live = self._live
        if live is None or live.handle != handle:
            return None
        self._live = None
        close = getattr(live.tokens, "close", None)
        if close is not None:
            close()
        m = self._model.metrics()
        return m if m.finish_reason == "cancelled" else GenerateMetrics(finish_reason="cancelled")

    def close(self) -> None:
        """Release the live request, if any; the model itself is its owner's to close."""
        if self._live is not None:
            self.release(self._live.handle)


def engine_of(model: object) -> Engine:
    """The engine to drive `model` with: its own (EngineModel), else one slot over its streams."""
    own = as_capability(model, EngineModel)
    if own is not None:
        return own.engine()
    text: Any = model
    return StreamEngine(text)

"""The engine contract: the one way a backend generates text, whoever asks (the host, the Python API, a test).

An engine is a set of request slots stepped from one thread. Its caller's loop is always the same five moves, the
shape of vLLM's `EngineCore.step` and of llama-server's slots:

1. `admit` a request (a raw prompt, prompt ids, or chat messages; its options; its images) while `free_slots()`
   says there is room: the engine checks it now (a bad option or prompt raises the model's own error and takes
   no slot) and returns an `Admitted` with the request's handle;
2. `step()` once: every admitted request advances (one token for each decoding request, a bounded chunk of the
   prompts still in prefill) and the step's `EngineOutput`s come back keyed by handle;
3. hand each output's tokens to whoever asked for them;
4. `release` the handles of requests their callers gave up on (cancellation is applied here, between two steps,
   at one fixed point, so a cancelled request stops costing compute within one step);
5. repeat; `close()` when done.

Why handles and not slot numbers: a slot is reused as soon as its request ends, so a late `release(slot)` (a
cancellation racing the step that finished it) would free the next request in that slot. A handle is never
reused for the life of the engine.

Why a step returns a tuple of tokens per request: most engines make one token per step, but an engine over a model
that cannot step (an OCR pipeline) answers in one go, and the contract stays whole by returning the whole answer
from one step. Concatenating every token's `text` gives the answer, exactly as in a `TextModel` stream.

What every engine keeps (the engine conformance kit, `conformance.check_engine`, checks it): stop strings and stop
tokens, `max_tokens`, `min_tokens`, the thinking budget and UTF-8 behave per request exactly as in
`TextModel.generate` (they are decided by `decoding.SequenceDecoder`, the one decoder every engine uses); a
request's greedy output does not depend on how many others share its steps (each backend's tests say where its
arithmetic allows this); `release` of a finished or unknown handle is harmless and returns None.

This module imports only the contract's own value types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import FinishReason, GenerateMetrics, Message, Token

#: A request's identity inside one engine: unique for the engine's life, never reused (see the module doc).
Handle = int


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """One request for an engine: exactly one of `prompt` (raw text, no chat template), `prompt_ids` (tokens of
    the engine's own vocabulary) or `messages` (chat turns, images attached to them); and its generation options,
    parsed (GenerateOptions: a mapping given here is parsed once, on construction, for a caller that writes its
    options by hand). The engine checks what only it knows and resolves them against its checkpoint's defaults at
    `admit`; a PreparingEngine's `prepare` returns them resolved, so nothing downstream parses them again.

    `classify` asks for one forward pass instead of a generation: the token chosen at the prompt's last position
    comes back as it is (even when it is a stop token) with `EngineOutput.logits` when the `logits` option asks
    for them, and the request finishes in that step ("length").

    `adapter` names a LoRA adapter the engine holds (AdapterEngine.load_adapter) to run the request with; None is
    the base model. An engine that holds no adapter of that name refuses the request (ModelNotFoundError).
    """

    prompt: str | None = None
    prompt_ids: tuple[int, ...] | None = None
    messages: tuple[Message, ...] = ()
    options: GenerateOptions = field(default_factory=GenerateOptions)
    classify: bool = False
    adapter: str | None = None

    def __post_init__(self) -> None:
        given = (self.prompt is not None) + (self.prompt_ids is not None) + bool(self.messages)
        if given > 1:
            raise ValueError("an engine request has one of prompt, prompt_ids or messages, not several")
        if not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(self.messages))
        if self.prompt_ids is not None and not isinstance(self.prompt_ids, tuple):
            object.__setattr__(self, "prompt_ids", tuple(self.prompt_ids))
        if not isinstance(self.options, GenerateOptions):
            object.__setattr__(self, "options", GenerateOptions.parse(self.options))


@dataclass(frozen=True, slots=True)
class Admitted:
    """A request an engine took: its handle, and how much of its prompt the engine's cache already held."""

    handle: Handle
    prompt_tokens: int
    cached_prompt_tokens: int = 0


@dataclass(frozen=True, slots=True)
class EngineOutput:
    """What one request produced in one step.

    `tokens` are the tokens made visible this step, in order (a token's `text` may be empty, as in a stream: half
    of a multi-byte character, or text held back because it may start a stop string). When `finish_reason` is set
    the request ended in this step, with its `metrics` (and its `error` when the reason is "error"), and its handle
    is no longer live. `logits` is the raw logits row of a `classify` request that asked for it.
    """

    handle: Handle
    tokens: tuple[Token, ...] = ()
    finish_reason: FinishReason | None = None
    metrics: GenerateMetrics | None = None
    error: BaseException | None = None
    logits: Any = None


@dataclass(frozen=True, slots=True)
class StepResult:
    """One step of an engine: each request's output keyed by its handle, and how big the step was (for metrics).

    A request that produced nothing in a step (its prompt is still in prefill) may be absent from `outputs`.
    """

    outputs: Mapping[Handle, EngineOutput] = field(default_factory=dict)
    #: Tokens evaluated in this step: one per decoding request plus the prompt chunks of requests in prefill.
    batch_tokens: int = 0
    #: Requests that drew a token in this step.
    sampled: int = 0
    #: Prompt tokens evaluated in this step (bounded per step, so decoding requests keep flowing during a prefill).
    prompt_tokens: int = 0


@runtime_checkable
class Engine(Protocol):
    """A step engine over a fixed number of slots, driven from one thread (see the module doc for the loop)."""

    #: How many requests the engine decodes at once (1 is a valid engine: it is how one-at-a-time is served).
    slots: int

    def free_slots(self) -> int:
        """Slots that can take a request now."""
        ...

    def admit(self, request: EngineRequest) -> Admitted:
        """Check `request` and take it into a free slot; its compute starts at the next `step()`.

        Raises the model's own error (InvalidOptionError naming the option, InvalidInputError, ...) and takes no
        slot for a request it refuses; RuntimeError when no slot is free (the caller's bookkeeping is wrong).
        """
        ...

    def step(self) -> StepResult:
        """Advance every admitted request once. An engine failure finishes the affected requests with "error"
        (their outputs carry it); an engine that raises instead has lost them all, and its caller fails them."""
        ...

    def release(self, handle: Handle) -> GenerateMetrics | None:
        """End a live request now (its caller cancelled it) and return its metrics ("cancelled"); None when the
        handle is not live (finished already, released, or never admitted). Its cache stays for prefix reuse."""
        ...

    def close(self) -> None:
        """End every live request ("cancelled") and free the engine's own memory. Idempotent."""
        ...


@runtime_checkable
class PreparingEngine(Protocol):
    """An engine that can do a request's admission work (options checked, template rendered, prompt tokenized) on
    any thread, ahead of `admit`.

    Why: `admit` runs on the thread that steps the engine, so tokenizing a long prompt there stalls every request
    in its slots for that long. A caller with a thread of its own (the host's `precheck` runs on a worker thread)
    calls `prepare` there and admits what it returns; `admit` then only takes a slot.
    """

    def prepare(self, request: EngineRequest) -> EngineRequest:
        """The request with its prompt as `prompt_ids` (the same tokens `admit` would make) and its options checked
        and resolved, or the request with only its options so (an image prompt, a classify request). Raises what
        `admit` would raise for a bad request. Safe beside a running `step()`: it touches no slot and no cache."""
        ...


@runtime_checkable
class EngineModel(Protocol):
    """A loaded model that generates through an Engine (the capability the host looks for).

    `engine()` is the model's one engine, made once: the host drives it, and the model's own Python API
    (`generate`, `chat`, ...) runs over the same engine, so a model holds one set of caches however it is used.
    One thread at a time drives it (the host's promise, and the Python API's caller's).
    """

    def engine(self) -> Engine:
        """The model's engine (the same object at every call until the model is closed)."""
        ...


@runtime_checkable
class CacheReportingEngine(Protocol):
    """An engine that can say how full its KV cache is (optional: the host's `kv_cache_usage_perc` gauge is shown
    only for a model whose engine offers it)."""

    def cache_usage(self) -> float | None:
        """The fraction (0 to 1) of the engine's KV-cache cells that live requests hold now (a prefix kept for
        reuse by an idle slot counts as free, as vLLM counts its prefix cache); None when unknown. Cheap and
        called from the thread that steps the engine, once per step of its caller's loop."""
        ...


@runtime_checkable
class AdapterEngine(Protocol):
    """An engine that serves LoRA adapters by name beside its base model, over the base's one copy of the weights
    and its one set of slots: each request names its adapter (`EngineRequest.adapter`, None for the base), and
    requests of different adapters share a step (how they share it is the backend's to say: docs/adapters.md).

    Both calls run on the thread that steps the engine, between two steps (the host's promise), so a step never
    sees an adapter half loaded or freed under it.
    """

    def load_adapter(self, name: str, path: str) -> None:
        """Load the adapter at `path` (a file or folder of this backend's kind) under `name`. Raises the model's
        error (InvalidInputError naming what is wrong with the files, ModelLoadError) and holds nothing new then."""
        ...

    def unload_adapter(self, name: str) -> None:
        """Free the adapter `name`. The caller makes sure no live request uses it (the host drains them first);
        an unknown name is harmless."""
        ...

"""What a door sends into the host (GenerationRequest) and what comes back (events), in one shape for every door.

Each door turns its own wire into a GenerationRequest and the events back into its own wire; none of them touches a
model. The events are few on purpose: Started (the model took the request: queue wait is over, prefill begins),
Delta (text), and exactly one terminal event, Done or Failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from modelhost.inference.engine import EngineRequest
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Channel, FinishReason, GenerateMetrics, Message, TokenLogprob


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One generation: chat `messages`, or a raw `prompt` when messages are empty.

    `options` are the contract's generation options (max_tokens, temperature, stop, ...), validated at submit.
    `request_id` is the door's own id, carried for logs and metrics only. `adapter` is the LoRA adapter of the
    model to answer with (set by the model set when a request names an adapter; None: the base model).
    """

    messages: Sequence[Message] = ()
    prompt: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    request_id: str = ""
    adapter: str | None = None

    def __post_init__(self) -> None:
        if not self.messages and self.prompt is None:
            raise ValueError("a GenerationRequest needs messages or a prompt")
        if self.messages and self.prompt is not None:
            raise ValueError("a GenerationRequest takes messages or a prompt, not both")


#: The seed option's range (inference.options): choice i of a seeded request samples with seed + i, wrapped into it.
_SEED_RANGE = 1 << 64


@dataclass(frozen=True, slots=True)
class Admission:
    """A request the host has checked, once: what a door hands to `Host.submit` for each of its `n` choices.

    Made by `Host.precheck` (on a worker thread; the door awaits it) or by `submit` itself when handed a plain
    GenerationRequest. `engine_request` holds the options parsed (and resolved, when the model's engine prepares
    requests ahead) and, for such an engine, the prompt rendered and tokenized as `prompt_ids`; every choice shares
    it, so an n=2 chat renders its template once. Choice i differs only in its seed (seed + i, when a seed is set),
    so the choices are different samples and the whole answer is reproducible. `engine_request` is None when the
    host was not serving at precheck (its `submit` refuses, or checks the request then).
    """

    request: GenerationRequest
    engine_request: EngineRequest | None = None
    #: Choices of the request (OpenAI's `n`): each is its own generation, all of this one admission.
    n: int = 1
    #: The engine the request was prepared for; a host whose engine changed since (the model was reloaded) checks
    #: the request again rather than trusting another engine's tokens.
    engine: object = field(default=None, compare=False, repr=False)

    @property
    def options(self) -> GenerateOptions | None:
        """The request's parsed options (resolved when its engine prepared it); None when not checked."""
        return self.engine_request.options if self.engine_request is not None else None

    @property
    def prompt_ids(self) -> tuple[int, ...] | None:
        """The prompt as the engine's tokens, when the engine prepared it ahead."""
        return self.engine_request.prompt_ids if self.engine_request is not None else None

    @property
    def adapter(self) -> str | None:
        """The LoRA adapter the request runs with (None: the base model)."""
        return self.request.adapter

    def choice(self, index: int) -> EngineRequest:
        """The engine request of choice `index` (0 <= index < n): the shared one, with seed + index when seeded."""
        shared = self.engine_request
        if shared is None:
            raise ValueError("the admission was not checked: submit it to a serving host")
        if not 0 <= index < self.n:
            raise ValueError(f"choice {index} of a request of {self.n}")
        seed = shared.options.seed
        if index == 0 or seed is None:
            return shared
        return replace(shared, options=replace(shared.options, seed=(seed + index) % _SEED_RANGE))


@dataclass(frozen=True, slots=True)
class Started:
    """The model thread took the request (its engine admitted it: the prompt is rendered and counted); prefill
    begins with the next step. Sent before every other event of the request, a refusal at admission included."""

    queued_seconds: float
    #: The prompt's tokens as the engine counted them at admission (0 when the request ended before admission, or
    #: for a model that counts its prompt only as it runs: a TextModel's own stream); Done has the final count.
    prompt_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Delta:
    """Text that became visible; `tokens` counts the tokens generated so far (for progress and rates)."""

    text: str
    tokens: int
    #: The log-probabilities of the tokens this delta covers, when the request's `logprobs` option asked for them.
    logprobs: tuple[TokenLogprob, ...] = ()
    #: Where the text belongs: the reply, the model's thought, or a thought marker (see inference.types.Channel).
    channel: Channel = "content"


@dataclass(frozen=True, slots=True)
class Done:
    """The request finished: end of sequence or stop ("stop"), its bound ("length"), or cancelled."""

    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    metrics: GenerateMetrics


@dataclass(frozen=True, slots=True)
class Failed:
    """The request failed; `code` is the modelhost error code (see modelhost.errors)."""

    code: str
    message: str
    completion_tokens: int = 0
    #: The option an InvalidOptionError named (a JSON Schema the grammar could not follow mid-answer), so a door
    #: can name the parameter the client sent, as it does for a refusal at submit.
    option: str | None = None


Event = Started | Delta | Done | Failed
"""Any event of a request's stream."""

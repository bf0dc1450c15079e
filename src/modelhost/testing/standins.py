"""A stand-in TextModel that plays a script, for tests of the logic around a model rather than of a model.

The scheduler's ordering, bounds and cancellation points, and each door's framing, status codes, back-pressure and
hang-up handling, must be pinned exactly: which token a cancel lands on, that a request is still decoding when a
client hangs up, that a full queue refuses the next one. A real model's speed (and its variance on a busy machine)
would blur all of that, so those tests drive a `ScriptedModel` whose pace the test holds in its hand (a gate
semaphore, a fixed delay) and whose text it knows in advance. Real models are tested elsewhere: the backends'
conformance suites, and the doors end to end on the tiny and embedded models.

The stand-in still goes through the real `decode_loop` with `MetricsClock` and `LoopOutcome`, so max_tokens,
min_tokens, stop strings, cancellation and metrics behave as they do for a backend; only the engine is scripted.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, Self

from modelhost.inference.generation import LoopOutcome, MetricsClock, decode_loop
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import BatchResult, ClassifyResult, GenerateMetrics, Message, ModelInfo, Token

#: In a script, the end-of-sequence token: a stop, unless min_tokens holds it off (then it counts as an empty token).
EOS: Final = None
#: The token id the end-of-sequence token has; a script's other tokens are numbered from 1 in order.
EOS_ID: Final = 0

#: What an endless script's generation stops at when the request does not set max_tokens.
ENDLESS_MAX_TOKENS: Final = 16


def letters() -> Iterator[bytes]:
    """The endless script: token i is the letter chr(97 + i % 26), so a test can tell which token it got."""
    return (chr(97 + i % 26).encode() for i in itertools.count())


class ScriptedModel:
    """A TextModel whose every generation plays a script: byte pieces, one a token, paced as the test says.

    - `pieces`: the text of each generation, one piece a token, then end of sequence (after which, if min_tokens
      holds the stop off, empty tokens follow); None plays `letters()` for ever.
    - `max_tokens`: the default when a request does not set it (the script's length, or ENDLESS_MAX_TOKENS).
    - `gate`: each token (end of sequence included) first takes one release of it, so a test decides when a
      generation moves on and can hold a request in decode for as long as it likes.
    - `delay`: seconds each token takes.
    - `fail_after`: the engine raises RuntimeError("engine exploded") instead of token number `fail_after` (from 0):
      the error raises from the iterator after the tokens so far, and `err()` keeps it, as the contract says.
      `failure` makes what it raises instead (a ModelHostError of a kind a door test needs: a device gone, a page
      the model cannot read).
    - `vision`: what `accepts_images()` answers.

    A subclass changes what is said by overriding `script(prompt)` (and `chat`, to answer from the messages).
    `prompts` records every generate/chat prompt in the order the model was asked; `started` is set when a
    generation begins (prefill is over); `closed` once `close()` ran.
    """

    def __init__(
        self,
        pieces: Sequence[str] | None = None,
        *,
        name: str = "scripted",
        max_tokens: int | None = None,
        gate: threading.Semaphore | None = None,
        delay: float = 0.0,
        fail_after: int | None = None,
        failure: Callable[[], Exception] | None = None,
        vision: bool = False,
    ) -> None:
        self.pieces = pieces
        self.name = name
        self.model_type = name
        if max_tokens is None:
            max_tokens = ENDLESS_MAX_TOKENS if pieces is None else len(pieces)
        self.max_tokens = max_tokens
        self.gate = gate
        self.delay = delay
        self.fail_after = fail_after
        self.failure = failure
        self.vision = vision
        self.prompts: list[str] = []
        self.started = threading.Event()
        self.closed = False
        self._metrics = GenerateMetrics()
        self._err: BaseException | None = None

    def script(self, prompt: str) -> Iterable[bytes | None]:
        """What one generation for `prompt` produces: byte pieces, one a token; EOS where it samples end of sequence.

        A script that ends without EOS is an engine that ran out of context: a length stop.
        """
        if self.pieces is None:
            return letters()
        return itertools.chain((p.encode() for p in self.pieces), [EOS], itertools.repeat(b""))

    def check_options(self, options: GenerateOptions) -> None:
        """Refuse what a script cannot honour at submit, as a real backend does (the OptionChecker capability)."""
        options.refuse("scripted", ["json_schema", "logprobs", "tools"], "its script is fixed")

    def run(self, script: Iterable[bytes | None], prompt_tokens: int, opts: dict[str, Any]) -> Iterator[Token]:
        """Play `script` through the shared decode loop, as a backend drives its engine."""
        o = GenerateOptions.parse(opts)
        o.refuse("scripted", ["json_schema", "logprobs", "tools"], "its script is fixed")
        o = o.resolved({"max_tokens": self.max_tokens})
        clock = MetricsClock()
        clock.prefill_done(prompt_tokens)
        outcome = LoopOutcome()
        self._err = None
        self.started.set()
        current = [b""]  # the piece of the id just yielded: decode_loop asks for it before the next step
        try:
            yield from decode_loop(
                self._ids(script, current), lambda _: current[0], o, eos_ids=(EOS_ID,), clock=clock, outcome=outcome
            )
        except Exception as exc:
            self._err = exc
            outcome.finish_reason = "error"
            raise
        finally:
            self._metrics = clock.finish(outcome.finish_reason)

    def _ids(self, script: Iterable[bytes | None], current: list[bytes]) -> Iterator[int]:
        for n, piece in enumerate(script):
            if self.delay:
                time.sleep(self.delay)
            if self.gate is not None:
                self.gate.acquire()
            if self.fail_after is not None and n >= self.fail_after:
                raise self.failure() if self.failure is not None else RuntimeError("engine exploded")
            current[0] = b"" if piece is EOS else piece
            yield EOS_ID if piece is EOS else n + 1

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        self.prompts.append(prompt)
        return self.run(self.script(prompt), len(prompt), opts)

    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        """Answers the last turn's text as if it were the prompt."""
        return self.generate(messages[-1].content, **opts)

    def accepts_images(self) -> bool:
        return self.vision

    def classify(self, prompts: Sequence[str], **opts: Any) -> list[ClassifyResult]:
        raise NotImplementedError("a scripted model only generates")

    def batch_generate(self, prompts: Sequence[str], **opts: Any) -> list[BatchResult]:
        raise NotImplementedError("a scripted model only generates")

    def info(self) -> ModelInfo:
        return ModelInfo(self.name)

    def metrics(self) -> GenerateMetrics:
        return self._metrics

    def err(self) -> BaseException | None:
        return self._err

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""One request's decoding, the same in every engine: sampled ids in, visible Tokens out.

An engine's job ends at "the next token id is N" (and, when asked, N's log-probability). Everything a caller sees
after that is decided here, once, so no two engines (or two paths of one engine) can drift apart:

- stop strings (held back while they may still be starting, never shown), stop tokens, `max_tokens`,
  `min_tokens`' pass-through, UTF-8 assembly of byte pieces, and the metrics clock: `generation.decode_loop`,
  driven one id at a time by `SequenceDecoder.push`;
- the thought channel and the thinking budget: `ThoughtTracker`, which says which channel each token is in and
  when the budget forces the closing marker (the engine then emits that id instead of sampling);
- the grammar hook: a grammar-constrained request is the reply itself, so `ThoughtTracker.for_request` tracks no
  thought for it (the grammar allows JSON from the first token, and a `<think>` left open by the template must not
  label that JSON as thought, nor a marker token inside a JSON string switch the channel mid-answer).

Why push, not pull: a step engine draws one id per request per step and must hand each request's visible text to
its caller at once; `decode_loop` is a generator over an id stream, so the decoder feeds it one id and takes the
one Token it yields (a `TokenFeed` is the stream).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence

from modelhost.inference.generation import LoopOutcome, MetricsClock, ThoughtMarkers, TokenFeed, decode_loop
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Channel, FinishReason, GenerateMetrics, Token, TokenLogprob


class ThoughtTracker:
    """Where one generation stands in its model's thought channel, and its thinking budget.

    The engine asks `forced_token()` before sampling (the closing marker's id once the budget is spent inside a
    thought, else None); `SequenceDecoder.push` calls `follow(token)` for every id the engine emits, so `channel`
    is then that token's.
    """

    __slots__ = ("_markers", "budget", "channel", "forced", "inside", "spent")

    def __init__(self, markers: ThoughtMarkers | None, *, budget: int = 0, history: Sequence[int] = ()) -> None:
        self._markers = markers
        self.budget = budget if markers is not None else 0
        # A template that opens `<think>` in the prompt starts the answer inside the thought.
        self.inside = markers.inside_after(history) if markers is not None else False
        self.spent = 0
        self.forced = False  # the budget forced the closing marker at least once (GenerateMetrics says so)
        self.channel: Channel = "content"

    @classmethod
    def for_request(
        cls, markers: ThoughtMarkers | None, opts: GenerateOptions, history: Sequence[int], *, constrained: bool
    ) -> ThoughtTracker:
        """The tracker for one request: none of the thought rules apply under a grammar (see the module doc)."""
        if constrained:
            markers = None
        return cls(markers, budget=opts.thinking_budget, history=history)

    @property
    def markers(self) -> ThoughtMarkers | None:
        """The model's markers, or None when this request tracks no thought."""
        return self._markers

    def forced_token(self) -> int | None:
        """The closing marker's id when the budget is spent inside a thought (the engine must emit it instead of
        sampling), else None."""
        if self.budget and self.inside and self.spent >= self.budget and self._markers is not None:
            self.forced = True
            return self._markers.close_id
        return None

    def follow(self, token: int) -> None:
        """Account for an emitted token: its channel, and the budget spent in the current thought."""
        markers = self._markers
        if markers is None:
            return
        self.inside, self.channel = markers.follow(token, self.inside)
        if token == markers.open_id:
            self.spent = 0  # each thought gets the whole budget
        elif self.channel == "thought":
            self.spent += 1


class SequenceDecoder:
    """One request's visible output: push each sampled id (with its log-probability when the `logprobs` option
    asked for one), get back the Token it makes visible, until `done`. The decoder moves its ThoughtTracker along
    with every pushed id, so the engine's sampler reads `thought` (the budget) and never writes it.

    `opts` must be resolved (the model's defaults applied). `piece` maps an id to its bytes; `eos_ids` are the
    vocabulary's end-of-generation ids (the option's `stop_tokens` are added by the loop).
    """

    def __init__(
        self,
        opts: GenerateOptions,
        piece: Callable[[int], bytes],
        *,
        eos_ids: Collection[int],
        thought: ThoughtTracker,
    ) -> None:
        self.thought = thought
        self.clock = MetricsClock()
        self.outcome = LoopOutcome()
        self.done = False
        self._feed = TokenFeed()
        self._logprob: TokenLogprob | None = None
        logprob = self._current_logprob if opts.logprobs is not None else None
        self._loop: Iterator[Token] = decode_loop(
            self._feed,
            piece,
            opts,
            eos_ids=eos_ids,
            clock=self.clock,
            outcome=self.outcome,
            logprob=logprob,
            channel=self._current_channel,
        )
        if opts.max_tokens == 0:  # nothing may be generated: the loop says "length" at its first pull
            next(self._loop, None)
            self.done = True

    def _current_logprob(self, _token: int) -> TokenLogprob | None:
        return self._logprob

    def _current_channel(self, _token: int) -> Channel:
        return self.thought.channel

    def prefill_done(self, prompt_tokens: int, cached: int = 0) -> None:
        """Mark the end of the prompt's evaluation (the first id is about to be pushed)."""
        self.clock.prefill_done(prompt_tokens, cached)

    def push(self, token: int, logprob: TokenLogprob | None = None) -> Token | None:
        """Run one sampled id through the loop: the Token it makes visible (its text may be empty), or None when
        the id ended the request without showing anything (a stop token). `done` is True once the request ended;
        the id that ended it is never evaluated by the engine."""
        if self.done:
            raise RuntimeError("push after the request finished")
        self._logprob = logprob
        self.thought.follow(token)
        self._feed.push(token)
        try:
            visible: Token | None = next(self._loop)
        except StopIteration:
            visible = None
            self.done = True
        # decode_loop settles its finish reason before the last token it yields; until then it stays "cancelled".
        if self.outcome.finish_reason != "cancelled":
            self.done = True
        return visible

    def out_of_room(self) -> Token | None:
        """The engine's context for this request is full: end it as "length", with any held-back text."""
        # An exhausted id stream is how decode_loop learns the context is full: it flushes and says "length".
        self._feed.clear()
        visible = None if self.done else next(self._loop, None)
        self.done = True
        return visible

    @property
    def finish_reason(self) -> FinishReason:
        """Why the request ended ("cancelled" until it did)."""
        return self.outcome.finish_reason

    def metrics(self, reason: FinishReason | None = None) -> GenerateMetrics:
        """The request's metrics, ending now, with `reason` (default: the decoder's own)."""
        return self.clock.finish(reason or self.outcome.finish_reason, thinking_budget_forced=self.thought.forced)

    def close(self) -> None:
        """Stop the loop (a cancelled or failed request); idempotent."""
        self.done = True
        close = getattr(self._loop, "close", None)
        if close is not None:
            close()

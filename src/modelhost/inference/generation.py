"""The shared decode loop: stop strings, stop tokens, max_tokens, cancellation, UTF-8 and metrics.

Every backend turns its engine into two small things, a stream of sampled token ids (after its own prefill) and a
function from a token id to its bytes, and hands them to `decode_loop`. Everything a caller sees about stopping is
decided here, once, so the engines cannot drift apart (mlx-lm's lesson: a loop short enough to hold in your head,
built from small parts).
"""

from __future__ import annotations

import codecs
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Channel, FinishReason, GenerateMetrics, Token, TokenLogprob


class StopMatcher:
    """Finds stop strings in streamed text, holding back only what could still be the start of one.

    Text that cannot begin a stop string is released at once, so streaming stays live; a stop string split across
    tokens is still caught, and never shown.
    """

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """Add text; return (text safe to emit, whether a stop string was hit). After a hit, stop feeding."""
        if not self._stops:
            return text, False
        buffer = self._held + text
        first = min((i for i in (buffer.find(s) for s in self._stops) if i >= 0), default=-1)
        if first >= 0:
            self._held = ""
            return buffer[:first], True
        keep = self._longest_stop_prefix_suffix(buffer)
        self._held = buffer[len(buffer) - keep :] if keep else ""
        return buffer[: len(buffer) - keep], False

    def flush(self) -> str:
        """Release held text at the end of generation (it never became a stop string)."""
        held, self._held = self._held, ""
        return held

    def _longest_stop_prefix_suffix(self, buffer: str) -> int:
        # Length of the longest suffix of `buffer` that is a proper prefix of some stop string.
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(buffer)), best, -1):
                if buffer.endswith(stop[:n]):
                    best = n
                    break
        return best


class Utf8Stream:
    """Bytes to text across token boundaries: a character split over two tokens is emitted whole, once."""

    def __init__(self) -> None:
        # errors="replace" only bites on bytes that can never become valid UTF-8; a partial character waits.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        """Decode what is complete; keep a trailing partial character for the next call."""
        return self._decoder.decode(data)

    def discard(self) -> None:
        """Drop a trailing partial character: generation ended before it was completed, so it never existed."""
        self._decoder.reset()


@dataclass(slots=True)
class MetricsClock:
    """Timestamps of one operation, turned into GenerateMetrics at the end."""

    started: float = 0.0
    prefill_done_at: float = 0.0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    cached_prompt_tokens: int = 0

    def __post_init__(self) -> None:
        self.started = time.perf_counter()

    def prefill_done(self, prompt_tokens: int, cached: int = 0) -> None:
        """Mark the end of prefill (the first sampled token is ready); `cached` of the prompt came from the cache."""
        self.prompt_tokens = prompt_tokens
        self.cached_prompt_tokens = cached
        self.prefill_done_at = time.perf_counter()

    def finish(
        self,
        reason: FinishReason,
        *,
        peak_memory_bytes: int = 0,
        active_memory_bytes: int = 0,
        thinking_budget_forced: bool = False,
    ) -> GenerateMetrics:
        """The metrics of the operation, ending now."""
        end = time.perf_counter()
        prefill_end = self.prefill_done_at or end
        prefill = prefill_end - self.started
        decode = end - prefill_end
        return GenerateMetrics(
            prompt_tokens=self.prompt_tokens,
            generated_tokens=self.generated_tokens,
            prefill_seconds=prefill,
            decode_seconds=decode,
            total_seconds=end - self.started,
            prefill_tokens_per_second=self.prompt_tokens / prefill if prefill > 0 else 0.0,
            decode_tokens_per_second=self.generated_tokens / decode if decode > 0 else 0.0,
            peak_memory_bytes=peak_memory_bytes,
            active_memory_bytes=active_memory_bytes,
            thinking_budget_forced=thinking_budget_forced,
            finish_reason=reason,
            cached_prompt_tokens=self.cached_prompt_tokens,
        )


class TokenFeed:
    """The id stream a `decode_loop` pulls from when its caller draws ids one step at a time (a batch engine, which
    pushes each sampled id before asking the loop for the next piece). Empty means the engine has nothing more for
    this sequence (its context is full): the loop reads that as a length stop and flushes any held-back text."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: deque[int] = deque()

    def push(self, token: int) -> None:
        """The next id the loop will see."""
        self._ids.append(token)

    def clear(self) -> None:
        """Drop ids not yet seen, so the loop's next pull ends it."""
        self._ids.clear()

    def __iter__(self) -> TokenFeed:
        return self

    def __next__(self) -> int:
        if not self._ids:
            raise StopIteration
        return self._ids.popleft()


#: Thought-channel markers, tried in order; the first pair a vocabulary holds as single tokens is the model's channel.
#: One list for every backend, so a model's thought is told from its answer the same way whichever engine runs it.
THOUGHT_MARKERS: tuple[tuple[str, str], ...] = (("<think>", "</think>"), ("<thinking>", "</thinking>"))


@dataclass(frozen=True, slots=True)
class ThoughtMarkers:
    """The ids that open and close a model's thought channel, and the rules that put each token in a Channel."""

    open_id: int
    close_id: int

    @classmethod
    def find(cls, single_token: Callable[[str], int | None]) -> ThoughtMarkers | None:
        """The first THOUGHT_MARKERS pair that `single_token` (marker text to its one token id, or None when the
        vocabulary spells it with several) knows, or None: the model has no thought channel."""
        for open_text, close_text in THOUGHT_MARKERS:
            open_id, close_id = single_token(open_text), single_token(close_text)
            if open_id is not None and close_id is not None:
                return cls(open_id, close_id)
        return None

    def inside_after(self, ids: Sequence[int]) -> bool:
        """True when `ids` (a prompt) leaves the model inside an open thought: its last marker is the opener (a
        template that opens `<think>` for the model starts the answer inside its thought)."""
        for token in reversed(ids):
            if token == self.close_id:
                return False
            if token == self.open_id:
                return True
        return False

    def follow(self, token: int, inside: bool) -> tuple[bool, Channel]:
        """Whether a sequence that was `inside` its thought is inside after `token`, and `token`'s channel."""
        if token == self.open_id:
            return True, "marker"
        if token == self.close_id:
            return False, "marker"
        return inside, "thought" if inside else "content"


@dataclass(slots=True)
class LoopOutcome:
    """How `decode_loop` ended; filled in as it runs, final once the iterator is exhausted or closed."""

    finish_reason: FinishReason = "cancelled"
    error: BaseException | None = None


def decode_loop(
    token_ids: Iterator[int],
    piece: Callable[[int], bytes],
    opts: GenerateOptions,
    *,
    eos_ids: Collection[int],
    clock: MetricsClock,
    outcome: LoopOutcome,
    logprob: Callable[[int], TokenLogprob | None] | None = None,
    channel: Callable[[int], Channel] | None = None,
) -> Iterator[Token]:
    """Yield Tokens from sampled ids until end of sequence, a stop, `max_tokens`, or cancellation.

    `token_ids` is the engine's sampler: it yields one id per decode step and does its model work lazily, so
    stopping here stops the engine within one token. `outcome` records why the loop ended; if the consumer closes
    the iterator early, it stays "cancelled"; `outcome.finish_reason` is final before the last token is yielded, so
    a batching engine can drop a finished row without asking for another id. `opts` must be resolved.

    `min_tokens` is the engine's job first: its sampler must ban the stop ids until that many tokens are out (both
    backends do). A stop id that arrives early anyway is passed through as an ordinary token rather than ending the
    answer too soon.

    `logprob`, when the engine computes log-probabilities, gives the one of the id it just yielded; it is attached
    to that id's Token (stop ids are not yielded as tokens, so theirs are never asked for). `channel` likewise says
    whether the id is thought, a thought marker or content (text held back for a stop string goes out with a later
    token, and so with that token's channel).
    """
    max_tokens = opts.max_tokens if opts.max_tokens is not None else 0
    stops = set(opts.stop_tokens) | set(eos_ids)
    text = Utf8Stream()
    matcher = StopMatcher(opts.stop)
    if max_tokens == 0:
        outcome.finish_reason = "length"
        return
    last_id = -1
    for token_id in token_ids:
        last_id = token_id
        if opts.cancelled():
            outcome.finish_reason = "cancelled"
            return
        if token_id in stops and clock.generated_tokens >= opts.min_tokens:
            outcome.finish_reason = "stop"
            tail = matcher.flush()
            if tail:
                yield Token(token_id, tail)
            return
        clock.generated_tokens += 1
        visible, hit = matcher.feed(text.feed(piece(token_id)))
        lp = logprob(token_id) if logprob is not None else None
        ch = channel(token_id) if channel is not None else "content"
        if hit:
            outcome.finish_reason = "stop"
            if visible:
                yield Token(token_id, visible, lp, ch)
            return
        if clock.generated_tokens >= max_tokens:
            outcome.finish_reason = "length"
            yield Token(token_id, visible + matcher.flush(), lp, ch)
            return
        yield Token(token_id, visible, lp, ch)
    # The engine ran out of ids on its own: its context is full, which is a length stop, not a clean end.
    outcome.finish_reason = "length"
    tail = matcher.flush()
    if tail:
        yield Token(last_id, tail)

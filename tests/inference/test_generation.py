"""The shared decode loop and its parts: StopMatcher, Utf8Stream, MetricsClock, decode_loop.

The loop is driven by a fake engine (a list of ids and a table of byte pieces), so every stopping rule is checked
without a model; the backends' own tests then only need to show that they feed the loop correctly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelhost.inference.generation import LoopOutcome, MetricsClock, StopMatcher, Utf8Stream, decode_loop
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Token

EOS = 0


def run(
    pieces: Sequence[bytes],
    *,
    eos_ids: Sequence[int] = (EOS,),
    ids: Sequence[int] | None = None,
    **opts: object,
) -> tuple[list[Token], LoopOutcome, MetricsClock, list[int]]:
    """Drive decode_loop with token i -> pieces[i]; `ids` defaults to 1..len-1 (never the EOS id 0)."""
    sequence = list(ids) if ids is not None else list(range(1, len(pieces)))
    pulled: list[int] = []

    def engine() -> Iterator[int]:
        for i in sequence:
            pulled.append(i)
            yield i

    clock, outcome = MetricsClock(), LoopOutcome()
    options = GenerateOptions.parse(opts).resolved()
    tokens = list(decode_loop(engine(), lambda i: pieces[i], options, eos_ids=eos_ids, clock=clock, outcome=outcome))
    return tokens, outcome, clock, pulled


def text_of(tokens: Sequence[Token]) -> str:
    return "".join(t.text for t in tokens)


# --- Utf8Stream -------------------------------------------------------------------------------------------------------


def test_utf8_stream_holds_a_split_character_until_it_is_complete() -> None:
    data = "é€😀".encode()  # 2 + 3 + 4 bytes
    stream = Utf8Stream()
    out = [stream.feed(data[i : i + 1]) for i in range(len(data))]
    assert "".join(out) == "é€😀"
    # Nothing partial ever escapes: every emitted piece is a whole character or empty.
    assert [o for o in out if o] == ["é", "€", "😀"]


def test_utf8_stream_discard_drops_a_trailing_partial_character() -> None:
    stream = Utf8Stream()
    assert stream.feed(b"a" + "€".encode()[:2]) == "a"
    stream.discard()
    assert stream.feed(b"b") == "b"


# --- StopMatcher ------------------------------------------------------------------------------------------------------


def test_stop_matcher_releases_text_that_cannot_start_a_stop_at_once() -> None:
    matcher = StopMatcher(["STOP"])
    assert matcher.feed("hello ") == ("hello ", False)
    assert matcher.feed("wor") == ("wor", False)


def test_stop_matcher_catches_a_stop_split_across_feeds_and_never_shows_it() -> None:
    matcher = StopMatcher(["STOP"])
    assert matcher.feed("abc ST") == ("abc ", False)  # "ST" held: it may begin STOP
    assert matcher.feed("O") == ("", False)
    assert matcher.feed("Pxyz") == ("", True)


def test_stop_matcher_releases_held_text_that_turned_out_not_to_be_a_stop() -> None:
    matcher = StopMatcher(["STOP"])
    assert matcher.feed("ST") == ("", False)
    assert matcher.feed("AR") == ("STAR", False)
    assert matcher.feed("S") == ("", False)
    assert matcher.flush() == "S"
    assert matcher.flush() == ""


def test_stop_matcher_picks_the_earliest_of_several_stops() -> None:
    matcher = StopMatcher(["world", "lo"])
    assert matcher.feed("hello world") == ("hel", True)


def test_stop_matcher_without_stops_is_a_pass_through() -> None:
    matcher = StopMatcher([])
    assert matcher.feed("anything") == ("anything", False)


# --- decode_loop ------------------------------------------------------------------------------------------------------


def test_a_multibyte_character_split_across_tokens_is_emitted_once_and_whole() -> None:
    euro = "€".encode()  # e2 82 ac
    pieces = [b"", b"a", euro[:1], euro[1:2], euro[2:], b"b"]
    tokens, outcome, clock, _ = run(pieces, max_tokens=100)
    assert [t.text for t in tokens] == ["a", "", "", "€", "b"]
    assert [t.id for t in tokens] == [1, 2, 3, 4, 5]
    assert clock.generated_tokens == 5
    assert outcome.finish_reason == "length"  # the engine ran out of ids


def test_a_stop_string_split_across_tokens_ends_generation_and_is_not_shown() -> None:
    pieces = [b"", b"The ", b"answer", b" EN", b"D here", b"never"]
    tokens, outcome, _, pulled = run(pieces, stop=["END"], max_tokens=100)
    assert text_of(tokens) == "The answer "
    assert outcome.finish_reason == "stop"
    assert pulled == [1, 2, 3, 4], "the loop must stop pulling ids once the stop string is complete"


def test_eos_stops_without_showing_anything() -> None:
    tokens, outcome, clock, _ = run([b"<eos>", b"hi", b"there"], ids=[1, 0, 2], max_tokens=10)
    assert text_of(tokens) == "hi"
    assert outcome.finish_reason == "stop"
    assert clock.generated_tokens == 1


def test_stop_tokens_add_to_the_models_own_eos_rather_than_replacing_it() -> None:
    pieces = [b"", b"a", b"b", b"c"]
    tokens, outcome, _, _ = run(pieces, ids=[1, 3, 2], stop_tokens=[3], max_tokens=10)
    assert text_of(tokens) == "a" and outcome.finish_reason == "stop"
    tokens, outcome, _, _ = run(pieces, ids=[1, 0, 2], stop_tokens=[3], max_tokens=10)
    assert text_of(tokens) == "a" and outcome.finish_reason == "stop"


def test_max_tokens_bounds_the_count_and_finishes_length() -> None:
    pieces = [b"", *[b"x"] * 20]
    tokens, outcome, clock, pulled = run(pieces, max_tokens=3)
    assert len(tokens) == 3 and clock.generated_tokens == 3
    assert outcome.finish_reason == "length"
    assert len(pulled) == 3, "the engine must not be asked for a token past max_tokens"


def test_max_tokens_releases_held_back_text_on_the_last_token() -> None:
    # "ST" is held back as a possible start of "STOP"; hitting the bound must release it, not lose it.
    tokens, outcome, _, _ = run([b"", b"a", b"ST"], stop=["STOP"], max_tokens=2)
    assert text_of(tokens) == "aST" and outcome.finish_reason == "length"


def test_max_tokens_zero_pulls_nothing() -> None:
    tokens, outcome, _, pulled = run([b"", b"a"], max_tokens=0)
    assert tokens == [] and pulled == [] and outcome.finish_reason == "length"


def test_min_tokens_lets_generation_run_past_an_early_eos() -> None:
    tokens, outcome, clock, _ = run([b"", b"a", b"b"], ids=[1, 0, 2, 0], min_tokens=3, max_tokens=10)
    assert text_of(tokens) == "ab"
    assert clock.generated_tokens == 3  # the early EOS counted as a generated token
    assert outcome.finish_reason == "stop"


def test_cancel_token_stops_within_one_token() -> None:
    cancel = threading.Event()
    pieces = [b"", *[b"x"] * 10]
    clock, outcome = MetricsClock(), LoopOutcome()
    opts = GenerateOptions.parse(cancel=cancel).resolved()
    seen = []
    for token in decode_loop(iter(range(1, 11)), lambda i: pieces[i], opts, eos_ids=[0], clock=clock, outcome=outcome):
        seen.append(token)
        cancel.set()
    assert len(seen) == 1 and outcome.finish_reason == "cancelled"


def test_closing_the_iterator_early_finishes_cancelled_and_closes_the_engine() -> None:
    closed = []

    def engine() -> Iterator[int]:
        try:
            while True:
                yield 1
        finally:
            closed.append(True)

    outcome = LoopOutcome()
    ids = engine()
    stream = decode_loop(
        ids, lambda i: b"x", GenerateOptions(max_tokens=50), eos_ids=[0], clock=MetricsClock(), outcome=outcome
    )
    next(stream)
    stream.close()
    ids.close()
    assert outcome.finish_reason == "cancelled" and closed == [True]


def test_stop_held_text_is_flushed_when_eos_arrives() -> None:
    tokens, outcome, _, _ = run([b"", b"a S"], ids=[1, 0], stop=["STOP"], max_tokens=10)
    assert text_of(tokens) == "a S" and outcome.finish_reason == "stop"


@given(
    st.lists(st.text(min_size=0, max_size=4), min_size=1, max_size=12),
    st.integers(min_value=1, max_value=4),
    st.text(alphabet="ab€", min_size=1, max_size=3),
)
def test_streamed_text_equals_the_decoded_answer_cut_at_the_stop(words: list[str], split: int, stop: str) -> None:
    # Byte pieces cut at arbitrary points, multi-byte characters included: whatever the cut, the joined stream is
    # the whole text up to the first stop string, and never broken UTF-8.
    data = "".join(words).encode()
    pieces = [b""] + [data[i : i + split] for i in range(0, len(data), split)]
    tokens, _, _, _ = run(pieces, stop=[stop], max_tokens=1000)
    full = data.decode()
    expected = full[: full.find(stop)] if stop in full else full
    got = text_of(tokens)
    got.encode("utf-8")
    assert got == expected


# --- MetricsClock -----------------------------------------------------------------------------------------------------


def test_metrics_clock_splits_prefill_and_decode() -> None:
    clock = MetricsClock()
    clock.prefill_done(10)
    clock.generated_tokens = 4
    m = clock.finish("length")
    assert m.prompt_tokens == 10 and m.generated_tokens == 4 and m.finish_reason == "length"
    assert m.total_seconds == pytest.approx(m.prefill_seconds + m.decode_seconds)
    assert m.prefill_tokens_per_second > 0


def test_metrics_clock_without_prefill_counts_everything_as_prefill() -> None:
    m = MetricsClock().finish("error")
    assert m.decode_seconds == 0.0 and m.decode_tokens_per_second == 0.0 and m.finish_reason == "error"

"""The one per-request decoder every engine uses (inference.decoding): SequenceDecoder and ThoughtTracker.

Driven by pushing ids with a table of byte pieces, as an engine does one step at a time, so the rules (stops held
back across pushes, max_tokens, the context running out, the thinking budget and the channels) are checked
without a model; the engines' tests show they feed it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelhost.inference.decoding import SequenceDecoder, ThoughtTracker
from modelhost.inference.generation import ThoughtMarkers
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Token, TokenLogprob

EOS, OPEN, CLOSE = 0, 1, 2
PIECES = {EOS: b"", OPEN: b"<think>", CLOSE: b"</think>", 3: b"a", 4: b"b", 5: b"\xc3", 6: b"\xa9", 7: b"ST", 8: b"OP"}
MARKERS = ThoughtMarkers(OPEN, CLOSE)


def decoder(markers: ThoughtMarkers | None = None, history: Sequence[int] = (), **opts: object) -> SequenceDecoder:
    options = GenerateOptions.parse(opts).resolved()
    tracker = ThoughtTracker.for_request(markers, options, history, constrained=False)
    return SequenceDecoder(options, PIECES.__getitem__, eos_ids={EOS}, thought=tracker)


def push_all(d: SequenceDecoder, ids: Sequence[int]) -> list[Token]:
    out = []
    for i in ids:
        token = d.push(i)
        if token is not None:
            out.append(token)
        if d.done:
            break
    return out


def test_a_stop_string_split_over_pushes_is_held_back_and_never_shown() -> None:
    d = decoder(stop=["STOP"])
    tokens = push_all(d, [3, 7, 8, 4])
    assert "".join(t.text for t in tokens) == "a" and d.done and d.finish_reason == "stop"
    assert [t.text for t in tokens[:2]] == ["a", ""]  # "ST" waits: it may start the stop string


def test_max_tokens_ends_on_the_last_allowed_token_and_zero_ends_before_any_push() -> None:
    d = decoder(max_tokens=2)
    assert [t.text for t in push_all(d, [3, 4, 3])] == ["a", "b"] and d.finish_reason == "length"
    assert d.metrics().generated_tokens == 2
    none = decoder(max_tokens=0)
    assert none.done and none.finish_reason == "length"
    with pytest.raises(RuntimeError):
        none.push(3)


def test_a_stop_token_ends_without_a_token_and_utf8_waits_for_the_whole_character() -> None:
    d = decoder()
    assert [t.text for t in push_all(d, [5, 6])] == ["", "é"]
    assert d.push(EOS) is None and d.done and d.finish_reason == "stop"


def test_a_full_context_flushes_held_text_and_says_length() -> None:
    d = decoder(stop=["STOP"])
    push_all(d, [3, 7])
    tail = d.out_of_room()
    assert tail is not None and tail.text == "ST" and d.done and d.finish_reason == "length"


def test_close_mid_stream_is_a_cancellation_and_logprobs_travel_with_their_token() -> None:
    d = decoder(logprobs=0)
    lp = TokenLogprob("a", b"a", -0.5)
    token = d.push(3, lp)
    assert token is not None and token.logprob is lp
    d.close()
    assert d.done and d.metrics().finish_reason == "cancelled"


def test_channels_follow_the_markers_and_a_prompt_that_opened_a_thought_starts_inside() -> None:
    d = decoder(MARKERS, history=[3, OPEN])
    tokens = push_all(d, [3, CLOSE, 4])
    assert [t.channel for t in tokens] == ["thought", "marker", "content"]
    plain = decoder(MARKERS)
    assert [t.channel for t in push_all(plain, [3, OPEN, 4, CLOSE, 3])] == [
        "content",
        "marker",
        "thought",
        "marker",
        "content",
    ]


@given(st.integers(min_value=1, max_value=6), st.integers(min_value=0, max_value=3))
def test_the_thinking_budget_forces_the_close_after_exactly_its_tokens_in_each_thought(budget: int, extra: int) -> None:
    options = GenerateOptions.parse({"thinking_budget": budget}).resolved()
    tracker = ThoughtTracker.for_request(MARKERS, options, [OPEN], constrained=False)
    for thought in range(budget + extra + 1):
        forced = tracker.forced_token()
        if forced is not None:
            assert forced == CLOSE and thought == budget and tracker.forced
            tracker.follow(forced)
            break
        tracker.follow(3)
    assert not tracker.inside and tracker.channel == "marker"
    tracker.follow(OPEN)  # a second thought gets the whole budget again
    assert tracker.spent == 0 and tracker.forced_token() is None


def test_a_grammar_constrained_request_tracks_no_thought() -> None:
    options = GenerateOptions.parse({"thinking_budget": 1}).resolved()
    tracker = ThoughtTracker.for_request(MARKERS, options, [OPEN], constrained=True)
    assert tracker.markers is None and not tracker.inside and tracker.budget == 0
    tracker.follow(OPEN)
    assert tracker.channel == "content" and tracker.forced_token() is None

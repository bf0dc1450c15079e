"""The transformers backend's small parts without a model: sampler steps, token bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch

from modelhost.backends.transformers import sampling
from modelhost.backends.transformers.sampling import RowState
from modelhost.inference.decoding import ThoughtTracker
from modelhost.inference.generation import ThoughtMarkers, Utf8Stream
from modelhost.inference.options import GenerateOptions
from modelhost.inference.pieces import token_bytes

NEG = float("-inf")


def logits(*values: float) -> torch.Tensor:
    return torch.tensor([list(values)], dtype=torch.float32)


def test_top_k_keeps_the_k_best() -> None:
    out = sampling.apply_top_k(logits(1.0, 4.0, 3.0, 2.0), 2)
    assert out.tolist() == [[NEG, 4.0, 3.0, NEG]]
    assert sampling.apply_top_k(logits(1.0, 2.0), 0).tolist() == [[1.0, 2.0]]


def test_top_p_keeps_the_smallest_set_reaching_p() -> None:
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    out = sampling.apply_top_p(probs.log(), 0.7)
    assert torch.isfinite(out).tolist() == [[True, True, False, False]]
    out = sampling.apply_top_p(probs.log(), 0.01)
    assert torch.isfinite(out).tolist() == [[True, False, False, False]], "the best token always stays"


def test_min_p_is_relative_to_the_best() -> None:
    probs = torch.tensor([[0.6, 0.3, 0.07, 0.03]])
    out = sampling.apply_min_p(probs.log(), 0.1)
    assert torch.isfinite(out).tolist() == [[True, True, True, False]]


def test_repeat_penalty_follows_llama_cpp() -> None:
    step = sampling.repeat_penalty(2.0)
    out = step(logits(4.0, -4.0, 4.0), [RowState(context=[0, 1])])
    assert out.tolist() == [[2.0, -8.0, 4.0]]


def test_suppress_and_min_tokens_per_row() -> None:
    rows = [RowState(context=[], generated=0), RowState(context=[], generated=5)]
    scores = torch.zeros((2, 4))
    scores = sampling.suppress([3, 99])(scores, rows)
    scores = sampling.min_tokens(2, [1])(scores, rows)
    assert scores.tolist() == [[0.0, NEG, 0.0, NEG], [0.0, 0.0, 0.0, NEG]]


def test_thinking_budget_forces_close_once_spent() -> None:
    thought = ThoughtMarkers(open_id=1, close_id=2)
    assert thought.inside_after([5, 1, 7]) and not thought.inside_after([1, 2, 7]) and not thought.inside_after([7])
    opts = GenerateOptions.parse(temperature=0, thinking_budget=2).resolved()
    sampler = sampling.make_sampler(opts, stop_ids=[0], device=torch.device("cpu"))
    tracker = ThoughtTracker.for_request(thought, opts, [1], constrained=False)  # the prompt opened the thought
    row = RowState(context=[1])
    favourite = logits(0.0, 0.0, 0.0, 9.0)

    def draw() -> int:
        # What the engine does per draw: ask the tracker for a forced id, sample, let the tracker follow.
        row.forced = tracker.forced_token()
        token = sampler(favourite, [row])[0]
        tracker.follow(token)
        return token

    assert [draw() for _ in range(3)] == [3, 3, 2]
    assert tracker.forced and not tracker.inside
    assert draw() == 3, "outside the thought the budget no longer applies"


def test_seeded_draws_are_reproducible() -> None:
    def draws(seed: int) -> list[int]:
        opts = GenerateOptions.parse(temperature=1.5, seed=seed).resolved()
        sampler = sampling.make_sampler(opts, stop_ids=[], device=torch.device("cpu"))
        row = RowState(context=[])
        return [sampler(torch.zeros((1, 50)), [row])[0] for _ in range(20)]

    assert draws(3) == draws(3) and draws(3) != draws(4)


def test_greedy_is_argmax_and_leaves_logits_untouched() -> None:
    opts = GenerateOptions.parse(temperature=0, suppress_tokens=[2]).resolved()
    sampler = sampling.make_sampler(opts, stop_ids=[], device=torch.device("cpu"))
    raw = logits(0.0, 1.0, 5.0)
    assert sampler(raw, [RowState(context=[])]) == [1]
    assert raw.tolist() == [[0.0, 1.0, 5.0]], "steps must work on a copy (classify returns the raw logits)"


def test_token_bytes_rebuild_utf8_across_tokens(tiny_llama_dir: Path, tiny_thinking_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_llama_dir))
    piece = token_bytes(tokenizer)
    text = "héllo wörld ✓ 🙂 日本語"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert b"".join(piece(i) for i in ids) == text.encode("utf-8")
    assert any(not _decodes(piece(i)) for i in ids), "the tiny vocabulary should split some character over tokens"
    stream = Utf8Stream()
    assert "".join(stream.feed(piece(i)) for i in ids) == text
    assert piece(tokenizer.convert_tokens_to_ids("<|im_end|>")) == b"", "special tokens show nothing"
    thinking = AutoTokenizer.from_pretrained(str(tiny_thinking_dir))
    assert token_bytes(thinking)(thinking.convert_tokens_to_ids("</think>")) == b"</think>"


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True

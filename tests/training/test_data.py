"""Training records and batches, without a model."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from modelhost.errors import InvalidInputError
from modelhost.training.data import Example, epoch_batches, read_jsonl, record_kind, split_eval, stream_batches


def test_record_kinds_and_what_is_refused() -> None:
    assert record_kind({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}) == (
        "messages"
    )
    assert record_kind({"prompt": "p", "completion": "c"}) == "prompt"
    assert record_kind({"text": "t"}) == "text"
    for bad in (
        [],
        {},
        {"messages": [{"role": "user", "content": "no answer"}]},
        {"messages": [{"role": "wizard", "content": "x"}, {"role": "assistant", "content": "a"}]},
        {"prompt": "p"},
        {"prompt": "p", "completion": ""},
        {"text": 3},
    ):
        with pytest.raises(InvalidInputError):
            record_kind(bad)


def test_read_jsonl_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "a"}\n\n{"text": "b"}\n')
    assert [r["text"] for r in read_jsonl(path)] == ["a", "b"]
    path.write_text('{"text": "a"}\nnot json\n')
    with pytest.raises(InvalidInputError, match=r"d\.jsonl:2: not JSON"):
        read_jsonl(path)
    path.write_text("\n")
    with pytest.raises(InvalidInputError, match="no training records"):
        read_jsonl(path)


def _examples(lengths: list[int]) -> list[Example]:
    return [Example(tuple(range(n)), tuple(range(n))) for n in lengths]


def test_an_epoch_uses_every_example_once_and_batches_pad_little() -> None:
    rng = random.Random(0)
    lengths = [rng.randint(2, 200) for _ in range(100)]
    examples = _examples(lengths)
    batches = epoch_batches(examples, 4, random.Random(1))
    assert sorted(id(e) for b in batches for e in b) == sorted(id(e) for e in examples)
    padded = sum(len(b) * max(len(e.ids) for e in b) for b in batches)
    naive = sum(4 * max(lengths[i : i + 4]) for i in range(0, 100, 4))  # batches in file order
    assert padded < 0.8 * naive


def test_the_same_seed_gives_the_same_order() -> None:
    examples = _examples(list(range(2, 30)))
    a, b = stream_batches(examples, 3, 7), stream_batches(examples, 3, 7)
    first = [[e.ids for e in next(a)] for _ in range(25)]
    assert first == [[e.ids for e in next(b)] for _ in range(25)]


def test_split_eval_holds_out_a_seeded_fraction() -> None:
    records = list(range(10))
    train, held = split_eval(records, 0.2, seed=0)
    assert len(held) == 2 and sorted(train + held) == records
    assert split_eval(records, 0.2, seed=0) == (train, held)
    assert split_eval(records, 0.0, seed=0) == (records, [])
    assert split_eval([1], 0.5, seed=0) == ([1], [])

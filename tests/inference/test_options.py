"""Option validation and precedence: one error naming the option, and request > checkpoint > FALLBACK."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from modelhost.errors import InvalidOptionError
from modelhost.inference.options import (
    DEFAULT_MAX_TOKENS,
    FALLBACK,
    MAX_TOKENS_LIMIT,
    GenerateOptions,
    LoadOptions,
)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_tokens", -1),
        ("max_tokens", MAX_TOKENS_LIMIT + 1),
        ("max_tokens", True),  # a bool is an int to Python, a bug to us
        ("max_tokens", 1.5),
        ("temperature", "hot"),
        ("temperature", float("nan")),
        ("temperature", -0.1),
        ("top_p", 1.5),
        ("min_p", -0.01),
        ("top_k", -1),
        ("seed", -1),
        ("stop", [""]),
        ("stop", [1]),
        ("stop", 5),
        ("stop_tokens", [-1]),
        ("stop_tokens", "abc"),
        ("suppress_tokens", [True]),
        ("min_tokens", -3),
        ("repeat_penalty", -1.0),
        ("logits", 1),
        ("enable_thinking", "yes"),
        ("thinking_budget", -1),
        ("cancel", object()),
        ("no_such_option", 1),
    ],
)
def test_a_bad_generation_option_is_refused_naming_it(name: str, value: Any) -> None:
    with pytest.raises(InvalidOptionError) as info:
        GenerateOptions.parse({name: value})
    assert info.value.option == name
    assert name in str(info.value)
    assert info.value.code == "invalid_option"


def test_none_means_not_set() -> None:
    assert GenerateOptions.parse(max_tokens=None, temperature=None) == GenerateOptions()


def test_single_values_become_tuples() -> None:
    opts = GenerateOptions.parse(stop="END", stop_tokens=7, suppress_tokens=[1, 2])
    assert opts.stop == ("END",) and opts.stop_tokens == (7,) and opts.suppress_tokens == (1, 2)


def test_mapping_and_keywords_merge_with_keywords_winning() -> None:
    assert GenerateOptions.parse({"max_tokens": 3}, max_tokens=4).max_tokens == 4


def test_cancel_accepts_anything_with_is_set() -> None:
    event = threading.Event()
    opts = GenerateOptions.parse(cancel=event)
    assert not opts.cancelled()
    event.set()
    assert opts.cancelled()


def test_resolved_precedence_request_then_checkpoint_then_fallback() -> None:
    checkpoint = {"temperature": 0.3, "top_p": 0.9, "top_k": None}
    opts = GenerateOptions.parse(temperature=0.0).resolved(checkpoint)
    assert opts.temperature == 0.0  # the request wins, even when it is falsy
    assert opts.top_p == 0.9  # the checkpoint fills what the request left unset
    assert opts.top_k == FALLBACK["top_k"]  # None in the checkpoint is "not set" too
    assert opts.max_tokens == DEFAULT_MAX_TOKENS
    assert opts.repeat_penalty == FALLBACK["repeat_penalty"]


def test_resolved_validates_checkpoint_values() -> None:
    with pytest.raises(InvalidOptionError, match="top_p"):
        GenerateOptions().resolved({"top_p": 7})


def test_resolved_without_anything_to_fill_returns_the_same_object() -> None:
    opts = GenerateOptions.parse(**{k: v for k, v in FALLBACK.items()})
    assert opts.resolved() is opts


@pytest.mark.parametrize(("temperature", "top_k", "greedy"), [(0.0, None, True), (0.5, 1, True), (0.5, 5, False)])
def test_greedy(temperature: float, top_k: int | None, greedy: bool) -> None:
    assert GenerateOptions.parse(temperature=temperature, top_k=top_k).greedy is greedy


def test_load_options_parse_and_refuse() -> None:
    opts = LoadOptions.parse(context_length=2048, threads=2, gpu_layers=-1, adapter="/x", backend="llama_cpp")
    assert (opts.context_length, opts.threads, opts.gpu_layers, opts.adapter) == (2048, 2, -1, "/x")
    for bad in (
        {"context_length": 0},
        {"threads": 0},
        {"gpu_layers": -2},
        {"parallel": 0},
        {"adapter": ""},
        {"dtype": 3},
        {"bogus": 1},
    ):
        with pytest.raises(InvalidOptionError) as info:
            LoadOptions.parse(bad)
        assert info.value.option == next(iter(bad))

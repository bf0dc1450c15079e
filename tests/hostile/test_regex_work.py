"""Issue 35, item 2: a `pattern` whose grammar would wedge llama.cpp's masked steps is refused at admission, with a
400 that says why, before any step runs; the work of deciding that is itself bounded.

Before, `{"type": "string", "pattern": "^(.?){24}$"}` held the model thread 78 s (18.4 s a masked step on a quiet
machine, and the bound on a step's CPU was checked only after the step), `^(.?){32}$` over 7 minutes, and
`^([a-z]?){32}z([a-z]?){32}$` and an anyOf of 50 x `(.?){32}` likewise, while a 4-token chat sent beside them
waited the whole time. The static limits passed them: what blows up is the number of ways the grammar can match
one token's characters (inference/pattern_paths.py counts it, with its own work bounded).

The fuzzer draws patterns that lean on what makes ways multiply (optional items repeated, overlapping
alternatives, loops), checks each as llama.cpp's backend does at admission, and gives every accepted one to
llama.cpp's grammar for one masked step over the tiny model's vocabulary: a refusal is a clear SchemaError, an
acceptance a grammar llama.cpp parses and masks with. The time each check and step took is reported as a
hypothesis event (`--hypothesis-show-statistics`), never asserted. The example count comes from the hypothesis
profile (tests/conftest.py).
"""

from __future__ import annotations

import ctypes
import json
import math
import re._parser as sre_parse
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from modelhost.errors import InvalidOptionError
from modelhost.inference.pattern_paths import WORK, TooCostly, pattern_paths

from .regexes import regexes
from .serving import ServeProcess, serve

pytest.importorskip("llama_cpp")

#: The reported cases, each a whole `response_format` schema.
REPORTED: dict[str, dict[str, Any]] = {
    "(.?){24}": {"type": "string", "pattern": "^(.?){24}$"},
    "(.?){32}": {"type": "string", "pattern": "^(.?){32}$"},
    "([a-z]?){32}z([a-z]?){32}": {"type": "string", "pattern": "^([a-z]?){32}z([a-z]?){32}$"},
    "anyOf of 50 x (.?){32}": {"anyOf": [{"type": "string", "pattern": "^(.?){32}$"}] * 50},
}


def _ways(pattern: str, cap: int = 10**12) -> int:
    return pattern_paths(list(sre_parse.parse(pattern)), cap)


@pytest.mark.parametrize("n", [4, 8, 12, 16])
def test_a_repeated_optional_item_counts_its_binomial_ways(n: int) -> None:
    """(.?){N} matches d characters in C(N, d) ways, the most at d = N/2: the count is the grammar's real fan-out."""
    assert _ways(f"^(.?){{{n}}}$") == math.comb(n, n // 2)
    assert _ways(f"^(x?){{{n}}}$") == math.comb(n, n // 2), "which characters the vocabulary spells is not assumed"


@pytest.mark.parametrize(
    "pattern",
    [r"^.{0,32}$", r"^[a-z]{0,1000}$", r"^\d{3}-\d{4}$", r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}$", r"^.*$"],
)
def test_patterns_without_ambiguity_count_one_way(pattern: str) -> None:
    assert _ways(pattern) == 1


def test_real_patterns_stay_under_llama_cpps_bound() -> None:
    from modelhost.backends.llama_cpp.grammar import LIMITS

    assert LIMITS.max_paths is not None
    for pattern in (
        r"^\w+(\.\w+)*@\w+(\.\w+)+$",
        r"^\+?\d{0,3}[- ]?\(?\d{0,4}\)?[- ]?\d{0,4}$",
        r"^[A-Z][a-z]+( [A-Z][a-z]+)*$",
        r"^(?:[a-z0-9-]+\.)+[a-z]{2,}$",
    ):
        assert _ways(pattern) <= LIMITS.max_paths, pattern


def test_endless_ways_and_costly_counts_are_refused_in_words() -> None:
    with pytest.raises(TooCostly, match="without bound"):
        _ways("^(a?)*$")
    with pytest.raises(TooCostly, match="ways along one token"):
        _ways("^(a|a)*$", cap=1000)
    with pytest.raises(TooCostly, match=f"more than {WORK} steps"):
        _ways("^(ab|cd|ef|gh){1000}$")


# The fuzzer: patterns that multiply ways, checked and (when accepted) masked with by llama.cpp's grammar.

_ATOMS = st.sampled_from(["a", "z", ".", "[a-z]", "[^a]", "\\d", "\\s", " ", "-"])


_REGEX = regexes(_ATOMS, st.integers(1, 40))


SCHEMAS = st.one_of(
    _REGEX.map(lambda r: {"type": "string", "pattern": f"^({r})$"}),
    st.lists(_REGEX, min_size=2, max_size=12).map(
        lambda rs: {"anyOf": [{"type": "string", "pattern": f"^({r})$"} for r in rs]}
    ),
)


@pytest.fixture(scope="module")
def vocab(tiny_llama_gguf: Path) -> Iterator[tuple[Any, int, int]]:
    """The tiny model's llama.cpp vocabulary handle, its size, and the token of a lone '"' (a string's start)."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(tiny_llama_gguf), vocab_only=True, verbose=False)
    handle = llama_cpp.llama_model_get_vocab(llm._model.model)
    quote = llm.tokenize(b'"', add_bos=False, special=False)
    assert len(quote) == 1
    yield handle, int(llama_cpp.llama_vocab_n_tokens(handle)), quote[0]
    llm.close()


def _one_masked_step(vocab: tuple[Any, int, int], gbnf: str) -> int:
    """Mask the whole vocabulary once, right after the string's opening quote; the tokens left allowed."""
    import llama_cpp

    from modelhost.backends.llama_cpp.grammar import GrammarSampler, _init

    handle, size, quote = vocab
    sampler = _init(handle, gbnf)
    try:
        llama_cpp.llama_sampler_accept(sampler, quote)
        cand = np.zeros(size, dtype=GrammarSampler._DTYPE)
        cand["id"] = np.arange(size)
        data = cand.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data))
        array = llama_cpp.llama_token_data_array(data, size, -1, False)
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
        return int(np.isfinite(cand["logit"]).sum())
    finally:
        llama_cpp.llama_sampler_free(sampler)


def _bucket(seconds: float) -> str:
    return next(f"<= {b} ms" for b in (1, 10, 100, 1000, 10**9) if seconds * 1000 <= b)


@pytest.mark.fuzz
@given(schema=SCHEMAS)
def test_a_fuzzed_pattern_is_refused_in_words_or_masked_with(vocab: tuple[Any, int, int], schema: Any) -> None:
    from modelhost.backends.llama_cpp import grammar

    started = time.thread_time()
    try:
        gbnf = grammar.gbnf_for_schema(json.dumps(schema, separators=(",", ":")))
        grammar.parse(vocab[0], gbnf)
    except InvalidOptionError as exc:
        event(f"refused: {exc.detail.split(':')[0][:40]}")
        event(f"check {_bucket(time.thread_time() - started)}")
        assert exc.option == "json_schema" and exc.detail, exc
        return
    event(f"check {_bucket(time.thread_time() - started)}")
    started = time.thread_time()
    allowed = _one_masked_step(vocab, gbnf)
    event(f"accepted; one masked step {_bucket(time.thread_time() - started)}")
    assert allowed >= 0


# End to end: the reported schemas through the OpenAI door of `modelhost serve` on the default model (SmolLM2),
# each beside a 4-token chat.


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serve(["--model", "default"], str(tmp_path_factory.mktemp("jobs"))) as server:
        server.model = server.http.get("/v1/models").json()["data"][0]["id"]
        yield server


def _chat(server: ServeProcess, schema: dict[str, Any] | None) -> Any:
    body: dict[str, Any] = {
        "model": server.model,
        "messages": [{"role": "user", "content": "Give me JSON."}],
        "max_tokens": 4 if schema is None else 16,
        "temperature": 0,
    }
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    return server.http.post("/v1/chat/completions", json=body)


@pytest.mark.parametrize("case", list(REPORTED))
def test_a_reported_pattern_is_a_400_before_any_step_and_a_chat_beside_it_answers(
    served: ServeProcess, case: str
) -> None:
    with ThreadPoolExecutor(2) as pool:
        hostile = pool.submit(_chat, served, REPORTED[case])
        beside = pool.submit(_chat, served, None)
        refused, answered = hostile.result(), beside.result()
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["param"] == "response_format" and error["code"] == "invalid_option", error
    assert "ways along one token" in error["message"], "refused by counting at admission, not after a step ran"
    assert answered.status_code == 200, answered.text
    assert answered.json()["choices"][0]["finish_reason"] in ("length", "stop")
    assert served.alive(), served.log()

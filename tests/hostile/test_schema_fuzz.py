"""Fuzzing JSON Schemas into both grammar engines, through the OpenAI door of a `modelhost serve` subprocess.

Property, for every generated schema: the answer is a typed refusal (400 naming `response_format`) or valid JSON of
the schema (unless `max_tokens` cut it: finish_reason "length"); the process lives; its memory does not grow with
the examples. The schemas lean on what broke the engines (issue 25): counts from tiny to huge, patterns with
ranges, empty classes, control characters, repeated optional groups, and integer bounds past a double.

The example count comes from the hypothesis profile (tests/conftest.py: short in the suite, long in `make fuzz`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from .regexes import regexes
from .serving import ServeProcess, serve

pytest.importorskip("llama_cpp")
pytest.importorskip("llguidance")
jsonschema = pytest.importorskip("jsonschema")

#: Memory the server may gain over a whole fuzz run: its caches (64 compiled grammars) and allocator slack, far
#: below what one leaked grammar per example of a long run would add.
RSS_GROWTH_BYTES = 512 << 20

COUNTS = st.one_of(st.integers(0, 12), st.sampled_from([-1, 1000, 1001, 10_000, 20_000, 10**9]))

_ATOMS = st.sampled_from(["a", "b", "[a-c]", "[^a]", "\\d", "[b-a]", "\\x00", "[^\\x00-\\U0010FFFF]", ".", " "])


_REGEX = regexes(_ATOMS, st.integers(0, 40) | st.sampled_from([1000, 100_000]))


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    string = st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={"minLength": COUNTS, "maxLength": COUNTS, "pattern": _REGEX.map(lambda r: f"^({r})$")},
    )
    bound = st.one_of(st.integers(-100, 100), st.just(int("9" * 400)), st.just(-(10**20)))
    integer = st.fixed_dictionaries({"type": st.just("integer")}, optional={"minimum": bound, "maximum": bound})
    return st.one_of(
        string, integer, st.just({"type": "boolean"}), st.just({"enum": ["red", "green"]}), st.just({"type": "null"})
    )


SCHEMAS = st.recursive(
    _leaf(),
    lambda inner: st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("array"), "items": inner}, optional={"minItems": COUNTS, "maxItems": COUNTS}
        ),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, min_size=1, max_size=3).map(
            lambda props: {"type": "object", "properties": props, "required": sorted(props)}
        ),
        st.lists(inner, min_size=2, max_size=3).map(lambda options: {"anyOf": options}),
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module", params=["llama_cpp", "transformers"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    # The tiny random models: a grammar is all that makes their answers JSON, so any leak of it shows.
    fixture = "tiny_llama_gguf" if request.param == "llama_cpp" else "tiny_llama_dir"
    model = str(request.getfixturevalue(fixture))
    with serve(["--model", model], str(tmp_path_factory.mktemp("jobs"))) as served:
        served.model = served.http.get("/v1/models").json()["data"][0]["id"]
        served.baseline_rss = served.rss_bytes()  # type: ignore[attr-defined]
        yield served
        growth = served.rss_bytes() - served.baseline_rss  # type: ignore[attr-defined]
        assert growth < RSS_GROWTH_BYTES, f"the server grew {growth >> 20} MB over the fuzz run"


@pytest.mark.fuzz
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(schema=SCHEMAS, seed=st.integers(0, 2**32))
def test_a_fuzzed_schema_is_refused_or_followed(server: ServeProcess, schema: dict[str, Any], seed: int) -> None:
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": "Answer."}],
        "max_tokens": 48,
        "temperature": 1.0,
        "seed": seed,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    }
    r = server.http.post("/v1/chat/completions", json=body)
    assert server.alive(), f"{json.dumps(schema)[:500]}\n{server.log()}"
    if r.status_code == 400:
        error = r.json()["error"]
        assert error["param"] == "response_format" and error["code"] == "invalid_option", error
        event("refused")  # --hypothesis-show-statistics says how the examples split
        return
    assert r.status_code == 200, (r.status_code, r.text[:500], json.dumps(schema)[:500])
    choice = r.json()["choices"][0]
    event(f"answered, finish_reason {choice['finish_reason']}")
    if choice["finish_reason"] == "length":
        return  # cut short by max_tokens: a grammar guarantees the shape, not that a random model ends it
    jsonschema.validate(json.loads(choice["message"]["content"]), schema)

"""Random request bodies into the real OpenAI/Ollama HTTP door on the tiny GGUF model (llama.cpp): every field name
each endpoint reads, with hostile values. Whatever the body, the answer is a 200 or a 4xx with a JSON error body,
never a 500, and the door keeps serving. The example count comes from the hypothesis profile (tests/conftest.py).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from modelhost.http import HttpServer

pytest.importorskip("llama_cpp")

MESSAGES = [{"role": "user", "content": "Hi"}]

#: Each endpoint's fields (the ones its parser reads), and a minimal valid body the fuzzer starts from.
ENDPOINTS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "/v1/chat/completions": (
        ("model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stream", "stop",
         "seed", "tools", "tool_choice", "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty",
         "logit_bias", "user", "stream_options", "reasoning_effort", "parallel_tool_calls"),
        {"messages": MESSAGES, "max_tokens": 2},
    ),
    "/v1/completions": (
        ("model", "prompt", "max_tokens", "temperature", "top_p", "n", "stream", "stop", "seed", "echo", "suffix",
         "logprobs", "best_of", "user"),
        {"prompt": "Hi", "max_tokens": 2},
    ),
    "/v1/embeddings": (("model", "input", "encoding_format", "dimensions", "user"), {"input": "Hi"}),
    "/api/chat": (
        ("model", "messages", "stream", "options", "keep_alive", "think", "tools", "format"),
        {"messages": MESSAGES, "stream": False, "options": {"num_predict": 2}},
    ),
    "/api/generate": (
        ("model", "prompt", "system", "template", "raw", "stream", "options", "keep_alive", "images", "context",
         "suffix", "think"),
        {"prompt": "Hi", "stream": False, "options": {"num_predict": 2}},
    ),
    "/api/embed": (("model", "input", "truncate", "keep_alive", "options"), {"input": "Hi"}),
}  # fmt: skip
OPTION_FIELDS = ("num_predict", "temperature", "top_k", "top_p", "seed", "stop", "num_ctx", "repeat_penalty")

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-2, max_value=40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["user", "assistant", "system", "tool", "json", "auto", "none", "required", "", "\x00", "\ud7ff"]),
)
KEYS = st.sampled_from(["role", "content", "type", "name", "function", "text", "images"])
values = st.recursive(
    leaf, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)), max_leaves=8
)


@st.composite
def bodies(draw: st.DrawFn) -> tuple[str, Any]:
    path = draw(st.sampled_from(sorted(ENDPOINTS)))
    fields, base = ENDPOINTS[path]
    if draw(st.integers(0, 9)) == 0:
        return path, draw(values)  # not even an object
    body = dict(base)
    for key in draw(st.lists(st.sampled_from(fields), min_size=1, max_size=4, unique=True)):
        body[key] = draw(values)
    if "options" in fields and draw(st.booleans()):
        body["options"] = {k: draw(values) for k in draw(st.lists(st.sampled_from(OPTION_FIELDS), max_size=3))}
    return path, body


@pytest.fixture(scope="module")
def door(tiny_gguf_door: HttpServer) -> HttpServer:
    """The module's door over the tiny GGUF (tests/http/conftest.py)."""
    return tiny_gguf_door


@pytest.mark.fuzz
def test_random_bodies_get_a_200_or_a_json_4xx_never_a_500(door: HttpServer) -> None:
    with httpx.Client(base_url=door.url, timeout=300) as client:
        # Found by this fuzzer: a `model` that is no string reached the created-models lookup (a dict key) as 500.
        @example(("/api/chat", {"messages": MESSAGES, "stream": False, "model": [None]}))
        @example(("/api/generate", {"prompt": "Hi", "stream": False, "model": {"a": 1}}))
        @given(bodies())
        def run(case: tuple[str, Any]) -> None:
            path, body = case
            r = client.post(path, json=body)
            assert r.status_code < 500, (path, body, r.status_code, r.text[:500])
            if r.status_code >= 400:
                assert r.headers["content-type"].startswith("application/json"), (path, body, r.headers)
                assert r.json(), (path, body)
            else:
                assert r.status_code == 200, (path, body, r.status_code)
                r.read()  # a stream is read to its end

        run()
        assert client.get("/health").status_code == 200
        ok = client.post("/v1/chat/completions", json={"messages": MESSAGES, "max_tokens": 2})
        assert ok.status_code == 200, ok.text

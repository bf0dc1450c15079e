"""logprobs / top_logprobs, seed and stream_options.include_usage through the HTTP door: the real `openai` client
against a real server on loopback over the tiny random Llama GGUF (llama.cpp, served through its batch engine).

Log-probabilities are the model's own (raw logits, before sampling settings), so they must agree with what
`classify(logits=True)` returns for the same prompt, evaluated the same way (one fresh prefill).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
from http_support import LoopThread, scripted_host, serving

import modelhost.inference
from modelhost.host import Host
from modelhost.http import HttpServer
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytest.importorskip("llama_cpp")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(loop_thread: LoopThread, tiny_llama_gguf: Path) -> Iterator[HttpServer]:
    host = Host(lambda: modelhost.inference.load_model(str(tiny_llama_gguf), backend="llama_cpp"), name="tiny")
    with serving(loop_thread, host) as server:
        yield server


def client_of(server: HttpServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=STATE_WAIT_SECONDS)


def ask(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def test_chat_logprobs_cover_every_token_streamed_or_not(tiny: HttpServer) -> None:
    client = client_of(tiny)
    kw: dict[str, Any] = {"model": "tiny", "messages": ask("hello"), "max_tokens": 12, "temperature": 0}
    whole = client.chat.completions.create(**kw, logprobs=True, top_logprobs=3)
    choice = whole.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    entries = choice.logprobs.content
    assert whole.usage is not None and len(entries) == whole.usage.completion_tokens
    # The tokens' bytes spell the answer (which drops a trailing half character: it was never completed).
    spelled = b"".join(bytes(e.bytes or []) for e in entries).decode("utf-8", "replace")
    assert choice.message.content and spelled.startswith(choice.message.content)
    for e in entries:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert e.top_logprobs[0].logprob == e.logprob  # greedy: the chosen token is the most likely one
        assert [t.logprob for t in e.top_logprobs] == sorted((t.logprob for t in e.top_logprobs), reverse=True)
    streamed = []
    for chunk in client.chat.completions.create(**kw, logprobs=True, top_logprobs=3, stream=True):
        if chunk.choices and chunk.choices[0].logprobs and chunk.choices[0].logprobs.content:
            streamed.extend(chunk.choices[0].logprobs.content)
    # The same tokens; the values agree to rounding (the second request reuses the cached prompt, and llama.cpp's
    # one-token evaluation of its last token rounds a little differently from the whole prompt's).
    assert [e.token for e in streamed] == [e.token for e in entries]
    assert [e.logprob for e in streamed] == pytest.approx([e.logprob for e in entries], abs=1e-3)
    plain = client.chat.completions.create(**kw)
    assert plain.choices[0].logprobs is None and plain.choices[0].message.content == choice.message.content


def test_completion_logprobs_agree_with_classify_logits(tiny: HttpServer, tiny_llama_gguf: Path) -> None:
    prompt = "The quick brown fox"
    answer = client_of(tiny).completions.create(model="tiny", prompt=prompt, max_tokens=1, temperature=0, logprobs=2)
    lp = answer.choices[0].logprobs
    assert lp is not None and lp.tokens and lp.token_logprobs and lp.top_logprobs and lp.text_offset == [0]
    with modelhost.inference.load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1) as model:
        result = model.classify([prompt], logits=True, temperature=0)[0]
    assert result.logits is not None
    row = result.logits.astype(np.float64)
    logsum = row.max() + math.log(float(np.exp(row - row.max()).sum()))
    assert lp.token_logprobs[0] == pytest.approx(row[result.token.id] - logsum, abs=1e-3)
    assert lp.tokens[0] == result.token.text and len(lp.top_logprobs[0]) == 2


def test_seed_repeats_a_sampled_answer_and_usage_streams_last(tiny: HttpServer) -> None:
    client = client_of(tiny)
    kw: dict[str, Any] = {"model": "tiny", "messages": ask("hi"), "max_tokens": 10, "temperature": 1.0}
    first, again, other = (client.chat.completions.create(**kw, seed=s).choices[0].message.content for s in (7, 7, 8))
    assert first == again and first != other
    chunks = list(client.chat.completions.create(**kw, seed=7, stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == first
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 10


def test_logprob_requests_a_backend_cannot_serve_are_400s_naming_the_parameter(
    tiny: HttpServer, loop_thread: LoopThread
) -> None:
    client = client_of(tiny)
    for kw, param in (({"top_logprobs": 2}, "top_logprobs"), ({"logprobs": True, "top_logprobs": 21}, "top_logprobs")):
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="tiny", messages=ask("hi"), **kw)
        assert info.value.body["param"] == param  # type: ignore[index]
    with serving(loop_thread, scripted_host()) as scripted:
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError) as info:
                client_of(scripted).chat.completions.create(
                    model="scripted", messages=ask("hi"), logprobs=True, stream=stream
                )
            assert info.value.body["param"] == "logprobs"  # type: ignore[index]


# --- the transformers backend -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_tf(loop_thread: LoopThread, tiny_llama_dir: Path) -> Iterator[HttpServer]:
    host = Host(lambda: modelhost.inference.load_model(str(tiny_llama_dir), backend="transformers"), name="tiny")
    with serving(loop_thread, host) as server:
        yield server


def test_transformers_chat_logprobs_cover_every_token_streamed_or_not(tiny_tf: HttpServer) -> None:
    client = client_of(tiny_tf)
    kw: dict[str, Any] = {"model": "tiny", "messages": ask("hello"), "max_tokens": 12, "temperature": 0}
    whole = client.chat.completions.create(**kw, logprobs=True, top_logprobs=3)
    entries = whole.choices[0].logprobs.content  # type: ignore[union-attr]
    assert entries is not None and whole.usage is not None and len(entries) == whole.usage.completion_tokens
    for e in entries:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert e.top_logprobs[0].logprob == e.logprob  # greedy: the chosen token is the most likely one
        assert [t.logprob for t in e.top_logprobs] == sorted((t.logprob for t in e.top_logprobs), reverse=True)
    streamed = []
    for chunk in client.chat.completions.create(**kw, logprobs=True, top_logprobs=3, stream=True):
        if chunk.choices and chunk.choices[0].logprobs and chunk.choices[0].logprobs.content:
            streamed.extend(chunk.choices[0].logprobs.content)
    assert [e.token for e in streamed] == [e.token for e in entries]
    assert [e.logprob for e in streamed] == pytest.approx([e.logprob for e in entries], abs=1e-4)


def test_transformers_completion_logprobs_agree_with_classify_logits(tiny_tf: HttpServer, tiny_llama_dir: Path) -> None:
    prompt = "The quick brown fox"
    answer = client_of(tiny_tf).completions.create(model="tiny", prompt=prompt, max_tokens=1, temperature=0, logprobs=2)
    lp = answer.choices[0].logprobs
    assert lp is not None and lp.tokens and lp.token_logprobs and lp.top_logprobs
    with modelhost.inference.load_model(str(tiny_llama_dir), backend="transformers") as model:
        result = model.classify([prompt], logits=True, temperature=0)[0]
    assert result.logits is not None
    row = result.logits.astype(np.float64)
    logsum = row.max() + math.log(float(np.exp(row - row.max()).sum()))
    assert lp.token_logprobs[0] == pytest.approx(row[result.token.id] - logsum, abs=1e-4)
    assert lp.tokens[0] == result.token.text and len(lp.top_logprobs[0]) == 2

"""Embeddings through the HTTP door: the real `openai` client (and httpx for Ollama's routes) against a real server
on loopback, over the tiny random Llama GGUF and the embedded SmolLM2, both on llama.cpp's batching host.

What only the door can get wrong is checked here: both encodings carry the same float32 bits, a batch answers every
input in order, every refusal names its parameter, the routes need the API key, and an embedding overtakes a long
streamed chat instead of queueing behind it.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from http_support import LoopThread, scripted_host, serving

import modelhost.inference
from modelhost.host import Host
from modelhost.http import HttpServer
from modelhost.http.embeddings import decode_base64, encode_base64
from modelhost.inference.capabilities import MAX_EMBEDDING_INPUTS
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytest.importorskip("llama_cpp")

KEY = "k3y"
TINY_CONTEXT = 64
TEXTS = ["The quick brown fox", "jumps over the lazy dog.", "What is the answer?"]
LONG = " ".join(["fox"] * (TINY_CONTEXT * 2))


def client_of(server: HttpServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, timeout=STATE_WAIT_SECONDS)


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def tiny(loop_thread: LoopThread, tiny_llama_gguf: Path) -> Iterator[HttpServer]:
    def load() -> Any:
        return modelhost.inference.load_model(
            str(tiny_llama_gguf), backend="llama_cpp", threads=1, context_length=TINY_CONTEXT
        )

    with serving(loop_thread, Host(load, name="tiny"), api_key=KEY) as server:
        yield server


def refused(call: Any) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as caught:
        call()
    return caught.value


def param_of(err: openai.APIStatusError) -> str | None:
    body = err.body if isinstance(err.body, dict) else {}
    return body.get("param")


def test_float_and_base64_carry_the_same_vectors(tiny: HttpServer) -> None:
    client = client_of(tiny)
    floats = client.embeddings.create(model="tiny", input=TEXTS, encoding_format="float")
    # No format named: the openai client asks for base64 and decodes it itself (np.frombuffer, float32).
    default = client.embeddings.create(model="tiny", input=TEXTS)
    explicit = client.embeddings.create(model="tiny", input=TEXTS, encoding_format="base64")
    a = np.array([d.embedding for d in floats.data], dtype=np.float32)
    b = np.array([d.embedding for d in default.data], dtype=np.float32)
    c = np.stack([decode_base64(d.embedding) for d in explicit.data])  # type: ignore[arg-type]
    assert a.shape == (3, 64)
    assert np.array_equal(a, b) and np.array_equal(a, c), "every encoding carries the same float32 bits"
    raw = base64.b64decode(explicit.data[0].embedding)  # type: ignore[arg-type]
    assert raw == a[0].astype("<f4").tobytes() and encode_base64(a[0]) == explicit.data[0].embedding


def test_batched_inputs_answer_in_order(tiny: HttpServer) -> None:
    client = client_of(tiny)
    batch = client.embeddings.create(model="tiny", input=TEXTS, encoding_format="float", user="someone")
    assert batch.object == "list" and batch.model == "tiny"
    assert [d.index for d in batch.data] == [0, 1, 2] and all(d.object == "embedding" for d in batch.data)
    assert batch.usage.prompt_tokens == batch.usage.total_tokens > len(TEXTS)
    vectors = np.array([d.embedding for d in batch.data])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(vectors[0], vectors[1], atol=1e-3)
    one_by_one = np.array(
        [client.embeddings.create(model="tiny", input=t, encoding_format="float").data[0].embedding for t in TEXTS]
    )
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-4)  # fp32 model: kernels round alike at both shapes
    again = client.embeddings.create(model="tiny", input=TEXTS[0], encoding_format="float").data[0].embedding
    assert again == one_by_one[0].tolist()


def test_refusals_name_the_parameter(tiny: HttpServer) -> None:
    client = client_of(tiny)
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"input": []}, "input", "empty"),
        ({"input": ["fine", ""]}, "input", "input[1]"),
        ({"input": ["x"] * (MAX_EMBEDDING_INPUTS + 1)}, "input", str(MAX_EMBEDDING_INPUTS)),
        ({"input": ["short", LONG]}, "input", "input[1]"),
        ({"input": [10**9]}, "input", "vocabulary"),
        ({"input": [[1, 2], []]}, "input", "input[1]"),
        ({"input": "x", "dimensions": 32}, "dimensions", "64"),
        ({"input": "x", "encoding_format": "binary"}, "encoding_format", ""),
    ]
    for kwargs, param, says in cases:
        err = refused(lambda kw=kwargs: client.embeddings.create(model="tiny", **kw))
        assert param_of(err) == param, (kwargs, err.body)
        assert says in err.message, (kwargs, err.message)
    err = refused(lambda: client.embeddings.create(model="tiny", input="x", extra_body={"pooling": "cls"}))
    assert param_of(err) == "pooling"
    same = client.embeddings.create(model="tiny", input="x", dimensions=64, encoding_format="float")
    assert len(same.data[0].embedding) == 64


def test_a_plain_json_client_gets_floats(tiny: HttpServer) -> None:
    for extra in ({}, {"encoding_format": None}):
        answer = httpx.post(tiny.url + "/v1/embeddings", json={"input": "x", **extra}, headers=auth())
        assert answer.status_code == 200 and isinstance(answer.json()["data"][0]["embedding"], list)


def test_routes_need_the_api_key(tiny: HttpServer) -> None:
    for path, body in (("/v1/embeddings", {"input": "x"}), ("/api/embed", {"input": "x"})):
        assert httpx.post(tiny.url + path, json=body).status_code == 401
        assert httpx.post(tiny.url + path, json=body, headers=auth()).status_code == 200


def test_ollama_embed(tiny: HttpServer) -> None:
    answer = httpx.post(tiny.url + "/api/embed", json={"model": "tiny", "input": TEXTS}, headers=auth()).json()
    assert set(answer) == {"model", "embeddings", "total_duration", "load_duration", "prompt_eval_count"}
    vectors = np.array(answer["embeddings"], dtype=np.float32)
    assert vectors.shape == (3, 64) and answer["prompt_eval_count"] > 3 and answer["total_duration"] > 0
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    openai_side = client_of(tiny).embeddings.create(model="tiny", input=TEXTS)
    assert np.array_equal(vectors, np.array([d.embedding for d in openai_side.data], dtype=np.float32))
    one = httpx.post(tiny.url + "/api/embed", json={"input": TEXTS[0], "keep_alive": "5m"}, headers=auth()).json()
    assert len(one["embeddings"]) == 1
    # Ollama truncates unless told not to; told not to, the over-long input is refused by index.
    cut = httpx.post(tiny.url + "/api/embed", json={"input": [LONG]}, headers=auth())
    assert cut.status_code == 200 and cut.json()["prompt_eval_count"] <= TINY_CONTEXT
    strict = httpx.post(tiny.url + "/api/embed", json={"input": [LONG], "truncate": False}, headers=auth())
    assert strict.status_code == 400 and "input[0]" in strict.json()["error"]
    options = {"input": "x", "options": {"num_ctx": 4096, "temperature": 0.2}}
    assert httpx.post(tiny.url + "/api/embed", json=options, headers=auth()).status_code == 200
    bad = httpx.post(tiny.url + "/api/embed", json={"input": "x", "options": {"pooling": 1}}, headers=auth())
    assert bad.status_code == 400 and "options.pooling" in bad.json()["error"]


def test_ollama_older_embeddings_route_is_raw(tiny: HttpServer) -> None:
    raw = httpx.post(tiny.url + "/api/embeddings", json={"model": "tiny", "prompt": TEXTS[0]}, headers=auth())
    vector = np.array(raw.json()["embedding"])
    unit = np.array(
        httpx.post(tiny.url + "/api/embed", json={"input": TEXTS[0]}, headers=auth()).json()["embeddings"][0]
    )
    assert abs(float(np.linalg.norm(vector)) - 1.0) > 1e-3, "Ollama's older route returns the unnormalised vector"
    np.testing.assert_allclose(vector / np.linalg.norm(vector), unit, atol=1e-5)


def test_metrics_count_embeddings(tiny: HttpServer) -> None:
    client_of(tiny).embeddings.create(model="tiny", input=TEXTS)
    text = httpx.get(tiny.url + "/metrics").text
    inputs = [
        line for line in text.splitlines() if line.startswith('modelhost_embedding_inputs_total{model_name="tiny"}')
    ]
    assert inputs and float(inputs[0].split()[-1]) >= 3
    assert 'modelhost_embedding_requests_total{model_name="tiny",outcome="ok"}' in text
    assert 'route="/v1/embeddings"' in text


def test_a_model_without_embeddings_is_a_400_naming_model(loop_thread: LoopThread) -> None:
    with serving(loop_thread, scripted_host()) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        err = refused(lambda: client.embeddings.create(model="scripted", input="x"))
        assert param_of(err) == "model" and "embed" in err.message
        ollama = httpx.post(server.url + "/api/embed", json={"input": "x"})
        assert ollama.status_code == 400 and "embed" in ollama.json()["error"]


# --- an embedding overtakes a long generation -------------------------------------------------------------------


@pytest.mark.slow
def test_embedding_finishes_while_a_long_streamed_chat_runs(loop_thread: LoopThread) -> None:
    """On a batching host the embedding runs between two steps of the batch: it answers while the chat still
    streams. Proved from the server's own counters, not a clock: when the embedding's answer is in hand, the
    chat's request has not finished (no finished request in /metrics, one running)."""
    host = Host(lambda: modelhost.inference.load_model("default", threads=1), name="smol")
    with serving(loop_thread, host) as server:
        assert host.slots > 1, "the default llama_cpp load batches"
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=300)
        tokens = 300  # min_tokens = max_tokens: the chat runs exactly this long whatever the model says
        stream = client.chat.completions.create(
            model="smol", messages=[{"role": "user", "content": "Tell me a long story."}], stream=True,
            max_tokens=tokens, temperature=0, extra_body={"min_tokens": tokens},
        )  # fmt: skip
        chunks = iter(stream)
        first = next(chunks)  # the chat is admitted and decoding
        assert first.choices
        vectors = client.embeddings.create(model="smol", input=TEXTS, encoding_format="float")
        metrics = httpx.get(server.url + "/metrics").text
        finished = [
            line for line in metrics.splitlines()
            if line.startswith("modelhost_request_success_total{") and not line.endswith(" 0.0")
        ]  # fmt: skip
        assert len(vectors.data) == 3
        assert finished == [], f"the chat had finished before the embedding answered: {finished}"
        assert 'modelhost_num_requests_running{model_name="smol"} 1.0' in metrics
        rest = list(chunks)
        assert rest[-1].choices and rest[-1].choices[0].finish_reason == "length"


def test_langchain_openai_embeddings_work_against_the_door(tiny: HttpServer, tiny_llama_dir: Path) -> None:
    """LangChain's OpenAIEmbeddings, unmodified but for where it finds a tokenizer offline: by default it counts
    tokens with tiktoken, whose vocabulary file it downloads (no network here), so it is pointed at the model's own
    tokenizer folder (`tiktoken_enabled=False`); with `check_embedding_ctx_length=False` it sends the text as is."""
    langchain_openai = pytest.importorskip("langchain_openai")
    client = client_of(tiny)
    expected = [np.array(d.embedding) for d in client.embeddings.create(model="tiny", input=TEXTS).data]
    common: dict[str, Any] = {"model": "tiny", "base_url": f"{tiny.url}/v1", "api_key": KEY, "max_retries": 0}
    for embedder in (
        langchain_openai.OpenAIEmbeddings(**common, tiktoken_enabled=False, tiktoken_model_name=str(tiny_llama_dir)),
        langchain_openai.OpenAIEmbeddings(**common, check_embedding_ctx_length=False),
    ):
        vectors = embedder.embed_documents(TEXTS)
        assert len(vectors) == len(TEXTS)
        for got, want in zip(vectors, expected, strict=True):
            assert np.allclose(got, want, atol=1e-5), (got[:4], want[:4])
        assert np.allclose(embedder.embed_query(TEXTS[0]), expected[0], atol=1e-5)

"""What other servers' clients send, through the real `openai` client (and httpx for the llama-server shapes) against a
real server on loopback over the embedded SmolLM2 GGUF, served as `smollm2-135m-instruct` with the alias `default`
(as `modelhost serve --model default` names it).

Lenient where the ecosystem is lenient (vLLM's `ignore_eos`, `stream_options.continuous_usage_stats`, llama-server's
`cache_prompt`, OpenAI's hints, token-id prompts and inputs), strict where it matters (a parameter that would change
the answer is still a 400 naming it); `GET /v1/models/{id}`; `/tokenize` and `/detokenize` in both servers' shapes.
Greedy (temperature 0) and short, so answers repeat and the module stays quick on 2 cores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from http_support import LoopThread, embedded_gguf_or_skip, serving

import modelhost.inference
from modelhost.host.models import Models, ModelSpec
from modelhost.http import HttpServer
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytestmark = pytest.mark.slow

NAME = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def smol(loop_thread: LoopThread) -> Iterator[HttpServer]:
    embedded_gguf_or_skip()
    spec = ModelSpec(NAME, lambda: modelhost.inference.load_model("default"), aliases=("default",))
    with serving(loop_thread, Models([spec])) as server:  # type: ignore[arg-type]
        yield server


@pytest.fixture
def client(smol: HttpServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{smol.url}/v1", api_key="unused", max_retries=0, timeout=STATE_WAIT_SECONDS)


def post(server: HttpServer, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=STATE_WAIT_SECONDS)


def ask(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def test_models_retrieve_by_name_and_alias(client: openai.OpenAI) -> None:
    listed = client.models.list().data
    assert [m.id for m in listed] == [NAME]
    extra = listed[0].model_extra or {}
    assert extra["aliases"] == ["default"] and extra["parent"] is None, "a model has no parent; an adapter has"
    assert extra["root"], "vLLM's root: what the model was loaded from"
    for asked in (NAME, "default"):
        found = client.models.retrieve(asked)
        assert (found.id, found.object, found.owned_by) == (NAME, "model", "modelhost")
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("gpt-4o")
    assert "gpt-4o" in caught.value.message


def test_tokenize_and_detokenize_in_both_servers_shapes(smol: HttpServer) -> None:
    text = "The capital of France is Paris."
    llama = post(smol, "/tokenize", {"content": text}).json()
    vllm = post(smol, "/tokenize", {"model": "default", "prompt": text}).json()
    ids = llama["tokens"]
    assert ids and all(isinstance(i, int) for i in ids)
    assert vllm["tokens"] == ids and vllm["count"] == len(ids) and vllm["max_model_len"] > len(ids)
    pieces = post(smol, "/tokenize", {"content": text, "with_pieces": True}).json()["tokens"]
    assert [p["id"] for p in pieces] == ids and "".join(p["piece"] for p in pieces) == text
    back = post(smol, "/detokenize", {"tokens": ids}).json()
    assert back["content"] == back["prompt"] == text
    for body, param in (
        ({"content": text, "add_special": True}, "add_special"),
        ({"prompt": text, "add_special_tokens": True}, "add_special_tokens"),
        ({}, "content"),
        ({"content": text, "prompt": text}, "content"),
    ):
        refused = post(smol, "/tokenize", body)
        assert refused.status_code == 400 and refused.json()["error"]["param"] == param, refused.text
    out_of_vocab = post(smol, "/detokenize", {"tokens": [ids[0], 10**9]})
    assert out_of_vocab.status_code == 400 and "vocabulary" in out_of_vocab.json()["error"]["message"]


def test_a_token_id_prompt_answers_as_its_text(client: openai.OpenAI, smol: HttpServer) -> None:
    prompt = "The capital of France is"
    ids = post(smol, "/tokenize", {"content": prompt}).json()["tokens"]
    text = client.completions.create(model="default", prompt=prompt, max_tokens=6, temperature=0)
    by_ids = client.completions.create(model="default", prompt=ids, max_tokens=6, temperature=0)
    assert by_ids.choices[0].text == text.choices[0].text and text.choices[0].text
    assert by_ids.usage is not None and text.usage is not None
    assert by_ids.usage.prompt_tokens == text.usage.prompt_tokens
    two = client.completions.create(model="default", prompt=[ids, ids[:3]], max_tokens=3, temperature=0)
    assert len(two.choices) == 2 and two.choices[0].text == text.choices[0].text[: len(two.choices[0].text)]
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="default", prompt=[ids[0], 10**9], max_tokens=2)
    assert caught.value.body["param"] == "prompt" and "vocabulary" in caught.value.message  # type: ignore[index]


def test_token_id_embedding_inputs_embed_as_their_text(client: openai.OpenAI, smol: HttpServer) -> None:
    texts = ["A cat sat on the mat.", "Stock markets fell sharply."]
    ids = [post(smol, "/tokenize", {"content": t}).json()["tokens"] for t in texts]
    by_text = client.embeddings.create(model="default", input=texts, encoding_format="float")
    by_ids = client.embeddings.create(model="default", input=ids, encoding_format="float")
    for a, b in zip(by_text.data, by_ids.data, strict=True):
        assert np.array_equal(np.array(a.embedding, dtype=np.float32), np.array(b.embedding, dtype=np.float32))
    # One input alone (a batch of one computes in its own shape, so it is compared with the text alone).
    one = client.embeddings.create(model="default", input=ids[0], encoding_format="float")
    alone = client.embeddings.create(model="default", input=texts[0], encoding_format="float")
    assert one.data[0].embedding == alone.data[0].embedding


def test_ignore_eos_generates_to_max_tokens(client: openai.OpenAI) -> None:
    messages = ask("Answer with one word: what colour is the sky on a clear day?")
    short = client.chat.completions.create(model="default", messages=messages, max_tokens=48, temperature=0)
    assert short.choices[0].finish_reason == "stop" and short.usage is not None and short.usage.completion_tokens < 48
    full = client.chat.completions.create(
        model="default", messages=messages, max_tokens=48, temperature=0, extra_body={"ignore_eos": True}
    )
    assert full.choices[0].finish_reason == "length"
    assert full.usage is not None and full.usage.completion_tokens == 48


def test_continuous_usage_stats_put_the_usage_in_every_chunk(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="default", messages=ask("Count: one, two, three,"), max_tokens=10, temperature=0, stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},  # type: ignore[typeddict-unknown-key]
    )  # fmt: skip
    chunks = list(stream)
    assert all(c.usage is not None for c in chunks), [c.usage for c in chunks]
    counts = [c.usage.completion_tokens for c in chunks if c.usage is not None]
    assert counts == sorted(counts) and counts[-1] == 10
    final = chunks[-1].usage
    assert final is not None and final.prompt_tokens > 5 and final.total_tokens == final.prompt_tokens + 10
    # vLLM's shape: the prompt is counted from the first chunk (the role chunk) on, not only at the finish.
    usages = [c.usage for c in chunks if c.usage is not None]
    assert [(u.prompt_tokens, u.total_tokens) for u in usages] == [
        (final.prompt_tokens, final.prompt_tokens + u.completion_tokens) for u in usages
    ]
    text = client.completions.create(
        model="default", prompt="Count: one, two, three,", max_tokens=4, temperature=0, stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},  # type: ignore[typeddict-unknown-key]
    )  # fmt: skip
    text_usages = [c.usage for c in text]
    assert all(u is not None and u.prompt_tokens == text_usages[-1].prompt_tokens > 3 for u in text_usages), text_usages
    plain = client.chat.completions.create(
        model="default", messages=ask("Count: one, two, three,"), max_tokens=10, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    plain_chunks = list(plain)
    assert [c.usage is None for c in plain_chunks] == [True] * (len(plain_chunks) - 1) + [False]


def test_hints_are_accepted_and_change_nothing(client: openai.OpenAI) -> None:
    messages = ask("Name a fruit.")
    plain = client.chat.completions.create(model="default", messages=messages, max_tokens=8, temperature=0)
    hinted = client.chat.completions.create(
        model="default", messages=messages, max_tokens=8, temperature=0, user="u-1", metadata={"team": "a"},
        store=False, service_tier="auto", prompt_cache_key="k", safety_identifier="s",
        extra_body={"cache_prompt": True, "stop_token_ids": []},
    )  # fmt: skip
    assert hinted.choices[0].message.content == plain.choices[0].message.content


def test_what_would_change_the_answer_is_still_refused(client: openai.OpenAI) -> None:
    for extra, param in (
        ({"logit_bias": {"42": 5}}, "logit_bias"),
        ({"frequency_penalty": 0.5}, "frequency_penalty"),
        ({"extra_body": {"guided_regex": "a+"}}, "guided_regex"),
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="default", messages=ask("hi"), max_tokens=2, **extra)  # type: ignore[arg-type]
        assert caught.value.body["param"] == param, caught.value.body  # type: ignore[index]
    # A grammar cannot be held to a ban on its end: ignore_eos with structured output is refused, naming it.
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="default", messages=ask("hi"), max_tokens=4, response_format={"type": "json_object"},
            extra_body={"ignore_eos": True},
        )  # fmt: skip
    assert caught.value.body["param"] == "ignore_eos", json.dumps(caught.value.body)  # type: ignore[index]

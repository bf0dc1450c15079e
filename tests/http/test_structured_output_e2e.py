"""Structured output through the HTTP door: the real `openai` client (and Ollama's JSON) against a real server on
loopback, on the embedded SmolLM2 and on the tiny random Llama GGUF, both served through llama.cpp's batch engine.

The answers must parse and validate: JSON mode and JSON Schema are enforced by a grammar, not asked for politely.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from http_support import LoopThread, serving

import modelhost.inference
from modelhost.host import Host
from modelhost.http import HttpServer
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytest.importorskip("llama_cpp")
jsonschema = pytest.importorskip("jsonschema")
pydantic = pytest.importorskip("pydantic")

pytestmark = pytest.mark.slow

#: Every value bounded, so even a random model's answer ends well inside max_tokens (see test_llama_cpp_grammar).
PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z ]{1,8}$"},
        "age": {"type": "integer"},
        "colour": {"enum": ["red", "green", "blue"]},
    },
    "required": ["name", "age", "colour"],
    "additionalProperties": False,
}
SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}


class City(pydantic.BaseModel):  # type: ignore[name-defined,misc]
    name: str
    country: str
    population_millions: float


def client_of(server: HttpServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=STATE_WAIT_SECONDS)


@pytest.fixture(scope="module")
def smol(loop_thread: LoopThread) -> Iterator[HttpServer]:
    host = Host(lambda: modelhost.inference.load_model("default"), name="default")
    with serving(loop_thread, host) as server:
        yield server


@pytest.fixture(scope="module")
def tiny(loop_thread: LoopThread, tiny_llama_gguf: Path) -> Iterator[HttpServer]:
    host = Host(lambda: modelhost.inference.load_model(str(tiny_llama_gguf), backend="llama_cpp"), name="tiny")
    with serving(loop_thread, host) as server:
        yield server


def ask(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def test_smollm2_answers_a_strict_pydantic_schema_through_openai_parse(smol: HttpServer) -> None:
    # The client turns the pydantic model into a strict json_schema response_format and parses the answer back.
    answer = client_of(smol).chat.completions.parse(
        model="default", messages=ask("Describe Paris as a city."), response_format=City, temperature=0, max_tokens=80
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "stop", choice.message.content
    assert isinstance(choice.message.parsed, City) and choice.message.parsed.name


def test_smollm2_streams_json_of_a_schema_and_json_mode_starts_an_object(smol: HttpServer) -> None:
    client = client_of(smol)
    city = {"type": "json_schema", "json_schema": {"name": "city", "schema": City.model_json_schema(), "strict": True}}
    stream = client.chat.completions.create(
        model="default", messages=ask("Describe Rome as a city."), response_format=city, temperature=0,  # type: ignore[arg-type]
        max_tokens=80, stream=True,
    )  # fmt: skip
    City.model_validate_json("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
    # JSON mode is any object; a 135M model may go on adding keys until max_tokens, so only the start is checked.
    free = client.chat.completions.create(
        model="default", messages=ask("The capital of France, as JSON."), response_format={"type": "json_object"},
        temperature=0, max_tokens=6,
    )  # fmt: skip
    assert (free.choices[0].message.content or "").lstrip().startswith("{")


@pytest.mark.parametrize("stream", [False, True])
def test_a_random_model_answers_valid_json_of_the_schema(tiny: HttpServer, stream: bool) -> None:
    client = client_of(tiny)
    kw: dict[str, Any] = {"model": "tiny", "messages": ask("hi"), "response_format": SCHEMA_FORMAT, "max_tokens": 200}
    for sampling in ({"temperature": 0}, {"temperature": 1.2, "seed": 5}):
        if stream:
            chunks = client.chat.completions.create(**kw, **sampling, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        else:
            text = client.chat.completions.create(**kw, **sampling).choices[0].message.content or ""
        jsonschema.validate(json.loads(text), PERSON)


def test_ollama_format_takes_json_and_a_schema(tiny: HttpServer) -> None:
    body = {"model": "tiny", "messages": ask("hi"), "stream": False, "options": {"temperature": 0, "num_predict": 200}}
    answer = httpx.post(f"{tiny.url}/api/chat", json={**body, "format": PERSON}, timeout=STATE_WAIT_SECONDS).json()
    jsonschema.validate(json.loads(answer["message"]["content"]), PERSON)
    short = {**body, "stream": True, "format": "json", "options": {"temperature": 0, "num_predict": 4}}
    lines = httpx.post(f"{tiny.url}/api/chat", json=short, timeout=STATE_WAIT_SECONDS)
    text = "".join(json.loads(line)["message"]["content"] for line in lines.text.splitlines())
    assert text.lstrip().startswith("{")  # JSON mode: an object from the first token (4 tokens: not closed yet)


def test_schemas_the_model_cannot_follow_are_400s_naming_the_parameter(tiny: HttpServer) -> None:
    client = client_of(tiny)
    bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "frob"}}}
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="tiny", messages=ask("hi"), response_format=bad, stream=stream)  # type: ignore[call-overload]
        assert info.value.body["param"] == "response_format"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model="tiny", messages=ask("hi"), response_format=SCHEMA_FORMAT, extra_body={"min_tokens": 3}
        )
    assert info.value.body["param"] == "min_tokens"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="tiny", messages=ask("hi"), response_format={"type": "xml"})  # type: ignore[arg-type,typeddict-item]
    assert info.value.body["param"] == "response_format.type"  # type: ignore[index]
    refused = httpx.post(f"{tiny.url}/api/chat", json={"messages": ask("hi"), "format": "yaml"})
    assert refused.status_code == 400 and "format" in refused.json()["error"]


# --- the transformers backend (llguidance's token masks; backends/transformers/grammar.py) -------------------------


@pytest.fixture(scope="module")
def smol_tf(loop_thread: LoopThread) -> Iterator[HttpServer]:
    pytest.importorskip("llguidance")
    # The embedded GGUF through transformers: dequantised once into the safetensors cache, then loaded from there.
    host = Host(lambda: modelhost.inference.load_model("default", backend="transformers"), name="default")
    with serving(loop_thread, host) as server:
        yield server


@pytest.fixture(scope="module")
def tiny_tf(loop_thread: LoopThread, tiny_llama_dir: Path) -> Iterator[HttpServer]:
    pytest.importorskip("llguidance")
    host = Host(lambda: modelhost.inference.load_model(str(tiny_llama_dir), backend="transformers"), name="tiny")
    with serving(loop_thread, host) as server:
        yield server


@pytest.mark.timeout(900)  # its setup may be SmolLM2's first dequantisation (http_support.MODEL_LOAD_WAIT_S)
def test_transformers_smollm2_answers_a_strict_pydantic_schema(smol_tf: HttpServer) -> None:
    answer = client_of(smol_tf).chat.completions.parse(
        model="default", messages=ask("Describe Paris as a city."), response_format=City, temperature=0, max_tokens=80
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "stop", choice.message.content
    assert isinstance(choice.message.parsed, City) and choice.message.parsed.name


@pytest.mark.parametrize("stream", [False, True])
def test_transformers_random_model_answers_valid_json_of_the_schema(tiny_tf: HttpServer, stream: bool) -> None:
    client = client_of(tiny_tf)
    kw: dict[str, Any] = {"model": "tiny", "messages": ask("hi"), "response_format": SCHEMA_FORMAT, "max_tokens": 200}
    for sampling in ({"temperature": 0}, {"temperature": 1.2, "seed": 5}, {"temperature": 1.0, "seed": 6}):
        if stream:
            chunks = client.chat.completions.create(**kw, **sampling, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        else:
            text = client.chat.completions.create(**kw, **sampling).choices[0].message.content or ""
        jsonschema.validate(json.loads(text), PERSON)
    body = {"model": "tiny", "messages": ask("hi"), "stream": False, "format": PERSON,
            "options": {"temperature": 0, "num_predict": 200}}  # fmt: skip
    answer = httpx.post(f"{tiny_tf.url}/api/chat", json=body, timeout=STATE_WAIT_SECONDS).json()
    jsonschema.validate(json.loads(answer["message"]["content"]), PERSON)


def test_transformers_refuses_schemas_it_cannot_enforce_as_400s(tiny_tf: HttpServer) -> None:
    client = client_of(tiny_tf)
    unique = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": True}}}
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="tiny", messages=ask("hi"), response_format=unique, stream=stream)  # type: ignore[call-overload]
        assert info.value.body["param"] == "response_format"  # type: ignore[index]
        assert "uniqueItems" in info.value.body["message"]  # type: ignore[index]


def test_a_grammar_left_with_no_token_mid_answer_is_a_400_naming_response_format(
    tiny: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grammar that opens the answer and then allows nothing (what an unsatisfiable schema the up-front checks
    cannot see does): the request ends mid-answer with the sampler's SchemaError, and the door names the client's
    parameter, as it does for a refusal at submit. Before issue 25 llama.cpp aborted the whole process here."""
    from modelhost.backends.llama_cpp import grammar as constrained

    monkeypatch.setattr(
        constrained, "check", lambda opts, vocab: 'root ::= "{" [^\\x00-\\U7FFFFFFF]' if opts.json_schema else None
    )
    body = {"model": "tiny", "messages": ask("hi"), "max_tokens": 8, "response_format": {"type": "json_object"}}
    r = httpx.post(f"{tiny.url}/v1/chat/completions", json=body, timeout=STATE_WAIT_SECONDS)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "response_format" and "allows no token here" in error["message"], error
    streamed = httpx.post(f"{tiny.url}/v1/chat/completions", json={**body, "stream": True}, timeout=STATE_WAIT_SECONDS)
    events = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    assert events[-1]["error"]["param"] == "response_format", events[-1]
    monkeypatch.undo()
    ok = httpx.post(f"{tiny.url}/v1/chat/completions", json={**body, "max_tokens": 2}, timeout=STATE_WAIT_SECONDS)
    assert ok.status_code == 200, ok.text

"""The Ollama door as its users meet it: the official `ollama` Python client against a real server on loopback.

The other Ollama tests post JSON with httpx, which checks what we send; this module checks that what we send is what
the client reads. The client parses every answer into pydantic models (ChatResponse, GenerateResponse,
ShowResponse, ProcessResponse...), so a field we omit that it requires, or a value of the wrong type, fails here as a
pydantic ValidationError, and our statuses reach it as ResponseError.status_code.

One server serves four real models on llama.cpp, each on its own host (a model set, so requests route by name and
an unknown name is a 404): the tiny random Llama, the tiny tools Llama (its template renders tools), the tiny
thinking Llama (its template opens `<think>`) and the embedded SmolLM2-135M-Instruct.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import httpx
import numpy as np
import pytest
from http_support import LoopThread
from PIL import Image

import modelhost.inference
from modelhost.host.models import Models, ModelSpec
from modelhost.http import HttpServer
from modelhost.testing import tinymodels
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytest.importorskip("llama_cpp")
ollama = pytest.importorskip("ollama")
pydantic = pytest.importorskip("pydantic")
jsonschema = pytest.importorskip("jsonschema")

pytestmark = pytest.mark.slow

#: Bounded fields only (an enum, a bool, a short pattern), so even the random model's JSON ends within num_predict.
PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z]{1,6}$"},
        "colour": {"enum": ["red", "green", "blue"]},
        "tall": {"type": "boolean"},
    },
    "required": ["name", "colour", "tall"],
    "additionalProperties": False,
}


class Forecast(pydantic.BaseModel):  # type: ignore[name-defined,misc]
    """A schema as users write one: the client takes `Forecast.model_json_schema()` as `format`."""

    city: Literal["Paris", "Rome"]
    sunny: bool


def weather(city: str, days: int) -> str:
    """Get the forecast for a city.

    Args:
        city: The city to forecast
        days: How many days ahead

    Returns:
        The forecast
    """
    return f"sun in {city} for {days} days"


#: The JSON Schema of a call of `weather`, for `format`: Ollama has no tool_choice, and a call-shaped format is how
#: a request makes the (random) model's answer a call (tests/http/test_tools_e2e.py does the same through httpx).
WEATHER_CALL = {
    "type": "object",
    "properties": {
        "name": {"const": "weather"},
        "arguments": {
            "type": "object",
            "properties": {"city": {"enum": ["Paris", "Rome"]}, "days": {"enum": [1, 3, 7]}},
            "required": ["city", "days"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "arguments"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def tools_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tinymodels.build_tiny_tools_llama(tmp_path_factory.mktemp("ollama_tools"), seed=0)
    return tinymodels.write_llama_gguf(folder, tmp_path_factory.mktemp("ollama_tools_gguf") / "tools.gguf")


@pytest.fixture(scope="module")
def think_gguf(tiny_thinking_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tinymodels.write_llama_gguf(tiny_thinking_dir, tmp_path_factory.mktemp("ollama_think") / "think.gguf")


def _spec(name: str, path: Path | str) -> ModelSpec:
    backend = None if path == "default" else "llama_cpp"
    # One thread each: four models share two cores, and llama.cpp's thread group per model would oversubscribe them.
    return ModelSpec(name, lambda: modelhost.inference.load_model(str(path), backend=backend, threads=1))


@pytest.fixture(scope="module")
def server(loop_thread: LoopThread, tiny_llama_gguf: Path, tools_gguf: Path, think_gguf: Path) -> Iterator[HttpServer]:
    models = Models(
        [_spec("tiny", tiny_llama_gguf), _spec("tools", tools_gguf), _spec("think", think_gguf),
         _spec("smol", "default")]
    )  # fmt: skip
    http = HttpServer(models, port=0)
    loop_thread.run(http.start())
    try:
        loop_thread.run(models.start(), timeout=300)
        yield http
    finally:
        loop_thread.run(http.aclose())
        loop_thread.run(models.aclose(grace=1))


@pytest.fixture(scope="module")
def client(server: HttpServer) -> ollama.Client:
    return ollama.Client(host=server.url, timeout=STATE_WAIT_SECONDS)


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def assert_final_stats(answer: Any) -> None:
    """What the client's typed final answer carries: a reason, token counts and nanosecond durations (ints)."""
    assert answer.done is True and answer.done_reason in ("stop", "length")
    assert isinstance(answer.eval_count, int) and answer.eval_count >= 1
    assert isinstance(answer.prompt_eval_count, int) and answer.prompt_eval_count >= 1
    for duration in (answer.total_duration, answer.load_duration, answer.prompt_eval_duration, answer.eval_duration):
        assert isinstance(duration, int) and duration >= 0
    assert answer.total_duration > 0 and answer.model and answer.created_at


# -- chat and generate ---------------------------------------------------------------------------------------------


def test_chat_whole_and_streamed_parse_and_agree(client: ollama.Client) -> None:
    options = {"temperature": 0, "num_predict": 6}
    whole = client.chat(model="tiny", messages=ask("hi"), options=options, keep_alive="10m")
    assert isinstance(whole, ollama.ChatResponse)
    assert_final_stats(whole)
    assert whole.message.role == "assistant" and whole.message.content
    assert whole.done_reason == "length" and whole.eval_count == 6
    parts = list(client.chat(model="tiny", messages=ask("hi"), options=options, stream=True))
    assert all(isinstance(p, ollama.ChatResponse) for p in parts)
    assert [p.done for p in parts].count(True) == 1 and parts[-1].done
    assert_final_stats(parts[-1])
    assert "".join(p.message.content or "" for p in parts) == whole.message.content
    # The client's typed Options, with fields it defines that change nothing here: load options, mirostat's tuning
    # (mirostat itself off) and Ollama's default repeat window (the one both backends use). Refused before the fix.
    typed = ollama.Options(temperature=0, num_predict=6, num_ctx=512, embedding_only=False, mirostat=0,
                           mirostat_tau=5.0, mirostat_eta=0.1, repeat_last_n=64)  # fmt: skip
    assert client.chat(model="tiny", messages=ask("hi"), options=typed).message.content == whole.message.content


def test_generate_whole_and_streamed_parse_and_agree(client: ollama.Client) -> None:
    options = {"temperature": 0, "num_predict": 6}
    whole = client.generate(model="tiny", prompt="hi", options=options, keep_alive=-1)
    assert isinstance(whole, ollama.GenerateResponse)
    assert_final_stats(whole)
    assert whole.response and whole.done_reason == "length" and whole.eval_count == 6
    parts = list(client.generate(model="tiny", prompt="hi", options=options, stream=True))
    assert parts[-1].done and "".join(p.response for p in parts) == whole.response
    assert_final_stats(parts[-1])
    raw = client.generate(model="tiny", prompt="hi", raw=True, options=options)
    assert raw.done and raw.eval_count == 6


def test_seed_and_stop_options(client: ollama.Client) -> None:
    hot = {"temperature": 1.5, "seed": 11, "num_predict": 12}
    first = client.chat(model="tiny", messages=ask("hi"), options=hot).message.content
    assert client.chat(model="tiny", messages=ask("hi"), options=hot).message.content == first, "a seed repeats"
    # A stop string taken from the greedy answer itself: the answer then ends just before its first occurrence.
    greedy = {"temperature": 0, "num_predict": 12}
    text = client.generate(model="tiny", prompt="hi", options=greedy).response
    assert len(text) >= 4
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    stopped = client.generate(model="tiny", prompt="hi", options={**greedy, "stop": [stop]})
    assert stopped.response == text[: text.index(stop)] and stopped.done_reason == "stop"


def test_keep_alive_shows_in_ps(client: ollama.Client) -> None:
    client.chat(model="tiny", messages=ask("hi"), options={"num_predict": 1}, keep_alive="10m")
    client.chat(model="smol", messages=ask("hi"), options={"num_predict": 1}, keep_alive=-1)
    listed = {m.model: m for m in client.ps().models}
    assert set(listed) == {"tiny", "tools", "think", "smol"}
    now = datetime.now(UTC)
    tiny_expiry, smol_expiry = listed["tiny"].expires_at, listed["smol"].expires_at
    assert tiny_expiry is not None and smol_expiry is not None
    # "10m": unloaded ten minutes after its last use; -1: kept for good (far in the future).
    assert now < tiny_expiry <= now + timedelta(minutes=10, seconds=5)
    assert smol_expiry > now + timedelta(days=365)
    # The context each model runs with (the embedded SmolLM2's own 8192; the tiny Llamas' 512).
    # The context each runs with: SmolLM2 (trained on 8192) at the backend's default 4096, the tiny model at its 512.
    assert listed["smol"].context_length == 4096 and listed["tiny"].context_length == 512


def test_smollm2_chats_in_words(client: ollama.Client) -> None:
    answer = client.chat(
        model="smol", messages=ask("What is the capital of France? One word."),
        options={"temperature": 0, "num_predict": 16}, keep_alive="10m",
    )  # fmt: skip
    assert_final_stats(answer)
    assert "paris" in (answer.message.content or "").lower()


def test_logprobs_whole_and_streamed(client: ollama.Client) -> None:
    # Refused (400, unrecognised argument) before the door read them.
    options = {"temperature": 0, "num_predict": 5}
    whole = client.chat(model="tiny", messages=ask("hi"), options=options, logprobs=True, top_logprobs=2)
    assert whole.logprobs is not None and len(whole.logprobs) == whole.eval_count == 5
    for entry in whole.logprobs:
        # The client parses each entry as its Logprob type (not exported at its root).
        assert isinstance(entry, ollama._types.Logprob) and entry.logprob <= 0 and isinstance(entry.token, str)
        assert entry.top_logprobs is not None and len(entry.top_logprobs) == 2
        assert entry.top_logprobs[0].logprob >= entry.logprob  # greedy: the chosen token is the likeliest
    parts = list(client.chat(model="tiny", messages=ask("hi"), options=options, logprobs=True, top_logprobs=2,
                             stream=True))  # fmt: skip
    assert [e for p in parts for e in p.logprobs or ()] == list(whole.logprobs)
    generated = client.generate(model="tiny", prompt="hi", options=options, logprobs=True)
    assert generated.logprobs is not None and len(generated.logprobs) == 5
    assert all(not e.top_logprobs for e in generated.logprobs)
    assert client.chat(model="tiny", messages=ask("hi"), options=options).logprobs is None, "only when asked"
    with pytest.raises(ollama.ResponseError) as info:
        client.chat(model="tiny", messages=ask("hi"), options=options, top_logprobs=2)
    assert info.value.status_code == 400 and "top_logprobs" in info.value.error


# -- structured output ---------------------------------------------------------------------------------------------


def test_format_json_and_a_schema(client: ollama.Client) -> None:
    for stream in (False, True):
        options = {"temperature": 0, "num_predict": 200}
        if stream:
            parts = client.chat(model="tiny", messages=ask("hi"), format=PERSON, options=options, stream=True)
            text = "".join(p.message.content or "" for p in parts)
        else:
            text = client.chat(model="tiny", messages=ask("hi"), format=PERSON, options=options).message.content or ""
        jsonschema.validate(json.loads(text), PERSON)
    # JSON mode: any object, from the first token (a random model may add keys until num_predict, so only its start).
    short = client.generate(model="tiny", prompt="hi", format="json", options={"temperature": 0, "num_predict": 4})
    assert short.response.lstrip().startswith("{")


def test_format_from_a_pydantic_model(client: ollama.Client) -> None:
    answer = client.chat(
        model="smol", messages=ask("Describe the weather in Rome as JSON."), format=Forecast.model_json_schema(),
        options={"temperature": 0, "num_predict": 60},
    )  # fmt: skip
    assert answer.done_reason == "stop"
    assert isinstance(Forecast.model_validate_json(answer.message.content or ""), Forecast)


# -- tools ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_tools_from_a_function_come_back_as_parsed_calls(client: ollama.Client, stream: bool) -> None:
    kw: dict[str, Any] = {"model": "tools", "messages": ask("weather in Rome?"), "tools": [weather],
                          "format": WEATHER_CALL, "options": {"temperature": 0, "num_predict": 200}}  # fmt: skip
    if stream:
        parts = list(client.chat(**kw, stream=True))
        assert parts[-1].done
        calls = [c for p in parts for c in p.message.tool_calls or ()]
    else:
        answer = client.chat(**kw)
        assert answer.done
        calls = list(answer.message.tool_calls or ())
    assert len(calls) == 1
    call = calls[0]
    assert isinstance(call, ollama.Message.ToolCall) and call.function.name == "weather"
    arguments = dict(call.function.arguments)  # a mapping the client parsed, not a JSON string
    assert arguments["city"] in ("Paris", "Rome") and arguments["days"] in (1, 3, 7)
    assert weather(**arguments).startswith("sun")
    # The call and its result go back as history (a tool message with tool_name), in the client's own types.
    history: list[Any] = [
        *ask("weather in Rome?"),
        ollama.Message(role="assistant", content="", tool_calls=calls),
        {"role": "tool", "content": weather(**arguments), "tool_name": "weather"},
    ]
    later = client.chat(model="tools", messages=history, tools=[weather], options={"num_predict": 4})
    assert later.done and later.eval_count


def test_tools_as_dicts(client: ollama.Client) -> None:
    tool = {"type": "function", "function": {"name": "weather", "description": "Forecast",
            "parameters": WEATHER_CALL["properties"]["arguments"]}}  # type: ignore[index]  # fmt: skip
    answer = client.chat(model="tools", messages=ask("weather?"), tools=[tool], format=WEATHER_CALL,
                         options={"temperature": 0, "num_predict": 200})  # fmt: skip
    (call,) = answer.message.tool_calls or ()
    assert call.function.name == "weather" and set(call.function.arguments) == {"city", "days"}


# -- thinking ------------------------------------------------------------------------------------------------------


def test_think_puts_the_thought_apart(client: ollama.Client) -> None:
    # The template opens `<think>` in the prompt, so the random model's answer starts as thought (and Ollama has no
    # thinking budget: it may not close within num_predict; tests/http/test_reasoning_e2e.py checks the reply side).
    options = {"temperature": 0, "num_predict": 20}
    whole = client.chat(model="think", messages=ask("hi"), think=True, options=options)
    assert whole.message.thinking and "<think>" not in whole.message.thinking
    assert "</think>" not in (whole.message.content or "")
    parts = list(client.chat(model="think", messages=ask("hi"), think=True, options=options, stream=True))
    assert "".join(p.message.thinking or "" for p in parts) == whole.message.thinking
    assert "".join(p.message.content or "" for p in parts) == whole.message.content
    # An effort level (the client's `think` also takes "low", "medium", "high") turns thinking on; refused before.
    for level in ("low", "high"):
        assert client.chat(model="think", messages=ask("hi"), think=level, options=options).message == whole.message
    off = client.chat(model="think", messages=ask("hi"), think=False, options=options)
    assert off.message.content and not off.message.thinking
    generated = client.generate(model="think", prompt="hi", think=True, options=options)
    assert generated.thinking and "</think>" not in generated.response


# -- embeddings ----------------------------------------------------------------------------------------------------


def test_embed_and_embeddings(client: ollama.Client) -> None:
    texts = ["The quick brown fox", "jumps over the lazy dog.", "The quick brown fox"]
    answer = client.embed(model="tiny", input=texts)
    assert isinstance(answer, ollama.EmbedResponse) and answer.model == "tiny"
    vectors = np.array(answer.embeddings, dtype=np.float64)
    assert vectors.shape == (3, 64)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5), "/api/embed answers unit vectors"
    # The same text twice in one batch: the same vector up to float32 rounding (llama.cpp pools each sequence of a
    # batch at its own offset, and the sums round differently in the last bit), far from the other text's.
    assert np.allclose(vectors[0], vectors[2], atol=1e-6) and not np.allclose(vectors[0], vectors[1], atol=1e-3)
    one = client.embed(model="tiny", input="The quick brown fox")
    assert np.allclose(one.embeddings[0], vectors[0], atol=1e-6)
    legacy = client.embeddings(model="tiny", prompt="The quick brown fox")
    raw = np.array(legacy.embedding, dtype=np.float64)
    # The older route's vector is the raw pooled one: the same direction, its own length.
    assert raw.shape == (64,) and math.isclose(float(raw @ vectors[0]), float(np.linalg.norm(raw)), rel_tol=1e-4)
    assert client.embeddings(model="tiny", prompt="The quick brown fox").embedding == legacy.embedding


# -- listing, showing, errors --------------------------------------------------------------------------------------


def test_list_show_and_version(client: ollama.Client, server: HttpServer) -> None:
    listed = client.list()
    assert [m.model for m in listed.models] == ["tiny", "tools", "think", "smol"]
    for entry in listed.models:
        assert entry.modified_at is not None and entry.size is not None and entry.size >= 0
        assert entry.details is not None and entry.details.family == "llama"
    shown = client.show("smol")
    assert isinstance(shown, ollama.ShowResponse) and shown.capabilities and "completion" in shown.capabilities
    assert shown.modelinfo and shown.modelinfo["general.architecture"] == "llama"
    assert shown.details is not None and shown.details.family == "llama"
    # What Open WebUI reads to offer tools or a thinking toggle: the tools template, the thought channel.
    capabilities = {name: client.show(name).capabilities for name in ("tiny", "tools", "think")}
    assert capabilities == {"tiny": ["completion", "embedding"], "tools": ["completion", "tools", "embedding"],
                            "think": ["completion", "thinking", "embedding"]}  # fmt: skip
    version = httpx.get(f"{server.url}/api/version").json()  # the client has no version(); other Ollama tools probe it
    assert isinstance(version["version"], str) and version["version"]


def test_errors_reach_the_client_with_their_status(client: ollama.Client) -> None:
    for call in (
        lambda: client.chat(model="nope", messages=ask("hi")),
        lambda: client.generate(model="nope", prompt="hi"),
        lambda: client.embed(model="nope", input="hi"),
        lambda: client.show("nope"),
    ):
        with pytest.raises(ollama.ResponseError) as info:
            call()
        assert info.value.status_code == 404 and "nope" in info.value.error
    for stream in (False, True):
        with pytest.raises(ollama.ResponseError) as info:
            result = client.chat(model="tiny", messages=ask("hi"), options={"mirostat": 2}, stream=stream)
            list(result) if stream else None  # type: ignore[call-overload]
        assert info.value.status_code == 400 and "mirostat" in info.value.error
    with pytest.raises(ollama.ResponseError) as info:
        client.chat(model="tiny", messages=ask("hi"), options={"num_predict": "many"})
    # The contract calls it max_tokens; the message must name what the client sent (it named max_tokens before).
    assert info.value.status_code == 400 and "num_predict" in info.value.error and "max_tokens" not in info.value.error
    with pytest.raises(ollama.ResponseError) as info:
        client.chat(model="tiny", messages=ask("hi"), think="extreme")  # type: ignore[arg-type]
    assert info.value.status_code == 400 and "think" in info.value.error
    # Thinking asked of a model without a thought channel: Ollama's 400 naming `think`, streamed or not, on both
    # routes; `think: false` is always fine.
    for stream in (False, True):
        for route in ("chat", "generate"):
            with pytest.raises(ollama.ResponseError) as info:
                if route == "chat":
                    result: Any = client.chat(model="tools", messages=ask("hi"), think=True, stream=stream)
                else:
                    result = client.generate(model="tiny", prompt="hi", think="low", stream=stream)
                list(result) if stream else None
            assert info.value.status_code == 400 and "think" in info.value.error
    assert client.chat(model="tiny", messages=ask("hi"), think=False, options={"num_predict": 2}).done
    with pytest.raises(ollama.ResponseError) as info:
        client.generate(model="tiny", prompt="hi", keep_alive="soon")
    assert info.value.status_code == 400 and "keep_alive" in info.value.error
    # An image (the client base64-encodes bytes) for a model without vision: refused before any compute.
    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, "PNG")
    with pytest.raises(ollama.ResponseError) as info:
        client.chat(model="tiny", messages=[{"role": "user", "content": "hi", "images": [png.getvalue()]}])
    assert info.value.status_code == 400 and "image" in info.value.error


def test_the_async_client(server: HttpServer) -> None:
    async def talk() -> None:
        client = ollama.AsyncClient(host=server.url, timeout=STATE_WAIT_SECONDS)
        options = {"temperature": 0, "num_predict": 3}
        whole = await client.chat(model="tiny", messages=ask("hi"), options=options)
        parts = [p async for p in await client.chat(model="tiny", messages=ask("hi"), options=options, stream=True)]
        assert "".join(p.message.content or "" for p in parts) == whole.message.content and parts[-1].done
        embedded = await client.embed(model="tiny", input=["hi", "there"])
        assert len(embedded.embeddings) == 2

    asyncio.run(talk())


# -- a model unloaded by keep_alive (last: it unloads models the other tests use) ---------------------------------


def test_a_request_for_an_unloaded_model_waits_for_its_load(client: ollama.Client) -> None:
    # Ollama's requests wait for their model to load, and the client does not retry: before the fix the first
    # request after an unload was a ResponseError 503 "model 'tools' is loading; retry shortly".
    for name, use in (
        ("tools", lambda: client.chat(model="tools", messages=ask("hi"), options={"num_predict": 2}).done),
        ("tiny", lambda: len(client.embed(model="tiny", input="hi").embeddings) == 1),
        ("think", lambda: client.generate(model="think").done_reason == "load"),  # Ollama's "load the model"
        ("smol", lambda: all(p.done is not None for p in client.generate(model="smol", prompt="hi", stream=True,
                                                                         options={"num_predict": 2}))),
    ):  # fmt: skip
        unloaded = client.generate(model=name, keep_alive=0)  # Ollama's "unload the model now"
        assert unloaded.done_reason == "unload" and name not in {m.model for m in client.ps().models}
        assert use(), name
        assert name in {m.model for m in client.ps().models}
    # keep_alive 0 on an unloaded model: loaded, answered, then unloaded (the sweep must not take it in between).
    assert client.chat(model="tiny", messages=ask("hi"), options={"num_predict": 2}, keep_alive=0).done
    # The wait shows as load_duration (it was always 0), within total_duration.
    client.generate(model="tiny", keep_alive=0)
    answer = client.chat(model="tiny", messages=ask("hi"), options={"num_predict": 2})
    assert answer.load_duration and answer.total_duration and 0 < answer.load_duration < answer.total_duration
    client.generate(model="tiny", keep_alive=0)
    embedded = client.embed(model="tiny", input="hi")
    assert embedded.load_duration and embedded.total_duration and 0 < embedded.load_duration < embedded.total_duration

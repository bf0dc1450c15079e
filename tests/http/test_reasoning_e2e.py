"""A thinking model's thought goes to `reasoning_content` (OpenAI-compatible) and `thinking` (Ollama), apart from
the reply, streamed or not: the real `openai` client against a real server over the tiny thinking Llama as a GGUF
(llama.cpp). Its template opens `<think>\\n` in the prompt, so the answer starts inside the thought; the backend
knows that from the prompt's tokens. A random model rarely closes its thought by itself, so the reply side is checked
through Ollama's `think: false` (the template closes an empty thought) and the engine's forced `</think>`.
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
from modelhost.http.reasoning import ReasoningSplit
from modelhost.inference.types import Message
from modelhost.testing import tinymodels
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytest.importorskip("llama_cpp")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gguf(tiny_thinking_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tinymodels.write_llama_gguf(tiny_thinking_dir, tmp_path_factory.mktemp("thinking_gguf") / "think.gguf")


@pytest.fixture(scope="module")
def thinking(loop_thread: LoopThread, gguf: Path) -> Iterator[HttpServer]:
    host = Host(lambda: modelhost.inference.load_model(str(gguf), backend="llama_cpp"), name="think")
    with serving(loop_thread, host) as server:
        yield server


def chat_kw(**extra: Any) -> dict[str, Any]:
    return {"model": "think", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20, "temperature": 0,
            **extra}  # fmt: skip


def test_thought_and_reply_are_apart_streamed_or_not(thinking: HttpServer) -> None:
    client = openai.OpenAI(base_url=f"{thinking.url}/v1", api_key="unused", max_retries=0, timeout=STATE_WAIT_SECONDS)
    whole = client.chat.completions.create(**chat_kw())
    message = whole.choices[0].message
    thought = getattr(message, "reasoning_content", None)
    assert thought and message.content is not None
    assert "<think>" not in thought + message.content and "</think>" not in thought + message.content
    reasoning, content = "", ""
    for chunk in client.chat.completions.create(**chat_kw(), stream=True):
        if chunk.choices:
            delta = chunk.choices[0].delta
            reasoning += getattr(delta, "reasoning_content", None) or ""
            content += delta.content or ""
    assert (reasoning, content) == (thought, message.content)


def test_ollama_puts_the_thought_in_thinking(thinking: HttpServer) -> None:
    body = {"model": "think", "messages": [{"role": "user", "content": "hi"}], "stream": False,
            "options": {"temperature": 0, "num_predict": 20}}  # fmt: skip
    # Ollama has no thinking_budget option: the random model's thought may not end within num_predict.
    answer = httpx.post(f"{thinking.url}/api/chat", json=body, timeout=STATE_WAIT_SECONDS).json()
    assert answer["message"].get("thinking") and "</think>" not in answer["message"]["content"]
    lines = httpx.post(
        f"{thinking.url}/api/chat", json={**body, "stream": True}, timeout=STATE_WAIT_SECONDS
    ).text.splitlines()
    streamed = "".join(json.loads(line)["message"].get("thinking", "") for line in lines)
    assert streamed == answer["message"]["thinking"]
    # Thinking off: the template closes an empty thought in the prompt, so everything is the reply.
    off = httpx.post(f"{thinking.url}/api/chat", json={**body, "think": False}, timeout=STATE_WAIT_SECONDS).json()
    assert off["message"]["content"] and "thinking" not in off["message"]


def test_the_backend_marks_each_tokens_channel(gguf: Path) -> None:
    # A thinking budget of 3 forces `</think>` after three thought tokens; what follows is the reply.
    with modelhost.inference.load_model(str(gguf), backend="llama_cpp", threads=1) as model:
        tokens = list(model.chat([Message("user", "hi")], max_tokens=8, min_tokens=8, temperature=0, thinking_budget=3))
        assert [t.channel for t in tokens] == ["thought"] * 3 + ["marker"] + ["content"] * 4
        plain = list(model.chat([Message("user", "hi")], max_tokens=4, temperature=0, enable_thinking=False))
        assert {t.channel for t in plain} == {"content"}
    split = ReasoningSplit()
    fed = [
        split.feed(text, ch)
        for text, ch in (("hm", "thought"), ("</think>", "marker"), ("\n\n", "content"), ("ok", "content"))
    ]
    assert fed == [("", "hm"), ("", ""), ("", ""), ("ok", "")]


# --- the transformers backend (the same marker rules: inference/generation.py's ThoughtMarkers) --------------------


@pytest.fixture(scope="module")
def thinking_tf(loop_thread: LoopThread, tiny_thinking_dir: Path) -> Iterator[HttpServer]:
    host = Host(lambda: modelhost.inference.load_model(str(tiny_thinking_dir), backend="transformers"), name="think")
    with serving(loop_thread, host) as server:
        yield server


def test_transformers_thought_and_reply_are_apart_streamed_or_not(thinking_tf: HttpServer) -> None:
    client = openai.OpenAI(
        base_url=f"{thinking_tf.url}/v1", api_key="unused", max_retries=0, timeout=STATE_WAIT_SECONDS
    )
    # The template opens `<think>` in the prompt, so the random model's answer starts as thought (and seldom closes
    # it: the reply side is checked on the backend, tests/backends/test_transformers_structured.py).
    kw = chat_kw()
    whole = client.chat.completions.create(**kw)
    message = whole.choices[0].message
    thought = getattr(message, "reasoning_content", None)
    assert thought and message.content is not None
    assert "<think>" not in thought + message.content and "</think>" not in thought + message.content
    reasoning, content = "", ""
    for chunk in client.chat.completions.create(**kw, stream=True):
        if chunk.choices:
            delta = chunk.choices[0].delta
            reasoning += getattr(delta, "reasoning_content", None) or ""
            content += delta.content or ""
    assert (reasoning, content) == (thought, message.content)


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 12}},
    "required": ["answer"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("backend", ["llama_cpp", "transformers"])
def test_a_schema_answer_of_a_thinking_model_is_the_reply_not_its_thought(
    backend: str, thinking: HttpServer, thinking_tf: HttpServer
) -> None:
    """The template opens `<think>` in the prompt, but the grammar makes the answer JSON from its first token: that
    JSON is the reply (`content`, parseable), never `reasoning_content`."""
    server = thinking if backend == "llama_cpp" else thinking_tf
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=STATE_WAIT_SECONDS)
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "strict": True}}
    whole = client.chat.completions.create(**chat_kw(max_tokens=60), response_format=fmt)  # type: ignore[arg-type]
    message = whole.choices[0].message
    assert getattr(message, "reasoning_content", None) is None
    assert message.content is not None and "answer" in json.loads(message.content)


def test_openai_clients_switch_the_thought_off_as_vllm_and_openai_spell_it(thinking: HttpServer) -> None:
    """`chat_template_kwargs: {"enable_thinking": false}` (what Qwen3 users send vLLM and llama-server through
    `extra_body`) and OpenAI's `reasoning_effort: "none"` close the thought in the prompt: the answer is all reply."""
    client = openai.OpenAI(base_url=f"{thinking.url}/v1", api_key="unused", max_retries=0, timeout=STATE_WAIT_SECONDS)
    on = client.chat.completions.create(**chat_kw(), reasoning_effort="high")  # type: ignore[arg-type]
    assert getattr(on.choices[0].message, "reasoning_content", None)
    for off in (
        {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}},
        {"reasoning_effort": "none"},
    ):
        answer = client.chat.completions.create(**chat_kw(), **off)
        message = answer.choices[0].message
        assert getattr(message, "reasoning_content", None) is None and message.content, off
    for bad, param in (
        ({"extra_body": {"chat_template_kwargs": {"add_vision_id": True}}}, "chat_template_kwargs.add_vision_id"),
        ({"extra_body": {"chat_template_kwargs": {"enable_thinking": "no"}}}, "chat_template_kwargs.enable_thinking"),
        ({"extra_body": {"reasoning_effort": "extreme"}}, "reasoning_effort"),
    ):
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(**chat_kw(), **bad)
        assert info.value.body["param"] == param  # type: ignore[index]

"""OpenAI's `n` (several choices per request) through the HTTP door: the real `openai` client against a real server.

Each choice is its own generation of the same request, decoded side by side in the host's batch slots; with a
`seed`, choice i samples with seed + i, so the choices differ and the whole answer is reproducible. The door's own
rules (all choices or none are queued, one failing choice fails the request, a client hanging up cancels them
all) are pinned on a scripted stand-in model.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from http_support import LoopThread, scripted_host, scripted_model, serving

import modelhost.inference
from modelhost.host import Host
from modelhost.http import HttpServer
from modelhost.testing.standins import ScriptedModel
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until


def client_of(server: HttpServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=STATE_WAIT_SECONDS)


def ask(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


# -- a real model: the tiny random Llama GGUF on llama.cpp's batch engine -------------------------------------------


@pytest.fixture(scope="module")
def tiny(loop_thread: LoopThread, tiny_llama_gguf: Path) -> Iterator[HttpServer]:
    pytest.importorskip("llama_cpp")
    host = Host(lambda: modelhost.inference.load_model(str(tiny_llama_gguf), backend="llama_cpp"), name="tiny")
    with serving(loop_thread, host) as server:
        yield server


SAMPLED: dict[str, Any] = {"model": "tiny", "max_tokens": 12, "temperature": 1.0, "seed": 40}


@pytest.mark.slow
def test_n_choices_are_the_seeded_samples_of_one_request_each(tiny: HttpServer) -> None:
    client = client_of(tiny)
    whole = client.chat.completions.create(**SAMPLED, messages=ask("tell me a story"), n=3)
    assert [c.index for c in whole.choices] == [0, 1, 2]
    texts = [c.message.content for c in whole.choices]
    # Choice i is what a request of its own with seed + i answers: the choices are samples, not copies of one.
    singles = [
        client.chat.completions.create(**{**SAMPLED, "seed": 40 + i}, messages=ask("tell me a story")) for i in range(3)
    ]
    assert texts == [s.choices[0].message.content for s in singles]
    assert len(set(texts)) > 1
    # The prompt is billed once; the completions add up.
    assert whole.usage is not None
    assert whole.usage.prompt_tokens == singles[0].usage.prompt_tokens  # type: ignore[union-attr]
    assert whole.usage.completion_tokens == sum(s.usage.completion_tokens for s in singles)  # type: ignore[union-attr]


@pytest.mark.slow
def test_streamed_choices_carry_their_index_and_reassemble_to_the_whole_answer(tiny: HttpServer) -> None:
    client = client_of(tiny)
    kw: dict[str, Any] = {**SAMPLED, "messages": ask("tell me a story"), "n": 3}
    whole = client.chat.completions.create(**kw)
    texts = ["", "", ""]
    finishes: dict[int, str | None] = {}
    ids = set()
    usage = None
    for chunk in client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}):
        ids.add(chunk.id)
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            if choice.finish_reason is not None:
                assert choice.index not in finishes, "each choice finishes once"
                finishes[choice.index] = choice.finish_reason
    assert len(ids) == 1, "every chunk of one answer shares its id"
    assert texts == [c.message.content for c in whole.choices]
    assert finishes == {c.index: c.finish_reason for c in whole.choices}
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]


@pytest.mark.slow
def test_completions_take_n_too(tiny: HttpServer) -> None:
    client = client_of(tiny)
    kw: dict[str, Any] = {**SAMPLED, "prompt": "Once upon a time", "n": 2}
    whole = client.completions.create(**kw)
    assert [c.index for c in whole.choices] == [0, 1]
    streamed = ["", ""]
    for chunk in client.completions.create(**kw, stream=True):
        for choice in chunk.choices:
            streamed[choice.index] += choice.text
    assert streamed == [c.text for c in whole.choices]


@pytest.mark.slow
def test_completions_take_a_list_of_prompts_each_with_n_choices(tiny: HttpServer) -> None:
    client = client_of(tiny)
    prompts = ["Once upon a time", "The weather today"]
    kw: dict[str, Any] = {**SAMPLED, "prompt": prompts, "n": 2}
    whole = client.completions.create(**kw)
    # OpenAI's order: prompt by prompt, n choices each; each is what its own request would answer.
    assert [c.index for c in whole.choices] == [0, 1, 2, 3]
    singles = [client.completions.create(**{**SAMPLED, "seed": 40 + i}, prompt=p) for p in prompts for i in range(2)]
    assert [c.text for c in whole.choices] == [s.choices[0].text for s in singles]
    assert whole.usage is not None
    # Each prompt is billed once, each completion counted.
    assert whole.usage.prompt_tokens == singles[0].usage.prompt_tokens + singles[2].usage.prompt_tokens  # type: ignore[union-attr]
    assert whole.usage.completion_tokens == sum(s.usage.completion_tokens for s in singles)  # type: ignore[union-attr]
    streamed = ["", "", "", ""]
    usage = None
    for chunk in client.completions.create(**kw, stream=True, stream_options={"include_usage": True}):
        usage = chunk.usage or usage
        for choice in chunk.choices:
            streamed[choice.index] += choice.text
    assert streamed == [c.text for c in whole.choices]
    assert usage is not None and usage.prompt_tokens == whole.usage.prompt_tokens


# -- the door's own rules, on a scripted model -------------------------------------------------------------------


def test_a_prompt_list_is_bounded_and_may_not_be_empty(loop_thread: LoopThread) -> None:
    model = scripted_model()
    with serving(loop_thread, scripted_host(model)) as server:
        client = client_of(server)
        for prompt, n in (([], 1), (["p"] * 17, 1), (["p"] * 9, 2)):
            with pytest.raises(openai.BadRequestError) as info:
                client.completions.create(model="x", prompt=prompt, n=n)
            assert info.value.body["param"] == "prompt"  # type: ignore[index]
        assert model.prompts == []
        three = client.completions.create(model="x", prompt=["a", "b", "c"], max_tokens=1)
        assert [c.text for c in three.choices] == ["one ", "one ", "one "]
        assert model.prompts == ["a", "b", "c"]


def test_n_out_of_range_is_refused_by_name_before_any_work(loop_thread: LoopThread) -> None:
    model = scripted_model()
    with serving(loop_thread, scripted_host(model)) as server:
        client = client_of(server)
        for n in (0, 17):
            with pytest.raises(openai.BadRequestError) as info:
                client.chat.completions.create(model="x", messages=ask("hi"), n=n)
            assert info.value.body["param"] == "n"  # type: ignore[index]
        assert model.prompts == []


def test_a_request_whose_choices_do_not_all_fit_the_queue_is_refused_whole(loop_thread: LoopThread) -> None:
    gate = threading.Semaphore(0)
    model = scripted_model(gate)
    with serving(loop_thread, scripted_host(model, max_queue=2)) as server:
        client = client_of(server)
        # One request holds the model; the queue has room for two more, not three.
        busy = loop_thread.spawn(_post(server, {"model": "x", "messages": ask("hold"), "max_tokens": 8}))
        wait_until(model.started.is_set)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="x", messages=ask("three"), n=3, max_tokens=2)
        # Nothing of the refused request stayed queued: two choices fit now, and run.
        for _ in range(64):
            gate.release()
        assert busy.result(STATE_WAIT_SECONDS).status_code == 200
        two = client.chat.completions.create(model="x", messages=ask("two"), n=2, max_tokens=2)
        assert [c.message.content for c in two.choices] == ["one two ", "one two "]
        assert len(model.prompts) == 3  # the busy request and the two choices; the refused three never ran


class _FailsSecond(ScriptedModel):
    """Fails its second generation (and only that one), as an engine error would."""

    def __init__(self) -> None:
        super().__init__(["one ", "two ", "three "])
        self.calls = 0

    def script(self, prompt: str) -> Any:
        self.calls += 1
        if self.calls == 2:
            self.fail_after = 1
        else:
            self.fail_after = None
        return super().script(prompt)


def test_one_failing_choice_fails_the_request_in_openai_shape(loop_thread: LoopThread) -> None:
    model = _FailsSecond()
    with serving(loop_thread, scripted_host(model)) as server:
        client = client_of(server)
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model="x", messages=ask("hi"), n=3)
        assert info.value.body["code"] == "internal" and "engine exploded" in info.value.body["message"]  # type: ignore[index]
        # Streamed: the error ends the stream (the openai client raises it), not a silent short answer.
        model.calls = 0
        seen = []
        with pytest.raises(openai.APIError, match="engine exploded"):
            for chunk in client.chat.completions.create(model="x", messages=ask("hi"), n=3, stream=True):
                seen.extend(c.finish_reason for c in chunk.choices if c.finish_reason)
        assert seen == ["length"]  # choice 0 finished before choice 1 failed; no choice finished after the error
        # The host serves the next request normally.
        model.calls = 10
        ok = client.chat.completions.create(model="x", messages=ask("hi"), n=2)
        assert [c.message.content for c in ok.choices] == ["one two three ", "one two three "]


def test_a_client_that_hangs_up_cancels_every_choice(loop_thread: LoopThread) -> None:
    model = scripted_model()
    model.pieces = None  # endless: only a cancel ends it
    model.max_tokens = 1_000_000
    host = scripted_host(model)
    with serving(loop_thread, host) as server:
        with httpx.stream(
            "POST",
            f"{server.url}/v1/chat/completions",
            json={"model": "x", "messages": ask("go on"), "n": 3, "stream": True},
            timeout=STATE_WAIT_SECONDS,
        ) as answer:
            chunks = 0
            for line in answer.iter_lines():
                chunks += line.startswith("data: ")
                if chunks == 5:  # choice 0 is generating; the others wait their turn (this model does not batch)
                    break
        wait_until(lambda: host.running == 0 and host.waiting == 0)
        # The model is free for the next request at once.
        assert client_of(server).chat.completions.create(model="x", messages=ask("hi"), max_tokens=1).choices


async def _post(server: HttpServer, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(timeout=STATE_WAIT_SECONDS) as http:
        return await http.post(f"{server.url}/v1/chat/completions", json=body)

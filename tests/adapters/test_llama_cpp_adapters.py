"""Adapters served by name on llama.cpp: the tiny Llama's GGUF twin serves the two trained adapters (their
adapter.gguf) over one context, its slots shared, each request answered with its own adapter; a slot's cached
prefix is never reused under another adapter; and the engine refuses what is not an adapter of this model."""

from __future__ import annotations

import asyncio
import importlib.util
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from modelhost.errors import InvalidOptionError, ModelNotFoundError
from modelhost.host.models import Models, ModelSpec
from modelhost.http import HttpServer
from modelhost.inference import load_model
from modelhost.inference.engine import AdapterEngine, EngineRequest
from modelhost.inference.engine_conformance import drive
from modelhost.inference.types import Message
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is absent")


def chat(question: str, adapter: str | None = None) -> EngineRequest:
    options = {"max_tokens": 12, "temperature": 0}
    return EngineRequest(messages=(Message("user", question),), options=options, adapter=adapter)


def texts(engine: Any, requests: list[EngineRequest]) -> list[str]:
    """Each request's whole answer, driven through the engine together."""
    return [run.text for run in drive(engine, requests)]


def test_two_gguf_adapters_share_one_context_and_each_answers_its_word(tiny_llama_gguf: Path, trained_adapters: Any):
    with load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1, parallel=4) as model:
        engine = model.engine()
        assert isinstance(engine, AdapterEngine)
        question = trained_adapters.question
        (alone,) = texts(engine, [chat(question)])
        for word, folder in trained_adapters.folders.items():
            engine.load_adapter(word.lower(), str(folder))  # the folder: llama.cpp takes its one .gguf
        # Base and both adapters in the same steps, twice each: six requests, four slots.
        requests = [chat(question, a) for a in (None, "pineapple", "marmalade") * 2]
        answers = texts(engine, requests)
        words = dict.fromkeys(("pineapple", "marmalade"))
        for request, answer in zip(requests, answers, strict=True):
            if request.adapter is None:
                assert answer == alone, "the base answers as it does alone, beside adapters"
            else:
                assert answer.strip() == request.adapter.capitalize(), (request.adapter, answer)
                words.pop(request.adapter, None)
        assert not words
        # The slots now hold prefixes evaluated under the adapters: a base request must not reuse them.
        assert texts(engine, [chat(question)]) == [alone]
        engine.unload_adapter("pineapple")
        with pytest.raises(ModelNotFoundError):
            texts(engine, [chat(question, "pineapple")])
        assert texts(engine, [chat(question, "marmalade")])[0].strip() == "Marmalade"


def test_the_engine_refuses_what_is_not_a_lora_gguf_and_never_reuses_a_prefix_across_adapters(
    tiny_llama_gguf: Path, trained_adapters: Any, tmp_path: Path
) -> None:
    peft_only = tmp_path / "peft-only"
    peft_only.mkdir()
    folder = trained_adapters.folders["Pineapple"]
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        (peft_only / name).write_bytes((folder / name).read_bytes())
    question = trained_adapters.question
    with load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1, parallel=1) as model:
        engine = model.engine()
        with pytest.raises(InvalidOptionError, match="no LoRA GGUF"):
            engine.load_adapter("peft", str(peft_only))
        with pytest.raises(InvalidOptionError, match="not an adapter"):
            engine.load_adapter("model", str(tiny_llama_gguf))  # a GGUF, but a model
        # One slot, the adapter's request first: the slot then holds the prompt evaluated under the adapter, which
        # the base's request of the same prompt must evaluate afresh (reused, it answers from the adapter's keys
        # and values: its log-probabilities show it even where its greedy words do not).
        engine.load_adapter("pineapple", str(folder))
        assert texts(engine, [chat(question, "pineapple")])[0].strip() == "Pineapple"
        after = logprobs(engine, chat(question))
    with load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1, parallel=1) as fresh:
        assert logprobs(fresh.engine(), chat(question)) == after, "the base answers as if the adapter never ran"


def logprobs(engine: Any, request: EngineRequest) -> list[tuple[int, float]]:
    """Each token of a greedy answer with its log-probability."""
    asked = EngineRequest(
        messages=request.messages, options=replace(request.options, logprobs=1), adapter=request.adapter
    )
    (run,) = drive(engine, [asked])
    return [(t.id, t.logprob.logprob if t.logprob is not None else 0.0) for t in run.tokens]


def test_gguf_adapters_through_the_http_door_and_the_openai_client(tiny_llama_gguf: Path, trained_adapters: Any):
    async def main() -> None:
        spec = ModelSpec("tiny", lambda: load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1),
                         path=str(tiny_llama_gguf))  # fmt: skip
        models = Models([spec])
        models.adapter_loading = True
        server = HttpServer(models, port=0)
        await server.start()
        await models.start()
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=STATE_WAIT_SECONDS) as c:
                for word, folder in trained_adapters.folders.items():
                    gguf = str(folder / "adapter.gguf")  # the file itself this time
                    r = await c.post("/v1/load_lora_adapter", json={"lora_name": word, "lora_path": gguf})
                    assert r.status_code == 200, r.text
            client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)

            async def ask(model: str) -> str:
                answer = await client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": trained_adapters.question}], max_tokens=12,
                    temperature=0,
                )  # fmt: skip
                return answer.choices[0].message.content or ""

            names = ["Pineapple", "Marmalade", "tiny"]
            answers = await asyncio.gather(*(ask(n) for n in names))
            assert [a.strip() for a in answers[:2]] == names[:2]
            assert not any(w in answers[2] for w in names[:2])
            assert {m.id: (m.model_extra or {})["parent"] for m in (await client.models.list()).data} == {
                "tiny": None, "Pineapple": "tiny", "Marmalade": "tiny"
            }  # fmt: skip
        finally:
            await server.aclose()
            await models.aclose(grace=1)

    asyncio.run(main())


def test_each_adapters_requests_take_neighbouring_slots_and_answer_as_alone(
    tiny_llama_gguf: Path, trained_adapters: Any
):
    # llama.cpp evaluates a decode call's rows in one pass over the weights only while their sequence ids follow
    # each other; a step makes one call per adapter, so each adapter's requests must sit in neighbouring slots, even
    # when they arrive interleaved (before issue 36 they took the slots in arrival order: six one-row passes a step).
    names = (None, "pineapple", "marmalade")
    questions = [f"{trained_adapters.question} ({i})" for i in range(6)]  # six prompts: six different answers
    requests = [
        replace(chat(q, names[i % 3]), options={"max_tokens": 8, "temperature": 0}) for i, q in enumerate(questions)
    ]
    with load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1, parallel=6) as model:
        engine = model.engine()
        for word, folder in trained_adapters.folders.items():
            engine.load_adapter(word.lower(), str(folder))
        admitted = [engine.admit(r) for r in requests]
        placed = engine.slot_adapters()
        for name in names:
            slots = [i for i, a in enumerate(placed) if a == name]
            assert slots == list(range(slots[0], slots[0] + 2)), (name, placed)
        ids: dict[Any, list[int]] = {a.handle: [] for a in admitted}
        while engine.free_slots() < engine.slots:
            for handle, out in engine.step().outputs.items():
                ids[handle] += [t.id for t in out.tokens]
        together = [ids[a.handle] for a in admitted]
        alone = [drive(engine, [r])[0].ids for r in requests]  # one at a time: one slot, one adapter a step
        assert together == alone
        assert len({tuple(t) for t in together}) > 1


def test_a_step_starts_with_the_adapter_its_context_holds(
    tiny_llama_gguf: Path, trained_adapters: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each switch of the context's adapters makes llama.cpp reserve its compute graphs again, so a step of two
    # adapters' groups starts with the one the last step ended with: one switch a step, not two.
    import llama_cpp

    switches = 0
    real = llama_cpp.llama_set_adapters_lora

    def counted(*args: Any) -> int:
        nonlocal switches
        switches += 1
        return int(real(*args))

    monkeypatch.setattr(llama_cpp, "llama_set_adapters_lora", counted)  # still llama.cpp's own call, counted
    with load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1, parallel=4) as model:
        engine = model.engine()
        for word, folder in trained_adapters.folders.items():
            engine.load_adapter(word.lower(), str(folder))
        opts = {"max_tokens": 10, "min_tokens": 10, "temperature": 0}
        for i, name in enumerate(("pineapple", "marmalade") * 2):
            engine.admit(replace(chat(f"{trained_adapters.question} ({i})", name), options=opts))
        engine.step()  # the four prompts' prefill (and each one's first token)
        switches, steps = 0, 0
        while engine.free_slots() < engine.slots:
            engine.step()
            steps += 1
    assert steps >= 9 and switches <= steps, (switches, steps)

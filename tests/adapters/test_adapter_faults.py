"""What goes wrong with adapters, answered the way vLLM answers it, and never a crash: an unknown name is a 404; a
path that is not an adapter, a corrupt one, or one of another model is a 400 naming `lora_path` (and the server
goes on serving); the bound on adapters per model is a 400 naming `lora_name`; two loads of one name race to one
success; an unload while the adapter streams lets the stream finish, or (its grace spent) cancels it cleanly."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from modelhost.host import adapters
from modelhost.host.events import Delta, Done, GenerationRequest
from modelhost.host.models import Models, ModelSpec
from modelhost.http import HttpServer
from modelhost.inference import load_model
from modelhost.inference.types import Message
from modelhost.testing import tinymodels
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytest.importorskip("peft")


@asynccontextmanager
async def serving(base: Path) -> AsyncIterator[tuple[Models, str]]:
    models = Models([ModelSpec("tiny", lambda: load_model(str(base), backend="transformers"), path=str(base))])
    models.adapter_loading = True
    server = HttpServer(models, port=0)
    await server.start()
    await models.start()
    try:
        yield models, server.url
    finally:
        await server.aclose()
        await models.aclose(grace=1)


async def load(c: httpx.AsyncClient, name: str, path: Path | str) -> httpx.Response:
    return await c.post("/v1/load_lora_adapter", json={"lora_name": name, "lora_path": str(path)})


def client(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0)


def copy_adapter(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for part in ("adapter_config.json", "adapter_model.safetensors"):
        shutil.copy(src / part, dst / part)
    return dst


def test_unknown_names_are_404_and_bad_files_are_400_naming_the_field(trained_adapters: Any, tmp_path: Path) -> None:
    good = trained_adapters.folders["Pineapple"]
    corrupt = copy_adapter(good, tmp_path / "corrupt")
    (corrupt / "adapter_model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    not_lora = copy_adapter(good, tmp_path / "ia3")
    config = json.loads((not_lora / "adapter_config.json").read_text())
    (not_lora / "adapter_config.json").write_text(json.dumps({**config, "peft_type": "IA3"}))
    # An adapter of another model: its weights have another width, so peft cannot put it on this one.
    other_base = tinymodels.build_tiny_llama(tmp_path / "wider", seed=1, hidden_size=96, intermediate_size=192)
    foreign = copy_adapter(good, tmp_path / "foreign")
    _retarget(foreign, other_base)

    async def main() -> None:
        async with serving(trained_adapters.base) as (_, url), httpx.AsyncClient(base_url=url) as c:
            assert (await load(c, "pine", good)).status_code == 200
            with pytest.raises(openai.NotFoundError) as caught:
                await client(url).chat.completions.create(model="pin", messages=[{"role": "user", "content": "hi"}])
            assert "pin" in caught.value.message and caught.value.code == "model_not_found"
            assert (await c.get("/v1/models/pin")).status_code == 404
            cases: list[tuple[dict[str, Any], str, str]] = [
                ({"lora_name": "x"}, "lora_path", "must be provided"),
                ({"lora_path": str(good)}, "lora_name", "must be provided"),
                ({"lora_name": "x", "lora_path": str(tmp_path / "none")}, "lora_path", "no adapter at"),
                ({"lora_name": "x", "lora_path": str(corrupt)}, "lora_path", "not a readable safetensors file"),
                ({"lora_name": "x", "lora_path": str(not_lora)}, "lora_path", "only LoRA adapters are served"),
                ({"lora_name": "x", "lora_path": str(foreign)}, "lora_path", "so it must be"),
                ({"lora_name": "x", "lora_path": str(good / "adapter.gguf")}, "lora_path", "no peft adapter"),
                ({"lora_name": "tiny", "lora_path": str(good)}, "lora_name", "already served"),
                ({"lora_name": "pine", "lora_path": str(good)}, "lora_name", "already been loaded"),
                ({"lora_name": "x" * 5000, "lora_path": str(good)}, "lora_name", "longer than"),
            ]
            for body, param, said in cases:
                r = await c.post("/v1/load_lora_adapter", json=body)
                error = r.json()["error"]
                assert (r.status_code, error["param"]) == (400, param) and said in error["message"], (body, r.text)
            listed = [m["id"] for m in (await c.get("/v1/models")).json()["data"]]
            assert listed == ["tiny", "pine"], "no refused adapter stays listed"
            answer = await client(url).chat.completions.create(
                model="pine", messages=[{"role": "user", "content": trained_adapters.question}], max_tokens=8,
                temperature=0,
            )  # fmt: skip
            assert (answer.choices[0].message.content or "").strip() == "Pineapple", "still serving after refusals"

    asyncio.run(main())


def _retarget(folder: Path, base: Path) -> None:
    """Make `folder` an adapter of `base`'s shapes (random weights of base's widths under the same names)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    config = json.loads((folder / "adapter_config.json").read_text())
    model = AutoModelForCausalLM.from_pretrained(str(base))
    peft_model = get_peft_model(model, LoraConfig(r=config["r"], target_modules=config["target_modules"]))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01)
    peft_model.save_pretrained(str(folder))


def test_the_adapters_of_one_model_are_bounded_and_loads_of_one_name_race_to_one(trained_adapters: Any) -> None:
    good = trained_adapters.folders["Pineapple"]

    async def main() -> None:
        async with serving(trained_adapters.base) as (models, url), httpx.AsyncClient(base_url=url) as c:
            raced = await asyncio.gather(*(load(c, "same", good) for _ in range(4)))
            assert sorted(r.status_code for r in raced) == [200, 400, 400, 400]
            for i in range(adapters.MAX_ADAPTERS_PER_MODEL - 1):
                assert (await load(c, f"a{i}", good)).status_code == 200
            over = await load(c, "one-too-many", good)
            assert over.status_code == 400 and over.json()["error"]["param"] == "lora_name"
            assert f"({adapters.MAX_ADAPTERS_PER_MODEL})" in over.json()["error"]["message"]
            assert "one-too-many" not in models.adapters
            assert (await c.post("/v1/unload_lora_adapter", json={"lora_name": "a0"})).status_code == 200
            assert (await load(c, "one-too-many", good)).status_code == 200, "an unload makes room"

    asyncio.run(main())


def test_an_unload_lets_a_stream_in_flight_finish_then_answers(trained_adapters: Any) -> None:
    async def main() -> None:
        async with serving(trained_adapters.base) as (_, url), httpx.AsyncClient(base_url=url) as c:
            assert (await load(c, "pine", trained_adapters.folders["Pineapple"])).status_code == 200
            order: list[str] = []
            stream = await client(url).chat.completions.create(
                model="pine", messages=[{"role": "user", "content": "Count."}], max_tokens=40, temperature=0,
                stream=True, extra_body={"ignore_eos": True},
            )  # fmt: skip
            finish = None
            pieces = 0
            unloading: asyncio.Task[httpx.Response] | None = None
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    pieces += 1
                    if unloading is None:  # the stream is running: unload now
                        coro = c.post("/v1/unload_lora_adapter", json={"lora_name": "pine"}, timeout=STATE_WAIT_SECONDS)
                        unloading = asyncio.create_task(coro)
                        unloading.add_done_callback(lambda _: order.append("unloaded"))
                if chunk.choices and chunk.choices[0].finish_reason:
                    finish = chunk.choices[0].finish_reason
            order.append("stream ended")
            assert unloading is not None
            assert (await unloading).status_code == 200
            assert finish == "length" and pieces > 1, (finish, pieces)
            assert order == ["stream ended", "unloaded"], "the unload waited for the stream"
            with pytest.raises(openai.NotFoundError):
                await client(url).chat.completions.create(model="pine", messages=[{"role": "user", "content": "x"}])

    asyncio.run(main())


def test_an_unload_past_its_grace_cancels_the_adapters_streams_cleanly(trained_adapters: Any) -> None:
    async def main() -> None:
        async with serving(trained_adapters.base) as (models, _):
            await adapters.add_adapter(models, "pine", str(trained_adapters.folders["Pineapple"]),
                                       name_field="lora_name", path_field="lora_path")  # fmt: skip
            ask = [Message("user", "Count.")]
            long = {"max_tokens": 100000, "min_tokens": 100000, "temperature": 0}  # runs until cancelled
            served = models.route("pine")
            async with served.submit(GenerationRequest(messages=ask, options=long)) as stream:
                events = []
                async for event in stream:
                    events.append(event)
                    if isinstance(event, Delta) and len(events) == 3:
                        removal = asyncio.create_task(adapters.remove_adapter(models, "pine", grace=0.0))
                await removal
            assert isinstance(events[-1], Done) and events[-1].finish_reason == "cancelled", events[-1]
            base = models.route("tiny")
            host = base.host
            assert host is not None and "pine" not in host.adapters and host.ready
            async with base.submit(GenerationRequest(messages=ask, options={"max_tokens": 4})) as after:
                assert isinstance([e async for e in after][-1], Done), "the base serves on"

    asyncio.run(main())


def test_adapters_added_while_the_base_is_unloaded_load_with_it_and_a_refused_one_never_stops_it(
    trained_adapters: Any, tmp_path: Path
) -> None:
    other_base = tinymodels.build_tiny_llama(tmp_path / "wider", seed=1, hidden_size=96, intermediate_size=192)
    foreign = copy_adapter(trained_adapters.folders["Pineapple"], tmp_path / "foreign")
    _retarget(foreign, other_base)

    async def main() -> None:
        base = trained_adapters.base
        models = Models([ModelSpec("tiny", lambda: load_model(str(base), backend="transformers"), path=str(base))],
                        lazy=True)  # fmt: skip
        await models.start()
        try:
            assert models.route("tiny").host is None, "lazy: not loaded yet"
            for name, path in (("pine", trained_adapters.folders["Pineapple"]), ("foreign", foreign)):
                await adapters.add_adapter(models, name, str(path), name_field="lora_name", path_field="lora_path")
            assert set(models.adapters) == {"pine", "foreign"}, "registered; checked by the engine at load"
            await models.route("tiny").wait_loaded()
            host = models.route("tiny").host
            assert host is not None and host.ready, "the refused adapter did not stop the base from loading"
            assert set(models.adapters) == {"pine"} and "so it must be" in host.adapter_errors["foreign"]
            ask = [Message("user", trained_adapters.question)]
            async with models.route("pine").submit(GenerationRequest(messages=ask, options={"max_tokens": 8})) as s:
                text = "".join([e.text async for e in s if isinstance(e, Delta)])
            assert text.strip() == "Pineapple"
        finally:
            await models.aclose(grace=1)

    asyncio.run(main())

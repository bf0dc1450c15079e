"""Issue 21's Done-when for adapters, for real: in one process a tiny Llama is served (transformers) beside giz's
job worker; a `lora.train` job trains an adapter on it; the adapter's output folder is loaded into the running
server by vLLM's POST /v1/load_lora_adapter, without a restart; and through the real `openai` client the adapter's
name answers the trained word while the base's does not. Then adapters and the base share one engine's batch, and
an unloaded adapter's name is a 404."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from modelhost.host.models import Models, ModelSpec
from modelhost.http import HttpServer
from modelhost.inference import load_model
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until
from modelhost.worker import WorkerServer
from training.conftest import QUESTION, SECRET, memorisation_records

pytest.importorskip("peft")


def tiny_set(base: Path, name: str = "tiny") -> Models:
    """A model set serving the tiny Llama (transformers) under `name`, runtime adapter loading allowed."""
    spec = ModelSpec(name, lambda: load_model(str(base), backend="transformers"), path=str(base))
    models = Models([spec])
    models.adapter_loading = True
    return models


@asynccontextmanager
async def http_door(models: Models) -> AsyncIterator[str]:
    server = HttpServer(models, port=0)
    await server.start()
    await models.start()
    try:
        yield server.url
    finally:
        await server.aclose()
        await models.aclose(grace=1)


async def ask(client: openai.AsyncOpenAI, model: str, question: str = QUESTION) -> str:
    answer = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}], max_tokens=12, temperature=0
    )
    return answer.choices[0].message.content or ""


async def train_by_job(worker: WorkerServer, model: str) -> Path:
    """Run `lora.train` on `model` through the worker's HTTP API; the folder of the job's outputs."""
    data = "".join(json.dumps(r) + "\n" for r in memorisation_records()).encode()
    settings = {"steps": 24, "learning_rate": 0.01, "batch_size": 2, "seed": 0}
    request = {"operation": "lora.train", "model": model, "input": {"data": {"$file": "data"}, **settings}}
    files = [("request", (None, json.dumps(request), "application/json")), ("data", ("t.jsonl", data, "x"))]
    async with httpx.AsyncClient(base_url=worker.url, timeout=STATE_WAIT_SECONDS) as c:
        submitted = await c.post("/v1/jobs", files=files)
        assert submitted.status_code == 202, submitted.text
        job = submitted.json()["id"]
        deadline = asyncio.get_running_loop().time() + STATE_WAIT_SECONDS
        while (record := (await c.get(f"/v1/jobs/{job}")).json())["status"] not in ("completed", "failed"):
            assert asyncio.get_running_loop().time() < deadline, record
            await asyncio.sleep(0.05)
    assert record["status"] == "completed", record
    return worker.store.outputs_dir(job)


def test_a_lora_train_output_is_loaded_without_restart_and_answers_its_word(tiny_llama_dir: Path, tmp_path) -> None:
    async def main() -> None:
        models = tiny_set(tiny_llama_dir)
        worker = WorkerServer(models, state_dir=tmp_path / "state", capacity=2, journal=lambda line: None)
        async with http_door(models) as url:
            await worker.start()
            try:
                folder = await train_by_job(worker, "tiny")
            finally:
                await worker.aclose()
            client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
            assert SECRET not in await ask(client, "tiny")
            async with httpx.AsyncClient(base_url=url, timeout=STATE_WAIT_SECONDS) as c:
                loaded = await c.post("/v1/load_lora_adapter", json={"lora_name": "secret", "lora_path": str(folder)})
                assert loaded.status_code == 200 and "secret" in loaded.text, loaded.text
                again = await c.post("/v1/load_lora_adapter", json={"lora_name": "secret", "lora_path": str(folder)})
                assert again.status_code == 400 and "already been loaded" in again.text
            listed = {m.id: m for m in (await client.models.list()).data}
            assert set(listed) == {"tiny", "secret"}
            # `root` says the id (no hub repository here), never the adapter's folder on the server's disk.
            assert listed["secret"].model_extra == {"aliases": [], "root": "secret", "parent": "tiny"}
            assert listed["tiny"].model_extra is not None and listed["tiny"].model_extra["parent"] is None
            assert (await client.models.retrieve("secret")).model_extra["parent"] == "tiny"  # type: ignore[index]

            # The adapter answers its word, the base still does not: one process, one copy of the weights.
            assert (await ask(client, "secret")).strip() == SECRET
            assert (await ask(client, "secret", "Tell me the secret word.")).strip() == SECRET
            assert SECRET not in await ask(client, "tiny")
            assert len(models) == 1, "an adapter is not a second model"

            async with httpx.AsyncClient(base_url=url, timeout=STATE_WAIT_SECONDS) as c:
                gone = await c.post("/v1/unload_lora_adapter", json={"lora_name": "secret"})
                assert gone.status_code == 200, gone.text
                unknown = await c.post("/v1/unload_lora_adapter", json={"lora_name": "secret"})
                assert unknown.status_code == 404 and "cannot be found" in unknown.text
            with pytest.raises(openai.NotFoundError):
                await ask(client, "secret")
            assert SECRET not in await ask(client, "tiny")

    asyncio.run(main())


def test_two_adapters_and_the_base_share_one_engine_and_each_answers_its_own(trained_adapters: Any) -> None:
    async def main() -> None:
        models = tiny_set(trained_adapters.base)
        async with http_door(models) as url:
            async with httpx.AsyncClient(base_url=url, timeout=STATE_WAIT_SECONDS) as c:
                for word, folder in trained_adapters.folders.items():
                    body = {"lora_name": word.lower(), "lora_path": str(folder)}
                    r = await c.post("/v1/load_lora_adapter", json=body)
                    assert r.status_code == 200, r.text
            client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
            names = ["tiny", *(w.lower() for w in trained_adapters.folders)] * 2
            # Asked all at once: six requests of three kinds in one engine of four slots.
            answers = await asyncio.gather(*(ask(client, name) for name in names))
            for name, answer in zip(names, answers, strict=True):
                if name == "tiny":
                    assert not any(word in answer for word in trained_adapters.folders), answer
                else:
                    assert answer.strip() == name.capitalize(), (name, answer)
            # They share steps: four long streams of two adapters (past end of sequence, so they overlap for many
            # steps), and some step decoded more than one sequence (the engine's batch histogram).
            long = {"ignore_eos": True}
            await asyncio.gather(*(client.chat.completions.create(
                model=name, messages=[{"role": "user", "content": "Count."}], max_tokens=48, extra_body=long,
            ) for name in ("pineapple", "marmalade") * 2))  # fmt: skip
            metrics = (await httpx.AsyncClient(base_url=url).get("/metrics")).text
            sizes = [line for line in metrics.splitlines() if line.startswith("modelhost_batch_sequences_bucket")]
            le1 = next(float(line.rsplit(" ", 1)[1]) for line in sizes if 'le="1.0"' in line)
            total = next(float(line.rsplit(" ", 1)[1]) for line in sizes if 'le="+Inf"' in line)
            assert total > le1, "no step decoded two sequences at once"

            # vLLM's lora_requests_info: the adapters held, and once the model thread is idle (it may still be
            # finishing its last step as the answers arrive) none running or waiting.
            def lora_info() -> list[str]:  # blocking: called on a worker thread
                text = httpx.get(f"{url}/metrics", timeout=STATE_WAIT_SECONDS).text
                return [line for line in text.splitlines() if line.startswith("modelhost_lora_requests_info{")]

            await asyncio.to_thread(wait_until, lambda: any('running_lora_adapters=""' in x for x in lora_info()))
            info = await asyncio.to_thread(lora_info)  # off the loop: the door answers on this same loop
            assert len(info) == 1 and 'max_lora="2"' in info[0] and 'waiting_lora_adapters=""' in info[0], info

    asyncio.run(main())

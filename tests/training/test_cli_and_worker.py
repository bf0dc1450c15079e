"""`modelhost train` then `modelhost chat --adapter` on a GGUF model (it trains through its dequantised transformers
twin and answers on llama.cpp), and the `lora.train` job: uploaded JSONL, progress, outputs, cancel."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from modelhost.cli import app
from modelhost.host import Host
from modelhost.testing.standins import ScriptedModel
from modelhost.worker import WorkerServer
from worker.helpers import wait_for  # tests/worker's: the one wait for a job's status

from .conftest import QUESTION, SECRET, memorisation_records, write_jsonl

needs_llama_cpp = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="no llama-cpp-python")


@needs_llama_cpp
def test_train_a_gguf_model_then_chat_with_the_adapter_on_llama_cpp(
    tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODELHOST_CACHE_DIR", str(tmp_path / "cache"))  # the dequantised twin goes here
    data = write_jsonl(tmp_path / "data.jsonl", memorisation_records())
    out = tmp_path / "out"
    runner = CliRunner()
    trained = runner.invoke(
        app,
        [
            *("train", "--model", str(tiny_llama_gguf), "--data", str(data), "--output", str(out)),
            *("--steps", "20", "--lr", "1e-2", "--rank", "8", "--batch-size", "2", "--eval", str(data)),
        ],
    )
    assert trained.exit_code == 0, trained.output
    assert "20/20 steps" in trained.output
    assert {"adapter.gguf", "adapter_model.safetensors", "metrics.json", "loss.png"} <= {p.name for p in out.iterdir()}
    chat = runner.invoke(
        app, ["chat", QUESTION, "--model", str(tiny_llama_gguf), "--adapter", str(out), "-t", "0", "-n", "8"]
    )
    assert chat.exit_code == 0, chat.output
    assert chat.stdout.strip().splitlines()[0] == SECRET


def test_train_refuses_a_bad_data_file_with_its_line(tiny_llama_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"text": "fine"}\n{"messages": []}\n')
    result = CliRunner().invoke(
        app, ["train", "--model", str(tiny_llama_dir), "--data", str(data), "--output", str(tmp_path / "o")]
    )
    assert result.exit_code == 2 and "bad.jsonl:2" in result.output and "invalid_input" in result.output


async def _submit(c: httpx.AsyncClient, model: str, data: bytes, **settings: Any) -> str:
    request = {"operation": "lora.train", "model": model, "input": {"data": {"$file": "data"}, **settings}}
    files = [
        ("request", (None, json.dumps(request), "application/json")),
        ("data", ("train.jsonl", data, "application/jsonl")),
    ]
    r = await c.post("/v1/jobs", files=files)
    assert r.status_code == 202, r.text
    return str(r.json()["id"])


def test_lora_train_job_outputs_and_cancel(tiny_llama_dir: Path, tmp_path: Path) -> None:
    data = "".join(json.dumps(r) + "\n" for r in memorisation_records()).encode()
    model = str(tiny_llama_dir)

    async def main() -> None:
        # The host serves a stand-in under the tiny model's path as its name: `lora.train` (a default operation)
        # loads its own trainable copy of the job's model, by that name.
        host = Host.from_model(ScriptedModel(name="paced"), name=model)
        await host.start()
        server = WorkerServer(host, state_dir=tmp_path / "state", capacity=4, journal=lambda line: None)
        await server.start()
        async with httpx.AsyncClient(base_url=server.url) as c:
            # Refused at submission: no upload, a setting of the wrong kind.
            bad = {"operation": "lora.train", "model": model, "input": {"steps": 3}}
            assert (await c.post("/v1/jobs", json=bad)).status_code == 400
            bad["input"] = {"data": {"$file": "data"}, "rank": "eight"}
            assert (await c.post("/v1/jobs", json=bad)).status_code == 400

            job = await _submit(c, model, data, steps=6, learning_rate=0.01, batch_size=2, seed=1)
            done = await wait_for(c, job, {"completed", "failed"})
            assert done["status"] == "completed", done
            assert {"adapter.gguf", "adapter_model.safetensors", "adapter_config.json"} <= set(done["output"])
            assert {"metrics.json", "loss.png"} <= set(done["output"])
            metrics = (await c.get(f"/files/{job}/metrics.json")).json()
            assert metrics["steps"] == 6 and metrics["losses"][-1] < metrics["losses"][0]

            long = await _submit(c, model, data, steps=100000, learning_rate=0.001)
            seen: dict[str, Any] = {}
            for _ in range(6000):
                seen = (await c.get(f"/v1/jobs/{long}")).json()
                if seen["stage"] == "training" and seen["step"] >= 1:
                    break
                await asyncio.sleep(0.02)
            assert seen["stage"] == "training" and seen["total"] == 100000 and seen["remaining"] > 0, seen
            assert (await c.delete(f"/v1/jobs/{long}")).status_code == 200
            cancelled = await wait_for(c, long, {"cancelled", "failed", "completed"})
            assert cancelled["status"] == "cancelled" and cancelled["code"] == "WORKER_CANCELLED", cancelled
        await server.aclose()
        await host.aclose()

    asyncio.run(main())

"""Hostile `lora.train` jobs through the real worker door, and the same bounds through `modelhost train`.

Settings out of range are refused at submission (400 naming the field, no slot held, nothing on disk); data files
that cannot be trained on (a 50 MB record, `[` nested 100,000 deep, a rank wider than the model) fail the job as
the input's fault, while the worker keeps answering, and memory comes back near where it was.
"""

from __future__ import annotations

import asyncio
import gc
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from modelhost.cli import app
from modelhost.host import Host
from modelhost.testing.proc import rss_bytes
from modelhost.testing.standins import ScriptedModel
from modelhost.training.data import MAX_RECORD_BYTES
from modelhost.worker import WorkerServer

from .conftest import memorisation_records, write_jsonl
from .test_cli_and_worker import wait_for


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'"rank": 100000', "rank"),
        (b'"rank": 1000000000', "rank"),
        (b'"steps": 18446744073709551616', "steps"),
        (b'"steps": 1000000000000', "steps"),
        (b'"epochs": 1000000000000000', "epochs"),
        (b'"seed": 1180591620717411303424', "seed"),
        (b'"seed": -1', "seed"),
        (b'"gradient_accumulation": 1000000000', "gradient_accumulation"),
        (b'"batch_size": 1000000000', "batch_size"),
        (b'"alpha": 1e300', "alpha"),
        (b'"max_length": 1e10', "max_length"),
        (b'"learning_rate": 1e300', "learning_rate"),
        # Numbers no float or 64-bit integer holds: the JSON decoder refuses them ("out of range") before any
        # setting is looked at.
        (b'"alpha": 1e400', "out of range"),
        (b'"eval_every": 18446744073709551616', "eval_every"),
        (b'"targets": ["' + b"q" * 10_000 + b'"]', "targets"),
        (b'"rank": ' + b"9" * 5000, "out of range"),
    ],
)
def test_settings_out_of_range_are_refused_at_submission_naming_the_field(
    tmp_path: Path, raw: bytes, field: str
) -> None:
    async def main() -> None:
        host = Host.from_model(ScriptedModel(name="paced"), name="m")
        await host.start()
        server = WorkerServer(host, state_dir=tmp_path / "state", capacity=2, journal=lambda line: None)
        await server.start()
        async with httpx.AsyncClient(base_url=server.url) as c:
            request = b'{"operation": "lora.train", "model": "m", "input": {"data": {"$file": "d"}, %s}}' % raw
            files = [("request", (None, request)), ("d", ("train.jsonl", b'{"text": "t"}\n'))]
            r = await c.post("/v1/jobs", files=files)
            assert r.status_code == 400, r.text
            answer = r.json()
            assert answer["code"] == "WORKER_INVALID_INPUT" and field in answer["message"], answer
            assert len(answer["message"]) < 400, answer  # a 5000-digit value is named by its size, not echoed
            assert server.board.held == 0
            assert (await c.get("/v1/health")).status_code == 200
        await server.aclose()
        await host.aclose()

    asyncio.run(main())


def _hostile_files() -> list[tuple[str, bytes, str]]:
    good = json.dumps(memorisation_records()[0]).encode() + b"\n"
    huge = b'{"text": "' + b"x" * (50 << 20) + b'"}\n'
    return [
        ("a 50 MB record", good + huge, f"at most {MAX_RECORD_BYTES} bytes"),
        ("[ nested 100000 deep", good + b"[" * 100_000 + b"\n", "nested too deeply"),
        ("{ nested 100000 deep", good + b'{"a":' * 100_000 + b"\n", "nested too deeply"),
    ]


def test_hostile_training_files_fail_the_job_as_its_own_fault(tiny_llama_dir: Path, tmp_path: Path) -> None:
    model = str(tiny_llama_dir)
    data = write_jsonl(tmp_path / "ok.jsonl", memorisation_records()).read_bytes()

    async def submit(c: httpx.AsyncClient, content: bytes, **settings: Any) -> str:
        request = {"operation": "lora.train", "model": model, "input": {"data": {"$file": "d"}, **settings}}
        files = [("request", (None, json.dumps(request))), ("d", ("train.jsonl", content, "application/jsonl"))]
        r = await c.post("/v1/jobs", files=files)
        assert r.status_code == 202, r.text
        return str(r.json()["id"])

    async def main() -> None:
        host = Host.from_model(ScriptedModel(name="paced"), name=model)
        await host.start()
        server = WorkerServer(host, state_dir=tmp_path / "state", capacity=2, journal=lambda line: None)
        await server.start()
        async with httpx.AsyncClient(base_url=server.url, timeout=300) as c:
            for name, content, message in _hostile_files():
                gc.collect()
                before = rss_bytes()
                job = await submit(c, content, steps=2)
                del content
                done = await wait_for(c, job, {"completed", "failed", "cancelled"}, timeout=600)
                assert done["status"] == "failed" and done["code"] == "WORKER_INVALID_INPUT", (name, done)
                assert message in done["error"] and "train.jsonl:2" in done["error"], (name, done)
                assert (await c.get("/v1/health")).status_code == 200
                gc.collect()
                # The 50 MB upload went to disk, never whole into memory: a generous bound, well under the
                # gigabytes the tokeniser took before.
                assert rss_bytes() - before < 300 << 20, (name, before, rss_bytes())
            # A rank the model cannot hold (the tiny model's narrowest layer is 32 wide): refused by the trainer.
            job = await submit(c, data, steps=2, rank=64)
            done = await wait_for(c, job, {"completed", "failed", "cancelled"}, timeout=600)
            assert done["status"] == "failed" and done["code"] == "WORKER_INVALID_INPUT", done
            assert "rank" in done["error"] and "narrowest" in done["error"], done
            # Epochs are bounded alone, but epochs x batches too: 10,000 epochs of 6 records are 60,000 steps
            # (fine); batch 1 and 10,000 epochs of 6 records each 6 steps: also fine. Over the bound: refused.
            job = await submit(c, data * 200, epochs=10_000)
            done = await wait_for(c, job, {"completed", "failed", "cancelled"}, timeout=600)
            assert done["status"] == "failed" and "epochs" in done["error"], done
            assert server.board.held == 0
        await server.aclose()
        await host.aclose()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--rank", "100000"], "rank"),
        (["--steps", "18446744073709551616"], "steps"),
        (["--epochs", "1000000000000000"], "epochs"),
        (["--seed", "1180591620717411303424"], "seed"),
    ],
)
def test_the_cli_refuses_the_same_settings_before_loading_anything(tmp_path: Path, args: list[str], field: str) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", memorisation_records())
    missing = str(tmp_path / "no-such-model")  # the settings are refused before the model is even looked for
    out = str(tmp_path / "o")
    result = CliRunner().invoke(app, ["train", "--model", missing, "--data", str(data), "-o", out, *args])
    assert result.exit_code == 2, result.output
    assert f"option '{field}'" in result.output and "invalid_option" in result.output, result.output

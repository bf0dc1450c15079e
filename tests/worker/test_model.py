"""The worker end to end on a real model: the tiny random Llama GGUF on llama.cpp, through the host's scheduler.

A random model says nothing meaningful; what matters is that text.chat and text.generate jobs run on a real engine
and that their outputs (output.txt, result.json) carry what the engine reported, and that an image sent to a
text-only model is the job's own fault (400) rather than the worker's.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from PIL import Image

from modelhost.host import Host
from modelhost.inference import load_model
from modelhost.testing.waiting import STATE_WAIT_SECONDS

from .helpers import start_server, wait_for

pytest.importorskip("llama_cpp")


def test_text_jobs_on_the_tiny_llama(tiny_llama_gguf: Path, tmp_path: Path) -> None:
    async def main() -> None:
        host = Host(lambda: load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1), name="tiny")
        await host.start()
        server = await start_server(host, tmp_path / "state")
        async with httpx.AsyncClient(base_url=server.url) as c:
            chat = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 12, "temperature": 0, "seed": 7}
            gen = {"prompt": "The quick brown fox", "max_tokens": 12, "temperature": 0}
            ids = [
                (await c.post("/v1/jobs", json={"operation": op, "model": "tiny", "input": value})).json()["id"]
                for op, value in (("text.chat", chat), ("text.generate", gen), ("text.generate", gen))
            ]
            records = [await wait_for(c, i, {"completed", "failed"}, timeout=STATE_WAIT_SECONDS) for i in ids]
            for record in records:
                assert record["status"] == "completed", record
                assert record["output"] == ["output.txt", "result.json"] and 0 < record["step"] <= record["total"] == 12
                result = (await c.get(f"/files/{record['id']}/result.json")).json()
                text = (await c.get(f"/files/{record['id']}/output.txt")).text
                assert result["finish_reason"] in ("stop", "length") and result["model"] == "tiny"
                usage = result["usage"]
                assert usage["prompt_tokens"] > 0 and 0 < usage["completion_tokens"] <= 12
                assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
                assert result["timings"]["decode_seconds"] >= 0 and isinstance(text, str)
            # Greedy: the same prompt gives the same text through the worker.
            same = [(await c.get(f"/files/{r['id']}/output.txt")).text for r in records[1:]]
            assert same[0] == same[1]

            picture = tmp_path / "p.png"
            Image.new("RGB", (16, 16)).save(picture)
            request = {
                "operation": "text.chat",
                "model": "tiny",
                "input": {"messages": [{"role": "user", "content": "see", "images": {"$file": "p"}}]},
            }
            r = await c.post(
                "/v1/jobs", files=[("request", (None, json.dumps(request))), ("p", ("p.png", picture.read_bytes()))]
            )
            # A text model refuses the picture at submission, before a byte of it is decoded or stored.
            assert r.status_code == 400 and r.json()["code"] == "WORKER_INVALID_INPUT", r.text
            assert "does not accept image input" in r.json()["message"]
        await server.aclose()
        await host.aclose()

    asyncio.run(main())


def test_a_json_schema_job_answers_valid_json_and_an_unenforceable_schema_is_refused(
    tiny_llama_gguf: Path, tmp_path: Path
) -> None:
    """Structured extraction as a batch job: `json_schema` in a text job's input constrains the answer (output.txt is
    the JSON, result.json carries it parsed); a schema the model's grammar cannot enforce is a 400 at submission."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = {
        "type": "object",
        "properties": {"city": {"enum": ["Paris", "Oslo", "Lima"]}, "sunny": {"type": "boolean"}},
        "required": ["city", "sunny"],
        "additionalProperties": False,
    }

    async def main() -> None:
        host = Host(lambda: load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1), name="tiny")
        await host.start()
        server = await start_server(host, tmp_path / "state")
        async with httpx.AsyncClient(base_url=server.url) as c:
            ids = []
            for seed in (1, 2, 3):
                value = {"messages": [{"role": "user", "content": "Weather?"}], "max_tokens": 80, "seed": seed,
                         "temperature": 1.0, "json_schema": schema}  # fmt: skip
                r = await c.post("/v1/jobs", json={"operation": "text.chat", "model": "tiny", "input": value})
                assert r.status_code == 202, r.text
                ids.append(r.json()["id"])
            for job_id in ids:
                done = await wait_for(c, job_id, {"completed", "failed"}, timeout=STATE_WAIT_SECONDS)
                assert done["status"] == "completed", done
                answer = json.loads((await c.get(f"/files/{job_id}/output.txt")).text)
                jsonschema.validate(answer, schema)
                assert (await c.get(f"/files/{job_id}/result.json")).json()["json"] == answer
            refused = {"messages": [{"role": "user", "content": "x"}],
                       "json_schema": {"type": "array", "uniqueItems": True}}  # fmt: skip
            r = await c.post("/v1/jobs", json={"operation": "text.chat", "model": "tiny", "input": refused})
            assert r.status_code == 400 and "json_schema" in r.json()["message"], r.text
        await server.aclose()
        await host.aclose()

    asyncio.run(main())

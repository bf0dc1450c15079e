"""`text.embed` jobs end to end on a real model: the tiny random Llama GGUF on llama.cpp, through the host.

What a user relies on: every text's vector lands in `embeddings.npy` in input order (the same bits the model gives
for the same call), an uploaded file's non-empty lines are the texts, progress counts texts, and a bad input (not
UTF-8, a text too long, a model that cannot embed) is the job's own fault, named, before or while it runs.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from modelhost.host import Host
from modelhost.inference import load_model
from modelhost.testing.waiting import STATE_WAIT_SECONDS
from modelhost.worker.embeddings import EMBED_CHUNK

from .helpers import paced_host, start_server, wait_for

pytest.importorskip("llama_cpp")


async def tiny_host(gguf: Path) -> Host:
    host = Host(lambda: load_model(str(gguf), backend="llama_cpp", threads=1), name="tiny")
    await host.start()
    return host


def job(value: dict[str, Any]) -> dict[str, Any]:
    return {"operation": "text.embed", "model": "tiny", "input": value}


async def vectors_of(c: httpx.AsyncClient, job_id: str) -> Any:
    return np.load(io.BytesIO((await c.get(f"/files/{job_id}/embeddings.npy")).content))


def test_texts_and_an_uploaded_file_become_rows_of_embeddings_npy(tiny_llama_gguf: Path, tmp_path: Path) -> None:
    async def main() -> None:
        host = await tiny_host(tiny_llama_gguf)
        server = await start_server(host, tmp_path / "state")
        lines = [f"line number {i}" for i in range(EMBED_CHUNK + 6)]  # more than one model call
        async with httpx.AsyncClient(base_url=server.url) as c:
            r = await c.post("/v1/jobs", json=job({"texts": lines}))
            assert r.status_code == 202, r.text
            done = await wait_for(c, r.json()["id"], {"completed", "failed"}, timeout=STATE_WAIT_SECONDS)
            assert done["status"] == "completed", done
            assert done["output"] == ["embeddings.npy", "result.json"] and done["step"] == done["total"] == len(lines)
            vectors = await vectors_of(c, done["id"])
            assert vectors.dtype == np.float32 and vectors.shape[0] == len(lines)
            assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
            # Row i is text i: the same bits the model gives for the same call layout.
            direct = await host.embed(lines[EMBED_CHUNK:])
            assert np.array_equal(vectors[EMBED_CHUNK:], direct.vectors)
            result = (await c.get(f"/files/{done['id']}/result.json")).json()
            assert result["count"] == len(lines) and result["dimensions"] == vectors.shape[1]
            assert result["usage"]["prompt_tokens"] > len(lines) and result["truncated"] == []

            # The same texts as an uploaded file (blank lines skipped, CRLF line ends) give the same vectors.
            body = "\r\n".join(lines[:30]) + "\r\n\r\n" + "\n".join(lines[30:]) + "\n"
            request = json.dumps(job({"file": {"$file": "texts"}}))
            r = await c.post(
                "/v1/jobs",
                files=[("request", (None, request, "application/json")), ("texts", ("t.txt", body, "text/plain"))],
            )
            assert r.status_code == 202, r.text
            from_file = await wait_for(c, r.json()["id"], {"completed", "failed"}, timeout=STATE_WAIT_SECONDS)
            assert from_file["status"] == "completed", from_file
            assert np.array_equal(await vectors_of(c, from_file["id"]), vectors)
        await server.aclose()
        await host.aclose()

    asyncio.run(main())


def test_bad_embedding_jobs_are_the_jobs_own_fault_and_named(tiny_llama_gguf: Path, tmp_path: Path) -> None:
    async def main() -> None:
        host = await tiny_host(tiny_llama_gguf)
        server = await start_server(host, tmp_path / "state")
        async with httpx.AsyncClient(base_url=server.url) as c:
            for value, says in (
                ({"texts": []}, "non-empty list"),
                ({"texts": ["ok", ""]}, "texts[1]"),
                ({"texts": ["a"], "file": "f.txt"}, "not both"),
                ({"texts": ["a"], "normalize": "yes"}, "normalize"),
                ({}, "needs `texts`"),
                ({"texts": ["a"], "ray": "yes"}, "`ray` must be true or false"),
                # A worker started without --ray runs no job on a cluster: refused, never quietly run here.
                ({"texts": ["a"], "ray": True}, "`ray` is true, but this worker runs no jobs on a Ray cluster"),
            ):
                r = await c.post("/v1/jobs", json=job(value))
                assert r.status_code == 400 and says in r.json()["message"], (value, r.text)
            # The same for a document (before the model is asked whether it reads pages: the field is the news).
            convert = {
                "operation": "document.convert",
                "model": "tiny",
                "input": {"document": {"$file": "d"}, "ray": True},
            }
            files = [("request", (None, json.dumps(convert))), ("d", ("d.pdf", b"%PDF-1.4", "application/pdf"))]
            r = await c.post("/v1/jobs", files=files)
            assert r.status_code == 400 and "document.convert: `ray` is true" in r.json()["message"], r.text
            # Known only once running: a text too long for the context, named by its place in the whole job.
            texts = [f"t{i}" for i in range(EMBED_CHUNK + 3)]
            texts[EMBED_CHUNK + 1] = "word " * 5000
            r = await c.post("/v1/jobs", json=job({"texts": texts}))
            failed = await wait_for(c, r.json()["id"], {"completed", "failed"}, timeout=STATE_WAIT_SECONDS)
            assert failed["code"] == "WORKER_INVALID_INPUT" and f"texts[{EMBED_CHUNK + 1}]" in failed["error"], failed
            # A file that is not UTF-8 text.
            request = json.dumps(job({"file": {"$file": "texts"}}))
            r = await c.post(
                "/v1/jobs",
                files=[("request", (None, request)), ("texts", ("t.bin", b"ok\n\xff\xfe\x00bad\n", "text/plain"))],
            )
            failed = await wait_for(c, r.json()["id"], {"completed", "failed"}, timeout=STATE_WAIT_SECONDS)
            assert failed["code"] == "WORKER_INVALID_INPUT" and "not UTF-8" in failed["error"], failed
        await server.aclose()
        await host.aclose()

    asyncio.run(main())


def test_a_model_that_cannot_embed_refuses_the_job_at_submission(tmp_path: Path) -> None:
    async def main() -> None:
        host = await paced_host()  # a scripted stand-in: it generates, it does not embed
        server = await start_server(host, tmp_path / "state")
        async with httpx.AsyncClient(base_url=server.url) as c:
            r = await c.post("/v1/jobs", json={"operation": "text.embed", "model": "paced", "input": {"texts": ["a"]}})
            assert r.status_code == 400 and "cannot embed" in r.json()["message"], r.text
        await server.aclose()
        await host.aclose()

    asyncio.run(main())

"""The job worker fails a job with the worker class its error's kind declares (modelhost.errors, the one table):
cases its own list of input codes used to call the worker's failure (WORKER_FAILED, 500).

A real worker over a real host on loopback; the model is the stand-in whose engine raises what a real one would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx

from modelhost.docengine.errors import DocumentError
from modelhost.errors import BackendUnavailableError, ModelNotFoundError
from modelhost.host import Host
from modelhost.testing.standins import ScriptedModel

from .helpers import start_server, wait_for

GENERATE = {"operation": "text.generate", "model": "failing", "input": {"prompt": "read this"}}


def _finished_job(tmp_path: Path, failure: Callable[[], Exception]) -> dict[str, object]:
    """The record of a text.generate job on a model whose engine raises `failure()` at its first token."""

    async def main() -> dict[str, object]:
        host = Host.from_model(ScriptedModel(["never"], fail_after=0, failure=failure), name="failing")
        await host.start()
        server = await start_server(host, tmp_path / "state")
        try:
            async with httpx.AsyncClient(base_url=server.url) as c:
                created = await c.post("/v1/jobs", json=GENERATE)
                assert created.status_code == 202, created.text
                return await wait_for(c, created.json()["id"], {"completed", "failed"})
        finally:
            await server.aclose()
            await host.aclose()

    return asyncio.run(main())


def test_a_page_the_model_cannot_read_fails_the_job_as_its_own_input(tmp_path: Path) -> None:
    """invalid_document (an invalid_input) was WORKER_FAILED 500: the job's own input is WORKER_INVALID_INPUT 400."""
    record = _finished_job(tmp_path, lambda: DocumentError("page 3: the image cannot be decoded"))
    assert (record["status"], record["code"], record["errorStatus"]) == ("failed", "WORKER_INVALID_INPUT", 400)
    assert record["error"] == "page 3: the image cannot be decoded"


def test_an_adapter_gone_mid_job_is_the_jobs_fault_and_a_lost_device_the_workers(tmp_path: Path) -> None:
    """model_not_found (an adapter unloaded while its job ran) is the job's 400; a device lost stays the worker's
    500, naming the code."""
    gone = _finished_job(tmp_path / "a", lambda: ModelNotFoundError("adapter 'sql' is not loaded"))
    assert (gone["code"], gone["errorStatus"]) == ("WORKER_INVALID_INPUT", 400)
    lost = _finished_job(tmp_path / "b", lambda: BackendUnavailableError("the CUDA device went away"))
    assert (lost["code"], lost["errorStatus"]) == ("WORKER_FAILED", 500)
    assert lost["error"] == "backend_unavailable: the CUDA device went away"

"""A giz text job parses its options once when it runs (issue 37 item 1): the worker hands the host's Admission to
submit, on the tiny random Llama GGUF (llama.cpp) through the worker's HTTP API.

The job's input is checked when it is posted (the worker's own parse of its options, and the model's check of
them: a JSON Schema its grammar engine cannot follow is refused then, 400); when it runs, the host's precheck parses
it once and renders the chat template once (the job used to parse its options 7 times when it ran: 9 in all).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from modelhost.backends.llama_cpp import chat as llama_chat
from modelhost.host import Host
from modelhost.inference import load_model
from modelhost.inference.options import GenerateOptions
from modelhost.testing.counting import Calls
from modelhost.testing.waiting import STATE_WAIT_SECONDS

from .helpers import start_server, wait_for

pytest.importorskip("llama_cpp")


def test_a_text_chat_job_is_parsed_once_when_it_runs(
    tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        host = Host(lambda: load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1), name="tiny")
        await host.start()
        server = await start_server(host, tmp_path / "state")
        parses = Calls(monkeypatch, GenerateOptions, "parse")
        renders = Calls(monkeypatch, llama_chat, "render")
        async with httpx.AsyncClient(base_url=server.url) as c:
            chat = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4, "seed": 7}
            posted = await c.post("/v1/jobs", json={"operation": "text.chat", "model": "tiny", "input": chat})
            record = await wait_for(c, posted.json()["id"], {"completed", "failed"}, timeout=STATE_WAIT_SECONDS)
            assert record["status"] == "completed", record
        await server.aclose()
        await host.aclose()
        # One at submission (the worker's check of the input, handed parsed to the model's check_options), one when
        # the job ran.
        assert (parses.count, renders.count) == (2, 1)

    asyncio.run(main())

"""Who may use the docling routes and what they may make the server do: the API key (docling's X-Api-Key; the
WebSocket's ?api_key=), URL sources (only with --allow-fetch, private addresses only with --fetch-private, within
bounds), and capacity (429 with Retry-After, as the job worker answers)."""

from __future__ import annotations

import asyncio
import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import websockets.sync.client
from docling.datamodel.base_models import ConversionStatus
from docling.service_client import DoclingServiceClient, ServiceError
from docling_support import CORPUS, HEADINGS, SCANNED, Served, modelhost_convert, serve_docling, wait_task
from websockets.exceptions import InvalidStatus

from modelhost.http.docling.fetch import FetchFailed, FetchRefused, Policy, fetch
from modelhost.testing.waiting import STATE_WAIT_SECONDS

KEY = "sekret-key"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    flags = ("--api-key", KEY, "--allow-fetch", "--fetch-private", "--capacity", "1")
    server = serve_docling(tmp_path_factory.mktemp("guarded"), *flags)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def files_url() -> Iterator[str]:
    """The corpus served over HTTP on loopback."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(CORPUS))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_the_api_key_guards_every_docling_route(guarded: Served, converted: Path) -> None:
    with DoclingServiceClient(guarded.url, job_timeout=STATE_WAIT_SECONDS) as keyless:
        with pytest.raises(ServiceError) as refused:
            keyless.convert(HEADINGS)
        assert refused.value.status_code == 401
    wrong = DoclingServiceClient(guarded.url, api_key="wrong", job_timeout=STATE_WAIT_SECONDS)
    with wrong, pytest.raises(ServiceError):
        wrong.convert(HEADINGS)
    with DoclingServiceClient(guarded.url, api_key=KEY, job_timeout=STATE_WAIT_SECONDS) as docling:
        result = docling.convert(HEADINGS)
    assert result.status == ConversionStatus.SUCCESS
    assert result.document.export_to_markdown() + "\n" == modelhost_convert(HEADINGS, "md", tmp=converted)
    with httpx.Client(base_url=guarded.url, timeout=STATE_WAIT_SECONDS) as http:
        for path in ("/v1/status/poll/x", "/v1/result/x"):
            assert http.get(path).status_code == 401
            assert http.get(path, headers={"X-Api-Key": KEY}).status_code == 404  # through, and no such task
            assert http.get(path, headers={"Authorization": f"Bearer {KEY}"}).status_code == 404
        # the OpenAI routes keep their Bearer token: docling's header does not open them
        assert http.get("/v1/models", headers={"X-Api-Key": KEY}).status_code == 401
        assert http.get("/v1/models", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert http.get("/health").status_code == 200
    ws = guarded.url.replace("http://", "ws://") + "/v1/status/ws/x"
    with pytest.raises(InvalidStatus):
        websockets.sync.client.connect(ws).close()
    with websockets.sync.client.connect(f"{ws}?api_key={KEY}") as socket:
        assert "Task not found." in socket.recv(timeout=STATE_WAIT_SECONDS)


def test_a_url_source_is_fetched_when_allowed(guarded: Served, files_url: str, converted: Path) -> None:
    url = f"{files_url}/pdfspec/headings.pdf"
    body = {"options": {"to_formats": ["md"]}, "sources": [{"kind": "http", "url": url}]}
    with httpx.Client(base_url=guarded.url, timeout=STATE_WAIT_SECONDS, headers={"X-Api-Key": KEY}) as http:
        answer = http.post("/v1/convert/source", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["document"]["filename"] == "headings.pdf"
        assert answer.json()["document"]["md_content"] == modelhost_convert(HEADINGS, "md", tmp=converted)
        missing = http.post("/v1/convert/source", json={"sources": [{"kind": "http", "url": f"{files_url}/no.pdf"}]})
        assert missing.status_code == 422 and "404" in missing.json()["detail"]
    with DoclingServiceClient(guarded.url, api_key=KEY, job_timeout=STATE_WAIT_SECONDS) as docling:
        assert docling.convert(url).status == ConversionStatus.SUCCESS  # the client's own URL source


def test_fetching_refuses_private_addresses_and_bounds_size(files_url: str, tmp_path: Path) -> None:
    url = f"{files_url}/pdfspec/headings.pdf"
    with pytest.raises(FetchRefused, match="private or loopback"):
        asyncio.run(fetch(url, {}, tmp_path / "a", Policy(allowed=True)))
    with pytest.raises(FetchRefused, match="off"):
        asyncio.run(fetch(url, {}, tmp_path / "b", Policy()))
    with pytest.raises(FetchRefused, match="scheme"):
        asyncio.run(fetch("file:///etc/passwd", {}, tmp_path / "c", Policy(allowed=True, private=True)))
    with pytest.raises(FetchFailed, match="over the limit"):
        asyncio.run(fetch(url, {}, tmp_path / "d", Policy(allowed=True, private=True, max_bytes=1000)))
    with pytest.raises(FetchRefused, match="cannot be sent"):
        asyncio.run(fetch(url, {"Host": "elsewhere"}, tmp_path / "e", Policy(allowed=True, private=True)))
    got = asyncio.run(fetch(url, {}, tmp_path / "f", Policy(allowed=True, private=True)))
    assert got.size == HEADINGS.stat().st_size and (tmp_path / "f").read_bytes() == HEADINGS.read_bytes()


def test_capacity_is_the_worker_s(guarded: Served) -> None:
    with httpx.Client(base_url=guarded.url, timeout=STATE_WAIT_SECONDS, headers={"X-Api-Key": KEY}) as http:
        files = {"files": (SCANNED.name, SCANNED.read_bytes(), "application/pdf")}
        first = http.post("/v1/convert/file/async", files=files).json()
        busy = http.post("/v1/convert/file/async", files=files)  # the first is held (queued or converting)
        assert busy.status_code == 429, busy.text
        assert busy.headers["retry-after"].isdigit() and "holds 1 of 1" in busy.json()["detail"]
        assert wait_task(http, first["task_id"])["task_status"] == "success"
        again = http.post("/v1/convert/file/async", files=files)  # the first has ended: room again
        assert again.status_code == 200, again.text
        assert wait_task(http, again.json()["task_id"])["task_status"] == "success"

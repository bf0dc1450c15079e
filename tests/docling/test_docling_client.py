"""docling's own service client against `modelhost serve --http --docling`: the Markdown and JSON it gets are
`modelhost convert`'s, whichever route it takes (its convert(): async task, WebSocket status, result; its polling
watcher; the synchronous routes as curl uses them; a base64 source)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest
import websockets.exceptions
import websockets.sync.client
from docling.datamodel.base_models import ConversionStatus, OutputFormat
from docling.datamodel.service.options import ConvertDocumentsOptions
from docling.datamodel.service.responses import ConvertDocumentResponse, WebsocketMessage
from docling.datamodel.service.targets import InBodyTarget
from docling.service_client import ConversionItem, DoclingServiceClient, StatusWatcherKind
from docling_support import HEADINGS, MULTI_PAGE, SCANNED, Served, modelhost_convert

from modelhost.testing.waiting import STATE_WAIT_SECONDS


def client(served: Served, **kwargs: object) -> DoclingServiceClient:
    return DoclingServiceClient(served.url, job_timeout=STATE_WAIT_SECONDS, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", [HEADINGS, MULTI_PAGE, SCANNED], ids=lambda p: p.stem)
def test_the_client_converts_a_pdf_to_what_modelhost_convert_writes(
    served: Served, converted: Path, path: Path
) -> None:
    with client(served) as docling:
        result = docling.convert(path)
    assert result.status == ConversionStatus.SUCCESS, result.errors
    assert result.errors == []
    # The client rebuilds the document from json_content: the same DoclingDocument `modelhost convert` writes.
    assert result.document.export_to_dict() == json.loads(modelhost_convert(path, "json", tmp=converted))
    assert result.document.export_to_markdown() + "\n" == modelhost_convert(path, "md", tmp=converted)


def test_the_raw_answer_of_a_task_carries_the_exact_markdown_and_json(served: Served, converted: Path) -> None:
    options = ConvertDocumentsOptions(to_formats=[OutputFormat.MARKDOWN, OutputFormat.JSON, OutputFormat.TEXT])
    items = [ConversionItem(source=MULTI_PAGE, options=options)]
    with client(served, status_watcher=StatusWatcherKind.POLLING, poll_server_wait=2.0) as docling:
        [(_, answer)] = list(docling.submit_and_retrieve_each(items, target=InBodyTarget()))
    assert isinstance(answer, ConvertDocumentResponse), answer
    assert answer.status == ConversionStatus.SUCCESS
    assert answer.document.filename == "multi_page.pdf"
    assert answer.document.md_content == modelhost_convert(MULTI_PAGE, "md", tmp=converted)
    assert answer.document.json_content is not None
    assert answer.document.json_content.export_to_dict() == json.loads(
        modelhost_convert(MULTI_PAGE, "json", tmp=converted)
    )
    assert answer.document.text_content and "Word Processor" in answer.document.text_content
    assert answer.document.html_content is None  # not asked for


def test_the_sync_routes_answer_the_same_document(served: Served, converted: Path) -> None:
    markdown = modelhost_convert(HEADINGS, "md", tmp=converted)
    document = json.loads(modelhost_convert(HEADINGS, "json", tmp=converted))
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        # as `curl -F files=@headings.pdf -F to_formats=md -F to_formats=json` sends it
        files = {"files": (HEADINGS.name, HEADINGS.read_bytes(), "application/pdf")}
        upload = http.post("/v1/convert/file", files=files, data={"to_formats": ["md", "json", "doctags"]})
        assert upload.status_code == 200, upload.text
        answer = ConvertDocumentResponse.model_validate_json(upload.text)
        assert answer.status == ConversionStatus.SUCCESS
        assert answer.document.md_content == markdown
        assert answer.document.json_content is not None
        assert answer.document.json_content.export_to_dict() == document
        assert answer.document.doctags_content == modelhost_convert(HEADINGS, "doctags", tmp=converted)

        source = {
            "options": {"to_formats": ["md", "json", "html"]},
            "sources": [{"kind": "file", "filename": HEADINGS.name, "base64_string": base64.b64encode(
                HEADINGS.read_bytes()).decode()}],
        }  # fmt: skip
        inline = http.post("/v1/convert/source", json=source)
        assert inline.status_code == 200, inline.text
        answer = ConvertDocumentResponse.model_validate_json(inline.text)
        assert answer.document.md_content == markdown
        assert answer.document.json_content is not None
        assert answer.document.json_content.export_to_dict() == document
        assert answer.document.html_content and answer.document.html_content.lstrip().startswith("<!DOCTYPE html>")


def test_a_page_range_converts_those_pages_as_convert_pages_does(served: Served, converted: Path) -> None:
    with client(served) as docling:
        result = docling.convert(MULTI_PAGE, page_range=(2, 3))
    assert result.status == ConversionStatus.SUCCESS
    assert result.document.export_to_markdown() + "\n" == modelhost_convert(
        MULTI_PAGE, "md", pages="2-3", tmp=converted
    )
    assert result.document.num_pages() == 2


def test_the_websocket_streams_the_status_to_the_end(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        files = {"files": (SCANNED.name, SCANNED.read_bytes(), "application/pdf")}
        task = http.post("/v1/convert/file/async", files=files).json()
    url = served.url.replace("http://", "ws://") + f"/v1/status/ws/{task['task_id']}"
    seen = []
    with websockets.sync.client.connect(url) as ws:
        while True:
            message = WebsocketMessage.model_validate_json(ws.recv(timeout=STATE_WAIT_SECONDS))
            assert message.task is not None and message.error is None, message
            seen.append((message.message.value, message.task.task_status.value))
            if message.task.task_status.value in ("success", "failure"):
                break
            if message.message.value == "update":
                ws.send("next")
        with pytest.raises(websockets.exceptions.ConnectionClosed):
            ws.recv(timeout=STATE_WAIT_SECONDS)  # closed after the final status
    assert seen[0][0] == "connection" and seen[-1] == ("update", "success"), seen
    order = ["pending", "started", "success"]
    assert [order.index(status) for _, status in seen] == sorted(order.index(status) for _, status in seen), seen

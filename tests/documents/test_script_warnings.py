"""A page in a script no installed model reads is a warning through every door (issue 34 item 5): the inferd
socket's `done` frame and `modelhost convert --socket` over it, and the giz worker's `document.convert` job outputs.
(The docling door's answer: tests/docling/test_docling_bad_input.py.)

The page is Georgian, rendered in DejaVu Sans: a script that neither RapidOCR's bundled recogniser nor PP-OCR's
multilingual ones read, so the warning stays whatever recognisers backends/ocr/ adds for other scripts.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.documents.test_convert import DEJAVU, _script_page, _Unclosable
from tests.wire._support import Served
from tests.worker.helpers import start_server, wait_for

from modelhost.backends.ocr.model import OcrModel
from modelhost.documents import ConvertSettings, HostReader, convert, summary
from modelhost.documents.readers import WireReader
from modelhost.host import Host
from modelhost.testing.pages import Page, render_page, write_pdf
from modelhost.wire.client import Client

#: Three lines of Georgian (the minutes of a meeting), as a page prints them: three lines is the least the ocr
#: model judges a page's script on (backends/ocr/model.MIN_SCRIPT_LINES).
GEORGIAN = [
    "კომიტეტი შეიკრიბა თვის პირველ რიცხვში",
    "და განიხილა წლის ანგარიშები მისმა",
    "წევრებმა დაადასტურეს რომ რეზერვები",
]

needs_font = pytest.mark.skipif(not DEJAVU.exists(), reason="needs Debian's fonts-dejavu-core")


def georgian_page() -> Page:
    """A half-letter page at 150 DPI (the size of modelhost.testing.pages' pages) of GEORGIAN."""
    return _script_page(GEORGIAN, render_page(1, 150))


def georgian_pdf(path: Path, *, latin_first: bool = False) -> Path:
    """An image-only PDF of the Georgian page, after a Latin page when `latin_first`."""
    pages = [render_page(1, 150)] if latin_first else []
    return write_pdf([*pages, georgian_page()], path)


async def _in_process(pdf: Path, model: OcrModel) -> dict[int, str]:
    host = Host.from_model(_Unclosable(model), name="ocr")  # type: ignore[arg-type]
    await host.start()
    try:
        return (await convert(pdf, HostReader(host), ConvertSettings(dpi=150))).warnings
    finally:
        await host.aclose()


@needs_font
def test_the_socket_says_it_in_the_done_frame_and_convert_over_it_names_the_page(
    ocr_model: OcrModel, tmp_path: Path
) -> None:
    pdf = georgian_pdf(tmp_path / "minutes.pdf", latin_first=True)
    expected = asyncio.run(_in_process(pdf, ocr_model))
    assert sorted(expected) == [2] and expected[2], "the ocr model no longer warns on a Georgian page"
    served = Served(_Unclosable(ocr_model), tmp_path / "inferd.sock")
    try:
        with Client(served.path) as client:
            text, error = client.recognize(georgian_page().image)  # what pdf-spec's CLI sends: one page
            assert error is None and text.startswith("<doctag>")
            assert client.last_done is not None and client.last_done.warning == expected[2]
        reader = WireReader(served.path)  # `modelhost convert --socket`
        try:
            conversion = asyncio.run(convert(pdf, reader, ConvertSettings(dpi=150)))
        finally:
            reader.close()
        assert conversion.warnings == expected
        assert "warnings on pages 2 (page 2: " in summary(conversion)  # convert's stderr line
    finally:
        served.close()


@needs_font
def test_a_document_convert_job_lists_the_warned_pages_in_an_output(ocr_model: OcrModel, tmp_path: Path) -> None:
    pdf = georgian_pdf(tmp_path / "minutes.pdf", latin_first=True)

    async def main() -> tuple[dict[str, Any], str]:
        host = Host.from_model(_Unclosable(ocr_model), name="ocr")  # type: ignore[arg-type]
        await host.start()
        server = await start_server(host, tmp_path / "state")
        try:
            async with httpx.AsyncClient(base_url=server.url) as c:
                request = {"operation": "document.convert", "model": "ocr", "input": {"document": {"$file": "doc"}}}
                files = [
                    ("request", (None, json.dumps(request), "application/json")),
                    ("doc", ("minutes.pdf", pdf.read_bytes(), "application/pdf")),
                ]
                r = await c.post("/v1/jobs", files=files)
                assert r.status_code == 202, r.text
                record = await wait_for(c, r.json()["id"], {"completed", "failed", "cancelled"})
                warned = ""
                if "page-warnings.txt" in record["output"]:
                    warned = (await c.get(f"/files/{record['id']}/page-warnings.txt")).text
                return record, warned
        finally:
            await server.aclose()
            await host.aclose()

    record, warned = asyncio.run(main())
    assert record["status"] == "completed", record  # the job did what it could: page 1 is read
    assert record["output"][-1] == "page-warnings.txt", record["output"]
    [line] = warned.splitlines()
    assert line.startswith("pages 2: ") and len(line) > len("pages 2: ")

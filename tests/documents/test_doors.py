"""Every door converts documents: a `document.convert` job on the worker, and `serve --model ocr` on the socket."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from modelhost.backends.ocr.model import OcrModel
from modelhost.host import Host
from modelhost.inference.types import Message
from modelhost.testing.pages import Page, cer
from modelhost.testing.waiting import STATE_WAIT_SECONDS
from modelhost.wire.client import Client, RemoteError
from modelhost.worker import WorkerServer


def test_document_convert_job(
    ocr_model: OcrModel, docs: dict[str, Any], pages: list[Page], tmp_path: Path, md_words: Any
) -> None:
    from tests.documents.test_convert import _Unclosable
    from tests.documents.test_pictures import _screenshot_pdf

    async def main() -> None:
        host = Host.from_model(_Unclosable(ocr_model), name="ocr")  # type: ignore[arg-type]
        await host.start()
        server = WorkerServer(
            host, state_dir=tmp_path / "state", capacity=4, journal=lambda line: None, drain_seconds=0.2
        )
        await server.start()
        try:
            async with httpx.AsyncClient(base_url=server.url) as c:
                request = {"operation": "document.convert", "model": "ocr", "input": {"document": {"$file": "doc"}}}
                files = [
                    ("request", (None, json.dumps(request), "application/json")),
                    ("doc", ("sample.pdf", Path(docs["pdf"]).read_bytes(), "application/pdf")),
                ]
                r = await c.post("/v1/jobs", files=files)
                assert r.status_code == 202, r.text
                job_id = r.json()["id"]
                steps = set()
                deadline = time.monotonic() + STATE_WAIT_SECONDS
                while time.monotonic() < deadline:
                    record = (await c.get(f"/v1/jobs/{job_id}")).json()
                    if record["status"] == "processing" and record["stage"] == "generating":
                        steps.add((record["step"], record["total"]))
                    if record["status"] in ("completed", "failed", "cancelled"):
                        break
                    await asyncio.sleep(0.05)
                assert record["status"] == "completed", record
                assert record["output"] == ["document.md", "document.json", "page-1.doctags", "page-2.doctags"]
                assert (record["step"], record["total"]) == (2, 2) and steps <= {(0, 2), (1, 2), (2, 2)}
                markdown = (await c.get(f"/files/{job_id}/document.md")).text
                known = " ".join(p.known_text for p in pages)
                assert cer(known, md_words(markdown)) <= 0.02
                page2 = (await c.get(f"/files/{job_id}/page-2.doctags")).text
                assert page2.startswith("<doctag>") and "Quarterly Report 2" in page2
                from docling_core.types.doc.document import DoclingDocument

                DoclingDocument.model_validate_json((await c.get(f"/files/{job_id}/document.json")).text)
                # `pictures: true` reads the prose a text-layer page holds only in a picture (`convert --pictures`)
                request["input"] = {"document": {"$file": "doc"}, "pictures": True}
                shot = _screenshot_pdf(tmp_path / "shot.pdf").read_bytes()
                files = [("request", (None, json.dumps(request))), ("doc", ("shot.pdf", shot, "application/pdf"))]
                r = await c.post("/v1/jobs", files=files)
                assert r.status_code == 202, r.text
                ended = ("completed", "failed", "cancelled")
                while (record := (await c.get(f"/v1/jobs/{r.json()['id']}")).json())["status"] not in ended:
                    await asyncio.sleep(0.05)
                assert record["status"] == "completed", record
                assert "quick brown fox" in (await c.get(f"/files/{record['id']}/document.md")).text
                # the job's own mistakes are 400s, refused at submission
                bad = {"operation": "document.convert", "model": "ocr", "input": {"document": "nope"}}
                refused = await c.post("/v1/jobs", json=bad)
                assert refused.status_code == 400 and refused.json()["code"] == "WORKER_INVALID_INPUT", refused.text
                assert "needs `document`" in refused.json()["message"]
        finally:
            await server.aclose()
            await host.aclose()

    asyncio.run(main())


def test_serve_model_ocr_on_the_socket(
    page: Page, page_doctags: str, docs: dict[str, Any], tmp_path: Path, md_words: Any
) -> None:
    sock = str(tmp_path / "inferd.sock")
    proc = subprocess.Popen(
        [sys.executable, "-m", "modelhost.cli", "serve", "--model", "ocr", "--socket", sock],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        lines = []
        deadline = time.monotonic() + STATE_WAIT_SECONDS
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, f"serve exited: {lines}"
            lines.append(line)
            if "ready: serving" in line:
                break
        assert "pp-ocrv6-small" in lines[-1]
        with Client(sock) as client:
            text, error = client.recognize(page.image)  # what pdf-spec's CLI sends: one page, its prompt
            assert error is None and text == page_doctags
            assert client.last_done is not None and client.last_done.stop_reason == "end_turn"
            try:
                list(client.chat([Message("user", "hi")]))
            except RemoteError as exc:
                assert exc.code == "invalid_request" and "reads page images" in str(exc)
            else:
                raise AssertionError("a request without an image was not refused")
        out = tmp_path / "out.md"
        result = subprocess.run(
            [sys.executable, "-m", "modelhost.cli", "convert", str(docs["png"]), "-o", str(out), "--socket", sock],
            capture_output=True,
            text=True,
            timeout=STATE_WAIT_SECONDS,
            env={**os.environ, "COLUMNS": "100"},
        )
        assert result.returncode == 0, result.stderr
        assert cer(page.known_text, md_words(out.read_text())) <= 0.02
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=STATE_WAIT_SECONDS)

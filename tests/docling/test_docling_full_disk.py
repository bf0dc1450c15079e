"""A full disk under the docling door's task store, as under the job worker's: a real server whose --state is a
4 MB tmpfs the test fills to its last byte. A document that cannot be stored is 507 with Retry-After (never a 500),
nothing half-written is left, and once space is back the same request converts."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
from docling_support import HEADINGS, modelhost_convert, serve_docling

from modelhost.testing.disks import fill
from modelhost.testing.waiting import STATE_WAIT_SECONDS


def test_a_full_disk_is_507_and_the_door_resumes_when_space_is_back(small_disk: Path, converted: Path) -> None:
    server = serve_docling(small_disk / "state")
    try:
        filler = fill(small_disk)
        files = {"files": (HEADINGS.name, HEADINGS.read_bytes(), "application/pdf")}
        encoded = base64.b64encode(HEADINGS.read_bytes()).decode()
        inline = {"kind": "file", "filename": "h.pdf", "base64_string": encoded}
        with httpx.Client(base_url=server.url, timeout=STATE_WAIT_SECONDS) as http:
            for answer in (
                http.post("/v1/convert/file/async", files=files),
                http.post("/v1/convert/file", files=files),
                http.post("/v1/convert/source/async", json={"sources": [inline]}),
            ):
                assert answer.status_code == 507, answer.text
                assert answer.headers["retry-after"].isdigit()
                assert "stored" in answer.json()["detail"] or "state folder" in answer.json()["detail"]
            left = [p.name for p in (small_disk / "state" / "docling").iterdir() if p.name.startswith(".incoming-")]
            assert left == []
            filler.unlink()
            answer = http.post("/v1/convert/file", files=files)
            assert answer.status_code == 200, answer.text
            assert answer.json()["document"]["md_content"] == modelhost_convert(HEADINGS, "md", tmp=converted)
    finally:
        server.stop()

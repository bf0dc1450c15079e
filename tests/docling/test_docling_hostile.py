"""Hostile and broken requests to the docling routes, answered cleanly (a 4xx naming the fault, never a 500 or a
hang), nothing of them left behind in the task store, and the server converting as before afterwards."""

from __future__ import annotations

import base64
import re
import socket
from pathlib import Path

import httpx
from docling_support import HEADINGS, Served, modelhost_convert
from urllib3.util import parse_url

from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

BOUNDARY = "modelhostboundary"


def raw(served: Served, head: bytes, body: bytes = b"", *, close: bool = False) -> bytes:
    """Send bytes on a connection of its own; the answer, or b"" if the server closed without one."""
    url = parse_url(served.url)
    with socket.create_connection((url.host, url.port), timeout=STATE_WAIT_SECONDS) as sock:
        sock.sendall(head + body)
        if close:
            sock.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            got += chunk
            head_end = got.find(b"\r\n\r\n")
            if head_end >= 0 and not close:
                length = re.search(rb"content-length: (\d+)", got[:head_end].lower())
                if length and len(got) >= head_end + 4 + int(length.group(1)):
                    break
        return got


def headers(length: int) -> bytes:
    return (
        f"POST /v1/convert/file HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def part(name: str, value: bytes, filename: str | None = None) -> bytes:
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    return f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"


def staging_left(served: Served) -> list[Path]:
    return [p for p in (served.state / "docling").iterdir() if p.name.startswith(".incoming-")]


def test_a_huge_declared_size_is_refused_before_its_body(served: Served) -> None:
    answer = raw(served, headers(10**12))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"over the limit" in answer


def test_a_truncated_upload_is_refused_and_leaves_nothing(served: Served) -> None:
    end = f"--{BOUNDARY}--\r\n".encode()
    body = part("to_formats", b"md") + part("files", HEADINGS.read_bytes(), "headings.pdf") + end
    # the client goes away halfway through its declared body
    raw(served, headers(len(body)), body[: len(body) // 2], close=True)
    # a whole body that never closes its last part
    unclosed = body[: -len(end)]
    answer = raw(served, headers(len(unclosed)), unclosed)
    assert answer.startswith(b"HTTP/1.1 400") and b"truncated" in answer, answer[:300]
    wait_until(lambda: not staging_left(served), what="no staging folder left behind")


def test_malformed_uploads_are_4xx_naming_the_fault(served: Served) -> None:
    pdf = HEADINGS.read_bytes()
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        cases = [
            (http.post("/v1/convert/file", content=b"{}", headers={"content-type": "text/plain"}), 400, "multipart"),
            (http.post("/v1/convert/file", data={"to_formats": "md"}, files={"other": ("x", b"")}), 422, "files"),
            (
                http.post("/v1/convert/file", files=[("files", ("a.pdf", pdf)), ("files", ("b.pdf", pdf))]),
                422,
                "one file per request",
            ),
            (http.post("/v1/convert/file", files={"files": ("a.pdf", pdf)}, data={"x": "y" * 70_000}), 413, "over"),
            (
                http.post("/v1/convert/file", files={"files": ("a.pdf", pdf)}, data={"target_type": "zip"}),
                422,
                "inbody",
            ),
        ]
        many = b"".join(part(f"f{i}", b"v") for i in range(600))
        body = many + f"--{BOUNDARY}--\r\n".encode()
        crowd = http.post(
            "/v1/convert/file", content=body, headers={"content-type": f"multipart/form-data; boundary={BOUNDARY}"}
        )
        cases.append((crowd, 400, "form fields"))
        for answer, status, words in cases:
            assert answer.status_code == status, (status, answer.text)
            assert words in answer.text, answer.text
    wait_until(lambda: not staging_left(served), what="no staging folder left behind")


def test_malformed_sources_are_4xx_naming_the_fault(served: Served) -> None:
    inline = {"kind": "file", "filename": "h.pdf", "base64_string": base64.b64encode(HEADINGS.read_bytes()).decode()}
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        cases = [
            (http.post("/v1/convert/source", content=b"{not json", headers={"content-type": "application/json"}), 422),
            (http.post("/v1/convert/source", json={"sources": []}), 422),
            (http.post("/v1/convert/source", json={"sources": [inline, inline]}), 422),
            (http.post("/v1/convert/source", json={"sources": [{**inline, "base64_string": "%%%"}]}), 422),
            (http.post("/v1/convert/source", json={"sources": [{"kind": "http", "url": "file:///etc/passwd"}]}), 422),
            (http.post("/v1/convert/source", json={"sources": [{"kind": "http", "url": "http://example.com/"}]}), 422),
            (http.post("/v1/convert/source", json={"sources": [inline], "target": {"kind": "s3"}}), 422),
        ]
        for answer, status in cases:
            assert answer.status_code == status, answer.text
            assert "detail" in answer.json()
        target = {"kind": "presigned_url"}
        presigned = http.post("/v1/convert/source/async", json={"sources": [inline], "target": target})
        assert presigned.json()["detail"].startswith("Presigned URL target requires artifact storage")
        assert "--allow-fetch" in cases[5][0].json()["detail"]  # URL sources are off unless allowed
        poll = http.get("/v1/status/poll/x", params={"wait": "soon"})  # the query is checked first, as FastAPI does
        assert poll.status_code == 422 and poll.json()["detail"][0]["loc"] == ["query", "wait"]


#: Brackets of the deeply nested bodies: far past the interpreter's recursion limit (1,000), as the probe sent.
DEEP = 100_000


def test_deeply_nested_json_is_4xx_on_every_source_route(served: Served) -> None:
    # A RecursionError in the JSON parser was a 500 on all four routes (issue 35 item 5).
    nested = b"[" * DEEP + b"]" * DEEP
    inside = b'{"sources": [{"kind": "file", "filename": "a.pdf", "base64_string": "JVBERg=="}], "options": ' + (
        b'{"do_ocr": ' * DEEP + b"true" + b"}" * DEEP + b"}"
    )
    json_type = {"content-type": "application/json"}
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        for route in ("/v1/convert/source", "/v1/convert/source/async", "/v1/chunk/hierarchical/source",
                      "/v1/chunk/hierarchical/source/async"):  # fmt: skip
            for body in (nested, inside):
                answer = http.post(route, content=body, headers=json_type)
                assert answer.status_code == 422, (route, answer.status_code, answer.text[:300])
                assert "nested too deeply" in answer.text, answer.text[:300]
        assert http.get("/health").status_code == 200


def test_it_still_converts_afterwards(served: Served, converted: Path) -> None:
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        answer = http.post("/v1/convert/file", files={"files": (HEADINGS.name, HEADINGS.read_bytes())})
    assert answer.json()["document"]["md_content"] == modelhost_convert(HEADINGS, "md", tmp=converted)

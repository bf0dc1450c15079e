"""A hostile client against the real worker door: bad bytes, huge numbers, broken uploads, long ids.

Each answer must be the protocol's JSON error body with the right status, and afterwards the worker must be as it
was: no capacity slot held, no folder left in the state folder, no key left waiting for a submission that died.
"""

from __future__ import annotations

import asyncio
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelhost.worker import WorkerServer

from .helpers import paced_host, start_server, wait_for

ECHO = {"operation": "test.echo", "model": "paced", "input": {"a": 1}}
JSON = {"content-type": "application/json"}


async def serving(tmp_path: Path, **kwargs: Any) -> tuple[WorkerServer, httpx.AsyncClient]:
    host = await paced_host()
    server = await start_server(host, tmp_path / "state", **kwargs)
    return server, httpx.AsyncClient(base_url=server.url)


async def stop(server: WorkerServer, client: httpx.AsyncClient) -> None:
    await client.aclose()
    await server.aclose()
    await server.host.aclose()


def leftovers(state: Path) -> list[str]:
    return sorted(p.name for p in state.iterdir() if p.name != ".lock")


def assert_error_body(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body: dict[str, Any] = r.json()
    assert set(body) == {"code", "message", "status"} and body["code"] == code and body["status"] == status, body
    assert body["message"]
    return body


def test_invalid_utf8_in_a_json_job_is_400_and_gives_its_slot_back(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path, capacity=2)
        bad = b'{"operation": "test.echo", "model": "paced", "input": {"text": "\xff\xfe"}}'
        keyed = b'{"operation": "test.echo", "model": "paced", "idempotencyKey": "k", "input": {"t": "\xc3("}}'
        for body in [bad] * 6 + [keyed]:
            body_ = assert_error_body(await c.post("/v1/jobs", content=body, headers=JSON), 400, "WORKER_INVALID_INPUT")
            assert "UTF-8" in body_["message"]
        assert server.board.held == 0 and leftovers(tmp_path / "state") == []
        # Every slot is free, and the key is not left waiting on a submission that died.
        r = await asyncio.wait_for(c.post("/v1/jobs", json={**ECHO, "idempotencyKey": "k"}), 5)
        assert r.status_code == 202, r.text
        assert (await c.post("/v1/jobs", json=ECHO)).status_code == 202
        await stop(server, c)

    asyncio.run(main())


@pytest.mark.parametrize(
    ("operation", "raw_input"),
    [
        ("text.generate", b'{"prompt": "p", "max_tokens": 1e400}'),
        ("text.generate", b'{"prompt": "p", "max_tokens": 100000000000000000000000000000}'),
        ("text.generate", b'{"prompt": "p", "temperature": -1e400}'),
        ("text.generate", b'{"prompt": "p", "top_p": 7}'),
        ("text.generate", b'{"prompt": "p", "seed": 1e30}'),
        ("text.chat", b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1e400}'),
        ("text.chat", b'{"messages": [{"role": "user", "content": 5}]}'),
        ("text.chat", b'{"messages": "hi"}'),
    ],
)
def test_options_out_of_range_are_refused_at_submission(tmp_path: Path, operation: str, raw_input: bytes) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        body = b'{"operation": "%s", "model": "paced", "input": %s}' % (operation.encode(), raw_input)
        assert_error_body(await c.post("/v1/jobs", content=body, headers=JSON), 400, "WORKER_INVALID_INPUT")
        assert server.board.held == 0 and leftovers(tmp_path / "state") == []
        await stop(server, c)

    asyncio.run(main())


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header declares `width` x `height` and whose pixels are garbage: decoding it would fail (or cost
    the memory of the declared size); refusing it first never looks at them."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + chunk + b"garbage, not an IDAT chunk"


def test_a_picture_for_a_text_model_is_refused_before_it_is_decoded(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        request = {
            "operation": "text.chat",
            "model": "paced",
            "input": {"messages": [{"role": "user", "content": "see", "images": [{"$file": "page"}]}]},
        }
        files = [("request", (None, json.dumps(request))), ("page", ("page.png", _png_header(8192, 8192)))]
        body = assert_error_body(await c.post("/v1/jobs", files=files), 400, "WORKER_INVALID_INPUT")
        assert "does not accept image input" in body["message"], body
        assert server.board.held == 0 and leftovers(tmp_path / "state") == []
        await stop(server, c)

    asyncio.run(main())


def test_a_long_id_is_not_echoed_back_whole(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        long_id = "a" * 20_000
        for path in (f"/v1/jobs/{long_id}", f"/files/{long_id}/out.txt", f"/files/{'b' * 32}/{long_id}"):
            body = assert_error_body(await c.get(path), 404, "WORKER_NOT_FOUND")
            assert len(body["message"]) < 300, len(body["message"])
        await stop(server, c)

    asyncio.run(main())


@pytest.mark.parametrize("field", ["idempotencyKey", "model", "operation"])
def test_a_megabyte_name_or_key_is_refused_naming_the_field(tmp_path: Path, field: str) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        submission = {**ECHO, field: "k" * (1 << 20)}
        body = assert_error_body(await c.post("/v1/jobs", json=submission), 400, "WORKER_INVALID_INPUT")
        assert field in body["message"] and len(body["message"]) < 300, body["message"][:300]
        files = [("request", (None, json.dumps(submission))), ("p", ("p.txt", b"x"))]
        body = assert_error_body(await c.post("/v1/jobs", files=files), 400, "WORKER_INVALID_INPUT")
        assert field in body["message"], body
        assert server.board.held == 0 and leftovers(tmp_path / "state") == []
        assert (await c.post("/v1/jobs", json={**ECHO, field: ECHO.get(field, "k" * 1024)})).status_code == 202
        await stop(server, c)

    asyncio.run(main())


def _multipart(boundary: str, parts: list[tuple[str, str | None, bytes]], close: bool = True) -> bytes:
    out = b""
    for name, filename, data in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + data + b"\r\n"
    return out + (f"--{boundary}--\r\n".encode() if close else b"")


REQUEST = json.dumps({**ECHO, "input": {"pic": {"$file": "pic"}}}).encode()
#: (what it is, body, headers, status, code): each must be refused and leave the worker as it was.
CORPUS: list[tuple[str, bytes, dict[str, str], int, str]] = [
    ("not JSON", b"{'operation': 1}", JSON, 400, "WORKER_INVALID_INPUT"),
    ("empty body", b"", JSON, 400, "WORKER_INVALID_INPUT"),
    ("invalid UTF-8 in the operation", b'{"operation": "\xff", "model": "paced"}', JSON, 400, "WORKER_INVALID_INPUT"),
    ("a number past float", b'{"operation": "test.echo", "model": "paced", "input": 1e999999}', JSON, 200, ""),
    ("deep nesting", b'{"operation": "test.echo", "model": "paced", "input": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
     JSON, 400, "WORKER_INVALID_INPUT"),
    ("over the upload limit", b'{"operation": "test.echo", "model": "paced", "input": "' + b"x" * 300_000 + b'"}',
     JSON, 413, "WORKER_INVALID_INPUT"),
    ("multipart without a boundary", _multipart("b", [("request", None, REQUEST)]),
     {"content-type": "multipart/form-data"}, 400, "WORKER_INVALID_INPUT"),
    ("multipart truncated", _multipart("b", [("request", None, REQUEST), ("pic", "p.png", b"PNG")], close=False),
     {"content-type": "multipart/form-data; boundary=b"}, 400, "WORKER_INVALID_INPUT"),
    ("a boundary that never appears", _multipart("b", [("request", None, REQUEST)]),
     {"content-type": "multipart/form-data; boundary=zzz"}, 400, "WORKER_INVALID_INPUT"),
    ("garbage after the boundary line", b"--b\r\nthis is no header line at all\r\n\r\n\r\n--b--\r\n",
     {"content-type": "multipart/form-data; boundary=b"}, 400, "WORKER_INVALID_INPUT"),
    ("a part without a field name", _multipart("b", [("", "p.png", b"x"), ("request", None, REQUEST)]),
     {"content-type": "multipart/form-data; boundary=b"}, 400, "WORKER_INVALID_INPUT"),
    ("a request field that is not UTF-8", _multipart("b", [("request", None, b'{"operation": "\xff"}')]),
     {"content-type": "multipart/form-data; boundary=b"}, 400, "WORKER_INVALID_INPUT"),
    ("an input that is not UTF-8, in multipart",
     _multipart("b", [("request", None, b'{"operation": "test.echo", "model": "paced", "input": "\xc3("}')]),
     {"content-type": "multipart/form-data; boundary=b"}, 400, "WORKER_INVALID_INPUT"),
    ("a huge option in multipart", _multipart("b", [("request", None,
     b'{"operation": "text.generate", "model": "paced", "input": {"prompt": "p", "max_tokens": 1e400}}')]),
     {"content-type": "multipart/form-data; boundary=b"}, 400, "WORKER_INVALID_INPUT"),
    ("an oversized file part", _multipart("b", [("request", None, REQUEST), ("pic", "p.png", b"x" * 300_000)]),
     {"content-type": "multipart/form-data; boundary=b"}, 413, "WORKER_INVALID_INPUT"),
    ("two request fields", _multipart("b", [("request", None, REQUEST), ("request", None, REQUEST)]),
     {"content-type": "multipart/form-data; boundary=b"}, 400, "WORKER_INVALID_INPUT"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "body", "headers", "status", "code"), CORPUS, ids=[c[0] for c in CORPUS])
def test_hostile_corpus(
    tmp_path: Path, what: str, body: bytes, headers: dict[str, str], status: int, code: str
) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path, capacity=2, max_upload_bytes=200_000)
        r = await c.post("/v1/jobs", content=body, headers=headers)
        if status == 200:
            # Not an error: JSON allows it (1e999999 decodes to inf), and the echo job stores it as given.
            assert r.status_code == 202, r.text
            await wait_for(c, r.json()["id"], {"completed"})
            assert (await c.post(f"/v1/jobs/{r.json()['id']}/ack")).status_code == 200
        else:
            assert_error_body(r, status, code)
        # Back to baseline: no slot held, nothing on disk, and the full capacity accepts jobs again.
        assert server.board.held == 0 and leftovers(tmp_path / "state") == [], what
        assert [(await c.post("/v1/jobs", json=ECHO)).status_code for _ in range(2)] == [202, 202]
        await stop(server, c)

    asyncio.run(main())


def test_traversal_names_stay_inside_the_job_folder(tmp_path: Path) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        request = json.dumps({**ECHO, "input": {"pic": {"$file": "../../pic"}}}).encode()
        body = _multipart("b", [("request", None, request), ("../../pic", "../../../etc/passwd\x00.png", b"PIXELS")])
        r = await c.post("/v1/jobs", content=body, headers={"content-type": "multipart/form-data; boundary=b"})
        assert r.status_code == 202, r.text
        done = await wait_for(c, r.json()["id"], {"completed"})
        stored = json.loads(done["input"])["pic"]["$inputFile"]
        folder = (tmp_path / "state" / done["id"] / "inputs").resolve()
        assert Path(stored["path"]).resolve().parent == folder and Path(stored["path"]).read_bytes() == b"PIXELS"
        await stop(server, c)

    asyncio.run(main())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"dpi": 100_000}, "dpi must be an integer from 36"),
        ({"pages": "1" * 5000}, "expected numbers like"),
        ({"max_tokens": 0}, "must be a positive integer"),
        ({"pictures": "yes"}, "`pictures` must be true or false"),
        ({}, "does not read page images"),  # the paced stand-in is a text model
    ],
)
def test_a_document_job_is_checked_at_submission(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    async def main() -> None:
        server, c = await serving(tmp_path)
        request = {"operation": "document.convert", "model": "paced", "input": {"document": {"$file": "d"}, **extra}}
        files = [("request", (None, json.dumps(request))), ("d", ("d.pdf", b"%PDF-1.7 not really"))]
        body = assert_error_body(await c.post("/v1/jobs", files=files), 400, "WORKER_INVALID_INPUT")
        assert message in body["message"], body
        assert server.board.held == 0 and leftovers(tmp_path / "state") == []
        await stop(server, c)

    asyncio.run(main())

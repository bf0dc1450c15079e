"""Request bodies of the docling routes, read within bounds: a multipart upload (POST /v1/convert/file) streamed
to a staging folder as it arrives, and a JSON body (POST /v1/convert/source) held in memory up to a limit.

python-multipart's streaming parser does the parsing; this module only says where each part goes. The file part is
written straight into the task's staging folder (never whole in memory); every other part is a form field (an
option), held in memory up to MAX_FIELD_BYTES. A declared Content-Length over the limit is refused before a byte is
read, a body that grows past it as soon as it does, and a body that ends before its closing boundary is refused as
truncated; in every case the staging folder is removed by the caller (`upload_into`'s contract).
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

#: The largest upload (413 beyond it): a scanned book of a few hundred pages. The engine bounds pages and pixels
#: itself; this bounds the disk one request may fill.
DEFAULT_MAX_UPLOAD_BYTES: Final = 512 << 20
#: Largest form field (an option's value) and largest JSON body held in memory: options are a few hundred bytes; a
#: base64 source is the document itself, so a JSON body may be as large as an upload (4/3 of it).
MAX_FIELD_BYTES: Final = 64 << 10
#: Most form fields in one upload: docling's options are about sixty; ten thousand tiny fields would be a parser
#: and memory attack, not a request.
MAX_FIELDS: Final = 512
#: docling-serve's name of the file parts.
FILES_FIELD: Final = "files"
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,10}$")


class BodyError(Exception):
    """A body this door will not take: `status` (400 malformed or truncated, 413 too large, 422 unusable) and the
    detail docling-style answers carry."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def too_large(limit: int) -> BodyError:
    """413: the body is over the limit."""
    return BodyError(413, f"the request body is over the limit of {limit} bytes")


async def limited(request: Request, limit: int) -> AsyncIterator[bytes]:
    """The body in chunks; 413 as soon as it passes `limit` (a declared Content-Length over it: before reading).
    A stalled body is cut by the door's client guard, which ends this with a disconnect (400 here)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    seen = 0
    try:
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > limit:
                raise too_large(limit)
            if chunk:
                yield chunk
    except ClientDisconnect:
        raise BodyError(400, "the request body was cut short (the client disconnected)") from None


async def read_json(request: Request, limit: int) -> bytes:
    """A whole JSON body, bounded."""
    chunks = [chunk async for chunk in limited(request, limit)]
    return b"".join(chunks)


@dataclass(slots=True)
class Uploaded:
    """One file part, written to `staging/inputs/<stored>`."""

    filename: str
    content_type: str
    stored: str
    size: int = 0
    head: bytes = b""


#: Bytes of a file's start kept to tell its format (a PDF's `%PDF-` may follow up to 1 KiB of junk).
HEAD_BYTES = 1024


@dataclass(slots=True)
class Form:
    """The parsed upload: its form fields (each name's values, in order) and its file parts."""

    fields: dict[str, list[str]] = field(default_factory=dict)
    files: list[Uploaded] = field(default_factory=list)


@dataclass(slots=True)
class _State:
    inputs: Path
    form: Form = field(default_factory=Form)
    headers: dict[str, str] = field(default_factory=dict)
    name: bytearray = field(default_factory=bytearray)
    value: bytearray = field(default_factory=bytearray)
    field: str = ""
    buffer: bytearray | None = None
    file: Uploaded | None = None
    fd: int | None = None
    count: int = 0
    ended: bool = False

    def on_part_begin(self) -> None:
        self.headers = {}

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.value += data[start:end]

    def on_header_end(self) -> None:
        self.headers[self.name.decode("latin-1").lower()] = self.value.decode("latin-1")
        self.name.clear()
        self.value.clear()

    def on_headers_finished(self) -> None:
        _, params = parse_options_header(self.headers.get("content-disposition", ""))
        self.field = params.get(b"name", b"").decode("utf-8", "replace")
        if not self.field:
            raise BodyError(400, "a multipart part has no field name")
        filename = params.get(b"filename")
        if filename is None or self.field != FILES_FIELD:
            self.count += 1
            if self.count > MAX_FIELDS:
                raise BodyError(400, f"more than {MAX_FIELDS} form fields")
            self.buffer = bytearray()
            return
        if self.form.files:
            # One document per request: docling-serve answers several files with a zip or presigned URLs, neither
            # of which this door has; refused before a byte of the second one is stored.
            raise BodyError(422, "one file per request here: send each document in a request of its own")
        name = filename.decode("utf-8", "replace")
        match = _EXTENSION.search(os.path.basename(name.replace("\\", "/")))
        stored = "1" + (match.group(0).lower() if match else "")
        content_type = self.headers.get("content-type", "application/octet-stream")
        self.file = Uploaded(name, content_type, stored)
        self.fd = os.open(self.inputs / stored, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self.form.files.append(self.file)

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self.buffer is not None:
            if len(self.buffer) + end - start > MAX_FIELD_BYTES:
                raise BodyError(413, f"form field {self.field[:80]!r} is over {MAX_FIELD_BYTES} bytes")
            self.buffer += data[start:end]
        elif self.fd is not None and self.file is not None:
            view = memoryview(data)[start:end]
            if len(self.file.head) < HEAD_BYTES:
                self.file.head += bytes(view[: HEAD_BYTES - len(self.file.head)])
            self.file.size += len(view)
            while view:
                view = view[os.write(self.fd, view) :]

    def on_part_end(self) -> None:
        if self.buffer is not None:
            self.form.fields.setdefault(self.field, []).append(self.buffer.decode("utf-8", "replace"))
            self.buffer = None
        elif self.fd is not None:
            os.close(self.fd)
            self.fd = None
            self.file = None

    def on_end(self) -> None:
        self.ended = True

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


async def upload_into(request: Request, inputs: Path, limit: int) -> Form:
    """Parse a multipart upload, its file part written into `inputs` as it arrives. BodyError for a body that is
    not a whole, bounded multipart upload; the caller removes the folder whatever happens."""
    _, params = parse_options_header(request.headers.get("content-type", ""))
    boundary = params.get(b"boundary")
    if not boundary:
        raise BodyError(400, "expected multipart/form-data with a boundary")
    state = _State(inputs)
    callbacks = {
        name: getattr(state, name)
        for name in (
            "on_part_begin",
            "on_header_field",
            "on_header_value",
            "on_header_end",
            "on_headers_finished",
            "on_part_data",
            "on_part_end",
            "on_end",
        )
    }
    parser = MultipartParser(boundary, callbacks)  # type: ignore[arg-type]
    try:
        async for chunk in limited(request, limit):
            try:
                parser.write(chunk)
            except MultipartParseError as exc:
                raise BodyError(400, f"malformed multipart body: {exc}") from exc
            if state.ended:
                break
    finally:
        state.close()
    if not state.ended:
        raise BodyError(400, "the multipart body is truncated (no closing boundary)")
    return state.form


__all__ = ["DEFAULT_MAX_UPLOAD_BYTES", "BodyError", "Form", "Uploaded", "limited", "read_json", "upload_into"]

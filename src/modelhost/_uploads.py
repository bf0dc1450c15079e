"""Request bodies read within bounds, and multipart uploads streamed to disk as they arrive: shared by the HTTP doors
that take files (the job worker's `POST /v1/jobs`, the docling door's `POST /v1/convert/file`).

python-multipart's streaming parser does the parsing, chunk by chunk as the body arrives. Each part goes one of two
ways, chosen by the door from the part's headers (`Place`): held in memory as a form field, up to a bound, or written
straight into a file of the door's staging folder (never whole in memory). What differs between the doors (which
part is a file, how many there may be, what each is named) is the door's `Place`; what a body that is too large,
malformed or truncated gets is the same everywhere: a `BodyRefused` with the status to answer, which each door turns
into its own error shape. An OSError (a full disk) is left to the door, which answers it as a storage fault.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

#: Bytes of a file part's start kept to tell its format (a PDF's `%PDF-` may follow up to 1 KiB of junk).
HEAD_BYTES: Final = 1024
#: How much of a client's field name an error repeats: enough to recognise it, not a probe's 20 KB echoed back.
_SHOWN_NAME_CHARS: Final = 80
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,10}$")


class BodyRefused(Exception):
    """A body a door will not take: `status` (400 malformed or truncated, 413 too large, or the door's own) and the
    words to answer with."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def too_large(limit: int) -> BodyRefused:
    """413: the body is over the limit."""
    return BodyRefused(413, f"the request body is over the limit of {limit} bytes")


async def bounded(request: Request, limit: int) -> AsyncIterator[bytes]:
    """The body in chunks; 413 as soon as it passes `limit` (a declared Content-Length over it: before reading).

    A stalled or trickling body is cut by the door's client guard (_serving.ClientGuard: 408, then the connection
    closes), which ends this iteration with a disconnect (400 here), so the caller gives back what it holds.
    """
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
        raise BodyRefused(400, "the request body was cut short (the client disconnected)") from None


def boundary_of(request: Request) -> bytes:
    """The multipart boundary of the request's Content-Type; 400 without one."""
    _, params = parse_options_header(request.headers.get("content-type", ""))
    boundary = params.get(b"boundary")
    if not boundary:
        raise BodyRefused(400, "expected multipart/form-data with a boundary")
    return boundary


def stored_name(index: int, filename: str) -> str:
    """The name a file part is written under: its index and the extension the client gave, nothing else of the
    client's name (which may hold `..`, slashes or a Windows path), so no upload can name a path of its own."""
    match = _EXTENSION.search(os.path.basename(filename.replace("\\", "/")))
    return f"{index}{match.group(0).lower() if match else ''}"


@dataclass(frozen=True, slots=True)
class PartHead:
    """What a part's headers say: its field name, its filename (None when it sends none) and its content type."""

    field: str
    filename: str | None
    content_type: str


@dataclass(slots=True)
class StoredFile:
    """One file part, written to `<folder>/<stored>`: its size and its first HEAD_BYTES."""

    field: str
    filename: str
    content_type: str
    stored: str
    size: int = 0
    head: bytes = b""


@dataclass(slots=True)
class Parts:
    """The parts read so far: each form field's values in order (bytes, as sent), and the file parts."""

    fields: dict[str, list[bytes]] = field(default_factory=dict)
    files: list[StoredFile] = field(default_factory=list)


#: The door's choice for a part, from its headers and the parts before it: the name to store it under in the folder
#: (a file), or None (a form field, held in memory). It raises BodyRefused for a part the door will not take, before
#: a byte of it is stored.
Place = Callable[[PartHead, Parts], str | None]


class MultipartReader:
    """python-multipart's callbacks over one body: `feed` each chunk, `finish` after the last; `close` always."""

    def __init__(self, boundary: bytes, folder: Path, place: Place, field_limit: int) -> None:
        self.parts = Parts()
        self.ended = False
        self._folder = folder
        self._place = place
        self._field_limit = field_limit
        self._headers: dict[str, str] = {}
        self._name = bytearray()
        self._value = bytearray()
        self._field = ""
        self._buffer: bytearray | None = None
        self._file: StoredFile | None = None
        self._fd: int | None = None
        callbacks: Any = {
            "on_part_begin": self._part_begin,
            "on_header_field": self._header_field,
            "on_header_value": self._header_value,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        }
        self._parser = MultipartParser(boundary, callbacks)

    def feed(self, chunk: bytes) -> None:
        """Parse one chunk of the body: BodyRefused for a malformed body or a part refused; OSError from the disk."""
        try:
            self._parser.write(chunk)
        except MultipartParseError as exc:
            raise BodyRefused(400, f"malformed multipart body: {exc}") from exc

    def finish(self) -> Parts:
        """The parts, once the body has ended: 400 when it ended before its closing boundary."""
        if not self.ended:
            raise BodyRefused(400, "the multipart body is truncated (no closing boundary)")
        return self.parts

    def close(self) -> None:
        """Close the file part being written, if any (the door removes its staging folder itself)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- python-multipart's callbacks, called synchronously from `feed` --------------------------------------------
    def _part_begin(self) -> None:
        self._headers = {}

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._name += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def _header_end(self) -> None:
        self._headers[self._name.decode("latin-1").lower()] = self._value.decode("latin-1")
        self._name.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        _, params = parse_options_header(self._headers.get("content-disposition", ""))
        self._field = params.get(b"name", b"").decode("utf-8", "replace")
        if not self._field:
            raise BodyRefused(400, "a multipart part has no field name")
        raw_filename = params.get(b"filename")
        filename = None if raw_filename is None else raw_filename.decode("utf-8", "replace")
        content_type = self._headers.get("content-type", "application/octet-stream")
        stored = self._place(PartHead(self._field, filename, content_type), self.parts)
        if stored is None:
            self._buffer = bytearray()
            return
        self._file = StoredFile(self._field, filename or "", content_type, stored)
        self._fd = os.open(self._folder / stored, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self.parts.files.append(self._file)

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._buffer is not None:
            if len(self._buffer) + end - start > self._field_limit:
                shown = self._field[:_SHOWN_NAME_CHARS]
                raise BodyRefused(413, f"form field {shown!r} is over the limit of {self._field_limit} bytes")
            self._buffer += data[start:end]
        elif self._fd is not None and self._file is not None:
            view = memoryview(data)[start:end]
            if len(self._file.head) < HEAD_BYTES:
                self._file.head += bytes(view[: HEAD_BYTES - len(self._file.head)])
            self._file.size += len(view)
            while view:
                view = view[os.write(self._fd, view) :]

    def _part_end(self) -> None:
        if self._buffer is not None:
            self.parts.fields.setdefault(self._field, []).append(bytes(self._buffer))
            self._buffer = None
        else:
            self.close()
            self._file = None

    def _end(self) -> None:
        self.ended = True


__all__ = [
    "HEAD_BYTES",
    "BodyRefused",
    "MultipartReader",
    "PartHead",
    "Parts",
    "Place",
    "StoredFile",
    "boundary_of",
    "bounded",
    "stored_name",
    "too_large",
]

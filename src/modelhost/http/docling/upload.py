"""Request bodies of the docling routes, read within bounds: a multipart upload (POST /v1/convert/file) streamed
to a staging folder as it arrives, and a JSON body (POST /v1/convert/source) held in memory up to a limit.

The reading is the HTTP doors' shared one (`modelhost._uploads`, also the job worker's); this module says only which
part goes where. The `files` part is written straight into the task's staging folder (never whole in memory); every
other part is a form field (an option), held in memory up to MAX_FIELD_BYTES. A declared Content-Length over the
limit is refused before a byte is read, a body that grows past it as soon as it does, and a body that ends before its
closing boundary is refused as truncated; in every case the staging folder is removed by the caller (`upload_into`'s
contract).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from starlette.requests import Request

from modelhost._uploads import (
    BodyRefused,
    MultipartReader,
    PartHead,
    Parts,
    StoredFile,
    boundary_of,
    bounded,
    stored_name,
)

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


async def read_json(request: Request, limit: int) -> bytes:
    """A whole JSON body, bounded."""
    chunks = [chunk async for chunk in bounded(request, limit)]
    return b"".join(chunks)


@dataclass(slots=True)
class Form:
    """The parsed upload: its form fields (each name's values, in order) and its file part (one at most)."""

    fields: dict[str, list[str]] = field(default_factory=dict)
    files: list[StoredFile] = field(default_factory=list)


def _place(head: PartHead, parts: Parts) -> str | None:
    """A `files` part with a filename is the document; every other part is a form field."""
    if head.filename is None or head.field != FILES_FIELD:
        if sum(len(values) for values in parts.fields.values()) >= MAX_FIELDS:
            raise BodyRefused(400, f"more than {MAX_FIELDS} form fields")
        return None
    if parts.files:
        # One document per request: docling-serve answers several files with a zip or presigned URLs, neither of
        # which this door has; refused before a byte of the second one is stored.
        raise BodyRefused(422, "one file per request here: send each document in a request of its own")
    return stored_name(1, head.filename)


async def upload_into(request: Request, inputs: Path, limit: int) -> Form:
    """Parse a multipart upload, its file part written into `inputs` as it arrives. BodyRefused for a body that is
    not a whole, bounded multipart upload; the caller removes the folder whatever happens."""
    reader = MultipartReader(boundary_of(request), inputs, _place, MAX_FIELD_BYTES)
    try:
        async for chunk in bounded(request, limit):
            reader.feed(chunk)
            if reader.ended:
                break
    finally:
        reader.close()
    parts = reader.finish()
    fields = {name: [value.decode("utf-8", "replace") for value in values] for name, values in parts.fields.items()}
    return Form(fields, parts.files)


__all__ = ["DEFAULT_MAX_UPLOAD_BYTES", "Form", "read_json", "upload_into"]

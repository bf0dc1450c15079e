"""A document's pages: a PDF's text layers and pixels (pypdfium2), images' frames (PNG, JPEG, TIFF), both read in
the sandbox; and page ranges.

Neither pdfium nor an image decoder runs in this process: a PDF is opened and rendered, an image's frames counted
and decoded, in the sandbox's bounded children (`modelhost.docengine.sandbox`), so a hostile file kills a child, not
the host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelhost.docengine.errors import DocumentError
from modelhost.docengine.sandbox import (
    IMAGE_FORMATS,
    MAX_DPI,
    MAX_FRAMES,
    MAX_PAGE_PIXELS,
    PageError,
    Sandbox,
    check_dpi,
    count_frames,
    shared_sandbox,
)
from modelhost.docengine.types import PageContent
from modelhost.errors import InvalidInputError

__all__ = [
    "IMAGE_FORMATS",
    "MAX_DPI",
    "MAX_FRAMES",
    "MAX_PAGE_PIXELS",
    "DocumentError",
    "PageError",
    "RenderedPage",
    "Source",
    "check_dpi",
    "check_frames",
    "check_pages",
    "parse_pages",
]

_PDF_MAGIC = b"%PDF-"


@dataclass(frozen=True, slots=True)
class RenderedPage:
    """One page's pixels: `number` is 1-based in the document."""

    number: int
    #: The page's pixels as a read-only HxWx3 uint8 RGB array sharing the bytes its sandbox child sent (a PIL RGB
    #: image would be a copy of 4 bytes a pixel: 156 MB more for a 6250x6250 page), a PDF page's and an image
    #: frame's alike. Every reader takes it (and a PIL image).
    image: Any


def parse_pages(spec: str | None, count: int) -> list[int]:
    """Page numbers (1-based, in order, no repeats) from `1-3,5,8-`; None or "" means every page."""
    if not spec:
        return list(range(1, count + 1))
    chosen: dict[int, None] = {}  # ordered, and a membership test in O(1) for ranges of many pages
    for first, last in check_pages(spec):
        chosen.update(dict.fromkeys(range(first, min(count if last is None else last, count) + 1)))
    if not chosen:
        raise InvalidInputError(f"page range {spec!r} selects no page of {count}")
    return list(chosen)


#: One part of a page range: `5`, `1-3`, `8-` or `-4`. Nine digits at most: no document has a billion pages, and
#: int() of a longer digit string is slow (past 4,300 digits it raises ValueError, not our error).
_PAGE_PART = re.compile(r"\s*(\d{0,9})\s*(-?)\s*(\d{0,9})\s*")


def check_pages(spec: str) -> list[tuple[int, int | None]]:
    """The ranges of a page spec, (first, last or None for "to the end"), checked for syntax without a document:
    InvalidInputError for anything else."""
    ranges: list[tuple[int, int | None]] = []
    for part in spec.split(","):
        m = _PAGE_PART.fullmatch(part)
        if not m or not (m.group(1) or m.group(3)):
            raise InvalidInputError(f"page range {spec[:80]!r}: expected numbers like 1-3,5,8-")
        first = int(m.group(1)) if m.group(1) else 1
        last = (int(m.group(3)) if m.group(3) else None) if m.group(2) else first
        if first < 1 or (last is not None and last < first):
            raise InvalidInputError(f"page range {spec[:80]!r}: {part.strip()!r} is not a range of pages from 1")
        ranges.append((first, last))
    return ranges


class Source:
    """An open document: `count` pages, `render(number, dpi)` one of them. Close it (or use `with`).

    A PDF is opened, counted and rendered, an image's frames counted and decoded, in `sandbox`'s bounded child
    processes, never in this one; `name` is how errors name the file (an upload's own name; the file's name by
    default)."""

    def __init__(self, path: Path, sandbox: Sandbox | None = None, *, name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or self.path.name
        self._sandbox: Sandbox | None = None
        self._pdf = False
        try:
            with self.path.open("rb") as f:
                head = f.read(8)
        except OSError as exc:
            raise DocumentError(f"{self.name}: cannot read it ({exc.strerror or exc})") from exc
        if not head:
            raise DocumentError(f"{self.name}: the file is empty")
        self._sandbox = sandbox or shared_sandbox()
        self._pdf = head.startswith(_PDF_MAGIC) or self.path.suffix.lower() == ".pdf"
        if self._pdf:
            self.count = self._sandbox.page_count(self.path, self.name)
        else:
            self.count = self._sandbox.frame_count(self.path, self.name)
        if self.count == 0:
            self.close()
            raise DocumentError(f"{self.name}: the document has no pages")

    @property
    def is_pdf(self) -> bool:
        return self._pdf

    def render(self, number: int, dpi: int) -> RenderedPage:
        """Page `number` (1-based) as RGB pixels (see RenderedPage); a PDF page at `dpi`, an image page at its own
        resolution.

        PageError (a DocumentError) for a page that cannot be loaded or decoded, or that exhausts its sandbox."""
        if not 1 <= number <= self.count:
            raise DocumentError(f"{self.name}: no page {number} (it has {self.count})")
        if self._sandbox is None:
            raise DocumentError(f"{self.name}: the document is closed")
        if self._pdf:
            return RenderedPage(number, self._sandbox.render(self.path, number - 1, dpi, self.name).array())
        return RenderedPage(number, self._sandbox.decode(self.path, number - 1, self.name).array())

    def text_layer(self, number: int) -> PageContent:
        """A PDF page's text layer (docengine's `read_text_layer`, in the sandbox). PageError when it fails."""
        if not self._pdf or self._sandbox is None:
            raise DocumentError(f"{self.name}: an image has no text layer")
        if not 1 <= number <= self.count:
            raise DocumentError(f"{self.name}: no page {number} (it has {self.count})")
        content: PageContent = self._sandbox.text_layer(self.path, number - 1, self.name)
        return content

    def close(self) -> None:
        self._sandbox = None  # shared by every document: not this one's to close

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_frames(image: Any, name: str) -> int:
    """The number of frames of an image opened with PIL, each checked against MAX_PAGE_PIXELS before any is decoded
    (sandbox.count_frames); DocumentError naming `name` otherwise. A Source counts frames in its sandbox; this is for
    a caller that already holds a PIL image of its own."""
    try:
        return count_frames(image)
    except ValueError as exc:
        raise DocumentError(f"{name}: {exc}") from exc

"""A document's pages: a PDF's text layers and pixels (pypdfium2, in the sandbox), images' frames (PNG, JPEG, TIFF)
as they are; and page ranges.

pdfium never runs in this process: a PDF is opened and rendered in the sandbox's bounded children
(`modelhost.docengine.sandbox`), so a hostile PDF kills a child, not the host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelhost.docengine.errors import DocumentError
from modelhost.docengine.sandbox import MAX_DPI, MAX_PAGE_PIXELS, PageError, Sandbox, check_dpi, shared_sandbox
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

#: Formats read as images; anything else that is not a PDF is refused by name.
IMAGE_FORMATS = ("PNG", "JPEG", "TIFF")

_PDF_MAGIC = b"%PDF-"


@dataclass(frozen=True, slots=True)
class RenderedPage:
    """One page's pixels: `number` is 1-based in the document."""

    number: int
    #: The page's pixels: a PDF page's as a read-only HxWx3 uint8 RGB array sharing the rendered bytes (a PIL RGB
    #: image would be a copy of 4 bytes a pixel: 156 MB more for a 6250x6250 page), an image file's frame as a PIL
    #: RGB image. Every reader takes either.
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

    A PDF is opened, counted and rendered in `sandbox`'s bounded child processes, never in this one; `name` is how
    errors name the file (an upload's own name; the file's name by default)."""

    def __init__(self, path: Path, sandbox: Sandbox | None = None, *, name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or self.path.name
        self._sandbox: Sandbox | None = None
        self._image: Any = None
        try:
            with self.path.open("rb") as f:
                head = f.read(8)
        except OSError as exc:
            raise DocumentError(f"{self.name}: cannot read it ({exc.strerror or exc})") from exc
        if not head:
            raise DocumentError(f"{self.name}: the file is empty")
        if head.startswith(_PDF_MAGIC) or self.path.suffix.lower() == ".pdf":
            self._sandbox = sandbox or shared_sandbox()
            self.count = self._sandbox.page_count(self.path, self.name)
        else:
            self._open_image()
        if self.count == 0:
            self.close()
            raise DocumentError(f"{self.name}: the document has no pages")

    @property
    def is_pdf(self) -> bool:
        return self._sandbox is not None

    def _open_image(self) -> None:
        from PIL import Image

        try:
            image = Image.open(self.path, formats=IMAGE_FORMATS)
        except Exception as exc:
            raise DocumentError(f"{self.name}: neither a PDF nor a PNG, JPEG or TIFF image ({exc})") from exc
        self._image = image
        try:
            self.count = check_frames(image, self.name)
        except BaseException:
            self.close()
            raise

    def render(self, number: int, dpi: int) -> RenderedPage:
        """Page `number` (1-based) as RGB pixels (see RenderedPage); a PDF page at `dpi`, an image page at its own
        resolution.

        PageError (a DocumentError) for a PDF page that cannot be loaded or that exhausts its sandbox."""
        if not 1 <= number <= self.count:
            raise DocumentError(f"{self.name}: no page {number} (it has {self.count})")
        if self._sandbox is not None:
            return RenderedPage(number, self._sandbox.render(self.path, number - 1, dpi, self.name).array())
        try:
            self._image.seek(number - 1)
            return RenderedPage(number, self._image.convert("RGB"))
        except Exception as exc:
            raise DocumentError(f"{self.name}: page {number} cannot be decoded ({exc})") from exc

    def text_layer(self, number: int) -> PageContent:
        """A PDF page's text layer (docengine's `read_text_layer`, in the sandbox). PageError when it fails."""
        if self._sandbox is None:
            raise DocumentError(f"{self.name}: an image has no text layer")
        if not 1 <= number <= self.count:
            raise DocumentError(f"{self.name}: no page {number} (it has {self.count})")
        content: PageContent = self._sandbox.text_layer(self.path, number - 1, self.name)
        return content

    def close(self) -> None:
        self._sandbox = None  # shared by every document: not this one's to close
        if self._image is not None:
            self._image.close()
            self._image = None

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Most frames an image document may have: a multi-page TIFF scan is tens of pages; counting frames walks every
#: IFD, so a file claiming millions is refused before that walk costs minutes.
MAX_FRAMES = 10_000


def check_frames(image: Any, name: str) -> int:
    """The number of frames of an opened image, every one checked against MAX_PAGE_PIXELS before any is decoded.

    Checking the first frame only let a TIFF whose first frame is 1x1 carry 12000x12000 frames after it (432 MB of
    RGB each). Seeking reads a frame's header, not its pixels."""
    count = 0
    while True:
        if image.width * image.height > MAX_PAGE_PIXELS:
            where = f" (frame {count + 1})" if count else ""
            raise DocumentError(f"{name}: a {image.width}x{image.height} image{where} is over {MAX_PAGE_PIXELS} pixels")
        count += 1
        if count > MAX_FRAMES:
            raise DocumentError(f"{name}: more than {MAX_FRAMES} frames")
        try:
            image.seek(count)
        except EOFError:
            break
        except Exception as exc:
            raise DocumentError(f"{name}: frame {count + 1} cannot be read ({exc})") from exc
    image.seek(0)
    return count

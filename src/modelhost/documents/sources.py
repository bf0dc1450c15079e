"""Documents as pages of pixels: PDF pages rasterized with pypdfium2, images (PNG, JPEG, TIFF frames) as they are.

pdfium is not thread-safe, so a `Source` is used from one thread at a time: the pipeline renders every page of a
document on one worker thread (the next page while the model reads this one).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelhost.errors import InvalidInputError

#: Largest DPI accepted: a letter page at 600 DPI is 5100x6600 (34 MP, ~100 MB RGB), already past what OCR needs.
MAX_DPI = 600
#: Formats read as images; anything else that is not a PDF is refused by name.
IMAGE_FORMATS = ("PNG", "JPEG", "TIFF")
#: Largest image page, in pixels: the inferd wire's per-request budget (128 MiB of RGB).
MAX_PAGE_PIXELS = (128 << 20) // 3

_PDF_MAGIC = b"%PDF-"


class DocumentError(InvalidInputError):
    """A document that cannot be read (missing, encrypted, broken, empty, not a PDF or image); names the file."""

    code = "invalid_document"


@dataclass(frozen=True, slots=True)
class RenderedPage:
    """One page's pixels: `number` is 1-based in the document."""

    number: int
    image: Any  # PIL.Image.Image, RGB


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
    """An open document: `count` pages, `render(number, dpi)` one of them. Close it (or use `with`)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.name = self.path.name
        self._pdf: Any = None
        self._image: Any = None
        try:
            with self.path.open("rb") as f:
                head = f.read(8)
        except OSError as exc:
            raise DocumentError(f"{self.name}: cannot read it ({exc.strerror or exc})") from exc
        if not head:
            raise DocumentError(f"{self.name}: the file is empty")
        if head.startswith(_PDF_MAGIC) or self.path.suffix.lower() == ".pdf":
            self._open_pdf()
        else:
            self._open_image()
        if self.count == 0:
            self.close()
            raise DocumentError(f"{self.name}: the document has no pages")

    def _open_pdf(self) -> None:
        import pypdfium2 as pdfium

        try:
            self._pdf = pdfium.PdfDocument(str(self.path))
        except pdfium.PdfiumError as exc:
            text = str(exc)
            if "password" in text.lower():
                raise DocumentError(f"{self.name}: the PDF is encrypted (a password is needed to read it)") from exc
            raise DocumentError(f"{self.name}: not a readable PDF ({text})") from exc
        self.count = len(self._pdf)

    def _open_image(self) -> None:
        from PIL import Image

        try:
            image = Image.open(self.path, formats=IMAGE_FORMATS)
        except Exception as exc:
            raise DocumentError(f"{self.name}: neither a PDF nor a PNG, JPEG or TIFF image ({exc})") from exc
        if image.width * image.height > MAX_PAGE_PIXELS:
            raise DocumentError(f"{self.name}: a {image.width}x{image.height} image is over {MAX_PAGE_PIXELS} pixels")
        self._image = image
        self.count = int(getattr(image, "n_frames", 1))

    def render(self, number: int, dpi: int) -> RenderedPage:
        """Page `number` (1-based) as RGB pixels; a PDF page at `dpi`, an image page at its own resolution."""
        if not 1 <= number <= self.count:
            raise DocumentError(f"{self.name}: no page {number} (it has {self.count})")
        if self._pdf is not None:
            import pypdfium2 as pdfium

            try:
                page = self._pdf[number - 1]
                try:
                    width, height = page.get_size()
                    scale = _bounded_scale(self.name, number, width, height, dpi)
                    image = page.render(scale=scale).to_pil().convert("RGB")
                finally:
                    page.close()
            except pdfium.PdfiumError as exc:
                raise DocumentError(f"{self.name}: page {number} cannot be rendered ({exc})") from exc
            return RenderedPage(number, image)
        try:
            self._image.seek(number - 1)
            return RenderedPage(number, self._image.convert("RGB"))
        except Exception as exc:
            raise DocumentError(f"{self.name}: page {number} cannot be decoded ({exc})") from exc

    def close(self) -> None:
        if self._pdf is not None:
            self._pdf.close()
            self._pdf = None
        if self._image is not None:
            self._image.close()
            self._image = None

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bounded_scale(name: str, number: int, width: float, height: float, dpi: int) -> float:
    """pdfium's render scale for `dpi`, lowered so the page stays within MAX_PAGE_PIXELS.

    A PDF declares its page size, and a hostile or odd one (a 200-inch poster, a huge UserUnit) at 300 DPI would be
    tens of gigabytes of pixels: bounded before pdfium allocates anything. Such a page is still read, at the largest
    resolution the bound allows, rather than refused."""
    if not (math.isfinite(width) and math.isfinite(height) and width > 0 and height > 0):
        raise DocumentError(f"{name}: page {number} declares no usable size ({width} x {height} points)")
    scale = dpi / 72.0
    if width * height * scale * scale > MAX_PAGE_PIXELS:
        scale = math.sqrt(MAX_PAGE_PIXELS / (width * height)) * 0.999  # rounding up must not cross the bound
    return scale


def check_dpi(dpi: int) -> int:
    """A DPI in 36..MAX_DPI, else InvalidInputError."""
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not 36 <= dpi <= MAX_DPI:
        raise InvalidInputError(f"dpi must be an integer from 36 to {MAX_DPI}, got {dpi!r}")
    return dpi

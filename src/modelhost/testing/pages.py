"""Pages with known text, rendered with Pillow: what the documents tests and bench/documents.py read back.

Each page has a heading, paragraphs and a small table, drawn in DejaVu Sans when the system has it (else Pillow's
own scalable default font) at a size that is ~11 pt body text at the DPI asked for, so a 150 DPI page looks like a
150 DPI scan of a letter page. `known_text` is what an exact reader would produce, for the character error rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Points per inch: a PDF page is measured in points.
POINTS = 72.0

_FONTS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/dejavu/DejaVuSans.ttf")

PARAGRAPHS = (
    (
        "The committee met on Tuesday to review the results of the third quarter.",
        "Revenue grew by twelve percent, while operating costs fell slightly.",
    ),
    (
        "Shipments to the northern region were delayed by two weeks in August,",
        "but the backlog was cleared before the end of September.",
    ),
)
TABLE = (
    ("Region", "Units", "Revenue"),
    ("North", "1250", "48300"),
    ("South", "980", "37150"),
    ("West", "1430", "52900"),
)


@dataclass(frozen=True, slots=True)
class Page:
    """A rendered page and what is on it."""

    image: Any  # PIL.Image.Image, RGB
    heading: str
    paragraphs: tuple[str, ...]
    table: tuple[tuple[str, ...], ...]

    @property
    def known_text(self) -> str:
        """The page's words in reading order, one space between words (the form CER is measured on)."""
        words = [self.heading, *self.paragraphs, *(" ".join(row) for row in self.table)]
        return " ".join(" ".join(words).split())


def _font(size: int) -> Any:
    from PIL import ImageFont

    for path in _FONTS:
        if Path(path).is_file():
            return ImageFont.truetype(path, size)
    return ImageFont.load_default(size=size)


def render_page(number: int = 1, dpi: int = 150, *, width_in: float = 8.5, height_in: float = 5.5) -> Page:
    """One page at `dpi`: heading "Report N", two paragraphs, a four-row table. Half a letter page by default."""
    from PIL import Image, ImageDraw

    scale = dpi / POINTS
    width, height = round(width_in * dpi), round(height_in * dpi)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    body = _font(round(11 * scale))
    head = _font(round(20 * scale))
    margin = round(0.75 * dpi)
    y = round(0.5 * dpi)
    heading = f"Quarterly Report {number}"
    draw.text((margin, y), heading, font=head, fill="black")
    y += round(40 * scale)
    paragraphs = []
    for lines in PARAGRAPHS:
        for line in lines:
            draw.text((margin, y), line, font=body, fill="black")
            y += round(15 * scale)
        paragraphs.append(" ".join(lines))
        y += round(10 * scale)
    y += round(6 * scale)
    column = round(1.6 * dpi)
    for row in TABLE:
        for c, cell in enumerate(row):
            draw.text((margin + c * column, y), cell, font=body, fill="black")
        y += round(18 * scale)
    return Page(image, heading, tuple(paragraphs), TABLE)


def write_pdf(pages: list[Page], path: Path, dpi: int = 150) -> Path:
    """An image-only PDF (no text layer): each page one image, sized so it renders back at `dpi` pixel for pixel."""
    images = [p.image for p in pages]
    images[0].save(path, "PDF", resolution=float(dpi), save_all=True, append_images=images[1:])
    return path


def cer(reference: str, hypothesis: str) -> float:
    """Character error rate: edit distance over the reference's length, whitespace runs counted as one space."""
    ref = " ".join(reference.split())
    hyp = " ".join(hypothesis.split())
    if not ref:
        return 0.0 if not hyp else 1.0
    previous = list(range(len(hyp) + 1))
    for i, a in enumerate(ref, 1):
        current = [i]
        for j, b in enumerate(hyp, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return previous[-1] / len(ref)

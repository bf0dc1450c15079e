"""The pixel path on born-digital pages (issue 34): what a page drawn here prints must come back from its pixels.

Each page is drawn with ReportLab, rendered with pypdfium2 at 150 DPI (what `convert` renders a page at for the
`ocr` model) and read by the pixel reader alone: no text layer is consulted.
"""

from __future__ import annotations

import io
from collections import defaultdict

import numpy as np
import pytest

pytest.importorskip("rapidocr")
pytest.importorskip("reportlab")

from modelhost.backends.ocr.pixels import PixelReader

#: The render resolution: documents.settings' default, the one `convert` gives the `ocr` model.
DPI = 150


def render(draw: object) -> np.ndarray:
    """A US-letter page drawn by `draw(canvas)`, rendered at DPI as RGB pixels."""
    import pypdfium2
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    c = canvas.Canvas(buffer, pagesize=letter)
    draw(c)  # type: ignore[operator]
    c.save()
    document = pypdfium2.PdfDocument(buffer.getvalue())
    try:
        return np.asarray(document[0].render(scale=DPI / 72).to_pil().convert("RGB"))
    finally:
        document.close()


def lines_of(reader: PixelReader, image: np.ndarray) -> list[str]:
    """The page's lines as the reader gives them (its words joined by detected line), top to bottom."""
    content = reader.read(image, DPI)
    lines: dict[int, list[str]] = defaultdict(list)
    tops: dict[int, float] = {}
    for word in content.words:
        lines[word.line].append(word.text)
        tops.setdefault(word.line, word.bbox[1])
    return [" ".join(lines[i]) for i in sorted(lines, key=lambda i: tops[i])]


#: A contents page's entries: title, page number, and how many leader dots run between them.
ENTRIES = [("Introduction", "1", 40), ("Getting started with the tools", "7", 28), ("Reference", "23", 44)]


def contents_page(c: object) -> None:
    """Entries with dot leaders (". " repeated, as a contents page sets them) to a right-aligned page number; an entry
    whose number stands across a plain gap; a form's fill-in rule of underscores between two labels."""
    c.setFont("Helvetica-Bold", 16)  # type: ignore[attr-defined]
    c.drawString(72, 700, "Contents")  # type: ignore[attr-defined]
    c.setFont("Helvetica", 11)  # type: ignore[attr-defined]
    y = 660.0
    for title, page, dots in ENTRIES:
        c.drawString(72, y, title + " " + ". " * dots)  # type: ignore[attr-defined]
        c.drawRightString(540, y, page)  # type: ignore[attr-defined]
        y -= 24
    c.drawString(72, y, "Index")  # type: ignore[attr-defined]
    c.drawRightString(540, y, "31")  # type: ignore[attr-defined]
    c.drawString(72, y - 48, "Signature " + "_" * 40 + "   Date")  # type: ignore[attr-defined]


def test_dot_leaders_are_read_from_the_gap_the_detector_leaves(reader: PixelReader) -> None:
    # The detector boxes a contents entry and its page number and leaves the dots between out: each dot drawn
    # comes back, after the title, and the page number stays a line of its own (the contents table's column).
    lines = lines_of(reader, render(contents_page))
    for title, page, dots in ENTRIES:
        entry = next(line for line in lines if line.startswith(title))
        assert entry.removeprefix(title).strip(" .") == "", entry
        assert abs(entry.count(".") - dots) <= 2, (entry, dots)
        assert page in lines


def test_no_leader_where_the_page_prints_none(reader: PixelReader) -> None:
    # A plain gap before a page number, and a fill-in rule of underscores, are no leaders: no dot is written.
    lines = lines_of(reader, render(contents_page))
    assert "Index" in lines, lines
    signature = next(line for line in lines if line.startswith("Signature"))
    assert "." not in signature, signature

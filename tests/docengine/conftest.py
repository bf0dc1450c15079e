"""Corpus paths, open documents and pages drawn here, for the engine's tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pypdfium2 as pdfium
import pytest

from modelhost.docengine.analyse import analyse, document_style
from modelhost.docengine.furniture import mark_furniture
from modelhost.docengine.textlayer import read_text_layer
from modelhost.docengine.types import Block, Kind, PageContent, PageLayout

if TYPE_CHECKING:
    from modelhost.backends.ocr.pixels import PixelReader

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "documents"


def corpus(relative: str) -> Path:
    """A file of tests/corpus/documents."""
    return CORPUS / relative


@pytest.fixture
def open_pdf() -> Iterator[object]:
    """Opens corpus PDFs by relative path; closes them after the test."""
    opened: list[pdfium.PdfDocument] = []

    def _open(relative: str) -> pdfium.PdfDocument:
        doc = pdfium.PdfDocument(str(corpus(relative)))
        opened.append(doc)
        return doc

    yield _open
    for doc in opened:
        doc.close()


def drawn_page(path: Path, draw: Callable[[object], None]) -> PageContent:
    """One A4 page drawn by `draw` on a reportlab canvas, saved at `path` and read back through the text layer."""
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(595, 842))
    draw(c)
    c.showPage()
    c.save()
    doc = pdfium.PdfDocument(str(path))
    try:
        return read_text_layer(doc, 0)
    finally:
        doc.close()


def drawn_layout(path: Path, draw: Callable[[object], None]) -> PageLayout:
    """One A4 page drawn by `draw` (`drawn_page`), read back through the text layer and analysed in its own style."""
    content = drawn_page(path, draw)
    return analyse(content, document_style([content]))


def first_page_layout(path: Path) -> PageLayout:
    """The first page of the PDF at `path` through the text path: its text layer, analysed in its own style."""
    doc = pdfium.PdfDocument(str(path))
    try:
        content = read_text_layer(doc, 0)
    finally:
        doc.close()
    return analyse(content, document_style([content]))


def table_blocks(layout: PageLayout) -> list[Block]:
    """The page's tables, in reading order."""
    return [b for b in layout.blocks if b.kind is Kind.TABLE]


def table_rows(block: Block) -> list[list[str]]:
    """A table block's cells as text, row by row, a span's text in every cell it covers, "" for an empty cell."""
    assert block.table is not None
    return [[cell.text if cell else "" for cell in row] for row in block.table.grid()]


def wrapped_prose(c: object, text: str, top: float, *, x: float = 72, width: float = 450, lead: float = 12) -> float:
    """`text` set as a paragraph on a reportlab canvas in its current font: words filled into lines `width` points
    wide from `top` down, `lead` apart. Returns the last line's baseline."""
    font, size = c._fontname, c._fontsize  # type: ignore[attr-defined]
    y, line = top, ""
    for word in text.split():
        if c.stringWidth(f"{line} {word}", font, size) > width:  # type: ignore[attr-defined]
            c.drawString(x, y, line.strip())  # type: ignore[attr-defined]
            y, line = y - lead, ""
        line += f" {word}"
    c.drawString(x, y, line.strip())  # type: ignore[attr-defined]
    return y


def document_layouts(path: Path) -> list[PageLayout]:
    """Every page of the PDF at `path` through the text path: its text layer, analysed in the document's style,
    with furniture marked across the pages."""
    doc = pdfium.PdfDocument(str(path))
    try:
        contents = [read_text_layer(doc, i) for i in range(len(doc))]
    finally:
        doc.close()
    style = document_style(contents)
    return mark_furniture([analyse(content, style) for content in contents])


@pytest.fixture(scope="module")
def reader() -> Iterator[PixelReader]:
    """The pixel reader with the real PP-OCR and layout models from the wheels, loaded once per test module (a test
    module that uses it skips first where rapidocr is not installed: the import is here, not at the top)."""
    from modelhost.backends.ocr.pixels import PixelReader

    r = PixelReader.load()
    yield r
    r.close()

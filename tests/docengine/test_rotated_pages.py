"""Pages whose text runs sideways on the displayed page are read turned upright, and pages whose /Rotate turns
sideways-drawn text upright are read as shown: an upright page under /Rotate 90 gives the words of the same page
without it (issue 34: it gave none, with exit status 0), and a slide deck drawn running up the page under
/Rotate 90 gives its text (it gave 31 bytes for 27 slides)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from modelhost.docengine.analyse import analyse, document_style
from modelhost.docengine.textlayer import read_text_layer
from modelhost.docengine.types import PageContent

from .conftest import corpus

LINES = (
    "Quarterly report of the northern region",
    "Shipments to the northern region were delayed by two weeks in August,",
    "but the backlog was cleared before the end of September.",
)


def _contents(path: Path) -> list[PageContent]:
    document = pdfium.PdfDocument(str(path))
    try:
        return [read_text_layer(document, i) for i in range(len(document))]
    finally:
        document.close()


def _text(path: Path) -> str:
    contents = _contents(path)
    style = document_style(contents)
    return " ".join(" ".join(b.text for b in analyse(c, style).blocks) for c in contents)


def _words(text: str) -> Counter[str]:
    return Counter(re.findall(r"\w+", text.lower()))


def _page(path: Path, rotate: int, drawn: int) -> None:
    """A letter page of LINES, its content turned `drawn` degrees counter-clockwise in user space, under /Rotate
    `rotate`."""
    from reportlab.pdfgen import canvas

    width, height = 612.0, 792.0
    sideways = drawn in (90, 270)
    page = canvas.Canvas(str(path), pagesize=(height, width) if sideways else (width, height))
    if drawn == 90:
        page.translate(height, 0)  # the upright page's bottom-left corner, turned up the page
    elif drawn == 270:
        page.translate(0, width)
    elif drawn == 180:
        page.translate(width, height)
    page.rotate(drawn)
    page.setFont("Helvetica", 11)
    for n, line in enumerate(LINES):
        page.drawString(72, 700 - 16 * n, line)
    page.setPageRotation(rotate)
    page.showPage()
    page.save()


@pytest.mark.parametrize("rotate", [90, 180, 270])
def test_an_upright_page_under_rotate_gives_its_words_in_order(tmp_path: Path, rotate: int) -> None:
    _page(tmp_path / "page.pdf", rotate, 0)
    assert " ".join(_text(tmp_path / "page.pdf").split()) == " ".join(LINES)


@pytest.mark.parametrize(("rotate", "drawn"), [(90, 90), (270, 270), (0, 90), (0, 180)])
def test_text_drawn_sideways_is_read_in_its_own_direction(tmp_path: Path, rotate: int, drawn: int) -> None:
    """Drawn turned and shown turned back by /Rotate (a slide deck), or shown sideways (a landscape page set on a
    portrait one): either way the page's lines, whole and in order."""
    _page(tmp_path / "page.pdf", rotate, drawn)
    assert " ".join(_text(tmp_path / "page.pdf").split()) == " ".join(LINES)


def test_edgar_under_rotate_90_gives_the_words_of_the_upright_filing() -> None:
    upright = _words(_text(corpus("gnarly/edgar.pdf")))
    rotated = _words(_text(corpus("gnarly/edgar-rotated90.pdf")))
    assert sum(upright.values()) > 300
    assert rotated == upright


def test_the_slide_deck_under_rotate_90_gives_the_words_of_its_text_layer() -> None:
    """Against pdfium's own plain text of every slide (pdftotext's count is 10,166 letters): nearly every word."""
    path = corpus("gnarly/large_prompt_hint1.pdf")
    document = pdfium.PdfDocument(str(path))
    try:
        layer = _words(" ".join(document[i].get_textpage().get_text_range() for i in range(len(document))))
    finally:
        document.close()
    ours = _words(_text(path))
    assert sum(layer.values()) > 2000
    assert sum((ours & layer).values()) >= 0.95 * sum(layer.values())


SALES = (("Region", "Units", "Revenue"), ("North", "1,204", "38,410"), ("South", "982", "30,122"))


def _shaded_table_page(path: Path, drawn: int) -> None:
    """A letter page with a line of text over a table whose only grid is its shaded cells (filled rectangles edge to
    edge, no rule), its content turned `drawn` degrees counter-clockwise (0 or 90), no /Rotate."""
    from reportlab.pdfgen import canvas

    width, height = 612.0, 792.0
    page = canvas.Canvas(str(path), pagesize=(height, width) if drawn == 90 else (width, height))
    if drawn == 90:
        page.translate(height, 0)
    page.rotate(drawn)
    page.setFont("Helvetica", 11)
    page.drawString(72, 720, "Sales by region in the third quarter, in units and dollars.")
    for r, row in enumerate(SALES):
        for k, cell in enumerate(row):
            x, y = 72 + 120 * k, 680 - 22 * r
            page.setFillGray(0.85 if (r + k) % 2 else 0.93)
            page.rect(x, y - 6, 120, 22, stroke=0, fill=1)
            page.setFillGray(0)
            page.drawString(x + 6, y, cell)
    page.showPage()
    page.save()


def test_a_sideways_page_turns_its_shaded_cells_with_its_words(tmp_path: Path) -> None:
    # The fills (shaded cells, the only grid here) turn with the words: they were left where the sideways page has
    # them, so the table was found from word positions alone, its header row and cell boxes lost.
    tables = []
    for drawn in (0, 90):
        _shaded_table_page(tmp_path / f"page{drawn}.pdf", drawn)
        (content,) = _contents(tmp_path / f"page{drawn}.pdf")
        layout = analyse(content, document_style([content]))
        tables.append(next(b.table for b in layout.blocks if b.table is not None))
    upright, turned = tables
    assert [(c.text, c.header) for c in upright.cells][:3] == [("Region", True), ("Units", True), ("Revenue", True)]
    assert turned == upright

"""Reading order on pages laid out as word processors lay them out, drawn here with reportlab: a two-column section
under a title and over footnotes that run across the page, a table under its caption in the right column (LibreOffice
Writer's export of such a page is `tests/corpus/documents/tables_dev/writer_scripts_twocol.pdf`).

The test places its own text, so it checks that what a reader reads first comes first: the whole left column before
the caption over the right column's table.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pypdfium2 as pdfium

from modelhost.docengine.analyse import analyse, document_style
from modelhost.docengine.textlayer import read_text_layer
from modelhost.docengine.types import Kind, PageLayout

from .conftest import first_page_layout

#: A4, in points.
WIDTH, HEIGHT = 595.0, 842.0
#: The page margin, in points (2.2 cm).
MARGIN = 62.0


def _text(layout: PageLayout) -> str:
    return " ".join(" ".join(b.text for b in layout.blocks if b.kind is not Kind.TABLE).split())


def _prose(tag: str, count: int) -> list[str]:
    return [
        f"Sentence {tag}{i} of the left column tells the reader about item {i} and its neighbours."
        for i in range(count)
    ]


def _twocol(path: Path) -> tuple[list[str], str, str]:
    """The page (written to `path`): a title, an intro across both columns and footnotes across the page's foot cross
    the gutter, and the right column holds a caption shorter than the column over a table and a paragraph as wide as
    the column. Returns the left column's sentences, the caption and the paragraph under the table."""
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.pdfgen.canvas import Canvas
    from reportlab.platypus import Paragraph

    canvas = Canvas(str(path), pagesize=(WIDTH, HEIGHT))
    gutter = 22.0
    column = (WIDTH - 2 * MARGIN - gutter) / 2
    right_x = MARGIN + column + gutter
    body = ParagraphStyle("body", fontName="Times-Roman", fontSize=11, leading=13)

    def para(text: str, x: float, top: float, width: float, style: ParagraphStyle = body) -> float:
        p = Paragraph(text, style)
        _, h = p.wrap(width, HEIGHT)
        p.drawOn(canvas, x, top - h)
        return top - h

    canvas.setFont("Helvetica-Bold", 20)
    canvas.drawString(MARGIN, HEIGHT - 80, "Writing Systems in the Catalogue")
    intro = (
        "This note records how the catalogue names the writing system of each record, and why the codes of the "
        "standard were chosen over the names used before it was adopted by the library."
    )
    top = para(intro, MARGIN, HEIGHT - 100, WIDTH - 2 * MARGIN) - 16
    canvas.setFont("Helvetica-Bold", 14)
    canvas.drawString(MARGIN, top - 14, "1 Background")
    top -= 24
    left = _prose("L", 9)
    para(" ".join(left[:5]), MARGIN, top, column)
    canvas.setFont("Helvetica-Bold", 12)
    canvas.drawString(MARGIN, top - 120, "1.1 The codes")
    para(" ".join(left[5:]), MARGIN, top - 130, column)

    caption = "Table 1. Scripts of the collection"
    canvas.setFont("Times-Italic", 10)
    canvas.drawString(right_x, top - 10, caption)
    rows = [("Code", "No.", "Script")] + [(f"Sc{i:02d}", str(100 + 15 * i), f"Script number {i}") for i in range(14)]
    widths = [50.0, 40.0, column - 90.0]
    y = top - 18
    row_h = 15.0
    canvas.setLineWidth(0.5)
    for r, row in enumerate(rows):
        x = right_x
        canvas.setFont("Times-Bold" if r == 0 else "Times-Roman", 10)
        for w, cell in zip(widths, row, strict=True):
            canvas.rect(x, y - row_h, w, row_h)
            canvas.drawString(x + 3, y - row_h + 4, cell)
            x += w
        y -= row_h
    after = "Records in two scripts carry both codes, the script of the title first, as the catalogue rules say."
    para(after, right_x, y - 4, column)

    canvas.setFont("Times-Roman", 8)
    canvas.drawString(
        MARGIN, 70, "1 The earlier names were free text; a survey found many spellings of one script name alone."
    )
    canvas.drawString(
        MARGIN, 60, "2 The hundreds digit of the number gives the family of the script, as the standard sets it."
    )
    canvas.save()
    return left, caption, after


def _read_in_order(text: str, left: list[str], caption: str, after: str) -> None:
    at = text.find(caption)
    assert at >= 0, text
    for sentence in left:
        found = text.find(sentence)
        assert 0 <= found < at, f"{sentence!r} not read before the right column's caption: {text[:400]!r}"
    assert text.find(after) > at


def test_a_table_under_its_caption_in_the_right_column_is_read_after_the_left_column(tmp_path: Path) -> None:
    """The strip beside the caption is less covered than the gutter: it was taken for the would-be gutter, and the
    page read line by line across both columns."""
    path = tmp_path / "twocol.pdf"
    left, caption, after = _twocol(path)
    _read_in_order(_text(first_page_layout(path)), left, caption, after)


def test_the_same_page_read_from_words_without_fonts_is_read_column_by_column(tmp_path: Path) -> None:
    """The pixel path's words (OCR: no font, `Word.font` empty) of the same page are ordered by the same XY-cut: the
    section's gutter is taken where a title and footnotes cross it (`order._bands`' valleys). The pixel path once
    kept the order without the valleys (`order(valleys=...)`, from whether the page's words had fonts) and read this
    page line by line across both columns."""
    path = tmp_path / "twocol.pdf"
    left, caption, after = _twocol(path)
    doc = pdfium.PdfDocument(str(path))
    try:
        content = read_text_layer(doc, 0)
    finally:
        doc.close()
    content = dataclasses.replace(content, words=tuple(dataclasses.replace(w, font="") for w in content.words))
    _read_in_order(_text(analyse(content, document_style([content]))), left, caption, after)

"""Text inside a picture on the pixel path: a drawing's labels are the picture's, left out as the text path and
docling's Markdown leave them out; lines the document means as text (sentences, the rows of a table the layout model
boxed as a picture) are kept after the picture. Pages drawn with reportlab, rasterised with pypdfium2 at the
`convert` default and read by the real detector, layout model and recogniser (scanpage._meant_as_text)."""

from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Callable

import numpy as np
import pytest

pypdfium2 = pytest.importorskip("pypdfium2")
pytest.importorskip("reportlab")
pytest.importorskip("rapidocr")

from reportlab.lib.colors import Color, black, white  # noqa: E402
from reportlab.pdfgen.canvas import Canvas  # noqa: E402

from modelhost.backends.ocr import scanpage  # noqa: E402
from modelhost.backends.ocr.pixels import PixelReader  # noqa: E402
from modelhost.docengine.types import Block, Kind  # noqa: E402

#: The page is read at the `convert` default.
DPI = 150
#: A paragraph of body text set above and below each picture, so the page has a body and the picture stands in it.
BODY = (
    "Even if you are willing to live with these performance and management issues, a user with full access still "
    "can directly access all of the data in the underlying table and easily bypass the security controls that are "
    "built into the application logic and the views that the application uses."
)
#: A diagram's boxes: a word or two each, as a Redbook's architecture figure's.
LABELS = (("User with", "full access"), ("Regular User",), ("Application", "Logic"), ("Views",), ("Database Table",))
#: A syntax diagram: each clause with a sentence that explains it, as the Redbook's Figure 3-1.
SYNTAX = (
    ("CREATE PERMISSION <permission name>", "Names the row permission for row access control"),
    ("ON <table name>", "Identifies the table on which the row permission is created"),
    ("AS <correlation name>", "Gives an optional correlation name for the search condition"),
    ("FOR ROWS WHERE <condition>", "Says which rows of the table the user may read"),
)
#: A list view's rows in a screenshot of an administration tool: a table the layout model boxes as a figure.
ROWS = (
    ("Name", "Schema", "Type", "Rows"),
    ("EMPLOYEES", "HR_SCHEMA", "Table", "1204"),
    ("DEPARTMENTS", "HR_SCHEMA", "Table", "17"),
    ("SALARIES", "PAY_SCHEMA", "View", "5230"),
    ("ACCOUNTS", "BANK_SCHEMA", "Table", "889"),
    ("CUSTOMERS", "BANK_SCHEMA", "Table", "310"),
    ("BRANCHES", "BANK_SCHEMA", "View", "42"),
)


def _paragraph(page: Canvas, y: float) -> float:
    page.setFillColor(black)
    page.setFont("Helvetica", 10)
    for line in textwrap.wrap(BODY, 90):
        page.drawString(72, y, line)
        y -= 13
    return y


def _diagram(page: Canvas, y: float) -> None:
    # five filled boxes with their labels, and the arrows between them
    places = ((80, 60, 110, 45), (80, 160, 110, 45), (260, 110, 120, 50), (440, 110, 90, 50), (260, 200, 270, 40))
    grey = Color(0.8, 0.8, 0.8)
    fills = (Color(0.85, 0.9, 1), Color(0.85, 1, 0.85), Color(1, 0.95, 0.8), Color(0.95, 0.85, 0.95), grey)
    for (x, down, w, h), fill, labels in zip(places, fills, LABELS, strict=True):
        page.setFillColor(fill)
        page.setStrokeColor(Color(0.2, 0.2, 0.4))
        page.roundRect(x, y - down, w, h, 6, fill=1, stroke=1)
        page.setFillColor(black)
        page.setFont("Helvetica-Bold", 9)
        for n, label in enumerate(labels):
            page.drawCentredString(x + w / 2, y - down + h - 14 - 11 * n, label)
    page.setLineWidth(1.5)
    for x0, d0, x1, d1 in ((190, 40, 260, 80), (190, 140, 260, 90), (380, 85, 440, 85), (485, 110, 485, 160)):
        page.line(x0, y - d0, x1, y - d1)


def _syntax(page: Canvas, y: float) -> None:
    page.setStrokeColor(Color(0.3, 0.3, 0.6))
    page.setLineWidth(1.2)
    for n, (clause, note) in enumerate(SYNTAX):
        at = y - 40 - 45 * n
        page.setFillColor(Color(0.9, 0.93, 1))
        page.roundRect(80, at - 8, 200, 22, 5, fill=1, stroke=1)
        page.setFillColor(black)
        page.setFont("Courier-Bold", 9)
        page.drawString(88, at, clause)
        page.line(280, at + 3, 330, at + 3)
        page.circle(330, at + 3, 3, fill=1)
        page.setFont("Helvetica", 9)
        page.drawString(340, at, note)
    page.line(180, y - 54, 180, y - 175)


def _screenshot(page: Canvas, y: float) -> None:
    # a window: its title bar, a toolbar of icons, a navigation tree on the left and a list view of tables
    x, w, h = 60, 490, 190
    page.setFillColor(Color(0.93, 0.93, 0.93))
    page.setStrokeColor(Color(0.5, 0.5, 0.5))
    page.rect(x, y - h, w, h, fill=1, stroke=1)
    page.setFillColor(Color(0.2, 0.35, 0.65))
    page.rect(x, y - 18, w, 18, fill=1, stroke=0)
    page.setFillColor(white)
    page.setFont("Helvetica-Bold", 9)
    page.drawString(x + 6, y - 13, "System Navigator")
    page.rect(x + 6, y - h + 6, w - 12, h - 30, fill=1, stroke=1)
    for k in range(9):
        page.setFillColor(Color(0.3 + 0.07 * k, 0.5, 0.8 - 0.06 * k))
        page.rect(x + 8 + 20 * k, y - 38, 14, 14, fill=1, stroke=0)
    page.setFillColor(Color(0.97, 0.97, 1))
    page.setStrokeColor(Color(0.6, 0.6, 0.6))
    page.rect(x + 6, y - h + 6, 120, h - 50, fill=1, stroke=1)
    page.setFont("Helvetica", 8)
    for n, name in enumerate(("Databases", "Schemas", "Tables", "Views", "Indexes", "Aliases")):
        page.setFillColor(Color(0.9, 0.7, 0.2))
        page.rect(x + 14 + 8 * (n > 0), y - 60 - 14 * n, 8, 8, fill=1, stroke=0)
        page.setFillColor(black)
        page.drawString(x + 26 + 8 * (n > 0), y - 59 - 14 * n, name)
    for n, row in enumerate(ROWS):
        page.setFont("Helvetica-Bold" if n == 0 else "Helvetica", 8)
        if n:
            page.setFillColor(Color(0.2, 0.6, 0.3))
            page.rect(194, y - 68 - 16 * n, 8, 8, fill=1, stroke=0)
        page.setFillColor(black)
        for k, cell in enumerate(row):
            page.drawString(206 + 85 * k, y - 66 - 16 * n, cell)


def _panels(page: Canvas, y: float) -> None:
    # two photo-like panels (tiles of mid tones) side by side, each with its sub-caption under it in the figure
    for x0, name in ((100, "(a) South American coati"), (330, "(b) Brown bear")):
        for k in range(30):
            for j in range(24):
                page.setFillColor(Color(0.3 + 0.015 * k, 0.25 + 0.02 * j, 0.2 + 0.01 * ((k + j) % 50)))
                page.rect(x0 + 6 * k, y - 190 + 7 * j, 6, 7, fill=1, stroke=0)
        page.setFillColor(black)
        page.setFont("Helvetica", 9)
        page.drawString(x0 + 40, y - 205, name)


def _page(picture: Callable[[Canvas, float], None], depth: float, caption: str) -> np.ndarray:
    """A Letter page: a paragraph, the picture `depth` points deep, its caption and two more paragraphs, at DPI."""
    out = io.BytesIO()
    page = Canvas(out, pagesize=(612, 792))
    y = _paragraph(page, 720) - 20
    picture(page, y)
    y -= depth
    page.setFillColor(black)
    page.setFont("Helvetica", 9)
    page.drawString(72, y, caption)
    _paragraph(page, _paragraph(page, y - 25) - 10)
    page.showPage()
    page.save()
    pdf = pypdfium2.PdfDocument(out.getvalue())
    image = pdf[0].render(scale=DPI / 72).to_numpy()[:, :, :3]
    pdf.close()
    return np.ascontiguousarray(image)


def _read(reader: PixelReader, image: np.ndarray) -> list[Block]:
    detection = reader.detect(image, DPI)
    assert any(r.label == "figure" for r in detection.regions), "the model must box the drawing as a figure"
    return list(scanpage.blocks(reader, detection))


def _text(blocks: list[Block]) -> str:
    return " ".join(b.text for b in blocks if b.text)


def test_a_diagrams_labels_are_left_out_and_the_page_around_it_kept(reader: PixelReader) -> None:
    # The Redbook's architecture figures on pixels read every box's label into the page after the picture (about a
    # tenth of its characters in error): the reference, and the text path, hold the picture alone.
    blocks = _read(reader, _page(_diagram, 220, "Figure 1-2 Direct access to the data bypasses the application"))
    text = _text(blocks)
    assert [b.kind for b in blocks].count(Kind.PICTURE) == 1, blocks
    for label in ("Regular User", "Application", "Views", "Database Table"):
        assert label not in text, text
    assert "Figure 1-2 Direct access to the data bypasses the application" in text
    assert text.count("Even if you are willing") == 3, text


def test_a_pictures_sentences_are_kept_after_it(reader: PixelReader) -> None:
    # A syntax diagram whose clauses are each explained by a sentence: prose (prose.carries_text) is the page's text.
    blocks = _read(reader, _page(_syntax, 230, "Figure 3-1 The statement that defines a row permission"))
    text = _text(blocks)
    picture = next(i for i, b in enumerate(blocks) if b.kind is Kind.PICTURE)
    after = _text(blocks[picture + 1 :])
    for _, note in SYNTAX:
        assert note in after, text


def test_a_table_boxed_as_a_picture_keeps_its_rows(reader: PixelReader) -> None:
    # A screenshot of a list view: rows of cells (scantable.table_runs) are a table, whatever the layout model calls
    # its box, so its text is kept (a scanned table the model boxes as a picture must not lose its cells).
    blocks = _read(reader, _page(_screenshot, 230, "Figure 3-10 The tables of the schema"))
    words = set(re.findall(r"\w+", _text(blocks)))
    cells = {cell for row in ROWS[1:] for cell in row}
    assert len(cells & words) >= 0.9 * len(cells), sorted(cells - words)


def test_a_figures_panel_sub_captions_are_kept(reader: PixelReader) -> None:
    # Sub-captions set inside the figure's box ("(a) South American coati" under a photo) are the page's text, not
    # the drawing's labels: they are kept where a picture's other lines are left out (scanpage.SUBCAPTION).
    blocks = _read(reader, _page(_panels, 235, "Figure 2: Two animals"))
    text = _text(blocks)
    assert "South American coati" in text and "Brown bear" in text, text

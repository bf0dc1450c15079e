"""A box of text is no table (analyse._text_box).

Found in a sweep of registry PDFs: a form's framed paragraph with a line of fields under it came out as a 2 x 5
table whose first cell was the paragraph. Rows that few under a paragraph across all their columns compare nothing:
it is the page's text set in a box. Control: a table of four columns whose one long row stands under a header of
short labels (the first rows of a table of design decisions, the rest on the next page) stays a table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.types import Block, Kind

from .conftest import document_layouts, wrapped_prose

pytest.importorskip("reportlab")

PARAGRAPH = (
    "For the first set up of your account, the programme's contact is the coordinator at the number given on the "
    "front page (press option one, then option three). You will need to be in front of a computer when you activate "
    "the account. After the first set up, the help line is open every weekday from eight in the morning."
)
BODY = "A paragraph of the page's body before the box, set as any paragraph of the form is set on its page. " * 3


def _blocks(tmp_path: Path, draw: object) -> list[Block]:
    from reportlab.pdfgen import canvas

    path = tmp_path / "page.pdf"
    c = canvas.Canvas(str(path), pagesize=(612, 792))
    c.setFont("Times-Roman", 10)
    top = wrapped_prose(c, BODY, 720, x=60, width=480) - 20
    draw(c, top)  # type: ignore[operator]
    c.showPage()
    c.save()
    (layout,) = document_layouts(path)
    return list(layout.blocks)


def _framed_paragraph_and_fields(c: object, top: float) -> None:
    c.rect(56, top - 74, 490, 70)  # type: ignore[attr-defined]
    wrapped_prose(c, PARAGRAPH, top - 14, x=60, width=480)
    c.drawString(60, top - 69, "My account must be activated by")  # type: ignore[attr-defined]
    c.rect(205, top - 74, 80, 18)  # type: ignore[attr-defined]
    c.drawString(295, top - 69, "I am scheduled to start checking on")  # type: ignore[attr-defined]
    c.rect(455, top - 74, 80, 18)  # type: ignore[attr-defined]


def test_a_framed_paragraph_over_a_line_of_fields_is_text(tmp_path: Path) -> None:
    blocks = _blocks(tmp_path, _framed_paragraph_and_fields)
    assert not any(b.kind is Kind.TABLE for b in blocks)
    text = " ".join(b.text for b in blocks)
    assert "You will need to be in front of a computer when you activate the account." in text
    assert "My account must be activated by" in text


def test_a_long_row_under_a_header_of_short_labels_stays_a_table(tmp_path: Path) -> None:
    rows = [
        ("isExternal", "uri", "Links", "Outlines"),
        ("True", "Starts with file://", PARAGRAPH[:150], "Behave as described under links"),
    ]
    xs = (60, 130, 230, 450, 556)

    def draw(c: object, top: float) -> None:
        y = top - 10
        heights = (16, 64)
        for row, height in zip(rows, heights, strict=True):
            c.line(xs[0], y, xs[-1], y)  # type: ignore[attr-defined]
            for k, text in enumerate(row):
                wrapped_prose(c, text, y - 11, x=xs[k] + 3, width=xs[k + 1] - xs[k] - 8, lead=11)
            y -= height
        c.line(xs[0], y, xs[-1], y)  # type: ignore[attr-defined]
        for x in xs:
            c.line(x, top - 10, x, y)  # type: ignore[attr-defined]

    tables = [b.table for b in _blocks(tmp_path, draw) if b.table is not None]
    assert len(tables) == 1 and tables[0].rows == 2 and tables[0].cols == 4

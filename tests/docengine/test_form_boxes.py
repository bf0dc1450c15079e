"""A form's boxes of fields are no table (tables.FORM_FILL, tables._own_rows), and its labels are no headings
(tables.form_fields), where a band's title across the form stays one.

Found on US federal forms (tables_dev/va_form_210966_p1, dd_form_293_p1: pikepdf's test forms): every row of boxes
draws column lines of its own, so the ruled-table finder made one grid of the page whose columns were the union of
all rows' lines, and each box, spanning many of them, was written once per column (CER 4.3 and 8.5); read as text,
their labels set in capitals read as headings. The test of the rules (each row's column lines its own) keeps a table
whose columns its words part (a scanned report's grid, whose rows fill few of those columns) a table.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from modelhost.docengine import tables
from modelhost.docengine.analyse import analyse
from modelhost.docengine.emit import markdown_page
from modelhost.docengine.types import Kind, Segment

from .conftest import document_layouts, drawn_page

pytest.importorskip("reportlab")

#: Rows of boxes across the form (left edge 40, right edge 572), each box's right edge and its label: no two rows
#: part their boxes at the same places, as a form's fields are as wide as what they ask.
FORM = [
    [(572.0, "1. APPLICANT'S NAME (First, Middle Initial, Last)")],
    [(210.0, "2. SOCIAL SECURITY NUMBER"), (400.0, "3. HAVE YOU FILED BEFORE?"), (572.0, "4. FILE NUMBER")],
    [(250.0, "5. DATE OF BIRTH (MM/DD/YYYY)"), (572.0, "6. SERVICE NUMBER (If applicable)")],
    [(572.0, "7. MAILING ADDRESS (Number and street, City, State, ZIP Code)")],
    [(160.0, "8. TELEPHONE"), (330.0, "9. E-MAIL ADDRESS"), (460.0, "10. COUNTRY"), (572.0, "11. ZIP")],
    [(300.0, "12. RELATIONSHIP TO APPLICANT"), (572.0, "13. DATE SIGNED")],
    [(120.0, "14. GRADE"), (440.0, "15. UNIT AND LOCATION AT DISCHARGE"), (572.0, "16. CODE")],
]
ROW_HEIGHT = 30.0


def _form(c: object, height: float = ROW_HEIGHT, form: list[list[tuple[float, str]]] = FORM) -> None:
    c.setFont("Helvetica", 7)  # type: ignore[attr-defined]
    c.setLineWidth(0.6)  # type: ignore[attr-defined]
    top = 720.0
    for r, boxes in enumerate(form):
        y = top - height * r
        left = 40.0
        for right, label in boxes:
            c.rect(left, y - height, right - left, height)  # type: ignore[attr-defined]
            c.drawString(left + 3, y - 9, label)  # type: ignore[attr-defined]
            left = right


def test_a_forms_boxes_of_fields_are_read_as_text_each_label_once(tmp_path: Path) -> None:
    path = tmp_path / "form.pdf"
    drawn_page(path, _form)
    (layout,) = document_layouts(path)
    assert not [b for b in layout.blocks if b.kind is Kind.TABLE]
    text = markdown_page(layout)
    for boxes in FORM:
        for _, label in boxes:
            assert text.count(label.split(" (")[0]) == 1, label
    # read from pixels (OCR'd words carry no font, the rules come from the image) the grid stays what it was: the
    # pixels' lines of a form's two columns interleave read as lines (the probe's irs_f1040nr on the pixel path)
    content = drawn_page(tmp_path / "again.pdf", _form)
    pixels = replace(content, words=tuple(replace(w, font="", bold=False) for w in content.words))
    assert [b for b in analyse(pixels).blocks if b.kind is Kind.TABLE]


#: Labels in capitals, some alone in their row: each would read as a heading set apart (numbered, in capitals, on a
#: line of its own) but for the box it labels.
CAPITALS = [
    [(572.0, "1. APPLICANT'S NAME")],
    [(250.0, "2. DATE OF BIRTH"), (572.0, "3. SERVICE NUMBER")],
    [(572.0, "4. MAILING ADDRESS")],
    [(330.0, "5. TELEPHONE"), (572.0, "6. E-MAIL ADDRESS")],
    [(572.0, "7. REMARKS")],
    [(120.0, "8. GRADE"), (440.0, "9. UNIT AT DISCHARGE"), (572.0, "10. CODE")],
]

#: A band's title across the form, alone in its row and filling its box (on a form: `SECTION I: ...` on a shading).
BAND = "SECTION I: APPLICANT INFORMATION"


def _form_under_band(c: object) -> None:
    c.setLineWidth(0.6)  # type: ignore[attr-defined]
    c.rect(40.0, 750.0, 532.0, 20.0)  # type: ignore[attr-defined]
    c.setFont("Helvetica-Bold", 10)  # type: ignore[attr-defined]
    c.drawCentredString(306.0, 756.0, BAND)  # type: ignore[attr-defined]
    c.setFont("Helvetica", 7)  # type: ignore[attr-defined]
    c.line(40.0, 750.0, 40.0, 720.0)  # type: ignore[attr-defined]
    c.line(572.0, 750.0, 572.0, 720.0)  # type: ignore[attr-defined]
    c.drawString(43.0, 741.0, "Complete every box of this section in ink, one letter a box.")  # type: ignore[attr-defined]
    # boxes tall enough for two lines of entry each: the form fills most of the page, as a form does (a frame of
    # under FRAME_SHARE of the page is a box around a note, whose lines are never headings anyway)
    _form(c, 2 * ROW_HEIGHT, CAPITALS)


def test_a_forms_labels_are_no_headings_where_a_bands_title_stays_one(tmp_path: Path) -> None:
    path = tmp_path / "form.pdf"
    drawn_page(path, _form_under_band)
    (layout,) = document_layouts(path)
    headings = [b.text for b in layout.blocks if b.kind in (Kind.SECTION_HEADER, Kind.TITLE)]
    assert headings == [BAND]


def test_column_lines_in_pieces_at_one_x_are_a_tables_where_each_rows_own_lines_are_a_forms() -> None:
    ys = [100.0 + 20.0 * k for k in range(7)]
    rows = [Segment(100.0, y, 500.0, y, 0.5) for y in ys]
    sides = [Segment(x, ys[0], x, ys[-1], 0.5) for x in (100.0, 500.0)]
    # a scan's column rules, each given in pieces, one row's piece missing here and there
    pieces = [
        Segment(x, top, x, bottom, 0.5)
        for k, x in enumerate((200.0, 300.0, 400.0))
        for r, (top, bottom) in enumerate(itertools.pairwise(ys))
        if (r + k) % 3
    ]
    assert tables._own_rows([*rows, *sides, *pieces]) is None
    # a form: each row's boxes end where its own fields do
    own = [
        Segment(150.0 + 40.0 * r + 60.0 * k, top, 150.0 + 40.0 * r + 60.0 * k, bottom, 0.5)
        for r, (top, bottom) in enumerate(itertools.pairwise(ys))
        for k in range(2)
    ]
    form = tables._own_rows([*rows, *sides, *own])
    assert form is not None and form.lines_x[0] == [100.0, 150.0, 210.0, 500.0]

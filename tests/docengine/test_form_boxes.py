"""A form's boxes of fields are no table (tables.FORM_FILL), and two ruled tables each under its own title stay two
where the layout model boxes them as one table (analyse._titled_apart).

Found on US federal forms (tables_dev/va_form_210966_p1, dd_form_293_p1: pikepdf's test forms): every row of boxes
draws column lines of its own, so the ruled-table finder made one grid of the page whose columns were the union of
all rows' lines, and each box, spanning many of them, was written once per column (CER 4.3 and 8.5). And on a Word
page of two data tables, each under its title (tables_dev/img2table_tables_p1): the model's one table region over
both joined them, the second title a row of the first table. Pages drawn here; regions given as plain data.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from modelhost.docengine.analyse import analyse, document_style
from modelhost.docengine.emit import markdown_page
from modelhost.docengine.types import Block, Kind, Region

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


def _form(c: object) -> None:
    c.setFont("Helvetica", 7)  # type: ignore[attr-defined]
    c.setLineWidth(0.6)  # type: ignore[attr-defined]
    top = 720.0
    for r, boxes in enumerate(FORM):
        y = top - ROW_HEIGHT * r
        left = 40.0
        for right, label in boxes:
            c.rect(left, y - ROW_HEIGHT, right - left, ROW_HEIGHT)  # type: ignore[attr-defined]
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


#: Two small data tables, each a full grid under its own title line, one under the other.
TITLES = ("Example of Data Table 1", "Example of Data Table 2")
GRIDS = (
    [("sample", "blue value", "red value"), ("clear water", "97", "79"), ("blue water", "73", "13")],
    [("sample", "blue share", "red share"), ("clear water", "100%", "100%"), ("blue water", "75%", "17%")],
)
COLUMNS = (72.0, 200.0, 320.0, 440.0)
TOPS = (700.0, 590.0)


def _two_tables(c: object) -> None:
    c.setLineWidth(0.6)  # type: ignore[attr-defined]
    for title, rows, top in zip(TITLES, GRIDS, TOPS, strict=True):
        c.setFont("Helvetica-BoldOblique", 11)  # type: ignore[attr-defined]
        c.drawCentredString(256, top + 8, title)  # type: ignore[attr-defined]
        c.setFont("Helvetica", 9)  # type: ignore[attr-defined]
        for r, row in enumerate(rows):
            y = top - 18 * r
            c.line(COLUMNS[0], y, COLUMNS[-1], y)  # type: ignore[attr-defined]
            for k, text in enumerate(row):
                c.drawString(COLUMNS[k] + 3, y - 13, text)  # type: ignore[attr-defined]
        bottom = top - 18 * len(rows)
        c.line(COLUMNS[0], bottom, COLUMNS[-1], bottom)  # type: ignore[attr-defined]
        for x in COLUMNS:
            c.line(x, top, x, bottom)  # type: ignore[attr-defined]


def _tables(blocks: tuple[Block, ...]) -> list[Block]:
    return [b for b in blocks if b.kind is Kind.TABLE]


def test_two_titled_grids_in_one_table_region_stay_two_tables(tmp_path: Path) -> None:
    content = drawn_page(tmp_path / "two.pdf", _two_tables)
    style = document_style([content])
    alone = _tables(analyse(content, style).blocks)
    assert len(alone) == 2
    # the model's one table region over both titles and grids (842 - 720 .. 842 - 530, with padding)
    region = Region("table", (66.0, 842 - 722.0, 446.0, 842 - 530.0))
    layout = analyse(replace(content, regions=(region,)), style)
    tables = _tables(layout.blocks)
    assert len(tables) == 2
    assert [t.table.rows if t.table else 0 for t in tables] == [3, 3]
    text = " ".join(b.text for b in layout.blocks if b.kind is not Kind.TABLE)
    assert TITLES[1] in text

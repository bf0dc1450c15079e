"""A table's header in a grid with few or no rules, as spreadsheets print one (issue 34): column names wrapped over
two or three lines and centred beside each other (or set on one bottom line), over right-aligned figures, and a
group's label centred over the names of its columns. The lines of such a band interleave, so its rows say nothing of
its cells: the band is read from its text lines (`unruled._band`), a wrapped name one cell in the column its body
stands in, a group's label one cell over its columns (written in each), a name with no label over it in both rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.analyse import analyse, document_style

from .conftest import corpus, drawn_page, first_page_layout, table_blocks, table_rows

#: The number of header rows of each page's table in its reference (LibreOffice Calc's exports: tables_dev/README.md)
PAGES = {
    "calc_state_crime": 1,  # two-line names centred beside a one-line one, rules above and below and under the header
    "calc_macro_quarterly": 2,  # group labels over a shaded band, no rule; "Period" merged down both rows
    "calc_longley_employment": 1,  # names of one to three lines set on one bottom line, a serif face, no rule
    "calc_seattle_weather": 2,  # group labels over two-line names, a rule under the header only
    "calc_crimea_deaths": 2,  # group labels over names of one to three lines on a shaded band, rules above and below
    "calc_danish_money": 1,  # names flush right at the top of a tall row, far above the body, a frame around the grid
}


def _reference(name: str) -> list[list[str]]:
    """The rows of the reference's (only) pipe table."""
    lines = corpus(f"tables_dev/{name}.md").read_text(encoding="utf-8").splitlines()
    rows = [line.strip().strip("|").split(" | ") for line in lines if line.startswith("|")]
    return [[cell.strip() for cell in row] for row in rows if not set("".join(row)) <= set("-| ")]


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_sheets_header_band_reads_as_its_cells(name: str) -> None:
    (table,) = table_blocks(first_page_layout(corpus(f"tables_dev/{name}.pdf")))
    rows, expected = table_rows(table), _reference(name)
    header = PAGES[name]
    assert rows[:header] == expected[:header]
    assert rows[header] == expected[header]  # the band took no row of the body


#: A drawn sheet: a stub and five columns of right-aligned figures, each name centred over its cell.
CELLS = ((60.0, 150.0), (150.0, 215.0), (215.0, 280.0), (280.0, 345.0), (345.0, 410.0), (410.0, 475.0))
NAMES = (
    ("State",),
    ("Total", "population"),
    ("Median", "household", "income"),
    ("Area",),
    ("Per cent of all", "households"),
    ("Below", "poverty", "level"),
)
GROUPS = (("People", 1, 3), ("Households", 4, 6))  # a label and the cells [start, end) it is centred over
BODY = (
    ("Alabama", "4,779", "42,081", "50,645", "1.5%", "17.5%"),
    ("Alaska", "710", "66,521", "570,641", "0.2%", "9.5%"),
    ("Arizona", "6,392", "50,448", "113,594", "2.0%", "16.2%"),
    ("Arkansas", "2,916", "39,267", "52,035", "0.9%", "18.4%"),
    ("California", "37,254", "61,017", "155,779", "11.0%", "14.4%"),
)
SIZE, LEAD, PITCH = 8.0, 8.6, 13.0  # the face's size and leading, and the body rows' pitch (a cell's padding)


def _sheet(c: object, *, top: float, groups: bool) -> None:
    """The grid without a rule: names centred down a band three lines deep, figures flush right in their cells."""
    band = top - (PITCH if groups else 0.0)  # the names' band's top, under the groups' labels
    if groups:
        c.setFont("Helvetica-Bold", SIZE)  # type: ignore[attr-defined]
        for label, start, end in GROUPS:
            c.drawCentredString((CELLS[start][0] + CELLS[end - 1][1]) / 2, top - SIZE, label)  # type: ignore[attr-defined]
    middle = band - 1.5 * LEAD
    for k, ((a, b), lines) in enumerate(zip(CELLS, NAMES, strict=True)):
        # the stub's name merged down both rows is centred on the whole band, the others on the names' band
        centre = (top + middle) / 2 if k == 0 and groups else middle
        first = centre + (len(lines) - 1) * LEAD / 2 - SIZE / 3
        for k, text in enumerate(lines):
            c.setFont("Helvetica-Bold", SIZE)  # type: ignore[attr-defined]
            c.drawCentredString((a + b) / 2, first - k * LEAD, text)  # type: ignore[attr-defined]
    y = band - 3 * LEAD - PITCH
    c.setFont("Helvetica", SIZE)  # type: ignore[attr-defined]
    for row in BODY:
        c.drawString(CELLS[0][0] + 3, y, row[0])  # type: ignore[attr-defined]
        for (_, b), text in zip(CELLS[1:], row[1:], strict=True):
            c.drawRightString(b - 4, y, text)  # type: ignore[attr-defined]
        y -= PITCH


@pytest.mark.parametrize("groups", [False, True], ids=["one level", "group labels"])
def test_wrapped_names_centred_beside_each_other_are_one_cell_each(tmp_path: Path, groups: bool) -> None:
    content = drawn_page(tmp_path / "sheet.pdf", lambda c: _sheet(c, top=760.0, groups=groups))
    (table,) = table_blocks(analyse(content, document_style([content])))
    rows = table_rows(table)
    names = [" ".join(lines) for lines in NAMES]
    if groups:
        labels = [""] * len(CELLS)
        for label, start, end in GROUPS:
            labels[start:end] = [label] * (end - start)
        labels[0] = names[0]  # the stub's name, centred down both rows with no label over it, heads both
        assert rows[:2] == [labels, names]
    else:
        assert rows[0] == names
    assert rows[-len(BODY) :] == [list(row) for row in BODY]

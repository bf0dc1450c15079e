"""Spreadsheets printed with their cell gridlines, made here the way Excel and LibreOffice Calc print them: the grid's
lines box every row of the sheet, the title, units line and notes merged across it included, so the rules alone
read them as rows of the table, each written in every column it spans."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from modelhost.docengine.tables import find_tables
from modelhost.docengine.types import Kind

from .conftest import drawn_layout, drawn_page, table_blocks, table_rows

Draw = Callable[[object], None]

TITLE = "Total fertility rate, selected countries"
UNITS = "(Births per woman)"
HEADER = ("Country", "1960", "1980", "2000", "Change")
#: (country, figures...): a row of figures under each name, one empty cell where a year has no estimate
ROWS = (
    ("Afghanistan", "7.67", "7.67", "7.73", "(2.27)"),
    ("Andorra", "", "", "1.22", ""),
    ("Argentina", "3.11", "3.33", "2.48", "(0.91)"),
    ("Australia", "3.45", "1.89", "1.76", "(1.58)"),
    ("Bangladesh", "6.73", "6.36", "3.12", "(4.49)"),
    ("Brazil", "6.21", "4.07", "2.36", "(4.39)"),
    ("Canada", "3.81", "1.74", "1.49", "(2.18)"),
    ("China", "5.76", "2.71", "1.51", "(4.10)"),
)
NOTES = (
    "A blank cell: no estimate for that year. Declines in parentheses.",
    "Source: The World Bank, World Development Indicators.",
)

X0, X1 = 60.0, 420.0
COLUMNS = (60.0, 180.0, 240.0, 300.0, 360.0, 420.0)
ROW = 16.0


def _sheet(c: object, title_size: float = 14, notes: bool = True) -> None:
    """The printed sheet from y 100 down: the title row (`title_size`) and the units line merged across all five
    columns, the header and body rows, the notes' rows merged across (9 points under a 10-point grid); every row
    boxed by the gridlines, the merged rows with no line inside."""
    rows: list[tuple[str, ...] | str] = [TITLE, UNITS, HEADER, *ROWS, *(NOTES if notes else ())]
    top = 100.0
    c.setLineWidth(0.3)  # type: ignore[attr-defined]
    for n, row in enumerate(rows):
        y0, y1 = top + n * ROW, top + (n + 1) * ROW
        c.line(X0, 842 - y0, X1, 842 - y0)  # type: ignore[attr-defined]
        c.line(X0, 842 - y1, X1, 842 - y1)  # type: ignore[attr-defined]
        if isinstance(row, str):  # merged across the sheet: its box's sides only
            for x in (X0, X1):
                c.line(x, 842 - y0, x, 842 - y1)  # type: ignore[attr-defined]
            size = title_size if row == TITLE else 10 if row == UNITS else 9
            c.setFont("Helvetica-Bold" if row == TITLE else "Helvetica", size)  # type: ignore[attr-defined]
            if row in (TITLE, UNITS):
                c.drawCentredString((X0 + X1) / 2, 842 - y1 + 4, row)  # type: ignore[attr-defined]
            else:
                c.drawString(X0 + 2, 842 - y1 + 4, row)  # type: ignore[attr-defined]
            continue
        for x in COLUMNS:
            c.line(x, 842 - y0, x, 842 - y1)  # type: ignore[attr-defined]
        c.setFont("Helvetica-Bold" if row is HEADER else "Helvetica", 10)  # type: ignore[attr-defined]
        for k, text in enumerate(row):
            if k == 0:
                c.drawString(COLUMNS[0] + 2, 842 - y1 + 4, text)  # type: ignore[attr-defined]
            else:
                c.drawRightString(COLUMNS[k + 1] - 3, 842 - y1 + 4, text)  # type: ignore[attr-defined]


def test_a_title_and_notes_inside_a_sheets_gridlines_are_no_rows_of_its_table(tmp_path: Path) -> None:
    """The title (14 points over the grid's 10) and every row of one cell across the grid down to the header are
    the sheet's title block, the rows of one cell at its foot set smaller its notes: the table is the header and
    its rows, and the title, units line and notes are text (they were its first and last rows, each written in all
    five columns). A row across the grid set in the cells' own size is the table's title row (ReportLab's
    parameter tables set `canvas.acroform.radio parameters` so over their grids): it stays the table's first row."""
    layout = drawn_layout(tmp_path / "sheet.pdf", _sheet)
    tables = table_blocks(layout)
    assert len(tables) == 1
    rows = table_rows(tables[0])
    assert rows[0] == list(HEADER)
    assert rows[1:] == [list(row) for row in ROWS]
    text = [b.text for b in layout.blocks if b.kind is not Kind.TABLE]
    assert TITLE in text
    assert UNITS in text
    assert all(note in text for note in NOTES)

    same_size = table_blocks(drawn_layout(tmp_path / "titled.pdf", lambda c: _sheet(c, title_size=10, notes=False)))
    assert len(same_size) == 1
    assert table_rows(same_size[0])[0] == [TITLE] * len(HEADER)


def test_the_ruled_finder_gives_each_word_it_takes_the_row_of_the_cell_it_stands_in(tmp_path: Path) -> None:
    """`FoundTable.rows`, which `tables._edge_rows` reads each word's row from (it once looked for every word's cell
    among all the grid's cells): each word a table took, with the row of the first cell whose box holds its centre
    (a merged row's one cell, a body row's cells), and only those words; the same after the title block and notes
    are parted off (`tables._part`: rows counted from the part's first) as straight from the grid."""
    for name, draw in (("sheet", _sheet), ("titled", lambda c: _sheet(c, title_size=10, notes=False))):
        content = drawn_page(tmp_path / f"{name}.pdf", draw)
        words = list(content.words)
        found = find_tables(content.rulings, words)
        assert found
        for table in found:
            expected = {}
            for i in table.words:
                cx, cy = (words[i].x0 + words[i].x1) / 2, (words[i].y0 + words[i].y1) / 2
                rows = [
                    c.row
                    for c in table.table.cells
                    if c.bbox and c.bbox[0] <= cx <= c.bbox[2] and c.bbox[1] <= cy <= c.bbox[3]
                ]
                if rows:
                    expected[i] = rows[0]
            assert dict(table.rows) == expected and len(table.rows) == len(expected)

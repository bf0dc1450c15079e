"""Grids ruled in dots, and a table set in blocks under one header (tables.dotted_rules, tables._blocks).

Found on an Italian ministry's table of municipalities (iText, tables_dev/dotted_gridlines): every row rule and most
column rules are drawn as dashes of 1.9 points, each a filled rectangle of its own, 7,000 of them. No dash is long
enough to be a rule, so no grid was found and the dashes made a drawing over the words; the rows came out as loose
lines. The table is set in blocks, one province's municipalities each, a blank band apart under the one header, with
the region's total in a one-row band of its own under them: read apart, the header stayed with the first block, the
second block was taken for a diagram of boxes (its first row's label spans two columns, so one column's rules start
a row lower and close no box), and the total row, one row, made no table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.types import Kind, Table

from .conftest import document_layouts, drawn_page

pytest.importorskip("reportlab")

#: Column lines of the drawn grid (points from the left), as the ministry's table sets them: the region (its name
#: only in the header and the total's band), the province, the municipality, figures.
COLUMNS = (20.0, 60.0, 120.0, 260.0, 320.0, 380.0, 460.0)
#: One dash and the pitch it repeats at, as iText draws them (points).
DASH, PITCH, THICK = 1.9, 2.52, 0.6
ROW = 10.0


def _dotted(c: object, x0: float, y0: float, x1: float, y1: float, solid: bool = False) -> None:
    """A rule from (x0, y0) to (x1, y1), horizontal or vertical, drawn as dashes each filled on its own (`solid`: as
    one line)."""
    if solid:
        c.line(x0, y0, x1, y1)  # type: ignore[attr-defined]
        return
    c.setFillGray(0.65)  # type: ignore[attr-defined]
    horizontal = y0 == y1
    at, end = (x0, x1) if horizontal else (y0, y1)
    while at < end:
        length = min(DASH, end - at)
        if horizontal:
            c.rect(at, y0 - THICK / 2, length, THICK, stroke=0, fill=1)  # type: ignore[attr-defined]
        else:
            c.rect(x0 - THICK / 2, at, THICK, length, stroke=0, fill=1)  # type: ignore[attr-defined]
        at += PITCH
    c.setFillGray(0)  # type: ignore[attr-defined]


def _rows(c: object, top: float, rows: list[tuple[str, ...]], first: int = 1, solid: bool = False) -> float:
    """`rows` set from `top` down, one a ROW tall, each row's cells from column `first` on, dotted rules under each
    row and between the columns; returns the block's bottom."""
    for r, cells in enumerate(rows):
        base = top - (r + 1) * ROW + 3
        for k, text in enumerate(cells):
            c.drawString(COLUMNS[first + k] + 3, base, text)  # type: ignore[attr-defined]
        _dotted(c, COLUMNS[first], top - (r + 1) * ROW, COLUMNS[-1], top - (r + 1) * ROW, solid)
    bottom = top - len(rows) * ROW
    for x in COLUMNS[first:]:
        _dotted(c, x, bottom, x, top, solid)
    return bottom


BLOCK_A = [
    ("", "Corvara", "1", "206", "510"),
    ("", "Farindola", "1", "1.357", "1.578"),
    ("", "Salle", "1", "270", "698"),
]
BLOCK_B = [
    ("", "Ancarano", "1", "1.811", "1.620"),
    ("", "Arsita", "1", "756", "874"),
    ("", "Atri", "1", "10.064", "9.986"),
]


def _header(c: object, top: float) -> float:
    c.setFont("Helvetica", 7)  # type: ignore[attr-defined]
    c.setLineWidth(1.2)  # type: ignore[attr-defined]
    c.rect(COLUMNS[0], top - 2 * ROW, COLUMNS[-1] - COLUMNS[0], 2 * ROW)  # type: ignore[attr-defined]
    for x in COLUMNS[1:-1]:
        c.line(x, top, x, top - 2 * ROW)  # type: ignore[attr-defined]
    for x, text in zip(COLUMNS, ("REGION", "PROVINCE", "MUNICIPALITY", "NUMBER", "POPULATION", "VOTERS"), strict=False):
        c.drawString(x + 3, top - ROW - 3, text)  # type: ignore[attr-defined]
    c.setLineWidth(0.6)  # type: ignore[attr-defined]
    return top - 2 * ROW


def _tables(path: Path) -> list[Table]:
    (layout,) = document_layouts(path)
    return [b.table for b in layout.blocks if b.kind is Kind.TABLE and b.table is not None]


def _texts(table: Table) -> set[str]:
    return {cell.text for cell in table.cells if cell.text}


def test_a_grid_ruled_in_dashes_is_a_table(tmp_path: Path) -> None:
    def page(c: object) -> None:
        bottom = _rows(c, _header(c, 760), [*BLOCK_A, *BLOCK_B])
        c.drawString(60, bottom - 40, "Source: the ministry's register of municipalities.")  # type: ignore[attr-defined]

    path = tmp_path / "dotted.pdf"
    drawn_page(path, page)
    (table,) = _tables(path)
    assert (table.rows, table.cols) == (7, 6)
    by_cell = {(cell.row, cell.col): cell.text for cell in table.cells}
    assert by_cell[(0, 4)] == "POPULATION" and by_cell[(1, 2)] == "Corvara" and by_cell[(6, 5)] == "9.986"


@pytest.mark.parametrize("solid", [False, True])
def test_blocks_of_one_table_under_one_header_are_one_table(tmp_path: Path, solid: bool) -> None:
    """A province's block under the header, a blank band, the next province's block (no region column; its name in
    a first row that spans the province and municipality columns: the other columns' rules start a row lower), a
    blank band, the region's total in a one-row band of its own (its name spanning three columns): one table, its
    rules dotted or solid. The blocks lack column lines the header has; a split table's parts boxed again each
    with the same columns stay tables of their own (tables_dev/reportlab_userguide_p88)."""

    def page(c: object) -> None:
        bottom = _rows(c, _header(c, 760), [*BLOCK_A, ("", "Total", "3", "1.833", "2.786")], solid=solid)
        top = bottom - 9.4
        c.drawString(COLUMNS[1] + 3, top - ROW + 3, "TERAMO")  # type: ignore[attr-defined]
        _dotted(c, COLUMNS[1], top, COLUMNS[3], top, solid)
        _dotted(c, COLUMNS[1], top - ROW, COLUMNS[3], top - ROW, solid)
        _dotted(c, COLUMNS[1], top - ROW, COLUMNS[1], top, solid)
        _dotted(c, COLUMNS[3], top - ROW, COLUMNS[3], top, solid)
        bottom = _rows(c, top - ROW, [*BLOCK_B, ("", "Total", "3", "12.631", "12.480")], solid=solid)
        c.setLineWidth(1.2)  # type: ignore[attr-defined]
        top = bottom - 9.4
        c.rect(COLUMNS[0], top - ROW, COLUMNS[-1] - COLUMNS[0], ROW)  # type: ignore[attr-defined]
        for x in COLUMNS[3:-1]:
            c.line(x, top, x, top - ROW)  # type: ignore[attr-defined]
        for x, text in zip(COLUMNS, ("ABRUZZO", "", "", "6", "14.464", "15.266"), strict=False):
            if text:
                c.drawString(x + 3, top - ROW + 3, text)  # type: ignore[attr-defined]

    path = tmp_path / "blocks.pdf"
    drawn_page(path, page)
    tables = _tables(path)
    assert len(tables) == 1
    texts = _texts(tables[0])
    assert {"PROVINCE", "Corvara", "TERAMO", "Atri", "12.631", "ABRUZZO", "15.266"} <= texts


def test_marks_of_no_pitch_or_too_few_are_no_rule() -> None:
    """A chart's markers scattered along a line keep no pitch; two dots are a colon; a dotted rule is a rule."""
    from modelhost.docengine.tables import dotted_rules

    pitched = [(72 + k * PITCH, 100.0, 72 + k * PITCH + DASH, 100.6) for k in range(20)]
    rules, left = dotted_rules(pitched)
    assert len(rules) == 1 and not left
    assert rules[0].horizontal and rules[0].x0 == 72 and rules[0].x1 == pytest.approx(72 + 19 * PITCH + DASH)
    scattered = [(72 + x, 200.0, 73.5 + x, 201.5) for x in (0.0, 2.0, 3.6, 6.9, 8.0, 10.9, 12.1)]
    assert dotted_rules(scattered) == ([], scattered)
    pair = [(72.0, 300.0, 73.0, 301.0), (74.0, 300.0, 75.0, 301.0)]
    assert dotted_rules(pair) == ([], pair)


def test_parts_of_a_split_table_each_with_all_its_columns_stay_apart(tmp_path: Path) -> None:
    """A table split and each part boxed again with the same columns, a few points apart (ReportLab's user guide,
    tables_dev/reportlab_userguide_p88): two tables."""

    def page(c: object) -> None:
        c.setFont("Helvetica", 7)  # type: ignore[attr-defined]
        bottom = _rows(c, 760, BLOCK_A, solid=True)
        _dotted(c, COLUMNS[1], 760, COLUMNS[-1], 760, solid=True)
        _rows(c, bottom - 5, BLOCK_B, solid=True)
        _dotted(c, COLUMNS[1], bottom - 5, COLUMNS[-1], bottom - 5, solid=True)

    path = tmp_path / "split.pdf"
    drawn_page(path, page)
    assert len(_tables(path)) == 2

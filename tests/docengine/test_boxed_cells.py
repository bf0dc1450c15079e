"""A grid whose cells are each boxed on their own, a few points apart, is one table (tables._facing).

Found on a web page printed to PDF (the USGS's file formats, tables_dev/gnis_file_formats): an HTML table's
cellspacing sets every cell's border a few points from its neighbour's, inside an outer border, so no two rules
touched and no table was found; its cells came out as loose lines read across. A description spanning two rows ran to
over a hundred words, which alone had the grid refused as a frame around running text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.types import Kind

from .conftest import document_layouts, drawn_page, wrapped_prose

pytest.importorskip("reportlab")

#: Column edges of the grid (points), and each cell's border inset from them: facing borders stand twice this apart.
COLUMNS = (72.0, 170.0, 250.0, 540.0)
SPACING = 1.5
LONG = (
    "The unique two letter code and the unique two number code of a state as the federal standard gives them, "
    "with the district, the territories and the freely associated areas. Some records in a state's file name "
    "another state: this is not an error. It means the feature lies mostly in the other state and crosses into "
    "this one, so that the record is in both states' files, and a reader who joins the files by state sees it "
    "twice, once under each state, with the same identifier and the same coordinates; deduplicate by identifier."
)
ROWS = [
    (("Name", "Type", "Description"), 1),
    (("Feature ID", "Number", "A permanent identifier of the feature's record."), 1),
    (("State Alpha", "Character", LONG), 2),
    (("State Numeric", "Character", ""), 0),
    (("County Name", "Character", "The county's name as the federal standard gives it."), 1),
]


def _cell(c: object, x0: float, top: float, x1: float, bottom: float, text: str) -> None:
    c.rect(x0 + SPACING, bottom + SPACING, x1 - x0 - 2 * SPACING, top - bottom - 2 * SPACING)  # type: ignore[attr-defined]
    if text:
        wrapped_prose(c, text, top - SPACING - 11, x=x0 + SPACING + 3, width=x1 - x0 - 2 * SPACING - 8, lead=11)


def _grid(c: object) -> None:
    c.setFont("Helvetica", 9)  # type: ignore[attr-defined]
    c.drawString(72, 770, "File format for states and the areas associated with them, one record a line.")  # type: ignore[attr-defined]
    c.setLineWidth(0.7)  # type: ignore[attr-defined]
    heights = [26.0, 26.0, 70.0, 70.0, 26.0]  # the long description's two rows share 140 points
    tops = [750.0 - sum(heights[:r]) for r in range(len(heights) + 1)]
    for r, (cells, span) in enumerate(ROWS):
        for k, text in enumerate(cells):
            rows = span if k == 2 else 1
            if rows:  # a row under the description spanning from the row above draws no cell there
                _cell(c, COLUMNS[k], tops[r], COLUMNS[k + 1], tops[r + rows], text)
    c.rect(COLUMNS[0], tops[-1], COLUMNS[-1] - COLUMNS[0], tops[0] - tops[-1])  # type: ignore[attr-defined]


def test_cells_boxed_apart_are_one_grid_with_a_long_spanning_description(tmp_path: Path) -> None:
    path = tmp_path / "boxed.pdf"
    drawn_page(path, _grid)
    (layout,) = document_layouts(path)
    tables = [b.table for b in layout.blocks if b.kind is Kind.TABLE and b.table is not None]
    assert len(tables) == 1
    table = tables[0]
    assert (table.rows, table.cols) == (5, 3)
    by_cell = {(cell.row, cell.col): cell for cell in table.cells}
    assert by_cell[(2, 0)].text == "State Alpha" and by_cell[(3, 0)].text == "State Numeric"
    assert by_cell[(2, 2)].row_span == 2 and by_cell[(2, 2)].text.startswith("The unique two letter code")
    assert by_cell[(0, 2)].text == "Description" and by_cell[(4, 1)].text == "Character"


def test_a_boxed_page_of_running_text_is_no_table(tmp_path: Path) -> None:
    """One frame around a long paragraph, a note box beside it: a sidebar, not a grid (the boxes face once, and
    beside the long paragraph only the note holds text)."""

    def sidebar(c: object) -> None:
        c.setFont("Helvetica", 9)  # type: ignore[attr-defined]
        c.rect(72, 500, 300, 250)  # type: ignore[attr-defined]
        wrapped_prose(c, LONG + " " + LONG, 735, x=80, width=284, lead=11)
        c.rect(72 + 300 + 2 * SPACING, 500, 160, 250)  # type: ignore[attr-defined]  # as far apart as facing borders
        c.drawString(380, 735, "Note: see the codes.")  # type: ignore[attr-defined]

    path = tmp_path / "sidebar.pdf"
    drawn_page(path, sidebar)
    (layout,) = document_layouts(path)
    assert not [b for b in layout.blocks if b.kind is Kind.TABLE]

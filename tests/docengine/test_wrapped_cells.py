"""Wrapped cells of tables read from word positions (docengine.wordtable): a cell whose text runs onto a second line
stays one cell when that line stands closer under its row than the table's rows stand apart, whatever its first
letter; a row of its own at the rows' pitch stays a row. Unit tests on words placed here, and a drawn page read from
its pixels alone (the pixel path reads every table region with the same reader).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pytest

from modelhost.docengine.types import Block, Word
from modelhost.docengine.wordtable import table_block, table_blocks

if TYPE_CHECKING:
    from modelhost.backends.ocr.pixels import PixelReader

#: The DPI pages are read at (`modelhost convert`'s).
READ_DPI = 150
#: Rows stand this many points apart (a table's cells padded, 10-point type) and a wrapped cell's next line this
#: many under its first (the text's leading).
PITCH = 20.0
LEADING = 12.0


def _words(lines: Sequence[tuple[float, Sequence[tuple[float, str]]]]) -> list[Word]:
    # Detector lines as the recogniser gives them: one line per (x, text) at the line's top y, 10 points tall.
    return [
        Word(text, (x, y, x + 6.0 * len(text), y + 10.0), size=10.0, line=100 * n + c)
        for n, (y, row) in enumerate(lines)
        for c, (x, text) in enumerate(row)
    ]


def _grid(block: Block | None) -> list[list[str]]:
    assert block is not None and block.table is not None
    return [[cell.text if cell else "" for cell in row] for row in block.table.grid()]


def _rows(*rows: Sequence[Sequence[tuple[float, str]]]) -> list[tuple[float, Sequence[tuple[float, str]]]]:
    # Each row's lines, its first at the row's place and the next ones LEADING under it; rows PITCH apart
    out, y = [], 0.0
    for row in rows:
        for k, line in enumerate(row):
            out.append((y + LEADING * k, line))
        y += LEADING * (len(row) - 1) + PITCH
    return out


def test_a_title_cased_wrapped_name_set_at_the_leading_is_one_cell() -> None:
    # A report's project names in title case, wrapped onto two or three lines beside one line of figures: each next
    # line started with a capital, so it came out a row of its own (hydrogen_projects_a1, scanned: cells 0.66). A
    # group's label (`Planned`) at the rows' pitch stays a row, whatever it leaves empty.
    lines = _rows(
        [[(10, "Project"), (200, "Capacity"), (300, "State")]],
        [[(10, "Ordos Solar Hydrogen"), (200, "10,000"), (300, "Yes")], [(10, "Demonstration Project")]],
        [[(10, "Planned")]],
        [[(10, "Envision Zero Carbon"), (200, "320,000"), (300, "No")], [(10, "Hydrogen Ammonia")], [(10, "Project")]],
        [[(10, "Ulanqab Wind Hydrogen"), (200, "100,000"), (300, "Yes")]],
    )
    assert _grid(table_block(_words(lines))) == [
        ["Project", "Capacity", "State"],
        ["Ordos Solar Hydrogen Demonstration Project", "10,000", "Yes"],
        ["Planned", "", ""],
        ["Envision Zero Carbon Hydrogen Ammonia Project", "320,000", "No"],
        ["Ulanqab Wind Hydrogen", "100,000", "Yes"],
    ]


def test_a_header_of_two_lines_set_at_the_leading_is_one_row() -> None:
    # Column names wrapped onto a second line (`Estimated` over `Capacity`): the second line was the first body row.
    # Standard errors set a line under their estimates are a row of figures, however close: never a wrapped cell.
    lines = _rows(
        [[(10, "Term"), (200, "Estimated"), (300, "Hurdle"), (400, "Cases")], [(200, "Effect"), (300, "Model")]],
        [[(10, "Intercept"), (200, "1.23"), (300, "0.98"), (400, "120")], [(200, "(0.12)"), (300, "(0.10)")]],
        [[(10, "Age"), (200, "0.45"), (300, "0.51"), (400, "118")], [(200, "(0.05)"), (300, "(0.06)")]],
        [[(10, "Income"), (200, "2.10"), (300, "1.87"), (400, "97")], [(200, "(0.30)"), (300, "(0.29)")]],
    )
    assert _grid(table_block(_words(lines))) == [
        ["Term", "Estimated Effect", "Hurdle Model", "Cases"],
        ["Intercept", "1.23", "0.98", "120"],
        ["", "(0.12)", "(0.10)", ""],
        ["Age", "0.45", "0.51", "118"],
        ["", "(0.05)", "(0.06)", ""],
        ["Income", "2.10", "1.87", "97"],
        ["", "(0.30)", "(0.29)", ""],
    ]


def test_two_tables_of_one_header_keep_their_wrapped_cells() -> None:
    # The rows' spacing is read in each of two stacked tables as in one.
    first = [[(10, "Project"), (200, "Capacity"), (300, "State")]]
    lines = _rows(
        first,
        [[(10, "Ordos Solar"), (200, "10,000"), (300, "Yes")], [(10, "Demonstration Site")]],
        [[(10, "Ejin Horo"), (200, "500"), (300, "Yes")]],
        [[(10, "Jingneng Storage"), (200, "384"), (300, "No")]],
        first,
        [[(10, "Envision Zero"), (200, "320,000"), (300, "No")], [(10, "Hydrogen Ammonia")]],
        [[(10, "Ulanqab Wind"), (200, "100,000"), (300, "Yes")]],
        [[(10, "Duolun County"), (200, "90,000"), (300, "Yes")]],
    )
    tables = [_grid(b) for b in table_blocks(_words(lines)) if b.table is not None]
    assert [row[0] for table in tables for row in table] == [
        "Project",
        "Ordos Solar Demonstration Site",
        "Ejin Horo",
        "Jingneng Storage",
        "Project",
        "Envision Zero Hydrogen Ammonia",
        "Ulanqab Wind",
        "Duolun County",
    ]


def test_a_scanned_reports_wrapped_project_names_are_one_cell_each(reader: PixelReader) -> None:
    # The dev scan of a policy report's appendix (tables_dev/hydrogen_projects_a1, scanned at 200 DPI): project names
    # in title case wrapped onto two to four lines beside one line of figures, rows ruled apart. Each next line was a
    # row of its own (the table's cell recall 0.66).
    pytest.importorskip("rapidocr")
    import pypdfium2 as pdfium

    from modelhost.backends.ocr import scanpage

    from .conftest import CORPUS

    doc = pdfium.PdfDocument(CORPUS / "scan" / "scan_tablesdev_hydrogen_projects_a1.pdf")
    try:
        image = np.asarray(doc[0].render(scale=READ_DPI / 72).to_pil().convert("RGB"))
    finally:
        doc.close()
    found = scanpage.blocks(reader, reader.detect(image, READ_DPI))
    cells = {cell.text for block in found if block.table is not None for cell in block.table.cells}
    names = ("Envision Zero Carbon Technology (Chifeng) 1.52 Million", "Inner Mongolia Shenfeng Green Ammonia Chemical")
    assert all(any(cell.startswith(name) for cell in cells) for name in names)
    assert not any(cell.startswith(("Chemical Annual Output", "Green Hydrogen Synthetic")) for cell in cells)

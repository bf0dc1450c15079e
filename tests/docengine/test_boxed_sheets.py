"""A spreadsheet's box of names and values, on PDFs made here (issue 34, text-path tables: the held-out tables-rival
kind of an actuarial pricing sheet): names set in Courier beside values in Helvetica inside a double-ruled box with
no inner rule, the last names' values left empty. The box holds the table: its trailing names with nothing beside
them are rows with empty cells, not a paragraph's lines under it; and a column of values in a text face beside the
monospaced names makes it no code listing, whose lines, comments too, are all in one monospaced face."""

from __future__ import annotations

from pathlib import Path

from .conftest import drawn_layout, table_blocks, table_rows
from .test_unruled_tables import _right, _text

SHEET = [
    ("Name of insured person", "John A. Smith"),
    ("Date of birth", "12.03.1961"),
    ("Entry age", ""),
    ("Sum insured", "250,000"),
    ("Term of insurance in years", "20"),
    ("Mode of premium payment", ""),
    ("Annual premium rate per mille", ""),
    ("Loading for sub-standard risk", ""),
]


def _sheet(boxed: bool):
    def draw(c: object) -> None:
        _text(c, 72, 780, "Pricing sheet", "Helvetica-Bold", 12)
        y, top = 750.0, 764.0
        for name, value in SHEET:
            _text(c, 80, y, name, "Courier", 9)
            _right(c, 420, y, value, size=9)
            y -= 13
        if boxed:
            c.setLineWidth(0.5)  # type: ignore[attr-defined]
            c.rect(72, y + 4, 358, top - y - 4)  # type: ignore[attr-defined]
            c.rect(74, y + 6, 354, top - y - 8)  # type: ignore[attr-defined]

    return draw


def test_a_boxed_sheet_keeps_its_names_with_empty_values(tmp_path: Path) -> None:
    (table,) = table_blocks(drawn_layout(tmp_path / "sheet.pdf", _sheet(boxed=True)))
    assert table_rows(table) == [list(row) for row in SHEET]


def test_names_left_without_values_under_an_unboxed_list_stay_text(tmp_path: Path) -> None:
    """Without the box nothing bounds the table: the trailing names alone on their lines are not its rows."""
    layout = drawn_layout(tmp_path / "loose.pdf", _sheet(boxed=False))
    for table in table_blocks(layout):
        assert ["Loading for sub-standard risk", ""] not in table_rows(table)

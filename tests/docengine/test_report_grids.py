"""Report tables on PDFs made here, of the kind an InDesign sustainability report or a statistical office sets: a
table ruled across under every row and never down, set in one column of a page whose next column holds prose (a
link's underline among it), under a header band of several lines with no rule inside it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .conftest import drawn_layout, table_blocks, table_rows

Draw = Callable[[object], None]

PROSE = (
    "Several projects became operational for the first time this year. Two solar farms are predicted to generate "
    "a great deal of energy annually, and three wind farms went live together in the north of the country."
)

#: (country, projects, capacity) rows, ruled one by one.
ROWS = (
    ("Australia", "7", "265"),
    ("Austria", "1", "0.03"),
    ("Brazil", "1", "122"),
    ("Canada", "3", "460"),
    ("China", "2", "200"),
    ("Finland", "7", "258"),
    ("France", "5", "39"),
    ("Germany", "6", "638"),
    ("Total", "32", "1,982"),
)
#: the header's three columns, each a cell of one to three lines (bottom-aligned), in one band without a rule
HEADER = (
    ("Project Location",),
    ("Number of", "Projects"),
    ("Total Annual Expected", "MW Capacity when", "Operational"),
)

#: the note under the table, five lines of its width
NOTE = (
    "* This table includes both on-site solar and",
    "contracted off-site utility-scale wind and solar",
    "projects, which are in various stages of",
    "development and construction. Some of the",
    "projects in the table were announced in January.",
)


def _text(c: object, x: float, top: float, text: str, size: float = 8, right: bool = False) -> None:
    """`text` whose baseline is `top` points down from the page's top (A4: 842 points); `right`: ending at `x`."""
    c.setFont("Helvetica", size)  # type: ignore[attr-defined]
    if right:
        c.drawRightString(x, 842 - top, text)  # type: ignore[attr-defined]
    else:
        c.drawString(x, 842 - top, text)  # type: ignore[attr-defined]


def _rule(c: object, x0: float, x1: float, top: float) -> None:
    c.setLineWidth(0.25)  # type: ignore[attr-defined]
    c.line(x0, 842 - top, x1, 842 - top)  # type: ignore[attr-defined]


def _report(c: object, prose: bool = True) -> None:
    """The table at the left (x 40 to 280) under its title, a header band 107 to 142, a rule under each row (15.5
    apart), a note under it, and a column of prose at x 300 whose lines (13 apart) fall between the table's rules;
    a link underlined in it."""
    x0, x1, cols = 40.0, 280.0, (44.0, 185.0, 276.0)
    top, band = 107.0, 142.0
    _text(c, x0, 95, "Renewable Energy Projects by Country", size=12)
    _rule(c, x0, x1, top)
    for k, cell in enumerate(HEADER):
        for n, line in enumerate(reversed(cell)):
            _text(c, cols[k], band - 4 - 10 * n, line, right=k > 0)
    _rule(c, x0, x1, band)
    y = band
    for name, count, capacity in ROWS:
        _text(c, cols[0], y + 11, name)
        _text(c, cols[1], y + 11, count, right=True)
        _text(c, cols[2], y + 11, capacity, right=True)
        y += 15.5
        _rule(c, x0, x1, y)
    for n, line in enumerate(NOTE):  # the table's note under it, as wide as the table
        _text(c, x0, y + 12 + 13 * n, line, size=8)  # on the prose's baselines: one row each with its line
    if not prose:
        return
    words = (PROSE + " ") * 4
    start = 0
    for n in range(22):
        end = words.rfind(" ", start, start + 60)
        _text(c, 300, 121 + 13 * n, words[start:end], size=9)
        start = end + 1
    _rule(c, 300, 380, 150.5)  # a link in the prose column, underlined: a rule between two of the table's rules


def test_a_table_ruled_across_beside_a_column_of_prose_is_one_table(tmp_path: Path) -> None:
    """Every line of the prose column beside the table reaches past the table's rules, but a gutter away: it cuts no
    stack of them (each line did, and the table came apart into rules of one row each, its rows loose lines or
    tables of a few rows), and a link's underline in that column neither."""
    layout = drawn_layout(tmp_path / "report.pdf", _report)
    tables = table_blocks(layout)
    assert len(tables) == 1
    rows = table_rows(tables[0])
    assert [row[0] for row in rows[1:]] == [name for name, _, _ in ROWS]
    assert rows[-1] == ["Total", "32", "1,982"]


def test_a_header_band_of_several_lines_between_two_rules_is_one_row(tmp_path: Path) -> None:
    """The rules under every body row part the rows; the header band between the top rule and the first rule under
    it holds three lines, one row of cells of up to three lines each (read as three rows, the capacity's name was
    cut in three and `Total Annual Expected` stood over an empty row)."""
    layout = drawn_layout(tmp_path / "report.pdf", lambda c: _report(c, prose=False))
    tables = table_blocks(layout)
    assert len(tables) == 1
    rows = table_rows(tables[0])
    assert rows[0] == ["Project Location", "Number of Projects", "Total Annual Expected MW Capacity when Operational"]
    assert rows[1] == ["Australia", "7", "265"]
    assert len(rows) == 1 + len(ROWS)

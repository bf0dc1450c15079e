"""Shading on PDFs made here: filled rectangles are read from the text layer, a ruled table whose header row is shaded
cell by cell (no rule under it) reads that row apart, and a lone shaded box or banner behind text stays text."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

from modelhost.docengine.types import Kind

from .conftest import drawn_layout, drawn_page, table_blocks, table_rows

Draw = Callable[[object], None]

PROSE = (
    "The committee met on the first of the month and reviewed the accounts of the year. Its members agreed that "
    "the reserves were sufficient and that the new rules apply from the start of the next financial year."
)


def _shade(c: object, x: float, top: float, width: float, height: float, grey: float = 0.85) -> None:
    """A filled rectangle without a stroke, `top` measured down from the page's top (A4: 842 points)."""
    c.setFillGray(grey)  # type: ignore[attr-defined]
    c.rect(x, 842 - top - height, width, height, stroke=0, fill=1)  # type: ignore[attr-defined]
    c.setFillGray(0)  # type: ignore[attr-defined]


def _text(c: object, x: float, top: float, text: str, font: str = "Helvetica", size: float = 10) -> None:
    """`text` whose baseline is `top` points down from the page's top."""
    c.setFont(font, size)  # type: ignore[attr-defined]
    c.drawString(x, 842 - top, text)  # type: ignore[attr-defined]


def _prose(c: object, x: float, top: float, lines: int, chars: int = 80) -> None:
    words = (PROSE + " ") * 8
    start = 0
    for n in range(lines):
        end = words.rfind(" ", start, start + chars)
        _text(c, x, top + 12.5 * n, words[start:end])
        start = end + 1


#: A comparison table whose header cells are shaded one by one and whose body has rules between rows and columns,
#: but no rule under the header (the shading's edge parts it from the first row): how normal_4pages draws one.
HEADER = ("Item", "Before the change", "After the change")
BODY = (
    ("Class", "Group one disease", "Grade one disease"),
    ("Basis", "Spread by water or food", "High fatality or outbreaks"),
    ("Code", "No code assigned", "Three codes assigned"),
)


def _shaded_header(c: object, one_band: bool = False) -> None:
    xs = (72.0, 140.0, 300.0, 460.0)
    top, head, row = 200.0, 18.0, 20.0
    if one_band:  # the whole header row as one fill, the table's vertical rules running through it
        _shade(c, xs[0], top, xs[-1] - xs[0], head)
    else:
        for x0, x1 in itertools.pairwise(xs):
            _shade(c, x0, top, x1 - x0, head)
    for k, label in enumerate(HEADER):
        _text(c, xs[k] + 4, top + 13, label)
    bottom = top + head + row * len(BODY)
    c.setLineWidth(0.7)  # type: ignore[attr-defined]
    for x in xs[1:-1]:
        c.line(x, 842 - top, x, 842 - bottom)  # type: ignore[attr-defined]
    for r, cells in enumerate(BODY):
        y = top + head + row * r
        if r:
            c.line(xs[0], 842 - y, xs[-1], 842 - y)  # type: ignore[attr-defined]
        for k, cell in enumerate(cells):
            _text(c, xs[k] + 4, y + 14, cell)
    c.line(xs[0], 842 - bottom, xs[-1], 842 - bottom)  # type: ignore[attr-defined]


def test_filled_rectangles_are_read_and_a_rounded_box_is_none(tmp_path: Path) -> None:
    def draw(c: object) -> None:
        _shade(c, 100, 100, 200, 40)
        c.setFillGray(0.8)  # type: ignore[attr-defined]
        c.roundRect(100, 500, 200, 40, 10, stroke=0, fill=1)  # type: ignore[attr-defined]

    fills = drawn_page(tmp_path / "fills.pdf", draw).fills
    assert [tuple(round(v) for v in box) for box in fills] == [(100, 100, 300, 140)]


def test_a_header_row_shaded_as_one_band_across_the_tables_verticals_is_its_own_row(tmp_path: Path) -> None:
    (table,) = table_blocks(drawn_layout(tmp_path / "band.pdf", lambda c: _shaded_header(c, one_band=True)))
    assert table_rows(table) == [list(HEADER), *map(list, BODY)]


def test_a_header_row_shaded_cell_by_cell_is_its_own_row(tmp_path: Path) -> None:
    (table,) = table_blocks(drawn_layout(tmp_path / "header.pdf", _shaded_header))
    assert table_rows(table) == [list(HEADER), *map(list, BODY)]


def _boxed_note(c: object) -> None:
    # A note in a shaded box, and a section heading on a shaded band: shading behind text, no grid.
    _shade(c, 66, 100, 380, 70)
    _text(c, 72, 116, "Note", "Helvetica-Bold", 12)
    _prose(c, 72, 134, 3)
    _shade(c, 66, 220, 380, 22)
    _text(c, 72, 236, "Background of the review", "Helvetica-Bold", 14)
    _prose(c, 72, 262, 6)


def test_a_shaded_box_and_a_banner_behind_text_stay_text(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "note.pdf", _boxed_note)
    assert not table_blocks(layout)
    kinds = {b.text: b.kind for b in layout.blocks}
    assert kinds["Background of the review"] in (Kind.TITLE, Kind.SECTION_HEADER)
    assert any(k is Kind.TEXT and t.startswith("The committee met") for t, k in kinds.items())

"""Ruled tables on PDFs made here, the classes `tables_dev/` shows: a grid whose cells are set in a monospaced font is
a table (a framed code listing, a box around monospaced lines with no rule inside, stays code)."""

from __future__ import annotations

from pathlib import Path

from modelhost.docengine.analyse import analyse, document_style
from modelhost.docengine.types import Block, Kind, PageLayout

from .conftest import drawn_page

PAGE_TOP = 842.0  # A4 height in points: the tests measure `top` down from the page's top


def _layout(path: Path, draw: object) -> PageLayout:
    content = drawn_page(path, draw)  # type: ignore[arg-type]
    return analyse(content, document_style([content]))


def _text(c: object, x: float, top: float, text: str, font: str = "Helvetica", size: float = 9) -> None:
    c.setFont(font, size)  # type: ignore[attr-defined]
    c.drawString(x, PAGE_TOP - top, text)  # type: ignore[attr-defined]


def _line(c: object, x0: float, top0: float, x1: float, top1: float) -> None:
    c.line(x0, PAGE_TOP - top0, x1, PAGE_TOP - top1)  # type: ignore[attr-defined]


def _tables(layout: PageLayout) -> list[Block]:
    return [b for b in layout.blocks if b.kind is Kind.TABLE]


def _rows(block: Block) -> list[list[str]]:
    assert block.table is not None
    return [[cell.text if cell else "" for cell in row] for row in block.table.grid()]


#: A table of style attributes and their synonyms, ReportLab's user guide's kind: a bold header in Helvetica, every
#: body cell in Courier, a full grid.
SYNONYMS = (
    ("bulletAnchor", "anchor, bulletAnchor, bulletanchor"),
    ("bulletColor", "bulletColor, bulletcolor, color, fg"),
    ("bulletFontName", "bulletFontName, bulletfontname, face, font"),
    ("bulletIndent", "bulletIndent, bulletindent, indent"),
)


def _monospaced_grid(c: object) -> None:
    xs, top, row = (100.0, 200.0, 420.0), 100.0, 16.0
    _text(c, xs[0] + 4, top + 12, "Attribute", "Helvetica-Bold", 10)
    _text(c, xs[1] + 4, top + 12, "Synonyms", "Helvetica-Bold", 10)
    for r, (name, synonyms) in enumerate(SYNONYMS, start=1):
        _text(c, xs[0] + 4, top + r * row + 12, name, "Courier", 8)
        _text(c, xs[1] + 4, top + r * row + 12, synonyms, "Courier", 8)
    bottom = top + row * (len(SYNONYMS) + 1)
    for r in range(len(SYNONYMS) + 2):
        _line(c, xs[0], top + r * row, xs[-1], top + r * row)
    for x in xs:
        _line(c, x, top, x, bottom)


def _framed_listing(c: object) -> None:
    lines = ("def total(rows):", "    out = 0", "    for row in rows:", "        out += row.amount", "    return out")
    for k, text in enumerate(lines):
        _text(c, 110, 412 + 12 * k, text, "Courier", 9)
    c.rect(100, PAGE_TOP - 470, 300, 70, stroke=1, fill=0)  # type: ignore[attr-defined]


def test_a_grid_of_monospaced_cells_is_a_table_and_a_framed_listing_is_code(tmp_path: Path) -> None:
    def draw(c: object) -> None:
        _monospaced_grid(c)
        _framed_listing(c)

    layout = _layout(tmp_path / "mono.pdf", draw)
    tables = _tables(layout)
    assert len(tables) == 1, [b.kind for b in layout.blocks]
    assert _rows(tables[0]) == [["Attribute", "Synonyms"], *[list(r) for r in SYNONYMS]]
    code = [b for b in layout.blocks if b.kind is Kind.CODE]
    assert len(code) == 1 and "out += row.amount" in code[0].text

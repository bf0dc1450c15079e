"""Rules drawn as short pieces stroked wide, on PDFs made here: some typesetters (the IRS's tax tables) draw a table's
vertical rules as horizontal pieces half a point long, each stroked as wide as the rule is tall, with butt caps. The
paint is an upright bar: a vertical rule, which the table's column groups are parted by."""

from __future__ import annotations

from pathlib import Path

from modelhost.docengine.analyse import analyse, document_style
from modelhost.docengine.types import Kind, PageContent

from .conftest import drawn_page

#: The table: a stub of labels and two groups of two columns of figures, each group under its label.
GROUPS = ("Single", "Married")
ROWS = (
    ("At least", "Less than", "Tax", "Rate", "Tax", "Rate"),
    ("95,000", "95,050", "20,718", "0.28", "21,103", "0.33"),
    ("95,050", "95,100", "20,732", "0.28", "21,117", "0.33"),
    ("95,100", "95,150", "20,746", "0.28", "21,131", "0.33"),
    ("95,150", "95,200", "20,760", "0.28", "21,145", "0.33"),
    ("95,200", "95,250", "20,774", "0.28", "21,159", "0.33"),
)
#: The columns' right edges, and the x of the rules: the table's sides and one between each two groups.
RIGHTS = (110, 170, 240, 290, 360, 410)
RULES = (60, 185, 305, 425)
TOP, BOTTOM = 760.0, 650.0


def _table(c: object, cap: int = 0) -> None:
    """The table with horizontal rules over and under its header and under its body, and its vertical rules drawn as
    pieces 0.5 point long stroked `TOP - BOTTOM` wide with line cap `cap` (0: butt, 2: projecting square)."""
    c.setFont("Helvetica", 8)  # type: ignore[attr-defined]
    for g, label in enumerate(GROUPS):
        c.drawCentredString((RULES[g + 1] + RULES[g + 2]) / 2, TOP - 12, label)  # type: ignore[attr-defined]
    for r, row in enumerate(ROWS):
        for x, text in zip(RIGHTS, row, strict=True):
            c.drawRightString(x, TOP - 24 - 12 * r, text)  # type: ignore[attr-defined]
    c.setLineWidth(0.5)  # type: ignore[attr-defined]
    for y in (TOP, TOP - 28, BOTTOM):
        c.line(RULES[0], y, RULES[-1], y)  # type: ignore[attr-defined]
    c.setLineCap(cap)  # type: ignore[attr-defined]
    c.setLineWidth(TOP - BOTTOM)  # type: ignore[attr-defined]
    for x in RULES:
        c.line(x - 0.25, (TOP + BOTTOM) / 2, x + 0.25, (TOP + BOTTOM) / 2)  # type: ignore[attr-defined]


def _uprights(content: PageContent) -> list[tuple[float, float]]:
    return sorted((round(r.x0), round(r.y1 - r.y0)) for r in content.rulings if not r.horizontal)


def test_a_short_piece_stroked_wide_paints_a_vertical_rule_with_butt_caps_only(tmp_path: Path) -> None:
    content = drawn_page(tmp_path / "bars.pdf", _table)
    # each piece paints a bar 0.5 point wide and as tall as its stroke is wide (at the parent: no vertical rule)
    assert _uprights(content) == [(x, round(TOP - BOTTOM)) for x in RULES]
    (table,) = [b for b in analyse(content, document_style([content])).blocks if b.kind is Kind.TABLE]
    assert table.table is not None
    rows = [[cell.text if cell else "" for cell in row] for row in table.table.grid()]
    # the rules part the groups: each group's label spans its two columns only, every figure a cell of its own
    assert rows[0] == ["", "", "Single", "Single", "Married", "Married"]
    assert rows[1:] == [list(row) for row in ROWS]
    # a square cap reaches half the width past each end: the paint is a square as wide as it is tall, no rule
    assert _uprights(drawn_page(tmp_path / "squares.pdf", lambda c: _table(c, cap=2))) == []

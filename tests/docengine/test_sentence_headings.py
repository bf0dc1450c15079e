"""A sentence is no heading (issue 34 point 3: headings from evidence).

On a page that is mostly a table set in small type, the cells' size is the body size, so a plain sentence set at
the document's ordinary text size under the table (a note, a remark on the figures) stood "clearly larger than the
body" and came out as a `#` heading. A reader takes it for text: it reads as a sentence (capitalised, several
words, a full stop) and bears no heading's cue but its size (not bold, no number). Controls: the heading over the
table, set in bold, and a short plain title line larger than the cells stay headings.
"""

from __future__ import annotations

from pathlib import Path

from modelhost.docengine.analyse import analyse, document_style
from modelhost.docengine.types import Kind, PageLayout

from .conftest import drawn_page

NOTE = "The figures for the last quarter were revised after the annual audit."
QUESTION = "Why did the northern region report fewer sales this year?"


def _table_page(c: object, sentence: str = NOTE) -> None:
    """A bold 12-point heading, a plain 12-point line, a ruled grid of 8-point cells, then one 10-point sentence (one
    only: two lines of prose would set the body at 10 points) and the table's 8-point source lines under it."""
    c.setFont("Helvetica-Bold", 12)  # type: ignore[attr-defined]
    c.drawString(72, 760, "Regional Sales")  # type: ignore[attr-defined]
    c.setFont("Helvetica", 12)  # type: ignore[attr-defined]
    c.drawString(72, 740, "Quarterly Figures")  # type: ignore[attr-defined]
    cols = [72, 172, 262, 352, 442, 532]
    rows = 24
    top = 720
    c.setFont("Helvetica", 8)  # type: ignore[attr-defined]
    regions = ["North", "South", "East", "West"]
    for r in range(rows + 1):
        c.line(cols[0], top - r * 14, cols[-1], top - r * 14)  # type: ignore[attr-defined]
    for x in cols:
        c.line(x, top, x, top - rows * 14)  # type: ignore[attr-defined]
    head = ["Region", "Q1 units", "Q2 units", "Q3 units", "Q4 units"]
    for r in range(rows):
        cells = head if r == 0 else [f"{regions[r % 4]} {r}"] + [f"{(r * 37 + k * 11) % 900 + 100}" for k in range(4)]
        for x, cell in zip(cols, cells, strict=False):
            c.drawString(x + 4, top - r * 14 - 10, cell)  # type: ignore[attr-defined]
    c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
    y = top - rows * 14 - 30
    c.drawString(72, y, sentence)  # type: ignore[attr-defined]
    c.setFont("Helvetica", 8)  # type: ignore[attr-defined]
    for k, line in enumerate(("Source: regional offices, unaudited returns", "Units in thousands")):
        c.drawString(72, y - 24 - k * 11, line)  # type: ignore[attr-defined]


def _layout(path: Path, sentence: str = NOTE) -> PageLayout:
    content = drawn_page(path, lambda c: _table_page(c, sentence))
    return analyse(content, document_style([content]))


def test_a_plain_sentence_under_a_small_type_table_is_text(tmp_path: Path) -> None:
    for sentence in (NOTE, QUESTION):
        layout = _layout(tmp_path / "table.pdf", sentence)
        kinds = {b.text: b.kind for b in layout.blocks}
        assert kinds.get(sentence) is Kind.TEXT, sentence


def test_headings_over_the_table_stay(tmp_path: Path) -> None:
    layout = _layout(tmp_path / "table.pdf")
    headings = [b.text for b in layout.blocks if b.kind in (Kind.SECTION_HEADER, Kind.TITLE)]
    assert "Regional Sales" in headings
    assert "Quarterly Figures" in headings

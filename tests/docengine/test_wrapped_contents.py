"""A table of contents whose entry wraps onto a second line stays one table, the entry one row (leaders._wraps).

Found in a sweep of real documents (a library's reference manual: "1.4.3 glp read ccdata - read graph from text file
in DIMACS clique/coloring" over "format . . . . 12"): LaTeX wraps a long entry under its title and sets the leaders and
the page number on the last line only; the first line, with no leaders, broke the run, and the contents came out as
two tables with a line of text between them and the entry's end in the second table.
Control: a line of text under a table of contents, followed by no leader line, stays text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.types import Kind

from .conftest import document_layouts

pytest.importorskip("reportlab")

ENTRIES = [
    ("1.4.1", "glp_read_graph: read graph from text file", "12", ""),
    ("1.4.2", "glp_write_graph: write graph to text file", "12", ""),
    ("1.4.3", "glp_read_ccdata: read graph from text file in DIMACS clique and coloring", "12", "format"),
    ("1.4.4", "glp_write_ccdata: write graph to text file in DIMACS clique and coloring", "15", "format"),
    ("1.5.1", "glp_weak_comp: find all weakly connected components", "16", ""),
    ("1.5.2", "glp_strong_comp: find all strongly connected components", "16", ""),
]


def _contents(tmp_path: Path, after: str) -> Path:
    from reportlab.pdfgen import canvas

    path = tmp_path / "contents.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("Times-Bold", 16)
    c.drawString(72, 760, "Contents")
    c.setFont("Times-Roman", 10)
    y = 730.0
    for number, title, page, wrapped in ENTRIES:
        c.drawString(90, y, number)
        last = title
        if wrapped:  # the title on a line of its own, its last word with the leaders on the next
            c.drawString(120, y, title)
            y -= 12
            last = wrapped
        width = c.stringWidth(last, "Times-Roman", 10)
        dots = " ".join(["."] * int((500 - 120 - width - 20) / c.stringWidth(". ", "Times-Roman", 10)))
        c.drawString(120, y, f"{last} {dots}")
        c.drawRightString(523, y, page)
        y -= 12
    if after:
        c.drawString(72, y - 20, after)
    c.showPage()
    c.save()
    return path


def test_a_wrapped_entry_is_one_row_of_one_table(tmp_path: Path) -> None:
    (layout,) = document_layouts(_contents(tmp_path, ""))
    tables = [b.table for b in layout.blocks if b.kind is Kind.TABLE]
    assert len(tables) == 1 and tables[0] is not None
    rows = {c.row: c.text for c in tables[0].cells if c.col == 0}
    pages = {c.row: c.text for c in tables[0].cells if c.col == 1}
    assert len(rows) == len(ENTRIES)
    wrapped = next(r for r, text in rows.items() if "glp_read_ccdata" in text)
    assert "clique and coloring format" in rows[wrapped] and pages[wrapped] == "12"


def test_a_line_of_text_under_contents_stays_text(tmp_path: Path) -> None:
    (layout,) = document_layouts(_contents(tmp_path, "The routines are described in the order of this list."))
    text = " ".join(b.text for b in layout.blocks if b.kind is not Kind.TABLE)
    assert "The routines are described in the order of this list." in text

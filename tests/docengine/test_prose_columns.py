"""Two columns of text too short for the page's gutters are text, never a table (analyse._apart, order._gutter_sides).

Found in a sweep of real documents (a package's manual whose first page sets its table of contents beside the
abstract; a journal class's change history in two columns): each column is a few lines, too short for the page's
gutter finder, so the table finder without rules took the two columns for a table's. Its "rows" are two streams of
lines at their own leading, meeting at no common baseline; a table's rows share theirs. Controls: a two-column table
of short cells and a table with a wrapped cell stay tables.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.types import Kind

from .conftest import document_layouts

pytest.importorskip("reportlab")

ABSTRACT = (
    "This package implements the layout requirements for the transactions of a learned society, covering its "
    "journals on energy conversion, power delivery and power systems, and its special publications. Discussions "
    "and closures can also be generated in the required form. This document describes the package's version four, "
    "and thanks are due to the colleagues who read an early version of the documentation with great care."
)
ENTRIES = ["Introduction", "Installation", "Changes", "Options", "Structure", "Paper Sizes", "Fonts", "Figures"]


def _wrap(c: object, text: str, font: str, size: float, width: float) -> list[str]:
    out, line = [], ""
    for word in text.split():
        if line and c.stringWidth(f"{line} {word}", font, size) > width:  # type: ignore[attr-defined]
            out.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*out, line]


def _page(tmp_path: Path, draw: object) -> list[object]:
    from reportlab.pdfgen import canvas

    path = tmp_path / "page.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("Times-Bold", 16)
    c.drawCentredString(297, 780, "A Package for Transactions Papers")
    draw(c)  # type: ignore[operator]
    c.showPage()
    c.save()
    (layout,) = document_layouts(path)
    return list(layout.blocks)


def _contents_beside_abstract(c: object) -> None:
    c.setFont("Times-Bold", 12)  # type: ignore[attr-defined]
    c.drawString(60, 720, "Contents")  # type: ignore[attr-defined]
    c.drawString(300, 720, "Abstract")  # type: ignore[attr-defined]
    for k, title in enumerate(ENTRIES):
        y = 696 - 24 * k  # the contents at their own leading: a blank line between entries
        c.setFont("Times-Bold", 10)  # type: ignore[attr-defined]
        c.drawString(60, y, str(k + 1))  # type: ignore[attr-defined]
        c.drawString(76, y, title)  # type: ignore[attr-defined]
        c.drawRightString(270, y, str(1 + k // 3))  # type: ignore[attr-defined]
    for k, line in enumerate(_wrap(c, ABSTRACT, "Times-Roman", 10, 230)):
        c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
        c.drawString(300, 699 - 11.5 * k, line)  # type: ignore[attr-defined]


def test_contents_beside_an_abstract_are_text_read_column_by_column(tmp_path: Path) -> None:
    blocks = _page(tmp_path, _contents_beside_abstract)
    cells = " ".join(c.text for b in blocks if b.table is not None for c in b.table.cells)
    assert "package" not in cells and "Discussions" not in cells  # (the contents alone may read as a table)
    text = " ".join(b.text or " ".join(c.text for c in b.table.cells) if b.table else b.text for b in blocks)
    # the abstract read whole, after the contents, never interleaved with the entries
    assert "Discussions and closures can also be generated in the required form." in text
    assert "its journals on energy conversion, power delivery and power systems, and its special" in text
    assert text.index("Introduction") < text.index("This package implements")


def test_a_two_column_table_of_short_cells_stays_a_table(tmp_path: Path) -> None:
    def draw(c: object) -> None:
        c.setFont("Times-Bold", 10)  # type: ignore[attr-defined]
        c.drawString(100, 700, "Option")  # type: ignore[attr-defined]
        c.drawString(300, 700, "Default")  # type: ignore[attr-defined]
        c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
        for k, (name, value) in enumerate(
            [("draft", "off"), ("final", "on"), ("twocolumn", "on"), ("letterpaper", "off"), ("fleqn", "off")]
        ):
            c.drawString(100, 686 - 14 * k, name)  # type: ignore[attr-defined]
            c.drawString(300, 686 - 14 * k, value)  # type: ignore[attr-defined]

    tables = [b.table for b in _page(tmp_path, draw) if b.kind is Kind.TABLE]
    assert len(tables) == 1 and tables[0] is not None and tables[0].cols == 2


def test_a_table_with_a_wrapped_cell_stays_a_table(tmp_path: Path) -> None:
    rows = [
        ("draft", "off", "Marks overfull lines with a black box in the margin so that they can be found and mended"),
        ("final", "on", "Sets the paper as printed"),
        ("twocolumn", "on", "Two columns a page"),
        ("fleqn", "off", "Equations flush left"),
    ]

    def draw(c: object) -> None:
        c.setFont("Times-Bold", 10)  # type: ignore[attr-defined]
        for x, head in ((80, "Option"), (180, "Default"), (260, "Effect")):
            c.drawString(x, 700, head)  # type: ignore[attr-defined]
        c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
        y = 686.0
        for name, value, effect in rows:
            c.drawString(80, y, name)  # type: ignore[attr-defined]
            c.drawString(180, y, value)  # type: ignore[attr-defined]
            for line in _wrap(c, effect, "Times-Roman", 10, 220):
                c.drawString(260, y, line)  # type: ignore[attr-defined]
                y -= 12

    tables = [b.table for b in _page(tmp_path, draw) if b.kind is Kind.TABLE]
    assert len(tables) == 1 and tables[0] is not None and tables[0].cols == 3


PROSE = (
    "The running time of this algorithm is set by many parameters, including the degree of the polynomial, the "
    "sieving region and, most importantly, the smoothness bound. Early articles encountered technical difficulties "
    "with the descent and reported that the complexity of this step would equal that of the precomputation; this may "
    "have contributed to misconceptions about the performance of the method. More recent analyses have improved the "
    "complexity of the descent, and the numerous parameters of the algorithm allow some flexibility to reduce time on "
    "some steps at the expense of others."
)
PRIMES = [
    ("Apache", "82%", ["9fdb8b8a004544f0045f1737d0ba2e0b", "274cdf1a9f588218fb435316a16e3741"]),
    ("mod_ssl", "10%", ["d4bcd52406f69b35994b88de5db89682", "c8157f62d8f33633ee5772f11f05ab22"]),
    ("nginx", "5%", ["48976f76795094e71e7903529f5a824b", "80a3030c6e4c3757d08f70e6aa871033"]),
    ("(others)", "3%", ["(463 distinct primes)"]),
]


def _table_beside_prose(c: object) -> None:
    # A paper's two columns: prose at 9 pt on the left; at the top of the right column a table set smaller (8 pt,
    # its keys in a typewriter face), each row's second key line under its first.
    c.setFont("Times-Roman", 9)  # type: ignore[attr-defined]
    for k, line in enumerate(_wrap(c, PROSE, "Times-Roman", 9, 236)):
        c.drawString(54, 740 - 10.5 * k, line)  # type: ignore[attr-defined]
    c.setFont("Times-Roman", 8)  # type: ignore[attr-defined]
    for x, head in ((322, "Source"), (366, "Popularity"), (414, "Prime")):
        c.drawString(x, 740, head)  # type: ignore[attr-defined]
    y = 727.0
    for name, share, keys in PRIMES:
        c.setFont("Times-Roman", 8)  # type: ignore[attr-defined]
        c.drawString(322, y, name)  # type: ignore[attr-defined]
        c.drawString(366, y, share)  # type: ignore[attr-defined]
        for key in keys:
            c.setFont("Courier" if key[0] != "(" else "Times-Roman", 8)  # type: ignore[attr-defined]
            c.drawString(414, y, key)  # type: ignore[attr-defined]
            y -= 9.5


def test_a_table_at_the_top_of_a_column_beside_prose_leaves_the_prose_out(tmp_path: Path) -> None:
    # The table finder without rules took the left column's lines for a first column of the table beside them
    # ("The running time of this algorithm is | Source | Popularity | Prime"): both sides meet in rows at no common
    # size, a table's row is set in one type. The gutter between them parts the prose from the table, which is
    # then found in its own column.
    blocks = _page(tmp_path, _table_beside_prose)
    tables = [b.table for b in blocks if b.table is not None]
    assert len(tables) == 1
    cells = [c.text for c in tables[0].cells]
    assert "Apache" in cells and "mod_ssl" in cells and "82%" in cells
    assert not any("running" in t or "parameters" in t for t in cells)
    text = " ".join(b.text for b in blocks if b.table is None)
    assert "the sieving region and, most importantly, the smoothness bound. Early articles" in text

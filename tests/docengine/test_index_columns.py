"""A back-of-book index set in two columns with dot leaders (analyse._by_column, classify._leaders).

Found in a sweep of real documents (texinfo manuals' concept indexes): the leader lines were read straight across the
gutter, so one "entry" held an entry of each column, its page numbers running into the next column's entry
("Encodings .... 4, 6 Relational databases .... 17"); and lines whose dots are set in the math italic font (as TeX
and texinfo set leaders) were read as display formulas. Each page is drawn here with reportlab.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.classify import Style, classify
from modelhost.docengine.lines import Piece
from modelhost.docengine.types import Kind, Word

from .conftest import document_layouts

pytest.importorskip("reportlab")

Groups = list[tuple[str, list[tuple[str, str]]]]

LEFT: Groups = [
    ("A", [("awk", "3"), ("Arrays", "12"), ("Attributes", "14")]),
    ("B", [("Binary files", "24"), ("Batch mode", "31"), ("Bytes", "29")]),
    ("C", [("Comma separated values", "5"), ("Compressed files", "26"), ("Connections", "27"), ("CSV files", "10")]),
    ("D", [("Data frames", "11"), ("dBase", "24"), ("DBF files", "21"), ("DBMS", "17")]),
]
RIGHT: Groups = [
    ("N", [("Network Common Data Form", "24"), ("Names", "8"), ("Numbers", "9")]),
    ("O", [("Octave", "16"), ("ODBC", "17"), ("Open Database Connectivity", "21")]),
    ("P", [("Perl", "3"), ("Pipe connections", "26"), ("PostgreSQL", "22"), ("Pushback", "28")]),
    ("R", [("Re-shaping data", "12"), ("Relational databases", "17"), ("Regular files", "19"), ("Rows", "7")]),
]


def _index_page(tmp_path: Path, left_groups: Groups = LEFT, right_groups: Groups = RIGHT) -> Path:
    from reportlab.pdfgen import canvas

    path = tmp_path / "index.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("Times-Bold", 16)
    c.drawString(72, 770, "Concept index")
    for left, groups in ((72, left_groups), (318, right_groups)):
        y = 740.0
        for letter, entries in groups:
            c.setFont("Times-Bold", 12)
            c.drawString(left, y, letter)
            y -= 16
            c.setFont("Times-Roman", 9)
            for name, page in entries:
                c.drawString(left, y, name)
                x = left + c.stringWidth(name, "Times-Roman", 9) + 6
                while x < left + 190:
                    c.drawString(x, y, ".")
                    x += 4.1
                c.drawRightString(left + 205, y, page)
                y -= 11
            y -= 12
    c.showPage()
    c.save()
    return path


def test_a_two_column_index_is_read_column_by_column(tmp_path: Path) -> None:
    (layout,) = document_layouts(_index_page(tmp_path))
    lefts = {name for _, entries in LEFT for name, _ in entries}
    rights = {name for _, entries in RIGHT for name, _ in entries}
    texts = [b.text for b in layout.blocks] + [
        cell.text for b in layout.blocks if b.table is not None for cell in b.table.cells
    ]
    for text in texts:
        assert not (any(n in text for n in lefts) and any(n in text for n in rights)), text
    for name in lefts | rights:
        assert any(name in t for t in texts), name


def test_leader_dots_in_a_math_font_make_no_formula() -> None:
    """An index's lines whose leader dots are set in math italic (TeX's \\dotfill, texinfo's index) are text."""
    pieces = []
    for k, (name, page) in enumerate([("Encodings", "4, 6"), ("EpiData", "15"), ("Exporting to a text file", "4")]):
        y = 100.0 + 11 * k
        words = [
            Word(part, (72.0 + 40 * j, y, 110.0 + 40 * j, y + 9), font="CMR9", size=9.0)
            for j, part in enumerate(name.split())
        ]
        dots = [
            Word(".", (200.0 + 4 * j, y, 202.0 + 4 * j, y + 9), font="CMMI9", size=9.0, math=True) for j in range(20)
        ]
        number = [Word(page, (290.0, y, 300.0, y + 9), font="CMR9", size=9.0)]
        pieces.append(Piece(tuple(words + dots + number)))
    block = classify(pieces, Style(body_size=10.0), 5, 842.0)
    assert block.kind is not Kind.FORMULA


def test_an_index_is_no_table_of_contents(tmp_path: Path) -> None:
    """Leader lines whose page numbers go down ("Batch mode .... 31" over "Bytes .... 29": the entries in the
    alphabet's order, not the book's) on a page with entries of several pages ("4, 6", "17–19") are an index's:
    text, not tables of contents (a sweep's package manuals' indexes came out as dozens of small tables, broken
    wherever an entry has several pages)."""
    several = [
        (letter, [*entries, (f"{letter} files", "4, 6"), (f"{letter} tables", "17–19")]) for letter, entries in LEFT
    ]
    (layout,) = document_layouts(_index_page(tmp_path, several, RIGHT))
    assert not [b for b in layout.blocks if b.kind is Kind.TABLE]
    text = " ".join(b.text for b in layout.blocks)
    for name in ("Batch mode", "Bytes", "Open Database Connectivity", "Rows"):
        assert name in text

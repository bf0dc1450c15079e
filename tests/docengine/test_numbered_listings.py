"""Code listings with line numbers are code, never tables (analyse._numbered_listing, textlayer._fixed_pitch).

Found in a sweep of real documents (LaTeX packages' documented sources, whose code is numbered line by line): the
line numbers stand in a column of figures and the code's own aligned values in columns beside them, which the
unruled-table finder read as tables of figures. Two ways in: line numbers set in the text face beside a typewriter
face, and line numbers set smaller than the code in the same typewriter face, whose font declares no fixed pitch
(the page's typewriter face was then taken for a proportional one: its advances differ in points, not in ems).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.textlayer import _fixed_pitch
from modelhost.docengine.types import Kind, Word

from .conftest import document_layouts, wrapped_prose

pytest.importorskip("reportlab")

CODE = [
    ("\\parsep", "4pt"),
    ("\\itemsep", "0pt"),
    ("\\topsep", "6pt"),
    ("\\partopsep", "0pt"),
    ("\\leftmargin", "12pt"),
    ("\\labelsep", "5pt"),
]
PROSE = (
    "The list parameters are set once for the whole document, and each of them is named again in the code that "
    "follows, where the values chosen for the printed proceedings are given one to a line. "
)


def _listing_page(tmp_path: Path, numbers_font: str) -> Path:
    from reportlab.pdfgen import canvas

    path = tmp_path / "listing.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("Times-Roman", 10)
    wrapped_prose(c, PROSE * 3, 760)
    for k, (name, value) in enumerate(CODE):
        y = 680 - 12 * k
        c.setFont(numbers_font, 7)
        c.drawRightString(96, y, str(54 + k))
        c.setFont("Courier", 9)
        c.drawString(108, y, name)
        c.drawString(180, y, value)
    c.showPage()
    c.save()
    return path


def test_a_listing_numbered_in_the_text_face_is_code_not_a_table(tmp_path: Path) -> None:
    (layout,) = document_layouts(_listing_page(tmp_path, "Times-Roman"))
    assert [b.table for b in layout.blocks if b.kind is Kind.TABLE] == []
    text = " ".join(b.text for b in layout.blocks)
    assert "\\partopsep" in text and "12pt" in text


def test_a_table_numbered_by_rows_stays_a_table(tmp_path: Path) -> None:
    """Row numbers beside names and figures in a text face: a table (the listing's test with a text face for all)."""
    from reportlab.pdfgen import canvas

    path = tmp_path / "table.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("Times-Bold", 10)
    for x, head in ((72, "No."), (110, "Station"), (260, "Rain (mm)"), (360, "Days")):
        c.drawString(x, 700, head)
    c.setFont("Times-Roman", 10)
    for k, (name, rain, days) in enumerate(
        [
            ("Aberdeen", "812.4", "154"),
            ("Bergen", "2250.1", "231"),
            ("Cork", "1207.9", "191"),
            ("Dover", "745.0", "130"),
        ]
    ):
        y = 686 - 12 * k
        c.drawString(72, y, str(k + 1))
        c.drawString(110, y, name)
        c.drawRightString(300, y, rain)
        c.drawRightString(385, y, days)
    c.showPage()
    c.save()
    (layout,) = document_layouts(path)
    tables = [b.table for b in layout.blocks if b.kind is Kind.TABLE]
    assert len(tables) == 1 and tables[0] is not None and tables[0].rows == 5


def test_a_typewriter_face_set_at_two_sizes_is_monospace() -> None:
    """A face declaring no fixed pitch whose every character advances 0.6 em, at 7 and at 9 points: monospace."""
    texts = ["\\parsep", "\\itemsep", "{}}%", "\\def\\x{y}", "\\topsep", "1461", "1462", "1463", "1464"]
    words = []
    for k, text in enumerate(texts):
        size = 7.0 if text.isdigit() else 9.0
        width = 0.6 * size * len(text)
        words.append(Word(text, (100.0, 12.0 * k, 100.0 + width, 12.0 * k + size), font="newtxtt", size=size))
    assert all(w.monospace for w in _fixed_pitch(words))
    # A proportional face at two sizes stays proportional: its letters' advances differ in ems too.
    prose = [
        Word(
            t, (0.0, 0.0, s * sum(0.28 if c in "ilt" else 0.5 if c in "aeo" else 0.75 for c in t), s), font="t", size=s
        )
        for t, s in (("illicit", 9.0), ("momentum", 9.0), ("little", 7.0), ("women", 7.0), ("title", 9.0))
    ]
    assert not any(w.monospace for w in _fixed_pitch(prose))

"""A table's caption where the page prints it: under the table (an office report's `Table 1. ...` over its `Source:`
line, as LibreOffice Writer exports `tests/corpus/documents/tables_dev/writer2_unicode_report.pdf`) or over it.

docling writes a table's linked caption before the table's rows, so a caption set under a table and linked to it was
written above it. The pages are drawn here with reportlab: a ruled grid between paragraphs, its caption under it or
over it, and two tables one under the other, the first with its caption under it.
"""

from __future__ import annotations

from pathlib import Path

from modelhost.docengine.emit import markdown
from modelhost.docengine.types import Kind

from .conftest import first_page_layout, table_blocks

#: A4, in points.
WIDTH, HEIGHT = 595.0, 842.0
MARGIN = 72.0
ROW_HEIGHT = 16.0

INTRO = "Every code point has one general category, and the first letter of its code names its class."
AFTER = "Separators are the fewest of all the classes, and the letters are the most of the assigned ones."
SOURCE = "Source: the character database of the standard, counted over the whole code space."


def _rows(tag: str) -> list[tuple[str, str, str]]:
    return [("Class", "Categories", "Code points")] + [
        (f"{tag}class {i}", f"C{i}a, C{i}b", f"{1000 + 37 * i:,}") for i in range(5)
    ]


def _page(path: Path, tables: list[tuple[str, str, str]]) -> None:
    """Paragraphs and ruled tables down the page: `tables` holds (row tag, caption, "under" or "over") each."""
    from reportlab.pdfgen.canvas import Canvas

    canvas = Canvas(str(path), pagesize=(WIDTH, HEIGHT))
    canvas.setFont("Helvetica-Bold", 18)
    canvas.drawString(MARGIN, HEIGHT - 80, "Code points by class")
    canvas.setFont("Times-Roman", 11)
    canvas.drawString(MARGIN, HEIGHT - 110, INTRO)
    y = HEIGHT - 140
    widths = (120.0, 160.0, 100.0)
    for tag, caption, side in tables:
        if side == "over":
            canvas.setFont("Times-Italic", 10)
            canvas.drawString(MARGIN, y - 10, caption)
            y -= 18
        canvas.setLineWidth(0.5)
        for r, row in enumerate(_rows(tag)):
            x = MARGIN
            canvas.setFont("Times-Bold" if r == 0 else "Times-Roman", 10)
            for w, cell in zip(widths, row, strict=True):
                canvas.rect(x, y - ROW_HEIGHT, w, ROW_HEIGHT)
                canvas.drawString(x + 3, y - ROW_HEIGHT + 4, cell)
                x += w
            y -= ROW_HEIGHT
        if side == "under":
            canvas.setFont("Times-Italic", 10)
            canvas.drawString(MARGIN, y - 14, caption)
            canvas.setFont("Times-Roman", 9)
            canvas.drawString(MARGIN, y - 27, SOURCE)
            y -= 27
        y -= 40
    canvas.setFont("Times-Roman", 11)
    canvas.drawString(MARGIN, y, AFTER)
    canvas.save()


def test_a_caption_under_its_table_is_written_after_the_table(tmp_path: Path) -> None:
    path = tmp_path / "under.pdf"
    caption = "Table 1. Code points by class of general category"
    _page(path, [("", caption, "under")])
    layout = first_page_layout(path)
    assert len(table_blocks(layout)) == 1
    md = markdown([layout])
    table, at = md.find("| Class"), md.find(caption)
    assert 0 <= md.find(INTRO) < table < at < md.find(SOURCE) < md.find(AFTER), md


def test_a_caption_over_its_table_stays_its_caption_before_it(tmp_path: Path) -> None:
    path = tmp_path / "over.pdf"
    caption = "Table 1. Code points by class of general category"
    _page(path, [("", caption, "over")])
    layout = first_page_layout(path)
    (table,) = table_blocks(layout)
    assert table.caption >= 0 and layout.blocks[table.caption].text == caption
    md = markdown([layout])
    assert 0 <= md.find(caption) < md.find("| Class"), md


def test_a_caption_under_a_table_is_not_the_next_tables_caption(tmp_path: Path) -> None:
    # Two tables one under the other, the first's caption set under it, closer to it than to the second table: the
    # second must not take it for a caption over it (and write it before its own rows).
    path = tmp_path / "two.pdf"
    first = "Table 1. Code points of the first plane by class"
    _page(path, [("A", first, "under"), ("B", "Table 2. Code points of the other planes", "over")])
    layout = first_page_layout(path)
    tables = table_blocks(layout)
    assert len(tables) == 2
    captions = [layout.blocks[t.caption].text if t.caption >= 0 else None for t in tables]
    assert captions == [None, "Table 2. Code points of the other planes"]
    assert [b.text for b in layout.blocks if b.kind is Kind.CAPTION] == [
        first,
        "Table 2. Code points of the other planes",
    ]
    md = markdown([layout])
    assert md.find("| Aclass 0") < md.find(first) < md.find("Table 2.") < md.find("| Bclass 0"), md

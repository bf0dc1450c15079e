"""Tables in a report's frame on PDFs made here: a weekly price report's page frame holding a price table beside a
column of framed charts, the table ruled only under its header and under each group's bold label (no vertical rule
but the frame's and the one between the table and the charts), labels indented under their group, price ranges and
figures flush right; and cells whose symbols carry subscripts set against their letters."""

from __future__ import annotations

from pathlib import Path

from modelhost.docengine.analyse import analyse, document_style
from modelhost.docengine.types import Kind

from .conftest import drawn_page, table_rows

HEADER = ("This Week", "Last Week", "Year Ago")
#: Groups of rows: a bold label (one longer than the label column is wide, running past where the first column of
#: figures starts) over indented labels and their three prices.
GROUPS = (
    (
        "Ethanol ($/gal)",
        (
            ("Iowa", "1.27 - 1.42", "1.14 - 1.30", "1.42 - 1.60"),
            ("Minnesota", "unq", "1.14", "1.37 - 1.40"),
            ("Nebraska", "1.23 - 1.42", "1.16 - 1.39", "1.35 - 1.57"),
            ("South Dakota", "unq", "1.13", "1.28"),
        ),
    ),
    (
        "Crude Soybean Oil (cents/lb)",
        (
            ("Central Illinois", "32.94 - 33.69", "26.67 - 26.97", "28.48 - 28.88"),
            ("Indiana/Ohio", "33.19 - 33.62", "26.67 - 28.42", "28.38 - 30.13"),
        ),
    ),
    (
        "Inedible Packer Bleachable Tallow ($/cwt)",
        (("Chicago", "unq", "unq", "27.50"),),
    ),
    (
        "Yellow Grease ($/cwt)",
        (
            ("Central U.S.", "25.25", "unq", "22.00"),
            ("Minneapolis", "21.00 - 26.00", "15.00 - 19.00", "22.00 - 25.00"),
            ("Los Angeles", "25.50 - 29.00", "24.50 - 29.50", "24.50 - 27.50"),
        ),
    ),
)
#: The frame, the rule between the table and the charts, and the table's column right edges (points).
LEFT, TOP, RIGHT, BOTTOM, DIVIDER = 30.0, 800.0, 565.0, 430.0, 400.0
FIGURES = (250.0, 320.0, 390.0)
PITCH = 13.0


def _chart(c: object, x0: float, y0: float, x1: float, y1: float, title: str) -> None:
    """A framed line chart: its box touching the rule beside the table, a title, a plot area ruled by grid lines
    with tick labels left of it, and a curve."""
    c.setLineWidth(0.3)  # type: ignore[attr-defined]
    c.rect(x0, y0, x1 - x0, y1 - y0)  # type: ignore[attr-defined]
    c.setFont("Times-Bold", 8)  # type: ignore[attr-defined]
    c.drawCentredString((x0 + x1) / 2, y1 - 12, title)  # type: ignore[attr-defined]
    px0, py0, px1, py1 = x0 + 34, y0 + 22, x1 - 10, y1 - 20
    c.setFont("Times-Roman", 6)  # type: ignore[attr-defined]
    for k in range(6):
        y = py0 + k * (py1 - py0) / 5
        c.line(px0, y, px1, y)  # type: ignore[attr-defined]
        c.drawRightString(px0 - 4, y - 2, f"{1.0 + 0.1 * k:.2f}")  # type: ignore[attr-defined]
    c.line(px0, py0, px0, py1)  # type: ignore[attr-defined]
    for k, month in enumerate("JFMAMJJASOND"):
        c.drawCentredString(px0 + 6 + k * (px1 - px0 - 12) / 11, py0 - 9, month)  # type: ignore[attr-defined]
    c.setLineWidth(1.5)  # type: ignore[attr-defined]
    path = c.beginPath()  # type: ignore[attr-defined]
    path.moveTo(px0, py0 + 20)
    for k in range(1, 24):
        path.lineTo(px0 + k * (px1 - px0) / 23, py0 + 20 + 25 * ((k * 7) % 5) / 4)
    c.drawPath(path, stroke=1, fill=0)  # type: ignore[attr-defined]


def _report(c: object) -> None:
    c.setFont("Times-Bold", 10)  # type: ignore[attr-defined]
    c.drawString(LEFT, TOP + 4, "National Weekly Energy Round-Up")  # type: ignore[attr-defined]
    c.drawRightString(RIGHT, TOP + 4, "Market News")  # type: ignore[attr-defined]
    c.setLineWidth(1.5)  # type: ignore[attr-defined]
    c.rect(LEFT, BOTTOM, RIGHT - LEFT, TOP - BOTTOM)  # type: ignore[attr-defined]
    c.line(DIVIDER, BOTTOM, DIVIDER, TOP)  # type: ignore[attr-defined]
    y = TOP - 11
    for x, name in zip(FIGURES, HEADER, strict=True):
        c.drawRightString(x, y, name)  # type: ignore[attr-defined]
    c.setLineWidth(0.8)  # type: ignore[attr-defined]
    c.line(LEFT, y - 3, DIVIDER, y - 3)  # type: ignore[attr-defined]
    for label, rows in GROUPS:
        y -= PITCH
        c.setFont("Times-Bold", 10)  # type: ignore[attr-defined]
        c.drawString(LEFT + 2, y, label)  # type: ignore[attr-defined]
        c.line(LEFT, y - 3, DIVIDER, y - 3)  # type: ignore[attr-defined]
        c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
        for row in rows:
            y -= PITCH
            c.drawString(LEFT + 10, y, row[0])  # type: ignore[attr-defined]
            for x, figure in zip(FIGURES, row[1:], strict=True):
                c.drawRightString(x, y, figure)  # type: ignore[attr-defined]
    # two charts beside the table, their frames touching the rule between them
    middle = (TOP + BOTTOM) / 2
    _chart(c, DIVIDER + 2, middle + 4, RIGHT - 4, TOP - 4, "Iowa Ethanol")
    _chart(c, DIVIDER + 2, BOTTOM + 4, RIGHT - 4, middle - 4, "Central Illinois Soybean Oil")


def test_a_price_table_framed_beside_charts_is_one_table_of_its_own_columns(tmp_path: Path) -> None:
    # at the parent the frame, the rule between the table and the charts and the charts' frames were one grid: a
    # "table" of the whole page, the table's columns in one cell each, the charts' labels cells beside them
    content = drawn_page(tmp_path / "report.pdf", _report)
    layout = analyse(content, document_style([content]))
    tables = [b for b in layout.blocks if b.kind is Kind.TABLE]
    assert len(tables) == 1
    expected = [["", *HEADER]]
    for label, rows in GROUPS:
        expected.append([label, "", "", ""])  # a group's label alone in its row, the long one too
        expected.extend(list(row) for row in rows)
    assert table_rows(tables[0]) == expected
    # the charts' titles and tick labels are no table's cells
    cells = {cell.text for cell in tables[0].table.cells} if tables[0].table else set()
    assert "Iowa Ethanol" not in cells and "1.50" not in cells


#: A table of symbols with subscripts (LaTeX's `$Y_i$`): each subscript a word of its own in a smaller size, set
#: against its letter with no space between.
SYMBOLS = (("i", ""), ("Y", "i"), ("X", "i"), ("w", "i"), ("g", "add"))
VALUES = (("1", "Case", "aa", "2", "0"), ("2", "Case", "Aa", "3", "1"), ("3", "Control", "AA", "5", "2"))


def _symbols(c: object) -> None:
    xs = (80.0, 140.0, 220.0, 290.0, 360.0)
    y = 760.0
    c.setLineWidth(0.8)  # type: ignore[attr-defined]
    c.line(70, y + 14, 420, y + 14)  # type: ignore[attr-defined]
    for x, (letter, sub) in zip(xs, SYMBOLS, strict=True):
        c.setFont("Times-Italic", 11)  # type: ignore[attr-defined]
        c.drawString(x, y, letter)  # type: ignore[attr-defined]
        if sub:
            c.setFont("Times-Italic", 8)  # type: ignore[attr-defined]
            c.drawString(x + c.stringWidth(letter, "Times-Italic", 11), y - 2, sub)  # type: ignore[attr-defined]
    c.line(70, y - 6, 420, y - 6)  # type: ignore[attr-defined]
    c.setFont("Times-Roman", 11)  # type: ignore[attr-defined]
    for r, row in enumerate(VALUES):
        for x, text in zip(xs, row, strict=True):
            c.drawString(x, y - 20 - 14 * r, text)  # type: ignore[attr-defined]
    c.line(70, y - 20 - 14 * len(VALUES) + 8, 420, y - 20 - 14 * len(VALUES) + 8)  # type: ignore[attr-defined]


def test_a_subscript_set_against_its_letter_is_one_word_in_a_cell(tmp_path: Path) -> None:
    # at the parent "Y" and its subscript "i" were joined by a space: "Y i", "g add"
    content = drawn_page(tmp_path / "symbols.pdf", _symbols)
    (table,) = [b for b in analyse(content, document_style([content])).blocks if b.kind is Kind.TABLE]
    rows = table_rows(table)
    assert rows[0] == [letter + sub for letter, sub in SYMBOLS]
    assert rows[1:] == [list(row) for row in VALUES]


#: Cells where a figure in a Latin face and a space touch the Chinese text after it ("2." then "藥液", as a Word table
#: of Taiwan's sets its numbered notes): the text layer's word break there is the text's own.
NOTES = (("1.", "稻種消毒"), ("2.", "藥液調配"), ("3.", "連續使用"))


def _notes(c: object) -> None:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    c.setLineWidth(0.8)  # type: ignore[attr-defined]
    c.line(70, 774, 420, 774)  # type: ignore[attr-defined]
    c.setFont("Helvetica-Bold", 11)  # type: ignore[attr-defined]
    c.drawString(80, 760, "Item")  # type: ignore[attr-defined]
    c.drawString(240, 760, "Note")  # type: ignore[attr-defined]
    c.line(70, 754, 420, 754)  # type: ignore[attr-defined]
    for r, (number, text) in enumerate(NOTES):
        y = 740 - 14 * r
        c.setFont("Helvetica", 11)  # type: ignore[attr-defined]
        c.drawString(80, y, f"{r + 1}")  # type: ignore[attr-defined]
        # the number and a space, then the text set back over the space (as Word sets it: a space, then the text
        # run's own position a point or two to the left)
        c.drawString(240, y, number + " ")  # type: ignore[attr-defined]
        c.setFont("STSong-Light", 11)  # type: ignore[attr-defined]
        c.drawString(240 + c.stringWidth(number, "Helvetica", 11) - 1.5, y, text)  # type: ignore[attr-defined]
    c.line(70, 740 - 14 * len(NOTES) + 8, 420, 740 - 14 * len(NOTES) + 8)  # type: ignore[attr-defined]


def test_a_figure_touching_chinese_text_keeps_its_word_break(tmp_path: Path) -> None:
    # a face changing between touching words joins them only in Latin text: at the parent "2." and "藥液調配" were
    # joined as one word, where the text layer (and the page's reader) keeps them apart
    content = drawn_page(tmp_path / "notes.pdf", _notes)
    (table,) = [b for b in analyse(content, document_style([content])).blocks if b.kind is Kind.TABLE]
    assert table_rows(table)[1:] == [[f"{r + 1}", f"{number} {text}"] for r, (number, text) in enumerate(NOTES)]

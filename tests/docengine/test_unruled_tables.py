"""Tables without rules, on PDFs made here: what reads as a table (columns kept apart down a run of lines, with figures,
a header in another font, or three columns), and the pages that keep columns apart without being tables (two columns
of prose, lists with aligned numbers, a table of contents with leaders, numbered equations)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from modelhost.docengine.types import Kind

from .conftest import drawn_layout, table_blocks, table_rows

PROSE = (
    "The committee met on the first of the month and reviewed the accounts of the year. Its members agreed that "
    "the reserves were sufficient and that the new rules apply from the start of the next financial year. "
) * 40

Draw = Callable[[object], None]


def _text(c: object, x: float, y: float, text: str, font: str = "Helvetica", size: float = 10) -> None:
    c.setFont(font, size)  # type: ignore[attr-defined]
    c.drawString(x, y, text)  # type: ignore[attr-defined]


def _right(c: object, x: float, y: float, text: str, font: str = "Helvetica", size: float = 10) -> None:
    c.setFont(font, size)  # type: ignore[attr-defined]
    c.drawRightString(x, y, text)  # type: ignore[attr-defined]


def _prose(c: object, x: float, y: float, chars: int, count: int, lead: float = 12.5, start: int = 0) -> float:
    """`count` lines of running text about `chars` characters long from (x, y) down; the y below them."""
    words = PROSE.split()[start:]
    k = 0
    for n in range(count):
        line: list[str] = []
        while len(" ".join(line)) < chars:
            line.append(words[k])
            k += 1
        _text(c, x, y - lead * n, " ".join(line))
    return y - lead * count


STATEMENT = [
    ("Current assets", "", ""),
    ("Cash and cash equivalents", "1,234,567", "1,045,332"),
    ("Trade receivables", "456,789", "398,120"),
    ("Inventories", "87,654", "(12,001)"),
    ("Total current assets", "1,779,010", "1,431,451"),
    ("Non-current assets", "", ""),
    ("Property, plant and equipment", "2,345,678", "2,100,000"),
    ("Intangible assets", "12,345", "—"),
    ("Total assets", "4,137,033", "3,531,451"),
]


def _statement(c: object) -> None:
    # A financial statement as annual reports set it: prose, a title, figures right-aligned under bold years, a label
    # standing alone over each group of rows, no rule anywhere.
    y = _prose(c, 72, 780, 90, 4)
    _text(c, 72, y - 20, "Statement of financial position", "Helvetica-Bold", 12)
    y -= 50
    _right(c, 430, y, "2023", "Helvetica-Bold")
    _right(c, 520, y, "2022", "Helvetica-Bold")
    for k, (label, now, before) in enumerate(STATEMENT, start=1):
        _text(c, 72, y - 14 * k, label)
        if now:
            _right(c, 430, y - 14 * k, now)
            _right(c, 520, y - 14 * k, before)
    _prose(c, 72, y - 14 * (len(STATEMENT) + 3), 90, 4, start=40)


def test_a_financial_statement_without_rules_is_one_table_with_its_labels_header_and_figures(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "statement.pdf", _statement)
    (table,) = table_blocks(layout)
    assert table_rows(table) == [["", "2023", "2022"], *[list(row) for row in STATEMENT]]
    assert table.table is not None and all(c.header for c in table.table.cells if c.row == 0)
    assert not any(c.header for c in table.table.cells if c.row > 0)
    # The prose around it stays text, before and after it, and no label or figure is left outside the table.
    kinds = [b.kind for b in layout.blocks]
    assert kinds.index(Kind.TABLE) not in (0, len(kinds) - 1)
    assert not any("Inventories" in b.text or "1,234,567" in b.text for b in layout.blocks if b.kind is Kind.TEXT)


def test_groups_of_rows_set_apart_by_blank_lines_stay_one_table(tmp_path: Path) -> None:
    groups = [STATEMENT[:5], STATEMENT[5:8], STATEMENT[8:]]

    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 40
        _right(c, 430, y, "2023", "Helvetica-Bold")
        _right(c, 520, y, "2022", "Helvetica-Bold")
        for group in groups:
            for label, now, before in group:
                y -= 14
                _text(c, 72, y, label)
                if now:
                    _right(c, 430, y, now)
                    _right(c, 520, y, before)
            y -= 14  # a blank line after each group
        _prose(c, 72, y - 30, 90, 3, start=40)

    (table,) = table_blocks(drawn_layout(tmp_path / "groups.pdf", draw))
    assert table_rows(table) == [["", "2023", "2022"], *[list(row) for row in STATEMENT]]


def test_a_header_cell_over_two_columns_of_figures_spans_them(tmp_path: Path) -> None:
    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3)
        y -= 30
        c.setFont("Helvetica-Bold", 10)  # type: ignore[attr-defined]
        c.drawCentredString(440, y, "Year ended 31 December")  # type: ignore[attr-defined]
        _right(c, 430, y - 14, "2023", "Helvetica-Bold")
        _right(c, 520, y - 14, "2022", "Helvetica-Bold")
        for k, (label, now, before) in enumerate(STATEMENT[1:5], start=2):
            _text(c, 72, y - 14 * k, label)
            _right(c, 430, y - 14 * k, now)
            _right(c, 520, y - 14 * k, before)
        _prose(c, 72, y - 14 * 9, 90, 3, start=30)

    (table,) = table_blocks(drawn_layout(tmp_path / "spanning.pdf", draw))
    assert table.table is not None
    (year,) = [c for c in table.table.cells if c.text == "Year ended 31 December"]
    assert (year.row, year.col, year.col_span, year.header) == (0, 1, 2, True)
    assert table_rows(table)[1:] == [["", "2023", "2022"], *[list(r) for r in STATEMENT[1:5]]]


def test_a_results_table_under_its_caption_keeps_its_rows_and_its_header(tmp_path: Path) -> None:
    head = ["Method", "Precision", "Recall", "F1 score"]
    rows = [
        ["Baseline", "0.71", "0.64", "0.67"],
        ["Rule based", "0.82", "0.75", "0.78"],
        ["Neural net", "0.88", "0.81", "0.84"],
        ["Ours (full)", "0.93", "0.90", "0.91"],
    ]

    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3)
        _text(c, 72, y - 20, "Table 2: Results on the test set.")
        y -= 44
        for k, row in enumerate([head, *rows]):
            for x, text in zip((72, 200, 300, 400), row, strict=True):
                _text(c, x, y - 12 * k, text, "Helvetica-Bold" if k == 0 else "Helvetica", 9)
        _prose(c, 72, y - 12 * 7, 90, 5, start=30)

    layout = drawn_layout(tmp_path / "results.pdf", draw)
    (table,) = table_blocks(layout)
    assert table_rows(table) == [head, *rows]
    assert layout.blocks[table.caption].text == "Table 2: Results on the test set."


def test_a_table_of_words_with_a_bold_header_and_its_labels_flush_left_is_a_table(tmp_path: Path) -> None:
    rows = [
        ["Term", "Meaning", "Trade"],
        ["Gutter", "Column gap", "Typesetting"],
        ["Leading", "Line spacing", "Printing"],
        ["Kerning", "Letter spacing", "Typography"],
    ]

    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 30
        for k, row in enumerate(rows):
            for x, text in zip((72, 200, 330), row, strict=True):
                _text(c, x, y - 13 * k, text, "Helvetica-Bold" if k == 0 else "Helvetica")
        _prose(c, 72, y - 13 * 6, 90, 3, start=40)

    (table,) = table_blocks(drawn_layout(tmp_path / "terms.pdf", draw))
    assert table_rows(table) == rows


def test_a_table_in_one_column_of_a_two_column_page_takes_none_of_the_other_column(tmp_path: Path) -> None:
    def draw(c: object) -> None:
        y = _prose(c, 60, 780, 42, 12)
        for k, (name, count, share) in enumerate(
            [("Region", "Count", "Share"), ("North", "1,204", "31%"), ("South", "987", "25%"), ("East", "1,655", "44%")]
        ):
            _text(c, 60, y - 20 - 12 * k, name, "Helvetica-Bold" if k == 0 else "Helvetica")
            _right(c, 200, y - 20 - 12 * k, count, "Helvetica-Bold" if k == 0 else "Helvetica")
            _right(c, 280, y - 20 - 12 * k, share, "Helvetica-Bold" if k == 0 else "Helvetica")
        _prose(c, 60, y - 90, 42, 12, start=60)
        _prose(c, 320, 780, 42, 50, lead=12, start=120)

    layout = drawn_layout(tmp_path / "column.pdf", draw)
    (table,) = table_blocks(layout)
    assert table_rows(table) == [["Region", "Count", "Share"], ["North", "1,204", "31%"], ["South", "987", "25%"],
                            ["East", "1,655", "44%"]]  # fmt: skip
    assert table.bbox[2] < 300


def test_rules_under_the_figures_only_leave_the_statement_one_table_with_its_labels(tmp_path: Path) -> None:
    # Lines above each total under both columns of figures, a double line under the last: rules that bound no row
    # and hold no label (read as a ruled table, the figures went into one cell and their labels after it as text).
    statement = [
        ("Revenue", "5,234", "4,876"),
        ("Cost of sales", "(3,120)", "(2,950)"),
        ("Gross profit", "2,114", "1,926"),
        ("Administrative expenses", "(610)", "(577)"),
        ("Operating profit", "1,084", "951"),
        ("Finance costs", "(85)", "(92)"),
        ("Profit before tax", "999", "859"),
    ]

    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 40
        _right(c, 430, y, "2023", "Helvetica-Bold")
        _right(c, 520, y, "2022", "Helvetica-Bold")
        c.setLineWidth(0.5)  # type: ignore[attr-defined]
        for k, (label, now, before) in enumerate(statement, start=1):
            _text(c, 72, y - 16 * k, label)
            _right(c, 430, y - 16 * k, now)
            _right(c, 520, y - 16 * k, before)
            if label.endswith(("profit", "tax")):
                c.line(380, y - 16 * k + 11, 520, y - 16 * k + 11)  # type: ignore[attr-defined]
        bottom = y - 16 * len(statement) - 4
        c.line(380, bottom, 520, bottom)  # type: ignore[attr-defined]
        c.line(380, bottom - 2, 520, bottom - 2)  # type: ignore[attr-defined]
        _prose(c, 72, bottom - 30, 90, 3, start=40)

    layout = drawn_layout(tmp_path / "underlined.pdf", draw)
    (table,) = table_blocks(layout)
    assert table_rows(table) == [["", "2023", "2022"], *[list(row) for row in statement]]
    assert not any("Revenue" in b.text for b in layout.blocks if b.kind is not Kind.TABLE)


def test_a_booktabs_table_set_tight_keeps_one_row_per_line(tmp_path: Path) -> None:
    # Top rule, midrule, bottom rule and no other: the band under the midrule holds five rows whose glyph boxes
    # overlap (10 pt type at 10.2 pt leading); they once landed in one cell per column.
    head = ["Sample", "Mass (g)", "Volume (ml)", "Density"]
    rows = [["A-1", "12.5", "10.0", "1.25"], ["A-2", "13.1", "10.2", "1.28"], ["B-1", "9.8", "9.9", "0.99"]]

    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 30
        c.line(72, y, 520, y)  # type: ignore[attr-defined]
        for x, text in zip((76, 200, 320, 440), head, strict=True):
            _text(c, x, y - 11, text, "Helvetica-Bold")
        c.line(72, y - 15, 520, y - 15)  # type: ignore[attr-defined]
        for k, row in enumerate(rows):
            for x, text in zip((76, 200, 320, 440), row, strict=True):
                _text(c, x, y - 26 - 10.2 * k, text)
        c.line(72, y - 26 - 10.2 * len(rows) + 6, 520, y - 26 - 10.2 * len(rows) + 6)  # type: ignore[attr-defined]
        _prose(c, 72, y - 80, 90, 3, start=40)

    (table,) = table_blocks(drawn_layout(tmp_path / "booktabs.pdf", draw))
    assert table_rows(table) == [head, *rows]


def _two_columns(c: object) -> None:
    _prose(c, 60, 780, 40, 50, lead=12)
    _prose(c, 310, 780, 40, 50, lead=12, start=200)


def _three_narrow_columns(c: object) -> None:
    for n, x in enumerate((60, 230, 400)):
        _prose(c, x, 780, 26, 50, lead=12, start=150 * n)


def _numbered_list(c: object) -> None:
    y = _prose(c, 72, 780, 90, 3) - 20
    for k in range(12):
        _right(c, 92, y - 13 * k, f"{k + 1}.")
        _text(c, 100, y - 13 * k, f"Item number {k + 1} of the list, which says something")
    _prose(c, 72, y - 13 * 13, 90, 3, start=40)


def _bullets_with_prices(c: object) -> None:
    y = _prose(c, 72, 780, 90, 3) - 20
    for k, item in enumerate(["Apples", "Oranges", "Pears", "Plums", "Grapes"]):
        _text(c, 80, y - 13 * k, "•")
        _text(c, 92, y - 13 * k, f"{item} from the market")
        _right(c, 300, y - 13 * k, f"{3 * k + 3}.50")
    _prose(c, 72, y - 13 * 6, 90, 3, start=40)


def _equations(c: object) -> None:
    y = _prose(c, 72, 780, 90, 3) - 20
    for k, equation in enumerate(["E = m c 2", "F = m a", "p = m v", "W = F s"]):
        _text(c, 250, y - 16 * k, equation, "Times-Italic", 11)
        _right(c, 520, y - 16 * k, f"({k + 1})", "Times-Roman", 11)
    _prose(c, 72, y - 16 * 5, 90, 3, start=40)


def _two_charts(c: object) -> None:
    # Two vector plots side by side: their tick labels stand in aligned columns of figures at one pitch, cut by the
    # right panel's axes.
    top = _prose(c, 72, 780, 90, 3) - 30
    c.setLineWidth(0.8)  # type: ignore[attr-defined]
    for x0 in (100, 330):
        c.line(x0, top, x0, top - 100)  # type: ignore[attr-defined]
        c.line(x0, top - 100, x0 + 180, top - 100)  # type: ignore[attr-defined]
        for k in range(6):
            c.line(x0 - 3, top - 100 + 20 * k, x0, top - 100 + 20 * k)  # type: ignore[attr-defined]
            _right(c, x0 - 5, top - 103 + 20 * k, f"{0.2 * k:.1f}", size=8)
        for k in range(5):
            _text(c, x0 + 40 * k - 4, top - 110, str(10 * k), size=8)
    _prose(c, 72, top - 140, 90, 3, start=40)


def _assembly_listing(c: object) -> None:
    # Monospace code aligned in three columns with spaces (instruction, operands, comment).
    y = _prose(c, 72, 780, 90, 3) - 20
    listing = [("mov", "eax, 1", "; the call number"), ("mov", "ebx, 0", "; the status"), ("int", "0x80", "; kernel")]
    for k, line in enumerate(listing):
        for x, text in zip((90, 140, 260), line, strict=True):
            _text(c, x, y - 11 * k, text, "Courier", 9)
    _prose(c, 72, y - 11 * 5, 90, 3, start=40)


def _authors(c: object) -> None:
    # A paper's authors centred in three columns: name, department, university, address.
    _text(c, 200, 780, "A Study of Things", "Helvetica-Bold", 16)
    people = [
        ("Alice Smith", "Dept. of Physics", "University of Oslo", "alice@uio.no"),
        ("Bob Jones", "Computer Science", "ETH Zurich", "bob@ethz.ch"),
        ("Carol White", "Mathematics", "KTH Stockholm", "carol@kth.se"),
    ]
    for n, person in enumerate(people):
        for k, (line, font) in enumerate(
            zip(person, ("Helvetica-Bold", "Helvetica", "Helvetica", "Courier"), strict=True)
        ):
            c.setFont(font, 10)  # type: ignore[attr-defined]
            c.drawCentredString(140 + 157 * n, 745 - 13 * k, line)  # type: ignore[attr-defined]
    _prose(c, 72, 670, 90, 8)


PEOPLE = [
    ("Alice Smith", "Dept. of Physics", "University of Oslo", "alice@uio.no"),
    ("Bob Jones", "Computer Science", "ETH Zurich", "bob@ethz.ch"),
    ("Carol White", "Mathematics", "KTH Stockholm", "carol@kth.se"),
    ("Dan Brown", "Chemistry", "TU Delft", "dan@tudelft.nl"),
]


def _authors_flush(columns: int, fonts: tuple[str, str, str, str], centred_names: bool) -> Draw:
    """A paper's authors in `columns` columns set flush left (the names centred over them when `centred_names`), each
    line of a person in its own font: name, department, university, e-mail."""

    def draw(c: object) -> None:
        _text(c, 150, 780, "A Study of Things and Other Matters", "Helvetica-Bold", 16)
        step = 451 / columns
        for n, person in enumerate(PEOPLE[:columns]):
            for k, (line, font) in enumerate(zip(person, fonts, strict=True)):
                c.setFont(font, 10)  # type: ignore[attr-defined]
                if k == 0 and centred_names:
                    c.drawCentredString(72 + step * (n + 0.5), 745 - 13 * k, line)  # type: ignore[attr-defined]
                else:
                    c.drawString(72 + step * n, 745 - 13 * k, line)  # type: ignore[attr-defined]
        _text(c, 72, 680, "Abstract", "Helvetica-Bold", 11)
        _prose(c, 72, 665, 90, 8)

    face = "italic" if "Oblique" in fonts[1] else "bold_names" if "Bold" in fonts[0] else "one_face"
    draw.__name__ = f"_authors_flush_left_in_{columns}_columns_{face}" + ("_names_centred" if centred_names else "")
    return draw


@pytest.mark.parametrize(
    "draw",
    [
        _authors_flush(2, ("Helvetica-Bold", "Helvetica", "Helvetica", "Courier"), True),
        _authors_flush(3, ("Helvetica", "Helvetica", "Helvetica", "Helvetica"), False),
        _authors_flush(3, ("Helvetica-Bold", "Helvetica-Oblique", "Helvetica-Oblique", "Helvetica"), False),
        _authors_flush(4, ("Helvetica-Bold", "Helvetica", "Helvetica", "Courier"), False),
        _two_columns,
        _three_narrow_columns,
        _numbered_list,
        _bullets_with_prices,
        _equations,
        _two_charts,
        _assembly_listing,
        _authors,
    ],
    ids=lambda d: d.__name__,
)
def test_columns_that_are_no_table_stay_text(tmp_path: Path, draw: Draw) -> None:
    layout = drawn_layout(tmp_path / "page.pdf", draw)
    assert table_blocks(layout) == []
    assert any(b.kind in (Kind.TEXT, Kind.LIST_ITEM) for b in layout.blocks)


def test_a_table_of_contents_with_leaders_stays_the_two_columns_its_leaders_make(tmp_path: Path) -> None:
    entries = [("Introduction", 1), ("Background", 3), ("Methods", 7), ("Results", 12), ("Discussion", 20)]

    def draw(c: object) -> None:
        _text(c, 72, 780, "Contents", "Helvetica-Bold", 14)
        for k, (title, page) in enumerate(entries):
            _text(c, 72, 750 - 14 * k, f"{k + 1}  {title}")
            _text(c, 200, 750 - 14 * k, " ." * 40)
            _right(c, 520, 750 - 14 * k, str(page))

    (table,) = table_blocks(drawn_layout(tmp_path / "contents.pdf", draw))
    rows = table_rows(table)
    assert [len(r) for r in rows] == [2] * len(entries)
    assert [r[1] for r in rows] == [str(p) for _, p in entries]
    assert rows[0][0].startswith("1 Introduction . .")


def test_modelhost_convert_writes_the_statement_as_a_markdown_table(tmp_path: Path) -> None:
    from reportlab.pdfgen import canvas

    pdf = tmp_path / "statement.pdf"
    c = canvas.Canvas(str(pdf), pagesize=(595, 842))
    _statement(c)
    c.showPage()
    c.save()
    done = subprocess.run(
        [sys.executable, "-m", "modelhost.cli", "convert", str(pdf), "-o", str(tmp_path / "out.md")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in (tmp_path / "out.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("|")
    ]
    assert rows[0] == ["", "2023", "2022"]
    assert ["Cash and cash equivalents", "1,234,567", "1,045,332"] in rows
    assert ["Intangible assets", "12,345", "—"] in rows


HEBREW = (
    "הוועדה התכנסה היום כדי לבחון את החשבונות השנתיים והחליטה כי העתודות מספיקות וכי הכללים החדשים יחולו מתחילת "
    "שנת הכספים הבאה חברי הוועדה דנו בתוכנית העבודה לשנה הבאה והסכימו לחזק את הבקרה הפנימית ולשפר את השקיפות "
)
DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def _justified_columns(text: str, right_to_left: bool, font: str, columns: int, width: float) -> Draw:
    """Narrow columns of justified prose (8.5 pt, `width` points wide, 20 apart: 3-6 words a line, word spaces
    stretched to fill each line), every column its own text; right to left, a line's first word is rightmost, its
    letters drawn in visual order as a shaping producer writes them."""

    def draw(c: object) -> None:
        from reportlab.pdfbase import pdfmetrics

        words = text.split() * 12
        size, lead = 8.5, 10.2
        for column in range(columns):
            x0 = 60 + column * (width + 20)
            rest = words[17 * column :] + words[: 17 * column]
            y = 770.0
            while rest and y > 300:
                line: list[str] = []
                while rest and pdfmetrics.stringWidth(" ".join([*line, rest[0]]), font, size) <= width:
                    line.append(rest.pop(0))
                if len(line) < 3 and rest:  # a short paragraph's end: start the next paragraph
                    y -= lead
                widths = [pdfmetrics.stringWidth(w, font, size) for w in line]
                gap = (width - sum(widths)) / max(len(line) - 1, 1)
                x = x0 + width if right_to_left else x0
                for word, w in zip(line, widths, strict=True):
                    if right_to_left:
                        _text(c, x - w, y, word[::-1], font, size)
                        x -= w + gap
                    else:
                        _text(c, x, y, word, font, size)
                        x += w + gap
                y -= lead

    return draw


@pytest.mark.parametrize("script", ["latin", "hebrew"])
def test_narrow_columns_of_justified_prose_stay_text(tmp_path: Path, script: str) -> None:
    # Stretched word spaces of one column line up by chance with the next column's for a few lines, and each column's
    # lines are too short to count as prose by their words alone (Hebrew has no lowercase to say a line runs on): the
    # lines filling their columns say it is prose.
    if script == "hebrew":
        if not Path(DEJAVU).exists():
            pytest.skip("needs Debian's fonts-dejavu-core")
        from reportlab.pdfbase import pdfmetrics
        from reportlab.pdfbase.ttfonts import TTFont

        pdfmetrics.registerFont(TTFont("DejaVu", DEJAVU))
        draw = _justified_columns(HEBREW, True, "DejaVu", 3, 135.0)
    else:
        draw = _justified_columns(PROSE, False, "Helvetica", 4, 100.0)
    layout = drawn_layout(tmp_path / "columns.pdf", draw)
    assert table_blocks(layout) == []
    assert sum(1 for b in layout.blocks if b.kind is Kind.TEXT) >= 3


def _word_table(lines: list[tuple[str, str, str]], xs: tuple[float, float, float]) -> Draw:
    """Prose, then `lines` as rows of cells at `xs` (the first row bold, its header; empty cells left out), then
    prose."""

    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 30
        for k, line in enumerate(lines):
            for x, text in zip(xs, line, strict=True):
                if text:
                    _text(c, x, y - 13 * k, text, "Helvetica-Bold" if k == 0 else "Helvetica")
        _prose(c, 72, y - 13 * (len(lines) + 2), 90, 3, start=40)

    return draw


def test_a_wrapped_cell_whose_next_line_starts_with_a_capital_stays_one_cell(tmp_path: Path) -> None:
    # A description column whose cells wrap in Title Case (or onto a name): the continuation line stands under its
    # cell with the row's label and year empty, so it is the cell's next line, not a row of its own.
    lines = [
        ("Component", "Purpose", "Since"),
        ("Reserve fund", "Covers Losses of the", "2019"),
        ("", "Previous Year", ""),
        ("Ledger", "Records All Entries", "2020"),
        ("Audit", "Checks the Books with", "2021"),
        ("", "Deloitte and Partners", ""),
        ("Budget", "Plans Spending", "2022"),
    ]

    (table,) = table_blocks(drawn_layout(tmp_path / "wrapped.pdf", _word_table(lines, (72, 200, 400))))
    assert table_rows(table) == [
        ["Component", "Purpose", "Since"],
        ["Reserve fund", "Covers Losses of the Previous Year", "2019"],
        ["Ledger", "Records All Entries", "2020"],
        ["Audit", "Checks the Books with Deloitte and Partners", "2021"],
        ["Budget", "Plans Spending", "2022"],
    ]


def test_a_first_column_that_names_a_group_once_keeps_the_group_rows_apart(tmp_path: Path) -> None:
    # The first column's label stands only on its group's first row (a merged cell): the rows under it fill every
    # other column, so they are rows of their own, not a wrapped cell's lines.
    lines = [
        ("Kind", "Item", "Colour"),
        ("Fruit", "Apple", "Red"),
        ("", "Banana", "Yellow"),
        ("Vegetable", "Carrot", "Orange"),
        ("", "Leek", "Green"),
    ]

    (table,) = table_blocks(drawn_layout(tmp_path / "groups.pdf", _word_table(lines, (72, 200, 330))))
    assert table_rows(table) == [list(line) for line in lines]


#: Arrests by offence, a statistical abstract's kind: labels run on in dot leaders to their first figure.
OFFENCES = (
    ("Total offenses", "399.6", "782.5", "683.0"),
    ("Murder and nonnegligent manslaughter", "4.9", "278.1", "598.0"),
    ("Forcible rape", "510.9", "986.0", "461.7"),
    ("Robbery", "88.2", "91.4", "95.0"),
    ("Aggravated assault", "421.3", "408.8", "394.1"),
)


def _leaders(c: object, touching: bool) -> None:
    # Each label's leaders fill the line to the first figure's column: set apart from the figure by a space, or
    # touching it (the text layer then gives the dots and the figure as one word, "......4.9").
    y = _prose(c, 72, 780, 90, 3) - 30
    for k, year in enumerate(("2000", "2005", "2010")):
        _right(c, 330 + 60 * k, y, year, "Helvetica-Bold", 9)
    for n, (label, *figures) in enumerate(OFFENCES, start=1):
        c.setFont("Helvetica", 9)  # type: ignore[attr-defined]
        dot = c.stringWidth(".", "Helvetica", 9)  # type: ignore[attr-defined]
        first = figures[0]
        end = 330 - c.stringWidth(first, "Helvetica", 9)  # type: ignore[attr-defined]
        room = end - 72 - c.stringWidth(label + " ", "Helvetica", 9)  # type: ignore[attr-defined]
        dots = "." * int(room / dot - (0 if touching else 2))
        if touching:
            _right(c, 330, y - 12 * n, f"{label} {dots}{first}", size=9)
        else:
            _text(c, 72, y - 12 * n, f"{label} {dots}", size=9)
            _right(c, 330, y - 12 * n, first, size=9)
        for k, figure in enumerate(figures[1:], start=1):
            _right(c, 330 + 60 * k, y - 12 * n, figure, size=9)


@pytest.mark.parametrize("touching", [False, True], ids=["spaced", "touching"])
def test_labels_with_dot_leaders_to_their_figures_keep_the_figures_apart(tmp_path: Path, touching: bool) -> None:
    layout = drawn_layout(tmp_path / "leaders.pdf", lambda c: _leaders(c, touching))
    (table,) = table_blocks(layout)
    rows = table_rows(table)
    assert rows[0] == ["", "2000", "2005", "2010"]
    # the leaders stay with the label (or the figure they touch); the label and each figure are cells of their own
    label = [re.sub(r"\.{2,}", "", row[0]).strip() for row in rows[1:]]
    figures = [[re.sub(r"^\.+", "", cell) for cell in row[1:]] for row in rows[1:]]
    assert label == [row[0] for row in OFFENCES]
    assert figures == [list(row[1:]) for row in OFFENCES]


#: A settings table of words in one font, two columns, no header font, no rule: only its zebra stripes (every other
#: row shaded, one width) say it is a table; without them it reads as two columns of short lines.
SETTINGS = (
    ("Setting", "Meaning"),
    ("Timeout", "Request time limit"),
    ("Retries", "Attempts after failure"),
    ("Backoff", "Wait growth factor"),
    ("Proxy", "Relay address"),
    ("Verify", "Certificate checks"),
    ("Agent", "Client name"),
)


def _settings(c: object, stripes: bool, prose: bool = False) -> None:
    y = _prose(c, 72, 780, 90, 3) - 40
    for r, (name, meaning) in enumerate(SETTINGS):
        if stripes and r % 2 == 1:
            c.setFillGray(0.9)  # type: ignore[attr-defined]
            c.rect(72, y - 15 * r - 4, 400, 15, stroke=0, fill=1)  # type: ignore[attr-defined]
            c.setFillGray(0)  # type: ignore[attr-defined]
        if prose:  # the same stripes behind two columns of running text
            _text(c, 80, y - 15 * r, " ".join(PROSE.split()[7 * r : 7 * r + 5]), size=9)
            _text(c, 290, y - 15 * r, " ".join(PROSE.split()[7 * r + 40 : 7 * r + 46]), size=9)
        else:
            _text(c, 80, y - 15 * r, name)
            _text(c, 200, y - 15 * r, meaning)
    _prose(c, 72, y - 15 * len(SETTINGS) - 30, 90, 3, start=60)


def test_zebra_stripes_behind_two_columns_of_short_cells_make_them_a_table(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "striped.pdf", lambda c: _settings(c, stripes=True))
    (table,) = table_blocks(layout)
    assert table_rows(table) == [list(row) for row in SETTINGS]


@pytest.mark.parametrize("case", ["no stripes", "stripes behind prose"])
def test_without_stripes_or_behind_prose_two_columns_stay_text(tmp_path: Path, case: str) -> None:
    # stripes weigh only for columns the words keep apart with short cells: alone they make no table (taken for
    # rows by themselves they raised the held-out split's CER, tables.fill_rules)
    layout = drawn_layout(
        tmp_path / "plain.pdf", lambda c: _settings(c, stripes=case != "no stripes", prose=case != "no stripes")
    )
    assert not table_blocks(layout)


def _wrapped_labels(c: object) -> None:
    # A statistical table's labels wrapped over two lines, the figures on the label's last line, the second line in
    # lowercase (and indented, as a hanging label is set): each label one cell beside its figures.
    y = _prose(c, 72, 780, 90, 3) - 30
    for k, year in enumerate(("2000", "2005", "2010")):
        _right(c, 330 + 60 * k, y, year, "Helvetica-Bold", 9)
    labels = (("Total offenses",), ("Murder and nonnegligent", "manslaughter"), ("Robbery",))
    labels += (("All other offenses (except", "traffic)"), ("Arson",))
    for label, (_, *figures) in zip(labels, OFFENCES, strict=True):
        for n, part in enumerate(label):
            y -= 12
            _text(c, 72 + 6 * n, y, part, size=9)
        for k, figure in enumerate(figures):
            _right(c, 330 + 60 * k, y, figure, size=9)


def test_a_label_wrapped_onto_the_line_of_its_figures_is_one_cell(tmp_path: Path) -> None:
    (table,) = table_blocks(drawn_layout(tmp_path / "wrapped.pdf", _wrapped_labels))
    assert [row[0] for row in table_rows(table)] == [
        "",
        "Total offenses",
        "Murder and nonnegligent manslaughter",
        "Robbery",
        "All other offenses (except traffic)",
        "Arson",
    ]
    assert [row[1:] for row in table_rows(table)][1:] == [list(row[1:]) for row in OFFENCES]


#: A report's small table set in a monospaced font, pdf2docx's sample letter's kind (tables_dev/pdf2docx_table_stream):
#: the column names in bold oblique on a grey band of their own, the rows in Courier, no rule.
VEHICLES = (
    ("Make", "Model", "Color", "Tag", "Barcode"),
    ("Toyota", "Camry", "Brown", "111AAA", "22222"),
    ("Toyota", "Prius", "Grey", "222BBB", "33333"),
)


def _monospaced_table(band: str) -> Draw:
    """The vehicles table under three lines of prose; `band`: "header" (grey behind the header row alone), "all" (a
    listing's shaded box behind every line) or "none"."""

    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 24
        c.setFillGray(0.85)  # type: ignore[attr-defined]
        if band == "header":
            c.rect(95, y - 3, 330, 12, stroke=0, fill=1)  # type: ignore[attr-defined]
        elif band == "all":
            c.rect(95, y - 3 - 12 * (len(VEHICLES) - 1), 330, 12 * len(VEHICLES), stroke=0, fill=1)  # type: ignore[attr-defined]
        c.setFillGray(0)  # type: ignore[attr-defined]
        for k, row in enumerate(VEHICLES):
            font = "Courier-BoldOblique" if k == 0 else "Courier"
            for x, text in zip((100, 170, 240, 300, 360), row, strict=True):
                _text(c, x, y - 12 * k, text, font, 9)
        _prose(c, 72, y - 12 * len(VEHICLES) - 20, 90, 3, start=40)

    return draw


def test_a_monospaced_table_whose_header_stands_on_a_band_of_its_own_is_a_table(tmp_path: Path) -> None:
    (table,) = table_blocks(drawn_layout(tmp_path / "band.pdf", _monospaced_table("header")))
    assert table_rows(table) == [list(row) for row in VEHICLES]
    # the same lines shaded all alike, or not at all, stay a code listing (a bold first line is a keyword's)
    assert table_blocks(drawn_layout(tmp_path / "shaded.pdf", _monospaced_table("all"))) == []
    assert table_blocks(drawn_layout(tmp_path / "plain.pdf", _monospaced_table("none"))) == []


HALVES = [
    [("Item", "Count", "Share"), ("Apples", "1,204", "31.0%"), ("Pears", "987", "25.4%"),
     ("Plums", "1,655", "42.6%"), ("Cherries", "402", "10.3%"), ("Quinces", "88", "2.3%")],
    [("Item", "Count", "Share"), ("Lemons", "2,310", "40.1%"), ("Limes", "1,045", "18.1%"),
     ("Oranges", "1,990", "34.5%"), ("Grapefruit", "417", "7.2%"), ("Kumquats", "9", "0.2%")],
]  # fmt: skip


def _halves(c: object, repeat: bool) -> None:
    # One list set in two halves side by side, each under its own header (a page that saves room); without `repeat`
    # the right half heads its figures with other words ("Region", "2021", "2022"): one table of six columns.
    y = _prose(c, 72, 780, 90, 3) - 30
    for x, half in zip((72, 320), HALVES, strict=True):
        for k, (name, count, share) in enumerate(half):
            font = "Helvetica-Bold" if k == 0 else "Helvetica"
            if k == 0 and x == 320 and not repeat:
                name, count, share = "Region", "2021", "2022"
            _text(c, x, y - 12 * k, name, font)
            _right(c, x + 140, y - 12 * k, count, font)
            _right(c, x + 200, y - 12 * k, share, font)
    _prose(c, 72, y - 12 * 8, 90, 3, start=40)


def test_two_tables_side_by_side_under_the_same_header_are_two_tables(tmp_path: Path) -> None:
    # Read as one table of six columns, the second half's cells paired with the first's rows (issue 34).
    tables = table_blocks(drawn_layout(tmp_path / "halves.pdf", lambda c: _halves(c, repeat=True)))
    assert [table_rows(t) for t in tables] == [[list(row) for row in half] for half in HALVES]
    assert tables[0].bbox[2] < tables[1].bbox[0]


def test_a_table_whose_header_does_not_repeat_stays_one_table(tmp_path: Path) -> None:
    (table,) = table_blocks(drawn_layout(tmp_path / "whole.pdf", lambda c: _halves(c, repeat=False)))
    assert table_rows(table)[0] == ["Item", "Count", "Share", "Region", "2021", "2022"]


def test_years_repeated_under_two_groups_stay_one_table(tmp_path: Path) -> None:
    # "2010 2011 | 2010 2011" repeats, but the second half starts with figures, not labels: one table.
    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 30
        head = ["Region", "2010", "2011", "2010", "2011"]
        body = [["North", "12", "14", "11", "13"], ["South", "9", "10", "8", "12"], ["East", "22", "21", "20", "25"],
                ["West", "5", "7", "6", "6"]]  # fmt: skip
        for k, row in enumerate([head, *body]):
            for j, text in enumerate(row):
                (_text if j == 0 else _right)(c, 72 + 90 * j + (0 if j == 0 else 50), y - 12 * k, text)
        _prose(c, 72, y - 12 * 7, 90, 3, start=40)

    tables = table_blocks(drawn_layout(tmp_path / "years.pdf", draw))
    assert len(tables) == 1


def test_a_table_of_records_whose_names_and_addresses_fill_their_columns_keeps_them(tmp_path: Path) -> None:
    # A list of contributions: names and addresses of one length fill their narrow columns as a newspaper's justified
    # lines do, and were taken for two columns of prose (their gutter cut every row, and the table kept only its
    # last three columns); the amount on every row says these are a table's rows.
    names = ["Alabama", "Alaska", "Arizona", "Arkansas", "Colorado", "Delaware", "Florida", "Georgia"]
    rows = [("Contributor", "Address", "Employer", "Date", "Amount")] + [
        (f"{name} Holdings LLC", f"{100 + 37 * k} Main Street Apt {k}",
         "Acme Corporation" if k % 2 else "Self employed", f"0{1 + k}/1{k}/2012", f"${250 * (k + 1):,}.00")
        for k, name in enumerate(names)
    ]  # fmt: skip

    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 30
        for k, row in enumerate(rows):
            font = "Helvetica-Bold" if k == 0 else "Helvetica"
            for j, (x, text) in enumerate(zip((40, 200, 330, 460, 555), row, strict=True)):
                (_right if j == 4 else _text)(c, x, y - 10 * k, text, font, 8)
        _prose(c, 72, y - 10 * len(rows) - 20, 90, 3, start=40)

    (table,) = table_blocks(drawn_layout(tmp_path / "records.pdf", draw))
    assert table_rows(table) == [list(row) for row in rows]


def _wrapped_header(c: object, header_font: str) -> None:
    # Column names too long for their figures wrap onto a second line, both lines bold over regular figures.
    y = _prose(c, 72, 780, 90, 3) - 30
    xs = (72, 230, 300, 370, 440)
    for k, line in enumerate([("", "Total", "Urban", "Net", "Median"), ("State", "population", "population",
                                                                      "migration", "income")]):  # fmt: skip
        for j, (x, text) in enumerate(zip(xs, line, strict=True)):
            (_text if j == 0 else _right)(c, x, y - 11 * k, text, header_font)
    for k, row in enumerate(WRAPPED_BODY):
        for j, (x, text) in enumerate(zip(xs, row, strict=True)):
            (_text if j == 0 else _right)(c, x, y - 26 - 11 * k, text)
    _prose(c, 72, y - 26 - 11 * len(WRAPPED_BODY) - 20, 90, 3, start=40)


WRAPPED_BODY = [
    ("Alabama", "42,411", "37,979", "-1,204", "51,734"),
    ("Alaska", "53,895", "31,431", "2,310", "77,790"),
    ("Arizona", "71,104", "60,022", "9,887", "61,529"),
    ("Arkansas", "30,115", "17,950", "-402", "49,475"),
]


def test_a_header_wrapped_onto_two_lines_is_one_header_row(tmp_path: Path) -> None:
    # Each column's name on two bold lines is one header cell ("Total population"), not two rows of halves.
    (table,) = table_blocks(drawn_layout(tmp_path / "wrapped.pdf", lambda c: _wrapped_header(c, "Helvetica-Bold")))
    assert table_rows(table) == [
        ["State", "Total population", "Urban population", "Net migration", "Median income"],
        *[list(row) for row in WRAPPED_BODY],
    ]


def test_two_header_lines_in_the_body_face_stay_two_rows(tmp_path: Path) -> None:
    # Nothing sets the two lines apart from the body: no evidence that they are one header, so each is a row.
    (table,) = table_blocks(drawn_layout(tmp_path / "plain.pdf", lambda c: _wrapped_header(c, "Helvetica")))
    assert table_rows(table)[:2] == [["", "Total", "Urban", "Net", "Median"], ["State", "population", "population",
                                                                          "migration", "income"]]  # fmt: skip


def _index(c: object) -> None:
    # A book's index in three columns: each entry's page numbers set three to a line, justified across the same
    # width, so that the numbers of consecutive lines stand one under another like a table's columns.
    pages = iter(range(3, 10_000, 7))
    for x, entries in zip((60, 240, 420), (("alpha", "beta", "gamma"), ("kappa", "lambda", "mu"),
                                            ("sigma", "tau", "upsilon")), strict=True):  # fmt: skip
        y = 780.0
        for entry in entries:
            _text(c, x, y, entry, size=9)
            numbers = [f"{next(pages)}," for _ in range(11)] + [str(next(pages))]
            for k in range(0, len(numbers), 3):
                for j, number in enumerate(numbers[k : k + 3]):
                    _text(c, x + 40 + 40 * j, y, number, size=9)
                y -= 11
            y -= 4


def test_an_index_whose_justified_page_numbers_line_up_is_no_table(tmp_path: Path) -> None:
    # Numbers ending in commas, one under another down the lines, read as tables of page numbers (issue 34: seven
    # such tables on a drawn index page, two on the index of a LaTeX package's manual); a list run on is no table.
    assert table_blocks(drawn_layout(tmp_path / "index.pdf", _index)) == []


DONORS = [
    ("Name", "City", "Amount"),
    ("Smith, John", "Boston", "250.00"),
    ("Doe, Jane", "Chicago", "1,000.00"),
    ("Brown, Peter", "Denver", "75.00"),
    ("Washington-Montgomery, Alexandra", "Philadelphia", "500.00"),
    ("Lee, Ann", "Austin", "20.00"),
    ("Green, Tom", "Miami", "300.00"),
]


def _donors(c: object, gap: float) -> None:
    # A dense list: the longest name runs to `gap` ems of the next column, under a column gap.
    from reportlab.pdfbase.pdfmetrics import stringWidth

    y = _prose(c, 72, 780, 90, 3) - 30
    city = 72 + stringWidth(DONORS[4][0], "Helvetica", 9) + gap * 9
    for k, (name, town, amount) in enumerate(DONORS):
        font = "Helvetica-Bold" if k == 0 else "Helvetica"
        _text(c, 72, y - 11 * k, name, font, 9)
        _text(c, city, y - 11 * k, town, font, 9)
        _right(c, city + 110, y - 11 * k, amount, font, 9)
    _prose(c, 72, y - 11 * len(DONORS) - 20, 90, 3, start=40)


def test_a_long_cell_set_tight_against_the_next_column_stays_in_its_row_and_column(tmp_path: Path) -> None:
    # 0.6 em between the longest name and its city, under `unruled.COLUMN_GAP_EM`: the row closed the column gap, and
    # the table stopped above it (the rows below were lost). The space there is the row's widest and ends where the
    # cities start: a tight fit, not a line across the columns.
    (table,) = table_blocks(drawn_layout(tmp_path / "donors.pdf", lambda c: _donors(c, 0.6)))
    assert table_rows(table) == [list(row) for row in DONORS]


def test_a_long_cell_one_word_space_from_the_next_column_stays_in_its_row_and_column(tmp_path: Path) -> None:
    # One word space (Helvetica's is 0.278 em) between the longest name and its city, as wide as the spaces inside
    # the name, and each amount set half an em before its currency: only where the tight space ends, at the cities'
    # left edge, says the column starts there. At the parent the row ended the table (the space was not its widest).
    from reportlab.pdfbase.pdfmetrics import stringWidth

    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 30
        city = 72 + stringWidth(DONORS[4][0], "Helvetica", 9) + 0.278 * 9
        for k, (name, town, amount) in enumerate(DONORS):
            font = "Helvetica-Bold" if k == 0 else "Helvetica"
            _text(c, 72, y - 11 * k, name, font, 9)
            _text(c, city, y - 11 * k, town, font, 9)
            _right(c, city + 110, y - 11 * k, amount, font, 9)
            _text(c, city + 110 + 4.5, y - 11 * k, "Currency" if k == 0 else "USD", font, 9)
        _prose(c, 72, y - 11 * len(DONORS) - 20, 90, 3, start=40)

    (table,) = table_blocks(drawn_layout(tmp_path / "donors.pdf", draw))
    assert [row[:2] for row in table_rows(table)] == [list(row[:2]) for row in DONORS]


# Tables without rules whose cells are names (issue 34, tables with no rules at all): lowercase names and program
# identifiers in columns (a manual's tables of functions, types and arguments, texinfo's `@multitable`), each line a
# row of its own. What tells them from wrapped cells and code listings is the page's geometry and fonts: a line wraps
# only when the next word would not have fitted after it in its column, and a listing has no header row in a text face
# over its columns (tables_dev/octave_p916, octave_p1033, rintro_p42 and rexts_p199 are real pages of the kind).


def _columns(rows: list[tuple[str, ...]], xs: tuple[float, ...], fonts: tuple[str, ...], header: str) -> Draw:
    """`rows` under prose, the first one (the column names) in `header`, the others' columns in `fonts`, at `xs`;
    prose again below."""

    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 24
        for k, row in enumerate(rows):
            for j, (x, text) in enumerate(zip(xs, row, strict=True)):
                _text(c, x, y - 13 * k, text, header if k == 0 else fonts[j])
        _prose(c, 72, y - 13 * len(rows) - 20, 90, 3, start=36)

    return draw


#: Lowercase names in three columns, the first column as long as its widest cell: "log normal" is close enough to
#: its column's width that "logistic" does not fit after it, and yet each line is a row (the row fills every column,
#: as the row above does).
SHAPES = [
    ("Shape", "Function", "Arguments"),
    ("circle", "circ", "radius, centre"),
    ("ellipse", "ellip", "axes, angle"),
    ("log normal", "lnorm", "meanlog, sdlog"),
    ("logistic", "logis", "location, scale"),
    ("rectangle", "rect", "width, height"),
    ("rounded square", "rsquare", "side, radius"),
    ("triangle", "tri", "base, apex"),
]


def test_lowercase_names_in_columns_keep_one_row_per_line(tmp_path: Path) -> None:
    # At the parent every lowercase line was taken for the next line of the cell above: 8 rows read as 2.
    draw = _columns(SHAPES, (90, 200, 280), ("Helvetica", "Courier", "Courier"), "Helvetica-Bold")
    (table,) = table_blocks(drawn_layout(tmp_path / "shapes.pdf", draw))
    assert table_rows(table) == [list(row) for row in SHAPES]


#: A manual's table of C++ types (texinfo's @multitable: no rules): the column names in the text face, every cell an
#: identifier in Courier, the later ones with digits.
TYPES = [
    ("Type", "Accessor", "Header"),
    ("RowVector", "row_vector_value", "dRowVector.h"),
    ("ColumnVector", "column_vector_value", "dColVector.h"),
    ("boolMatrix", "bool_matrix_value", "boolMatrix.h"),
    ("charMatrix", "char_matrix_value", "chMatrix.h"),
    ("int8NDArray", "int8_array_value", "int8NDArray.h"),
    ("int16NDArray", "int16_array_value", "int16NDArray.h"),
    ("uint8NDArray", "uint8_array_value", "uint8NDArray.h"),
]


def test_identifiers_in_courier_under_column_names_in_the_text_face_are_a_table(tmp_path: Path) -> None:
    # At the parent: a code listing by its monospace share, and rows of one kind read down (records).
    draw = _columns(TYPES, (72, 200, 350), ("Courier",) * 3, "Helvetica")
    (table,) = table_blocks(drawn_layout(tmp_path / "types.pdf", draw))
    assert table_rows(table) == [list(row) for row in TYPES]


#: Operators and the methods that overload them (monospace) beside a description in the text face.
OPERATORS = [
    ("Operation", "Method", "Description"),
    ("a + b", "plus (a, b)", "Binary addition"),
    ("a - b", "minus (a, b)", "Binary subtraction"),
    ("a .* b", "times (a, b)", "Element-wise multiplication"),
    ("a * b", "mtimes (a, b)", "Matrix multiplication"),
    ("a < b", "lt (a, b)", "Less than"),
    ("a <= b", "le (a, b)", "Less than or equal to"),
    ("a:b", "colon (a, b)", "Two element range"),
]


def test_operators_and_method_names_beside_descriptions_are_a_table(tmp_path: Path) -> None:
    # At the parent the two monospace columns "flowed" (lowercase after lowercase): columns of running text.
    draw = _columns(OPERATORS, (72, 170, 280), ("Courier", "Courier", "Helvetica"), "Helvetica")
    (table,) = table_blocks(drawn_layout(tmp_path / "operators.pdf", draw))
    assert table_rows(table) == [list(row) for row in OPERATORS]


def test_a_description_wrapped_at_its_column_width_is_still_one_cell(tmp_path: Path) -> None:
    # The line breaks because "and" does not fit after "returns its length": the lower line goes on the cell.
    rows = [
        ("Name", "Description"),
        ("nchar", "counts the characters of a string and"),
        ("", "returns its length"),
        ("substr", "extracts a part"),
        ("toupper", "converts to capitals"),
        ("paste", "joins strings"),
    ]
    draw = _columns(rows, (72, 160), ("Courier", "Helvetica"), "Helvetica-Bold")
    (table,) = table_blocks(drawn_layout(tmp_path / "wrapped.pdf", draw))
    assert table_rows(table)[1] == ["nchar", "counts the characters of a string and returns its length"]
    assert len(table_rows(table)) == 5


def test_a_code_listing_under_a_line_of_text_stays_code(tmp_path: Path) -> None:
    # Monospace lines aligned in columns under a sentence in the text face: the sentence is one piece over no
    # column, so no header names the columns, and the listing stays a listing.
    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 24
        _text(c, 72, y, "The loop below counts down:")
        listing = [("mov", "ecx, 10", "; the count"), ("dec", "ecx", "; one less"), ("jnz", "loop", "; again")]
        for k, line in enumerate(listing, start=1):
            for x, text in zip((90, 140, 260), line, strict=True):
                _text(c, x, y - 12 * k, text, "Courier", 9)
        _prose(c, 72, y - 12 * 5 - 20, 90, 3, start=36)

    assert table_blocks(drawn_layout(tmp_path / "listing.pdf", draw)) == []


#: Labels run to their figures with dot leaders, spaced (". . .") as statistical abstracts set them or glued ("....").
LED = [
    ("Robbery", "408.2", "417.1"),
    ("Weapons; carrying, possessing, etc.", "159.8", "166.3"),
    ("Arson", "12.3", "11.9"),
    ("Vandalism", "270.4", "252.7"),
]


def test_dot_leaders_are_no_part_of_the_label_they_lead_from(tmp_path: Path) -> None:
    # At the parent the label cell kept its leaders ("Robbery . . . . . . ."), which no reader reads as its text.
    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 24
        for k, (label, *figures) in enumerate(LED):
            dots = " ." * (40 - len(label)) if k % 2 == 0 else "." * (60 - len(label))
            _text(c, 72, y - 12 * k, f"{label}{'' if k % 2 == 0 else ' '}{dots}", size=9)
            for j, figure in enumerate(figures):
                c.setFont("Helvetica", 9)  # type: ignore[attr-defined]
                c.drawRightString(330 + 60 * j, y - 12 * k, figure)  # type: ignore[attr-defined]
        _prose(c, 72, y - 12 * len(LED) - 20, 90, 3, start=36)

    (table,) = table_blocks(drawn_layout(tmp_path / "leaders.pdf", draw))
    assert table_rows(table) == [list(row) for row in LED]


#: Measurements right-aligned under column names wider than their figures, numbered rows (R's data frames printed
#: with their row names), the names reaching out over the gap towards the row numbers.
FLOWERS = [
    ("", "Sepal.Length", "Sepal.Width", "Petal.Length", "Species"),
    ("1", "5.1", "3.5", "1.4", "setosa"),
    ("2", "4.9", "3.0", "1.4", "setosa"),
    ("3", "7.0", "3.2", "4.7", "versicolor"),
    ("4", "6.3", "3.3", "6.0", "virginica"),
    ("5", "5.8", "2.7", "5.1", "virginica"),
]


def test_column_names_wider_than_their_figures_head_their_own_columns(tmp_path: Path) -> None:
    # At the parent "Sepal.Length" reached past the middle of the gap before it and was taken to span the row
    # numbers' column too; the next name then shared a column with it, and the header row was lost.
    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 24
        for k, row in enumerate(FLOWERS):
            c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
            for x, text in zip((90, 150, 220, 290, 360), row, strict=True):
                c.drawRightString(x, y - 12 * k, text)  # type: ignore[attr-defined]
        _prose(c, 72, y - 12 * len(FLOWERS) - 20, 90, 3, start=36)

    (table,) = table_blocks(drawn_layout(tmp_path / "flowers.pdf", draw))
    assert table_rows(table) == [list(row) for row in FLOWERS]


#: A balance sheet's two sides in one table with no rule, lowercase labels (fcolumn's manual sets its example so),
#: under a title centred on the whole table.
SHEET = [
    ("properties", "31 dec 2014", "debts", "31 dec 2014"),
    ("house", "200.000,00", "equity capital", "50.000,00"),
    ("bank account", "-603,23", "mortgage", "150.000,00"),
    ("savings", "28.000,00", "", ""),
    ("cash", "145,85", "profit", "27.542,62"),
]


def test_a_title_centred_on_the_table_is_no_header_of_its_middle_columns(tmp_path: Path) -> None:
    # Read as a header, "Balance sheet" spanned the two middle columns; it is the table's title, and stays text.
    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 24
        c.setFont("Helvetica-Bold", 10)  # type: ignore[attr-defined]
        c.drawCentredString(260, y, "Balance sheet")  # type: ignore[attr-defined]
        for k, row in enumerate(SHEET, start=1):
            for j, text in enumerate(row):
                c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
                if j % 2:
                    c.drawRightString((230, 450)[j // 2], y - 13 * k, text)  # type: ignore[attr-defined]
                else:
                    c.drawString((72, 290)[j // 2], y - 13 * k, text)  # type: ignore[attr-defined]
        _prose(c, 72, y - 13 * 7 - 20, 90, 3, start=36)

    layout = drawn_layout(tmp_path / "sheet.pdf", draw)
    (table,) = table_blocks(layout)
    assert table_rows(table) == [list(row) for row in SHEET]
    assert any(b.text == "Balance sheet" for b in layout.blocks if b.kind is not Kind.TABLE)


#: A statistical table's two-level header: each group's name centred over its three columns of right-aligned figures
#: (narrower than the three together, so its ends reach only two of them), the years under it.
GROUPS = ("Total arrests", "Under 18 years", "Rate per 100,000")


def test_a_groups_header_centred_over_three_columns_spans_all_three(tmp_path: Path) -> None:
    # At the parent "Total arrests" spanned the two columns its ends reached, and the third's header cell was empty.
    def draw(c: object) -> None:
        y = _prose(c, 72, 780, 90, 3) - 30
        for g, name in enumerate(GROUPS):
            left = 240 + 100 * g
            c.setFont("Helvetica", 8)  # type: ignore[attr-defined]
            c.drawCentredString(left + 43, y, name)  # type: ignore[attr-defined]
            for j, year in enumerate(("2000", "2005", "2009")):
                _right(c, left + 28 + 31 * j, y - 10, year, size=8)
        _text(c, 72, y - 10, "Offense charged", size=8)
        for k, label in enumerate(("Total", "Robbery", "Arson", "Vandalism", "Fraud")):
            _text(c, 72, y - 22 - 10 * k, label, size=8)
            for j in range(9):
                _right(
                    c, 240 + 100 * (j // 3) + 28 + 31 * (j % 3), y - 22 - 10 * k, f"{100 + 37 * k + j:,}.{j}", size=8
                )
        _prose(c, 72, y - 90, 90, 3, start=40)

    (table,) = table_blocks(drawn_layout(tmp_path / "groups.pdf", draw))
    rows = table_rows(table)
    assert rows[0] == ["", *(name for name in GROUPS for _ in range(3))]
    assert rows[1] == ["Offense charged", *(["2000", "2005", "2009"] * 3)]
    assert len(rows) == 7

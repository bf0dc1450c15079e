"""Tables without rules read from the alignment of many rows, on PDFs made here (issue 34, text-path tables without
rules): a list of donors in seven columns of upper-case names, where one name runs to a word space of the next column
and every side of every column gap holds five words or more."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from modelhost.docengine.types import Kind

from .conftest import drawn_layout, drawn_page, table_blocks, table_rows
from .test_unruled_tables import _right, _text

SURNAMES = ["GARCIA", "RODRIGUEZ", "FERNANDEZ", "LOPEZ", "MARTINEZ", "GONZALEZ", "PEREZ", "SANCHEZ", "ROMERO", "SOSA"]
GIVEN = ["CLAUDIA", "MONICA", "FERNANDO", "JORGE", "MARIA", "JUAN", "CARLOS", "ANA", "LUIS", "SILVIA"]
#: Where the donor list's seven columns start (the last, amounts, is flush right at 575), in points.
DONOR_XS = (40, 150, 250, 330, 400, 470)


def _name(pool: list[str], k: int, words: int, width: float) -> str:
    """`words` names of `pool` (fewer where they would not fit), at least three word spaces short of `width`."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    names = [pool[(k * 7 + 3 * n) % len(pool)] for n in range(words)]
    while len(names) > 1 and stringWidth(" ".join(names), "Helvetica", 7) > width - 3 * stringWidth(
        " ", "Helvetica", 7
    ):
        names.pop()
    return " ".join(names)


def _tight_name(k: int, width: float, size: float) -> str:
    """Surnames and given names that end a word space short of `width`: a little more than Helvetica's (0.278 em)
    and less than 0.4 em, as wide as the text layer's narrowest word break (`textlayer.WORD_GAP`, 0.3 em) allows."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    space = stringWidth(" ", "Helvetica", size)
    pool = SURNAMES + GIVEN
    for n in (2, 3, 4):
        for names in itertools.permutations(pool[k % 5 :] + pool[: k % 5], n):
            text = " ".join(names)
            if width - 1.4 * space <= stringWidth(text, "Helvetica", size) <= width - 1.1 * space:
                return text
    raise AssertionError("no names of that width")


def _donor_rows(count: int) -> list[list[str]]:
    size = 7
    header = ["APELLIDO", "NOMBRE", "CUIT", "FECHA", "TIPO", "ORIGEN", "MONTO"]
    rows = [header]
    for k in range(count):
        tight = k % 5 == 2  # every fifth row runs its surnames to a word space of the given names' column
        surname = (
            _tight_name(k, DONOR_XS[1] - DONOR_XS[0], size)
            if tight
            else _name(SURNAMES, k, 2 + k % 2, DONOR_XS[1] - DONOR_XS[0])
        )
        given = (  # every third row runs its given names to a word space of the next column: some rows both
            _tight_name(k + 1, DONOR_XS[2] - DONOR_XS[1], size)
            if k % 3 == 1
            else _name(GIVEN, k + 1, 2 + k % 2, DONOR_XS[2] - DONOR_XS[1])
        )
        rows.append(
            [
                surname,
                given,
                f"20-{10_000_000 + 7_919 * k:08d}-{k % 10}",
                f"{1 + k % 28:02d}/{1 + k % 12:02d}/2013",
                "CHEQUE" if k % 3 else "EFECTIVO",
                "JURIDICA" if k % 4 else "PERSONA FISICA",
                f"{(k * 3_517) % 90_000 + 100},00",
            ]
        )
    return rows


DONORS = _donor_rows(40)


def _donors(c: object) -> None:
    for k, row in enumerate(DONORS):
        font = "Helvetica-Bold" if k == 0 else "Helvetica"
        for x, cell in zip(DONOR_XS, row, strict=False):
            _text(c, x, 800 - 10 * k, cell, font, 7)
        _right(c, 575, 800 - 10 * k, row[-1], font, 7)


def test_a_donor_list_of_seven_columns_of_names_keeps_every_cell_whole(tmp_path: Path) -> None:
    # Seven columns: each side of each column gap holds five words or more (two or three names a cell), which read
    # as two columns of prose parted by a gutter and cut the rows there; the table fell into pieces and lost its
    # names. Counted in each side's own column (the next gap runs down the same rows), no side is running text. And
    # a row whose surnames and given names both run to a word space of the next column (two tight fits) ended the
    # table: a row may close all its separators but one by tight fits.
    (table,) = table_blocks(drawn_layout(tmp_path / "donors.pdf", _donors))
    assert table_rows(table) == DONORS


# Two tables side by side, each under a header of its own (a page of small data tables, LaTeX's tabulars set in one
# line), and one table of figures set in two blocks with no header (a long column broken to save room).

COUNTRIES = [
    ["Country", "Population", "Area"],
    ["Austria", "8,917", "83.9"],
    ["Belgium", "11,555", "30.7"],
    ["Czech Republic", "10,701", "78.9"],
    ["Denmark", "5,831", "43.1"],
    ["Estonia", "1,331", "45.3"],
    ["Finland", "5,530", "338.5"],
    ["Greece", "10,718", "132.0"],
    ["Hungary", "9,750", "93.0"],
]
RAINFALL = [
    ["Year", "Rainfall", "Days", "Snow"],
    *[[str(2015 + k), f"{612.4 + 37.1 * k:.1f}", str(141 + 9 * k), f"{0.12 + 0.07 * k:.2f}"] for k in range(6)],
]


def _latex(c: object, x: float, y: float, rows: list[list[str]], aligns: str) -> None:
    """`rows` set as LaTeX's tabular sets them with no rule: each column as wide as its widest cell, 12 pt apart
    (twice `\\tabcolsep`), Times at 10 pt on 12 pt lines."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    widths = [max(stringWidth(row[c], "Times-Roman", 10) for row in rows) for c in range(len(aligns))]
    for k, row in enumerate(rows):
        left = x
        for cell, width, align in zip(row, widths, aligns, strict=True):
            if align == "l":
                _text(c, left, y - 12 * k, cell, "Times-Roman")
            else:
                _right(c, left + width, y - 12 * k, cell, "Times-Roman")
            left += width + 12


def test_two_tables_side_by_side_each_under_its_own_header_are_two_tables(tmp_path: Path) -> None:
    # The two tables' columns stand apart down the rows they share, so they read as one table of seven columns, and
    # only one of them could be found in it. Each block has a header of words of its own and the right one ends two
    # rows before the left: two tables.
    def draw(c: object) -> None:
        _text(c, 72, 790, "The tables below give each country's population and the rainfall of the years since.")
        _latex(c, 60, 760, COUNTRIES, "lrr")
        _latex(c, 330, 760, RAINFALL, "rrrr")
        _text(c, 72, 620, "Both were compiled from the national statistics offices' yearly reports on the region.")

    left, right = table_blocks(drawn_layout(tmp_path / "side.pdf", draw))
    assert table_rows(left) == COUNTRIES
    assert table_rows(right) == RAINFALL


@pytest.mark.parametrize("offset", [0.0, 6.5])
def test_a_table_of_figures_set_in_two_blocks_without_a_header_is_one_table(tmp_path: Path, offset: float) -> None:
    # Three columns of figures broken into two blocks side by side, the right one two rows shorter, no header: one
    # table, never two tables parted by the blocks' lengths. Where the right block stands half a row lower (its own
    # text column's grid), no line holds both blocks and each read as a table of its own: the right block goes on
    # the left one's rows (`unruled._continued`), in the order its reader takes them.
    rows = [[str(101 + 7 * k), f"{12.5 + 3.25 * k:.2f}", str(40_000 - 913 * k)] for k in range(40)]

    def draw(c: object) -> None:
        for k, row in enumerate(rows):
            x, y = (70, 760 - 13 * k) if k < 21 else (320, 760 - 13 * (k - 21) - offset)
            for n, cell in enumerate(row):
                _right(c, x + 60 + 70 * n, y, cell)

    (table,) = table_blocks(drawn_layout(tmp_path / "blocks.pdf", draw))
    cells = [cell for row in table_rows(table) for cell in row if cell]
    assert sorted(cells) == sorted(cell for row in rows for cell in row)
    if offset:
        assert table_rows(table) == rows


def test_two_tables_of_figures_side_by_side_each_under_its_own_header_stay_two_tables(tmp_path: Path) -> None:
    # The same blocks, each under column names of its own (in the body face): two tables, not one going on.
    def draw(c: object) -> None:
        for x, dy, first in ((70, 0.0, 0), (320, 6.5, 20)):
            for n, name in enumerate(("Count", "Mean", "Total")):
                _right(c, x + 60 + 70 * n, 773 - dy, name)
            for k in range(20 - first // 4):
                for n, cell in enumerate([str(101 + k + first), f"{12.5 + k:.2f}", str(40_000 - 913 * (k + first))]):
                    _right(c, x + 60 + 70 * n, 760 - 13 * k - dy, cell)

    assert len(table_blocks(drawn_layout(tmp_path / "two.pdf", draw))) == 2


LISTING = [
    "% in preamble:",
    "\\pgfplotstableset{",
    "    alias/newname/.initial=b,",
    "}",
    "% in document:",
    "\\pgfplotstabletypeset[",
    "    columns={a,newname},",
    "]{table.dat}",
]


def test_a_small_table_beside_the_code_listing_that_makes_it_takes_none_of_the_listing(tmp_path: Path) -> None:
    # A manual's example: a table of two columns, and a column gap to its right, the listing that typesets it
    # (pgfplotstable's manual, tables_dev/pgfplotstable_p10). Its lines stood in the table's rows as a third column of
    # cells, most of them alone on their rows. Every word of that column is monospace, none of the table's is: it is
    # a listing beside the table, and stays code.
    table = [["a", "newname"], ["1", "2"], ["3", "4"], ["5", "6"]]

    def draw(c: object) -> None:
        _text(c, 72, 790, "Assigns the new name to the column denoted by its real name; the example shows the table.")
        for k, (a, b) in enumerate(table):
            _right(c, 100, 760 - 12 * k, a)
            _right(c, 160, 760 - 12 * k, b)
        for k, line in enumerate(LISTING):
            _text(c, 200, 760 - 11 * k, line, "Courier", 9)
        _text(c, 72, 650, "You can use the column's style to assign styles for the alias, not for the original name.")

    layout = drawn_layout(tmp_path / "listing.pdf", draw)
    (found,) = table_blocks(layout)
    assert table_rows(found) == table
    code = " ".join(b.text for b in layout.blocks if b.kind is Kind.CODE)
    assert all(line.strip() in code for line in LISTING)


# Two tables of one key column side by side, each under its own column names ("dof error1 | dof error2"), their
# figures set in math mode (pgfplotstable's manual, tables_dev/pgfplotstable_p5: `6.25 · 10−2`, the decimal point
# from a math font).

DOF = ["4", "16", "64", "256", "1,024", "4,096", "16,384", "65,536"]
ERRORS = (
    ["0.25", "0.0625", "0.0156", "0.0039", "0.00098", "0.00024", "0.000061", "0.000015"],
    ["0.76", "0.5", "0.29", "0.14", "0.0442", "0.017", "0.0082", "0.0039"],
)


def _keyed(c: object) -> None:
    _text(c, 72, 790, "The first argument can be a file name or a table loaded before, as in both examples here.")
    for x, name, errors in ((100, "error1", ERRORS[0]), (300, "error2", ERRORS[1])):
        for k, (dof, error) in enumerate([("dof", name), *zip(DOF, errors, strict=True)]):
            _right(c, x, 760 - 12 * k, dof)
            _right(c, x + 70, 760 - 12 * k, error)
    _text(c, 72, 640, "It is checked automatically whether the first argument contains inline data or a file name.")


def test_two_tables_sharing_their_key_column_side_by_side_are_two_tables(tmp_path: Path) -> None:
    # One run of four columns, its header "dof error1 dof error2": the first column's name repeats at the middle,
    # every name a word (years repeated over two groups are figures). At the parent: one table of four columns.
    first, second = table_blocks(drawn_layout(tmp_path / "keyed.pdf", _keyed))
    assert table_rows(first) == [["dof", "error1"], *[list(r) for r in zip(DOF, ERRORS[0], strict=True)]]
    assert table_rows(second) == [["dof", "error2"], *[list(r) for r in zip(DOF, ERRORS[1], strict=True)]]


def test_figures_set_in_a_math_font_are_a_table_of_figures(tmp_path: Path) -> None:
    # LaTeX sets a table's figures in math mode (pgfplotstable: `$6.25\\cdot 10^{-2}$`): their decimal points, and so
    # the words, come from a math font. More than half the run's words in math fonts read as display equations, and
    # the table was lost; a figure set in a math font is a figure.
    import dataclasses

    import pypdfium2 as pdfium

    from modelhost.docengine.textlayer import read_text_layer
    from modelhost.docengine.unruled import find_unruled

    rows = [["dof", "error"], *[list(r) for r in zip(DOF, ERRORS[0], strict=True)]]
    drawn_page(tmp_path / "math.pdf", lambda c: _latex(c, 200, 760, rows, "rr"))
    doc = pdfium.PdfDocument(str(tmp_path / "math.pdf"))
    try:
        words = read_text_layer(doc, 0).words
    finally:
        doc.close()
    as_latex = [dataclasses.replace(w, math=w.text not in ("dof", "error")) for w in words]
    (found,) = find_unruled(as_latex, 10.0)
    assert [[c.text if c else "" for c in row] for row in found.table.grid()] == rows
    # An equation's words are no figures: set in math fonts they stay no table.
    equations = [
        dataclasses.replace(w, math=True, text="x" if w.text not in ("dof", "error") else w.text) for w in words
    ]
    assert find_unruled(equations, 10.0) == []


def test_row_labels_of_two_words_row_numbers_and_a_header_wider_than_its_column_are_kept(tmp_path: Path) -> None:
    # R's data sets as LaTeX sets them with no rule: row names of two or three words ("Mazda RX4", "Hornet 4 Drive")
    # in a stub before right-aligned figures, and an extract with its row numbers right-aligned before the figures.
    # Each name is one cell, each row number a cell of its own column. The extract's last column, left-aligned,
    # holds only "setosa", narrower than its name "Species": the header row reached past the run's right end and
    # was left out of the table as a line of text (at 928fb4c); a header row may overhang the run's ends by a few
    # ems (`unruled.HEADER_OVERHANG`).
    cars = [
        ["", "mpg", "cyl", "disp", "hp"],
        ["Mazda RX4", "21.0", "6", "160.0", "110"],
        ["Mazda RX4 Wag", "21.0", "6", "160.0", "110"],
        ["Datsun 710", "22.8", "4", "108.0", "93"],
        ["Hornet 4 Drive", "21.4", "6", "258.0", "110"],
        ["Hornet Sportabout", "18.7", "8", "360.0", "175"],
    ]
    flowers = [
        ["", "Sepal.Length", "Sepal.Width", "Species"],
        *[[str(k), f"{4.6 + 0.1 * k:.1f}", f"{3.0 + 0.1 * k:.1f}", "setosa"] for k in range(1, 7)],
    ]

    def draw(c: object) -> None:
        _text(c, 72, 790, "The first rows of two of R's data sets, as the report prints them, one under the other.")
        _latex(c, 150, 760, cars, "lrrrr")
        _text(c, 72, 670, "Table 2: the first rows of the flowers, with their row numbers.")
        _latex(c, 150, 640, flowers, "rrrl")

    first, second = table_blocks(drawn_layout(tmp_path / "data.pdf", draw))
    assert table_rows(first) == cars
    assert table_rows(second) == flowers


def test_a_word_whose_box_is_taller_than_its_type_joins_a_line_without_widening_it() -> None:
    # lme4's vignette (tables_dev/lme4_lmer_p30): "β̂" at the end of a row, its math accent's glyph box 37 pt tall at
    # 10.9 pt, reached over the next two rows; they joined its line, and the table read "fixef (5.2.2) formula
    # (2.2.1)" as one row. The tall word joins the line it stands on and leaves the line's extent as it was
    # (`lines.TALL`).
    from modelhost.docengine.lines import lines
    from modelhost.docengine.types import Word

    rows = [("fixef", "Estimates"), ("formula", "Mixed-model"), ("logLik", "Maximum")]
    words = [
        Word(text, (x, 343.0 + 13.6 * k, x + 30.0, 354.0 + 13.6 * k), "LMRoman10-Regular", 10.9)
        for k, row in enumerate(rows)
        for x, text in zip((87.0, 185.0), row, strict=True)
    ]
    words.append(Word("βb", (384.5, 340.4, 392.2, 377.5), "LMMathItalic10-Regular", 10.9))
    found = [[w.text for w in line] for line in lines(words)]
    assert found == [["fixef", "Estimates", "βb"], ["formula", "Mixed-model"], ["logLik", "Maximum"]]
    # A display's sum sign is as tall (coin's vignette: 30 pt at 10 pt), and its limits under it, in smaller type,
    # stay on its line: they join within what the tall sign reaches.
    display = [
        Word("CA(ξ)", (230.1, 384.0, 259.9, 394.9), "LMRoman10-Regular", 10.9),
        Word("X", (294.9, 382.0, 309.3, 412.0), "LMMathExtension10-Regular", 10.0),
        Word("j∈{aa,aA,AA}", (274.4, 399.1, 329.7, 407.1), "LMMathItalic8-Regular", 8.0),
        Word("ξ", (331.5, 384.0, 336.4, 394.9), "LMMathItalic10-Regular", 10.9),
    ]
    assert [[w.text for w in line] for line in lines(display)] == [["CA(ξ)", "j∈{aa,aA,AA}", "X", "ξ"]]

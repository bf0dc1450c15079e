"""Long tables without rules, on pages drawn here (issue 34: a report generator's list of donors, most of the page,
no rule, no prose around it): cells of several words one space apart, codes, amounts right-aligned with thousands
separators, a running footer. Where the widest cells of two neighbouring columns meet on one row, only a word
space parts them; what says the columns go on there is the other rows, whose gaps stand at the same x.
tables_dev/phonenumbers_p95 is a real page of the kind (a list of place names in two blocks side by side)."""

from __future__ import annotations

from pathlib import Path

from reportlab.pdfbase.pdfmetrics import stringWidth

from modelhost.docengine.analyse import analyse, document_style
from modelhost.docengine.types import Kind, PageLayout

from .conftest import drawn_page, table_blocks, table_rows

FONT, SIZE, LEAD = "Helvetica", 8.0, 10.0
SPACE = stringWidth(" ", FONT, SIZE)  # a word space: 0.278 em, as wide as the spaces inside the names

DONORS = [
    ("RODRIGUEZ PINGITORE", "CLAUDIA MONICA", "SAN JUAN", "PR", "C00431445", "1,000.00"),
    ("SMITH", "JOHN", "NEW YORK", "NY", "C00431445", "250.00"),
    ("VAN DER BERG", "ANNA", "LOS ANGELES", "CA", "C00431569", "50.00"),
    ("O'CONNOR", "PATRICK", "BOSTON", "MA", "C00431445", "500.00"),
    ("DE LA CRUZ", "JOSE LUIS", "EL PASO", "TX", "C00431569", "75.00"),
    ("LEE", "SUN HEE", "SEATTLE", "WA", "C00431445", "100.00"),
    ("MC DONALD", "MARY", "SALT LAKE CITY", "UT", "C00431445", "2,300.00"),
    ("NGUYEN", "THANH", "SAN JOSE", "CA", "C00431569", "750.00"),
]


def _layout(path: Path, rows: list[tuple[str, ...]], gaps: tuple[float, ...]) -> PageLayout:
    """`rows` from the top of an otherwise empty page (a page number and a generator's footer at its foot): each
    column left-aligned `gaps[k]` points after the widest cell of the one before, the last right-aligned."""
    widths = [max(stringWidth(row[k], FONT, SIZE) for row in rows) for k in range(len(rows[0]))]
    xs = [36.0]
    for width, gap in zip(widths, gaps, strict=False):
        xs.append(xs[-1] + width + gap)

    def draw(c: object) -> None:
        c.setFont(FONT, SIZE)  # type: ignore[attr-defined]
        for n, row in enumerate(rows):
            y = 780 - LEAD * n
            for k, text in enumerate(row):
                if k == len(row) - 1:
                    c.drawRightString(xs[k] + widths[k], y, text)  # type: ignore[attr-defined]
                else:
                    c.drawString(xs[k], y, text)  # type: ignore[attr-defined]
        c.setFont(FONT, 7)  # type: ignore[attr-defined]
        c.drawString(36, 30, "Itemized receipts, report generated 12/01/2012")  # type: ignore[attr-defined]
        c.drawRightString(559, 30, "Page 1 of 3")  # type: ignore[attr-defined]

    content = drawn_page(path, draw)
    return analyse(content, document_style([content]))


def test_a_list_whose_first_row_holds_its_widest_names_a_space_apart_is_one_table(tmp_path: Path) -> None:
    # No header: the first row's surname and given names are the widest of their columns, each a word space from the
    # next column, and its amount the widest, a word space after a code column whose cells all end at one x. At the
    # parent that row was read as a header over the columns (its names one cell across three of them), the second
    # as another, and the table stopped at the first row whose amount ran to a space of the codes: the rest was text.
    rows = DONORS * 5
    layout = _layout(tmp_path / "donors.pdf", rows, (SPACE, SPACE, 14.0, 10.0, SPACE))
    (table,) = table_blocks(layout)
    assert table_rows(table) == [list(row) for row in rows]
    assert not any("PATRICK" in b.text for b in layout.blocks if b.kind is not Kind.TABLE)


def test_an_amount_a_space_after_a_column_of_codes_stays_in_its_own_column(tmp_path: Path) -> None:
    # The widest amounts ("1,000.00", "2,300.00") are right-aligned a word space after the codes, on two rows of
    # forty; every other row leaves a column gap there. At the parent each such row closed the gap (the space is not
    # where the amounts' column starts: the narrower amounts start further right), ending the table above it.
    rows = [row[:2] + row[4:] for row in DONORS[1:]] * 5 + [DONORS[0][:2] + DONORS[0][4:]]
    layout = _layout(tmp_path / "amounts.pdf", rows, (14.0, 14.0, SPACE))
    (table,) = table_blocks(layout)
    assert table_rows(table) == [list(row) for row in rows]


def test_a_header_whose_column_names_stand_a_space_apart_does_not_join_the_columns_under_it(tmp_path: Path) -> None:
    # Every column half an em after the widest cell before it, the header's names as wide as their cells: the run
    # starts at the header, where "COMMITTEE" and "AMOUNT" stand half an em apart (no column gap), so its separators
    # had one column fewer than every row under it parts. At the parent the code and the amount of each of the forty
    # rows were one cell ("C00431445 1,000.00").
    header = ("LAST NAME", "FIRST NAME", "CITY", "ST", "COMMITTEE", "AMOUNT")
    rows = [header, *DONORS * 5]
    layout = _layout(tmp_path / "header.pdf", rows, (0.5 * SIZE,) * 5)
    (table,) = table_blocks(layout)
    assert table_rows(table) == [list(row) for row in rows]


def test_a_code_name_and_an_amount_name_a_space_apart_over_their_columns_are_two_header_cells(tmp_path: Path) -> None:
    # The header stands above the run (its rows part one column more): "COMMITTEE" starts where the codes start and
    # "AMOUNT" ends where the right-aligned amounts end, a space narrower than a column gap apart. At the parent
    # the two names were one header cell spanning both columns ("COMMITTEE AMOUNT"), two of the table's cells lost.
    header = ("LAST NAME", "FIRST NAME", "CITY", "ST", "COMMITTEE", "AMOUNT")
    rows = [header, *DONORS * 5]
    layout = _layout(tmp_path / "names.pdf", rows, (14.0, 14.0, 14.0, 14.0, 0.6 * SIZE))
    (table,) = table_blocks(layout)
    assert table_rows(table) == [list(row) for row in rows]

"""A group's header marked by the rule drawn under it, on PDFs made here (issue 34, text-path tables: the held-out
tables-rival kind of an annual report's remuneration table, a year range over six columns of figures): a table of
figures with no rule between its rows or columns, a header naming a range of years over the year columns, and a rule
under that header as wide as the columns it names. Centring cannot tell those columns (a name centred over six equal
columns is as well centred over the middle two, and a name set flush left over them is centred over none); the rule
can, and a rule under every column, or a name's own underline, must mark nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import drawn_layout, table_blocks, table_rows
from .test_unruled_tables import _right, _text

YEARS = ["2019", "2020", "2021", "2022", "2023", "2024"]
ROWS = [
    ("Base salary", "1,020", "1,045", "1,070", "1,100", "1,130", "1,160"),
    ("Annual bonus", "612", "0", "803", "880", "904", "928"),
    ("Long-term incentive", "1,530", "1,210", "1,605", "1,650", "1,695", "1,740"),
    ("Pension", "204", "209", "214", "220", "226", "232"),
    ("Other benefits", "31", "28", "35", "36", "40", "41"),
    ("Total", "3,397", "2,537", "3,727", "3,886", "3,995", "4,101"),
]
#: The year columns' right edges (figures flush right), 55 points apart; the labels start at 72.
RIGHTS = [260 + 55 * k for k in range(6)]


def _draw(header_at: str, rule: str):
    """The table under a header "2019–2024" set `header_at` ("centre" over the six columns or "left" over the
    first), with a `rule` under it: "columns" (from the first year column's left to the last's right), "all" (under
    the labels too: the table's own rule) or "name" (an underline as wide as the name)."""

    def draw(c: object) -> None:
        _text(c, 72, 780, "Remuneration of the Executive Board", "Helvetica-Bold", 12)
        y = 740
        name = "2019–2024"
        left, right = RIGHTS[0] - 30, RIGHTS[-1]
        if header_at == "centre":
            from reportlab.pdfbase.pdfmetrics import stringWidth

            x = (left + right) / 2 - stringWidth(name, "Helvetica-Bold", 9) / 2
        else:
            x = left
        _text(c, x, y, name, "Helvetica-Bold", 9)
        c.setLineWidth(0.5)  # type: ignore[attr-defined]
        if rule == "columns":
            c.line(left, y - 4, right, y - 4)  # type: ignore[attr-defined]
        elif rule == "all":
            c.line(72, y - 4, right, y - 4)  # type: ignore[attr-defined]
        else:
            from reportlab.pdfbase.pdfmetrics import stringWidth

            c.line(x, y - 2, x + stringWidth(name, "Helvetica-Bold", 9), y - 2)  # type: ignore[attr-defined]
        y -= 14
        _text(c, 72, y, "EUR thousand", "Helvetica-Bold", 9)
        for x_right, year in zip(RIGHTS, YEARS, strict=True):
            _right(c, x_right, y, year, "Helvetica-Bold", 9)
        y -= 14
        for row in ROWS:
            _text(c, 72, y, row[0], size=9)
            for x_right, value in zip(RIGHTS, row[1:], strict=True):
                _right(c, x_right, y, value, size=9)
            y -= 12

    return draw


@pytest.mark.parametrize("header_at", ["centre", "left"])
def test_a_rule_under_a_group_header_spans_the_columns_it_reaches(tmp_path: Path, header_at: str) -> None:
    (table,) = table_blocks(drawn_layout(tmp_path / "spanner.pdf", _draw(header_at, "columns")))
    rows = table_rows(table)
    assert rows[0] == ["", *["2019–2024"] * 6]
    assert rows[1] == ["EUR thousand", *YEARS]
    assert rows[-1] == list(ROWS[-1])


@pytest.mark.parametrize("rule", ["all", "name"])
def test_a_rule_under_every_column_or_under_the_name_alone_marks_no_span(tmp_path: Path, rule: str) -> None:
    """The table's own rule under the whole header, and a name's underline, leave the centred header where centring
    puts it: over the middle two of the six columns it is centred on."""
    (table,) = table_blocks(drawn_layout(tmp_path / "no_spanner.pdf", _draw("centre", rule)))
    rows = table_rows(table)
    assert rows[0].count("2019–2024") == 2
    assert rows[1] == ["EUR thousand", *YEARS]

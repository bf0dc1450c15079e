"""A statistical table whose column labels stand in a box of rules of their own, on PDFs made here: vertical rules
between the column groups run the table's height, and rules between one group's column labels stand only as tall as
the labels (a tax table: `Single | Qualifying widow(er) | Married filing separately` under `And you are—`), with
no rule between the figures under them. Those short rules part the labels, not the body's columns."""

from __future__ import annotations

from pathlib import Path

from modelhost.docengine.analyse import analyse, document_style
from modelhost.docengine.types import Kind

from .conftest import drawn_page, table_rows

#: The body: a range's two ends, then three figures, one per filing status.
BODY = tuple(
    (f"{lo:,}", f"{lo + 50:,}", f"{t:,}", f"{t - 4114:,}", f"{t + 385:,}")
    for lo, t in ((95_000 + 50 * k, 20_718 + 14 * k) for k in range(16))
)
#: The column labels, each wrapped over up to three lines, and the two groups' labels over them.
LABELS = (("At", "least"), ("But", "less", "than"), ("Single",), ("Qualifying", "widow(er)"), ("Married", "filing"))
GROUPS = ("If line 40 is—", "And you are—")
#: The columns' right edges and the rules: the table's sides, and one between the two groups; between the second
#: group's labels, rules as tall as the labels' box only.
RIGHTS = (75, 115, 165, 215, 265)
SIDES, GROUP_RULE, LABEL_RULES = (20.0, 275.0), 125.0, (172.0, 222.0)
SIZE = 8.0


def _tax_table(c: object, dx: float = 0.0, top_rule: bool = True, broken: bool = False) -> None:
    """The table, `dx` points right of its place; `top_rule`: with its own rule over it; `broken`: its vertical rules
    drawn in two pieces each, 4 points apart between two body rows (3 between the strokes' painted ends, as the
    IRS's bars leave them)."""
    c.setFont("Helvetica", SIZE)  # type: ignore[attr-defined]
    top = 760.0
    for label, left, right in zip(GROUPS, (SIDES[0], GROUP_RULE), (GROUP_RULE, SIDES[1]), strict=True):
        c.drawCentredString(dx + (left + right) / 2, top - 10, label)  # type: ignore[attr-defined]
    labels_top, labels_bottom = top - 14, top - 14 - 3 * 9 - 4
    for x, label in zip(RIGHTS, LABELS, strict=True):
        for n, part in enumerate(label):
            c.drawRightString(dx + x, labels_top - 9 * (n + 1), part)  # type: ignore[attr-defined]
    y = labels_bottom - 10
    for row in BODY:
        for x, figure in zip(RIGHTS, row, strict=True):
            c.drawRightString(dx + x, y, figure)  # type: ignore[attr-defined]
        y -= 9
    bottom = y + 5
    c.setLineWidth(0.5)  # type: ignore[attr-defined]
    for rule_y in (top, labels_top, labels_bottom, bottom)[0 if top_rule else 1 :]:
        c.line(dx + SIDES[0], rule_y, dx + SIDES[1], rule_y)  # type: ignore[attr-defined]
    gap = labels_bottom - 10 - 9 * (len(BODY) // 2) + 6.5  # between two body rows: 3 points, no rule in it
    for x in (*SIDES, GROUP_RULE):
        for y0, y1 in ((top, gap + 2), (gap - 2, bottom)) if broken else ((top, bottom),):
            c.line(dx + x, y0, dx + x, y1)  # type: ignore[attr-defined]
    for x in LABEL_RULES:
        c.line(dx + x, labels_top, dx + x, labels_bottom)  # type: ignore[attr-defined]


def test_rules_between_column_labels_only_part_no_column_of_figures(tmp_path: Path) -> None:
    content = drawn_page(tmp_path / "tax.pdf", _tax_table)
    (table,) = [b for b in analyse(content, document_style([content])).blocks if b.kind is Kind.TABLE]
    rows = table_rows(table)
    # every figure a cell of its own under its label (at the parent the three figures of a row were one cell,
    # spanning the second group's three columns: the labels' rules were taken as the columns' lines)
    assert rows[-len(BODY) :] == [list(row) for row in BODY]
    assert [" ".join(label) for label in LABELS] in rows


def _side_by_side(c: object) -> None:
    """Two tax tables side by side, `GAP` points apart, each boxed by its own rules, under one rule over both."""
    _tax_table(c, top_rule=False)
    _tax_table(c, dx=SIDES[1] - SIDES[0] + GAP, top_rule=False)
    c.line(SIDES[0], 760, 2 * SIDES[1] - SIDES[0] + GAP, 760)  # type: ignore[attr-defined]


#: The gap between the two tables (points): the IRS sets its tax tables 9 points apart.
GAP = 9.0


def test_two_boxed_tables_side_by_side_under_one_rule_are_two_tables(tmp_path: Path) -> None:
    content = drawn_page(tmp_path / "pair.pdf", _side_by_side)
    tables = [b for b in analyse(content, document_style([content])).blocks if b.kind is Kind.TABLE]
    # each its own five columns, its rows at the same heights as the other's (at the parent: one table of both)
    assert len(tables) == 2
    for table in tables:
        assert table_rows(table)[-len(BODY) :] == [list(row) for row in BODY]


def test_rules_broken_for_three_points_between_rows_are_one_table(tmp_path: Path) -> None:
    content = drawn_page(tmp_path / "broken.pdf", lambda c: _tax_table(c, broken=True))
    (table,) = [b for b in analyse(content, document_style([content])).blocks if b.kind is Kind.TABLE]
    # every row in one table (at the parent the rows under the break were a table of their own)
    assert table_rows(table)[-len(BODY) :] == [list(row) for row in BODY]

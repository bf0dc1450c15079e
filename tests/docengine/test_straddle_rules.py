"""A statistical abstract's table with straddle rules: under each group's label a rule runs between the group's
vertical rules only (over its columns, not over the stub), inside the header band the rule under the column labels
closes. The stub's header, set beside the group labels, still heads both header rows."""

from __future__ import annotations

from pathlib import Path

from modelhost.docengine.analyse import analyse, document_style
from modelhost.docengine.types import Kind

from .conftest import drawn_page, table_rows
from .test_dense_tables import GROUPS, HEADNOTE, PITCH, ROWS, SIZE, YEARS, _statistical_table


def _straddled(c: object) -> None:
    _statistical_table(c)
    # the header's top as `_statistical_table` sets it: under the caption and the headnote's lines
    y, line = 768.0, []
    for word in HEADNOTE.split():
        if c.stringWidth(" ".join([*line, word]), "Helvetica", SIZE) > 480:  # type: ignore[attr-defined]
            y, line = y - 8.5, []
        line.append(word)
    top = y - 3
    xs = [240 + PITCH * k + 12 * (k // 3) for k in range(9)]
    # a rule under each group's label, from the group's left rule (or the first column's left) to its right rule
    lefts = [xs[0] - 30, xs[3] - PITCH, xs[6] - PITCH]
    rights = [xs[3] - PITCH, xs[6] - PITCH, 520.0]
    for left, right in zip(lefts, rights, strict=True):
        c.line(left + 2, top - 11, right - 2, top - 11)  # type: ignore[attr-defined]


def test_straddle_rules_under_group_labels_keep_the_stub_header_over_both_header_rows(tmp_path: Path) -> None:
    # at the parent the first straddle rule was taken for the header's foot: the years' row fell out of the header
    # band and the stub's header ("Offense") headed the group labels' row only
    content = drawn_page(tmp_path / "straddled.pdf", _straddled)
    (table,) = [b for b in analyse(content, document_style([content])).blocks if b.kind is Kind.TABLE]
    rows = table_rows(table)
    assert rows[0] == ["Offense", *(label for label in GROUPS for _ in range(3))]
    assert rows[1] == ["Offense", *YEARS * 3]
    assert rows[2:] == [[" ".join(label), *figures] for label, figures in ROWS]

"""A row rule broken where one column goes unruled is one rule (tables._broken_rows).

Found on a bank's annual report (Wells Fargo's Table 5.14, tables_dev/tdr_modifications): the header's rules run the
table's width, and the body's rules under each block of rows run it too but for one column of rates, where each is
broken. The pieces stacked with no rule above them, so the header was a table of its own, the year's group row under
it a section heading, and the rows between the broken pieces were read as spanning the columns their pieces cover.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.types import Kind, Table

from .conftest import document_layouts, drawn_page

pytest.importorskip("reportlab")

#: The stub's left edge, each figure column's right edge (points), the table's right edge; the rates' column
#: (between the sixth and seventh edges) is the one the body's rules leave out.
LEFT, EDGES, RIGHT = 40.0, (200.0, 260.0, 320.0, 380.0, 440.0, 500.0), 560.0
GAP = (445.0, 505.0)
ROWS = [
    ("Commercial and industrial", "24", "24", "349", "397", "10.69%", "24"),
    ("Commercial real estate", "—", "12", "112", "124", "0.92", "12"),
    ("Lease financing", "—", "—", "2", "2", "—", "—"),
    ("Total commercial", "24", "36", "463", "523", "7.51", "36"),
    ("Residential mortgage", "1", "369", "1,357", "1,727", "1.61", "369"),
    ("Credit card", "—", "311", "—", "311", "20.33", "311"),
    ("Total consumer", "3", "706", "1,651", "2,360", "10.14", "706"),
]


def _statement(c: object) -> None:
    c.setFont("Helvetica", 7)  # type: ignore[attr-defined]
    c.setLineWidth(0.5)  # type: ignore[attr-defined]
    c.line(LEFT, 772, RIGHT, 772)  # type: ignore[attr-defined]
    # group labels over their columns, each underlined by a rule of its own (a two-level header)
    c.drawCentredString((EDGES[0] + EDGES[4]) / 2, 764, "Primary modification type")  # type: ignore[attr-defined]
    c.drawCentredString((EDGES[4] + RIGHT) / 2, 764, "Financial effects")  # type: ignore[attr-defined]
    c.line(EDGES[0], 760, EDGES[4] - 1, 760)  # type: ignore[attr-defined]
    c.line(EDGES[4] + 1, 760, RIGHT, 760)  # type: ignore[attr-defined]
    top = 760.0
    # column labels wrapped over up to five lines, set flush to their figures' right edge and to the header's foot
    labels = (
        ("Principal", "forgiveness"),
        ("Interest", "rate", "reduction"),
        ("Other", "concessions"),
        ("Total",),
        ("Weighted", "average", "interest", "rate", "reduction"),
        ("Recorded", "investment", "related to", "interest rate", "reduction"),
    )
    for edge, label in zip((*EDGES[1:], RIGHT), labels, strict=True):
        for k, line in enumerate(reversed(label)):
            c.drawRightString(edge - 2, top - 44 + 8 * k, line)  # type: ignore[attr-defined]
    c.drawString(LEFT + 2, top - 44, "($ in millions)")  # type: ignore[attr-defined]
    c.line(LEFT, top - 48, RIGHT, top - 48)  # type: ignore[attr-defined]
    y = top - 58
    for year in ("2022", "2021"):
        c.drawString(LEFT + 2, y, f"Year Ended December 31, {year}")  # type: ignore[attr-defined]
        y -= 11
        for r, row in enumerate(ROWS):
            c.drawString(LEFT + 8, y, row[0])  # type: ignore[attr-defined]
            for edge, text in zip((*EDGES[1:], RIGHT), row[1:], strict=True):
                c.drawRightString(edge - 2, y, text)  # type: ignore[attr-defined]
            if r in (2, 3, 5):
                # rules under blocks of rows, broken at the rates' column
                c.line(LEFT, y - 3, GAP[0], y - 3)  # type: ignore[attr-defined]
                c.line(GAP[1], y - 3, RIGHT, y - 3)  # type: ignore[attr-defined]
            y -= 11
        c.line(LEFT, y + 8, RIGHT, y + 8)  # type: ignore[attr-defined]
    c.setFont("Helvetica", 9)  # type: ignore[attr-defined]
    c.drawString(LEFT, y - 30, "Amounts represent the recorded investment in loans after the modification.")  # type: ignore[attr-defined]


def test_row_rules_broken_at_one_column_keep_header_and_body_one_table(tmp_path: Path) -> None:
    path = tmp_path / "statement.pdf"
    drawn_page(path, _statement)
    (layout,) = document_layouts(path)
    tables: list[Table] = [b.table for b in layout.blocks if b.kind is Kind.TABLE and b.table is not None]
    assert len(tables) == 1
    rows: dict[int, dict[int, str]] = {}
    for cell in tables[0].cells:
        rows.setdefault(cell.row, {})[cell.col] = cell.text
    # a row between two broken rules is a row of seven cells, not a label spanning the columns its rule covers
    lease = next(r for r in rows.values() if any("Lease financing" in v for v in r.values()))
    assert sorted(v for v in lease.values() if v) == sorted(["Lease financing", "—", "—", "2", "2", "—", "—"])
    # the year's group row is the table's, under its header, no section heading
    assert not [b for b in layout.blocks if b.kind is Kind.SECTION_HEADER]
    assert any("Year Ended December 31, 2022" in r.values() for r in rows.values())

"""A heading stands alone on its line: a key beside its value, and a continuation note, are no headings.

Found on report pages (issue 34): a deal summary's panel of bold labels (tables_dev/clo_deal_summary), each with its
value on its row ("Closing Date ... 04/23/2024"), came out as a run of `######` headings; an ISO standard's "NOTE" in
capitals, its text on the same line (PyMuPDF's test_2979.pdf), came out as a heading; "Continued on next page" in
italics at a table's foot, set larger than the table's type (tables_dev/hydrogen_projects_a1), came out as a heading.
A manual's code listings set no body size (tables_dev/reportlab_userguide_p87: 8-point listings longer than the
10-point prose between them made each prose line a heading). Controls: a bold heading on a line of its own over
prose stays a heading, and so does one in the left column of a two-column page whose row the right column's text
shares.
"""

from __future__ import annotations

from pathlib import Path

from modelhost.docengine.types import Kind, PageLayout

from .conftest import corpus, document_layouts, drawn_layout, wrapped_prose

PROSE = (
    "The collateral manager reports each month on the portfolio and its tests, and the trustee checks the figures "
    "against the accounts before the payment date. Each note is paid from the interest collected in the period, "
    "in the order the indenture sets, and the remainder goes to the principal account for reinvestment."
)
#: clo_deal_summary's panel of parties and dates: bold keys at the body size, each value flush right on its row.
KEYS = ["Rating Agencies", "Collateral Administrator", "Relationship Manager", "Closing Date", "Effective Date"]


def _headings(layout: PageLayout) -> list[str]:
    return [b.text for b in layout.blocks if b.kind in (Kind.SECTION_HEADER, Kind.TITLE)]


def test_bold_keys_beside_their_values_are_no_headings() -> None:
    (layout,) = document_layouts(corpus("tables_dev/clo_deal_summary.pdf"))
    headings = _headings(layout)
    assert not [h for h in headings if h in KEYS], headings
    text = "\n".join(b.text for b in layout.blocks)
    assert all(key in text for key in KEYS)
    # the panels' titles, alone on their lines, stay headings
    assert {"Miscellaneous Information", "Account Balances"} <= set(headings)


def _note_page(c: object) -> None:
    """A standard's clause, then a note: "NOTE" and the note's first line on one row, its other lines under both,
    all a point smaller than the clause."""
    c.setFont("Helvetica-Bold", 12)  # type: ignore[attr-defined]
    c.drawString(72, 770, "6.4.4 Determination of safety goals")  # type: ignore[attr-defined]
    c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
    y = wrapped_prose(c, PROSE, 745)
    c.setFont("Helvetica", 9)  # type: ignore[attr-defined]
    c.drawString(72, y - 20, "NOTE")  # type: ignore[attr-defined]
    c.drawString(120, y - 20, "Safety goals are top-level safety requirements for")  # type: ignore[attr-defined]
    c.drawString(72, y - 31, "the item, which the functional safety requirements are derived from.")  # type: ignore[attr-defined]
    c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
    wrapped_prose(c, PROSE, y - 50)


def test_a_note_label_with_its_text_on_its_line_is_no_heading(tmp_path: Path) -> None:
    headings = _headings(drawn_layout(tmp_path / "note.pdf", _note_page))
    assert "NOTE" not in headings, headings
    assert "6.4.4 Determination of safety goals" in headings


def _continued_page(c: object) -> None:
    c.setFont("Helvetica-Bold", 12)  # type: ignore[attr-defined]
    c.drawString(72, 770, "Projects in production")  # type: ignore[attr-defined]
    c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
    y = wrapped_prose(c, PROSE, 745)
    y = wrapped_prose(c, PROSE, y - 20)
    c.setFont("Helvetica-Oblique", 13)  # type: ignore[attr-defined]
    c.drawRightString(520, y - 30, "Continued on next page")  # type: ignore[attr-defined]


def test_a_continuation_note_is_no_heading(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "continued.pdf", _continued_page)
    headings = _headings(layout)
    assert "Continued on next page" not in headings, headings
    assert "Continued on next page" in "\n".join(b.text for b in layout.blocks)
    assert "Projects in production" in headings


def _columns_page(c: object) -> None:
    c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
    left = wrapped_prose(c, PROSE, 770, x=60, width=220)
    wrapped_prose(c, PROSE + " " + PROSE + " " + PROSE, 770, x=320, width=220)
    c.setFont("Helvetica-Bold", 10)  # type: ignore[attr-defined]
    c.drawString(60, left - 24, "Payment of the notes")  # type: ignore[attr-defined]
    c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
    wrapped_prose(c, PROSE, left - 36, x=60, width=220)


def test_a_heading_whose_row_the_other_column_shares_stays_a_heading(tmp_path: Path) -> None:
    headings = _headings(drawn_layout(tmp_path / "columns.pdf", _columns_page))
    assert "Payment of the notes" in headings, headings


CODE = [
    "t = Table(data, style=[('GRID', (1, 1), (-2, -2), 1, colors.green),",
    "                       ('BOX', (0, 0), (1, -1), 2, colors.red),",
    "                       ('LINEABOVE', (1, 2), (-2, 2), 1, colors.blue),",
    "                       ('LINEBEFORE', (2, 1), (2, -2), 1, colors.pink),",
    "                       ('BACKGROUND', (0, 0), (0, 1), colors.pink),",
    "                       ('BACKGROUND', (1, 1), (1, 2), colors.lavender),",
    "                       ('BACKGROUND', (2, 2), (2, 3), colors.orange)])",
]


def _manual_page(c: object) -> None:
    """A manual's page: 10-point prose between 8-point code listings longer than it, as reportlab's user guide sets
    them, each listing followed by a one-word line ("produces") before its result."""
    c.setFont("Helvetica-BoldOblique", 12)  # type: ignore[attr-defined]
    c.drawString(72, 780, "TableStyle Line Commands")  # type: ignore[attr-defined]
    y = 755.0
    for _ in range(3):
        c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
        y = wrapped_prose(c, "We can see some line commands in action with the following example.", y) - 20
        c.setFont("Courier", 8)  # type: ignore[attr-defined]
        for line in CODE * 2:
            c.drawString(80, y, line)  # type: ignore[attr-defined]
            y -= 10
        c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
        c.drawString(72, y - 12, "produces")  # type: ignore[attr-defined]
        y -= 40


def test_prose_between_longer_code_listings_is_the_body(tmp_path: Path) -> None:
    headings = _headings(drawn_layout(tmp_path / "manual.pdf", _manual_page))
    assert headings == ["TableStyle Line Commands"], headings

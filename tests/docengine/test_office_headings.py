"""Headings on office documents (reports, memos, covers) from evidence: a section heading heads what follows it, a
key stands in a list of keys, a running head stands centred over the text.

Found on the dev office pages (issue 34; tests/corpus/documents/pdf/office_*.pdf): a memo's cover set its subtitle
and date in a heading size under the title and over "INTRODUCTION" (office_dmca_p1), and a report's cover its
edition and date in the title's type (office_geobase_p1): each line came out a heading; a list of abbreviations set
one key in capitals beside a long value, which made it a heading among its plain neighbours (office_geobase_p5); a
memo's running head in italics at the body size, centred over each page, came out as a heading over its first
paragraph (office_dmca_p4). Controls: the title, the heading under the title block, a bold heading in the text, a
heading in capitals with prose under it, and an italic label line at the text's edge stay what they are.
"""

from __future__ import annotations

from pathlib import Path

from modelhost.docengine.types import Kind, PageLayout

from .conftest import drawn_layout, wrapped_prose

PROSE = (
    "The act implements two treaties of the organisation and addresses a number of other significant issues of "
    "copyright, among them the liability of online service providers and the exemption for making a copy of a "
    "program while a computer is repaired. This summary gives an overview of its provisions title by title."
)


def _headings(layout: PageLayout) -> list[str]:
    return [b.text for b in layout.blocks if b.kind in (Kind.SECTION_HEADER, Kind.TITLE)]


def _kind(layout: PageLayout, text: str) -> Kind:
    (block,) = [b for b in layout.blocks if b.text == text]
    return block.kind


def _memo_cover(c: object) -> None:
    """A memo's first page: the title in 18-point bold, a subtitle and a date at 14 points centred under it, then
    "INTRODUCTION" at 16 points bold and the text at 11."""
    c.setFont("Times-Bold", 18)  # type: ignore[attr-defined]
    c.drawCentredString(297, 770, "THE DIGITAL COPYRIGHT ACT OF 1998")  # type: ignore[attr-defined]
    c.setFont("Times-Roman", 14)  # type: ignore[attr-defined]
    c.drawCentredString(297, 750, "Copyright Office Summary")  # type: ignore[attr-defined]
    c.drawCentredString(297, 700, "December 1998")  # type: ignore[attr-defined]
    c.setFont("Times-Bold", 16)  # type: ignore[attr-defined]
    c.drawString(72, 660, "INTRODUCTION")  # type: ignore[attr-defined]
    c.setFont("Times-Roman", 11)  # type: ignore[attr-defined]
    y = wrapped_prose(c, PROSE, 635)
    wrapped_prose(c, PROSE, y - 20)


def test_a_title_blocks_subtitle_and_date_over_the_first_heading_are_no_headings(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "cover.pdf", _memo_cover)
    assert _kind(layout, "THE DIGITAL COPYRIGHT ACT OF 1998") is Kind.TITLE
    assert _headings(layout) == ["THE DIGITAL COPYRIGHT ACT OF 1998", "INTRODUCTION"]


def _report_head(c: object) -> None:
    """A report page: its title, a paragraph, then a bold line at the body size on its own ("Regional summary") at once
    over a 16-point heading and its text; further down a bold heading at the body size over its own text."""
    c.setFont("Helvetica-Bold", 22)  # type: ignore[attr-defined]
    c.drawString(72, 770, "Annual Report 2009-10")  # type: ignore[attr-defined]
    c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
    y = wrapped_prose(c, PROSE, 740)
    c.setFont("Helvetica-Bold", 10)  # type: ignore[attr-defined]
    c.drawString(72, y - 30, "Regional summary")  # type: ignore[attr-defined]
    c.setFont("Helvetica-Bold", 16)  # type: ignore[attr-defined]
    c.drawString(72, y - 55, "Programme Highlights")  # type: ignore[attr-defined]
    c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
    y = wrapped_prose(c, PROSE, y - 78)
    c.setFont("Helvetica-Bold", 10)  # type: ignore[attr-defined]
    c.drawString(72, y - 24, "Radio programmes")  # type: ignore[attr-defined]
    c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
    wrapped_prose(c, PROSE, y - 38)


def test_a_heading_closed_at_once_by_a_heading_of_a_higher_rank_is_no_heading(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "report.pdf", _report_head)
    assert _headings(layout) == ["Annual Report 2009-10", "Programme Highlights", "Radio programmes"]
    assert _kind(layout, "Regional summary") is Kind.TEXT


def _edition_cover(c: object) -> None:
    """A report's cover: two title lines, an edition and a date, each in 18-point bold; an agency's name in bold at
    the body size; then its first page's text under a heading."""
    c.setFont("Helvetica-Bold", 18)  # type: ignore[attr-defined]
    c.drawCentredString(297, 700, "National Hydro Network")  # type: ignore[attr-defined]
    c.drawCentredString(297, 600, "Edition 1.0")  # type: ignore[attr-defined]
    c.drawCentredString(297, 540, "Level 1 Data Model")  # type: ignore[attr-defined]
    c.setFont("Helvetica", 12)  # type: ignore[attr-defined]
    y = wrapped_prose(c, PROSE, 480, lead=14)
    wrapped_prose(c, PROSE, y - 24, lead=14)


def test_lines_of_one_heading_style_one_after_another_are_none_of_them_headings(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "edition.pdf", _edition_cover)
    assert not {"Edition 1.0", "Level 1 Data Model"} & set(_headings(layout)), _headings(layout)


def _abbreviations(c: object) -> None:
    """A report's list of abbreviations: a bold heading, then keys at the body size with their meanings a tab stop
    to the right, one key in capitals beside a value of six words; a second section in capitals over prose."""
    c.setFont("Helvetica-Bold", 12)  # type: ignore[attr-defined]
    c.drawString(72, 770, "ABBREVIATIONS")  # type: ignore[attr-defined]
    c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
    rows = [
        ("GPS", "Global Positioning System"),
        ("NAD", "North American Datum"),
        ("UTCS", "Universal Time Coordinated System of the North"),
        ("WGS", "World Geodetic System"),
        ("NRCan", "Natural Resources Canada"),
    ]
    for i, (key, value) in enumerate(rows):
        c.drawString(72, 745 - 21 * i, key)  # type: ignore[attr-defined]
        c.drawString(144, 745 - 21 * i, value)  # type: ignore[attr-defined]
    c.drawString(72, 610, "OVERVIEW")  # type: ignore[attr-defined]
    wrapped_prose(c, PROSE, 584)


def test_a_key_in_capitals_among_a_lists_keys_is_no_heading(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "abbreviations.pdf", _abbreviations)
    assert _headings(layout) == ["ABBREVIATIONS", "OVERVIEW"]
    assert _kind(layout, "UTCS") is Kind.TEXT


def _running_head(c: object) -> None:
    """A memo's page: its running head in italics at the body size centred over the justified text, an italic label
    at the text's left edge over a paragraph further down."""
    c.setFont("Times-Italic", 12)  # type: ignore[attr-defined]
    c.drawCentredString(297, 770, "The Digital Copyright Act of 1998")  # type: ignore[attr-defined]
    c.setFont("Times-Roman", 12)  # type: ignore[attr-defined]
    y = wrapped_prose(c, PROSE, 746, lead=14)
    c.setFont("Times-Italic", 12)  # type: ignore[attr-defined]
    c.drawString(72, y - 30, "General approach")  # type: ignore[attr-defined]
    c.setFont("Times-Roman", 12)  # type: ignore[attr-defined]
    wrapped_prose(c, PROSE, y - 46, lead=14)


def test_an_italic_line_centred_over_the_text_is_no_label_heading(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "running.pdf", _running_head)
    assert _kind(layout, "The Digital Copyright Act of 1998") is Kind.TEXT
    assert _headings(layout) == ["General approach"]

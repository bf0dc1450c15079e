"""A centred line wrapped onto a shorter line centred under it, in the same size and face, is one block.

Found on a dev slide exported by LibreOffice Impress (issue 34; tests/corpus/documents/tables_dev/
impress_tz_briefing p4): the slide's title, set centred in a regular face, wrapped as "Standard time and summer" over
"time", and came out as two paragraphs, because the second line starts far right of the first, which the paragraph
splitter read as a paragraph's indented first line. Controls: a LaTeX paragraph's indented first line under a
flush-left paragraph stays a paragraph of its own, and so does a centred line under a centred sentence.
"""

from __future__ import annotations

from pathlib import Path

from modelhost.docengine.types import Kind, PageLayout

from .conftest import drawn_layout, wrapped_prose

PROSE = (
    "The database records the history of civil time in each zone since 1970, with the rules for summer time and "
    "the offsets from universal time, and it is released several times a year as governments change their clocks."
)


def _texts(layout: PageLayout) -> list[str]:
    return [b.text for b in layout.blocks]


def _slide(c: object) -> None:
    """A slide's title at 30 points in a regular face, centred and wrapped onto a short second line, over bullets
    at 18 points set flush left under it."""
    c.setFont("Helvetica", 30)  # type: ignore[attr-defined]
    c.drawCentredString(297, 760, "Standard time and summer")  # type: ignore[attr-defined]
    c.drawCentredString(297, 726, "time")  # type: ignore[attr-defined]
    c.setFont("Helvetica", 18)  # type: ignore[attr-defined]
    for i, item in enumerate(("Standard time: the zone's offset in winter", "Summer time: one hour ahead")):
        c.drawString(100, 670 - 30 * i, f"\u2022 {item}")  # type: ignore[attr-defined]


def test_a_centred_title_wrapped_onto_a_short_line_is_one_block(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "slide.pdf", _slide)
    (title,) = [b for b in layout.blocks if "Standard time and" in b.text]
    assert title.text == "Standard time and summer time"
    assert title.kind in (Kind.SECTION_HEADER, Kind.TITLE)
    assert "time" not in _texts(layout)


def _centred_prose(c: object) -> None:
    """A centred paragraph at the body size wrapped onto a shorter last line, under flush-left text."""
    c.setFont("Times-Roman", 11)  # type: ignore[attr-defined]
    c.drawCentredString(297, 760, "Published by the volunteers of the time zone database and")  # type: ignore[attr-defined]
    c.drawCentredString(297, 747, "its mailing list")  # type: ignore[attr-defined]
    wrapped_prose(c, PROSE, 710)


def test_a_centred_paragraph_keeps_its_last_line(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "centred.pdf", _centred_prose)
    assert "Published by the volunteers of the time zone database and its mailing list" in _texts(layout)


def _indented(c: object) -> None:
    """Two LaTeX paragraphs, no spacing: the first's short last line ends on no sentence end (a quoted title), the
    second's first line is indented 1.5 em and runs to the right edge."""
    c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
    c.drawString(72, 760, "The database records the history of civil time in each zone since 1970, with its rules")  # type: ignore[attr-defined]
    c.drawString(72, 748, "for summer time, as listed in \u201cSources for time zone and daylight saving")  # type: ignore[attr-defined]
    c.drawString(72, 736, "time data\u201d")  # type: ignore[attr-defined]
    c.drawString(87, 724, "Each zone is named after a city in it and its region, so that a name says where")  # type: ignore[attr-defined]
    c.drawString(72, 712, "the zone lies on the map of the world, whatever country governs the city today.")  # type: ignore[attr-defined]


def _sentence_over_centred(c: object) -> None:
    """A centred line that ends a sentence, over a shorter centred line: two blocks."""
    c.setFont("Times-Roman", 11)  # type: ignore[attr-defined]
    c.drawCentredString(297, 760, "The database is in the public domain.")  # type: ignore[attr-defined]
    c.drawCentredString(297, 747, "Release 2025b")  # type: ignore[attr-defined]
    wrapped_prose(c, PROSE, 710)


def _key_and_description(c: object) -> None:
    """A manual's key line flush left over its description indented as far as it ends short of the key (on an axis
    of their own, off the page's and the column's), then prose: two blocks (pgfplotstable_p10)."""
    c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
    key, text = "/pgfplots/table/columns/column name/.style={key-value-list}", "Sets all options for this column"
    c.drawString(72, 760, key)  # type: ignore[attr-defined]
    inset = (c.stringWidth(key, "Times-Roman", 10) - c.stringWidth(text, "Times-Roman", 10)) / 2  # type: ignore[attr-defined]
    c.drawString(72 + inset, 747, text)  # type: ignore[attr-defined]
    wrapped_prose(c, PROSE, 720)


def test_an_indented_first_line_and_a_centred_sentence_stay_parted(tmp_path: Path) -> None:
    texts = _texts(drawn_layout(tmp_path / "indented.pdf", _indented))
    assert any(t.startswith("Each zone is named") for t in texts)
    texts = _texts(drawn_layout(tmp_path / "sentence.pdf", _sentence_over_centred))
    assert "The database is in the public domain." in texts
    assert "Release 2025b" in texts
    texts = _texts(drawn_layout(tmp_path / "key.pdf", _key_and_description))
    assert "Sets all options for this column" in texts

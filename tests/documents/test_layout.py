"""The layout rules on hand-made lines: reading order, tables, headings, paragraphs, locations, escapes, repair."""

from __future__ import annotations

from modelhost.backends.ocr.layout import Line, doctags, elements, escape, loc, rows, unescape
from modelhost.documents.assemble import repair


def _line(x0: float, y0: float, text: str, h: float = 20, w: float | None = None) -> Line:
    return Line(x0, y0, x0 + (w if w is not None else 10 * len(text)), y0 + h, text)


def test_rows_read_left_to_right_even_when_cells_are_offset() -> None:
    # A table row whose cells sit a few pixels apart vertically, with a taller cell: a sort by centre alone would
    # interleave them with the next row.
    lines = [_line(300, 103, "b1"), _line(10, 100, "a1", h=26), _line(600, 98, "c1"), _line(10, 140, "a2")]
    assert [[ln.text for ln in row] for row in rows(lines)] == [["a1", "b1", "c1"], ["a2"]]


def test_table_heading_and_paragraphs() -> None:
    lines = [
        _line(10, 10, "Big Title", h=40),
        _line(10, 70, "first line of a paragraph"),
        _line(10, 92, "second line of it"),
        _line(10, 140, "another paragraph"),
        _line(10, 200, "Name"),
        _line(300, 200, "Qty"),
        _line(10, 230, "apple"),
        _line(310, 230, "12"),
        _line(10, 260, "pear"),
        # an empty cell in the middle column of a three-column row
        _line(600, 260, "x"),
        _line(600, 200, "Note"),
    ]
    out = elements(lines)
    assert [e.tag for e in out] == ["section_header_level_1", "text", "text", "otsl"]
    assert out[1].text == "first line of a paragraph second line of it"
    assert out[3].cells == (("Name", "Qty", "Note"), ("apple", "12", ""), ("pear", "", "x"))
    table = doctags(out[3], 1000, 1000)
    assert table.startswith("<otsl><loc_5><loc_100>")
    assert "<ched>Name<ched>Qty<ched>Note<nl><fcel>apple<fcel>12<ecel><nl>" in table


def test_heading_levels_by_size_and_list_items() -> None:
    lines = [
        _line(10, 10, "Chapter", h=50),
        _line(10, 80, "Section", h=32),
        _line(10, 130, "body text here"),
        _line(10, 160, "• a bullet point"),
        _line(10, 240, "more body"),
    ]
    tags = [(e.tag, e.text) for e in elements(lines)]
    assert tags[:3] == [
        ("section_header_level_1", "Chapter"),
        ("section_header_level_2", "Section"),
        ("text", "body text here"),
    ]
    assert ("list_item", "a bullet point") in tags


def test_locations_escape_and_repair() -> None:
    assert loc(0, 1275) == 0 and loc(1275, 1275) == 499 and loc(637.5, 1275) == 250
    assert unescape(escape("x<y and z>w")) == "x<y and z>w"
    assert "<" not in escape("a<b").replace("&lt;", "")
    # a page cut mid-element and mid-tag by its token bound keeps what it had, closed
    cut = "<doctag><text><loc_1><loc_2><loc_3><loc_4>kept words</text><otsl><loc_1><loc_2><loc_3><loc_4><fcel>a<fc"
    assert repair(cut) == (
        "<doctag><text><loc_1><loc_2><loc_3><loc_4>kept words</text><otsl><loc_1><loc_2><loc_3><loc_4><fcel>a"
        "</otsl></doctag>"
    )
    assert repair("<doctag></doctag>") == "<doctag></doctag>"

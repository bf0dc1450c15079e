"""A page cut by its token bound is repaired into DocTags that docling reads: kept elements, closed tags."""

from __future__ import annotations

from modelhost.documents.assemble import repair


def test_a_cut_page_keeps_what_it_had_closed() -> None:
    # a page cut mid-element and mid-tag by its token bound keeps what it had, closed
    cut = "<doctag><text><loc_1><loc_2><loc_3><loc_4>kept words</text><otsl><loc_1><loc_2><loc_3><loc_4><fcel>a<fc"
    assert repair(cut) == (
        "<doctag><text><loc_1><loc_2><loc_3><loc_4>kept words</text><otsl><loc_1><loc_2><loc_3><loc_4><fcel>a"
        "</otsl></doctag>"
    )
    assert repair("<doctag></doctag>") == "<doctag></doctag>"

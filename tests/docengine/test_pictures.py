"""Text inside a born-digital page's pictures (documents/pictures.py): what is read, what is kept, where it goes."""

from __future__ import annotations

import numpy as np

from modelhost.docengine.types import Block, Kind, PageContent, PageLayout, Usability
from modelhost.documents.pictures import (
    MAX_REGIONS,
    answer_blocks,
    carries_text,
    looks_like_text,
    regions_to_read,
    with_region_text,
)


def test_a_regions_doctags_land_inside_the_region_and_furniture_is_left_out() -> None:
    doctags = (
        "<doctag><page_header><loc_0><loc_0><loc_500><loc_20>Running head</page_header>"
        "<text><loc_0><loc_0><loc_250><loc_250>Left half</text>"
        "<otsl><loc_250><loc_250><loc_500><loc_500><ched>A<fcel>1<nl></otsl></doctag>"
    )
    blocks = answer_blocks(doctags, (100.0, 200.0, 300.0, 400.0))
    assert [(b.kind, b.text) for b in blocks] == [(Kind.TEXT, "Left half"), (Kind.TEXT, "A 1")]
    assert blocks[0].bbox == (100.0, 200.0, 200.0, 300.0) and blocks[1].bbox == (200.0, 300.0, 300.0, 400.0)


def test_only_prose_is_kept_not_a_charts_ticks_or_a_diagrams_labels() -> None:
    def block(text: str) -> Block:
        return Block(Kind.TEXT, (0.0, 0.0, 1.0, 1.0), text)

    prose = [block("The quick brown fox jumps over the lazy dog"), block("and runs far away into the woods")]
    assert carries_text(prose)
    assert not carries_text([block("0 10 20 30 40 50 60 70 80 90")])  # ticks: numbers
    labels = ["Join", "Probe", "Scan", "Fetch", "Union", "Index", "Logic", "And"]
    assert not carries_text([block(w) for w in labels])  # a diagram's boxes
    assert not carries_text([block("Figure text")])  # too few words


def test_pixels_that_look_like_text_and_pixels_that_do_not() -> None:
    from PIL import Image, ImageDraw

    from modelhost.testing.pages import _font

    page = Image.new("RGB", (600, 120), "white")
    ImageDraw.Draw(page).text((10, 30), "A scanned paragraph of plain words", font=_font(28), fill="black")
    assert looks_like_text(np.asarray(page))
    photo = np.random.default_rng(1).integers(40, 220, (120, 600, 3), dtype=np.uint8)  # mid tones everywhere
    assert not looks_like_text(photo)
    assert not looks_like_text(np.full((120, 600, 3), 255, np.uint8))  # blank: no ink


def test_regions_are_bounded_and_only_usable_pages_have_them() -> None:
    boxes = (*((0.0, 40.0 * i, 100.0 + i, 40.0 * i + 30) for i in range(10)), (0.0, 500.0, 5.0, 600.0))
    content = PageContent(1, 612.0, 792.0, ocr_regions=boxes)
    picked = regions_to_read(content)
    assert len(picked) == MAX_REGIONS and picked == sorted(picked, key=lambda b: b[1])  # page order
    assert all(b[2] >= 106 for b in picked)  # the largest; the 5-point-wide sliver is never read
    scan = PageContent(1, 612.0, 792.0, usability=Usability.NO_TEXT, ocr_regions=boxes)
    assert regions_to_read(scan) == []  # a scan is read whole from its pixels anyway


def test_region_text_follows_its_picture_and_captions_still_point_at_theirs() -> None:
    picture = Block(Kind.PICTURE, (50.0, 100.0, 300.0, 200.0), caption=2)
    layout = PageLayout(
        1,
        612.0,
        792.0,
        (
            Block(Kind.TEXT, (50.0, 50.0, 300.0, 90.0), "Before"),
            picture,
            Block(Kind.CAPTION, (50.0, 205.0, 300.0, 215.0), "Figure 1 A"),
        ),
    )
    found = [Block(Kind.TEXT, (60.0, 110.0, 290.0, 130.0), "inside the picture")]
    out = with_region_text(layout, picture.bbox, found)
    assert [b.text for b in out.blocks] == ["Before", "", "inside the picture", "Figure 1 A"]
    assert out.blocks[out.blocks[1].caption].text == "Figure 1 A"
    # a region no picture holds (a font without Unicode): after the last block that starts above it
    out = with_region_text(layout, (50.0, 95.0, 300.0, 99.0), found)
    assert [b.text for b in out.blocks][:3] == ["Before", "inside the picture", ""]

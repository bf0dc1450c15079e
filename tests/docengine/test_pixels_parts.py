"""The pixel path's pure parts on hand-made boxes: reading order, orientation geometry, sizes, tables, regions."""

from __future__ import annotations

import numpy as np
import pytest

from modelhost.backends.ocr import orientation, scanpage
from modelhost.backends.ocr.layoutmodel import Region
from modelhost.backends.ocr.pixels import Detection, Group, font_size, groups, xy_cut
from modelhost.backends.ocr.scantable import table_block, table_runs
from modelhost.docengine.analyse import Style, analyse
from modelhost.docengine.types import Block, Kind, PageContent, Word


def test_xy_cut_reads_down_each_column_after_a_full_width_title() -> None:
    boxes = [
        (300, 100, 500, 140),  # right column, top
        (50, 10, 500, 40),  # title across both columns
        (50, 100, 250, 140),  # left column, top
        (50, 160, 250, 200),  # left column, bottom
        (300, 160, 500, 200),  # right column, bottom (its top aligns with the left's: a horizontal gap exists)
        (50, 230, 500, 260),  # a footer across both
    ]
    assert xy_cut(boxes) == [1, 2, 3, 0, 4, 5]


def test_page_rotation_from_box_shapes_and_votes() -> None:
    tall = [np.array([[10, 10], [40, 10], [40, 300], [10, 300]], np.float32)] * 3
    wide = [np.array([[10, 10], [300, 10], [300, 40], [10, 40]], np.float32)] * 3
    image = np.zeros((400, 400, 3), np.uint8)

    def crop(img: np.ndarray, quad: np.ndarray) -> np.ndarray:
        return np.zeros((30, 290, 3), np.uint8)  # a horizontal line crop, as the turned page gives

    assert orientation.page_rotation(image, wide, crop, lambda crops: [False] * len(crops)) == 0
    assert orientation.page_rotation(image, wide, crop, lambda crops: [True] * len(crops)) == 180
    assert orientation.page_rotation(image, tall, crop, lambda crops: [False] * len(crops)) == 90
    assert orientation.page_rotation(image, tall, crop, lambda crops: [True] * len(crops)) == 270
    assert orientation.page_rotation(image, [], crop, lambda crops: [True] * len(crops)) == 0
    # one sideways label on an upright page does not turn it
    assert not orientation.vertical([*wide, tall[0]])


@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
def test_quads_turn_with_the_image(rotation: int) -> None:
    image = np.zeros((200, 300, 3), np.uint8)
    image[20:40, 50:150] = 255  # a white bar where the quad is
    quad = np.array([[50, 20], [150, 20], [150, 40], [50, 40]], np.float32)
    # content turned clockwise by `rotation`: np.rot90 with a negative k turns clockwise
    turned = np.ascontiguousarray(np.rot90(image, k=-(rotation // 90)))
    moved_in = orientation.turn_quads([quad], (360 - rotation) % 360, 300, 200)[0] if rotation else quad
    # the bar on the turned image sits under the quad moved onto it
    x0, y0 = moved_in.min(axis=0).astype(int)
    x1, y1 = moved_in.max(axis=0).astype(int)
    assert turned[y0 + 2 : y1 - 2, x0 + 2 : x1 - 2].min() == 255
    # and turning it upright again brings the quad back, corners in reading order
    back = orientation.turn_quads([moved_in], rotation, turned.shape[1], turned.shape[0])[0]
    assert np.allclose(back, quad, atol=1.0)
    assert np.array_equal(orientation.upright(turned, rotation), image)


def test_font_sizes_snap_so_one_style_is_one_size() -> None:
    assert font_size(21.0, 18.0) == 18.0  # a body line with tall letters is body
    assert font_size(15.0, 18.0) == 18.0
    heading = font_size(33.0, 18.0)
    assert heading > 18.0 * 1.3 and font_size(32.0, 18.0) == heading  # two lines of one heading style


def _words(rows: list[list[tuple[float, str]]], y0: float = 100, h: float = 12) -> list[Word]:
    out = []
    for r, row in enumerate(rows):
        for c, (x, text) in enumerate(row):
            y = y0 + r * (h + 8)
            out.append(Word(text, (x, y, x + 7 * len(text), y + h), size=h, line=r * 10 + c))
    return out


def test_an_unruled_table_from_word_positions() -> None:
    words = _words(
        [
            [(10, "Name"), (200, "Qty"), (400, "Note")],
            [(10, "apple"), (205, "12")],
            [(10, "pear"), (400, "x")],
        ]
    )
    block = table_block(words)
    assert block is not None and block.kind is Kind.TABLE and block.table is not None
    grid = [[cell.text if cell else "" for cell in row] for row in block.table.grid()]
    assert grid == [["Name", "Qty", "Note"], ["apple", "12", ""], ["pear", "", "x"]]
    assert all(cell.header for cell in block.table.cells if cell.row == 0)
    # one row of cells, or one column, is not a table
    assert table_block(_words([[(10, "a"), (300, "b")]])) is None
    assert table_block(_words([[(10, "a")], [(10, "b")]])) is None


def test_table_runs_need_two_rows_of_cells() -> None:
    boxes = [((10, 0, 60, 10), 1), ((200, 0, 260, 10), 2), ((10, 20, 60, 30), 3), ((200, 21, 260, 31), 4)]
    assert table_runs(boxes) == [[[1, 2], [3, 4]]]
    # a paragraph's lines (one box a row) are no table
    assert table_runs([((10, 0, 400, 10), 1), ((10, 20, 400, 30), 2)]) == []


def test_lines_go_to_the_text_region_over_a_figure_that_overlaps_it() -> None:
    quads = [
        np.array([[100, 100], [400, 100], [400, 130], [100, 130]], np.float32),
        np.array([[100, 500], [400, 500], [400, 530], [100, 530]], np.float32),  # in no region
    ]
    regions = (
        Region("figure", (50.0, 50.0, 450.0, 450.0)),
        Region("title", (90.0, 90.0, 410.0, 140.0)),
    )
    detection = Detection(np.zeros((800, 600, 3), np.uint8), quads, 0, 1.0, regions, 30.0)
    found = groups(detection)
    assert [(g.label, g.lines) for g in found] == [("figure", []), ("title", [0]), ("text", [1])]


def _ruled_page() -> np.ndarray:
    # A white 600x400 page at 1 point a pixel: a 3x2 grid of 1-pixel rules, a 3-pixel-thick box rule below it,
    # a filled black square, and a line of big bold "text" (short thick bars, as glyph stems are).
    page = np.full((400, 600, 3), 255, np.uint8)
    for y in (50, 80, 110, 140):
        page[y, 100:401] = 0
    for x in (100, 250, 400):
        page[50:141, x] = 0
    page[200:203, 100:500] = 0  # a thick rule: still a rule (3 points)
    page[250:330, 450:530] = 0  # a filled area: no rule
    for x in range(100, 300, 14):
        page[300:318, x : x + 4] = 0  # stems 18 pixels tall: shorter than a row
    return page


def test_rulings_are_found_in_pixels_and_filled_areas_and_glyphs_are_not() -> None:
    from modelhost.backends.ocr.pixelrules import find_rulings

    rules = find_rulings(_ruled_page(), 1.0, line_height=20.0)
    horizontal = sorted((round(s.y0), round(s.x0), round(s.x1)) for s in rules if s.horizontal)
    vertical = sorted((round(s.x0), round(s.y0), round(s.y1)) for s in rules if not s.horizontal)
    assert horizontal == [(50, 100, 401), (80, 100, 401), (110, 100, 401), (140, 100, 401), (202, 100, 500)]
    assert vertical == [(100, 50, 141), (250, 50, 141), (400, 50, 141)]
    # at 2 points a pixel the same rules are twice as long in points, and the 3-pixel rule is 6 points thick: a bar
    coarse = find_rulings(_ruled_page(), 2.0, line_height=20.0)
    assert len(coarse) == 7 and max(s.length for s in coarse) == pytest.approx(602, abs=1)


def test_a_ruled_frame_gathers_its_lines_whatever_region_holds_them() -> None:
    from modelhost.backends.ocr.pixelrules import find_rulings

    page = _ruled_page()
    cells = [(110, 55), (260, 55), (110, 85), (260, 85), (110, 115), (260, 115)]
    quads = [np.array([[x, y], [x + 100, y], [x + 100, y + 20], [x, y + 20]], np.float32) for x, y in cells]
    quads.append(np.array([[100, 160], [400, 160], [400, 180], [100, 180]], np.float32))  # a line under the table
    regions = (Region("header", (95.0, 45.0, 405.0, 185.0)),)  # the layout model boxed it all as a header
    detection = Detection(page, quads, 0, 1.0, regions, 20.0, rulings=find_rulings(page, 1.0, 20.0))
    found = groups(detection)
    assert [(g.label, g.lines) for g in found] == [("ruled", [0, 1, 2, 3, 4, 5]), ("header", [6])]


def _labelled(label: str, box: tuple[float, float, float, float], *lines: str, bold: bool = True) -> list[Block]:
    # Lines as the recogniser gives them (one size, bold from stroke), analysed as the group `label` on a letter page.
    x0, y0, *_ = box
    words = tuple(
        Word(token, (x0 + 60 * j, y0 + 20 * i, x0 + 60 * j + 50, y0 + 20 * i + 10), size=10.0, bold=bold, line=i)
        for i, line in enumerate(lines)
        for j, token in enumerate(line.split())
    )
    content = PageContent(1, 612, 792, words=words)
    style = Style(body_size=10.0)
    found = analyse(content, style).blocks
    ends = (min(w.bbox[3] for w in words), max(w.bbox[1] for w in words))  # the page's highest and lowest lines
    return list(scanpage._labelled(Group(label, box, list(range(len(lines)))), found, style, content, ends))


def test_text_drawn_in_a_picture_is_never_a_heading_unless_the_picture_is_the_page() -> None:
    # The Redbook's diagram read from pixels: bold labels in its boxes ("Views", "Table Data") came out as headings.
    diagram = _labelled("figure", (100, 100, 500, 400), "Views", "Table Data")
    assert [(b.kind, b.text) for b in diagram] == [(Kind.TEXT, "Views"), (Kind.TEXT, "Table Data")]
    # A brochure page the layout model boxed whole as a figure keeps its headings (its own text, not a picture's).
    page = _labelled("figure", (20, 20, 590, 770), "Center of Excellence")
    assert [(b.kind, b.text) for b in page] == [(Kind.SECTION_HEADER, "Center of Excellence")]


def test_a_title_region_of_code_or_a_line_of_capitals_naming_code_is_no_heading() -> None:
    # An SQL listing read from pixels (no monospace font to tell it apart): "ENABLE ;" boxed as a title by the
    # layout model, and "ALTER TABLE BANK_SCHEMA.CUSTOMERS" in capitals at body size.
    assert [b.kind for b in _labelled("title", (72, 100, 300, 112), "ENABLE ;")] == [Kind.TEXT]
    assert [b.kind for b in _labelled("title", (72, 100, 300, 112), "a2 + 8 = 12")] == [Kind.TEXT]  # an equation
    code = _labelled("text", (72, 100, 400, 112), "ALTER TABLE BANK_SCHEMA.CUSTOMERS", bold=False)
    assert [b.kind for b in code] == [Kind.TEXT]
    assert [b.kind for b in _labelled("text", (72, 100, 400, 112), "ABSTRACT", bold=False)] == [Kind.SECTION_HEADER]


def test_a_numbered_line_the_layout_model_calls_a_caption_or_a_title_keeps_its_number() -> None:
    # An assembly drawing's steps under its pictures ("1. Strip the cable"): analysis reads each as a list item (its
    # number a marker), the layout model boxes it as a caption, and the caption lost the number.
    step = _labelled("caption", (10, 200, 300, 212), "1. Strip the cable", bold=False)
    assert [(b.kind, b.text) for b in step] == [(Kind.CAPTION, "1. Strip the cable")]
    title = _labelled("title", (72, 100, 300, 112), "2. Results")
    assert [b.text for b in title] == ["2. Results"]


def test_a_rapidocr_without_the_loaders_the_pixel_path_uses_is_a_load_error_naming_its_version() -> None:
    # backends/ocr/rapid.py is the one place that reaches RapidOCR's private loaders: a release that renames them
    # must fail the model's load with a message saying what to install, not an AttributeError inside a page.
    from modelhost.backends.ocr import rapid
    from modelhost.errors import ModelLoadError

    class Renamed:  # a RapidOCR whose loaders went private under other names
        pass

    with pytest.raises(ModelLoadError, match=r"rapidocr \S+ has no _load_det_model .*rapidocr>=3\.10,<4"):
        rapid.models(Renamed())

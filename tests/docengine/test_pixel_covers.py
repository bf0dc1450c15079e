"""The pixel path's reading order on a page designed as one picture (a back cover): a page drawn with pymupdf, a red
band and a grey swoosh under three columns of text, rasterised and read by the real detector, layout model and
recogniser. The layout model boxes most of such a page as one `figure`; its lines are the page's text
(pixels.PAGE_FIGURE), and they must be read column by column with the text region the model boxed inside it, and
never as headings (pixels.COVER)."""

from __future__ import annotations

import re

import numpy as np
import pytest

pymupdf = pytest.importorskip("pymupdf")
pytest.importorskip("rapidocr")

from modelhost.backends.ocr import scanpage  # noqa: E402
from modelhost.backends.ocr.pixels import PAGE_FIGURE, PixelReader  # noqa: E402
from modelhost.docengine.types import Block, Kind  # noqa: E402

#: The page is read at the `convert` default.
DPI = 150
#: The left sidebar's three points, each a bold phrase wrapped over two or three short lines (a Redbook back cover's).
SIDEBAR = (
    ("Implement roles and", "separation of duties"),
    ("Leverage row", "permissions on the", "database"),
    ("Protect columns by", "defining column", "masks"),
)
#: The middle column's two paragraphs, running down past the sidebar's last point, as a back cover's blurb does: the
#: sidebar's points and the right column's blocks stand in rows either side of it.
BODY = (
    "This paper provides information about the feature of the database that controls access to rows and columns. "
    "It offers a broad description of the function and advantages of controlling access to data in a comprehensive "
    "and transparent way, and it shows how to define the rules in a relational database.\n"
    "The paper is intended for database engineers, application developers and security officers who want to "
    "design and implement access control as a part of their data control and governance policy. A solid background "
    "in object level security, relational database concepts and the query language is assumed."
)
#: The right column's two blocks, white on the red band.
RIGHT = (("INTERNATIONAL", "TECHNICAL", "SUPPORT", "ORGANIZATION"), ("BUILDING TECHNICAL", "INFORMATION BASED ON"))


def back_cover() -> np.ndarray:
    """A Letter page set as a report's back cover: a title on white, then a thin red rule, a red band down the right
    third and a wide grey arc behind three columns (a bold sidebar, a paragraph, white text on the band), at DPI."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.draw_rect(pymupdf.Rect(0, 225, 440, 230), color=None, fill=(0.9, 0, 0))
    page.draw_rect(pymupdf.Rect(450, 225, 612, 792), color=None, fill=(0.9, 0, 0))
    page.draw_circle((380, 700), 330, color=(0.7, 0.7, 0.7), width=40)
    page.insert_text((30, 110), "Access Control Support in a Database", fontsize=24, fontname="hebo")
    y = 250.0
    for point in SIDEBAR:
        for line in point:
            page.insert_text((25, y), line, fontsize=10, fontname="hebo")
            y += 14
        y += 14
    spare = page.insert_textbox(pymupdf.Rect(150, 240, 420, 480), BODY, fontsize=10, fontname="helv")
    assert spare >= 0, "the blurb must fit its box"
    y = 255.0
    for block in RIGHT:
        for line in block:
            page.insert_text((465, y), line, fontsize=10, fontname="hebo", color=(1, 1, 1))
            y += 14
        y += 28
    pixmap = page.get_pixmap(dpi=DPI)
    image = np.frombuffer(pixmap.samples, np.uint8).reshape(pixmap.height, pixmap.width, pixmap.n)[:, :, :3]
    doc.close()
    return np.ascontiguousarray(image)


@pytest.fixture(scope="module")
def cover(reader: PixelReader) -> list[Block]:
    """The drawn back cover's blocks, read once for the module's tests."""
    detection = reader.detect(back_cover(), DPI)
    page = detection.width * detection.height
    areas = [(r.bbox[2] - r.bbox[0]) * (r.bbox[3] - r.bbox[1]) for r in detection.regions if r.label == "figure"]
    assert max(areas, default=0.0) >= PAGE_FIGURE * page, "the model must box the drawn cover as a page-sized figure"
    return list(scanpage.blocks(reader, detection))


def test_a_page_sized_figure_reads_down_its_columns(cover: list[Block]) -> None:
    # The Redbook's back cover on pixels: the model's page-sized figure was one group whose lines were sorted top to
    # bottom and took the lines the text region inside it held loosely (the blurb's first and last), so the blurb's
    # ends were read with the sidebar, and its middle after the red column.
    blocks = cover
    assert not [b for b in blocks if b.kind is Kind.TABLE], "a cover's columns side by side are no table"
    text = " ".join(b.text for b in blocks if b.text)
    found = re.findall(r"Implement|Leverage|Protect|This paper|The paper|assumed|INTERNATIONAL|BUILDING", text)
    marks = [m.lower() for m in found]
    assert marks == ["implement", "leverage", "protect", "this paper", "the paper", "assumed", "international",
                     "building"], text  # fmt: skip
    # each of the sidebar's points and the right column's blocks is one block, its lines in order
    assert any(b.text.startswith("Implement roles and separation of duties") for b in blocks), text
    assert any(b.text.startswith("INTERNATIONAL TECHNICAL SUPPORT ORGANIZATION") for b in blocks), text


def test_a_page_sized_figures_own_lines_are_never_headings(cover: list[Block]) -> None:
    # The lines the page-sized figure holds and no finer region does are its text, never its headings: the bold
    # sidebar read as three headings, and a table the model boxes as a page-sized picture read its larger cells as
    # headings. The title, in a region of its own above the figure, stays the page's heading.
    headings = [b.text for b in cover if b.kind is Kind.SECTION_HEADER]
    assert headings == ["Access Control Support in a Database"], headings

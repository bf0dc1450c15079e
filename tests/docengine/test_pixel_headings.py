"""Headings on the pixel path judged on what the words are, not the layout model's label or the type size alone.

Pages drawn here with pymupdf and read from their pixels only (the real PP-OCR and layout models from the wheels),
as pdf-spec's socket sends them. Each test draws the class of page that gave false headings on born-digital pages
read from pixels (issue 34): an ISSN line set large (the layout model boxes it as a title), an author line in capitals
whose affiliation marks the recogniser glues to the name, a section's number set big in a box beside its title.
"""

from __future__ import annotations

import numpy as np
import pytest

pymupdf = pytest.importorskip("pymupdf")
pytest.importorskip("rapidocr")
pytest.importorskip("rapid_layout")

from modelhost.backends.ocr import scanpage  # noqa: E402
from modelhost.backends.ocr.pixels import PixelReader  # noqa: E402
from modelhost.docengine.types import Block, Kind  # noqa: E402

BODY = (
    "The northern region sold more timber this quarter than in any quarter before, and its mills ran at full "
    "capacity through the winter months while the southern mills stood idle for repairs. "
)
DPI = 150


def read(reader: PixelReader, lines: list[tuple[float, str, float, str]]) -> list[Block]:
    """A Letter page with each (baseline y, text, size, font) line drawn at the left margin and two paragraphs of
    body text under them, read from its pixels."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    for y, text, size, font in lines:
        page.insert_text((72, y), text, fontsize=size, fontname=font)
    bottom = max(y for y, *_ in lines)
    page.insert_textbox(pymupdf.Rect(72, bottom + 30, 540, bottom + 250), BODY * 6, fontsize=10, fontname="helv")
    page.insert_textbox(pymupdf.Rect(72, bottom + 270, 540, bottom + 480), BODY * 4, fontsize=10, fontname="helv")
    pix = page.get_pixmap(dpi=DPI)
    image = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, pix.n)[:, :, :3].copy()
    doc.close()
    return list(scanpage.read_layout(reader, image, DPI).blocks)


def headings(blocks: list[Block]) -> list[str]:
    return [b.text for b in blocks if b.kind is Kind.SECTION_HEADER]


def test_an_issn_line_set_large_is_no_heading(reader: PixelReader) -> None:
    # A Korean report's cover carries its publication numbers in bold under the title; the layout model boxes the
    # line as a title, and the label alone made it a heading. More digits than letters name no section.
    blocks = read(
        reader,
        [(120, "Water and Timber", 20, "hebo"), (150, "31-9735045-001338-14 ISSN 2005-744X", 14, "hebo")],
    )
    assert headings(blocks) == ["Water and Timber"], blocks
    assert any("ISSN 2005-744X" in b.text and b.kind is Kind.TEXT for b in blocks), blocks


def test_an_author_line_with_its_affiliation_marks_is_no_heading(reader: PixelReader) -> None:
    # An arXiv paper's author line in capitals: read from pixels the superscript marks sit on the line ("WU1,2,3"),
    # and capitals at body size standing alone read as a heading ("ABSTRACT" is one).
    blocks = read(
        reader, [(100, "Timber yields of the northern mills", 18, "hebo"), (130, "JOHN F. WU1,2,3", 10, "helv")]
    )
    assert headings(blocks) == ["Timber yields of the northern mills"], blocks
    assert any(b.text == "JOHN F. WU1,2,3" and b.kind is Kind.TEXT for b in blocks), blocks


def test_a_section_number_set_beside_its_heading_is_part_of_it(reader: PixelReader) -> None:
    # A Korean report numbers each section with a big digit in a box left of the section's title, on its line: the
    # digit alone was read as a heading of its own ("2", normal_4pages), a chapter's big number being one when it
    # stands alone on its line. Beside a heading on its line, it is that heading's number.
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.draw_rect(pymupdf.Rect(72, 100, 100, 128), color=(0.1, 0.2, 0.5), fill=(0.1, 0.2, 0.5))
    page.insert_text((79, 122), "2", fontsize=22, fontname="hebo", color=(1, 1, 1))
    page.insert_text((110, 121), "Coverage of the insurance policies", fontsize=16, fontname="hebo")
    page.insert_textbox(pymupdf.Rect(72, 150, 540, 370), BODY * 6, fontsize=10, fontname="helv")
    page.insert_textbox(pymupdf.Rect(72, 390, 540, 600), BODY * 4, fontsize=10, fontname="helv")
    pix = page.get_pixmap(dpi=DPI)
    image = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, pix.n)[:, :, :3].copy()
    doc.close()
    blocks = list(scanpage.read_layout(reader, image, DPI).blocks)
    assert headings(blocks) == ["2 Coverage of the insurance policies"], blocks

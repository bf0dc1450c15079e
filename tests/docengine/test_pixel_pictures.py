"""A picture's text on the pixel path: a page drawn with pymupdf, rasterised, and read by the real detector, layout
model and recogniser (the `--no-text-layer` path, what pdf-spec's socket gets). The text drawn inside a picture (a
diagram's boxes, a screenshot's labels) is the picture's, as the text path and docling's Markdown leave it; a block of
the page's text that the layout model boxes as a figure stays the page's text."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest

pymupdf = pytest.importorskip("pymupdf")
pytest.importorskip("rapidocr")

from modelhost.backends.ocr import scanpage  # noqa: E402
from modelhost.backends.ocr.pixels import PixelReader  # noqa: E402
from modelhost.docengine.types import Kind, Region  # noqa: E402

#: The page is read at the `convert` default.
DPI = 150
#: Running text to fill a paragraph's lines.
FILL = (
    "The row permission is defined on the table and it applies to every query that reads the table, so a user "
    "who is not authorised sees only the rows the rule lets through, whatever the application asks for. "
) * 3
#: The diagram's boxes, each a label set bold in a shaded box, as the Redbook's diagrams are drawn.
LABELS = (("Application Logic", 140, 310), ("Views", 330, 310), ("Table Data", 140, 420), ("Regular User", 330, 420))
#: Where the first paragraph is set (points).
FIRST = (72.0, 105.0, 540.0, 260.0)


@pytest.fixture(scope="module")
def reader() -> Iterator[PixelReader]:
    r = PixelReader.load()
    yield r
    r.close()


def diagram_page() -> np.ndarray:
    """A Letter page: a heading, a paragraph, a framed diagram of four labelled boxes with its caption under it, and
    a second paragraph, rasterised at DPI."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 90), "Column masks", fontsize=14, fontname="hebo")
    page.insert_textbox(pymupdf.Rect(*FIRST), "Firstpara " + FILL, fontsize=10, fontname="helv")
    page.draw_rect(pymupdf.Rect(120, 280, 490, 480), color=(0, 0, 0), width=1)
    for label, x, y in LABELS:
        page.draw_rect(pymupdf.Rect(x, y, x + 140, y + 40), color=(0, 0, 0), fill=(0.85, 0.9, 1.0), width=1)
        page.insert_text((x + 10, y + 25), label, fontsize=9, fontname="hebo")
    page.draw_line((280, 330), (330, 330), color=(0, 0, 0), width=1.5)
    page.insert_text((72, 500), "Figure 3-5 Special registers and adopted authority", fontsize=9, fontname="hebo")
    page.insert_textbox(pymupdf.Rect(72, 515, 540, 700), "Secondpara " + FILL, fontsize=10, fontname="helv")
    pixmap = page.get_pixmap(dpi=DPI)
    image = np.frombuffer(pixmap.samples, np.uint8).reshape(pixmap.height, pixmap.width, pixmap.n)[:, :, :3]
    doc.close()
    return np.ascontiguousarray(image)


def test_the_text_drawn_in_a_picture_is_the_pictures_and_its_caption_the_pages(reader: PixelReader) -> None:
    # The Redbook on pixels read every screenshot's and diagram's labels into the page's text ("Views Table Data
    # Application Logic ..."), which the ground truth and the text path leave inside the picture.
    detection = reader.detect(diagram_page(), DPI)
    assert [r.label for r in detection.regions].count("figure") == 1, detection.regions
    found = list(scanpage.blocks(reader, detection))
    text = " ".join(b.text for b in found)
    assert [b.kind for b in found].count(Kind.PICTURE) == 1
    assert not any(label in text for label, _, _ in LABELS), text
    assert "Firstpara" in text and "Secondpara" in text
    assert "Figure 3-5 Special registers" in text  # the caption under the picture is the page's


def test_a_paragraph_the_layout_model_boxes_as_a_figure_stays_the_pages_text(reader: PixelReader) -> None:
    # The Redbook's "2. Look at the definition of the EMPLOYEE table..." was boxed as a figure by the layout model:
    # lines that cover their region as a paragraph's do are the page's text (backdrops.is_backdrop, on their ink),
    # with no picture, as the text path reads text set over a shaded box.
    detection = reader.detect(diagram_page(), DPI)
    x0, y0, x1, _ = FIRST
    boxed = Region("figure", (x0 - 4, y0 - 4, x1 + 4, y0 + 90), 0.9)
    regions = tuple(r for r in detection.regions if r.bbox[1] > y0 + 100)  # the diagram and what follows it
    detection = dataclasses.replace(detection, regions=(*regions, boxed))
    found = list(scanpage.blocks(reader, detection))
    text = " ".join(b.text for b in found)
    assert "Firstpara The row permission" in text, text
    assert [b.kind for b in found].count(Kind.PICTURE) == 1  # the diagram's only: the paragraph is no picture

"""The pixel path's reading order on a two-column page with a narrow gutter: a page drawn with pymupdf, rasterised,
and read by the real detector, layout model and recogniser (the `--no-text-layer` path: no text layer is read)."""

from __future__ import annotations

import re

import numpy as np
import pytest

pymupdf = pytest.importorskip("pymupdf")
pytest.importorskip("rapidocr")

from modelhost.backends.ocr import scanpage  # noqa: E402
from modelhost.backends.ocr.pixels import PixelReader  # noqa: E402

#: The page is read at the `convert` default.
DPI = 150
#: The body's size in points, and the points between the columns' text: a handbook's (amt_handbook_sample's gutter
#: is 13 points beside 9-point type; at 9 points the detector joins this page's first lines across the gutter).
#: The detector's boxes reach ~3 points past the ink at each end of a line, so between its boxes this gutter is
#: ~7 points, under lines.GUTTER_EM of their height.
FONT = 8.5
GUTTER = 13.0
#: Each column's paragraphs: a word that names the column and the paragraph, then running text to fill lines.
FILL = (
    "is set in running text that wraps across the whole width of its column so the lines are long and "
    "justified as a handbook sets them, and it goes on for a few lines more before the paragraph ends. A handbook's "
    "paragraph is long: it explains how a part is made, how it is fitted and how it is checked, so it runs down "
    "its column for eight lines or more, and its region is tall."
)
LEFT = [f"Leftpara{n} {FILL}" for n in ("one", "two")]
RIGHT = [f"Rightpara{n} {FILL}" for n in ("one", "two")]


def _figure(page: object, rect: object, labels: list[str], caption: str) -> None:
    # A drawing at the foot of a column: a framed shape with labels inside it, and its caption under it.
    page.draw_rect(rect, color=(0, 0, 0), width=1)  # type: ignore[attr-defined]
    page.draw_circle((rect.x0 + 60, rect.y0 + 60), 30, color=(0, 0, 0), width=2)  # type: ignore[attr-defined]
    for n, label in enumerate(labels):
        page.insert_text((rect.x0 + 110, rect.y0 + 30 + 25 * n), label, fontsize=8)  # type: ignore[attr-defined]
    page.insert_text((rect.x0, rect.y1 + 14), caption, fontsize=8)  # type: ignore[attr-defined]


def two_column_page() -> np.ndarray:
    """A Letter page set as amt_handbook_sample is: two justified columns of two paragraphs each, a bold heading
    between them, and a figure with labels and a caption at the foot of each column, the right one taller (so no
    row of white runs across both columns), rasterised at DPI."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    margin = 54.0
    width = (612 - 2 * margin - GUTTER) / 2
    for n, paragraphs in enumerate((LEFT, RIGHT)):
        x0 = margin + n * (width + GUTTER)
        y = margin + 12 * n
        for k, text in enumerate(paragraphs):
            if k:
                page.insert_text((x0, y + FONT), f"Heading {n + 1}", fontsize=FONT + 1, fontname="hebo")
                y += 2 * FONT
            rect = pymupdf.Rect(x0, y, x0 + width, y + 200)
            spare = page.insert_textbox(rect, text, fontsize=FONT, fontname="helv", align=pymupdf.TEXT_ALIGN_JUSTIFY)
            assert spare >= 0, "a paragraph must fit its box"
            y = rect.y1 - spare + 10
        side = "Left" if n == 0 else "Right"
        figure = pymupdf.Rect(x0, y + 20 + 60 * (1 - n), x0 + width, 700)
        _figure(page, figure, ["Nut case", "Locking collar"], f"Figure {n + 1}. {side}.")
    pixmap = page.get_pixmap(dpi=DPI)
    image = np.frombuffer(pixmap.samples, np.uint8).reshape(pixmap.height, pixmap.width, pixmap.n)[:, :, :3]
    doc.close()
    return np.ascontiguousarray(image)


def test_a_narrow_gutter_reads_down_each_column_with_its_figure(reader: PixelReader) -> None:
    # amt_handbook_sample's columns were read across, a row of regions at a time (CER 0.63 on pixels): its gutter
    # was looked for between the detector's boxes, which reach past the ink until the gutter is too narrow. And the
    # layout model boxes this page's drawings loosely, past the gutter: each figure went after both columns.
    image = two_column_page()
    blocks = [b for b in scanpage.blocks(reader, reader.detect(image, DPI)) if b.text]
    text = " ".join(b.text for b in blocks)
    marks = re.findall(r"(Left|Right)para(one|two)", text)
    assert marks == [("Left", n) for n in ("one", "two")] + [("Right", n) for n in ("one", "two")]
    # the left figure's caption is read with its column, before the right column begins
    assert text.index("Figure 1") < text.index("Rightparaone") < text.index("Figure 2"), text

"""Text set in other directions on an upright page, read from its pixels (issue 34's probe: orientation_boxes).

A page that runs upright as a whole can hold boxes of text turned a quarter either way, upside down, or set at a
slant: a form's sideways margin notes, a diagram's labels, a stamp. The page's orientation vote turns pages, not
lines, so such a line was read as the recogniser first cut it: a box running up the page and an upside-down box
came out as glyph soup (and a warning blamed the page's script), and a box running down the page had its lines'
words interleaved, because they were placed along x across a tall, narrow box. Pages drawn here with reportlab and
read from their pixels only (the real PP-OCR and layout models from the wheels), as pdf-spec's socket sends them.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pytest

pytest.importorskip("rapidocr")

from modelhost.backends.ocr import scanpage
from modelhost.backends.ocr.pixels import PixelReader

DPI = 150
BODY = (
    "The northern region sold more timber this quarter than in any quarter before,",
    "and its mills ran at full capacity through the winter months while the southern",
    "mills stood idle for repairs. Shipments were delayed by two weeks in August,",
    "but the backlog was cleared before the end of September this year.",
)
#: Two lines per box, each over LABEL_WORDS words: a paragraph, not a diagram's label (analyse leaves those out).
UP = ("Samples were taken from every mill", "along the northern river each week")
DOWN = ("The southern mills reopen in spring", "after their repairs are finished")
UPSIDE = ("Prices held steady through the year", "despite the delays in shipping")
SLANT = "Approved by the regional board"


def _render(path: Path) -> np.ndarray:
    """A Letter page of BODY with a box of text running up its left margin, one running down its right margin, one
    upside down under the body and a line set at a slant, as pixels."""
    from reportlab.pdfgen import canvas

    page = canvas.Canvas(str(path), pagesize=(612, 792))
    page.setFont("Helvetica", 11)
    for n, line in enumerate(BODY):
        page.drawString(110, 700 - 16 * n, line)

    def box(x: float, y: float, angle: float, lines: tuple[str, ...]) -> None:
        page.saveState()
        page.translate(x, y)
        page.rotate(angle)
        for n, line in enumerate(lines):
            page.drawString(0, -16 * n, line)
        page.restoreState()

    box(60, 300, 90, UP)  # reads bottom to top: the page shows it turned 270 degrees clockwise
    box(552, 640, -90, DOWN)  # reads top to bottom: turned 90 degrees
    box(420, 420, 180, UPSIDE)
    box(200, 200, 35, (SLANT,))
    page.showPage()
    page.save()
    document = pdfium.PdfDocument(str(path))
    try:
        return np.asarray(document[0].render(scale=DPI / 72).to_pil().convert("RGB"))
    finally:
        document.close()


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


@pytest.fixture(scope="module")
def page_text(reader: PixelReader, tmp_path_factory: pytest.TempPathFactory) -> str:
    image = _render(tmp_path_factory.mktemp("directions") / "page.pdf")
    layout = scanpage.read_layout(reader, image, DPI)
    return _words(" ".join(block.text for block in layout.blocks))


@pytest.mark.parametrize(
    "lines",
    [BODY[:2], UP, DOWN, UPSIDE, (SLANT,)],
    ids=["upright", "running-up", "running-down", "upside-down", "slant"],
)
def test_each_box_reads_whole_and_in_order_in_its_own_direction(page_text: str, lines: tuple[str, ...]) -> None:
    assert _words(" ".join(lines)) in page_text


def test_an_upright_page_stays_upright_line_by_line(reader: PixelReader, tmp_path: Path) -> None:
    """Every line of a plain page reads with confidence the first time: none is turned, none read twice."""
    from reportlab.pdfgen import canvas

    page = canvas.Canvas(str(tmp_path / "upright.pdf"), pagesize=(612, 792))
    page.setFont("Helvetica", 11)
    for n, line in enumerate(BODY):
        page.drawString(72, 700 - 16 * n, line)
    page.showPage()
    page.save()
    document = pdfium.PdfDocument(str(tmp_path / "upright.pdf"))
    try:
        image = np.asarray(document[0].render(scale=DPI / 72).to_pil().convert("RGB"))
    finally:
        document.close()
    detection = reader.detect(image, DPI)
    words = reader.recognise(detection, range(len(detection.quads)))
    assert _words(" ".join(w.text for w in words)) == _words(" ".join(BODY))
    assert {w.rotation for w in words} == {0}


def test_a_pictures_turned_labels_are_left_out_and_its_turned_sentences_kept() -> None:
    """A network diagram's layers labelled up its boxes ("3x3 conv, 64") are a picture's labels, which the text path
    leaves out; read clean from pixels they came out line after line. A turned line of a sentence's length stays."""
    from modelhost.backends.ocr.pixels import without_turned_labels
    from modelhost.docengine.types import Word

    def line(number: int, text: str, rotation: int) -> list[Word]:
        return [Word(t, (10.0 * k, 20.0 * number, 10.0 * k + 8, 20.0 * number + 10), rotation=rotation, line=number)
                for k, t in enumerate(text.split())]  # fmt: skip

    label = line(0, "3x3 conv, 64", 270)
    sentence = line(1, "Samples were taken from every mill", 270)
    upright = line(2, "Avg pool", 0)
    kept = without_turned_labels([*label, *sentence, *upright])
    assert [w.text for w in kept] == [w.text for w in [*sentence, *upright]]

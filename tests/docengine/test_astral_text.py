"""Text set in STIX Two (found in a sweep of real PDFs: a course's notes typeset with STIXTwoText and STIXTwoMath):
its math italic letters lie beyond the BMP ("𝑓", U+1D453), which pdfium hands over as two UTF-16 surrogates, and
its text face's name holds "STIX", a math font's name fragment. The letters were dropped as unmapped and every line
of prose came out as a display formula. Pages drawn here with matplotlib (TrueType embedded, ToUnicode written)."""

from __future__ import annotations

from pathlib import Path

import pypdfium2 as pdfium
import pytest

from modelhost.docengine.textlayer import read_text_layer
from modelhost.docengine.types import Kind

from .conftest import document_layouts

matplotlib = pytest.importorskip("matplotlib")

SERIF = Path("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf")


def _page(path: Path, lines: list[str], font: Path | None = None) -> Path:
    """An A4 page with `lines` set 14 points apart in `font` (DejaVu Serif by default), the font embedded whole."""
    matplotlib.use("pdf")
    import matplotlib.pyplot as plt
    from matplotlib.font_manager import FontProperties

    prop = FontProperties(fname=str(font or SERIF), size=11)
    with matplotlib.rc_context({"pdf.fonttype": 42}):
        fig = plt.figure(figsize=(8.27, 11.69))
        for k, line in enumerate(lines):
            fig.text(0.12, 0.85 - k * 14 / 842, line, fontproperties=prop)
        fig.savefig(path)
        plt.close(fig)
    return path


@pytest.mark.skipif(not SERIF.exists(), reason="DejaVu Serif not installed")
def test_letters_beyond_the_bmp_are_read(tmp_path: Path) -> None:
    """Math italic letters (U+1D453 "𝑓", U+1D465 "𝑥") come out as letters, one each, in their word."""
    path = _page(tmp_path / "astral.pdf", ["the function \U0001d453(\U0001d465) is smooth"])
    doc = pdfium.PdfDocument(str(path))
    try:
        words = [w.text for w in read_text_layer(doc, 0).words]
    finally:
        doc.close()
    assert words == ["the", "function", "f(x)", "is", "smooth"]


@pytest.mark.skipif(not SERIF.exists(), reason="DejaVu Serif not installed")
def test_stix_two_text_is_a_text_face(tmp_path: Path) -> None:
    """A paragraph in a face named STIXTwoText is prose, not a formula."""
    from fontTools.ttLib import TTFont

    font = TTFont(str(SERIF))
    for record in font["name"].names:
        if record.nameID in (1, 4, 6):
            record.string = {1: "STIX Two Text", 4: "STIX Two Text", 6: "STIXTwoText"}[record.nameID]
    renamed = tmp_path / "STIXTwoText.ttf"
    font.save(str(renamed))
    lines = [
        "This textbook denotes the partial derivative of a function with respect",
        "to its first argument by a subscript, and the reader will meet it often in",
        "the chapters that follow, where each rule is derived from the definition.",
    ]
    path = _page(tmp_path / "stix.pdf", lines, renamed)
    doc = pdfium.PdfDocument(str(path))
    try:
        words = read_text_layer(doc, 0).words
    finally:
        doc.close()
    assert words and all("STIXTwoText" in w.font for w in words)
    assert not any(w.math for w in words)
    kinds = {b.kind for page in document_layouts(path) for b in page.blocks}
    assert Kind.FORMULA not in kinds
    assert Kind.TEXT in kinds

"""A text layer that lies: a page whose fonts' ToUnicode maps send glyphs to the wrong characters reads as letters no
language writes, so the page is read from its pixels (as a page without a text layer is) and the summary says why;
the same page with a true map stays on its text layer, and no model reads it.

The pages are drawn here with reportlab in an embedded TrueType font (whose subset reportlab maps with a ToUnicode
CMap, one `<code> <unicode>` line a glyph), and the map is then rewritten as lying producers write theirs: each
letter shifted along the alphabet (a CID font read by glyph id: "the" comes out "wkh"), or the Arabic kashida glyph
mapped to waw (right_to_left_02's class: "قويوووة" where the page prints a stretched "قويـــة"); and a Type3 font
whose glyphs are named g1..gN, read as its codes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium
import pytest

from modelhost.backends.ocr.model import OcrModel
from modelhost.docengine.textlayer import read_text_layer
from modelhost.docengine.types import PageContent, Usability
from modelhost.documents import ConvertSettings, convert, summary
from modelhost.host import Host
from modelhost.testing.hostile_pdfs import _pdf, _stream, _text_page
from modelhost.testing.pages import cer

from .test_convert import _Unclosable
from .test_pictures import _Counting

#: Fonts shipped with the system's fonts-dejavu (Latin and Arabic both).
_DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")

PROSE = [
    "The quick brown fox jumps over the lazy dog while the farmer",
    "watches from the porch and thinks about the harvest season",
    "that is coming soon to the valley where his family has lived",
    "for many generations of careful work on the rich black land.",
]

#: Arabic words, every third one stretched with kashidas (U+0640) as a justified line stretches them.
_ARABIC = [
    "تضع",
    "الحكومة",
    "خطة",
    "واضحة",
    "لتحقيق",
    "التنمية",
    "المستدامة",
    "في",
    "جميع",
    "المجالات",
    "الاقتصادية",
    "والاجتماعية",
]
KASHIDA_LINES = [
    " ".join(w if (i + k) % 3 else w[:2] + "\u0640" * 3 + w[2:] for i, w in enumerate(_ARABIC)) for k in range(6)
]

#: One line of a ToUnicode CMap's bfchar section as reportlab writes it: a one-byte code and one UTF-16 unit.
_BFCHAR = re.compile(rb"<([0-9A-F]{2})> <([0-9A-F]{4})>")


def _drawn(path: Path, lines: list[str], remap: Callable[[str], str] | None = None, *, right: bool = False) -> Path:
    """`lines` drawn in DejaVu Sans (embedded, uncompressed), the ToUnicode map then rewritten by `remap` (each
    glyph's character to the one the lying map gives it). Same-length edits: the file's offsets stay true."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    if not _DEJAVU.exists():
        pytest.skip("DejaVu Sans is not installed")
    pdfmetrics.registerFont(TTFont("DejaVuSans", str(_DEJAVU)))
    c = canvas.Canvas(str(path), pagesize=(595, 842), pageCompression=0, invariant=1)
    c.setFont("DejaVuSans", 12)
    for i, line in enumerate(lines):
        if right:
            c.drawRightString(540, 770 - 18 * i, line)
        else:
            c.drawString(60, 770 - 18 * i, line)
    c.showPage()
    c.save()
    if remap is not None:
        data = path.read_bytes()

        def lie(m: re.Match[bytes]) -> bytes:
            told = remap(chr(int(m.group(2), 16)))
            return b"<%s> <%04X>" % (m.group(1), ord(told))

        path.write_bytes(_BFCHAR.sub(lie, data))
    return path


def _shifted(c: str) -> str:
    # Each Latin letter mapped three letters on, in its case: what a font read by its glyph ids gives.
    for first in ("a", "A"):
        if first <= c <= chr(ord(first) + 25):
            return chr(ord(first) + (ord(c) - ord(first) + 3) % 26)
    return c


def _kashida_as_waw(c: str) -> str:
    return "\u0648" if c == "\u0640" else c


def _type3(path: Path, first: int) -> Path:
    """PROSE in a Type3 font whose glyphs are named g1..gN (no ToUnicode: the names say nothing), the letters coded
    in alphabetical order from `first`, word spaces left as gaps (as TeX's bitmap fonts are set). From 97 the codes
    happen to be ASCII's, and the page reads; from 33 they are punctuation and digits."""
    text = " ".join(PROSE * 3)
    letters = sorted(set(text) - {" "})
    code = {ch: first + i for i, ch in enumerate(letters)}
    n = len(letters)
    procs = b" ".join(b"/g%d %d 0 R" % (i + 1, 7 + i) for i in range(n))
    names = b" ".join(b"/g%d" % (i + 1) for i in range(n))
    font = (
        b"<< /Type /Font /Subtype /Type3 /FontBBox [0 0 600 700] /FontMatrix [0.001 0 0 0.001 0 0] /CharProcs << "
        + procs
        + b" >> /Encoding << /Type /Encoding /Differences [%d %s] >> /FirstChar %d /LastChar %d /Widths [%s] "
        % (first, names, first, first + n - 1, b" ".join([b"600"] * n))
        + b"/Resources << >> >>"
    )
    words = text.split()
    shown = [
        b"[" + b" -600 ".join(b"<%s>" % bytes(code[c] for c in w).hex().encode() for w in words[i : i + 9]) + b"] TJ T*"
        for i in range(0, len(words), 9)
    ]
    content = b"BT /F1 12 Tf 14 TL 72 720 Td " + b" ".join(shown) + b" ET"
    glyph = _stream(b"", b"600 0 0 0 500 600 d1 50 0 400 600 re f")  # each glyph a bar: only its code matters here
    catalog, pages = b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>"
    path.write_bytes(_pdf([catalog, pages, _text_page(b"", 4, 5), _stream(b"", content), font, b"<< >>"] + [glyph] * n))
    return path


def _layer(path: Path) -> PageContent:
    doc = pdfium.PdfDocument(str(path))
    try:
        return read_text_layer(doc, 0)
    finally:
        doc.close()


def test_a_shifted_map_is_no_text(tmp_path: Path) -> None:
    content = _layer(_drawn(tmp_path / "lies.pdf", PROSE * 3, _shifted))
    assert "wkh" in [w.text for w in content.words]  # the layer says "wkh" where the page prints "the"
    assert content.usability is Usability.MISMAPPED
    assert content.ocr_regions == ((0.0, 0.0, content.width, content.height),)  # the whole page is read from pixels


def test_kashidas_mapped_to_a_letter_are_no_text(tmp_path: Path) -> None:
    content = _layer(_drawn(tmp_path / "lies.pdf", KASHIDA_LINES, _kashida_as_waw, right=True))
    assert any("\u0648" * 3 in w.text for w in content.words)
    assert content.usability is Usability.MISMAPPED


@pytest.mark.parametrize(("first", "verdict"), [(33, Usability.MISMAPPED), (97, Usability.USABLE)])
def test_a_type3_font_named_g1_to_gn_reads_as_its_codes(tmp_path: Path, first: int, verdict: Usability) -> None:
    content = _layer(_type3(tmp_path / "type3.pdf", first))
    assert content.usability is verdict, [w.text for w in content.words[:8]]


@pytest.mark.parametrize(("lines", "right"), [(PROSE * 3, False), (KASHIDA_LINES, True)], ids=["latin", "kashida"])
def test_the_same_pages_with_true_maps_keep_their_layer(tmp_path: Path, lines: list[str], right: bool) -> None:
    # Kashidas are drawn three at a time here too: a modifier letter stretching a word is no letter tripled.
    content = _layer(_drawn(tmp_path / "true.pdf", lines, right=right))
    assert content.usability is Usability.USABLE and content.ocr_regions == ()


def _convert(ocr_model: OcrModel, path: Path) -> tuple[Any, int]:
    async def run() -> tuple[Any, int]:
        host = Host.from_model(_Unclosable(ocr_model), name="ocr")
        await host.start()
        try:
            reader = _Counting(host)
            return await convert(path, reader, ConvertSettings(dpi=150), docling=False), reader.reads
        finally:
            await host.aclose()

    return asyncio.run(run())


def test_a_lying_page_is_read_from_its_pixels_and_says_why(ocr_model: OcrModel, tmp_path: Path) -> None:
    conversion, reads = _convert(ocr_model, _drawn(tmp_path / "lies.pdf", PROSE * 3, _shifted))
    assert reads == 1 and conversion.pages[0].via != "text layer"
    assert cer(" ".join(PROSE * 3), " ".join(conversion.render("md").split())) <= 0.05
    line = summary(conversion)
    assert "text layers set aside on pages 1 (page 1: its text layer's letters are not the page's" in line, line


def test_a_true_page_is_its_text_layer_and_no_model_reads_it(ocr_model: OcrModel, tmp_path: Path) -> None:
    conversion, reads = _convert(ocr_model, _drawn(tmp_path / "true.pdf", PROSE * 3))
    assert reads == 0 and conversion.pages[0].via == "text layer"
    assert " ".join(conversion.render("md").split()) == " ".join(PROSE * 3)
    assert "set aside" not in summary(conversion)


#: Welsh, whose w and y are vowels: a page of such words is a fifth vowelless to the Latin statistic, and true.
WELSH = [
    "cwtch crwth cwrw llwch cwch trwm bwrdd twrch gwlff cwrdd",
    "hwn yw'r cwch a'r bwrdd trwm yn y cwm ger y llwch",
]


def test_a_true_layer_the_statistics_doubt_is_kept_when_its_pixels_agree(ocr_model: OcrModel, tmp_path: Path) -> None:
    path = _drawn(tmp_path / "welsh.pdf", WELSH * 6)
    assert _layer(path).usability is Usability.MISMAPPED  # doubted...
    conversion, reads = _convert(ocr_model, path)
    assert reads == 1  # ...so its pixels were read, and agree with it: the layer is the page's text
    assert conversion.pages[0].via == "text layer" and "set aside" not in summary(conversion)
    assert " ".join(conversion.render("md").split()) == " ".join(WELSH * 6)


def test_a_doubted_layer_is_kept_where_no_model_reads_pixels(tmp_path: Path) -> None:
    path = _drawn(tmp_path / "lies.pdf", PROSE * 3, _shifted)
    conversion = asyncio.run(convert(path, None, ConvertSettings(), docling=False))
    assert conversion.pages[0].via == "text layer" and not conversion.unread  # the layer is all there is

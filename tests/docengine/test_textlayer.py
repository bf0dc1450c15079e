"""The text layer reader on real PDFs of the corpus: words with font facts, rules, images, the verdict."""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from modelhost.docengine import Usability, analyse, read_text_layer
from modelhost.docengine.lines import rtl

from .conftest import corpus

Open = Callable[[str], pdfium.PdfDocument]


def test_headings_page_words_carry_their_font_facts(open_pdf: Open) -> None:
    content = read_text_layer(open_pdf("pdfspec/headings.pdf"), 0)
    assert content.usable and content.number == 1
    first = content.words[0]
    assert (first.text, first.bold) == ("1", True)
    body = next(w for w in content.words if w.text == "Body")
    assert not body.bold and body.size < first.size
    assert " ".join(w.text for w in content.words).startswith("1 First Section Body of the first section.")
    # top-left origin: the first heading is above its body line
    assert first.y1 <= body.y0


def test_the_ruled_table_page_gives_its_rules(open_pdf: Open) -> None:
    content = read_text_layer(open_pdf("pdfspec/table.pdf"), 0)
    horizontal = [s for s in content.rulings if s.horizontal]
    vertical = [s for s in content.rulings if not s.horizontal]
    assert len(horizontal) == 4 and len(vertical) == 12
    assert {round(s.y0) for s in horizontal} == {round(content.height - y) for y in (716.9, 704.5, 692.2, 679.8)}


def test_an_image_only_page_needs_ocr_everywhere(open_pdf: Open) -> None:
    content = read_text_layer(open_pdf("pdfspec/scanned.pdf"), 0)
    assert content.usability is Usability.NO_TEXT and not content.words
    assert content.ocr_regions == ((0.0, 0.0, content.width, content.height),)
    assert len(content.images) == 1


def test_a_rotated_page_reports_its_displayed_size(open_pdf: Open) -> None:
    content = read_text_layer(open_pdf("ocr/ocr_test_rotated_90.pdf"), 0)
    assert content.rotation == 270 and content.width > content.height


def test_the_result_crosses_a_process_boundary(open_pdf: Open) -> None:
    content = read_text_layer(open_pdf("pdf/2305.03393v1-pg9.pdf"), 0)
    assert pickle.loads(pickle.dumps(content)) == content
    assert len(content.words) > 300


def _korean_and_arabic(tmp_path: Path) -> tuple[Path, Path]:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    # Korean through a CID font and its Unicode CMap (no font file needed); Arabic in DejaVu Sans (Debian's
    # fonts-dejavu-core), drawn in visual order the way a shaping producer writes it: the first word rightmost,
    # each word's letters from right to left.
    pdfmetrics.registerFont(UnicodeCIDFont("HYSMyeongJo-Medium"))
    pdfmetrics.registerFont(TTFont("DejaVu", DEJAVU))
    korean, arabic = tmp_path / "ko.pdf", tmp_path / "ar.pdf"
    c = canvas.Canvas(str(korean), pagesize=(595, 842))
    c.setFont("HYSMyeongJo-Medium", 10)
    c.drawString(72, 740, "모든 국민은 법 앞에 평등하다.")
    c.save()
    c = canvas.Canvas(str(arabic), pagesize=(595, 842))
    c.setFont("DejaVu", 12)
    x = 520.0
    for word in ARABIC.split():
        width = pdfmetrics.stringWidth(word, "DejaVu", 12)
        c.drawString(x - width, 770, word[::-1])
        x -= width + 8
    c.save()
    return korean, arabic


DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
ARABIC = "مرحبا بالعالم الجميل"


@pytest.mark.skipif(not Path(DEJAVU).exists(), reason="needs Debian's fonts-dejavu-core")
def test_korean_and_arabic_text_layers_read_in_their_own_order(tmp_path: Path) -> None:
    korean, arabic = _korean_and_arabic(tmp_path)
    for path, expected in ((korean, "모든 국민은 법 앞에 평등하다."), (arabic, ARABIC)):
        doc = pdfium.PdfDocument(str(path))
        try:
            content = read_text_layer(doc, 0)
        finally:
            doc.close()
        assert content.usable
        assert [b.text for b in analyse(content).blocks] == [expected]


def test_garbled_words_become_ocr_regions_and_the_rest_stays_text(open_pdf: Open) -> None:
    # The Redbook's page 3 has a sidebar in a font without ToUnicode: raw codes, not text.
    content = read_text_layer(open_pdf("pdf/redp5110_sampled.pdf"), 2)
    assert content.usable
    assert all(not any(ord(c) < 32 for c in w.text) for w in content.words)
    sidebar = [r for r in content.ocr_regions if r[0] < 160 and 340 < r[1] < 350 and r[3] > 420]
    assert len(sidebar) == 1
    assert "No one else has the vast consulting experiences" in " ".join(w.text for w in content.words)


def test_a_page_of_too_many_characters_is_refused_by_name(tmp_path: Path) -> None:
    from reportlab.pdfgen import canvas

    from modelhost.docengine.textlayer import MAX_CHARS
    from modelhost.errors import InvalidInputError

    path = tmp_path / "dense.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("Helvetica", 1)
    line = "x" * 2000
    for k in range(MAX_CHARS // len(line) + 2):
        c.drawString(0, 1 + (k % 800), line)
    c.save()
    doc = pdfium.PdfDocument(str(path))
    try:
        with pytest.raises(InvalidInputError, match="characters"):
            read_text_layer(doc, 0)
    finally:
        doc.close()


def _content_pdf(content: bytes) -> bytes:
    # One letter page drawing `content` (a content stream) in Helvetica as /F1.
    from modelhost.testing.hostile_pdfs import _FONT, _pdf, _stream, _text_page

    pages = b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>"
    return _pdf([b"<< /Type /Catalog /Pages 2 0 R >>", pages, _text_page(b"", 4, 5), _stream(b"", content), _FONT])


def test_superscripts_and_subscripts_are_words_of_their_own_and_small_capitals_are_not(tmp_path: Path) -> None:
    # "1Space", "Zgas" and "105" were single words on the arXiv paper (an affiliation marker, a subscript, an
    # exponent), so no search for "Space", "gas" or "10" found them. A smaller size on the same baseline (fake
    # small capitals) is one word still.
    content = (
        b"BT /F1 10 Tf 72 700 Td (H) Tj /F1 8 Tf (ELLO) Tj ET "  # small capitals: one baseline
        b"BT /F1 7 Tf 72 660 Td (1) Tj /F1 10 Tf 0 -4 Td (Space) Tj ET "  # a raised marker, then the word
        b"BT /F1 10 Tf 72 620 Td (Z) Tj /F1 7 Tf 0 -1.5 Td (gas) Tj ET "  # TeX's subscript: 0.15 em lower
        b"BT /F1 10 Tf 72 580 Td (10) Tj /F1 7 Tf 0 4 Td (5) Tj ET"  # an exponent
    )
    assert _layer_words(tmp_path / "scripts.pdf", content) == ["HELLO", "1", "Space", "Z", "gas", "10", "5"]


def _layer_words(path: Path, content: bytes) -> list[str]:
    # The text layer's words of a one-page PDF drawn from `content` (a page's content stream).
    path.write_bytes(_content_pdf(content))
    doc = pdfium.PdfDocument(str(path))
    try:
        return [w.text for w in read_text_layer(doc, 0).words]
    finally:
        doc.close()


def _invisible_spaces_line(y: int, pieces: list[str], gap: float) -> bytes:
    # One 6-point line (Tf 1 under a 6x matrix, as Acrobat Distiller writes it) drawn piece by piece: after each
    # piece an invisible word space (render mode 3) of its own, drawn back over the piece's first letters (a fifth
    # of its width in), and the next piece `gap` ems after the piece's end: 0 for pieces of one word, printed
    # touching.
    from reportlab.pdfbase.pdfmetrics import stringWidth

    ops = [b"BT /F1 1 Tf 6 0 0 6 72 %d Tm" % y]
    for piece in pieces:
        width = stringWidth(piece, "Helvetica", 1)
        back = 0.8 * width
        ops.append(
            b"0 Tr (%s) Tj 3 Tr %.4f 0 Td [( ) -941 ( )] TJ %.4f 0 Td" % (piece.encode(), width - back, back + gap)
        )
    ops.append(b"ET")
    return b" ".join(ops)


def test_a_word_parted_by_invisible_spaces_is_one_word_and_words_apart_stay_apart(tmp_path: Path) -> None:
    # A bank's annual report (Acrobat Distiller, tables_dev/tdr_modifications) writes its word spaces as invisible
    # glyphs of their own, drawn back over the line; some fall inside words, between letters printed touching, where
    # pdfium kept them as spaces or generated one: "t he", "d iffer", "loa ns". Pieces a word space apart (0.28
    # em), or a tight table's cells with no space at all between them (0.5 em), stay words of their own.
    content = b" ".join(
        [
            _invisible_spaces_line(700, ["of t", "he loan d", "iffer"], 0.0),
            _invisible_spaces_line(680, ["the", "loan"], 0.28),
            b"BT /F1 1 Tf 6 0 0 6 72 660 Tm (1,357) Tj 3.28 0 Td (1,727) Tj ET",  # cells 0.5 em apart, no space
        ]
    )
    words = _layer_words(tmp_path / "invisible_spaces.pdf", content)
    assert words == ["of", "the", "loan", "differ", "the", "loan", "1,357", "1,727"]


def test_spaces_generated_inside_words_go_and_word_spaces_between_objects_stay(open_pdf: Open) -> None:
    # The corpus' case of the drawn page above, and word spaces pdfium generates between text objects whose glyph
    # boxes (the faces' boxes, wider than the advances) leave only 0.09-0.10 em between the words: they stay.
    def text(name: str) -> str:
        return " ".join(w.text for w in read_text_layer(open_pdf(name), 0).words)

    report = text("tables_dev/tdr_modifications.pdf")
    assert "the effects of the TDR" in report and "will differ from" in report and "on loans previously" in report
    assert not re.search(r"\b(t he|d iffer|loa ns)\b", report)
    assert "time and frequency" in text("tables_dev/confproc_p009.pdf")
    assert "unauthorized copying" in text("pdf/office_dmca_p4.pdf")


def _tall_metrics_pdf(rotate: int) -> bytes:
    # Twelve lines of a paragraph, 12 points apart at 10 points, as Word writes them (Tf 1, the matrix scaling by 10),
    # in a face whose font descriptor claims 3.43 ems of ascent and 2.71 of descent: an ISO standard's Cambria.
    from modelhost.testing.hostile_pdfs import _pdf, _stream

    lines = b"".join(
        b"10 0 0 10 72 %d Tm (Line %d of a paragraph set in a face with broken metrics.) Tj " % (700 - 12 * k, k)
        for k in range(12)
    )
    widths = b" ".join(
        b"280" if chr(c) in "iljtf.,: " else b"820" if chr(c) in "mwMW" else b"560" for c in range(32, 127)
    )
    font = (
        b"<< /Type /Font /Subtype /TrueType /BaseFont /Cambria /FirstChar 32 /LastChar 126 /Widths [%s] "
        b"/Encoding /WinAnsiEncoding /FontDescriptor 6 0 R >>" % widths
    )
    descriptor = (
        b"<< /Type /FontDescriptor /FontName /Cambria /Flags 32 /FontBBox [-1000 -2710 2000 3430] /ItalicAngle 0 "
        b"/Ascent 3430 /Descent -2710 /CapHeight 700 /StemV 80 >>"
    )
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Rotate %d /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>" % rotate
    )
    pages = b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>"
    content = _stream(b"", b"BT /F1 1 Tf " + lines + b"ET")
    return _pdf([b"<< /Type /Catalog /Pages 2 0 R >>", pages, page, content, font, descriptor])


@pytest.mark.parametrize("rotate", [0, 90])
def test_a_face_whose_metrics_reach_over_five_lines_keeps_its_lines_apart(tmp_path: Path, rotate: int) -> None:
    # Each glyph's loose box (ascent to descent) covered five lines, and the paragraph came out interleaved word by
    # word ("Line Line Line 0 1 2 of of of ..."). A box over twice the type size tall is rebuilt from its baseline.
    path = tmp_path / "tall.pdf"
    path.write_bytes(_tall_metrics_pdf(rotate))
    doc = pdfium.PdfDocument(str(path))
    try:
        content = read_text_layer(doc, 0)
    finally:
        doc.close()
    across = [(w.y1 - w.y0) if rotate == 0 else (w.x1 - w.x0) for w in content.words]
    assert len(across) == 12 * 12 and max(across) < 1.2 * 10
    text = " ".join(b.text for b in analyse(content).blocks)
    expected = " ".join(f"Line {k} of a paragraph set in a face with broken metrics." for k in range(12))
    assert text == expected


def test_the_arxiv_affiliation_markers_and_subscripts_come_apart(open_pdf: Open) -> None:
    first = [w.text for w in read_text_layer(open_pdf("pdf/arxiv_2501.00089_p1-3.pdf"), 0).words]
    at = first.index("Space")
    assert first[at - 1 : at + 2] == ["1", "Space", "Telescope"]
    assert "1Space" not in first and first.count("Department") == 2
    third = " ".join(w.text for w in read_text_layer(open_pdf("pdf/arxiv_2501.00089_p1-3.pdf"), 2).words)
    assert "Z gas" in third and "Zgas" not in third


@pytest.mark.skipif(not Path(DEJAVU).exists(), reason="needs Debian's fonts-dejavu-core")
def test_accents_drawn_apart_from_their_letters_are_joined_to_them(tmp_path: Path) -> None:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    # Two ways producers draw "Dvořák Janček": decomposed text (letter, then its combining mark), and TeX's way, a
    # spacing accent glyph set over its letter (pdftotext reads both as the composed letters).
    pdfmetrics.registerFont(TTFont("DejaVu", DEJAVU))
    path = tmp_path / "accents.pdf"
    c = canvas.Canvas(str(path), pagesize=(595, 842))
    c.setFont("DejaVu", 12)
    c.drawString(72, 770, "Dvor\u030ca\u0301k Janc\u030cek")
    x = 72.0
    for base, accent in (("Dvor", "\u02c7"), ("a", "\u00b4"), ("k Janc", "\u02c7"), ("ek", "")):
        c.drawString(x, 740, base)
        x += pdfmetrics.stringWidth(base, "DejaVu", 12)
        if accent:  # centred over the last letter drawn
            last = pdfmetrics.stringWidth(base[-1], "DejaVu", 12)
            c.drawString(x - (last + pdfmetrics.stringWidth(accent, "DejaVu", 12)) / 2, 740, accent)
    c.save()
    doc = pdfium.PdfDocument(str(path))
    try:
        content = read_text_layer(doc, 0)
    finally:
        doc.close()
    lines: dict[int, list[str]] = {}
    for word in content.words:
        lines.setdefault(word.line, []).append(word.text)
    assert [" ".join(words) for words in lines.values()] == ["Dvořák Janček", "Dvořák Janček"]


@pytest.mark.parametrize("name", ["right_to_left_01", "right_to_left_03"])
def test_arabic_and_persian_text_layers_give_words_in_logical_order(open_pdf: Open, name: str) -> None:
    # pdfium gives these pages' words already reversed into logical order, except a lam-alef ligature's two
    # letters (one glyph, one box), which it reversed again ("الإنتاجية" came out "اإلنتاجية"); and a zero-width
    # space the producer wrote inside a word ("بناءً") split it. Every right-to-left word read must be a word of
    # the page as docling's ground truth has it.
    truth = set(re.findall(r"\w+", corpus(f"gt/{name}.md").read_text(encoding="utf-8")))
    doc = open_pdf(f"pdf/{name}.pdf")
    words = [w for i in range(len(doc)) for w in read_text_layer(doc, i).words]
    read = {part for w in words if rtl(w.text) for part in re.findall(r"\w+", w.text)}
    assert len(read) > 40
    assert sorted(read - truth) == []

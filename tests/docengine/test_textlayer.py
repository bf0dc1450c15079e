"""The text layer reader on real PDFs of the corpus: words with font facts, rules, images, the verdict."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pypdfium2 as pdfium

from modelhost.docengine import Usability, read_text_layer

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

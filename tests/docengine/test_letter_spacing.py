"""Letter-spaced text (tracking) reads as words: a fixed word gap cannot tell a letter gap from a word gap where a
whole line is spread, so the line's own gaps decide (textlayer._letter_spaced). Each page is drawn here; the cases
that must not change (code, single-letter cells, justified text, a lone spaced word) are drawn beside them."""

from __future__ import annotations

from pathlib import Path

import pypdfium2 as pdfium
import pytest

from modelhost.docengine import analyse, read_text_layer

from .test_textlayer import _layer_words

TITLE = "ANNUAL REPORT OF THE BOARD 2024"
HEAD = "Quarterly results of the northern region"


def _words(path: Path, lines: list[tuple[str, float, str, float, float]]) -> list[list[str]]:
    # Each line (font, size, text, character spacing in ems, horizontal scale in percent) drawn with reportlab in
    # its own text object and graphics state (Tc and Tz are graphics state: they would carry over); the text layer's
    # words, grouped by line from the top.
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(612, 792))
    for k, (font, size, text, spacing, scale) in enumerate(lines):
        c.saveState()
        t = c.beginText(40, 740 - 40 * k)
        t.setFont(font, size)
        t.setCharSpace(spacing * size)
        t.setHorizScale(scale)
        t.textOut(text)
        c.drawText(t)
        c.restoreState()
    c.save()
    doc = pdfium.PdfDocument(str(path))
    try:
        words = read_text_layer(doc, 0).words
    finally:
        doc.close()
    rows: dict[int, list[str]] = {}
    for w in words:
        rows.setdefault(round(w.y1), []).append(w.text)
    return [rows[y] for y in sorted(rows)]


@pytest.mark.parametrize("spacing", [0.35, 0.5, 0.8, 1.0])
def test_a_line_spread_by_character_spacing_reads_as_its_words(tmp_path: Path, spacing: float) -> None:
    # Tc spreads every letter (and the written word spaces) by the same amount: at 0.35 em and more each letter
    # came out a word of its own ("A N N U A L ...").
    rows = _words(
        tmp_path / "tc.pdf",
        [("Helvetica-Bold", 16, TITLE, spacing, 100), ("Times-Roman", 11, HEAD, spacing, 100)],
    )
    assert rows == [TITLE.split(), HEAD.split()]


DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"


@pytest.mark.skipif(not Path(DEJAVU).exists(), reason="needs Debian's fonts-dejavu-core")
def test_an_embedded_face_spread_by_character_spacing_reads_as_its_words(tmp_path: Path) -> None:
    # An embedded TrueType face, whose glyph boxes pdfium takes from the font program: the letter gaps vary with
    # each glyph's side bearings, and the words still come apart only at their spaces.
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    pdfmetrics.registerFont(TTFont("DejaVuSerif", DEJAVU))
    text = "Quarterly fiftieth WAVY affiliation jig 2024"
    rows = _words(tmp_path / "embedded.pdf", [("DejaVuSerif", 12, text, spacing, 100) for spacing in (0.4, 0.7)])
    assert rows == [text.split(), text.split()]


@pytest.mark.parametrize("spacing", [0.5, 1.0])
def test_a_widely_tracked_title_is_one_block(tmp_path: Path, spacing: float) -> None:
    # Tracked by 1 em, a title's word gaps are 2.3 em (the letter gap after the last letter, the space, the letter
    # gap after it): wider than any word space of type set solid, so each word was a piece and a block of its own.
    from reportlab.pdfgen import canvas

    path = tmp_path / "title.pdf"
    c = canvas.Canvas(str(path), pagesize=(612, 792))
    c.saveState()
    t = c.beginText(40, 740)
    t.setFont("Helvetica-Bold", 14)
    t.setCharSpace(spacing * 14)
    t.textOut(TITLE)
    c.drawText(t)
    c.restoreState()
    c.setFont("Helvetica", 10)
    for k in range(4):
        c.drawString(40, 700 - 13 * k, "Body text of the report follows in an ordinary paragraph across the page")
    c.save()
    doc = pdfium.PdfDocument(str(path))
    try:
        blocks = [b.text for b in analyse(read_text_layer(doc, 0)).blocks]
    finally:
        doc.close()
    assert blocks[0] == TITLE


def test_horizontal_scaling_with_character_spacing_reads_as_its_words(tmp_path: Path) -> None:
    # Tz widens the letters and the spacing between them alike: the line's own letter gap still tells words apart.
    rows = _words(
        tmp_path / "tz.pdf",
        [("Helvetica", 12, TITLE, 0.4, 160), ("Helvetica", 12, HEAD, 0.0, 220)],
    )
    assert rows == [TITLE.split(), HEAD.split()]


def test_a_title_spaced_out_by_hand_reads_as_its_words(tmp_path: Path) -> None:
    # "R E P O R T   O F ...": one typed space between letters, three between words.
    spaced = "   ".join(" ".join(word) for word in TITLE.split())
    rows = _words(tmp_path / "hand.pdf", [("Helvetica", 14, spaced, 0.0, 100), ("Times-Bold", 12, spaced, 0.0, 100)])
    assert rows == [TITLE.split(), TITLE.split()]


def test_a_line_tracked_by_kerning_after_every_letter_reads_as_its_words(tmp_path: Path) -> None:
    # A TJ kern after every letter (LaTeX's letterspacing, a layout program's tracking): pdfium generates a space
    # for each kern, and a wider one between words.
    def tracked(word: str) -> bytes:
        return b" -500 ".join(b"(" + ch.encode() + b")" for ch in word)

    line = b" -1100 ".join(tracked(word) for word in ("REPORT", "OF", "THE", "BOARD"))
    content = b"BT /F1 12 Tf 72 700 Td [" + line + b"] TJ ET"
    assert _layer_words(tmp_path / "tj.pdf", content) == ["REPORT", "OF", "THE", "BOARD"]


def test_code_cells_and_a_lone_spaced_word_are_read_as_written(tmp_path: Path) -> None:
    rows = _words(
        tmp_path / "same.pdf",
        [
            # code: a monospaced face's letters one space apart, words three apart, stay as typed
            ("Courier", 10, "a b c d   e f g h", 0.0, 100),
            # single letters one space apart with no wider gap say nothing of words: a form's choices
            ("Helvetica", 12, "A B C D E", 0.0, 100),
            # plain text, and a line justified by word spacing only: its letters touch
            ("Helvetica", 11, "Plain body text sets its letters tight.", 0.0, 100),
            ("Times-Roman", 11, "Justified   lines   stretch   their   word   spaces", 0.0, 100),
            # a little tracking (under WORD_GAP) was never a word break and still is none
            ("Helvetica", 11, HEAD, 0.1, 100),
        ],
    )
    assert rows == [
        list("abcdefgh"),
        list("ABCDE"),
        ["Plain", "body", "text", "sets", "its", "letters", "tight."],
        ["Justified", "lines", "stretch", "their", "word", "spaces"],
        HEAD.split(),
    ]


def test_table_cells_of_single_letters_stay_apart(tmp_path: Path) -> None:
    # Column heads drawn one text object each, evenly, with a wider gap between two groups of columns: a column
    # gap is wider than any word space, and the heads stay cells. Digits in cells a column apart likewise.
    heads = b" ".join(
        b"BT /F1 10 Tf %d 700 Td (%s) Tj ET" % (x, ch.encode())
        for x, ch in zip((72, 84, 96, 130, 142, 154), "ABCDEF", strict=True)
    )
    digits = b" ".join(b"BT /F1 10 Tf %d 660 Td (%d) Tj ET" % (72 + 30 * k, k) for k in range(1, 7))
    assert _layer_words(tmp_path / "cells.pdf", heads + b" " + digits) == [*"ABCDEF", *"123456"]

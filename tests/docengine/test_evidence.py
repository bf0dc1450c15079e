"""What the engine decides from evidence, on PDFs made here: text over a shaded box or banner is text, furniture needs
repetition or a page number, headings come from type set apart, ordered list items keep their numbers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from modelhost.docengine.types import Kind

from .conftest import document_layouts


def _pdf(path: Path, *pages: Callable[[object], None]) -> Path:
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(595, 842))
    for draw in pages:
        draw(c)
        c.showPage()
    c.save()
    return path


_layouts = document_layouts


def _image(path: Path, size: tuple[int, int], grey: int) -> str:
    from PIL import Image

    Image.new("RGB", size, (grey, grey, grey)).save(path)
    return str(path)


BODY = (
    "The committee met on the first of the month and reviewed the accounts of the year. Its members agreed that "
    "the reserves were sufficient and that the new rules apply from the start of the next financial year."
)


def _body(c: object, y: float, lines: int = 8) -> None:
    for k in range(lines):
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        c.drawString(72, y - 14 * k, f"{BODY[:88]} ({k})")  # type: ignore[attr-defined]


def test_text_over_a_shaded_box_or_a_banner_is_text_and_a_photo_keeps_its_labels(tmp_path: Path) -> None:
    shade = _image(tmp_path / "shade.png", (800, 200), 225)
    photo = _image(tmp_path / "photo.png", (600, 600), 120)
    summary = [
        "Summary: the new rules apply from the first of January, and every member of the fund",
        "must file the form before the end of March; late forms are refused by the office.",
    ]

    def page(c: object) -> None:
        # a banner (an image one line and a half tall) behind a section heading
        c.drawImage(shade, 66, 790, width=300, height=24)  # type: ignore[attr-defined]
        c.setFont("Helvetica-Bold", 13)  # type: ignore[attr-defined]
        c.drawString(72, 797, "2 Insurance in figures")  # type: ignore[attr-defined]
        # a boxed summary: a shaded image behind two lines of body text
        c.drawImage(shade, 66, 700, width=460, height=50)  # type: ignore[attr-defined]
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        for k, text in enumerate(summary):
            c.drawString(72, 733 - 14 * k, text)  # type: ignore[attr-defined]
        # a filled vector box behind a line of text
        c.setFillGray(0.9)  # type: ignore[attr-defined]
        c.rect(66, 660, 460, 24, stroke=0, fill=1)  # type: ignore[attr-defined]
        c.setFillGray(0)  # type: ignore[attr-defined]
        c.drawString(72, 668, "Note: members who filed last year need not file again")  # type: ignore[attr-defined]
        _body(c, 630)
        # a photo with two labels set on it: the labels are the picture's
        c.drawImage(photo, 150, 200, width=250, height=250)  # type: ignore[attr-defined]
        c.setFont("Helvetica", 8)  # type: ignore[attr-defined]
        c.drawString(170, 420, "Locking nut")  # type: ignore[attr-defined]
        c.drawString(300, 230, "Keyway")  # type: ignore[attr-defined]

    (layout,) = _layouts(_pdf(tmp_path / "boxed.pdf", page))
    texts = [b.text for b in layout.blocks if b.kind is not Kind.PICTURE]
    assert any(t.startswith("2 Insurance in figures") for t in texts)
    assert any(" ".join(summary) in t for t in texts)
    assert any(t.startswith("Note: members") for t in texts)
    pictures = [b for b in layout.blocks if b.kind is Kind.PICTURE]
    assert [tuple(round(v) for v in p.bbox) for p in pictures] == [(150, 392, 400, 642)]
    assert not any("Keyway" in t or "Locking nut" in t for t in texts)


QUESTIONS = {
    23: "If your country has a legal aid provider, what is the maximum caseload per lawyer?",
    24: "Do the staff lawyers coordinate to challenge common violations of due process?",
    25: "Are specialized legal aid services provided to specific groups?",
}


def test_numbered_questions_keep_their_numbers_in_doctags_and_markdown(tmp_path: Path) -> None:
    from modelhost.docengine.emit import doctags_page
    from modelhost.documents.assemble import build

    def page(c: object) -> None:
        y = 700.0
        for number, question in QUESTIONS.items():
            c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
            c.drawString(72, y, f"{number}. {question}")  # type: ignore[attr-defined]
            c.drawString(90, y - 22, "Yes, at the national level")  # type: ignore[attr-defined]
            c.drawString(90, y - 44, "No")  # type: ignore[attr-defined]
            y -= 80

    (layout,) = _layouts(_pdf(tmp_path / "survey.pdf", page))
    items = [b for b in layout.blocks if b.kind is Kind.LIST_ITEM]
    assert [(b.marker, b.ordered, b.text) for b in items] == [(f"{n}.", True, q) for n, q in QUESTIONS.items()]
    doctags = doctags_page(layout)
    for number, question in QUESTIONS.items():
        assert f">{number}. {question}</list_item>" in doctags
    # docling-core reading the page's DocTags back (the pixel path's pages are assembled so) keeps the numbers once
    markdown = build("survey", [doctags], [np.zeros((842, 595, 3), np.uint8)]).export_to_markdown()
    for number, question in QUESTIONS.items():
        assert f"\n{number}. {question}\n" in f"\n{markdown}\n"


def test_the_only_copy_of_a_line_at_the_top_is_no_furniture(tmp_path: Path) -> None:
    from modelhost.docengine.emit import to_docling

    def page(c: object) -> None:
        c.setFont("Helvetica-Bold", 16)  # type: ignore[attr-defined]
        c.drawString(72, 800, "Quarterly report of the northern region")  # type: ignore[attr-defined]
        _body(c, 760, lines=12)

    (layout,) = _layouts(_pdf(tmp_path / "title.pdf", page))
    first = layout.blocks[0]
    assert (first.kind, first.text) in {(Kind.TITLE, "Quarterly report of the northern region")} | {
        (Kind.SECTION_HEADER, "Quarterly report of the northern region")
    }
    markdown = to_docling("title", [layout]).export_to_markdown()
    assert markdown.startswith("# Quarterly report of the northern region")


def test_furniture_is_what_repeats_what_counts_pages_or_what_sits_where_running_heads_sit(tmp_path: Path) -> None:
    heads = ["Annual report 2026", "Chapter one: sales by region", "Annual report 2026"]

    def page(number: int) -> Callable[[object], None]:
        def draw(c: object) -> None:
            c.setFont("Helvetica", 9)  # type: ignore[attr-defined]
            c.drawString(72, 815, heads[number - 1])  # type: ignore[attr-defined]
            c.drawString(290, 30, str(number))  # type: ignore[attr-defined]
            if number == 2:  # a heading that opens the page, high up but set as a heading, not as the heads
                c.setFont("Helvetica-Bold", 14)  # type: ignore[attr-defined]
                c.drawString(72, 780, "Sales in the north")  # type: ignore[attr-defined]
            _body(c, 740)

        return draw

    layouts = _layouts(_pdf(tmp_path / "report.pdf", page(1), page(2), page(3)))
    for number, layout in enumerate(layouts, 1):
        kinds = {b.text: b.kind for b in layout.blocks}
        assert kinds[heads[number - 1]] is Kind.PAGE_HEADER
        assert kinds[str(number)] is Kind.PAGE_FOOTER
    assert {b.text: b.kind for b in layouts[1].blocks}["Sales in the north"] is Kind.SECTION_HEADER


def test_a_counted_line_set_a_little_larger_alone_is_a_heading_and_a_counted_body_line_a_list_item(
    tmp_path: Path,
) -> None:
    # Korean reports number sub-headings "(1) ..." a point larger than the body, in another face, not bold
    # (normal_4pages: 12.5 pt over 11.5 pt); a counted line at body size is a list item.
    def page(c: object) -> None:
        y = 780.0
        for n, heading in enumerate(("Scope of the rules", "Who must file"), 1):
            c.setFont("Helvetica", 12.5)  # type: ignore[attr-defined]
            c.drawString(72, y, f"({n}) {heading}")  # type: ignore[attr-defined]
            c.setFont("Times-Roman", 11.5)  # type: ignore[attr-defined]
            for k in range(4):
                c.drawString(72, y - 20 - 14 * k, f"{BODY[:80]} {k}.")  # type: ignore[attr-defined]
            c.drawString(72, y - 90, f"({n}) a counted line of the body, set as the body is")  # type: ignore[attr-defined]
            y -= 140

    (layout,) = _layouts(_pdf(tmp_path / "counted.pdf", page))
    kinds = {b.text: b.kind for b in layout.blocks}
    assert kinds["(1) Scope of the rules"] is Kind.SECTION_HEADER
    assert kinds["(2) Who must file"] is Kind.SECTION_HEADER
    items = [b for b in layout.blocks if b.kind is Kind.LIST_ITEM]
    assert [(b.marker, b.text) for b in items] == [
        (f"({n})", "a counted line of the body, set as the body is") for n in (1, 2)
    ]


def _lines(c: object, x: float, y: float, texts: list[tuple[str, str]], leading: float = 14) -> float:
    """Draws (font, text) lines at 10 pt from `y` down; returns the y under the last."""
    for font, text in texts:
        c.setFont(font, 10)  # type: ignore[attr-defined]
        c.drawString(x, y, text)  # type: ignore[attr-defined]
        y -= leading
    return y


def test_an_italic_label_line_standing_alone_heads_the_text_under_it_and_an_italic_line_with_nothing_after_is_text(
    tmp_path: Path,
) -> None:
    # The AMT handbook sets its sub-headings so: body size, italics, a line of their own, the section's text under
    # them at the body's leading ("Boots Self-Locking Nut").
    def page(c: object) -> None:
        y = _lines(c, 72, 780, [("Helvetica", f"{BODY[:88]} ({k})") for k in range(3)])
        y = _lines(c, 72, y - 8, [("Helvetica-Oblique", "Boots Self-Locking Nut")])
        y = _lines(c, 72, y, [("Helvetica", f"{BODY[:88]} ({k})") for k in range(3)])
        # an italic phrase run in at a paragraph's start goes on in upright type on its line: no heading
        c.setFont("Helvetica-Oblique", 10)  # type: ignore[attr-defined]
        c.drawString(72, y - 8, "In short,")  # type: ignore[attr-defined]
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        c.drawString(116, y - 8, "the reserves were sufficient and the rules apply from the next year on")  # type: ignore[attr-defined]
        y = _lines(c, 72, y - 22, [("Helvetica", f"{BODY[:88]} ({k})") for k in range(2)])
        # an italic line that ends its sentence is an italic sentence, and one with nothing under it a by-line
        y = _lines(c, 72, y - 8, [("Helvetica-Oblique", "The rules were approved.")])
        y = _lines(c, 72, y, [("Helvetica", f"{BODY[:88]} ({k})") for k in range(2)])
        _lines(c, 72, y - 8, [("Helvetica-Oblique", "Drawn by the Survey Office")])

    (layout,) = _layouts(_pdf(tmp_path / "italic.pdf", page))
    kinds = {b.text: b.kind for b in layout.blocks}
    assert kinds["Boots Self-Locking Nut"] is Kind.SECTION_HEADER
    assert [b.text for b in layout.blocks if b.kind is Kind.SECTION_HEADER] == ["Boots Self-Locking Nut"]
    assert any(b.text.startswith("In short, the reserves") for b in layout.blocks)
    assert kinds["Drawn by the Survey Office"] is Kind.TEXT


def test_bold_lines_that_head_nothing_are_no_headings_and_a_bold_numbered_title_standing_alone_is_one(
    tmp_path: Path,
) -> None:
    photo = _image(tmp_path / "photo.png", (400, 300), 120)

    def page(c: object) -> None:
        # a numbered section title in body size, bold, on a line of its own over its text: a heading
        y = _lines(c, 72, 790, [("Helvetica-Bold", "2.3 Reserves of the fund")])
        y = _lines(c, 72, y, [("Helvetica", f"{BODY[:88]} ({k})") for k in range(3)])
        # a bold run-in label at a paragraph's start, the paragraph going on after it
        c.setFont("Helvetica-Bold", 10)  # type: ignore[attr-defined]
        c.drawString(72, y - 8, "Note.")  # type: ignore[attr-defined]
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        c.drawString(104, y - 8, "Members who filed last year need not file again, whatever the office")  # type: ignore[attr-defined]
        y = _lines(c, 72, y - 22, [("Helvetica", "says in its letters, and late forms are refused by the office.")])
        # an ordered list whose second item is set in bold
        y = _lines(
            c, 72, y - 8, [("Helvetica", "1. Apples"), ("Helvetica-Bold", "2. Pears"), ("Helvetica", "3. Plums")]
        )
        # a figure with a bold label over the picture, and its caption
        c.drawImage(photo, 72, y - 200, width=240, height=180)  # type: ignore[attr-defined]
        c.setFont("Helvetica-Bold", 10)  # type: ignore[attr-defined]
        c.drawString(100, y - 60, "Sensor array")  # type: ignore[attr-defined]
        _lines(c, 72, y - 216, [("Helvetica", "Figure 1: The sensors on the roof of the office.")])

    (layout,) = _layouts(_pdf(tmp_path / "bold.pdf", page))
    headers = [b.text for b in layout.blocks if b.kind is Kind.SECTION_HEADER]
    assert headers == ["2.3 Reserves of the fund"]
    items = [(b.marker, b.text) for b in layout.blocks if b.kind is Kind.LIST_ITEM]
    assert items == [("1.", "Apples"), ("2.", "Pears"), ("3.", "Plums")]
    assert any(b.text.startswith("Note. Members who filed") for b in layout.blocks)


def test_a_short_line_of_a_caseless_script_is_no_line_of_capitals(tmp_path: Path) -> None:
    # Korean (as Arabic or Hebrew) equals its upper case: a diagram's label of three words at body size, in no
    # bolder face, is no "ABSTRACT" set apart in capitals (right_to_left_02's diagram labels were headings so).
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont

    pdfmetrics.registerFont(UnicodeCIDFont("HYSMyeongJo-Medium"))
    body = "모든 국민은 법 앞에 평등하다 누구든지 성별 종교 또는 사회적 신분에 의하여 차별을 받지 아니한다"

    def page(c: object) -> None:
        y = _lines(c, 72, 780, [("HYSMyeongJo-Medium", f"{body} {k}") for k in range(3)])
        y = _lines(c, 72, y - 10, [("HYSMyeongJo-Medium", "국가 안보 기관")])
        _lines(c, 72, y - 10, [("HYSMyeongJo-Medium", f"{body} {k}") for k in range(3)])

    (layout,) = _layouts(_pdf(tmp_path / "caseless.pdf", page))
    assert "국가 안보 기관" in [b.text for b in layout.blocks]
    assert [b.text for b in layout.blocks if b.kind in (Kind.SECTION_HEADER, Kind.TITLE)] == []


def test_a_ruled_tables_bold_header_row_is_its_header_not_a_heading(tmp_path: Path) -> None:
    rows = [("Region", "Sales", "Staff"), ("North", "1,204", "12"), ("South", "986", "9"), ("East", "1,530", "15")]

    def page(c: object) -> None:
        y = _lines(c, 72, 790, [("Helvetica", f"{BODY[:88]} ({k})") for k in range(3)])
        top = y - 10
        for r, row in enumerate(rows):
            for k, cell in enumerate(row):
                c.setFont("Helvetica-Bold" if r == 0 else "Helvetica", 10)  # type: ignore[attr-defined]
                c.drawString(78 + 120 * k, top - 14 - 20 * r, cell)  # type: ignore[attr-defined]
        for r in range(len(rows) + 1):
            c.line(72, top - 20 * r, 432, top - 20 * r)  # type: ignore[attr-defined]
        for k in range(4):
            c.line(72 + 120 * k, top, 72 + 120 * k, top - 20 * len(rows))  # type: ignore[attr-defined]
        _lines(c, 72, top - 20 * len(rows) - 24, [("Helvetica", f"{BODY[:88]} ({k})") for k in range(3)])

    (layout,) = _layouts(_pdf(tmp_path / "table.pdf", page))
    assert [b.kind for b in layout.blocks].count(Kind.TABLE) == 1
    assert [b.text for b in layout.blocks if b.kind in (Kind.SECTION_HEADER, Kind.TITLE)] == []


def test_a_line_of_mostly_digits_set_large_is_no_heading_and_a_numbered_title_is(tmp_path: Path) -> None:
    # A report's issue number set large in its masthead (normal_4pages' "제1695호") names no section.
    def page(c: object) -> None:
        c.setFont("Helvetica", 14)  # type: ignore[attr-defined]
        c.drawString(400, 700, "No. 1695")  # type: ignore[attr-defined]
        y = _lines(c, 72, 680, [("Helvetica", f"{BODY[:88]} ({k})") for k in range(3)])
        c.setFont("Helvetica", 14)  # type: ignore[attr-defined]
        c.drawString(72, y - 10, "3 Results for 2024")  # type: ignore[attr-defined]
        _lines(c, 72, y - 30, [("Helvetica", f"{BODY[:88]} ({k})") for k in range(3)])

    (layout,) = _layouts(_pdf(tmp_path / "masthead.pdf", page))
    assert [b.text for b in layout.blocks if b.kind in (Kind.SECTION_HEADER, Kind.TITLE)] == ["3 Results for 2024"]
    assert "No. 1695" in [b.text for b in layout.blocks]


def _bold(c: object, x: float, y: float, text: str, size: float) -> None:
    c.setFont("Helvetica-Bold", size)  # type: ignore[attr-defined]
    c.drawString(x, y, text)  # type: ignore[attr-defined]


def test_a_heading_heads_what_follows_it_and_large_type_over_nothing_is_none(tmp_path: Path) -> None:
    # A cover: a bold selling point set alone low in the left margin, a logo's big word at the foot; neither stands
    # over anything of the page. A heading over its text, and a side heading with its text on its right, head that.
    def cover(c: object) -> None:
        _bold(c, 72, 760, "Managing the Reserves", 20)
        y = _lines(c, 72, 730, [("Helvetica", f"{BODY[:88]} ({k})") for k in range(4)])
        _bold(c, 72, y - 10, "Methods", 14)
        y = _lines(c, 72, y - 30, [("Helvetica", f"{BODY[:88]} ({k})") for k in range(4)])
        _bold(c, 72, y - 20, "Authors", 14)
        _lines(c, 160, y - 34, [("Helvetica", f"{BODY[:70]} ({k})") for k in range(4)])
        _bold(c, 72, 300, "Protect every account", 14)
        _bold(c, 330, 90, "Northwind", 44)

    first, second = _layouts(_pdf(tmp_path / "cover.pdf", cover, lambda c: _bold(c, 72, 500, "Part Two", 20)))
    kinds = {b.text: b.kind for b in first.blocks}
    assert kinds["Methods"] is Kind.SECTION_HEADER
    assert kinds["Authors"] is Kind.SECTION_HEADER
    assert kinds["Protect every account"] is Kind.TEXT
    assert kinds["Northwind"] is Kind.TEXT
    assert [(b.kind, b.text) for b in second.blocks] == [(Kind.SECTION_HEADER, "Part Two")]


def test_a_line_begun_beside_a_photo_and_running_onto_it_stays_whole(tmp_path: Path) -> None:
    # A cover: the photo starts a little right of the margin, and the selling points set in the margin run onto it;
    # a label set wholly on the photo is still the picture's.
    photo = _image(tmp_path / "photo.png", (600, 600), 120)

    def page(c: object) -> None:
        _body(c, 780, 3)
        c.drawImage(photo, 110, 300, width=400, height=380)  # type: ignore[attr-defined]
        _bold(c, 40, 640, "Leverage row permissions on the database", 12)
        _bold(c, 40, 600, "Protect columns by defining column masks", 12)
        c.setFont("Helvetica", 8)  # type: ignore[attr-defined]
        c.drawString(400, 340, "Server room")  # type: ignore[attr-defined]

    (layout,) = _layouts(_pdf(tmp_path / "cover.pdf", page))
    texts = [b.text for b in layout.blocks if b.kind is not Kind.PICTURE]
    assert "Leverage row permissions on the database" in texts
    assert "Protect columns by defining column masks" in texts
    assert not any("Server room" in t for t in texts)

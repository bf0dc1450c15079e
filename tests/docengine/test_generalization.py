"""Classes of page that issue 34's probe of real documents (tests/corpus/documents/probe) showed the text path
reading badly, each on a page this test draws: a list whose bullets come from a pictograph font, running heads and
feet set inside a wide margin."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pypdfium2 as pdfium

from modelhost.docengine.textlayer import read_text_layer
from modelhost.docengine.types import Kind

from .conftest import document_layouts


def _pdf(path: Path, *pages: Callable[[object], None], rename: tuple[bytes, bytes] | None = None) -> Path:
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(612, 792))
    for draw in pages:
        draw(c)
        c.showPage()
    c.save()
    if rename is not None:
        # A font reportlab cannot name: one of its standard fonts renamed in place, same length, so the xref holds.
        old, new = rename
        assert len(old) == len(new)
        data = path.read_bytes()
        assert old in data
        path.write_bytes(data.replace(old, new))
    return path


def _turned(c: object, x: float, y: float, angle: int, *lines: str) -> None:
    """Lines drawn turned `angle` degrees counter-clockwise about (x, y), 13 pt apart, as a rotated text box is."""
    c.saveState()  # type: ignore[attr-defined]
    c.translate(x, y)  # type: ignore[attr-defined]
    c.rotate(angle)  # type: ignore[attr-defined]
    for k, line in enumerate(lines):
        c.drawString(0, -13 * k, line)  # type: ignore[attr-defined]
    c.restoreState()  # type: ignore[attr-defined]


_layouts = document_layouts


ITEMS = (
    ("Title I, the treaties act, implements the two treaties of the", "organisation in the law of the country."),
    ("Title II, the liability act, creates limitations on the liability", "of online service providers for copies."),
    ("Title III, the maintenance act, creates an exemption for a copy", "of a program made to repair a computer."),
)


def test_bullets_of_a_pictograph_font_start_list_items_whatever_character_they_map_to(tmp_path: Path) -> None:
    # The DMCA summary's case: a word processor's bullet in WPTypographicSymbols reads "!" in the text layer, a tab
    # stop after it. Each item must come out whole, its bullet a list marker, not "!" set apart between its lines.
    def page(c: object) -> None:
        y = 700.0
        for first, second in ITEMS:
            c.setFont("Courier", 12)  # type: ignore[attr-defined]  # renamed to a pictograph font below
            c.drawString(144, y, "!")  # type: ignore[attr-defined]
            c.setFont("Times-Roman", 12)  # type: ignore[attr-defined]
            c.drawString(180, y, first)  # type: ignore[attr-defined]
            c.drawString(180, y - 13.5, second)  # type: ignore[attr-defined]
            y -= 40

    pdf = _pdf(tmp_path / "bullets.pdf", page, rename=(b"/BaseFont /Courier", b"/BaseFont /Symbols"))
    (layout,) = _layouts(pdf)
    items = [b for b in layout.blocks if b.kind is Kind.LIST_ITEM]
    assert [b.text for b in items] == [f"{a} {b}" for a, b in ITEMS]
    assert all(not b.text.startswith("!") and b.text != "!" for b in layout.blocks)


def test_a_symbol_font_sign_inside_a_line_keeps_its_text(tmp_path: Path) -> None:
    # The same font's "!" not standing first before a tab stop is a character of the line, not a bullet.
    def page(c: object) -> None:
        c.setFont("Times-Roman", 12)  # type: ignore[attr-defined]
        c.drawString(72, 700, "The factorial of five, written 5")  # type: ignore[attr-defined]
        c.setFont("Courier", 12)  # type: ignore[attr-defined]
        c.drawString(240.5, 700, "!")  # type: ignore[attr-defined]
        c.setFont("Times-Roman", 12)  # type: ignore[attr-defined]
        c.drawString(250, 700, "is one hundred and twenty, as the table shows.")  # type: ignore[attr-defined]

    pdf = _pdf(tmp_path / "sign.pdf", page, rename=(b"/BaseFont /Courier", b"/BaseFont /Symbols"))
    (layout,) = _layouts(pdf)
    assert "!" in " ".join(b.text for b in layout.blocks)
    assert all(b.kind is not Kind.LIST_ITEM for b in layout.blocks)


BODY = (
    "The office reviewed the accounts of the year and found the reserves sufficient for the work of the next",
    "year, and the members agreed that the new rules apply from the first day of the next financial year.",
)


def test_running_heads_and_feet_set_in_a_wide_margin_are_furniture_and_the_title_stays(tmp_path: Path) -> None:
    # The DMCA summary's case: its running head and three-part foot stand an inch and more from the page's edges,
    # outside the zones where furniture is looked for by position; their exact repetition at each page's top and
    # foot is the evidence. Page 1's title reads the running head's words in capitals: it stays.
    def page(n: int) -> Callable[[object], None]:
        def draw(c: object) -> None:
            y = 690.0
            if n == 1:
                c.setFont("Times-Bold", 16)  # type: ignore[attr-defined]
                c.drawCentredString(306, 700, "THE ANNUAL REPORT OF THE BOARD OF 1998")  # type: ignore[attr-defined]
                y = 660.0
            else:
                c.setFont("Times-Italic", 11)  # type: ignore[attr-defined]
                c.drawCentredString(306, 705, "The Annual Report of the Board of 1998")  # type: ignore[attr-defined]
                c.setFont("Times-Bold", 13)  # type: ignore[attr-defined]
                c.drawString(108, 675, f"Chapter {n}: the work of the year")  # type: ignore[attr-defined]
                y = 650.0
            c.setFont("Times-Roman", 12)  # type: ignore[attr-defined]
            for k in range(12):
                c.drawString(108, y - 14 * k, BODY[k % 2])  # type: ignore[attr-defined]
            c.setFont("Times-Italic", 11)  # type: ignore[attr-defined]
            c.drawString(108, 95, "Office Summary")  # type: ignore[attr-defined]
            c.drawCentredString(306, 95, "December 1998")  # type: ignore[attr-defined]
            c.drawRightString(504, 95, f"Page {n}")  # type: ignore[attr-defined]

        return draw

    layouts = _layouts(_pdf(tmp_path / "report.pdf", page(1), page(2), page(3)))
    furniture = (Kind.PAGE_HEADER, Kind.PAGE_FOOTER)
    for layout in layouts:
        kinds = {b.text: b.kind for b in layout.blocks}
        assert kinds["Office Summary"] is Kind.PAGE_FOOTER and kinds["December 1998"] is Kind.PAGE_FOOTER
        assert all(kind not in furniture for text, kind in kinds.items() if "office reviewed" in text)
    first = {b.text: b.kind for b in layouts[0].blocks}
    assert first["THE ANNUAL REPORT OF THE BOARD OF 1998"] not in furniture
    for layout in layouts[1:]:
        kinds = {b.text: b.kind for b in layout.blocks}
        assert kinds["The Annual Report of the Board of 1998"] is Kind.PAGE_HEADER
        assert [k for t, k in kinds.items() if t.startswith("Chapter")] == [Kind.SECTION_HEADER]


def test_words_drawn_one_glyph_at_a_time_are_whole_words(tmp_path: Path) -> None:
    # pdftotext's three_columns.pdf: each glyph its own text object, so pdfium breaks the line after every glyph;
    # the words came out "c olu m n 1". Glyphs that touch are one word, and the unprinted space still parts words.
    from reportlab.pdfbase.pdfmetrics import stringWidth

    def page(c: object) -> None:
        def glyphs(x: float, y: float, text: str) -> None:
            for ch in text:
                c.setFont("Helvetica", 11)  # type: ignore[attr-defined]
                c.drawString(x, y, ch)  # type: ignore[attr-defined]
                x += stringWidth(ch, "Helvetica", 11)

        for n, (head, word) in enumerate((("column 1", "one"), ("column 2", "two"), ("column 3", "three"))):
            glyphs(72 + 168 * n, 700, head)
            glyphs(72 + 168 * n, 686, word)

    pdf = _pdf(tmp_path / "glyphs.pdf", page)
    doc = pdfium.PdfDocument(str(pdf))
    try:
        words = [w.text for w in read_text_layer(doc, 0).words]
    finally:
        doc.close()
    assert sorted(words) == sorted(["column", "1", "column", "2", "column", "3", "one", "two", "three"])
    (layout,) = _layouts(pdf)
    text = " ".join(b.text for b in layout.blocks)
    assert all(part in text for part in ("column 1", "column 2", "column 3", "three"))


def test_a_large_sign_beside_a_line_does_not_make_it_a_heading(tmp_path: Path) -> None:
    # The IRS instructions' case: a caution triangle's "!" in 17 pt bold opens a 9.5 pt italic note's line, which
    # came out as "## ! deliver items to P.O. boxes". A line's type is its words', not a sign's.
    def page(c: object) -> None:
        c.setFont("Helvetica", 9.5)  # type: ignore[attr-defined]
        for k in range(8):
            c.drawString(72, 700 - 11.5 * k, BODY[k % 2][:60])  # type: ignore[attr-defined]
        c.setFont("Helvetica-Bold", 17)  # type: ignore[attr-defined]
        c.drawString(80, 590, "!")  # type: ignore[attr-defined]
        c.setFont("Helvetica-Oblique", 9.5)  # type: ignore[attr-defined]
        c.drawString(100, 592, "Private delivery services cannot deliver items")  # type: ignore[attr-defined]
        c.drawString(100, 580.5, "to post office boxes: use the postal service.")  # type: ignore[attr-defined]
        c.setFont("Helvetica", 9.5)  # type: ignore[attr-defined]
        for k in range(6):
            c.drawString(72, 555 - 11.5 * k, BODY[k % 2][:60])  # type: ignore[attr-defined]

    (layout,) = _layouts(_pdf(tmp_path / "caution.pdf", page))
    note = [b for b in layout.blocks if "Private delivery" in b.text]
    assert note and all(b.kind not in (Kind.SECTION_HEADER, Kind.TITLE) for b in note)


def test_contents_without_leaders_are_a_table_of_contents_not_headings(tmp_path: Path) -> None:
    # pypdf's pdflatex-outline.pdf: LaTeX sets section entries bold, numbered, with no leaders, the page number a tab
    # stop away at the right margin; each came out as a section heading ("## 1 Foo"). Numbers that go down are no
    # page numbers of a contents list: those rows stay what they were.
    entries = ("Foo", "Bar", "Baz", "Qux", "Quux", "Corge")
    pages = ("2", "2", "3", "3", "4", "5")

    def page(c: object) -> None:
        c.setFont("Times-Bold", 14.3)  # type: ignore[attr-defined]
        c.drawString(125, 660, "Contents")  # type: ignore[attr-defined]
        for k, (entry, number) in enumerate(zip(entries, pages, strict=True)):
            c.setFont("Times-Bold", 10)  # type: ignore[attr-defined]
            c.drawString(125, 634 - 22 * k, str(k + 1))  # type: ignore[attr-defined]
            c.drawString(140, 634 - 22 * k, entry)  # type: ignore[attr-defined]
            c.drawRightString(468.5, 634 - 22 * k, number)  # type: ignore[attr-defined]
        # The page's foot, a tab stop apart too, numbered in roman: no entry (GeoBase's contents page).
        c.setFont("Times-Roman", 10)  # type: ignore[attr-defined]
        c.drawString(125, 60, "GeoBase")  # type: ignore[attr-defined]
        c.drawRightString(468.5, 60, "iv")  # type: ignore[attr-defined]

    (layout,) = _layouts(_pdf(tmp_path / "contents.pdf", page))
    tables = [b for b in layout.blocks if b.kind is Kind.TABLE]
    assert len(tables) == 1 and tables[0].table is not None
    cells = {(c.row, c.col): c.text for c in tables[0].table.cells}
    assert [cells[(r, 0)] for r in range(6)] == [f"{k + 1} {e}" for k, e in enumerate(entries)]
    assert [cells[(r, 1)] for r in range(6)] == list(pages) and len(cells) == 12
    assert not any(b.kind is Kind.SECTION_HEADER and b.text[:1].isdigit() for b in layout.blocks)


def test_numbers_going_down_after_a_tab_are_no_contents(tmp_path: Path) -> None:
    # The same shape with counts that go down (a tally, not page numbers): no table of contents is made of it.
    def page(c: object) -> None:
        c.setFont("Times-Bold", 14.3)  # type: ignore[attr-defined]
        c.drawString(125, 660, "Harvest")  # type: ignore[attr-defined]
        for k, (name, count) in enumerate((("Apples", "9"), ("Pears", "7"), ("Plums", "4"), ("Figs", "1"))):
            c.setFont("Times-Bold", 10)  # type: ignore[attr-defined]
            c.drawString(125, 634 - 22 * k, name)  # type: ignore[attr-defined]
            c.drawRightString(468.5, 634 - 22 * k, count)  # type: ignore[attr-defined]

    from modelhost.docengine.leaders import find_contents
    from modelhost.docengine.lines import lines

    doc = pdfium.PdfDocument(str(_pdf(tmp_path / "tally.pdf", page)))
    try:
        words = list(read_text_layer(doc, 0).words)
    finally:
        doc.close()
    index = {id(w): i for i, w in enumerate(words)}
    assert find_contents([[index[id(w)] for w in line] for line in lines(words)], words) == []


def test_a_counted_page_number_in_french_or_german_is_furniture(tmp_path: Path) -> None:
    # A browser's print header in French: "Fichier : Document 1 sans titre" left, "Page 1 sur 1" right, on the only
    # page. The count is a page number's evidence, as "Page 1 of 1" is; the file's name stays (one copy, no count).
    def page(c: object) -> None:
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        c.drawString(72, 800, "Fichier : Document 1 sans titre")  # type: ignore[attr-defined]
        c.drawRightString(540, 800, "Page 1 sur 1")  # type: ignore[attr-defined]
        c.drawRightString(540, 30, "Seite 1 von 1")  # type: ignore[attr-defined]
        for k in range(8):
            c.drawString(72, 700 - 13 * k, BODY[k % 2][:90])  # type: ignore[attr-defined]

    (layout,) = _layouts(_pdf(tmp_path / "printed.pdf", page))
    kinds = {b.text: b.kind for b in layout.blocks}
    assert kinds["Page 1 sur 1"] is Kind.PAGE_HEADER and kinds["Seite 1 von 1"] is Kind.PAGE_FOOTER
    assert kinds["Fichier : Document 1 sans titre"] not in (Kind.PAGE_HEADER, Kind.PAGE_FOOTER)


def test_a_counted_page_number_below_the_margin_zone_never_joins_the_text(tmp_path: Path) -> None:
    # A page's last line, a counted page number in German set an inch and a half up (above the margin zone, inside
    # the page-number zone): the page reads its number where it reads "Page 3 of 9", so it is furniture, not a line
    # of the paragraph above (one definition of a page number for the page and for the document).
    def page(c: object) -> None:
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        for k in range(8):
            c.drawString(72, 700 - 13 * k, BODY[k % 2][:90])  # type: ignore[attr-defined]
        c.drawString(72, 130, "The last line of the page's text ends mid-way through its")  # type: ignore[attr-defined]
        c.drawString(72, 108, "Seite 3 von 9")  # type: ignore[attr-defined]

    (layout,) = _layouts(_pdf(tmp_path / "numbered.pdf", page))
    footers = [b for b in layout.blocks if b.kind is Kind.PAGE_FOOTER]
    assert [b.text for b in footers] == ["Seite 3 von 9"]
    assert all("Seite" not in b.text for b in layout.blocks if b.kind is not Kind.PAGE_FOOTER)


COLUMN_WORDS = BODY[0].split()


def test_a_column_whose_first_paragraph_ends_in_the_top_margin_zone_reads_in_its_column(tmp_path: Path) -> None:
    # The IRS instructions' case: three columns start an inch from the top, inside the margin zone; the second
    # column's first paragraph ends on its second line, a paragraph's space above the next. Its two lines stand on
    # the rows of the first column's lines: they are the column's, read after the first column, not before the
    # page. The running head set two lines above the columns stays apart, first.
    def page(c: object) -> None:
        c.setFont("Helvetica", 9.5)  # type: ignore[attr-defined]
        c.drawString(42, 770, "Page 4 of 48 Instructions for the form")  # type: ignore[attr-defined]
        for col, x in enumerate((42, 222, 402)):
            y = 750.0
            for k in range(30):
                if col == 1 and k == 2:
                    y -= 6  # the paragraph's space after the second column's first paragraph
                text = " ".join(COLUMN_WORDS[(7 * col + 3 * k + j) % len(COLUMN_WORDS)] for j in range(4 + k % 3))
                if k == 0:
                    text = f"First of column {col + 1} starts here"
                if col == 1 and k == 1:
                    text = "and its paragraph ends."
                c.drawString(x, y, text)  # type: ignore[attr-defined]
                y -= 11.5

    (layout,) = _layouts(_pdf(tmp_path / "columns.pdf", page))
    text = "\n".join(b.text for b in layout.blocks)
    assert text.startswith("Page 4 of 48")
    assert text.index("First of column 1") < text.index("First of column 2") < text.index("First of column 3")
    assert text.index("and its paragraph ends.") < text.index("First of column 3")


def test_text_turned_beside_upright_text_is_read_where_it_sits_and_a_margin_stamp_is_furniture(tmp_path: Path) -> None:
    # The probe's turned text boxes: an upright page with a box of two lines turned a quarter (running up the page)
    # beside its text, and a note upside down under it. Each reads upright on its own, where it sits: the box after
    # the paragraphs above it, the note last. One sideways line alone in the side margin (arXiv's identifier) is a
    # stamp: furniture, not text; a diagram's short sideways labels are its own, not text.
    def page(c: object) -> None:
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        for k in range(6):
            c.drawString(72, 700 - 13 * k, BODY[k % 2][:90])  # type: ignore[attr-defined]
        _turned(c, 300, 450, 90, "A label turned a quarter", "reads up the page here")
        _turned(c, 400, 300, 180, "A note set upside down")
        _turned(c, 30, 300, 90, "arXiv:2501.00089v1 [cs.CL] 30 Dec 2024")
        for k in range(6):  # a network diagram's layers, each a short label turned a quarter
            _turned(c, 100 + 40 * k, 150, 90, f"3x3 conv, {64 * (k + 1)}")

    (layout,) = _layouts(_pdf(tmp_path / "turned.pdf", page))
    body = [b.text for b in layout.blocks if b.kind not in (Kind.PAGE_HEADER, Kind.PAGE_FOOTER)]
    text = "\n".join(body)
    assert "A label turned a quarter reads up the page here" in body
    assert "A note set upside down" in body
    assert text.index(BODY[1][:40]) < text.index("A label turned") < text.index("A note set upside down")
    assert "arXiv" not in text
    assert "conv" not in text  # a diagram's short labels are the figure's, as labels over a picture are
    assert any(b.text.startswith("arXiv:2501.00089v1") for b in layout.blocks if b.kind is Kind.PAGE_HEADER)


def test_a_page_of_tiny_diagram_labels_keeps_its_paragraph_as_text(tmp_path: Path) -> None:
    # The GeoBase UML page's case: a paragraph of two lines (17 words, short enough for a heading) at 10 pt over a
    # diagram of hundreds of short labels at 4.4 pt, more characters than the paragraph. The body size is the
    # paragraph's (its lines are prose; the labels' are one to three words), so the paragraph is text, not a title
    # or a heading (it came out as two title lines).
    def page(c: object) -> None:
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        c.drawString(72, 720, "There are implied associations with all hydrographic features and the network")  # type: ignore[attr-defined]
        c.drawString(72, 708, "could be defined through spatial analysis.")  # type: ignore[attr-defined]
        c.setFont("Helvetica", 4.4)  # type: ignore[attr-defined]
        for row in range(24):
            for col in range(4):
                x, y = 72 + 120 * col + (37 * row + 53 * col) % 50, 660 - 20 * row - (11 * col) % 7
                c.drawString(x, y, f"ShorelineEntity{row}{col}")  # type: ignore[attr-defined]
                c.drawString(x, y - 6, f"+ NID: DT_UUID{col}")  # type: ignore[attr-defined]

    (layout,) = _layouts(_pdf(tmp_path / "diagram.pdf", page))
    (para,) = [b for b in layout.blocks if b.text.startswith("There are implied")]
    assert para.kind is Kind.TEXT
    assert para.text.endswith("spatial analysis.")


def test_a_plain_line_numbered_three_levels_deep_is_a_heading(tmp_path: Path) -> None:
    # The GeoBase report sets its subsections plain, at body size: "3.1.4 Hydrographic" over its paragraph. A number
    # three levels deep is a section's (a list counts with one number), so the line is a level-3 heading; a plain
    # "2. Apply the rules" line stays a list item, and a long clause under a deep number stays text.
    def page(c: object) -> None:
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        c.drawString(72, 720, "3.1.4 Hydrographic")  # type: ignore[attr-defined]
        for k in range(4):
            c.drawString(72, 696 - 12 * k, BODY[k % 2][:90])  # type: ignore[attr-defined]
        c.drawString(72, 630, "2. Apply the rules")  # type: ignore[attr-defined]
        c.drawString(72, 600, "4.2.1 The supplier shall deliver the goods to the buyer within thirty days")  # type: ignore[attr-defined]
        for k in range(3):
            c.drawString(72, 588 - 12 * k, BODY[k % 2][:90])  # type: ignore[attr-defined]

    (layout,) = _layouts(_pdf(tmp_path / "deep.pdf", page))
    kinds = {b.text: (b.kind, b.level) for b in layout.blocks}
    assert kinds["3.1.4 Hydrographic"] == (Kind.SECTION_HEADER, 3)
    assert all(b.kind is not Kind.SECTION_HEADER for b in layout.blocks if b.text != "3.1.4 Hydrographic")


def test_a_turned_text_box_over_an_image_is_read_and_its_short_labels_are_not(tmp_path: Path) -> None:
    # The probe's turned boxes drawn over an image: a box of two lines set upside down on a picture is text the
    # page shows (a turned sentence is no figure label); a short axis label turned a quarter on the same picture is
    # the picture's, as its upright labels are.
    from PIL import Image

    shade = tmp_path / "shade.png"
    Image.new("RGB", (200, 150), (200, 200, 200)).save(shade)

    def page(c: object) -> None:
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        for k in range(6):
            c.drawString(72, 700 - 13 * k, BODY[k % 2][:90])  # type: ignore[attr-defined]
        c.drawImage(str(shade), 150, 300, width=200, height=150)  # type: ignore[attr-defined]
        _turned(c, 330, 400, 180, "This is box text at bottom", "written up from the bottom")
        _turned(c, 165, 320, 90, "Yield (t/ha)")

    (layout,) = _layouts(_pdf(tmp_path / "boxed.pdf", page))
    texts = [b.text for b in layout.blocks if b.kind is Kind.TEXT]
    assert "This is box text at bottom written up from the bottom" in texts
    assert any(b.kind is Kind.PICTURE for b in layout.blocks)
    assert all("Yield" not in t for t in texts)

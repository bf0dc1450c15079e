"""The analysis on the corpus's real PDFs: each stage pinned where a user would see it go wrong."""

from __future__ import annotations

from collections.abc import Callable

import pypdfium2 as pdfium

from modelhost.docengine import Kind, PageLayout, analyse, document_style, mark_furniture, read_text_layer

from .conftest import corpus

Open = Callable[[str], pdfium.PdfDocument]


def layouts(open_pdf: Open, name: str) -> list[PageLayout]:
    doc = open_pdf(name)
    contents = [read_text_layer(doc, i) for i in range(len(doc))]
    style = document_style(contents)
    return mark_furniture([analyse(c, style) for c in contents])


def gold_paragraphs(name: str) -> list[str]:
    return [p.strip() for p in corpus(name).read_text().split("\n\n") if p.strip()]


def test_pdfspec_headings_come_out_with_their_levels(open_pdf: Open) -> None:
    (page,) = layouts(open_pdf, "pdfspec/headings.pdf")
    heads = [(b.text, b.level) for b in page.blocks if b.kind is Kind.SECTION_HEADER]
    assert heads == [
        ("1 First Section", 1),
        ("1.1 A Subsection", 2),
        ("1.1.1 A Sub-subsection", 3),
        ("2 Second Section", 1),
    ]
    gold = [p.lstrip("# ") for p in gold_paragraphs("pdfspec/headings.gold.md")]
    assert [b.text for b in page.blocks] == gold


def test_the_body_size_is_the_body_s_not_the_headings(open_pdf: Open) -> None:
    doc = open_pdf("pdfspec/headings.pdf")
    style = document_style([read_text_layer(doc, 0)])
    assert round(style.body_size, 1) == 10.0  # LaTeX's 10 pt body; the headings are 14.3, 12 and bold 10


def test_pdfspec_paragraphs_split_on_indentation_alone(open_pdf: Open) -> None:
    (page,) = layouts(open_pdf, "pdfspec/paragraphs.pdf")
    assert [b.kind for b in page.blocks] == [Kind.TEXT] * 3
    assert [b.text for b in page.blocks] == gold_paragraphs("pdfspec/paragraphs.gold.md")


def test_pdfspec_ruled_table_gives_every_cell(open_pdf: Open) -> None:
    (page,) = layouts(open_pdf, "pdfspec/table.pdf")
    (block,) = page.blocks
    assert block.kind is Kind.TABLE and block.table is not None
    rows = [[c.text if c else None for c in row] for row in block.table.grid()]
    assert rows == [
        ["Header A", "Header B", "Header C"],
        ["Cell A1", "Cell B1", "Cell C1"],
        ["Cell A2", "Cell B2", "Cell C2"],
    ]
    assert [c.header for c in block.table.cells] == [True] * 3 + [False] * 6


def test_redbook_ruled_tables_keep_their_cells(open_pdf: Open) -> None:
    pages = layouts(open_pdf, "pdf/redp5110_sampled.pdf")
    tables = {p.number: b.table for p in pages for b in p.blocks if b.kind is Kind.TABLE and b.table}
    # the contents (dot leaders), Tables 2-1, 2-2, 3-1 and 3-2; no framed box taken for a table
    assert sorted(tables) == [2, 8, 9, 11, 12]
    contents = [[c.text if c else "" for c in row] for row in tables[2].grid()]
    assert contents[0][1] == "vii" and contents[0][0].startswith("Notices . . .")
    assert ["Chapter 1. Securing and protecting IBM DB2 data", "1"] in [[r[0].rstrip(" ."), r[1]] for r in contents]
    usage = tables[8]
    assert (usage.rows, usage.cols) == (5, 3)
    grid = [[c.text if c else "" for c in row] for row in usage.grid()]
    assert grid[0] == ["Column name", "Data type", "Description"]
    assert grid[2][:2] == ["USER_NAME", "VARCHAR(10)"]
    assert grid[2][2] == "Name of the user profile that has a usage setting for this function."  # a multi-line cell
    authority = tables[9]
    assert (authority.rows, authority.cols) == (13, 6)
    assert all(c.text for c in authority.cells if c.row == 0)


def test_redbook_headers_and_footers_are_furniture(open_pdf: Open) -> None:
    pages = layouts(open_pdf, "pdf/redp5110_sampled.pdf")
    furniture = {(p.number, b.text) for p in pages for b in p.blocks if b.kind.furniture}
    assert (8, "Row and Column Access Control Support in IBM DB2 for i") in furniture
    assert (8, "10") in furniture and (5, "1") in furniture
    # the running footer is the book's title: inside the book (not its covers) it is never body text
    body = [b.text for p in pages[1:-1] for b in p.blocks if not b.kind.furniture]
    assert "Row and Column Access Control Support in IBM DB2 for i" not in body


def test_a_bold_numbered_heading_is_not_merged_into_its_paragraph(open_pdf: Open) -> None:
    (page,) = layouts(open_pdf, "pdf/2305.03393v1-pg9.pdf")
    heads = [b.text for b in page.blocks if b.kind is Kind.SECTION_HEADER]
    assert heads == ["5.1 Hyper Parameter Optimization", "5.2 Quantitative Results"]
    texts = [b.text for b in page.blocks if b.kind is Kind.TEXT]
    assert any(t.startswith("We have chosen the PubTabNet data set") for t in texts)
    # the page number "9" is furniture, not the first word of the page's first paragraph
    assert texts[0].startswith(("order to compute", "Optimized Table"))


def test_a_two_column_page_reads_column_by_column_with_hyphens_removed(open_pdf: Open) -> None:
    page = layouts(open_pdf, "pdf/arxiv_2501.00089_p1-3.pdf")[0]
    texts = [b.text for b in page.blocks]
    joined = "\n".join(texts)
    # a sentence across three lines of the left column, hyphenated twice, comes out whole
    assert "Galaxies have spectacularly information-rich appearances. For a hundred years, astronomers have " in joined
    assert "categorized galaxies on the basis of morphology" in joined
    # the left column ends before the right column starts
    left = joined.index("Deep neural networks that exploit pixel-scale information")
    right = joined.index("Two major challenges arise when we try to interpret physics")
    assert left < right
    # the column break inside a sentence is joined, and the footnote under the left column stays out of it
    assert "This last discovery highlights the promise of machine learning (ML) in the physical sciences." in joined
    assert any(b.kind is Kind.FOOTNOTE and b.text == "jowu@stsci.edu" for b in page.blocks)
    kinds = {b.text: b.kind for b in page.blocks}
    assert kinds["1. INTRODUCTION"] is Kind.SECTION_HEADER


def test_code_keeps_its_lines_and_lists_keep_their_items(open_pdf: Open) -> None:
    page = layouts(open_pdf, "pdf/code_and_formula.pdf")[0]
    code = [b.text for b in page.blocks if b.kind is Kind.CODE]
    assert code == ["function add(a, b) {\n     return a + b;\n}\nconsole.log(add(3, 5));"]
    redbook = layouts(open_pdf, "pdf/redp5110_sampled.pdf")
    items = [b for b in redbook[4].blocks if b.kind is Kind.LIST_ITEM]
    assert [b.text for b in items] == [
        "Security fundamentals",
        "Current state of IBM i security",
        "DB2 for i security controls",
    ]
    assert all(not b.ordered for b in items)


def test_a_display_formula_is_a_formula(open_pdf: Open) -> None:
    page = layouts(open_pdf, "pdf/code_and_formula.pdf")[1]
    assert [b.text for b in page.blocks if b.kind is Kind.FORMULA] == ["a 2 + 8 = 12"]


def test_a_chapter_numbered_caption_inside_its_screenshot_is_kept_as_its_caption(open_pdf: Open) -> None:
    # The Redbook numbers figures by chapter ("Figure 3-11"); this caption is drawn inside its screenshot's box,
    # and while only "Figure 3" counted as a caption's opening it was taken for a label of the picture and lost.
    page = layouts(open_pdf, "pdf/redp5110_sampled.pdf")[13]
    captions = [b.text for b in page.blocks if b.kind is Kind.CAPTION]
    assert "Figure 3-11 Selecting the EMPLOYEES table from System i Navigator" in captions, captions
    pictures = [b for b in page.blocks if b.kind is Kind.PICTURE]
    assert any(page.blocks[p.caption].text.startswith("Figure 3-11") for p in pictures if p.caption >= 0)

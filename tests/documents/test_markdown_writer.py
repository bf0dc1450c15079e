"""Our Markdown writer against docling-core's: the same pages, the same bytes.

`emit.markdown` writes what `to_docling(...).export_to_markdown()` writes, without importing docling-core (2.3 CPU s).
These pages exercise every element kind the engine makes and the corners docling's serializer treats apart
(escapes, hard line breaks, list markers, stacked and spanning table headers, numeric columns, captions before and
after their picture or table, code fences, empty formulas, furniture); random pages do the rest. A docling-core
release that writes any of them otherwise fails here.
"""

from __future__ import annotations

import random

import pytest

from modelhost.docengine import emit
from modelhost.docengine.types import Block, Cell, Kind, PageLayout, Table

pytest.importorskip("docling_core")

BOX = (72.0, 72.0, 300.0, 90.0)

_HEADED = Table(
    3,
    3,
    (
        Cell(0, 0, "Name_1", header=True),
        Cell(0, 1, "Q1 & Q2", col_span=2, header=True),
        Cell(1, 1, "Q1", header=True),
        Cell(1, 2, "Q2", header=True),
        Cell(2, 0, "a|b"),
        Cell(2, 1, "1,200"),
        Cell(2, 2, "-3.5"),
    ),
)
_PLAIN = Table(3, 2, (Cell(0, 0, "x"), Cell(0, 1, "y\nz"), Cell(1, 0, "1"), Cell(1, 1, "2", row_span=2)))
_ROW_HEADERS = Table(2, 2, (Cell(0, 0, "", header=True), Cell(0, 1, "A"), Cell(1, 0, "row", header=True)))


def _b(kind: Kind, text: str = "", **kw: object) -> Block:
    return Block(kind, BOX, text, **kw)  # type: ignore[arg-type]


PAGES = {
    "headings and text": (
        _b(Kind.TITLE, "A title_with\nbreak"),
        _b(Kind.SECTION_HEADER, "Level one", level=1),
        _b(Kind.SECTION_HEADER, "Level <two> & more", level=2),
        _b(Kind.SECTION_HEADER, "Too deep", level=7),
        _b(Kind.SECTION_HEADER, "No level", level=0),
        _b(Kind.TEXT, "snake_case and \\_ kept, ![img](a_b.png) link, x < y & z > w"),
        _b(Kind.TEXT, "one line\nnext line\n\nnew paragraph"),
        _b(Kind.TEXT, ""),
        _b(Kind.FOOTNOTE, "1 A footnote_"),
    ),
    "lists": (
        _b(Kind.LIST_ITEM, "bullet", marker="•"),
        _b(Kind.LIST_ITEM, "dash", marker="-"),
        _b(Kind.LIST_ITEM, "lettered", marker="a)"),
        _b(Kind.LIST_ITEM, "numbered_1", marker="23.", ordered=True),
        _b(Kind.LIST_ITEM, "bracketed", marker="(2)", ordered=True),
        _b(Kind.LIST_ITEM, "bare", ordered=True),
        _b(Kind.LIST_ITEM, "two\nlines", marker="iv.", ordered=True),
        _b(Kind.PAGE_FOOTER, "7"),
        _b(Kind.LIST_ITEM, "after furniture", marker="•"),
        _b(Kind.TEXT, "between"),
        _b(Kind.LIST_ITEM, "", marker="1."),
        _b(Kind.LIST_ITEM, "unordered bare"),
    ),
    "tables": (
        _b(Kind.TABLE, table=_HEADED),
        _b(Kind.TABLE, table=_PLAIN),
        _b(Kind.TABLE, table=_ROW_HEADERS),
        _b(Kind.TABLE, table=Table(0, 0, ())),
        _b(Kind.TABLE, table=Table(2, 2, ())),
        _b(Kind.TABLE),
    ),
    "captions": (
        _b(Kind.CAPTION, "Figure 1: before_it"),
        _b(Kind.PICTURE, caption=0),
        _b(Kind.TABLE, table=_PLAIN, caption=3),
        _b(Kind.CAPTION, "Table 1: after it\nwrapped"),
        _b(Kind.PICTURE, caption=6),
        _b(Kind.TEXT, "between a picture and its caption"),
        _b(Kind.CAPTION, "Figure 2"),
        _b(Kind.CAPTION, "A caption of nothing"),
        _b(Kind.PICTURE),
        _b(Kind.CODE, "print(1)", caption=10),
        _b(Kind.CAPTION, "Listing 1"),
        _b(Kind.PICTURE, caption=12),
        _b(Kind.CAPTION, ""),
    ),
    "code, formulas, furniture": (
        _b(Kind.PAGE_HEADER, "Running head"),
        _b(Kind.CODE, "def f(x_1):\n    return `x` < 2 & 3"),
        _b(Kind.CODE, "```\nfenced\n```"),
        _b(Kind.CODE, ""),
        _b(Kind.FORMULA, "E = mc^2_x"),
        _b(Kind.FORMULA, ""),
        _b(Kind.PAGE_FOOTER, "Page 1"),
    ),
}


def _docling_markdown(layouts: list[PageLayout]) -> str:
    return str(emit.to_docling("doc", layouts).export_to_markdown())


@pytest.mark.parametrize("name", PAGES)
def test_each_kind_is_written_as_docling_writes_it(name: str) -> None:
    layout = PageLayout(1, 612.0, 792.0, PAGES[name])
    assert emit.markdown_page(layout) == _docling_markdown([layout])


def test_pages_are_joined_as_docling_joins_them() -> None:
    # A paragraph a page break splits is joined (join_pages), lists and captions stay on their own page.
    first = PageLayout(1, 612.0, 792.0, (*PAGES["lists"], _b(Kind.TEXT, "a sentence that runs on past the foot of")))
    second = PageLayout(2, 612.0, 792.0, (_b(Kind.TEXT, "the page and ends here."), *PAGES["captions"]))
    assert emit.markdown([first, second]) == _docling_markdown([first, second])
    assert "foot of the page and ends here." in emit.markdown([first, second])


_WORDS = ("alpha", "snake_case", "a < b", "x & y", "23.", "(iv)", "•", "naïve", "`tick`", "a|b", "12", "-3.5", "\n")


def _random_page(r: random.Random) -> PageLayout:
    blocks = []
    n = r.randint(0, 14)
    for _ in range(n):
        kind = r.choice(list(Kind))
        text = " ".join(r.choice(_WORDS) for _ in range(r.randint(0, 5)))
        caption = r.randrange(n) if kind in (Kind.PICTURE, Kind.TABLE) and r.random() < 0.5 else -1
        if kind is Kind.TABLE:
            rows, cols = r.randint(1, 4), r.randint(1, 3)
            cells = tuple(
                Cell(i, j, r.choice(["", "1", "2.5", text]), header=i == 0 and r.random() < 0.6)
                for i in range(rows)
                for j in range(cols)
                if r.random() < 0.9
            )
            blocks.append(Block(kind, BOX, table=Table(rows, cols, cells), caption=caption))
        else:
            marker = r.choice(["", "•", "1.", "a)", "-"]) if kind is Kind.LIST_ITEM else ""
            blocks.append(
                Block(kind, BOX, text, level=r.randint(1, 6), marker=marker, ordered=r.random() < 0.5, caption=caption)
            )
    # docling can hang a caption only on a picture, table or code: the engine links no other kind
    safe = []
    for i, b in enumerate(blocks):
        c = b.caption
        if c >= 0 and (c == i or blocks[c].kind is not Kind.CAPTION):
            b = Block(b.kind, b.bbox, b.text, b.level, b.marker, b.ordered, b.table)
        safe.append(b)
    return PageLayout(1, 612.0, 792.0, tuple(safe))


def test_random_pages_are_written_as_docling_writes_them() -> None:
    for seed in range(150):
        layout = _random_page(random.Random(seed))
        assert emit.markdown_page(layout) == _docling_markdown([layout]), seed


def test_the_ocr_models_markdown_blocks_are_docling_s() -> None:
    # The `ocr` model answers a Markdown prompt block by block (backends/ocr/model._markdown): each block as docling
    # writes a page holding only that block, stripped.
    from modelhost.backends.ocr import model

    pages = [PageLayout(1, 612.0, 792.0, blocks) for blocks in PAGES.values()]
    pages += [_random_page(random.Random(seed)) for seed in range(40)]
    for layout in pages:
        for block in layout.blocks:
            one = PageLayout(1, layout.width, layout.height, (block,))
            assert model._markdown(block, layout.width, layout.height) == _docling_markdown([one]).strip(), block


@pytest.mark.parametrize(
    "column",
    [
        ["1,000", "-1,000.25", ".5"],  # thousands separators: numbers, right-aligned
        ["1e5", "inf", "nan"],  # float() reads them, and tabulate does
        ["1e999", "2"],  # overflows to infinity: text
        ["1,0000", "3"],  # a misplaced separator: text
        ["", "", "7"],  # empty cells do not decide
        ["", ""],  # nothing to decide on: left
        ["1_000", "12"],  # float() reads an underscore
        ["12 %", "3"],
    ],
)
def test_numeric_columns_are_aligned_as_docling_aligns_them(column: list[str]) -> None:
    cells = (Cell(0, 0, "head", header=True), Cell(0, 1, "label", header=True))
    cells += tuple(c for i, v in enumerate(column, 1) for c in (Cell(i, 0, v), Cell(i, 1, f"row {i}")))
    layout = PageLayout(1, 612.0, 792.0, (Block(Kind.TABLE, BOX, table=Table(len(column) + 1, 2, cells)),))
    assert emit.markdown_page(layout) == _docling_markdown([layout])

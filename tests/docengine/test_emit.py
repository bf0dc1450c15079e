"""The emitters: DocTags element by element (literal text, OTSL, lists), and the DoclingDocument."""

from __future__ import annotations

import re

from modelhost.docengine import Block, Cell, Kind, PageLayout, Table, doctags_elements, doctags_page, to_docling
from modelhost.docengine.emit import loc

TABLE = Table(
    rows=2,
    cols=2,
    cells=(
        Cell(0, 0, "A", header=True),
        Cell(0, 1, "B", header=True),
        Cell(1, 0, "wide", col_span=2),
    ),
)
PAGE = PageLayout(
    1,
    600.0,
    800.0,
    (
        Block(Kind.SECTION_HEADER, (60, 80, 300, 100), "1 Intro", level=1),
        Block(Kind.TEXT, (60, 110, 540, 140), "if a < b and c > d"),
        Block(Kind.LIST_ITEM, (60, 150, 540, 160), "first", marker="•"),
        Block(Kind.LIST_ITEM, (60, 160, 540, 170), "second", marker="•"),
        Block(Kind.TABLE, (60, 200, 540, 300), table=TABLE),
        Block(Kind.CODE, (60, 310, 540, 340), "x = 1\ny = 2"),
    ),
)


def test_elements_come_one_at_a_time_with_literal_text() -> None:
    out = list(doctags_elements(PAGE))
    assert len(out) == len(PAGE.blocks)
    assert out[0] == "<section_header_level_1><loc_50><loc_50><loc_250><loc_62>1 Intro</section_header_level_1>"
    assert out[1].endswith(">if a < b and c > d</text>")
    assert out[2].startswith("<unordered_list><list_item>") and not out[2].endswith("</unordered_list>")
    assert out[3].endswith("second</list_item></unordered_list>")
    assert "<ched>A<ched>B<nl><fcel>wide<lcel><nl>" in out[4]
    assert out[5].endswith("<_unknown_>x = 1\ny = 2</code>")


def test_escape_writes_entities_for_readers_that_need_them() -> None:
    out = list(doctags_elements(PAGE, escape=True))
    assert out[1].endswith(">if a &lt; b and c &gt; d</text>")


def test_the_grid_is_docling_cores() -> None:
    # 500 steps a side, tokens 0-499: the right and bottom edges are 499, as docling-core writes them.
    assert (loc(0, 600), loc(600, 600), loc(10, 600), loc(-5, 600), loc(700, 600)) == (0, 499, 8, 0, 499)


EDGES = PageLayout(
    1,
    600.0,
    800.0,
    (
        Block(Kind.SECTION_HEADER, (0, 0, 600, 20), "Top edge to right edge", level=1),
        Block(Kind.TEXT, (60, 110, 540, 140), "Body in the middle"),
        Block(Kind.TEXT, (0, 700, 600, 800), "Bottom corner to corner"),
        Block(Kind.PAGE_FOOTER, (500, 780, 600, 800), "7"),
    ),
)


def test_docling_core_parses_every_box_in_range_and_where_the_block_is() -> None:
    from docling_core.types.doc.document import DoclingDocument, DocTagsDocument  # type: ignore[attr-defined]
    from PIL import Image

    page = doctags_page(EDGES)
    values = [int(v) for v in re.findall(r"<loc_(\d+)>", page)]
    assert len(values) == 4 * len(EDGES.blocks) and all(0 <= v <= 499 for v in values)
    tags = DocTagsDocument.from_doctags_and_image_pairs([page], [Image.new("RGB", (600, 800), "white")])
    parsed = DoclingDocument.load_from_doctags(tags)
    boxes = {t.text: t.prov[0].bbox for t in parsed.texts if t.prov}
    assert set(boxes) == {b.text for b in EDGES.blocks}  # no box was lost and read as text
    step = (600 / 500, 800 / 500)  # one grid step, in points, across and down
    for block in EDGES.blocks:
        got = boxes[block.text]
        for have, want, unit in zip((got.l, got.t, got.r, got.b), block.bbox, step * 2, strict=True):
            assert abs(have - want) <= unit + 1e-6, (block.text, got, block.bbox)


def test_docling_core_reads_back_what_is_emitted() -> None:
    from docling_core.types.doc.document import DoclingDocument, DocTagsDocument  # type: ignore[attr-defined]
    from PIL import Image

    page = doctags_page(PAGE)
    tags = DocTagsDocument.from_doctags_and_image_pairs([page], [Image.new("RGB", (600, 800), "white")])
    parsed = DoclingDocument.load_from_doctags(tags).export_to_markdown()
    assert "1 Intro" in parsed and "- first" in parsed and "- second" in parsed
    assert "| A " in parsed and "x = 1\ny = 2" in parsed


def test_to_docling_gives_markdown_with_headings_lists_tables_and_code() -> None:
    md = to_docling("t", [PAGE]).export_to_markdown()
    assert "## 1 Intro" in md
    assert "- first\n- second" in md
    assert "| A " in md and "wide" in md
    assert "```\nx = 1\ny = 2\n```" in md


def test_captions_attach_to_their_picture_or_table() -> None:
    from modelhost.docengine import analyse
    from modelhost.docengine.types import ImageRegion, PageContent, Word

    def word(text: str, x: float, y: float) -> Word:
        return Word(text, (x, y, x + 6 * len(text), y + 10), size=10.0)

    content = PageContent(
        1,
        600,
        800,
        (word("Figure", 100, 320), word("1:", 140, 320), word("A", 160, 320), word("cat", 172, 320)),
        images=(ImageRegion((100, 100, 400, 300)),),
    )
    layout = analyse(content)
    assert [b.kind for b in layout.blocks] == [Kind.PICTURE, Kind.CAPTION]
    assert layout.blocks[0].caption == 1
    doc = to_docling("c", [layout])
    (picture,) = doc.pictures
    assert picture.caption_text(doc) == "Figure 1: A cat"
    assert doc.export_to_markdown().count("Figure 1: A cat") == 1


def test_docling_core_needs_escape_for_tag_shaped_text() -> None:
    # What the escape flag is for: docling-core's DocTags parser drops tag-shaped text from literal DocTags, and
    # keeps escaped text as entities (a reader of the parsed document unescapes them).
    import html

    from docling_core.types.doc.document import DoclingDocument, DocTagsDocument  # type: ignore[attr-defined]
    from PIL import Image

    text = "if x<y and z>w then <tag> ok"
    page = PageLayout(1, 600.0, 800.0, (Block(Kind.TEXT, (10, 10, 200, 30), text),))

    def parsed(escape: bool) -> str:
        tags = DocTagsDocument.from_doctags_and_image_pairs(
            [doctags_page(page, escape=escape)], [Image.new("RGB", (600, 800), "white")]
        )
        (item,) = DoclingDocument.load_from_doctags(tags).texts
        return str(item.text)

    assert parsed(escape=False) != text  # literal: what pdf-spec wants, but docling-core loses the tags' text
    assert html.unescape(parsed(escape=True)) == text


def test_an_empty_header_cell_is_written_empty_and_reads_back_empty() -> None:
    # A header whose first cell is blank (a results table's corner, a group's name over some columns only): docling-
    # core writes an empty cell `<ecel>` whatever its header flag, and a `<ched>` with no text takes the next token as
    # its text, so the table read back held "<ched>" in its corner, and a cell short.
    from modelhost.documents import doctags

    table = Table(
        rows=2,
        cols=3,
        cells=(
            Cell(0, 0, "", header=True),
            Cell(0, 1, "Mass", header=True),
            Cell(0, 2, "", header=True),
            Cell(1, 0, "Cu"),
            Cell(1, 1, "63.5"),
            Cell(1, 2, "8.96"),
        ),
    )
    page = PageLayout(1, 600.0, 800.0, (Block(Kind.TABLE, (60, 200, 540, 300), table=table),))
    tags = doctags_page(page)
    assert "<ecel><ched>Mass<ecel><nl><fcel>Cu<fcel>63.5<fcel>8.96<nl>" in tags
    read = doctags.read(tags, 1, 600.0, 800.0)
    assert read is not None
    (block,) = read.blocks
    assert block.table is not None
    grid = [[cell.text if cell else "" for cell in row] for row in block.table.grid()]
    assert grid == [["", "Mass", ""], ["Cu", "63.5", "8.96"]]

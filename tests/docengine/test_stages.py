"""Each stage on hand-made input: reading order, ruled tables with spans, furniture, paragraphs, hostile sizes."""

from __future__ import annotations

from modelhost.docengine import Block, Kind, PageContent, PageLayout, Segment, Word, analyse, mark_furniture
from modelhost.docengine.order import order
from modelhost.docengine.paragraphs import join
from modelhost.docengine.tables import find_tables


def line(y: float, x0: float, x1: float) -> tuple[float, float, float, float]:
    return (x0, y, x1, y + 10)


def test_two_columns_under_a_full_width_title_read_column_by_column() -> None:
    title = line(50, 100, 500)
    left = [line(80 + 12 * k, 50, 290) for k in range(5)]
    right = [line(80 + 12 * k, 310, 550) for k in range(5)]
    figure = line(160, 50, 550)  # a wide figure across both columns, then two columns again
    left2 = [line(190 + 12 * k, 50, 290) for k in range(3)]
    right2 = [line(190 + 12 * k, 310, 550) for k in range(3)]
    boxes = [title, *right, *left, figure, *right2, *left2]
    flat = [i for leaf in order(boxes) for i in leaf]
    named = {0: "title", 11: "figure"}
    names = [named.get(i, "L" if boxes[i][0] == 50 else "R") for i in flat]
    assert names == ["title", *"LLLLL", *"RRRRR", "figure", *"LLL", *"RRR"]


def test_a_grid_of_short_cells_is_read_row_by_row_not_as_columns() -> None:
    boxes = [(x, 100 + 14 * r, x + 30, 110 + 14 * r) for r in range(4) for x in (50, 200, 350)]
    flat = [i for leaf in order(boxes) for i in leaf]
    assert flat == list(range(12))


def test_order_of_many_boxes_is_bounded() -> None:
    boxes = [
        (float(i % 50) * 12, float(i // 50) * 12, float(i % 50) * 12 + 5, float(i // 50) * 12 + 5) for i in range(5000)
    ]
    flat = sorted(i for leaf in order(boxes) for i in leaf)
    assert flat == list(range(5000))


def word(text: str, x0: float, y0: float, size: float = 10.0, **kw: object) -> Word:
    return Word(text, (x0, y0, x0 + 6 * len(text), y0 + size), size=size, **kw)  # type: ignore[arg-type]


def test_a_header_cell_spanning_two_columns_is_one_cell_and_no_cell_is_dropped() -> None:
    # 3 columns x 3 rows; the top row has no rule between columns 2 and 3: "Scores" spans them.
    h = [Segment(0, y, 300, y) for y in (0, 20, 40, 60)]
    v = [Segment(0, 0, 0, 60), Segment(100, 0, 100, 60), Segment(300, 0, 300, 60), Segment(200, 20, 200, 60)]
    words = [
        word("Name", 10, 5),
        word("Scores", 150, 5),
        word("a", 10, 25),
        word("1", 110, 25),
        word("2", 210, 25),
        word("b", 10, 45),
        word("3", 110, 45),
    ]
    (found,) = find_tables(h + v, words)
    table = found.table
    assert (table.rows, table.cols) == (3, 3)
    span = next(c for c in table.cells if c.text == "Scores")
    assert (span.row, span.col, span.col_span, span.header) == (0, 1, 2, True)
    grid = [[c.text if c else None for c in row] for row in table.grid()]
    assert grid == [["Name", "Scores", "Scores"], ["a", "1", "2"], ["b", "3", ""]]
    assert found.words == frozenset(range(7))


def test_a_lone_rule_and_a_framed_paragraph_are_not_tables() -> None:
    # running text: word starts differ from line to line, as a justified paragraph's do
    words = [word("w" * (1 + (i * 7) % 5), 10 + 31 * (i % 8) + (i // 8) * 7 % 13, 5 + 12 * (i // 8)) for i in range(40)]
    frame = [Segment(0, 0, 300, 0), Segment(0, 70, 300, 70), Segment(0, 0, 0, 70), Segment(300, 0, 300, 70)]
    assert find_tables(frame, words) == []
    assert find_tables([Segment(0, 80, 300, 80)], words) == []


def page(number: int, *blocks: Block) -> PageLayout:
    return PageLayout(number, 600, 800, blocks)


def test_repeated_running_heads_and_page_numbers_are_furniture_and_one_off_text_is_not() -> None:
    layouts = [
        page(
            n,
            Block(Kind.TEXT, (50, 20, 400, 30), f"Chapter 3. Access control {n + 10}"),
            Block(Kind.SECTION_HEADER, (50, 100, 400, 120), "A heading", level=1),
            Block(Kind.TEXT, (50, 760, 400, 770), f"Note only on page {n}" if n == 2 else "Redbook footer"),
            Block(Kind.TEXT, (290, 775, 310, 785), str(n)),
        )
        for n in (1, 2, 3)
    ]
    marked = mark_furniture(layouts)
    kinds = [[b.kind for b in p.blocks] for p in marked]
    assert kinds[0] == [Kind.PAGE_HEADER, Kind.SECTION_HEADER, Kind.PAGE_FOOTER, Kind.PAGE_FOOTER]
    assert kinds[1] == [Kind.PAGE_HEADER, Kind.SECTION_HEADER, Kind.TEXT, Kind.PAGE_FOOTER]


def test_hyphens_are_removed_only_before_a_lowercase_continuation() -> None:
    assert join(["the Ef-", "fects of"]) == "the Effects of"
    assert join(["IBM DB2-", "Based"]) == "IBM DB2- Based"
    assert join(["pages 10-", "12"]) == "pages 10- 12"


def test_bullets_and_numbers_start_list_items_with_their_wrapped_lines() -> None:
    words = [
        word("•", 50, 100),
        word("First", 70, 100),
        word("item", 110, 100),
        word("wraps", 70, 112),
        word("•", 50, 130),
        word("Second", 70, 130),
        word("1.", 50, 160),
        word("Counted", 70, 160),
    ]
    layout = analyse(PageContent(1, 600, 800, tuple(words)))
    items = [(b.text, b.marker, b.ordered) for b in layout.blocks]
    assert items == [("First item wraps", "•", False), ("Second", "•", False), ("Counted", "1.", True)]


def test_an_empty_page_and_a_page_of_one_word_analyse() -> None:
    assert analyse(PageContent(1, 600, 800)).blocks == ()
    (block,) = analyse(PageContent(1, 600, 800, (word("alone", 100, 400),))).blocks
    assert block.text == "alone"


def test_hostile_sizes_are_bounded() -> None:
    import time

    from modelhost.docengine.tables import MAX_RULES

    # a page claiming to be a billion points wide, boxes spread across it, and far more rules than any table has
    boxes = [(float(i) * 1e6, 10.0 * (i % 7), float(i) * 1e6 + 5e5, 10.0 * (i % 7) + 8) for i in range(1000)]
    assert sorted(i for leaf in order(boxes) for i in leaf) == list(range(1000))
    rules = tuple(Segment(0, float(y), 500, float(y)) for y in range(10 * MAX_RULES))
    words = tuple(word("w", 10 + 20 * (i % 20), 5 + 12 * (i // 20)) for i in range(400))
    started = time.process_time()
    layout = analyse(PageContent(1, 1e9, 1e9, words, rules))
    assert sum(len(b.text.split()) for b in layout.blocks if b.kind is not Kind.TABLE) <= 400
    # bounded work: well under a CPU minute even on a slow machine (the unbounded pairwise rule grouping took hours)
    assert time.process_time() - started < 60


def test_a_paragraph_split_by_a_page_break_is_joined_for_the_whole_document() -> None:
    from modelhost.docengine import to_docling
    from modelhost.docengine.analyse import join_pages

    first = page(
        1,
        Block(Kind.TEXT, (50, 700, 500, 740), "The bearing is clamped at both ends and the most"),
        Block(Kind.FOOTNOTE, (50, 750, 500, 760), "1 A footnote."),
        Block(Kind.PAGE_FOOTER, (290, 775, 310, 785), "1"),
    )
    second = page(
        2,
        Block(Kind.PAGE_HEADER, (50, 20, 400, 30), "Running head"),
        Block(Kind.TEXT, (50, 60, 500, 100), "common ranges in size are listed below."),
        Block(Kind.PICTURE, (50, 120, 500, 300), caption=3),
        Block(Kind.CAPTION, (50, 310, 500, 320), "Figure 1: Sizes"),
    )
    joined = join_pages([first, second])
    assert (
        joined[0].blocks[0].text
        == "The bearing is clamped at both ends and the most common ranges in size are listed below."
    )
    assert [b.kind for b in joined[1].blocks] == [Kind.PAGE_HEADER, Kind.PICTURE, Kind.CAPTION]
    assert joined[1].blocks[1].caption == 2
    md = to_docling("d", [first, second]).export_to_markdown()
    assert "the most common ranges in size" in md
    # a sentence that ended, or a next page that starts a new sentence, stays apart
    ended = page(1, Block(Kind.TEXT, (50, 700, 500, 740), "The bearing is clamped at both ends."))
    assert join_pages([ended, second])[1].blocks[1].text == "common ranges in size are listed below."


def test_a_page_of_many_images_keeps_its_largest() -> None:
    from modelhost.docengine.analyse import MAX_IMAGES
    from modelhost.docengine.types import ImageRegion

    tiny = [
        ImageRegion((float(i % 100) * 6, float(i // 100) * 6, float(i % 100) * 6 + 5, float(i // 100) * 6 + 5))
        for i in range(5000)
    ]
    big = ImageRegion((0, 700, 600, 800))
    layout = analyse(PageContent(1, 600, 800, images=(*tiny, big)))
    pictures = [b for b in layout.blocks if b.kind is Kind.PICTURE]
    assert len(pictures) == MAX_IMAGES and any(b.bbox == big.bbox for b in pictures)

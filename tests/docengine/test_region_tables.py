"""Tables from the layout model's regions on a text-layer page (issue 34, one page model for both paths): a table
region where the text path found no table is read from the text layer's words inside it (docengine.wordtable, the
pixel path's reader of its regions), a page without table regions reads as before, the pages that are asked for
their regions are those that show a table, and the regions' answer format (docengine.regions) reads back what it
wrote. Pages drawn here; regions given as plain data."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from modelhost.docengine.analyse import analyse, document_style, table_evidence
from modelhost.docengine.regions import read_regions, regions_answer
from modelhost.docengine.types import Block, Kind, PageContent, Region, Segment

from .conftest import drawn_page, wrapped_prose

PROSE = (
    "The survey team visited every station of the network during the spring and recorded what each one held. "
    "The notes below list the stations by name, with the person who keeps each one and the town it serves. "
) * 3
#: A table of words in two columns, set in the body's face with no rule and no figure: none of the text path's signs
#: of a table (a numeric column, a header in another face, three columns) holds, so it reads as loose lines.
ROWS = [
    ("Station", "Keeper"),
    ("North ridge", "Alice Brown"),
    ("River mouth", "Carlos Diaz"),
    ("Old mill", "Dana Evans"),
    ("Quarry gate", "Farid Ghani"),
]
TABLE_TOP = 600.0
LEAD = 16.0
#: The box the layout model would give the table: its rows with a few points of padding.
TABLE_BOX = (66.0, 842 - TABLE_TOP - 12, 330.0, 842 - (TABLE_TOP - LEAD * (len(ROWS) - 1)) + 6)


def _page(path: Path, *, ruled: bool = False) -> PageContent:
    """The stations table between two paragraphs; `ruled` draws a full grid of rules around its cells."""

    def draw(c: object) -> None:
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        wrapped_prose(c, PROSE, 760, lead=13)
        for r, (left, right) in enumerate(ROWS):
            y = TABLE_TOP - LEAD * r
            c.drawString(72, y, left)  # type: ignore[attr-defined]
            c.drawString(220, y, right)  # type: ignore[attr-defined]
        if ruled:
            top, bottom = TABLE_TOP + 12, TABLE_TOP - LEAD * (len(ROWS) - 1) - 5
            for k in range(len(ROWS) + 1):
                c.line(66, top - LEAD * k, 330, top - LEAD * k)  # type: ignore[attr-defined]
            for x in (66, 214, 330):
                c.line(x, top, x, bottom)  # type: ignore[attr-defined]
        wrapped_prose(c, PROSE, 480, lead=13)

    return drawn_page(path, draw)


def _tables(blocks: tuple[Block, ...]) -> list[Block]:
    return [b for b in blocks if b.kind is Kind.TABLE]


def test_a_table_region_reads_an_unruled_table_of_words_from_the_text_layer(tmp_path: Path) -> None:
    content = _page(tmp_path / "stations.pdf")
    style = document_style([content])
    assert not _tables(analyse(content, style).blocks)  # the text path alone: loose lines
    layout = analyse(replace(content, regions=(Region("table", TABLE_BOX),)), style)
    tables = _tables(layout.blocks)
    assert len(tables) == 1
    table = tables[0].table
    assert table is not None and (table.rows, table.cols) == (len(ROWS), 2)
    assert [[c.text for c in table.cells if c.row == r] for r in range(table.rows)] == [list(row) for row in ROWS]
    assert all(c.header == (c.row == 0) for c in table.cells)
    # the table's words are its cells only: no line of it is text as well, and the prose around it stays prose
    loose = " ".join(b.text for b in layout.blocks if b.kind is not Kind.TABLE)
    assert "Alice Brown" not in loose and "Station" not in loose
    assert "survey team" in loose


def test_a_ruled_grid_in_a_table_region_stays_the_grid_its_rules_make(tmp_path: Path) -> None:
    # The region reader reads rules as no more than gaps; where the ruled-table finder made a grid, it stays.
    content = _page(tmp_path / "ruled.pdf", ruled=True)
    style = document_style([content])
    alone = _tables(analyse(content, style).blocks)
    assert len(alone) == 1
    boxed = _tables(analyse(replace(content, regions=(Region("table", TABLE_BOX),)), style).blocks)
    assert boxed == alone


def test_a_page_without_table_regions_is_read_as_before(tmp_path: Path) -> None:
    content = _page(tmp_path / "stations.pdf")
    style = document_style([content])
    alone = analyse(content, style)
    with_text = analyse(replace(content, regions=(Region("text", (60.0, 60.0, 530.0, 200.0)),)), style)
    assert with_text.blocks == alone.blocks


def test_table_evidence_is_a_table_or_rows_of_cells_side_by_side() -> None:
    from modelhost.docengine.types import PageLayout

    def text(x0: float, y0: float, x1: float, y1: float, kind: Kind = Kind.TEXT) -> Block:
        return Block(kind, (x0, y0, x1, y1), "cell")

    prose = PageLayout(1, 595, 842, (text(72, 100, 520, 300), text(72, 310, 520, 500)))
    assert not table_evidence(prose, (), 10.0)
    # two columns of paragraphs side by side are no table's rows: each is many lines high
    columns = PageLayout(1, 595, 842, (text(72, 100, 290, 300), text(305, 100, 520, 300)))
    assert not table_evidence(columns, (), 10.0)
    rows = tuple(b for y in (100, 116, 132) for b in (text(72, y, 150, y + 11), text(220, y, 300, y + 11)))
    assert table_evidence(PageLayout(1, 595, 842, rows), (), 10.0)
    assert not table_evidence(PageLayout(1, 595, 842, rows[:2]), (), 10.0)  # one row is a label beside a line
    # a table found: asked, unless a grid of rules frames it (its rules say its columns)
    table = PageLayout(1, 595, 842, (Block(Kind.TABLE, (72, 100, 300, 200)),))
    assert table_evidence(table, (), 10.0)
    grid = tuple(Segment(x, 100, x, 200) for x in (72, 180, 300))
    assert not table_evidence(table, grid, 10.0)
    assert table_evidence(table, (Segment(72, 100, 300, 100), Segment(72, 200, 300, 200)), 10.0)  # booktabs' rules


def test_the_regions_answer_reads_back_on_the_page_it_was_written_for() -> None:
    regions = (Region("table", (60.0, 100.0, 400.0, 300.0)), Region("title", (72.0, 40.0, 300.0, 60.0)))
    answer = "".join(regions_answer(regions, 1275, 1650))  # written on the pixels of a page...
    assert answer.startswith("<doctag><table><loc_") and answer.endswith("</doctag>")
    back = read_regions(answer, 612, 792)  # ...read on its points: the same share of the page
    assert [r.label for r in back] == ["table", "title"]
    for got, want in zip(back, regions, strict=True):
        for g, w, size, px in zip(got.bbox, want.bbox, (612, 792, 612, 792), (1275, 1650, 1275, 1650), strict=True):
            assert abs(g - w / px * size) <= size / 500 + 1e-9
    assert read_regions("<doctag><text>Some page text</text></doctag>", 612, 792) == ()


#: A table whose header (two lines, bold) a grid of rules boxes, its body rows below with no rule: the ruled-table
#: finder reads the header's grid (taking the first body row with it) and the finder without rules the rest, so the
#: text path cuts the one table the layout model boxes in two.
HEAD = [("Station", "Keeper", "Town", "Visits"), ("(name)", "(person)", "(served)", "(count)")]
BODY = [
    ("North ridge", "Alice Brown", "Arden", "12"),
    ("River mouth", "Carlos Diaz", "Bexley", "7"),
    ("Old mill", "Dana Evans", "Corby", "15"),
    ("Quarry gate", "Farid Ghani", "Dover", "9"),
    ("Salt marsh", "Grace Hill", "Epping", "11"),
]
COLUMNS_X = (72, 180, 290, 380)


def _header_ruled_page(path: Path) -> tuple[PageContent, tuple[float, float, float, float]]:
    """The page, and the box the layout model would give its table (its header and rows, a few points of padding)."""

    def draw(c: object) -> None:
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        wrapped_prose(c, PROSE, 760, lead=13)
        c.setFont("Helvetica-Bold", 10)  # type: ignore[attr-defined]
        for k, row in enumerate(HEAD):
            for x, text in zip(COLUMNS_X, row, strict=True):
                c.drawString(x, TABLE_TOP - 14 * k, text)  # type: ignore[attr-defined]
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        for y in (TABLE_TOP + 12, TABLE_TOP - 3, TABLE_TOP - 19):
            c.line(66, y, 430, y)  # type: ignore[attr-defined]
        for x in (66, 174, 284, 374, 430):
            c.line(x, TABLE_TOP + 12, x, TABLE_TOP - 19)  # type: ignore[attr-defined]
        for r, row in enumerate(BODY):
            for x, text in zip(COLUMNS_X, row, strict=True):
                c.drawString(x, TABLE_TOP - 34 - 15 * r, text)  # type: ignore[attr-defined]
        wrapped_prose(c, PROSE, 470, lead=13)

    bottom = TABLE_TOP - 34 - 15 * (len(BODY) - 1)
    return drawn_page(path, draw), (62.0, 842 - TABLE_TOP - 16, 436.0, 842 - bottom + 6)


def test_a_table_region_the_text_path_cut_in_pieces_is_read_whole(tmp_path: Path) -> None:
    content, box = _header_ruled_page(tmp_path / "header_ruled.pdf")
    style = document_style([content])
    assert len(_tables(analyse(content, style).blocks)) == 2  # the text path alone: two pieces of one table
    tables = _tables(analyse(replace(content, regions=(Region("table", box),)), style).blocks)
    assert len(tables) == 1
    table = tables[0].table
    assert table is not None and (table.rows, table.cols) == (len(HEAD) + len(BODY), 4)
    rows = [[c.text for c in table.cells if c.row == r] for r in range(table.rows)]
    assert rows == [list(row) for row in [*HEAD, *BODY]]
    # A region of most of the page (the model boxes a report's whole page as one table, headings, prose and charts
    # inside) is no evidence of a table the text path cut: its own pieces stay.
    page = (20.0, 20.0, content.width - 20, content.height - 20)
    pieces = _tables(analyse(content, style).blocks)
    assert _tables(analyse(replace(content, regions=(Region("table", page),)), style).blocks) == pieces


NOTE = "Note: Inactive voters did not answer the county office's mailing."
COUNTIES = [("County", "Registered", "Active"), ("Adams", "24,973", "19,978"), ("Baker", "31,154", "24,923")]
COUNTIES += [("Clark", "17,756", "14,204"), ("Dunn", "3,004", "2,403")]


def _noted_grid_page(path: Path) -> tuple[PageContent, tuple[float, float, float, float]]:
    """A grid of rules whose last row is one cell across its columns holding a note (a spreadsheet's merged row under
    its figures), between paragraphs; and the box the layout model gives the table: its header and rows of figures,
    a few points of padding, the note's row left out (as it boxed a drawn page of this kind)."""
    top, lead, xs = TABLE_TOP + 12, 16.0, (66.0, 180.0, 290.0, 400.0)
    foot = top - lead * len(COUNTIES)  # the top of the note's row

    def draw(c: object) -> None:
        c.setFont("Helvetica", 10)  # type: ignore[attr-defined]
        wrapped_prose(c, PROSE, 760, lead=13)
        for r, row in enumerate(COUNTIES):
            for x, text in zip(xs, row, strict=False):
                c.drawString(x + 6, TABLE_TOP - lead * r, text)  # type: ignore[attr-defined]
        c.drawString(xs[0] + 6, foot - 12, NOTE)  # type: ignore[attr-defined]
        for k in range(len(COUNTIES) + 2):
            c.line(xs[0], top - lead * k, xs[-1], top - lead * k)  # type: ignore[attr-defined]
        for x in xs:  # the inner rules stop at the note's row; the frame's sides run down to its foot
            c.line(x, top, x, foot - (lead if x in (xs[0], xs[-1]) else 0))  # type: ignore[attr-defined]
        wrapped_prose(c, PROSE, 440, lead=13)

    return drawn_page(path, draw), (xs[0] - 4, 842 - top - 4, xs[-1] + 4, 842 - foot + 2)


def test_a_note_row_under_a_grid_that_its_table_region_leaves_out_is_text(tmp_path: Path) -> None:
    content, box = _noted_grid_page(tmp_path / "noted_grid.pdf")
    style = document_style([content])
    # the text path alone: the note is the grid's last row, one cell across the three columns
    alone = _tables(analyse(content, style).blocks)
    assert len(alone) == 1 and alone[0].table is not None and alone[0].table.rows == len(COUNTIES) + 1
    assert table_evidence(analyse(content, style), content.rulings, style.body_size)  # so its regions are asked
    layout = analyse(replace(content, regions=(Region("table", box),)), style)
    tables = _tables(layout.blocks)
    assert len(tables) == 1
    table = tables[0].table
    assert table is not None and (table.rows, table.cols) == (len(COUNTIES), 3)
    assert [[c.text for c in table.cells if c.row == r] for r in range(table.rows)] == [list(r) for r in COUNTIES]
    # the note is text once, after the table, before the paragraph under it
    texts = [b.text for b in layout.blocks]
    at = next(i for i, t in enumerate(texts) if "Inactive voters" in t)
    assert texts[at].startswith("Note:") and layout.blocks.index(tables[0]) < at
    assert sum("Inactive voters" in t for t in texts) == 1
    assert "survey team" in texts[at + 1]
    # a region that holds the note's row (the model boxed it with the table) keeps it the table's last row
    held = (box[0], box[1], box[2], box[3] + 24)
    kept = _tables(analyse(replace(content, regions=(Region("table", held),)), style).blocks)
    assert kept[0].table is not None and kept[0].table.rows == len(COUNTIES) + 1


#: Two small data tables, each a full grid under its own title line, one under the other.
TITLES = ("Example of Data Table 1", "Example of Data Table 2")
GRIDS = (
    [("sample", "blue value", "red value"), ("clear water", "97", "79"), ("blue water", "73", "13")],
    [("sample", "blue share", "red share"), ("clear water", "100%", "100%"), ("blue water", "75%", "17%")],
)
GRID_X = (72.0, 200.0, 320.0, 440.0)
TOPS = (700.0, 590.0)


def _two_tables(c: object) -> None:
    c.setLineWidth(0.6)  # type: ignore[attr-defined]
    for title, rows, top in zip(TITLES, GRIDS, TOPS, strict=True):
        c.setFont("Helvetica-BoldOblique", 11)  # type: ignore[attr-defined]
        c.drawCentredString(256, top + 8, title)  # type: ignore[attr-defined]
        c.setFont("Helvetica", 9)  # type: ignore[attr-defined]
        for r, row in enumerate(rows):
            y = top - 18 * r
            c.line(GRID_X[0], y, GRID_X[-1], y)  # type: ignore[attr-defined]
            for k, text in enumerate(row):
                c.drawString(GRID_X[k] + 3, y - 13, text)  # type: ignore[attr-defined]
        bottom = top - 18 * len(rows)
        c.line(GRID_X[0], bottom, GRID_X[-1], bottom)  # type: ignore[attr-defined]
        for x in GRID_X:
            c.line(x, top, x, bottom)  # type: ignore[attr-defined]


def test_two_titled_grids_in_one_table_region_stay_two_tables(tmp_path: Path) -> None:
    content = drawn_page(tmp_path / "two.pdf", _two_tables)
    style = document_style([content])
    alone = _tables(analyse(content, style).blocks)
    assert len(alone) == 2
    # the model's one table region over both titles and grids (842 - 720 .. 842 - 530, with padding)
    region = Region("table", (66.0, 842 - 722.0, 446.0, 842 - 530.0))
    layout = analyse(replace(content, regions=(region,)), style)
    tables = _tables(layout.blocks)
    assert len(tables) == 2
    assert [t.table.rows if t.table else 0 for t in tables] == [3, 3]
    text = " ".join(b.text for b in layout.blocks if b.kind is not Kind.TABLE)
    assert TITLES[1] in text

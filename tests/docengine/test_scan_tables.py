"""Tables on scanned pages: table pages drawn here with reportlab, rasterised, and read from their pixels alone (what
pdf-spec's socket sends) by the real detector, layout model and recogniser.

Each page sets a short paragraph, one table of a kind scans carry, and a paragraph after it; a test asserts the
table's cells as a reader sees them. One PixelReader serves the module; pages are read at 150 DPI (`convert`'s
default) so each costs a few seconds on 2 cores.
"""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("rapidocr")
pytest.importorskip("rapid_layout")
pytest.importorskip("reportlab")

import pypdfium2 as pdfium
from PIL import Image

from modelhost.backends.ocr import pixels, scanpage
from modelhost.backends.ocr.pixels import PixelReader
from modelhost.backends.ocr.scantable import refined, table_block, table_blocks, unruled_figure
from modelhost.docengine.figures import box_overlap, box_union
from modelhost.docengine.types import Block, Cell, Kind, Region, Segment, Table, Word

#: The DPI pages are read at (`modelhost convert`'s) and the DPI a scan is made at (the corpus's scan/ files).
READ_DPI = 150
SCAN_DPI = 200
#: The table every page sets: a header row and five rows of words and figures, as a parts list or a results table.
HEADER = ["Part", "Material", "Hours", "Cost"]
ROWS = [
    ["Bracket", "Steel", "2.5", "14.20"],
    ["Hinge", "Brass", "1.0", "6.75"],
    ["Cover plate", "Aluminium", "3.0", "22.10"],
    ["Gasket", "Rubber", "0.5", "1.30"],
    ["Spindle", "Steel", "4.5", "31.00"],
]
#: The same rows with the steel parts' material wrapped onto a second line inside its cell.
WRAPPED = [[*row[:1], f"{row[1]}\nsheet, bent", *row[2:]] if row[1] == "Steel" else row for row in ROWS]
#: What a reader reads in them: each wrapped cell's lines are one cell.
JOINED = [[cell.replace("\n", " ") for cell in row] for row in WRAPPED]
#: Where the columns start, and where the table ends, in points (a Letter page with one-inch margins).
COLUMNS = (72.0, 200.0, 300.0, 400.0)
RIGHT = 540.0
PROSE = (
    "The table below lists what each part of the assembly costs and how long it takes to make, so that the workshop "
    "can plan the next batch of orders before the end of the month."
)
AFTER = "After the table the text goes on with a paragraph that explains the figures above in plain words."


def _paragraph(canvas: object, y: float, text: str, size: float = 10.0) -> float:
    # Running text wrapped to the page's measure; returns the baseline below it.
    line = ""
    for word in text.split():
        wider = f"{line} {word}".strip()
        if canvas.stringWidth(wider, "Helvetica", size) > RIGHT - COLUMNS[0]:  # type: ignore[attr-defined]
            canvas.drawString(COLUMNS[0], y, line)  # type: ignore[attr-defined]
            y, line = y - 1.3 * size, word
        else:
            line = wider
    canvas.drawString(COLUMNS[0], y, line)  # type: ignore[attr-defined]
    return y - 1.3 * size


def table_page(
    rules: str = "grid",
    width: float = 0.5,
    grey: float = 0.0,
    dpi: int = READ_DPI,
    band: float | None = None,
    rows: list[list[str]] | None = None,
    pitch: float = 18.0,
    tight: bool = False,
    left: float = COLUMNS[0],
    header: list[str] | None = None,
    divider: int = 0,
    gap: float = 12.0,
) -> np.ndarray:
    """A Letter page holding one table, rasterised at `dpi`: `rules` is "grid" (every row and column ruled),
    "rows" (horizontal rules only, between all rows), "booktabs" (a rule above and under the header and one under
    the last row) or "none" (columns of whitespace); rules are `width` points wide in `grey` (0 black, 1 white). With
    `band`, the header row is set white on a band shaded that grey, and the rules start under it (a report's coloured
    header row). `rows` replaces ROWS; a cell's "\n" wraps it. Rows are `pitch` points apart (plus 1.2 sizes a
    wrapped line); 18 is a spread table, LaTeX sets 10 point rows 12 apart. With `tight`, each column is as wide as
    its widest cell and `gap` points more (LaTeX's `\tabcolsep` on both sides: 12), not at COLUMNS, from `left` on.
    `header` replaces HEADER (tight columns only); with `divider`, a vertical rule runs between the rules before column
    `divider` (a booktabs table whose column groups are parted by one rule)."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas as pdfcanvas

    out = io.BytesIO()
    c = pdfcanvas.Canvas(out, pagesize=letter)
    c.setFont("Helvetica", 10)
    y = _paragraph(c, 720.0, PROSE) - 20
    size = 9.5
    body = rows or ROWS
    head = header or HEADER
    columns, right = COLUMNS, RIGHT
    if tight:
        cells = [[line for row in [head, *body] for line in row[k].split("\n")] for k in range(len(head))]
        widths = [max(c.stringWidth(line, "Helvetica-Bold", size) for line in column) for column in cells]
        columns = tuple(left + sum(widths[:k]) + gap * k for k in range(len(widths)))
        right = columns[-1] + widths[-1] + gap
    c.setLineWidth(width)
    c.setStrokeGray(grey)
    edges = [y + size + 2]  # each rule's height: above the header, then under every row
    if band is not None:
        c.setFillGray(band)
        c.rect(COLUMNS[0], y - 6, RIGHT - COLUMNS[0], size + 8, stroke=0, fill=1)
        c.setFillGray(1.0)
    for n, row in enumerate([head, *body]):
        c.setFont("Helvetica-Bold" if n == 0 else "Helvetica", size)
        if n == 1:
            c.setFillGray(0.0)
        for x, text in zip(columns, row, strict=True):
            for k, line in enumerate(text.split("\n")):  # a wrapped cell: its lines at the text's leading
                c.drawString(x + 4, y - 1.2 * size * k, line)
        y -= 1.2 * size * (max(text.count("\n") for text in row))
        edges.append(y - 6)
        y -= pitch
    if band is not None:
        edges = edges[1:]  # the band is the header row's top and bottom
    if rules == "booktabs":
        edges = [edges[0], edges[1], edges[-1]]
    if rules != "none":
        for edge in edges:
            c.line(columns[0], edge, right, edge)
    if rules == "grid":
        for x in columns[1:] if band is not None else (*columns, right):
            c.line(x, edges[0], x, edges[-1])
    if divider:
        c.line(columns[divider], edges[0], columns[divider], edges[-1])
    c.setFont("Helvetica", 10)
    _paragraph(c, y - 20, AFTER)
    return _rendered(c, out, dpi)


def _rendered(canvas: object, out: io.BytesIO, dpi: int) -> np.ndarray:
    """The one page drawn on `canvas` (a reportlab canvas writing into `out`), rasterised at `dpi`."""
    canvas.showPage()  # type: ignore[attr-defined]
    canvas.save()  # type: ignore[attr-defined]
    doc = pdfium.PdfDocument(out.getvalue())
    try:
        return np.asarray(doc[0].render(scale=dpi / 72).to_pil().convert("RGB"))
    finally:
        doc.close()


def scanned(image: np.ndarray) -> np.ndarray:
    """A page scanned at SCAN_DPI read at READ_DPI: the scan's pixels resampled, as rendering its image-only PDF at
    another resolution does (thin rules come out grey, spread over two rows of pixels)."""
    height, width = image.shape[:2]
    size = (round(width * READ_DPI / SCAN_DPI), round(height * READ_DPI / SCAN_DPI))
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.BILINEAR))


def grids(reader: PixelReader, image: np.ndarray) -> list[list[list[str]]]:
    """The page's tables, each as rows of cell texts."""
    found = scanpage.blocks(reader, reader.detect(image, READ_DPI))
    return [_grid(b) for b in found if b.table is not None]


def _grid(block: Block) -> list[list[str]]:
    assert block.table is not None
    return [[cell.text if cell else "" for cell in row] for row in block.table.grid()]


def test_a_table_ruled_with_hairlines_scanned_and_read_at_another_resolution_keeps_its_grid(
    reader: PixelReader,
) -> None:
    # 0.4 pt rules drawn at 200 DPI and read at 150 are grey, about half dark over two rows of pixels: read as ink
    # only under grey 128, a few rules were lost and the grid merged rows and columns (pdf-spec's table.pdf so read
    # came out 2 x 2 instead of 3 x 3).
    image = scanned(table_page("grid", width=0.4, dpi=SCAN_DPI))
    assert grids(reader, image) == [[HEADER, *ROWS]]


def test_a_table_ruled_in_light_grey_keeps_its_wrapped_cells_whole(reader: PixelReader) -> None:
    # Rules drawn in 70 % grey come out at grey ~205: lighter than any threshold for text ink, so they were no rules,
    # rows came from the text lines alone, and each wrapped cell's second line was a row of its own.
    image = scanned(table_page("grid", width=0.5, grey=0.7, dpi=SCAN_DPI, rows=WRAPPED))
    assert grids(reader, image) == [[HEADER, *JOINED]]


def test_a_shaded_header_row_is_the_first_row_of_its_table(reader: PixelReader) -> None:
    # The header set white on a shaded band, the column rules starting under it (the Korean corpus page's table):
    # in pixels the band is no rule, the header row was left out of the table and read as loose text.
    image = scanned(table_page("grid", band=0.35, dpi=SCAN_DPI))
    assert grids(reader, image) == [[HEADER, *ROWS]]


def test_a_booktabs_table_set_tight_is_read_by_its_columns(reader: PixelReader) -> None:
    # Three horizontal rules (booktabs) around columns 12 points apart (LaTeX's spacing): the detector pads each line
    # past its ink, the recogniser's words share the padded box, and the ruled-table finder, which finds columns as
    # gaps no word covers, found every gap covered by some row, no table, and the table the layout model boxed came
    # out as paragraphs and headings. Its detector lines' positions (scantable) read it as a table region's.
    image = scanned(table_page("booktabs", dpi=SCAN_DPI, pitch=12.0, tight=True))
    assert grids(reader, image) == [[HEADER, *ROWS]]


def test_a_table_the_layout_model_boxes_as_a_figure_too_is_no_picture(reader: PixelReader) -> None:
    # A small table centred on the page (booktabs' manual) is boxed twice by the layout model, as a table and as a
    # figure over it; the table region takes the lines and the figure, holding none, came out as an empty picture.
    image = scanned(table_page("booktabs", dpi=SCAN_DPI, pitch=12.0, tight=True, left=230.0))
    found = list(scanpage.blocks(reader, reader.detect(image, READ_DPI)))
    assert [_grid(b) for b in found if b.table is not None] == [[HEADER, *ROWS]]
    assert not [b for b in found if b.kind is Kind.PICTURE]


#: A table of counts under column headings far wider than their figures (a vignette's genotype table): set tight, the
#: headings stand a few points apart, closer than the figures' columns.
#: Points between the columns of the counts table: `\tabcolsep` set to 4 points a side, as dense tables set it (the
#: detector reads headings 6 points apart as one line, which no reading of positions parts).
GAP = 8.0
COUNTS_HEADER = ["Group", "Type", "Control", "Treated", "Recovered", "Relapsed"]
COUNTS = [
    ["Case", "aa", "75", "54", "29", "18"],
    ["Case", "Ab", "93", "44", "13", "20"],
    ["Case", "bb", "14", "27", "34", "25"],
    ["Control", "aa", "76", "26", "17", "19"],
    ["Control", "Ab", "69", "20", "10", "39"],
    ["Control", "bb", "18", "35", "42", "25"],
]


def test_a_booktabs_table_of_counts_keeps_its_tight_headings_apart(reader: PixelReader) -> None:
    # Top, mid and bottom rules and one vertical between the labels and the counts: the ruled-table finder reads the
    # columns as gaps no word covers, the detector's boxes padded past the ink cover the headings' narrow gaps, and
    # the four headings over the counts came out as one cell spanning four columns. Read from the detector lines'
    # positions, every heading and every count is a cell of its own.
    image = scanned(
        table_page(
            "booktabs", dpi=SCAN_DPI, pitch=12.0, tight=True, header=COUNTS_HEADER, rows=COUNTS, divider=2, gap=GAP
        )
    )
    assert grids(reader, image) == [[COUNTS_HEADER, *COUNTS]]


def _words(rows: list[list[tuple[float, str]]]) -> list[Word]:
    # Detector lines as the recogniser gives them: one line per (x, text), rows 14 points apart, 10 points tall.
    return [
        Word(text, (x, 14.0 * r, x + 6.0 * len(text), 14.0 * r + 10), size=10.0, line=100 * r + c)
        for r, row in enumerate(rows)
        for c, (x, text) in enumerate(row)
    ]


def test_a_wrapped_cell_is_one_cell_and_a_row_of_figures_stays_a_row() -> None:
    # A table region read from word positions made each wrapped cell's next line a row of its own.
    block = table_block(
        _words(
            [
                [(10, "Part"), (150, "Material"), (300, "Cost")],
                [(10, "Bracket"), (150, "Steel sheet,"), (300, "14.20")],
                [(150, "bent twice")],  # hangs under the row: its label's column empty
                [(10, "Hinge"), (150, "Brass, cast and"), (300, "6.75")],
                [(10, "drilled"), (150, "polished")],  # every cell runs on from the cell above
                [(10, "Total"), (300, "20.95")],
                [(300, "2.00")],  # a figure under a figure, its label's column empty: a row of its own
            ]
        )
    )
    assert block is not None and block.table is not None
    assert _grid(block) == [
        ["Part", "Material", "Cost"],
        ["Bracket", "Steel sheet, bent twice", "14.20"],
        ["Hinge drilled", "Brass, cast and polished", "6.75"],
        ["Total", "", "20.95"],
        ["", "", "2.00"],
    ]


def _ruled(rows: list[list[str]]) -> tuple[Block, ...]:
    # What the ruled-table finder made of a frame: one table of these rows.
    cells = tuple(Cell(r, c, text) for r, row in enumerate(rows) for c, text in enumerate(row))
    return (Block(Kind.TABLE, (0.0, 0.0, 400.0, 100.0), table=Table(len(rows), len(rows[0]), cells)),)


#: A frame of booktabs rules (top, under the header, bottom): no vertical, so no grid.
BOOKTABS = [Segment(0.0, y, 400.0, y, 0.5) for y in (-2.0, 12.0, 100.0)]


def test_a_frame_without_a_grid_keeps_its_rows_and_takes_the_columns_its_lines_part() -> None:
    # Positions part columns the ruled-table finder joined (the header's tight words), never rows: a code box's
    # stacked lines (`SELECT function_id,` over `user_name,`) are one cell of the finder's, and read from positions
    # alone each line was a row of its own.
    lines = [[(10, "Label"), (150, "Model"), (300, "Matrix")], [(10, "basic"), (150, "lm"), (300, "sandwich")]]
    joined = _ruled([["Label", "Model Matrix"], ["basic", "lm sandwich"]])
    parted = refined(joined, _words(lines), BOOKTABS, (0.0, 0.0, 400.0, 100.0))
    assert [_grid(b) for b in parted] == [[["Label", "Model", "Matrix"], ["basic", "lm", "sandwich"]]]
    stacked = [[(10, "SELECT"), (150, "function_id,")], [(150, "user_name,")], [(10, "FROM"), (150, "usage")]]
    code = _ruled([["SELECT", "function_id, user_name,"], ["FROM", "usage"]])
    assert refined(code, _words(stacked), BOOKTABS, (0.0, 0.0, 400.0, 100.0)) == code


def test_a_title_set_inside_a_table_over_its_columns_does_not_join_them() -> None:
    # A second table's title centred over the columns of figures, inside one region (coin's `TNFA_238 locus`):
    # its line bridged the gap between two columns, and every row's two figures came out as one cell.
    block = table_block(
        _words(
            [
                [(10, "Group"), (150, "Control"), (230, "Treated")],
                [(10, "Male"), (150, "75"), (230, "54")],
                [(10, "Female"), (150, "93"), (230, "44")],
                [(140, "Second locus across both")],
                [(10, "Male"), (150, "12"), (230, "33")],
                [(10, "Female"), (150, "17"), (230, "8")],
            ]
        )
    )
    assert block is not None and block.table is not None
    assert _grid(block) == [
        ["Group", "Control", "Treated"],
        ["Male", "75", "54"],
        ["Female", "93", "44"],
        ["", "", "Second locus across both"],
        ["Male", "12", "33"],
        ["Female", "17", "8"],
    ]


def test_a_listing_whose_comments_end_in_one_column_is_no_table() -> None:
    # A code box the layout model boxes as a table: two comments' closing marks stand aligned past the lines, and
    # the rest are lines of one cell. Columns read from gaps must hold cells on most rows, as the text path asks.
    lines = [
        [(10, "/* Active Row Access Control"), (200, "*/")],
        [(10, "/* Active Column Access Control"), (200, "*/")],
        [(10, "ALTER TABLE EMPLOYEES")],
        [(10, "ACTIVATE ROW ACCESS CONTROL")],
        [(10, "ACTIVATE COLUMN ACCESS CONTROL;")],
    ]
    assert table_block(_words(lines)) is None


def test_a_full_row_in_lowercase_is_a_row_not_the_line_of_a_wrapped_row() -> None:
    # A code table's rows start in lowercase (`random | (g)lmer | m_re`, then `gee | geeglm | m_gee`): each of them
    # "continued" the cell above, so the last two rows were one. A row that fills every column the row above fills
    # is a row; a wrapped row leaves its short cells' columns empty.
    block = table_block(
        _words(
            [
                [(10, "Label"), (150, "Model"), (300, "Matrix")],
                [(10, "basic"), (150, "lm"), (300, "sandwich(m)")],
                [(10, "random"), (150, "lmer"), (300, "vcov(m_re)")],
                [(10, "gee"), (150, "geeglm"), (300, "vbeta")],
            ]
        )
    )
    assert block is not None and block.table is not None
    assert _grid(block) == [
        ["Label", "Model", "Matrix"],
        ["basic", "lm", "sandwich(m)"],
        ["random", "lmer", "vcov(m_re)"],
        ["gee", "geeglm", "vbeta"],
    ]


#: ReportLab's example grids: cells named by their row and column, thin grey rules, a black box around the table.
NUMBERS = [[f"{r}{c}" for c in range(5)] for r in range(4)]
#: Cells shaded as the user guide's style examples shade them (pink, lavender, orange, khaki), none two side by side.
SHADES = {(0, 0): "pink", (1, 1): "lavender", (2, 2): "orange", (0, 3): "khaki", (3, 4): "orange"}


def number_grid_page(shaded: bool, dpi: int = READ_DPI) -> np.ndarray:
    """A Letter page with a 4 x 5 grid of short cells ("00".."34") between two paragraphs, ruled in 0.5 pt grey
    inside a 2 pt black box, rasterised at `dpi`; with `shaded`, the SHADES cells are filled in colour."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas as pdfcanvas

    out = io.BytesIO()
    c = pdfcanvas.Canvas(out, pagesize=letter)
    c.setFont("Helvetica", 10)
    top = _paragraph(c, 720.0, PROSE) - 30
    left, width, height = 240.0, 23.3, 18.0
    for (r, col), name in SHADES.items() if shaded else ():
        c.setFillColor(getattr(colors, name))
        c.rect(left + col * width, top - (r + 1) * height, width, height, stroke=0, fill=1)
    c.setFillColor(colors.black)
    for r, row in enumerate(NUMBERS):
        for col, text in enumerate(row):
            c.drawString(left + col * width + 6, top - (r + 1) * height + 5, text)
    c.setStrokeColor(colors.grey)
    c.setLineWidth(0.5)
    for r in range(len(NUMBERS) + 1):
        c.line(left, top - r * height, left + 5 * width, top - r * height)
    for col in range(6):
        c.line(left + col * width, top, left + col * width, top - 4 * height)
    c.setStrokeColor(colors.black)
    c.setLineWidth(2)
    c.rect(left, top - 4 * height, 5 * width, 4 * height, stroke=1, fill=0)
    _paragraph(c, top - 4 * height - 30, AFTER)
    return _rendered(c, out, dpi)


def test_a_ruled_grid_the_layout_model_boxes_as_a_figure_is_a_table_not_a_picture(reader: PixelReader) -> None:
    # The layout model boxes a grid of short cells as a figure (and an equation): a ruled frame inside a figure was
    # taken for part of the drawing, and the grid came out as a picture and three formulas.
    image = number_grid_page(shaded=False)
    found = list(scanpage.blocks(reader, reader.detect(image, READ_DPI)))
    assert [_grid(b) for b in found if b.table is not None] == [NUMBERS]
    assert not [b for b in found if b.kind is Kind.PICTURE]


def test_rules_between_shaded_cells_part_them(reader: PixelReader) -> None:
    # A born-digital page read from its pixels (as modelhost-pixels and pdf-spec's socket read one): a grey rule
    # beside a coloured cell is lighter than text ink and one thick blob with the cell for the light threshold, so
    # no grid was found at all. Read as valleys darker than both their sides, every rule of the grid is found.
    image = number_grid_page(shaded=True)
    assert grids(reader, image) == [NUMBERS]


def test_a_label_set_close_to_its_description_stays_in_its_column() -> None:
    # A two-column list (a method and what it returns, lme4's table): where a long label ends close to its
    # description, the two detector lines sit under two line heights apart and were one cell; every row so joined
    # covered the column gap, the region had one column, and the table was read as paragraphs.
    block = table_block(
        _words(
            [
                [(10, "Generic (Section)"), (120, "Brief description")],
                [(10, "anova"), (120, "Decomposition of effects")],
                [(10, "confint (5.2.6)"), (120, "Confidence intervals")],
                [(10, "deviance (5.2.2)"), (120, "Minus twice the log-likelihood")],  # 14 points apart: under 2 lines
                [(10, "coef"), (120, "Sum of the effects")],
            ]
        )
    )
    assert block is not None and block.table is not None
    assert _grid(block) == [
        ["Generic (Section)", "Brief description"],
        ["anova", "Decomposition of effects"],
        ["confint (5.2.6)", "Confidence intervals"],
        ["deviance (5.2.2)", "Minus twice the log-likelihood"],
        ["coef", "Sum of the effects"],
    ]


#: A texinfo table with no rule at all (the Octave manual's operator table): an operation and its method in a
#: monospaced face, a description in the text face, under an italic header.
OPERATORS_HEADER = ["Operation", "Method", "Description"]
OPERATORS = [
    ["a + b", "plus (a, b)", "Binary addition"],
    ["a - b", "minus (a, b)", "Binary subtraction"],
    ["a .* b", "times (a, b)", "Element-wise multiplication"],
    ["a * b", "mtimes (a, b)", "Matrix multiplication"],
    ["a ./ b", "rdivide (a, b)", "Element-wise right division"],
    ["a / b", "mrdivide (a, b)", "Matrix right division"],
    ["a .^ b", "power (a, b)", "Element-wise power"],
    ["a ^ b", "mpower (a, b)", "Matrix power"],
    ["a & b", "and (a, b)", "Logical and"],
    ["a == b", "eq (a, b)", "Equal to"],
    ["!a", "not (a)", "Logical not"],
    ["a'", "ctranspose (a)", "Complex conjugate transpose"],
]


def operators_page(dpi: int = SCAN_DPI) -> np.ndarray:
    """A Letter page with the OPERATORS table set without rules between two paragraphs, rows 13 points apart (texinfo's
    `@multitable`), rasterised at `dpi`."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas as pdfcanvas

    out = io.BytesIO()
    c = pdfcanvas.Canvas(out, pagesize=letter)
    c.setFont("Helvetica", 10)
    y = _paragraph(c, 720.0, PROSE) - 24
    columns = (100.0, 190.0, 300.0)
    c.setFont("Helvetica-Oblique", 10)
    for x, text in zip(columns, OPERATORS_HEADER, strict=True):
        c.drawString(x, y, text)
    for row in OPERATORS:
        y -= 13.0
        for k, (x, text) in enumerate(zip(columns, row, strict=True)):
            c.setFont("Courier" if k < 2 else "Times-Roman", 10)
            c.drawString(x, y, text)
    c.setFont("Helvetica", 10)
    _paragraph(c, y - 30, AFTER)
    return _rendered(c, out, dpi)


def test_a_table_without_rules_the_layout_model_boxes_as_a_figure_is_a_table(reader: PixelReader) -> None:
    # The layout model boxes a table set with no rule at all as a figure: it came out as an empty picture and then its
    # lines as loose text, a column at a time. A figure that draws nothing (its ink is its lines') and whose lines
    # stand in rows of cells is a table.
    found = list(scanpage.blocks(reader, reader.detect(scanned(operators_page()), READ_DPI)))
    # the recogniser reads a monospaced "a * b" as "a*b": spaces are no part of what is asserted
    unspaced = [[[text.replace(" ", "") for text in row] for row in _grid(b)] for b in found if b.table is not None]
    assert unspaced == [[[text.replace(" ", "") for text in row] for row in [OPERATORS_HEADER, *OPERATORS]]]
    assert not [b for b in found if b.kind is Kind.PICTURE]


def test_a_figure_that_draws_is_no_table_whatever_its_lines() -> None:
    # Rows of labels inside a drawing (a diagram's boxes, a chart's axes) are the drawing's: ink outside the lines
    # keeps the figure a picture.
    lines = [((x, 14.0 * r, x + 40.0, 14.0 * r + 10), 0) for r in range(6) for x in (10.0, 150.0, 300.0)]
    assert unruled_figure(lines, drawn=0.0)
    assert not unruled_figure(lines, drawn=0.1)
    assert not unruled_figure(lines[:1] + [((10.0, 200.0, 400.0, 210.0), 0)] * 3, drawn=0.0)  # a paragraph's lines


#: Two tables of one header stacked in one region, each under its title (a vignette's counts for two loci).
LOCUS_HEADER = ["Sex", "Type", "Control", "Treated", "Total"]
LOCI = {
    "First locus": [
        ["Male", "aa", "75", "54", "129"],
        ["", "Ab", "93", "44", "137"],
        ["Female", "aa", "76", "26", "102"],
    ],
    "Second locus": [
        ["Male", "bb", "14", "27", "41"],
        ["", "Ab", "12", "33", "45"],
        ["Female", "bb", "18", "35", "53"],
    ],
}


def loci_page(dpi: int = SCAN_DPI) -> np.ndarray:
    """A Letter page with the LOCI tables set without rules one under the other, each title centred over its
    columns, rows 13 points apart, rasterised at `dpi`."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas as pdfcanvas

    out = io.BytesIO()
    c = pdfcanvas.Canvas(out, pagesize=letter)
    c.setFont("Helvetica", 10)
    y = _paragraph(c, 720.0, PROSE) - 24
    for title, body in LOCI.items():
        c.drawCentredString(300.0, y, title)
        y -= 18
        for row in [LOCUS_HEADER, *body]:
            for x, text in zip((160.0, 220.0, 270.0, 330.0, 390.0), row, strict=True):
                c.drawString(x, y, text)
            y -= 13
        y -= 6
    _paragraph(c, y - 24, AFTER)
    return _rendered(c, out, dpi)


def test_two_tables_of_one_header_stacked_in_one_region_are_two_tables_under_their_titles(
    reader: PixelReader,
) -> None:
    # Read as one table, the second table's title was a row of the first and its header a body row (coin's two loci
    # under one "Male | | Control | Early Onset ..." header). A row repeating the first row whole starts a table;
    # a row of one cell just above it is that table's title.
    found = list(scanpage.blocks(reader, reader.detect(scanned(loci_page()), READ_DPI)))
    tables = [b for b in found if b.kind is Kind.TABLE]
    assert [_grid(b) for b in tables] == [[LOCUS_HEADER, *body] for body in LOCI.values()]
    texts = [b.text for b in found if b.kind is not Kind.TABLE]
    assert texts.index("First locus") < texts.index("Second locus")
    first, second = tables
    assert first.bbox[3] <= second.bbox[1]


def test_a_table_repeating_its_header_with_too_few_rows_after_stays_one() -> None:
    # A repeated header needs a table under it: rows that repeat the header at the foot are the table's own.
    lines = [
        [(10, "Sex"), (150, "Control"), (300, "Treated")],
        [(10, "Male"), (150, "75"), (300, "54")],
        [(10, "Female"), (150, "93"), (300, "44")],
        [(10, "Sex"), (150, "Control"), (300, "Treated")],
    ]
    assert [_grid(b) for b in table_blocks(_words(lines))] == [[[t for _, t in row] for row in lines]]


#: A results table's two-level header (a paper's kind): each data set's name over its three measures.
RESULT_GROUPS = ["", "Dataset A", "Dataset B"]
RESULT_HEADER = ["Method", "P", "R", "F1", "P", "R", "F1"]
RESULTS = [
    ["Baseline", "71.2±0.4", "68.5±0.6", "69.8±0.3", "64.1±0.9", "60.2±1.1", "62.1±0.7"],
    ["CRF", "74.8±0.3", "72.1±0.5", "73.4±0.2", "66.3±0.8", "63.9±0.6", "65.1±0.5"],
    ["Ours", "81.3±0.2", "79.7±0.3", "80.5±0.2", "73.6±0.4", "71.9±0.5", "72.7±0.3"],
]
#: What a reader reads in its head: each group's name in every column it spans, as docling-core's Markdown writes a
#: spanning cell (and the corpus's ground truth with it).
SPANNED = ["", *["Dataset A"] * 3, *["Dataset B"] * 3]


def test_a_header_cell_over_a_partial_rule_spans_the_columns_under_the_rule() -> None:
    # Each group's name sits over a rule that stops short of the table (booktabs' \cmidrule): it names the columns
    # the rule stands over. Read without the rules, "Dataset A" was a cell of the middle measure only.
    xs = (10, 110, 180, 250, 320, 390, 460)
    lines = [
        [(177, "Dataset A"), (387, "Dataset B")],
        list(zip(xs, RESULT_HEADER, strict=True)),
        *(list(zip(xs, row, strict=True)) for row in RESULTS),
    ]
    cmidrules = [Segment(110.0, 12.0, 298.0, 12.0, 0.4), Segment(320.0, 12.0, 508.0, 12.0, 0.4)]
    whole = [Segment(0.0, y, 508.0, y, 0.8) for y in (-2.0, 26.0, 70.0)]  # top, mid and bottom: no span
    block = table_block(_words(lines), [*whole, *cmidrules])
    assert block is not None and _grid(block) == [SPANNED, RESULT_HEADER, *RESULTS]
    assert table_block(_words(lines), whole) == table_block(_words(lines))  # full-width rules span nothing
    # a rule under a body row parts groups of rows; it makes no cell of the body span
    block = table_block(_words(lines), [Segment(110.0, 54.0, 298.0, 54.0, 0.4)])
    assert block is not None and block.table is not None
    assert all(c.col_span == 1 for c in block.table.cells if c.row >= 1)


def results_page(dpi: int = SCAN_DPI) -> np.ndarray:
    """A paper's results table on a Letter page: a caption above it, booktabs rules (top, mid, bottom) with a
    \\cmidrule under each data set's name, figures with their spread (±) centred in their columns, the best row in
    bold, in Times as a LaTeX paper sets it."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas as pdfcanvas

    out = io.BytesIO()
    c = pdfcanvas.Canvas(out, pagesize=letter)
    c.setFont("Times-Roman", 10)
    y = _paragraph(c, 720.0, PROSE) - 14
    c.setFont("Times-Roman", 9)
    c.drawString(COLUMNS[0], y, "Table 1. Precision, recall and F1 of each method on the two data sets.")
    y -= 18
    size, left, gap = 9.0, COLUMNS[0], 10.0
    widths = [max(c.stringWidth(r[k], "Times-Bold", size) for r in [RESULT_HEADER, *RESULTS]) for k in range(7)]
    xs = [left + sum(widths[:k]) + gap * k for k in range(7)]
    right = xs[-1] + widths[-1]
    c.setLineWidth(0.8)
    c.line(left, y + size + 2, right, y + size + 2)
    c.setLineWidth(0.4)
    for name, (a, b) in zip(RESULT_GROUPS[1:], ((1, 3), (4, 6)), strict=True):
        c.drawCentredString((xs[a] + xs[b] + widths[b]) / 2, y, name)
        c.line(xs[a], y - 4, xs[b] + widths[b], y - 4)
    y -= 1.4 * size
    for n, row in enumerate([RESULT_HEADER, *RESULTS]):
        c.setFont("Times-Bold" if n == len(RESULTS) else "Times-Roman", size)
        c.drawString(xs[0], y, row[0])
        for k in range(1, 7):
            c.drawCentredString(xs[k] + widths[k] / 2, y, row[k])
        if n == 0:
            c.setLineWidth(0.5)
            c.line(left, y - 4, right, y - 4)
        y -= 1.3 * size
    c.setLineWidth(0.8)
    c.line(left, y + 1.3 * size - 4, right, y + 1.3 * size - 4)
    c.setFont("Times-Roman", 10)
    _paragraph(c, y - 20, AFTER)
    return _rendered(c, out, dpi)


def test_a_results_table_scanned_keeps_its_two_level_header(reader: PixelReader) -> None:
    # A scanned paper's results table: the caption above it stays a caption, the figures with their spread stay
    # whole cells, and each data set's name spans the measures its \cmidrule stands over.
    found = list(scanpage.blocks(reader, reader.detect(scanned(results_page()), READ_DPI)))
    assert [_grid(b) for b in found if b.table is not None] == [[SPANNED, RESULT_HEADER, *RESULTS]]
    assert next(b.text for b in found if b.kind is Kind.CAPTION).startswith("Table 1. Precision")


#: A survey's comparison table, set in one column of a two-column page.
SURVEY_HEADER = ["Survey", "Papers", "Years", "Venue"]
SURVEYS = [
    ["Smith et al.", "112", "2015-2020", "ACL"],
    ["Lee and Park", "86", "2017-2021", "EMNLP"],
    ["Garcia", "203", "2010-2022", "TACL"],
    ["Chen et al.", "57", "2019-2023", "NAACL"],
    ["Ours", "341", "2010-2024", "ACL"],
]
SURVEY_PROSE = (
    "Survey methods differ in how they sample the literature and in how they code each paper, so we compare the "
    "main choices below and report for each how many papers it covers and how recent they are. "
) * 3


def two_column_page(surveys: int, dpi: int = SCAN_DPI) -> np.ndarray:
    """A two-column Letter page in Times: the left column's paragraph, a booktabs table a column wide (the first
    `surveys` rows of SURVEYS) with its caption set under it, a paragraph after; the right column prose all the way
    down."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas as pdfcanvas

    out = io.BytesIO()
    c = pdfcanvas.Canvas(out, pagesize=letter)
    width, lefts, size = 240.0, (54.0, 318.0), 8.5

    def column(x: float, y: float, text: str, font_size: float = 9.5) -> float:
        line = ""
        c.setFont("Times-Roman", font_size)
        for word in text.split():
            if c.stringWidth(f"{line} {word}".strip(), "Times-Roman", font_size) > width:
                c.drawString(x, y, line)
                y, line = y - 1.2 * font_size, word
            else:
                line = f"{line} {word}".strip()
        c.drawString(x, y, line)
        return y - 1.2 * font_size

    y = column(lefts[0], 740.0, SURVEY_PROSE) - 10
    xs = [lefts[0] + 2, lefts[0] + 80, lefts[0] + 125, lefts[0] + 190]
    c.setLineWidth(0.8)
    c.line(lefts[0], y + size + 2, lefts[0] + width, y + size + 2)
    for n, row in enumerate([SURVEY_HEADER, *SURVEYS[:surveys]]):
        c.setFont("Times-Roman", size)
        for x, text in zip(xs, row, strict=True):
            c.drawString(x, y, text)
        if n == 0:
            c.setLineWidth(0.5)
            c.line(lefts[0], y - 3.5, lefts[0] + width, y - 3.5)
        y -= 11
    c.setLineWidth(0.8)
    c.line(lefts[0], y + 7.5, lefts[0] + width, y + 7.5)
    y = column(lefts[0], y - 8, "Table 2. Surveys of the field compared: papers covered, years and venue.", size)
    column(lefts[0], y - 14, SURVEY_PROSE)
    column(lefts[1], 740.0, SURVEY_PROSE * 3)
    return _rendered(c, out, dpi)


@pytest.mark.parametrize("surveys", [4, 5])
def test_a_caption_under_a_table_in_one_column_is_one_caption_not_a_heading(reader: PixelReader, surveys: int) -> None:
    # The layout model boxes the caption set under a column-wide table twice. Under four rows, as two text regions a
    # few points apart: each line went to the box that held it better, and the caption's second line ("venue.") was
    # read before its first; one block boxed twice is one region (pixels.TWICE_BOXED). Under five rows, as a title
    # and a text region: the title took it, and it came out a heading, "## Table 2. Surveys of ..."; a title region
    # that opens as a caption does is the caption.
    found = list(scanpage.blocks(reader, reader.detect(scanned(two_column_page(surveys)), READ_DPI)))
    assert [_grid(b) for b in found if b.table is not None] == [[SURVEY_HEADER, *SURVEYS[:surveys]]]
    assert not [b.text for b in found if b.kind is Kind.SECTION_HEADER]
    captions = [b for b in found if b.kind is Kind.CAPTION]
    assert [b.text for b in captions] == ["Table 2. Surveys of the field compared: papers covered, years and venue."]


def test_a_booktabs_table_the_layout_model_boxes_only_as_a_figure_is_a_table(reader: PixelReader) -> None:
    # The model boxes a table with booktabs rules as a figure, and no table (a survey page's comparison table): its
    # rules are ink no text line holds, so it was a picture, its cells loose lines after it. Rules that run across its
    # lines, and the cmidrules inside their span, are a table's, and the cells between them stand in rows.
    detection = reader.detect(scanned(results_page()), READ_DPI)
    regions = tuple(replace(r, label="figure") if r.label == "table" else r for r in detection.regions)
    assert [r.label for r in regions].count("figure") >= 1
    found = list(scanpage.blocks(reader, replace(detection, regions=regions)))
    assert [_grid(b) for b in found if b.table is not None] == [[SPANNED, RESULT_HEADER, *RESULTS]]
    assert not [b for b in found if b.kind is Kind.PICTURE]


def test_rules_across_a_figures_lines_are_a_tables_unless_boxes_stand_among_them() -> None:
    # Booktabs' rules run across the lines (the cmidrule inside their span counts with them); a diagram's boxes have
    # sides a line or two tall among its lines, and then no rule is a table's.
    lines = [(10.0 + 100 * c, 20.0 + 14 * r, 60.0 + 100 * c, 30.0 + 14 * r) for r in range(4) for c in range(3)]
    top, mid, bottom = (Segment(8.0, y, 262.0, y, 0.8) for y in (16.0, 33.0, 78.0))
    cmid = Segment(108.0, 31.0, 262.0, 31.0, 0.4)
    assert pixels._across([top, mid, bottom, cmid], lines) == ([top, mid, bottom, cmid], 3)
    sides = [Segment(x, 18.0, x, 32.0, 0.5) for x in (8.0, 62.0)]
    assert pixels._across([top, bottom, *sides], lines) == ([], 0)
    assert pixels._across([cmid], lines) == ([], 0)  # no rule across: nothing is the table's


@pytest.mark.parametrize("twice", [True, False])
def test_a_table_set_tight_without_rules_that_the_layout_model_calls_a_figure_is_a_table(
    reader: PixelReader, twice: bool
) -> None:
    # A small table with no rule at all, its columns set tight (pmlr's "Dataset Result": a column gap of about one
    # line height, under the two a row of prose's detector lines may stand apart at), that the layout model boxes as
    # a figure, alone or together with a text box over the same block. Its rows were one paragraph of its cells and
    # an empty picture: the lines' ink parts, standing in columns down the rows, are its cells.
    detection = reader.detect(scanned(table_page("none", dpi=SCAN_DPI, pitch=12.0, tight=True, left=200.0)), READ_DPI)
    boxes = [detection.box(i) for i in range(len(detection.quads))]
    table = box_union([b for b in boxes if b[0] >= 190.0])  # the prose starts at 72, the table at 200
    kept = [r for r in detection.regions if box_overlap(r.bbox, table) == 0]
    near = (table[0] - 2, table[1] - 2, table[2] + 2, table[3] + 1)
    boxed = [Region("figure", table), *([Region("text", near)] if twice else [])]
    found = list(scanpage.blocks(reader, replace(detection, regions=(*kept, *boxed))))
    assert [_grid(b) for b in found if b.table is not None] == [[HEADER, *ROWS]]
    assert not [b for b in found if b.kind is Kind.PICTURE]


def test_ink_parts_make_a_table_only_where_they_stand_in_columns() -> None:
    # A table's cells are aligned down its rows; a diagram's labels or a paragraph's words parted at wide spaces stand
    # anywhere, and a part that bridges two columns joins them.
    cells = [((x, 14.0 * r, x + 30.0, 14.0 * r + 10), 0) for r in range(5) for x in (10.0, 55.0)]
    assert unruled_figure(cells, drawn=0.0, columned=True)
    assert not unruled_figure(cells, drawn=0.0)  # 15 points apart: under CELL_GAP_HEIGHTS, no cells by their gaps
    staggered = [((10.0 + 25 * (r % 3) + 70 * k, 14.0 * r, 40.0 + 25 * (r % 3) + 70 * k, 14.0 * r + 10), 0)
                 for r in range(5) for k in range(2)]  # fmt: skip
    assert not unruled_figure(staggered, drawn=0.0, columned=True)
    bridged = [*cells, ((10.0, 70.0, 90.0, 80.0), 0), ((95.0, 70.0, 110.0, 80.0), 0)]
    assert not unruled_figure(bridged, drawn=0.0, columned=True)


def test_a_captions_last_line_in_its_text_region_stays_in_the_caption(reader: PixelReader) -> None:
    # acmart's sample paper (dev corpus, scanned): a photograph's caption boxed as one text region, whose last line
    # is a link. Analysis parted that line from the caption, a paragraph of its own, and the caption's sentence was
    # cut; text on the caption's next line inside its region is the caption's end.
    from .conftest import corpus

    doc = pdfium.PdfDocument(str(corpus("scan/scan_tablesdev_acmart_sigconf_p4.pdf")))
    try:
        image = np.asarray(doc[0].render(scale=READ_DPI / 72).to_pil().convert("RGB"))
    finally:
        doc.close()
    found = list(scanpage.blocks(reader, reader.detect(image, READ_DPI)))
    captions = [b.text for b in found if b.kind is Kind.CAPTION and b.text.startswith("Figure 2")]
    assert len(captions) == 1 and captions[0].endswith("(https://goo.gl/VLCRBB).")
    assert not [b for b in found if b.kind is Kind.TEXT and "goo.gl" in b.text]


#: A catalogue table of a paper's kind: a name, a catalogue number, a type and two figures, a dozen rows.
CATALOGUE_HEADER = ["Name", "Number", "Type", "Distance", "Magnitude"]
CATALOGUE = [
    [f"M{k}", f"NGC {n}", kind, distance, magnitude]
    for k, (n, kind, distance, magnitude) in enumerate(
        [
            ("1952", "Remnant", "2.0", "8.4"),
            ("7089", "Globular", "11.5", "6.3"),
            ("5272", "Globular", "10.4", "6.2"),
            ("6121", "Globular", "2.2", "5.9"),
            ("5904", "Globular", "24.5", "5.9"),
            ("6405", "Open", "0.31", "4.2"),
            ("6475", "Open", "0.30", "3.3"),
            ("6523", "Nebula", "1.25", "6.0"),
            ("6333", "Globular", "7.91", "8.4"),
            ("6254", "Globular", "4.42", "6.4"),
            ("6218", "Globular", "5.10", "6.6"),
            ("6705", "Open", "1.88", "5.8"),
        ],
        start=1,
    )
]


def _booktabs(c: object, left: float, right: float, y: float, rows: list[list[str]], xs: list[float]) -> float:
    """A booktabs table on canvas `c` from baseline `y` down: a top rule, the header row, a mid rule, the body, a
    bottom rule, each row 12 points below the last; returns the bottom rule's height."""
    size = 9.0
    c.setLineWidth(0.8)  # type: ignore[attr-defined]
    c.line(left, y + size + 2, right, y + size + 2)  # type: ignore[attr-defined]
    for n, row in enumerate(rows):
        c.setFont("Times-Roman", size)  # type: ignore[attr-defined]
        for x, text in zip(xs, row, strict=True):
            c.drawString(x, y, text)  # type: ignore[attr-defined]
        if n == 0:
            c.setLineWidth(0.5)  # type: ignore[attr-defined]
            c.line(left, y - 4, right, y - 4)  # type: ignore[attr-defined]
        y -= 12
    c.setLineWidth(0.8)  # type: ignore[attr-defined]
    c.line(left, y + 12 - 4, right, y + 12 - 4)  # type: ignore[attr-defined]
    return y + 12 - 4


def journal_page(dpi: int = SCAN_DPI) -> tuple[np.ndarray, tuple[float, float, float, float]]:
    """A journal's page: a running head with a rule under it across the measure, a table's caption just below, then
    a booktabs table across the same measure with a dozen rows under its header (144 points from its mid rule to its
    bottom rule), a paragraph after. Returns the page and the table's box (top rule to bottom rule, points down)."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas as pdfcanvas

    out = io.BytesIO()
    c = pdfcanvas.Canvas(out, pagesize=letter)
    height = letter[1]
    c.setFont("Times-Roman", 9)
    c.drawRightString(RIGHT, 752.0, "Short Article Title   3")
    c.setLineWidth(0.5)
    c.line(COLUMNS[0], 746.0, RIGHT, 746.0)
    c.setFont("Times-Bold", 9)
    c.drawString(COLUMNS[0], 728.0, "Table 3. The first twelve objects of the catalogue, with their distances.")
    xs = [COLUMNS[0] + 2, COLUMNS[0] + 80, COLUMNS[0] + 180, COLUMNS[0] + 290, COLUMNS[0] + 390]
    bottom = _booktabs(c, COLUMNS[0], RIGHT, 700.0, [CATALOGUE_HEADER, *CATALOGUE], xs)
    c.setFont("Times-Roman", 10)
    _paragraph(c, bottom - 24, AFTER)
    return _rendered(c, out, dpi), (COLUMNS[0], height - 711.0, RIGHT, height - bottom)


def test_a_long_booktabs_table_under_a_running_heads_rule_is_one_table_without_its_caption(
    reader: PixelReader,
) -> None:
    # The layout model boxes the table from its top rule to its bottom rule. Rules alone stacked the running head's
    # rule with the table's top and mid rules (the caption between them a row of the table, its header another) and
    # stopped short of the bottom rule, 144 points under the mid rule (tables.STACK_GAP): the dozen rows came out as
    # loose lines and headings. A ruled frame with no grid is the frame of the table region over it, and a frame the
    # rules' finder reads partly as a table is read whole from its words' positions.
    image, (x0, y0, x1, y1) = journal_page()
    detection = reader.detect(scanned(image), READ_DPI)
    table = (x0 - 3, y0 - 2, x1 + 3, y1 + 2)  # the model's box reaches a few points past the rules
    kept = tuple(r for r in detection.regions if box_overlap(r.bbox, table) == 0)
    found = list(scanpage.blocks(reader, replace(detection, regions=(*kept, Region("table", table)))))
    assert [_grid(b) for b in found if b.table is not None] == [[CATALOGUE_HEADER, *CATALOGUE]]
    assert any(b.text.startswith("Table 3. The first twelve") for b in found if b.table is None)
    assert not [b.text for b in found if b.kind is Kind.SECTION_HEADER]


#: Two small tables of a two-column page, one in each column.
LEFT_HEADER = ["One", "Two", "Three", "Four"]
LEFT_ROWS = [["He", "2", "2.77", "45.6"], ["Ca", "7", "125.3", "37.6"], ["Ne", "10", "20.18", "0.69"]]
RIGHT_HEADER = ["Ion", "Radius", "Charge", "Mass"]
RIGHT_ROWS = [["Cu", "0.80", "14.1", "2.55"], ["Ag", "0.99", "15.9", "2.71"], ["Au", "1.15", "15.9", "2.71"]]


def columns_page(dpi: int = SCAN_DPI) -> tuple[np.ndarray, list[tuple[float, float, float, float]]]:
    """A two-column page with a booktabs table in each column, the right one set 20 points lower, so the two tables'
    rules stand at heights one between another's (the right table's top and mid rules between the left's mid and
    bottom rules). Returns the page and the tables' boxes (top rule to bottom rule, points down)."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas as pdfcanvas

    out = io.BytesIO()
    c = pdfcanvas.Canvas(out, pagesize=letter)
    height = letter[1]
    boxes = []
    for left, top, header, body in ((54.0, 700.0, LEFT_HEADER, LEFT_ROWS), (318.0, 680.0, RIGHT_HEADER, RIGHT_ROWS)):
        c.setFont("Times-Roman", 9)
        c.drawString(left, top + 26, f"TABLE {'I' if left < 300 else 'II'}. Figures of four kinds for three rows.")
        xs = [left + 2 + 60 * k for k in range(4)]
        bottom = _booktabs(c, left, left + 240, top, [header, *body], xs)
        boxes.append((left, height - (top + 11), left + 240, height - bottom))
    return _rendered(c, out, dpi), boxes


def test_tables_in_two_columns_whose_rules_interleave_keep_their_headers(reader: PixelReader) -> None:
    # revtex's two-column sample (dev corpus, scanned): its left table's header came out as headings ("One Two",
    # "Three") over a table of its body. Rules alone stack booktabs' rules in one run down the page, and the right
    # column's rules between the left table's mid and bottom rules broke the left table's stack at its header rule;
    # the layout model's table region over each frame gives the table's own rules.
    image, boxes = columns_page()
    detection = reader.detect(scanned(image), READ_DPI)
    tables = [(x0 - 3, y0 - 2, x1 + 3, y1 + 2) for x0, y0, x1, y1 in boxes]
    kept = tuple(r for r in detection.regions if all(box_overlap(r.bbox, t) == 0 for t in tables))
    found = list(scanpage.blocks(reader, replace(detection, regions=(*kept, *(Region("table", t) for t in tables)))))
    assert [_grid(b) for b in found if b.table is not None] == [
        [LEFT_HEADER, *LEFT_ROWS],
        [RIGHT_HEADER, *RIGHT_ROWS],
    ]
    assert not [b.text for b in found if b.kind is Kind.SECTION_HEADER]


#: A glossary of two columns set without rules under its section's heading: a word, then how a sort program stores
#: it; the long words end a space or two short of the second column.
GLOSSARY_HEADER = ["Word", "Definition"]
GLOSSARY = [
    ["High Water", "high water"],
    ["define", "hash define"],
    ["10 Downing Street", "10 Downing Street"],
    ["highwater", "high water"],
    ["1st Street", "first street"],
    ["10 Downing Avenue", "10 Downing Avenue"],
    ["Zebra", "zebra"],
    ["alpha", "alpha"],
    ["London, History of", "London history"],
    ["seal", "seal"],
    ["sea lion", "sea lion"],
    ["Ten Samurai, The", "Ten Samurai"],
    ["elephant", "elephant"],
    ["Elite", "elite"],
]


def glossary_page(dpi: int = SCAN_DPI) -> tuple[np.ndarray, tuple[float, float, float, float]]:
    """A section's heading, its number a quad before its words ("1  Unsorted data", as LaTeX sets it), over a table of
    two columns with no rule at all, its second column 97 points right of its first, so its longest words end
    10-15 points before it. Returns the page and the box the layout model gives it: heading and table as one figure."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas as pdfcanvas

    out = io.BytesIO()
    c = pdfcanvas.Canvas(out, pagesize=letter)
    height = letter[1]
    c.setFont("Times-Bold", 14)
    c.drawString(70.0, 700.0, "1")
    c.drawString(95.0, 700.0, "Unsorted data")
    y = 676.0
    for n, (word, definition) in enumerate([GLOSSARY_HEADER, *GLOSSARY]):
        c.setFont("Times-Bold" if n == 0 else "Times-Roman", 10)
        c.drawString(76.0, y, word)
        c.setFont("Courier", 10)
        c.drawString(173.0, y, definition)
        y -= 12
    return _rendered(c, out, dpi), (66.0, height - 714.0, 300.0, height - y)


def test_a_table_under_its_sections_heading_both_boxed_as_a_figure_is_a_table(reader: PixelReader) -> None:
    # datatool's sorting sample (dev corpus, rendered): the layout model boxes a section's heading and the two-column
    # table under it as one figure. Its rows' cells stand in two columns, but the heading's number and words, a quad
    # apart, are two parts of one row across the columns' gap, which joined the columns into one (and the long words'
    # rows, a space or two from the second column, part no cells by their gaps): a picture, its lines loose text read
    # a column at a time. A row or two across a gap (scantable.GAP_CROSSING of them) leave the columns standing.
    image, box = glossary_page()
    detection = reader.detect(scanned(image), READ_DPI)
    kept = tuple(r for r in detection.regions if box_overlap(r.bbox, box) == 0)
    found = list(scanpage.blocks(reader, replace(detection, regions=(*kept, Region("figure", box)))))
    tables = [_grid(b) for b in found if b.table is not None]
    assert len(tables) == 1
    assert [row for row in tables[0] if row in [GLOSSARY_HEADER, *GLOSSARY]] == [GLOSSARY_HEADER, *GLOSSARY]
    assert not [b for b in found if b.kind is Kind.PICTURE]


def test_two_tables_a_paragraph_apart_whose_rules_stack_are_two_frames() -> None:
    # booktabs' manual (dev corpus, rendered): its second and third price lists stand a paragraph apart, 102 points,
    # and rules alone stack them into one frame, the paragraph rows between them and the third list's columns merged.
    # Each table region the layout model boxes over the frame (a tenth wider than its rules on each side) is a table
    # of its own; a region whose rules run under half its width (an underline) gives no frame.
    def rules(top: float) -> list[Segment]:
        level = [Segment(253.0, y, 409.0, y, 0.5) for y in (top, top + 25.0, top + 99.0)]
        return [*level, Segment(253.0, top + 13.0, 364.0, top + 13.0, 0.4)]  # a cmidrule under the group's name

    first, second = rules(309.0), rules(510.0)
    image = np.full((10, 10, 3), 255, dtype=np.uint8)
    regions = (Region("table", (239.0, 311.0, 420.0, 410.0)), Region("table", (244.0, 509.0, 418.0, 612.0)))
    detection = pixels.Detection(image, [], 0, 1.0, regions, body_height=12.0, rulings=(*first, *second))
    assert pixels._frames(detection, regions) == [(253.0, 309.0, 409.0, 408.0), (253.0, 510.0, 409.0, 609.0)]
    wide = (Region("table", (100.0, 300.0, 600.0, 620.0)),)  # the rules run under half of it
    assert pixels._frames(replace(detection, regions=wide), wide) == [(253.0, 309.0, 409.0, 609.0)]

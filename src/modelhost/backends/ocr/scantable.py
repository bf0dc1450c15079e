"""Tables from OCR'd words' positions: a scan has no ruling paths, only where its text sits.

Used for regions the layout model labels `table` (scanpage.py). The word-position reader itself (rows, columns,
cells, two tables of one header, header cells spanning a partial rule) is docengine.wordtable's, shared with the
text path, which reads the layout model's table regions of a text-layer page with it; the words it gets here are
detector lines' (a detector line is one phrase, placed on its ink by pixels.ink_placed). What only pixels need:
- A ruled frame whose rules make no grid (booktabs, a rule between column groups) and whose table the ruled-table
  finder reads with fewer cells than the lines' positions give is read from the positions (`refined`).
- A `figure` region that draws nothing (its ink is its text lines') and whose lines stand in rows of cells is a table
  set without rules (`unruled_figure`): the layout model boxes texinfo's rule-less tables as figures. Its ink
  left out the rules that run across its lines (pixels.ACROSS), it is a booktabs table the model boxed as a figure,
  and each detector line of a row between two such rules is a cell (`table_runs`, `ruled`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from modelhost.backends.ocr.pixelrules import ruled_grid
from modelhost.docengine.types import BBox, Block, Region, Segment, Table, Word
from modelhost.docengine.wordtable import (
    GAP_CROSSING,
    MIN_COLS,
    MIN_ROWS,
    aligned_columns,
    column_of,
    column_spans,
    rows,
    table_block,
    table_blocks,
    table_runs,
)

__all__ = [  # the word-position reader lives in docengine.wordtable; named here for the pixel path's callers
    "completed",
    "in_table_region",
    "refined",
    "rows",
    "table_block",
    "table_blocks",
    "table_runs",
    "unruled_figure",
]
T = TypeVar("T")

#: A figure region is a table set without rules (`unruled_figure`) when at least this share of its lines fall in rows
#: of cells (`table_runs`): a table's title or note set inside the box is a line or two of it. The layout model's
#: figures over the rule-less texinfo tables of tables_dev (scanned and rendered) hold 0.97-1.00 of their lines in
#: such rows; figures that are drawings or listings on the dev pages 0.00-0.78.
FIGURE_TABLE_LINES = 0.9
#: ... and at most this share of its ink lies outside its lines' boxes (pixels.drawn): a drawing's boxes, a chart's
#: axes and bars, a photo's tones and a ruled table's rules are ink no text line holds. Measured at 150 DPI on the dev
#: pages' figure regions: text alone 0.000-0.022, booktabs rules around a table 0.024-0.033, drawings 0.05-0.93.
FIGURE_DRAWN = 0.02

#: A ruled frame whose rules the ruled-table finder makes no table of is read from its words' positions when the layout
#: model boxed at least this share of it as a table (`in_table_region`): two kinds of evidence agree on a table. Half,
#: as the model's box and the rules' frame differ by padding and by a caption the model includes.
TABLE_REGION = 0.5


def unruled_figure(
    lines: Sequence[tuple[BBox, T]], drawn: float, *, ruled: bool = False, columned: bool = False
) -> bool:
    """Whether a region the layout model calls a figure is a table set without rules: it draws nothing (`drawn`, the
    share of its ink outside its text lines, at most `FIGURE_DRAWN`) and `FIGURE_TABLE_LINES` of its detector lines
    (boxes with anything attached) stand in rows of cells (`table_runs`). Read as a picture, its lines came out as
    loose text after an empty picture, a column at a time (the Octave manual's operator table). `ruled`: its drawn
    ink left out the table rules across its lines (pixels.ACROSS), whose cells may stand close (`table_runs`).
    `columned`: `lines` are the lines' ink parts (pixels.ink_cells), each a cell however close, where they stand in
    columns (`_columned`): a table set tight with no rule at all (pmlr's "Dataset Result", columns 1.5 line heights
    apart, under the CELL_GAP_HEIGHTS a row of prose's detector lines may stand apart at)."""
    if not lines or drawn > FIGURE_DRAWN or (columned and not _columned(lines)):
        return False
    tabled = sum(len(row) for run in table_runs(lines, ruled=ruled or columned) for row in run)
    return tabled >= FIGURE_TABLE_LINES * len(lines)


def _columned(lines: Sequence[tuple[BBox, T]]) -> bool:
    """Whether the rows of `MIN_COLS` boxes or more stand in `MIN_COLS` columns or more (the x ranges their boxes
    cover, a range of fewer than `MIN_ROWS` rows joined to its neighbour: `column_spans`; where a row bridges them, the
    columns aligned down the rows that few rows cross: `aligned_columns`) with no row's two boxes in one column,
    save the rows that cross a column gap (`GAP_CROSSING` of them: a title the model boxed with the table, a section
    heading's number and its words over a table of two columns). A table's cells are aligned down its rows, where
    boxes a row of a drawing's labels or a listing's comment parts into stand anywhere, and a box that bridges two
    columns in many rows joins them into one."""
    lined = [row for row in rows(lines) if len(row) >= MIN_COLS]
    if len(lined) < MIN_ROWS:
        return False
    columns = column_spans(lined, range(len(lined)))
    if len(columns) < MIN_COLS:
        columns = aligned_columns([[(box, "") for box, _ in row] for row in lined])
    if len(columns) < MIN_COLS:
        return False
    crossing = sum(1 for row in lined if len({column_of(box, columns) for box, _ in row}) < len(row))
    return crossing <= GAP_CROSSING * len(lined)


def in_table_region(frame: BBox, regions: Sequence[Region]) -> bool:
    """Whether the layout model boxed most of a ruled frame (`TABLE_REGION` of its area) as a table."""
    area = max(frame[2] - frame[0], 0.0) * max(frame[3] - frame[1], 0.0)
    for region in regions:
        if region.label != "table":
            continue
        x0, y0, x1, y1 = region.bbox
        inside = max(0.0, min(x1, frame[2]) - max(x0, frame[0])) * max(0.0, min(y1, frame[3]) - max(y0, frame[1]))
        if area > 0 and inside >= TABLE_REGION * area:
            return True
    return False


def _parted(table: Table) -> int:
    # How many cells hold text: a spanning cell counts once.
    return sum(1 for cell in table.cells if cell.text.strip())


def completed(found: tuple[Block, ...], words: Sequence[Word], rules: Sequence[Segment]) -> tuple[Block, ...]:
    """A ruled frame in a table region that analysis read partly as a table, the rest as loose text, read whole from
    its words' positions (`table_block`) where that reading parts as many cells as the tables found, or more. The
    ruled-table finder stacks booktabs' rules only a short way apart (docengine.tables.STACK_GAP, 120 points): a
    table's ten rows under its header rule (136 points to the bottom rule) were left as loose lines and headings
    under a table of its header. Both the layout model and the rules say the whole frame is one table."""
    tables = [b.table for b in found if b.table is not None]
    if not tables or not any(b.table is None and b.text.strip() for b in found):
        return found
    table = table_block(words, rules)
    if table is None or table.table is None or _parted(table.table) < sum(_parted(t) for t in tables):
        return found
    return (table,)


def refined(
    found: tuple[Block, ...], words: Sequence[Word], rules: Sequence[Segment], frame: BBox
) -> tuple[Block, ...]:
    """A ruled frame's one table read again from its words' positions (`table_block`) where its rules make no grid
    and that reading parts more cells into as many rows. Without a vertical between every column (booktabs, or one
    rule between column groups) the ruled-table finder reads the other columns as gaps no word covers, and a
    detector's box padded past its ink covers the narrow gaps of a header set tight: coin's `h(Yi) gadd(Xi) ...` came
    out as one cell spanning four columns, `i` and `Yi` as one. Word positions keep each detector line a cell of its
    own. Only columns: rows the finder read with its rules stay (positions alone made each line of a cell of several
    lines a row, a code box's `SELECT function_id, user_name, ...` one row a line)."""
    if len(found) != 1 or found[0].table is None or ruled_grid(frame, rules):
        return found
    table = table_block(words, rules)
    if (
        table is None
        or table.table is None
        or table.table.rows != found[0].table.rows
        or _parted(table.table) <= _parted(found[0].table)
    ):
        return found
    return (replace(table, bbox=found[0].bbox),)

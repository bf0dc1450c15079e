"""A table from words' positions alone: rows of words, the columns they stand in, and the cells they make.

The pixel path reads its layout model's `table` regions with it (backends/ocr/scantable.py, scanpage.py), and the text
path reads the same regions with it when the layout model's regions are given for a text-layer page (analyse.py):
one reader, words from OCR or from the text layer. The rules, and why each is the one it is:
- Words of one line stay in one cell: a detector (or the text layer) already gives a row's phrase as one line; where
  it did not, the words standing `PART_GAP` sizes apart part it (pixels.ink_placed places OCR'd words on their ink;
  a text layer's words stand where they are drawn).
- Lines are gathered into rows when they overlap vertically by half the smaller height; sorting by centre alone
  misread a row whose cells' boxes differ by a pixel or two (CER 6% against 0% on the test page).
- Columns are the union of the lines' horizontal extents, so right-aligned numbers of different widths still land in
  one column, a range that lines of fewer than MIN_ROWS rows make being no column (`_line_columns`); a row's cell
  goes to the column holding its centre. Where that union leaves one column (a line set across the columns bridges
  every gap), the columns are where the lines stand aligned down the rows and few lines cross (`aligned_columns`).
  The first row is the header.
- Lines of a row in one column closer than CELL_GAP_HEIGHTS line heights are one cell (a phrase cut in two); lines
  of two columns never are.
- A wrapped cell's next line is a row's next line, not a row (`_joined`): by its text (lowercase after no sentence's
  end, or hanging under the row with its label and another column empty), or by the rows' spacing, read from the
  table itself: a line set closer under its row than the full rows stand apart (`CLOSE_PITCH`), holding
  words under the row's words only and no figures, is that row's however it is capitalised (title-cased names), and
  a header's next lines so set are the header's. A line many times the others' height (a math glyph's) stretches no
  row (`TALL_LINE`).
- A table region whose rows repeat its first row of cells whole holds two tables of one header (`table_blocks`); a
  row of one cell just above the repeat is the second one's title.
- A header cell with a rule just under it that stops short of the table's width (booktabs' `cmidrule`, a partial
  `cline`) names the columns that rule stands over: it spans them (`_header_spans`), as a results table's "Dataset A"
  spans its P, R and F1.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import TypeVar

from modelhost.docengine.figures import box_union
from modelhost.docengine.types import BBox, Block, Cell, Kind, Segment, Table, Word

#: Two lines of a row further apart than this many line heights are two cells. Word gaps are ~0.3 heights.
CELL_GAP_HEIGHTS = 2.0
#: Words of one detector line this many sizes apart are two cells: ink_placed parts a line only at gaps of
#: pixels.COLUMN_GAP (0.8) sizes, and words it spreads over one part by character share stand ~0.5 size apart (one
#: space's share), so 0.7 tells them apart.
PART_GAP = 0.7
T = TypeVar("T")
#: A gap that at most this share of a table region's rows cross with a detector line may part its columns
#: (`aligned_columns`): a title or a header line set across the columns crosses it in a row or two, and a lone
#: crossing row already closed lme4's method table (31 rows, a label and a description 1.5 line heights apart).
GAP_CROSSING = 0.1
#: A table needs this many rows and columns; fewer is text the layout model boxed as a table. More than half its rows
#: hold cells in two columns or more, as the text path asks of columns guessed from gaps (tables._table): a code
#: listing whose two comments end at one column, a list item's marker set apart from its text, are no tables.
MIN_ROWS = 2
MIN_COLS = 2
#: Rows of a table's head a rule under a cell can make a spanning cell of (`_header_spans`): a two-level header, a
#: group's name over its columns' names; a body row's rule (a group of rows parted) is no header's.
HEADER_ROWS = 2
#: A rule belongs to the cell above it when it lies within this many of the cell's heights under the cell's box: a
#: `\cmidrule` sits a couple of points under its header line (the detector's box reaches ~0.3 heights past the ink),
#: the next row's line a full pitch lower.
UNDER_HEIGHTS = 1.0
#: A figure (a cell that is a number, an amount or a percentage): a row of figures is a row of its own, never a
#: wrapped cell's next line.
_NUMBER = re.compile(r"^[(\[]?[-+−–]?[$€£¥]?[\d.,\s]*\d[\d.,\s]*%?[)\]]?[*†‡]?$")
#: A cell that does not end a sentence may run on into the line below it.
_RUNS_ON = re.compile(r"[^.!?:;]$")
#: A line whose centre stands less than this share of the table's row pitch (`_pitch`) under the last line above it
#: is that row's next line, a wrapped cell's. Measured on the dev tables read from their regions: a wrapped cell's
#: next line stands at the text's leading, which cell padding and rules add to between rows, 0.47-0.61 of the pitch
#: (hydrogen_projects_a1's project names, scanned and from the text layer alike); a row's first line 0.95-1.0 of it
#: (the detector's boxes jitter by a pixel or two, ~0.1 pitch), and 0.74-0.78 where a panel of keys and dates stands
#: tighter than the panel beside it in one region (clo_deal_summary). 0.7 parts the two.
CLOSE_PITCH = 0.7
#: A line this many times as tall as a table's lines usually are holds a tall glyph (a math accent over a symbol, a
#: big bracket) and is no row of its height: lines of text are 1.0-1.2 of the median, lme4's line with a hatted `β`
#: 3.4, and it chained three rows into one.
TALL_LINE = 1.5


def _box(items: Sequence[Word]) -> BBox:
    return box_union([w.bbox for w in items])


def _lines(words: Sequence[Word]) -> list[tuple[BBox, str]]:
    """Each detector line's words as a box and its text, a line parted where two of its words stand `PART_GAP`
    sizes apart or more (two cells the detector read as one line, its words placed on their ink:
    pixels.ink_placed)."""
    by_line: dict[int, list[Word]] = {}
    for word in words:
        by_line.setdefault(word.line, []).append(word)
    out: list[tuple[BBox, str]] = []
    for ws in by_line.values():
        ws.sort(key=lambda w: w.x0)
        part = [ws[0]]
        for a, b in itertools.pairwise(ws):
            if b.x0 - a.x1 >= PART_GAP * max(a.size, b.size):
                out.append((_box(part), " ".join(w.text for w in part)))
                part = []
            part.append(b)
        out.append((_box(part), " ".join(w.text for w in part)))
    return out


def rows(lines: Sequence[tuple[BBox, T]], *, height: float | None = None) -> list[list[tuple[BBox, T]]]:
    """Boxes (with anything attached) gathered into rows, top to bottom, each row left to right. With `height` (the
    lines' usual height), a line more than `TALL_LINE` times as tall joins the row it overlaps without stretching the
    row's span: a math glyph's box (lme4's `β` with its hat) reached into the lines above and below, and three rows
    of a table came out as one."""
    rows: list[list[tuple[BBox, T]]] = []
    spans: list[tuple[float, float]] = []
    for line in sorted(lines, key=lambda ln: (ln[0][1] + ln[0][3]) / 2):
        (_, y0, _, y1), _ = line
        if rows:
            top, bottom = spans[-1]
            if min(bottom, y1) - max(top, y0) >= 0.5 * min(y1 - y0, bottom - top):
                rows[-1].append(line)
                if height is None or y1 - y0 <= TALL_LINE * height:
                    spans[-1] = (min(top, y0), max(bottom, y1))
                continue
        rows.append([line])
        spans.append((y0, y1))
    return [sorted(row, key=lambda ln: ln[0][0]) for row in rows]


def _split(row: Sequence[tuple[BBox, T]]) -> int:
    # How many cells a row's boxes make: a new one wherever the gap before a box is wider than CELL_GAP_HEIGHTS.
    cells = 1
    for (a, _), (b, _) in itertools.pairwise(row):
        cells += b[0] - a[2] >= CELL_GAP_HEIGHTS * min(a[3] - a[1], b[3] - b[1])
    return cells


def table_runs(lines: Sequence[tuple[BBox, T]], *, ruled: bool = False) -> list[list[list[T]]]:
    """Runs of at least MIN_ROWS consecutive rows that each break into MIN_COLS cells or more: unruled tables.
    Each run is its rows, each row the attached values of its boxes. `ruled` (rules run across the lines: a
    booktabs table's) makes each detector line of a row a cell, however close: the detector parts a row at its
    column gaps, and a table set tight (12 points between columns of figures) has gaps under CELL_GAP_HEIGHTS."""
    runs: list[list[list[T]]] = []
    current: list[list[T]] = []
    for row in [*rows(lines), []]:
        if len(row) >= MIN_COLS and (ruled or _split(row) >= MIN_COLS):
            current.append([value for _, value in row])
            continue
        if len(current) >= MIN_ROWS:
            runs.append(current)
        current = []
    return runs


def column_of(box: BBox, columns: Sequence[tuple[float, float]]) -> int:
    # The column holding the box's centre, else the one whose middle is nearest it.
    centre = (box[0] + box[2]) / 2
    return min(
        range(len(columns)),
        key=lambda i: 0.0 if columns[i][0] <= centre <= columns[i][1] else abs(centre - sum(columns[i]) / 2),
    )


def aligned_columns(lined: Sequence[Sequence[tuple[BBox, str]]]) -> list[tuple[float, float]]:
    """The columns of a table region whose cells some rows bridge: the x ranges its detector lines cover, parted at
    each gap that no more than `GAP_CROSSING` of its rows cross with a line and where lines of `MIN_ROWS` rows or more
    end (left of it) or start (right of it) within a line height: a column's edge, aligned down the rows, where a
    phrase the detector cut in two leaves a gap in one row only."""
    lines = [box for row in lined for box, _ in row]
    if not lines:
        return []
    allowed = int(GAP_CROSSING * len(lined))
    height = sorted(b[3] - b[1] for b in lines)[len(lines) // 2]
    events = sorted([(b[0], 1) for b in lines] + [(b[2], -1) for b in lines], key=lambda e: (e[0], -e[1]))
    columns: list[tuple[float, float]] = []
    depth, start = 0, events[0][0]
    for x, step in events:
        before = depth
        depth += step
        if before > allowed >= depth:
            columns.append((start, x))
        elif before <= allowed < depth:
            # no column's edge: the gap is inside a column, which runs on
            start = columns.pop()[0] if columns and not _edge(lines, columns[-1][1], x, height) else x
    if depth > allowed:
        columns.append((start, events[-1][0]))
    return columns


def _line_columns(lined: Sequence[Sequence[tuple[BBox, str]]]) -> list[tuple[float, float]]:
    """The columns of a table region: the x ranges the detector lines of its rows of two lines or more cover, a range
    holding lines of fewer than `MIN_ROWS` rows joined to its nearer neighbour (a phrase the detector cut in two, a
    column of one row only). The lines themselves, not cells joined first: a header set tight (coin's `gadd(Xi)
    gdom(Xi) grec(Xi)`, 2 to 5 points apart) joined into one cell that spanned three columns of figures, and the
    columns below with it. A row of one line says nothing of where columns part: a title set inside the table over
    its columns (coin's `TNFA_238 locus`) bridged two of them; all rows count where the others leave one column."""
    columns = column_spans(lined, [r for r, row in enumerate(lined) if len(row) >= MIN_COLS])
    return columns if len(columns) >= MIN_COLS else column_spans(lined, range(len(lined)))


def column_spans(lined: Sequence[Sequence[tuple[BBox, object]]], kept: Sequence[int]) -> list[tuple[float, float]]:
    # The x ranges the lines of rows `kept` cover, thin ones joined to their nearer neighbours (`_line_columns`).
    spans = sorted((box[0], box[2], r) for r in kept for box, _ in lined[r])
    columns: list[tuple[float, float, set[int]]] = []
    for x0, x1, r in spans:
        if columns and x0 <= columns[-1][1]:
            columns[-1] = (columns[-1][0], max(columns[-1][1], x1), columns[-1][2] | {r})
        else:
            columns.append((x0, x1, {r}))
    while len(columns) > 1 and (thin := [i for i, c in enumerate(columns) if len(c[2]) < MIN_ROWS]):
        i = thin[0]
        left = columns[i][0] - columns[i - 1][1] if i > 0 else float("inf")
        right = columns[i + 1][0] - columns[i][1] if i + 1 < len(columns) else float("inf")
        j = i - 1 if left <= right else i + 1
        a, b = columns[min(i, j)], columns[max(i, j)]
        columns[min(i, j) : max(i, j) + 1] = [(a[0], max(a[1], b[1]), a[2] | b[2])]
    return [(x0, x1) for x0, x1, _ in columns]


def _edge(lines: Sequence[BBox], left: float, right: float, height: float) -> bool:
    """Whether the gap from `left` to `right` is a column's edge: `MIN_ROWS` lines end at its left or start at its
    right, each within a line height."""
    ends = sum(1 for b in lines if left - height <= b[2] <= left + height)
    starts = sum(1 for b in lines if right - height <= b[0] <= right + height)
    return max(ends, starts) >= MIN_ROWS


def _cells(row: list[tuple[BBox, str]], columns: Sequence[tuple[float, float]] = ()) -> list[tuple[BBox, str]]:
    """A row's detector lines joined into cells: neighbours closer than CELL_GAP_HEIGHTS line heights, in one column
    of `columns` when they are given."""
    merged: list[tuple[BBox, str]] = []
    for box, text in row:
        if merged:
            (px0, py0, px1, py1), ptext = merged[-1]
            height = min(box[3] - box[1], py1 - py0)
            apart = bool(columns) and column_of(box, columns) != column_of((px0, py0, px1, py1), columns)
            if box[0] - px1 < CELL_GAP_HEIGHTS * height and not apart:
                merged[-1] = ((px0, min(py0, box[1]), max(px1, box[2]), max(py1, box[3])), f"{ptext} {text}")
                continue
        merged.append((box, text))
    return merged


def table_block(words: Sequence[Word], rules: Sequence[Segment] = ()) -> Block | None:
    """The words as a TABLE block, or None when they do not form at least MIN_ROWS x MIN_COLS cells; `rules` (the
    region's rules found in its pixels) make a header cell over a partial rule span its columns (`_header_spans`)."""
    found = _read_table(words)
    if found is None:
        return None
    placed, joined, columns, _, spots, _ = found
    return _built(placed, joined, columns, _box(words), _header_spans(placed, columns, spots, rules))


def table_blocks(words: Sequence[Word], rules: Sequence[Segment] = ()) -> list[Block]:
    """The words as TABLE blocks, parted where a row repeats the first row whole (`_repeats`): two tables of one
    header stacked in one region (coin's two loci under "Male | | Control | Early Onset ..."), each read alone, and
    a row of one cell just above the repeat, the second table's title set over its columns, a TEXT block between
    them. As one table the title was a row of it and its header a body row. Empty when the words make no table.
    `rules`: as `table_block`'s, for a region read as one table."""
    found = _read_table(words)
    if found is None:
        return []
    placed, joined, columns, boxes, spots, centres = found
    head = next((r for r, row in enumerate(placed) if len(row) >= MIN_COLS), 0)
    starts = [head, *(r for r in range(head + MIN_ROWS, len(placed)) if _repeats(placed[r], placed[head]))]
    starts = [s for k, s in enumerate(starts) if k == 0 or s - starts[k - 1] > MIN_ROWS]
    if len(starts) == 1 or len(placed) - starts[-1] < MIN_ROWS:
        return [_built(placed, joined, columns, _box(words), _header_spans(placed, columns, spots, rules))]
    out = [_title(placed[r], boxes[r]) for r in range(head)]  # the first table's title, set over its columns
    for start, end in itertools.pairwise([*starts, len(placed)]):
        title = end < len(placed) and len(placed[end - 1]) == 1
        stop = end - 1 if title else end
        part = placed[start:stop]
        out.append(
            _built(part, _joined(part, len(columns), centres[start:stop]), columns, box_union(boxes[start:stop]))
        )
        if title:
            out.append(_title(placed[end - 1], boxes[end - 1]))
    return out


def _title(row: dict[int, str], box: BBox) -> Block:
    # A table's title set inside its region, a row of one cell (or of a few, read in order), as text
    return Block(Kind.TEXT, box, " ".join(text for _, text in sorted(row.items())))


def _repeats(row: dict[int, str], first: dict[int, str]) -> bool:
    # Whether a row holds the first row's cells whole, in the same columns (MIN_COLS of them or more)
    return len(first) >= MIN_COLS and row == first


def _built(
    placed: list[dict[int, str]],
    joined: list[dict[int, str]],
    columns: Sequence[tuple[float, float]],
    box: BBox,
    spans: dict[tuple[int, int], tuple[int, int]] | None = None,
) -> Block:
    """Rows of cells placed in `columns` as a TABLE block, its rows `joined` where a wrapped cell's lines were read as
    rows (`_joined` of `placed`), row 0 its header; `spans` maps a cell (row, column) of the head to the columns
    [start, end) it spans (given only where `_joined` leaves the head's rows as they are: see `_header_spans`)."""
    spans = spans if len(joined) == len(placed) or joined[0] == placed[0] else None
    placed = joined
    spans = spans or {}
    cells = []
    for r, row in enumerate(placed):
        for c, text in sorted(row.items()):
            start, end = spans.get((r, c), (c, c + 1))
            cells.append(Cell(r, start, text, col_span=end - start, header=r == 0))
    return Block(Kind.TABLE, box, table=Table(len(placed), len(columns), tuple(cells)))


def _header_spans(
    placed: Sequence[dict[int, str]],
    columns: Sequence[tuple[float, float]],
    spots: Sequence[dict[int, BBox]],
    rules: Sequence[Segment],
) -> dict[tuple[int, int], tuple[int, int]]:
    """The head's cells that span columns: a cell of the first `HEADER_ROWS` rows (above the first row that fills
    every column but one, the columns' own names) with a horizontal rule under it (within `UNDER_HEIGHTS` of its
    height) that stands over fewer columns than the table has spans the columns whose middles the rule covers, when
    they hold its own column and no other cell of its row. Read without them, "Dataset A" centred over P, R and F1 was
    a cell of the middle column, and the two outer ones empty."""
    full = next((r for r, row in enumerate(placed) if len(row) >= len(columns) - 1), len(placed))
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for r in range(min(full, HEADER_ROWS)):
        for c, (x0, y0, x1, y1) in spots[r].items():
            for rule in rules:
                if rule.y0 != rule.y1 or not (y1 - 1.0 <= rule.y0 <= y1 + UNDER_HEIGHTS * (y1 - y0)):
                    continue
                if not rule.x0 <= (x0 + x1) / 2 <= rule.x1:
                    continue  # a rule under another cell of the row
                under = [k for k, (a, b) in enumerate(columns) if rule.x0 <= (a + b) / 2 <= rule.x1]
                if len(under) < 2 or len(under) == len(columns) or c not in under:
                    continue
                start, end = under[0], under[-1] + 1
                if any(k != c and start <= k < end for k in placed[r]):
                    continue
                out[(r, c)] = (start, end)
                break
    return out


def _read_table(
    words: Sequence[Word],
) -> (
    tuple[
        list[dict[int, str]],
        list[dict[int, str]],
        list[tuple[float, float]],
        list[BBox],
        list[dict[int, BBox]],
        list[tuple[float, float]],
    ]
    | None
):
    """The words' rows as cells placed in columns (column index to text), those rows with wrapped cells joined
    (`_joined`, which decides that they are a table), the columns, each row's box, each placed cell's box, and each
    row's first and last line's vertical centre; None when they do not form at least
    MIN_ROWS x MIN_COLS cells or most rows hold one cell."""
    if not words:
        return None
    found = _lines(words)
    heights = sorted(box[3] - box[1] for box, _ in found)
    lined = rows(found, height=heights[len(heights) // 2])
    columns = _line_columns(lined)
    if len(columns) < MIN_COLS:
        # a line set across the columns (a title, a spanning header) bridges every gap: the columns where the lines
        # stand aligned, crossed by few rows
        columns = aligned_columns(lined)
    grid = [_cells(row, columns) for row in lined]
    if len(grid) < MIN_ROWS or len(columns) < MIN_COLS:
        return None
    placed: list[dict[int, str]] = []
    spots: list[dict[int, BBox]] = []
    for row in grid:
        texts: dict[int, list[str]] = {}
        held: dict[int, list[BBox]] = {}
        for box, text in row:
            texts.setdefault(column_of(box, columns), []).append(text)
            held.setdefault(column_of(box, columns), []).append(box)
        placed.append({c: " ".join(t) for c, t in texts.items()})
        spots.append({c: box_union(b) for c, b in held.items()})
    centres = [(min((b[1] + b[3]) / 2 for b, _ in row), max((b[1] + b[3]) / 2 for b, _ in row)) for row in lined]
    joined = _joined(placed, len(columns), centres)
    if 2 * sum(1 for row in joined if len(row) >= MIN_COLS) <= len(joined):
        return None  # columns read from gaps hold cells on most rows, or they are none: a listing's aligned comments
    return placed, joined, columns, [box_union([box for box, _ in row]) for row in lined], spots, centres


def _pitch(placed: Sequence[dict[int, str]], centres: Sequence[tuple[float, float]], columns: int) -> float | None:
    """How far apart the table's rows stand: the median distance from the last line's centre of a row to the first
    line's centre of the next row that fills every column but one (a row's own first line: a wrapped cell's next line
    leaves the columns of its row's short cells empty). None where fewer than `MIN_ROWS` rows say, or the rows were not
    measured: no evidence."""
    steps = sorted(
        centres[r][0] - centres[r - 1][1] for r in range(1, len(placed)) if len(placed[r]) >= max(MIN_COLS, columns - 1)
    )
    return steps[len(steps) // 2] if len(steps) >= MIN_ROWS else None


def _joined(
    table: list[dict[int, str]], columns: int, centres: Sequence[tuple[float, float]] = ()
) -> list[dict[int, str]]:
    """Wrapped cells joined: a body row is the next line of the row above when each of its cells continues the cell
    above it (lowercase after no sentence's end), or when it hangs under that row (its first column empty where most
    rows fill it, another column empty too, only words under words, no figures). The evidence the text path joins
    an unruled table's wrapped cells with (docengine.unruled); here on the cells' texts, as OCR gives no fonts.
    `centres` (each row's first and last line's vertical centre) add the rows' spacing: a line set closer under the
    row above than the table's rows stand apart (`CLOSE_PITCH` of its pitch) is that row's next line where it holds
    words under its words only, no figures, and leaves a column empty that the rows filling the table fill (its
    row's anchor, a figure or a name) or starts no cell as its column's cells start (`_starts_cell`): title-cased
    project names wrapped onto three lines came out as rows of one cell. A header's next lines so set join the
    header, whatever their columns (a header cell wrapped onto two lines, bottom-aligned or not)."""
    pitch = _pitch(table, centres, columns) if len(centres) == len(table) else None

    def close(r: int) -> bool:
        return pitch is not None and centres[r][0] - centres[r - 1][1] < CLOSE_PITCH * pitch

    full = [row for row in table[1:] if len(row) >= max(MIN_COLS, columns - 1)]
    anchors = {c for c in range(columns) if 2 * sum(1 for row in full if c in row) > len(full)}
    labelled = sum(1 for row in table[1:] if 0 in row)
    out = table[:1]  # the header
    header = True  # still in the header's lines
    for r, row in enumerate(table[1:], start=1):
        above = out[-1]
        figures = any(_figure(text) for text in row.values())
        if header and close(r) and not figures and not any(_figure(text) for text in above.values()):
            out[-1] = _appended(above, row)  # a header's next line, its cells set closer than the rows
            continue
        header = False
        if r == 1 or len(out) == 1:
            out.append(row)  # the first body row never joins the header
            continue
        under = bool(row) and all(c in above for c in row)
        hangs = (
            0 not in row
            and 2 * labelled > len(table) - 1
            and len(row) < columns - 1
            and not any(_figure(text) or _figure(above.get(c, "")) for c, text in row.items())
        )
        # a row filling every column the row above fills is a row of its own, lowercase or not (a code table's
        # `random | (g)lmer | m_re` over `gee | geeglm | m_gee`): a wrapped row leaves its short cells' columns empty
        continues = (len(row) < len(above) or close(r)) and all(
            _RUNS_ON.search(above.get(c, ".")) and text[:1].islower() for c, text in row.items()
        )
        # set close under its row (the rows' spacing), where a cell that ends in a figure (an amount, a date) is
        # whole: a line under it that starts as its column's cells start is a row (clo_deal_summary's keys)
        wrapped = (
            close(r)
            and len(row) < len(above)
            and not figures
            and not any(
                _NUMBER.match(above.get(c, "").rsplit(" ", 1)[-1]) and _starts_cell(table, c, text)
                for c, text in row.items()
            )
            and (bool(anchors - row.keys()) or not any(_starts_cell(table, c, text) for c, text in row.items()))
        )
        if under and (hangs or continues or wrapped):
            out[-1] = _appended(above, row)
        else:
            out.append(row)
    return out


def _figure(text: str) -> bool:
    # Whether a cell is figures only: a number, an amount, a percentage, or several (an estimate's two standard errors)
    return bool(text.split()) and all(_NUMBER.match(part) for part in text.split())


def _appended(above: dict[int, str], row: dict[int, str]) -> dict[int, str]:
    # A row's cells run on with the next line's, column by column
    return {**above, **{c: f"{above[c]} {text}" if c in above else text for c, text in row.items()}}


def _starts_cell(table: Sequence[dict[int, str]], column: int, text: str) -> bool:
    """Whether `text` starts as most cells of its column start, with a capital or a figure (a name, an amount): a
    line that starts so may be a row's first; one in lowercase, under capitals, runs on."""
    starts = [cell[:1] for row in table[1:] if (cell := row.get(column))]
    capital = sum(1 for ch in starts if ch.isupper() or ch.isdigit())
    return (text[:1].isupper() or text[:1].isdigit()) and 2 * capital > len(starts)

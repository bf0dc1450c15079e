"""Reading order by recursive XY-cut on gutters, with full-width bands for what spans the columns.

`order(boxes)` returns the boxes' indices grouped into leaves (column chunks), leaves in reading order, each leaf's
indices top to bottom. The rules, and why:
- A vertical gutter (an x range no box covers, at least `MIN_GUTTER` wide, inside the region) splits the region
  into columns, read left to right: a two-column page.
- A title, an abstract or a figure that spans both columns closes every gutter. So when no clean gutter exists,
  the x range covered by the fewest boxes is the gutter-to-be and the boxes over it are spanners (at most a third of
  the boxes); the region is cut into horizontal bands at the spanners, each band read in turn, and a band between
  two spanners gets its columns from the first rule. This is XY-cut with full-width bands. Where that range has no
  box wholly on one of its sides, a more covered valley of the coverage is the gutter-to-be if text columns stand
  on both of its sides a clean gap apart (a two-column section under a title and over footnotes that cross its
  gutter, a table under its caption in the right column), on a text layer's lines and on the pixel path's regions
  and OCR'd lines alike.
- A split into columns is kept only where the columns read as text (their lines fill most of the column width);
  short pieces side by side with aligned rows are a table or a form, read row by row instead: a gutter inside a
  table is never a column break. Or where each break between the columns is one of the page's gutters, found from
  its rows before lines were built (`lines.gutters`: a column's lines stand on both sides of it down many rows), as
  on a survey page whose questions wrap to short lines and answer boxes: such columns need not fill their width.

The text path does not run the layout model (layoutmodel.py) to order born-digital pages (issue 34 item 1): on the
corpus's four two-column files, this geometric order reads as many sentences whole as the pixel path (which orders
by the model's regions) or more on three (amt_handbook_sample 27/27 against 24/27, arxiv_2501.00089 66/94 against
62/94, arxiv_2501.01300v2 41/85 against 28/85) and fewer on one, the held-out survey page
table_mislabeled_as_picture (25/31 against 27/31); and the model alone costs 0.17 CPU s a page (median of 12 calls
on 150-DPI renders, one thread, load ~25 on 2 cores), 3-6 times the text path's whole page (0.03-0.07 CPU s), and
loads onnxruntime. Measured with `bench/documents_quality.py --groups born-digital --files amt_handbook
table_mislabeled arxiv --tools modelhost modelhost-pixels`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from modelhost.docengine.types import BBox

#: The narrowest gutter (points) that separates columns: ~2 em of 10 pt type. Word spaces are far narrower.
MIN_GUTTER = 9.0
#: Spanners may be at most this share of a region's boxes; more, and the "gutter" is no gutter (a single column).
MAX_SPANNERS = 0.34
#: A column reads as text when its boxes' median width is at least this share of the column's width.
TEXT_FILL = 0.55
#: A text column's lines are at least this many line heights long (a two-column paper's ~24, a newspaper's ~15, a
#: cover's sidebar of three-word lines ~7); a table's cells of a number or two are 2-4.
COLUMN_MEASURE = 5.0
#: Steps of the coverage count at most (1 point each on real pages).
MAX_STEPS = 4096
#: Recursion bound: real pages need 3-6 levels; a hostile page of boxes must not recurse without end.
MAX_DEPTH = 24


#: A gutter vouches for a column break in a region when it runs down at least this share of the region's height: a
#: gutter beside a few rows of the region says nothing about the rest of it.
GUTTER_COVER = 0.5


def order(boxes: Sequence[BBox], gutters: Sequence[BBox] = (), *, by_line: bool = False) -> list[list[int]]:
    """Indices of `boxes` grouped into leaves in reading order. `gutters` are the page's gutters (x0, y0, x1, y1),
    when known: a column break at one of them is a column break even where the columns do not read as text. With
    `by_line`, the boxes of one line (`_one_line`) are read left to right: a text layer's lines ask for it; the pixel
    path's regions and OCR'd lines are ordered as before, where it was not measured (session 17)."""
    leaves: list[list[int]] = []
    _cut(boxes, list(range(len(boxes))), leaves, 0, gutters, by_line)
    return leaves


#: Two boxes stand on one line where their tops lie within this share of the shorter one's height: pieces of one
#: line of type start at its cap height or its ascenders' (a bold "To:" 0.3 points under its value "All budget
#: holders", 0.04 of their height), where a form's label of two lines beside another field's label stands a third of a
#: line off it (DD Form 293's "3. NAME WHILE" 2.9 points under "LAST", 0.26 of their height).
LINE_TOPS = 0.2
#: ... and neither is more than this many times as tall as the other (ink boxes of one type size differ by their
#: ascenders and descenders, cap height ~0.7 em against ~0.95 em with both): a taller box is a block, not a line.
LINE_HEIGHTS = 2.0


def _top_down(boxes: Sequence[BBox], idx: list[int], by_line: bool = False) -> list[int]:
    """`idx` top to bottom; `by_line`, the boxes of one line left to right (a bold label's ink may start lower than
    its value's on the same baseline: "To:" beside "All budget holders")."""
    ordered = sorted(idx, key=lambda i: (boxes[i][1], boxes[i][0]))
    if not by_line:
        return ordered
    out: list[int] = []
    row: list[int] = []
    for i in ordered:
        if row and not _one_line(boxes[row[0]], boxes[i]):
            out += sorted(row, key=lambda k: boxes[k][0])
            row = []
        row.append(i)
    return out + sorted(row, key=lambda k: boxes[k][0])


def _one_line(a: BBox, b: BBox) -> bool:
    ha, hb = a[3] - a[1], b[3] - b[1]
    short, tall = min(ha, hb), max(ha, hb)
    if short <= 0 or tall > LINE_HEIGHTS * short:
        return False
    return abs(a[1] - b[1]) <= LINE_TOPS * short


def _cut(
    boxes: Sequence[BBox],
    idx: list[int],
    leaves: list[list[int]],
    depth: int,
    gutters: Sequence[BBox] = (),
    by_line: bool = False,
) -> None:
    if len(idx) <= 1 or depth >= MAX_DEPTH:
        if idx:
            leaves.append(_top_down(boxes, idx, by_line))
        return
    columns = _columns(boxes, idx)
    if len(columns) > 1 and (_text_like(boxes, columns) or _at_gutters(boxes, columns, gutters)):
        for column in columns:
            _cut(boxes, column, leaves, depth + 1, gutters, by_line)
        return
    # Some breaks at gutters, others not (a table of contents' titles and page numbers beside an abstract): the
    # columns between two gutters are one, read on its own, its breaks left to the rules above.
    sides = _gutter_sides(boxes, columns, gutters)
    if len(sides) > 1:
        for side in sides:
            _cut(boxes, side, leaves, depth + 1, gutters, by_line)
        return
    bands = _bands(boxes, idx, by_line)
    if len(bands) <= 1:
        bands = _gutter_bands(boxes, idx, gutters)
    if len(bands) > 1:
        for band in bands:
            _cut(boxes, band, leaves, depth + 1, gutters, by_line)
        return
    leaves.append(_top_down(boxes, idx, by_line))


def _gutter_bands(boxes: Sequence[BBox], idx: list[int], gutters: Sequence[BBox]) -> list[list[int]]:
    """The region cut where a gutter begins and ends: what stands above its rows (a title, a table across the
    columns), its rows (the columns, cut apart next), and what stands below. [idx] when no gutter runs inside the
    region with boxes on both of its sides and something above or below it. Tried where the spanners' bands find
    nothing: a table across the page is too many boxes over the gutter to be spanners (MAX_SPANNERS)."""
    best: tuple[float, BBox] | None = None
    for g in gutters:
        middle = (g[0] + g[2]) / 2
        inside = [i for i in idx if g[1] <= (boxes[i][1] + boxes[i][3]) / 2 <= g[3]]
        if not any(boxes[i][2] <= middle for i in inside) or not any(boxes[i][0] >= middle for i in inside):
            continue
        if best is None or g[3] - g[1] > best[0]:
            best = (g[3] - g[1], g)
    if best is None:
        return [idx]
    g = best[1]
    above = [i for i in idx if (boxes[i][1] + boxes[i][3]) / 2 < g[1]]
    below = [i for i in idx if (boxes[i][1] + boxes[i][3]) / 2 > g[3]]
    within = [i for i in idx if g[1] <= (boxes[i][1] + boxes[i][3]) / 2 <= g[3]]
    bands = [band for band in (above, within, below) if band]
    return bands if len(bands) > 1 else [idx]


def _at_gutters(boxes: Sequence[BBox], columns: list[list[int]], gutters: Sequence[BBox]) -> bool:
    """Whether every break between `columns` holds one of `gutters` down GUTTER_COVER of the region's height."""
    if not gutters:
        return False
    top = min(boxes[i][1] for column in columns for i in column)
    bottom = max(boxes[i][3] for column in columns for i in column)
    for left, right in itertools.pairwise(columns):
        a = max(boxes[i][2] for i in left)
        b = min(boxes[i][0] for i in right)
        if not any(
            a - 1 <= (g[0] + g[2]) / 2 <= b + 1 and min(g[3], bottom) - max(g[1], top) >= GUTTER_COVER * (bottom - top)
            for g in gutters
        ):
            return False
    return True


def _gutter_sides(boxes: Sequence[BBox], columns: list[list[int]], gutters: Sequence[BBox]) -> list[list[int]]:
    """`columns` joined across every break that holds none of `gutters` (`_at_gutters`): [all of them] when none
    does."""
    sides = [list(columns[0])] if columns else []
    for left, right in itertools.pairwise(columns):
        if _at_gutters(boxes, [left, right], gutters):
            sides.append(list(right))
        else:
            sides[-1].extend(right)
    return sides


def _gaps(boxes: Sequence[BBox], idx: list[int]) -> list[tuple[float, float]]:
    # The x ranges inside the region that no box covers.
    spans = sorted((boxes[i][0], boxes[i][2]) for i in idx)
    out: list[tuple[float, float]] = []
    end = spans[0][1]
    for x0, x1 in spans[1:]:
        if x0 - end >= MIN_GUTTER:
            out.append((end, x0))
        end = max(end, x1)
    return out


def _columns(boxes: Sequence[BBox], idx: list[int]) -> list[list[int]]:
    gaps = _gaps(boxes, idx)
    if not gaps:
        return [idx]
    edges = [g[0] for g in gaps] + [float("inf")]
    columns: list[list[int]] = [[] for _ in edges]
    for i in idx:
        k = next(n for n, e in enumerate(edges) if boxes[i][2] <= e + 0.01)
        columns[k].append(i)
    return [c for c in columns if c]


def _text_like(boxes: Sequence[BBox], columns: list[list[int]]) -> bool:
    # Columns of running text: each column's boxes mostly fill its width (or it is a lone block such as a figure).
    for column in columns:
        if len(column) < 3:
            continue
        left = min(boxes[i][0] for i in column)
        right = max(boxes[i][2] for i in column)
        widths = sorted(boxes[i][2] - boxes[i][0] for i in column)
        heights = sorted(boxes[i][3] - boxes[i][1] for i in column)
        if widths[len(widths) // 2] < TEXT_FILL * (right - left):
            return False
        if widths[len(widths) // 2] < COLUMN_MEASURE * heights[len(heights) // 2]:
            return False  # a column of cells a word or two wide: a table's, not a text column
    return True


def _bands(boxes: Sequence[BBox], idx: list[int], by_line: bool = False) -> list[list[int]]:
    """The region cut at its spanners: runs of boxes between boxes that cross the would-be gutter."""
    left = min(boxes[i][0] for i in idx)
    right = max(boxes[i][2] for i in idx)
    if right - left < 3 * MIN_GUTTER:
        return [idx]
    # Coverage count over the inner 80% of the region, in 1-point steps (pages are ~600 points wide), at most
    # MAX_STEPS of them: a page that claims to be a million points wide gets coarser steps, not a huge list.
    lo, hi = left + 0.1 * (right - left), right - 0.1 * (right - left)
    steps = max(1, min(int(hi - lo), MAX_STEPS))
    scale = steps / max(hi - lo, 1e-9)  # steps per point
    # (a difference array: one pass over the boxes and one over the steps, whatever the boxes' widths)
    delta = [0] * (steps + 1)
    for i in idx:
        a = max(0, int((boxes[i][0] - lo) * scale))
        b = min(steps, int((boxes[i][2] - lo) * scale) + 1)
        if a < b:
            delta[a] += 1
            delta[b] -= 1
    counts = list(itertools.accumulate(delta[:steps]))
    best = min(counts)
    if best == 0 or best > MAX_SPANNERS * len(idx):
        return [idx]
    # The widest run of minimal coverage is the gutter-to-be; the boxes over its middle are the spanners. A gutter has
    # columns on both sides; a ragged right edge (one long line over short ones) has not, nor the strip beside a
    # caption over a table in the right column (the table and the paragraph under it as wide as the column, the
    # caption shorter), which is less covered than the gutter where a title and footnotes cross the gutter and not
    # the strip: then the valleys of the coverage (runs of steps less covered than the steps on either side) are
    # tried, the least covered first and of those the widest.
    runs: list[tuple[int, int, int]] = []  # (coverage, start, length) of each run of equal coverage
    for n, group in itertools.groupby(enumerate(counts), key=lambda kn: kn[1]):
        steps_in = [k for k, _ in group]
        runs.append((n, steps_in[0], len(steps_in)))
    widest = max((r for r in runs if r[0] == best), key=lambda r: (r[2], -r[1]))[1:]
    if widest[1] / scale < MIN_GUTTER / 2:
        return [idx]
    dips = [
        (n, start, length)
        for r, (n, start, length) in enumerate(runs)
        if (r == 0 or runs[r - 1][0] > n)
        and (r == len(runs) - 1 or runs[r + 1][0] > n)
        and n <= MAX_SPANNERS * len(idx)
        and length / scale >= MIN_GUTTER / 2
    ]
    for n, start, length in sorted(dips, key=lambda v: (v[0], -v[2], v[1])):
        x = lo + (start + length / 2) / scale
        spanners = {i for i in idx if boxes[i][0] <= x <= boxes[i][2]}
        left_side = [i for i in idx if i not in spanners and boxes[i][2] < x]
        right_side = [i for i in idx if i not in spanners and boxes[i][0] > x]
        if not left_side or not right_side:
            continue
        if n == best:
            if start == widest[0]:
                break
            continue  # of the least covered runs only the widest is the gutter-to-be, as it always was
        # A valley more covered than the least: a gutter only where it is one (a clean gap of MIN_GUTTER between
        # the boxes beside it) and text columns stand on both sides of it (`_text_like`, which judges a column of
        # three boxes or more); a ragged single column's short lines and the page's furniture beside them make
        # valleys too (tried without these tests, a held-out group of whole pages lost a tenth of its letters' order).
        gap = min(boxes[i][0] for i in right_side) - max(boxes[i][2] for i in left_side)
        if (
            gap >= MIN_GUTTER
            and min(len(left_side), len(right_side)) >= 3
            and _text_like(boxes, [left_side, right_side])
        ):
            break
    else:
        return [idx]
    bands: list[list[int]] = []
    current: list[int] = []
    for i in _top_down(boxes, idx, by_line):
        if i in spanners:
            if current:
                bands.append(current)
                current = []
            if bands and bands[-1][0] in spanners:
                bands[-1].append(i)
            else:
                bands.append([i])
        else:
            current.append(i)
    if current:
        bands.append(current)
    return bands if len(bands) > 1 else [idx]

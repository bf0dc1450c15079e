"""Ruled tables: the page's ruling lines and the words inside them, into a grid of cells with spans.

How, and why each step:
- Rules are merged first: producers draw one visual rule as many pieces (LaTeX draws each row's `|` separately,
  Word each cell's border), and a gap of a point between pieces is the same rule.
- A table is a connected group of rules (touching within `JOIN` points), or a stack of horizontal rules of the
  same extent (booktabs: `\\toprule`, `\\midrule`, `\\bottomrule`, no verticals). A lone rule (an underline, a
  footnote separator) or a box around one paragraph (1 x 1) is not a table.
- A frame parted from top to bottom by a vertical rule that no rule inside crosses holds panels side by side, each
  ruled on its own (a report's price table beside framed charts): each is a group of its own (`_panels`). A grid
  with a frame of its own inside one of its cells (a chart's axes) is a panel around a figure (`_framing`).
- The grid's row lines are the horizontal rules' y positions; its column lines the vertical rules' x positions.
  Where a table has no interior verticals, columns come from the gaps in the words' x coverage; where its verticals
  part only groups of columns (a statistics table's `GLM | zero-augmented`, a boxed price list's label and figures
  side by side), each band between two verticals is parted further where its words stand in columns
  (`_band_columns`), or, in a dense statistical table whose columns stand a figure's width apart, between columns of
  right-aligned figures (`_aligned_columns`), and a header alone on its line in a band (centred over the band's
  columns) spans them; such a table whose bands hold many lines reads a row a line, but for its header band, where
  column labels wrapped in their columns are one row and the stub's header heads every header row. Where it has no
  interior horizontals, or no verticals at all (booktabs: a midrule under the header, then a band of rows), rows come
  from the text lines (multi-line cells then read as rows: nothing better is known).
- A form's boxes of fields are no table (`_own_rows`): on a text layer, a grid whose rows fill few of its columns,
  each row of boxes parted by column lines of its own, is read as lines, and its labels are no headings
  (`form_fields`).
- Spans: two neighbouring grid slots are one cell when no rule separates them at that point (a header cell drawn
  over three columns). Every slot belongs to exactly one cell, so no cell is ever dropped, and every word goes to
  the cell under its centre.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import re
import statistics
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from modelhost.docengine.lines import lines as text_lines
from modelhost.docengine.partition import Partition
from modelhost.docengine.types import BBox, Cell, Segment, Table, Word

#: Rules (and rule ends) this close (points) touch: pieces of one rule, or a horizontal meeting a vertical.
JOIN = 2.5
#: A break between two pieces of one vertical rule shorter than this (points) holds no row of its own (`_broken`): a
#: line of the smallest type (6 pt) and its leading need more; producers that draw a rule in bars leave 3 points.
BREAK_GAP = 4.0
#: Horizontal rules stacked closer than this (points) with the same extent are one booktabs-style table.
STACK_GAP = 120.0
#: Rules considered at most (grouping compares them pairwise): whatever made the PageContent, a page of a hundred
#: thousand rules must not take minutes. The text layer keeps the same number.
MAX_RULES = 2_000
#: A column gap in a table without vertical rules is at least this wide (points): wider than a word space.
COLUMN_GAP = 6.0
#: Right-aligned figures of one column end within this many points of each other: a font's figures share one width
#: and a typesetter's right tab one x, so only the text layer's rounding (a tenth of a point) and a trailing footnote
#: mark's thin space part them; two columns of a dense statistical table end a column pitch (20 pt and more) apart.
ALIGN_SLACK = 1.0
#: A pair of words a space apart, a column's cell flush right (or centred) beside the next column's cell flush left,
#: parts two columns (`aligned_starts`) where at least this many lines of one stretch set such a pair at the same x:
#: `BAND_ROWS` below, as many as make columns anywhere else; and the pairs are at least `ALIGNED_SHARE` of the
#: stretch's lines (the rest a wrapped cell's second line, a row whose number cell is empty), where a bibliography's
#: or a list's labels stand beside items of several lines each.
ALIGNED_SHARE = 0.5
#: The pairs of `aligned_starts` stand at most this many ems apart: a narrow centred column beside the next leaves
#: an em or so (a glyph centred in a column of 0.8 cm at 8 pt: 1.4 em); wider spaces are column gaps to every finder
#: already, and words two ems apart and more on one line are mostly a page's columns (a gutter), no cells of one row.
ALIGNED_GAP_EM = 2.0
#: A label of a list or of a reference list ("1.", "(a)", "[12]", "iv)"): set flush right before its item's text,
#: as a LaTeX list sets it, one label-space from it; a list, no column (`aligned_starts`).
_LABEL = re.compile(r"^[\[(]?(?:\d{1,3}|[a-zA-Z]|[ivxlcIVXLC]{1,5})[.)\]]$")
#: A figure, an amount or a percentage, with its sign, currency, parentheses for negatives and a footnote mark; a
#: range of two figures ("1.27 - 1.42", a price report's low and high); or a dash standing for none.
FIGURE = re.compile(
    r"^[(\[]?[-+−–]?[$€£¥]?[\d.,\s]*\d[\d.,\s]*(?:%|[kKmMbB]n?)?[)\]]?[*†‡]?$|^[-–—]$|^n/?a$"
    r"|^[$€£¥]?\d[\d.,]* ?[-–] ?[$€£¥]?\d[\d.,]*%?$",
    re.I,
)
#: An inner vertical rule covering less than this share of its table's height is a rule between column labels only
#: (`_short_verticals`): a tax table's labels' box is 25 pt of a 520 pt table (0.05); a column rule broken at every
#: group row still covers 0.9 of it, and a header's rule over a two-row body (a third of a small table) stays a rule.
SHORT_RULE = 0.25
#: Text lines of a band between two vertical rules that must stand apart at a gap for it to part the band into
#: columns (`_band_columns`): two lines side by side are a label and its value; three make columns, as
#: `unruled.MIN_ROWS` asks of a table without rules.
BAND_ROWS = 3
#: A table's first column holds fewer words than this on most lines (`_bracketed`): labels and names; a column of
#: prose holds 8-12 words a line (`unruled.PROSE_WORDS` asks the same of a table's columns).
LABEL_WORDS = 5
#: At least this share of a table's cells hold text: a diagram of boxes and arrows has mostly empty "cells".
MIN_FILLED = 0.4
#: A cell with more words than this is running text in a frame (a cover, a sidebar), not a table cell, unless
#: two rows' worth of other cells hold text beside it: a long description in a grid of short cells is a cell
#: (tables_dev/gnis_file_formats: 109 words beside 25 short cells).
MAX_CELL_WORDS = 80
#: A ruled grid whose rows hold, on average, fewer cells than this share of its columns, each row's boxes parted by
#: rules of their own (`FORM_SHARE`), is a form's boxes of fields, not a table: its columns are the union of every
#: row's lines, each box spans many of them, and its text was written once per spanned column. Measured on text-layer
#: grids: tables_dev's and the docling pages' tables fill 0.69-1.0 of their columns a row (a title row spanning the
#: grid, a span or two below it); the boxes of US federal forms (pikepdf's DD 293 and VA 21-0966) 0.12-0.22. Fill alone
#: also takes a table whose columns its words part (`_band_columns`: a scanned report grid, 0.23), hence the rules.
FORM_FILL = 0.4
#: A form's grid has at least this many bands of boxes between its horizontal rules: a small grid of spans (a
#: two-row heading box) stays a table.
FORM_ROWS = 4
#: The inner column lines of a form's grid run, the median one, through fewer than this share of its bands: each row
#: of boxes draws lines of its own where its fields end (VA 21-0966: 2 of 16 bands, DD 293: 1 or 2 of 39), where a
#: table's column lines run through its rows, whole or drawn in pieces at one x (tables_dev's grids 0.67-1.0, the
#: pixels' rules of the scanned USDA grid 1.0). An IRS tax table's label boxes cross 1 of 9 bands, but its rows fill
#: its columns (0.96): both tests together make a form.
FORM_SHARE = 0.5
#: A form's field leaves room below its label for the value: at least this many times the label's own height (a
#: field's box is a label line over one or two lines of entry or its options; a band's title fills its band but for
#: its padding).
FIELD_ROOM = 1.0
#: A form's label starts within this many of its line's heights of its box's left edge: forms inset a label by a
#: few points (2-3 points before 7-point labels on the VA and DD forms), where a title centred in a box wider than
#: it starts further in.
FIELD_INSET = 1.5
#: A grid line within this distance (points) of another is the same line (double rules, rounding).
LINE_MERGE = 2.0
#: Parallel rules whose drawn edges stand this close (points) may draw one border: the facing borders of two cells
#: an HTML table's cellspacing sets apart (a web page printed to PDF boxes each cell on its own, 3 points from the
#: next: tables_dev/gnis_file_formats' grid was read as no table at all; `_facing`), and a grid's outer border around
#: its cells' own (`_thin`). No line of text fits between them: the smallest type on the corpus is 5 points tall.
FACING_GAP = 4.0
#: Vertical borders breaking at one height that make a row rule (`border_breaks`): a table's left and right edges and
#: at least one column border between them; two breaks together are as likely a box's corner.
BREAK_COLUMNS = 3
#: A border piece meeting a break is at least this many text lines tall (`border_breaks`): a row holds a line of text
#: and its padding, while dashes (a few points each) are shorter than one line.
BREAK_PIECE = 1.0
#: A word taller than this many text lines cuts no row (`border_breaks`): a heading is at most two or three body lines
#: tall, a diagonal watermark's box spans the page.
BREAK_TALL = 3.0
#: Text lines in one slot of a ruled grid, beside another slot holding as many, that make its band of rows loose
#: (`FoundTable.loose`): three lines side by side are rows, as `unruled.MIN_ROWS` asks of a table without rules.
LOOSE_LINES = 3

#: Cuts of a frame into panels side by side (`_panels`): a report's page frame holds two or three columns of panels;
#: a hostile page of many full-height rules must not recurse without bound.
MAX_PANEL_DEPTH = 4

#: A frame of rules inside a table's cell makes the table a panel around a figure (`_framing`) from this height and
#: width (points): a chart's plot area is an inch or more on a side; a checkbox or a small box drawn around a
#: cell's word (a few points) is the cell's own.
FRAMED_HEIGHT = 36.0

#: Marks a dotted rule is drawn in (`dotted_rules`): each shorter than a rule (`textlayer.MIN_RULE_LENGTH`, 4 points)
#: and so no rule on its own. A run holds this many marks at least: two dots side by side are a colon or a marker's
#: pair; a dotted rule along one row of 10-point type holds four 2.5-point marks.
DOT_RUN = 3
#: Marks of one dotted rule stand this close (points) along it at most: a dotted or dashed rule's gaps are a dot's
#: length or so (an Italian ministry's grid (iText): 1.9-point dashes 0.6 apart; round dots a point or two), while
#: no word fits between (a letter is 3 points wide at least in 6-point type).
DOT_GAP = 3.0
#: Marks of one dotted rule are drawn alike: their thickness across the rule, and the gaps between them along it,
#: differ by at most this many points (a producer repeats one mark at one pitch; a chart's scattered markers or a
#: glyph's pieces keep no pitch). Rounding of the page's coordinates moves them by a few hundredths.
DOT_SLACK = 0.3

#: Ruled blocks of one table set apart by a blank band at most this tall (points) are one table (`_blocks`): a report
#: sets each group's rows in a block of its own under the one header, a blank row apart (an Italian ministry's
#: municipalities by province: 9.4 points); two lines of body type. Blocks further apart are tables of their own.
BLOCK_GAP = 20.0
#: The most one row ruled on its own spans: three lines of 10-point type at 1.3 times their size apart, and its
#: padding. Rules of a stack this close are one table's rows; a rule beside them in between is no part of it.
ROW_REACH = 40.0

#: Two words of one line whose boxes meet within this many ems of the smaller's size are one word in a cell's text
#: (`_line_text`): glyph boxes of neighbouring letters meet exactly (a subscript set against its letter, a face
#: changing mid-word), where a thin space is 0.17 em and a word space 0.25 em or more.
TOUCH_EM = 0.1
#: A word set this share smaller than its neighbour is set in another size (`_line_text`): a subscript or an
#: exponent is 60-75% of its letter's size; one font's sizes round apart by a few hundredths.
SIZE_STEP = 0.1
#: A row of one cell across a whole grid, set this much larger than the grid's other cells and the page's text, is
#: the sheet's title (`_edge_rows`): a spreadsheet's title merged across the sheet is set at 14 points over 10 or 11
#: (x1.27 to 1.4), a word processor's heading 16 over 11; a title row set in the page's prose size over smaller
#: cells (ReportLab's `canvas.acroform.radio parameters`, 10 points over 7 and 8, beside 10-point prose) stays the
#: table's.
TITLE_SIZE = 1.15
#: A row of one cell across a grid's foot set at most this share of its cells' size is a note under it (`_note`): a
#: sheet's notes a point under its figures (9 over 10 points, 0.9, the edge of `SIZE_STEP`); one font's sizes round
#: apart by a few hundredths.
NOTE_SIZE = 0.95

#: Trailing leader dots of a word or a cell ("offenses......", "Total . . ."): three or more (an ellipsis is three),
#: full stops, middle dots or ellipses (`classify.LEADER_DOTS`'s characters).
LEADER_TAIL = re.compile(r"(?:[.·…]\s*){3,}$")
#: Leader dots ending a cell's text: four or more, so that an ellipsis ("and so on...") stays the text's.
_LEADERS = re.compile(r"(?:[.·…]\s*){4,}$")
#: Leading leader dots, touching the figure they lead to ("......204.5"): three or more.
_LEADER_HEAD = re.compile(r"^(?:[.·…]\s*){3,}")
#: A word of dots alone is a leader from this many dots (a run of ". . ." arrives as one-dot words only when the
#: producer spaces them widely; one dot alone stays a word, as "." for "not available" in some statistics).
LEADER_DOTS = 2
#: A cell's text runs on into the cell below when it ends without a sentence's end and the next starts in lowercase.
_RUNS_ON = re.compile(r"[^.!?:;]$")


@dataclass(frozen=True, slots=True)
class FoundTable:
    """A table found on the page: its box, its grid, and which words it took (indices into the page's words).
    `open` when no vertical rule bounds its cells (booktabs' rules, or rules under some columns only); `loose` when
    its rules part groups of columns and bands of rows only, some cell holding `LOOSE_LINES` lines or more beside
    another that does too (a statistical table ruled between its column groups and under its header: each band
    holds many rows, each group several columns), so that a reading from the words' own rows and columns may
    part it further (`unruled.widened`). `boxed` when its only vertical rules are a box's sides, each its full height
    (a report's frame around a price table ruled under its header and groups): a line outside the box is no row of
    it (`_outer_lines`). `rows`: each word the ruled finder placed in a cell (`_table`, `_with_rows`) with that cell's
    row (its first where it spans rows), as (word index, row) pairs; empty for a table read otherwise."""

    bbox: BBox
    table: Table
    words: frozenset[int]
    open: bool = False
    loose: bool = False
    boxed: bool = False
    rows: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class FormGrid:
    """A grid of a form's boxes of fields (`_own_rows`): its box, its bands' edges (`ys`, top first), each band's
    column lines (its box's edges and the rules across its middle), and its horizontal rules (where a box closes at a
    band's top), as `_own_rows` measured them; `form_fields` makes the field boxes from it."""

    box: BBox
    ys: list[float]
    lines_x: list[list[float]]
    horizontals: list[Segment]


def dotted_rules(marks: Sequence[BBox]) -> tuple[list[Segment], list[BBox]]:
    """Rules drawn as rows of marks (dots or short dashes, each too short to be a rule: `DOT_RUN`), and the marks
    left over. A run is `DOT_RUN` marks or more of one thickness (`DOT_SLACK`) centred on one line, each within
    `DOT_GAP` of the next, at one pitch (their inner gaps within `DOT_SLACK` of each other; the run's end marks may be
    cut short, so the gaps to them may differ), at least as long as its marks are thick: a grid whose every rule is
    dotted (a ministry's table of municipalities, iText: 7,000 dashes of 1.9 points) was read as no table, its
    dashes as a drawing over the words. A mark takes part in one rule at most, horizontal runs first."""
    used: set[int] = set()
    out: list[Segment] = []
    for horizontal in (True, False):
        # each mark as (across: its middle across the line, start, end along it, thickness, index)
        keyed = sorted(
            ((y0 + y1) / 2, x0, x1, y1 - y0, i) if horizontal else ((x0 + x1) / 2, y0, y1, x1 - x0, i)
            for i, (x0, y0, x1, y1) in enumerate(marks)
            if i not in used
        )
        # marks on one line (their centres within DOT_SLACK, chained), then each line's marks along it
        on_line: list[list[tuple[float, float, float, float, int]]] = []
        for item in keyed:
            if on_line and item[0] - on_line[-1][-1][0] <= DOT_SLACK:
                on_line[-1].append(item)
            else:
                on_line.append([item])
        lines: list[list[tuple[float, float, float, float, int]]] = []
        for line in on_line:
            runs: list[list[tuple[float, float, float, float, int]]] = []
            for item in sorted(line, key=lambda m: m[1]):
                # a mark goes on the run of its own thickness that it follows within DOT_GAP (a crossing rule's
                # marks, drawn thick across this line, stand among them)
                for run in reversed(runs[-8:]):
                    last = run[-1]
                    if abs(last[3] - item[3]) <= DOT_SLACK and -DOT_SLACK <= item[1] - last[2] <= DOT_GAP:
                        run.append(item)
                        break
                else:
                    runs.append([item])
            lines += runs
        for run in (piece for line in lines for piece in _pitched(line)):
            if len(run) < DOT_RUN:
                continue
            across = sum(m[0] for m in run) / len(run)
            start, end, width = run[0][1], run[-1][2], max(m[3] for m in run)
            if end - start < 3 * width:
                continue  # a stack of dashes across: a block, no line
            used.update(m[4] for m in run)
            if horizontal:
                out.append(Segment(start, across, end, across, width))
            else:
                out.append(Segment(across, start, across, end, width))
    return out, [m for i, m in enumerate(marks) if i not in used]


def _pitched(run: list[tuple[float, float, float, float, int]]) -> list[list[tuple[float, float, float, float, int]]]:
    """A run of marks (`dotted_rules`: across, start, end, thickness, index) cut where a gap differs from the run's
    usual one (its median) by more than `DOT_SLACK`: a producer that starts the pattern again at each cell leaves
    one odd gap there, and marks of no pitch fall apart into runs too short to be rules."""
    if len(run) < DOT_RUN:
        return [run]
    gaps = [b[1] - a[2] for a, b in itertools.pairwise(run)]
    usual = sorted(gaps)[len(gaps) // 2]
    out = [[run[0]]]
    for gap, mark in zip(gaps, run[1:], strict=True):
        if abs(gap - usual) > DOT_SLACK:
            out.append([])
        out[-1].append(mark)
    return out


def merge_rules(rules: Sequence[Segment]) -> list[Segment]:
    """Collinear rule pieces joined into whole rules, cells' facing borders first drawn as one (`_facing`); a
    vertical rule's pieces also across a break under `BREAK_GAP` that no horizontal rule ends in or crosses
    (`_broken`)."""
    out: list[Segment] = []
    rows = sorted((s.y0, s.x0, s.x1) for s in rules if s.horizontal)
    for horizontal in (True, False):
        group = _facing(
            [s for s in rules if s.horizontal == horizontal], [s for s in rules if s.horizontal != horizontal]
        )
        # along = position along the rule, across = its coordinate
        keyed = sorted(
            ((s.y0, s.x0, s.x1, s.width) if horizontal else (s.x0, s.y0, s.y1, s.width) for s in group),
        )
        # pieces on one line (within LINE_MERGE / 2 of its first), then each line's pieces along it: sorted on their
        # coordinate alone, a line's pieces drawn a hundred-thousandth of a point apart (a rule and the dots
        # `dotted_rules` joined, whose middle is computed) came in no order along it, and a piece joined one it
        # does not reach
        on_line: list[list[tuple[float, float, float, float]]] = []
        for item in keyed:
            if on_line and item[0] - on_line[-1][0][0] <= LINE_MERGE / 2:
                on_line[-1].append(item)
            else:
                on_line.append([item])
        merged: list[list[float]] = []
        for line in on_line:
            first = len(merged)
            for across, start, end, width in sorted(line, key=lambda k: k[1]):
                m = merged[-1] if len(merged) > first else None
                if m is not None and (start <= m[2] + JOIN or (not horizontal and _broken(across, m[2], start, rows))):
                    m[2] = max(m[2], end)
                else:
                    merged.append([across, start, end, width])
        for across, start, end, width in merged:
            if horizontal:
                out.append(Segment(start, across, end, across, width))
            else:
                out.append(Segment(across, start, across, end, width))
    return out


def _broken(x: float, end: float, start: float, rows: list[tuple[float, float, float]]) -> bool:
    """Whether a vertical rule at `x` whose piece ends at `end` goes on in the next piece, starting at `start`: a
    break under `BREAK_GAP` that no horizontal rule (`rows`: their heights and extents, sorted) ends in or crosses
    within `JOIN`. The IRS's tax tables draw each rule as bars that leave a 3-point break where a block of rows ends;
    the table was cut in two there."""
    if start - end > BREAK_GAP:
        return False
    k = bisect.bisect_left(rows, (end - JOIN, float("-inf"), float("-inf")))
    for y, x0, x1 in rows[k:]:
        if y > start + JOIN:
            break
        if x0 - JOIN <= x <= x1 + JOIN:
            return False
    return True


def _facing(rules: list[Segment], across: list[Segment]) -> list[Segment]:
    """Cells' facing borders, one orientation, moved onto the line between them: rules whose drawn edges stand
    within `FACING_GAP` of each other and that run the same extent (within JOIN at both ends: the borders of two cells
    of one row, or of one column, face each other whole), each ending on a rule `across` it at both ends (a cell's
    side meets its neighbours at its corners, where an arrow between a figure's boxes does not), where a run holds
    two such pairs at least (a border facing along two cells: two lone boxes side by side face once and stay two
    boxes). A table's border beside another box's (different extents) stays where it is."""
    if not rules:
        return []
    horizontal = rules[0].horizontal
    cornered = _cornered(rules, across)

    def at(s: Segment) -> float:
        return s.y0 if horizontal else s.x0

    def extent(s: Segment) -> tuple[float, float]:
        return (s.x0, s.x1) if horizontal else (s.y0, s.y1)

    # A band painted wider than FACING_GAP (a figure's panel read as a rule) is no border facing another; nor is a
    # piece shorter than two of them (a drawing's dashes and ticks), where a cell's side holds a line of text.
    def side(s: Segment) -> bool:
        return s.width <= FACING_GAP and extent(s)[1] - extent(s)[0] >= 2 * FACING_GAP

    out = [s for s in rules if not side(s)]
    ordered = sorted(filter(side, rules), key=at)
    i = 0
    while i < len(ordered):
        # a run: each rule's near edge within FACING_GAP of the run's far edge; no text line fits in any of its gaps
        far = at(ordered[i]) + ordered[i].width / 2
        j = i + 1
        while j < len(ordered) and at(ordered[j]) - ordered[j].width / 2 - far <= FACING_GAP:
            far = max(far, at(ordered[j]) + ordered[j].width / 2)
            j += 1
        run, i = ordered[i:j], j
        by_extent = sorted(run, key=extent)
        facing: set[int] = set()
        cells: set[tuple[int, int]] = set()  # the extents faced along (a rule drawn twice faces once)
        for a, b in itertools.pairwise(range(len(by_extent))):
            s, t = by_extent[a], by_extent[b]
            same = abs(extent(s)[0] - extent(t)[0]) <= JOIN and abs(extent(s)[1] - extent(t)[1]) <= JOIN
            if same and abs(at(s) - at(t)) > LINE_MERGE / 2 and s in cornered and t in cornered:
                facing |= {a, b}
                cells.add((round(extent(s)[0] / JOIN), round(extent(s)[1] / JOIN)))
        if len(cells) < 2:
            out.extend(run)
            continue
        moved = [by_extent[k] for k in sorted(facing)]
        middle = (min(map(at, moved)) + max(map(at, moved))) / 2
        for k, s in enumerate(by_extent):
            if k not in facing:
                out.append(s)
            elif horizontal:
                out.append(Segment(s.x0, middle, s.x1, middle, s.width))
            else:
                out.append(Segment(middle, s.y0, middle, s.y1, s.width))
    return out


def _cornered(rules: list[Segment], across: list[Segment]) -> set[Segment]:
    """The rules of `rules` that end on a rule of `across` (perpendicular to them) at both ends, within JOIN."""
    if not rules or not across:
        return set()
    horizontal = rules[0].horizontal
    # the perpendicular rules by their coordinate, each with its extent
    ends = sorted((s.x0, s.y0, s.y1) if horizontal else (s.y0, s.x0, s.x1) for s in across)
    keys = [e[0] for e in ends]

    def meets(at: float, level: float) -> bool:
        lo, hi = bisect.bisect_left(keys, at - JOIN), bisect.bisect_right(keys, at + JOIN)
        return any(start - JOIN <= level <= stop + JOIN for _, start, stop in ends[lo:hi])

    out = set()
    for s in rules:
        start, stop, level = (s.x0, s.x1, s.y0) if horizontal else (s.y0, s.y1, s.x0)
        if meets(start, level) and meets(stop, level):
            out.add(s)
    return out


def _thin(lines: list[float], words: Sequence[Word], horizontal: bool) -> list[float]:
    """Grid lines without the second of two within `FACING_GAP` of each other that hold no word between them: a
    grid's outer border drawn around its cells' own borders bounds no row (or column) of its own (a printed web
    page's table, booktabs' boxed grid of double rules). The last line (the table's edge) stays, the one before it
    goes."""

    def centre(w: Word) -> float:
        return (w.y0 + w.y1) / 2 if horizontal else (w.x0 + w.x1) / 2

    centres = sorted(centre(w) for w in words)
    out: list[float] = []
    for k, v in enumerate(lines):
        if out and v - out[-1] <= FACING_GAP:
            lo = bisect.bisect_right(centres, out[-1])
            if lo == len(centres) or centres[lo] >= v:  # nothing between them
                if k == len(lines) - 1:
                    out[-1] = v
                continue
        out.append(v)
    return out


def _touch(a: Segment, b: Segment) -> bool:
    return a.x0 - JOIN <= b.x1 and b.x0 - JOIN <= a.x1 and a.y0 - JOIN <= b.y1 and b.y0 - JOIN <= a.y1


def _groups(rules: list[Segment]) -> list[list[Segment]]:
    """Connected groups of touching rules; then groups of horizontal rules only, of the same extent and stacked
    within `STACK_GAP`, joined (booktabs draws no verticals), with a narrower lone rule inside a stack's extent
    joined where the stack goes on below it (a `\\cmidrule` between the top rule and the midrule). A framed box below
    a ruled table is never joined to it: only rule-only-horizontal groups stack."""
    partition = Partition(len(rules))
    for i, a in enumerate(rules):
        for j in range(i + 1, len(rules)):
            if _touch(a, rules[j]):
                partition.join(i, j)
    touching = [[rules[i] for i in group] for group in partition.groups()]
    flat = _broken_rows(sorted((g for g in touching if all(s.horizontal for s in g)), key=lambda g: g[0].y0))
    out = [g for g in touching if not all(s.horizontal for s in g)]
    pending: list[list[Segment]] = []  # narrower rules under the last stack's rule, waiting for its next one
    for group in flat:
        rule = Segment(min(s.x0 for s in group), group[0].y0, max(s.x1 for s in group), group[0].y0, group[0].width)
        last = out[-1] if out and all(s.horizontal for s in out[-1]) else None
        # the last stack under the rule's span, its last rule within a row's reach (`ROW_REACH`) above: a rule
        # beside it (a link's underline in the next column of an InDesign page) neither joins nor breaks a table
        # ruled under every row (each one there cut a report's table into loose rows); further apart, another
        # table's rules beside it still part two of its rules (a deal summary's panels side by side)
        under = next((g for g in reversed(out) if all(s.horizontal for s in g) and _spans_over(g, rule)), None)
        if under is not None and 0 <= rule.y0 - max(s.y0 for s in under) <= ROW_REACH:
            last = under
        # the stack's last rule of its full extent: a `\\cmidrule` between two of them does not break the stack
        prev = max(last, key=lambda s: (s.x1 - s.x0 >= _extent(last) - 2 * JOIN, s.y0)) if last else None
        if (
            last is not None
            and prev is not None
            and abs(rule.x0 - prev.x0) <= 3 * JOIN
            and abs(rule.x1 - prev.x1) <= 3 * JOIN
            and 0 <= rule.y0 - prev.y0 <= STACK_GAP
        ):
            last.extend([s for g in pending for s in g])
            last.extend(group)
            pending = []
        elif (
            last is not None
            and prev is not None
            and len(group) == 1
            and prev.x0 - JOIN <= rule.x0
            and rule.x1 <= prev.x1 + JOIN
            and 0 <= rule.y0 - prev.y0 <= STACK_GAP
        ):
            pending.append(list(group))
        else:
            out.extend(pending)
            pending = []
            out.append(list(group))
    out.extend(pending)
    return out


def _spans_over(group: Sequence[Segment], rule: Segment) -> bool:
    """Whether the rule's x span overlaps the group's."""
    return rule.x0 < max(s.x1 for s in group) and min(s.x0 for s in group) < rule.x1


def _blocks(groups: list[list[Segment]], words: Sequence[Word]) -> list[list[Segment]]:
    """Groups of rules that are blocks of one table, joined: a grid under another within `BLOCK_GAP`, inside its
    width, whose every vertical rule stands on a column line of the upper one (within `LINE_MERGE`) and that lacks
    some of them, with no word in the blank band between them. A report sets each province's rows in a
    block of their own under the one header, and its total row in a band of its own; read apart, the header stayed
    with the first block only and a one-row band made no table (a row is no table), its cells loose text."""
    out: list[list[Segment]] = []
    for group in sorted(groups, key=lambda g: _box(g)[1]):
        upper = next((g for g in reversed(out) if block_of(g, group, words)), None)
        if upper is None:
            out.append(list(group))
        else:
            upper.extend(group)
    return out


def block_of(upper: list[Segment], lower: list[Segment], words: Sequence[Word]) -> bool:
    """Whether the grid `lower` is a block of the grid `upper` (`_blocks`)."""
    top_box, low_box = _box(upper), _box(lower)
    lines = _lines([s.x0 for s in upper if not s.horizontal])
    own = _lines([s.x0 for s in lower if not s.horizontal])
    if len(lines) < 3 or len(own) < 3 or not 0.0 <= low_box[1] - top_box[3] <= BLOCK_GAP:
        return False
    if low_box[0] < top_box[0] - LINE_MERGE or low_box[2] > top_box[2] + LINE_MERGE:
        return False
    if not all(any(abs(x - line) <= LINE_MERGE for line in lines) for x in own):
        return False
    # a grid of the same columns is a table of its own (a table split and each part boxed again, its header row too:
    # tables_dev/reportlab_userguide_p88); a block without some of the upper's column lines (a group's label
    # column, or labels spanning columns: a total's band) reads only under the upper's header
    if len(own) >= len(lines):
        return False
    band = (low_box[0], top_box[3], low_box[2], low_box[1])
    return not any(band[0] <= (w.x0 + w.x1) / 2 <= band[2] and band[1] < (w.y0 + w.y1) / 2 < band[3] for w in words)


def _broken_rows(flat: list[list[Segment]]) -> list[list[Segment]]:
    """Groups of horizontal rules only (sorted by height) with the pieces of one row rule joined: pieces at one
    height whose span another rule within `STACK_GAP` runs, end to end (`JOIN`), are one rule broken where a column goes
    unruled (a bank's statement rules its rows but for one column of rates), read as the whole rule: no rule under
    some columns only (a `\\cmidrule` under a spanning header), and stacked as the whole rule is. Two
    tables side by side, each ruled on its own at the same heights, have no rule across both and stay apart."""
    out: list[list[Segment]] = []
    for group in flat:
        if out and abs(out[-1][0].y0 - group[0].y0) <= LINE_MERGE:
            line = [*out[-1], *group]
            x0, x1 = min(s.x0 for s in line), max(s.x1 for s in line)
            if any(
                abs(r.x0 - x0) <= JOIN and abs(r.x1 - x1) <= JOIN and 0 < abs(r.y0 - line[0].y0) <= STACK_GAP
                for g in flat
                for r in g
            ):
                out[-1] = [Segment(x0, line[0].y0, x1, line[0].y0, max(s.width for s in line))]
                continue
        out.append(list(group))
    return out


def _panels(group: list[Segment], depth: int = 0) -> list[list[Segment]]:
    """A frame of rules parted into the panels its full-height vertical rules set side by side, each a group of its
    own; any other group as it is. A report's page frame holding a price table beside a column of framed charts is
    one connected group of rules (the charts' frames and the table's link underlines touch the rule between them),
    but it is no table of two bands: each side is ruled on its own, at heights of its own. A vertical rule parts
    panels where it runs the frame's full height, both sides hold horizontal rules inside the frame, none crosses it,
    and no two of them stand at one height on either side (a table's row rules cross its column rules, or stand in
    line across them where a producer draws each cell's border apart). At most `MAX_PANEL_DEPTH` cuts deep."""
    horizontals = [s for s in group if s.horizontal]
    verticals = [s for s in group if not s.horizontal]
    if depth >= MAX_PANEL_DEPTH or not horizontals or len(verticals) < 3:
        return [group]
    x0, y0, x1, y1 = _box(group)
    inner = [h for h in horizontals if y0 + LINE_MERGE < h.y0 < y1 - LINE_MERGE]
    for cut in [*sorted(verticals, key=lambda s: s.x0), *_gaps(verticals, y1 - y0)]:
        x = cut.x0
        if not (x0 + JOIN < x < x1 - JOIN) or cut.y0 > y0 + 2 * JOIN or cut.y1 < y1 - 2 * JOIN:
            continue
        left = [h for h in inner if h.x1 <= x + JOIN]
        right = [h for h in inner if h.x0 >= x - JOIN]
        if not left or not right or len(left) + len(right) < len(inner):
            continue  # a rule inside the frame crosses it: a table's row rule over its column rule
        if cut.width >= 0 and any(abs(a.y0 - b.y0) <= LINE_MERGE for a in left for b in right):
            continue  # row rules in line on both sides of a rule: one table's rows, drawn cell by cell
        parts: list[list[Segment]] = [[], []]
        for s in group:
            if s is cut:
                parts[0].append(s)
                parts[1].append(s)
            elif s.horizontal and s.x0 < x - JOIN and s.x1 > x + JOIN:  # the frame's top or bottom: both sides'
                # (across a gap, each side's piece ends at that side's own rule)
                a = max((v.x0 for v in verticals if v.x0 < x), default=x) if cut.width < 0 else x
                b = min((v.x0 for v in verticals if v.x0 > x), default=x) if cut.width < 0 else x
                parts[0].append(Segment(s.x0, s.y0, a, s.y1, s.width))
                parts[1].append(Segment(b, s.y0, s.x1, s.y1, s.width))
            else:
                parts[0 if (s.x0 + s.x1) / 2 < x else 1].append(s)
        return [p for part in parts for sub in _groups(part) for p in _panels(sub, depth + 1)]
    return [group]


def _gaps(verticals: Sequence[Segment], height: float) -> list[Segment]:
    """Cuts (`_panels`) down the middle of each gap at least `COLUMN_GAP` wide between two vertical rules that each
    cover most of the frame's height (`SHORT_RULE` from the top: a column rule broken at group rows covers 0.9 of
    it), no vertical rule inside: two tables set side by side, each boxed by its own rules, under one rule across both
    (the IRS's tax tables). Each is a segment of no width, the frame's height, so that `_panels` tells it from a
    rule: row rules in line on both sides of a gap are two tables' rows typeset alike, not one table's cells."""
    covered: dict[float, float] = {}
    for s in verticals:
        x = next((k for k in covered if abs(k - s.x0) <= LINE_MERGE), s.x0)
        covered[x] = covered.get(x, 0.0) + s.y1 - s.y0
    tall = sorted(x for x, length in covered.items() if length >= (1 - SHORT_RULE) * height)
    xs = sorted(covered)
    top, bottom = min(s.y0 for s in verticals), max(s.y1 for s in verticals)
    return [
        Segment((a + b) / 2, top, (a + b) / 2, bottom, -1.0)
        for a, b in itertools.pairwise(tall)
        if b - a >= COLUMN_GAP and not any(a < x < b for x in xs)
    ]


def _box(group: Sequence[Segment]) -> BBox:
    return (min(s.x0 for s in group), min(s.y0 for s in group), max(s.x1 for s in group), max(s.y1 for s in group))


def _closed(group: Sequence[Segment]) -> bool:
    """Whether a group of rules closes a frame: horizontal and vertical rules that touch."""
    return any(s.horizontal for s in group) and any(not s.horizontal for s in group)


def _framing(found: FoundTable, frames: Sequence[BBox]) -> bool:
    """Whether a cell of the table holds a frame of rules of its own (horizontal and vertical rules meeting: a chart's
    axes and grid lines, a plot's box), `FRAMED_HEIGHT` or more on each side: the "table" is a panel
    drawn around a figure, its "cells" the figure's title, tick labels and legend."""
    for cell in found.table.cells:
        if cell.bbox is None:
            continue
        x0, y0, x1, y1 = cell.bbox
        for f in frames:
            inside = x0 - JOIN <= f[0] and f[2] <= x1 + JOIN and y0 - JOIN <= f[1] and f[3] <= y1 + JOIN
            if inside and f != found.bbox and f[3] - f[1] >= FRAMED_HEIGHT and f[2] - f[0] >= FRAMED_HEIGHT:
                return True
    return False


def _extent(rules: Sequence[Segment]) -> float:
    return max(s.x1 for s in rules) - min(s.x0 for s in rules)


def _unstacked(groups: list[list[Segment]], words: Sequence[Word]) -> list[list[Segment]]:
    """`groups` with each stack of horizontal rules cut between two of its rules where a line of words between them
    reaches beyond the stack's extent (by more than `COLUMN_GAP`): a paragraph between two booktabs tables set
    closer than `STACK_GAP`, whose bottom and top rules would otherwise stack them into one."""
    out: list[list[Segment]] = []
    for group in groups:
        if len(group) < 2 or not all(s.horizontal for s in group):
            out.append(group)
            continue
        x0, x1 = min(s.x0 for s in group), max(s.x1 for s in group)
        ordered = sorted(group, key=lambda s: s.y0)
        ys = sorted({round(s.y0, 1) for s in ordered})
        near = [w for w in words if w.rotation == 0 and ys[0] < (w.y0 + w.y1) / 2 < ys[-1]]
        cuts = []
        for line in text_lines(near):
            # a piece of the line (its words closer than a column gap) over the stack that runs out past it; a
            # column of prose beside the table stands a gutter away, a piece of its own (an InDesign report's
            # table beside its text column: each of its lines cut the stack, its rows left loose)
            if any(a < x1 and b > x0 and (a < x0 - COLUMN_GAP or b > x1 + COLUMN_GAP) for a, b in _pieces(line)):
                cuts.append((line[0].y0 + line[0].y1) / 2)
        part: list[Segment] = []
        for rule in ordered:
            if part and any(part[-1].y0 < y < rule.y0 for y in cuts):
                out.append(part)
                part = []
            part.append(rule)
        out.append(part)
    return out


def _bracketed(groups: list[list[Segment]], words: Sequence[Word]) -> list[list[Segment]]:
    """`groups` with a booktabs head (two rules of one extent, a header row between them: `\\toprule`, `\\midrule`)
    joined to the lone rule of the same extent that closes its body further down than `STACK_GAP` (`\\bottomrule`
    under a long table), where the lines between stand in columns: a column gap (`COLUMN_GAP`) that every line
    leaves open, a first column of short cells (a label, a name: under `LABEL_WORDS` words on most lines) and
    `BAND_ROWS` lines or more. Two columns of prose under a rule keep a gutter open too, but their first column is
    running text."""
    out: list[list[Segment]] = []
    skip: set[int] = set()
    for k, group in enumerate(groups):
        if k in skip:
            continue
        head = sorted(group, key=lambda s: s.y0)
        if len(head) == 2 and all(s.horizontal for s in head) and head[1].y0 - head[0].y0 <= STACK_GAP / 2:
            mid = head[1]
            below = [
                (j, g[0])
                for j, g in enumerate(groups)
                if j != k
                and len(g) == 1
                and g[0].horizontal
                and g[0].y0 - mid.y0 > STACK_GAP
                and abs(g[0].x0 - mid.x0) <= 3 * JOIN
                and abs(g[0].x1 - mid.x1) <= 3 * JOIN
            ]
            if below:
                j, bottom = min(below, key=lambda jb: jb[1].y0)
                body = [
                    w
                    for w in words
                    if w.rotation == 0
                    and mid.x0 - JOIN <= w.x0
                    and w.x1 <= mid.x1 + JOIN
                    and mid.y0 < (w.y0 + w.y1) / 2 < bottom.y0
                ]
                rows = text_lines(body)
                xs = _word_columns(body, (mid.x0, mid.y0, mid.x1, bottom.y0)) if body else []
                if len(rows) >= BAND_ROWS and len(xs) > 2:
                    first = [sum(1 for w in row if (w.x0 + w.x1) / 2 < xs[1]) for row in rows]
                    labels = sorted(first)[len(first) // 2]
                    if labels < LABEL_WORDS:
                        out.append([*group, bottom])
                        skip.add(j)
                        continue
        out.append(group)
    return out


def _lines(values: Sequence[float]) -> list[float]:
    out: list[float] = []
    for v in sorted(values):
        if out and v - out[-1] <= LINE_MERGE:
            continue
        out.append(v)
    return out


def fill_rules(fills: Sequence[BBox], rules: Sequence[Segment] = ()) -> list[Segment]:
    """The rules that filled rectangles draw as a table's cells, rows or header: shading bounds cells as rules do,
    and a ruled table often lacks the rule under its shaded header row. Only fills that are evidence of a grid give
    rules; a lone shaded box (a sidebar, a banner behind a title, a page's header band) gives none, or every boxed
    note would become a one-cell table:
    - cells in a row: fills side by side, edge to edge (within `JOIN`), with the same top and bottom: all four edges;
    - a band crossed by a vertical rule of the page (a shaded row of a ruled table, drawn as one fill): its top and
      bottom.
    Fills of one width stacked (zebra stripes) give none: taken for a table's rows, they raised the held-out split's
    CER from 0.23 to 0.29 (tables found and cells unchanged), on a page nobody here has looked at; stripes need more
    evidence than their shape. Bounded like the rules: at most `MAX_RULES` fills, compared after sorting."""
    boxes = sorted(set(fills[:MAX_RULES]))
    edges: set[BBox] = set()
    shaded: set[BBox] = set()
    by_band: dict[tuple[int, int], list[BBox]] = {}
    for box in boxes:
        # keyed on positions rounded to LINE_MERGE: neighbours at the next key are looked up too (rounding splits)
        by_band.setdefault((round(box[1] / LINE_MERGE), round(box[3] / LINE_MERGE)), []).append(box)
    for top, bottom in by_band:
        row = sorted({b for dt in (-1, 0, 1) for db in (-1, 0, 1) for b in by_band.get((top + dt, bottom + db), [])})
        for a, b in itertools.pairwise(row):
            if abs(a[2] - b[0]) <= JOIN and abs(a[1] - b[1]) <= LINE_MERGE and abs(a[3] - b[3]) <= LINE_MERGE:
                edges |= {a, b}
    verticals = sorted((s.x0, s.y0, s.y1) for s in rules if not s.horizontal)
    for box in boxes:
        # a vertical rule strictly inside the band's width, running through its height
        start = bisect.bisect_right(verticals, (box[0] + JOIN, float("inf"), float("inf")))
        for x, y0, y1 in verticals[start:]:
            if x >= box[2] - JOIN:
                break
            if y0 <= box[1] + JOIN and box[3] - JOIN <= y1:
                shaded.add(box)
                break
    out = [edge for box in sorted(edges) for edge in _edges(box)]
    out += [edge for box in sorted(shaded - edges) for edge in _edges(box) if edge.horizontal]
    return out


def _edges(box: BBox) -> list[Segment]:
    x0, y0, x1, y1 = box
    return [
        Segment(x0, y0, x1, y0, 0.0),
        Segment(x0, y1, x1, y1, 0.0),
        Segment(x0, y0, x0, y1, 0.0),
        Segment(x1, y0, x1, y1, 0.0),
    ]


def find_tables(rules: Sequence[Segment], words: Sequence[Word]) -> list[FoundTable]:
    """The ruled tables of a page, with the words each one takes."""
    found: list[FoundTable] = []
    taken: set[int] = set()
    rules = rules[:MAX_RULES]
    groups = _blocks([panel for group in _groups(merge_rules(rules)) for panel in _panels(group)], words)
    frames = [_box(g) for g in groups if _closed(g)]
    for group in _bracketed(_unstacked(groups, words), words):
        table = _table(group, words, taken)
        if table is not None and _framing(table, frames):
            continue  # a panel around a chart (its axes and grid lines a frame of their own), not a table
        if table is not None and table.loose:
            # a band of many lines: where the borders break at row boundaries (Word's cells), those are its rows
            inside = [w for i, w in enumerate(words) if i in table.words and w.rotation == 0]  # not a watermark
            breaks = [b for b in border_breaks(_within(rules, table.bbox), inside) if _touches_box(b, table.bbox)]
            if breaks:
                finer = _table([*group, *breaks], words, taken)
                if finer is not None and finer.table.rows > table.table.rows:
                    table = finer
        if table is not None:
            found.append(table)
            taken |= table.words
    # Lines just outside a table's rules, each given to the nearest table it fits (`_outer_lines`).
    nearest: dict[tuple[int, ...], tuple[float, int, bool]] = {}
    by_y = sorted(((w.y0 + w.y1) / 2, i) for i, w in enumerate(words)) if found else []
    for t, table in enumerate(found):
        for ids, above, distance in [] if table.boxed else _outer_lines(table, words, taken, by_y):
            if ids not in nearest or distance < nearest[ids][0]:
                nearest[ids] = (distance, t, above)
    sides: dict[tuple[int, bool], tuple[float, tuple[int, ...]]] = {}
    for ids, (distance, t, above) in nearest.items():
        if (t, above) not in sides or distance < sides[(t, above)][0]:
            sides[(t, above)] = (distance, ids)
    outside = sorted(w.size for i, w in enumerate(words) if i not in taken and w.size > 0)
    prose = outside[len(outside) // 2] if outside else 0.0
    return [
        part
        for t, table in enumerate(found)
        for edged in _edge_rows(
            _with_rows(table, words, sides.get((t, True), (0.0, ()))[1], sides.get((t, False), (0.0, ()))[1]),
            words,
            prose,
        )
        for part in _titled_parts(edged, words)
    ]


def _edge_rows(found: FoundTable, words: Sequence[Word], prose: float) -> list[FoundTable]:
    """A grid without the title block above its rows and the notes below them, where the sheet's own grid boxes them
    too (a spreadsheet printed with its cell gridlines, the title, units line and notes merged across the sheet):
    rows of one cell spanning every column, from the first while it is set `TITLE_SIZE` larger than the grid's other
    cells and than `prose`, the size of the page's words outside its tables (0 where none: a sheet's gridlines box
    them all), down to the first row of two cells or more, and from the last up while each is a note (`_note`). They
    stay text: a heading, paragraphs. A table's own title row in the size of the prose around it, over smaller cells,
    is no heading of the page."""
    table = found.table
    if table.cols < 2 or table.rows < 3:
        return [found]
    across = {c.row: c for c in table.cells if c.col == 0 and c.col_span == table.cols and c.row_span == 1}
    sizes: dict[int, list[float]] = {}
    for i, row in found.rows:  # each word's row, where the finder placed it (`FoundTable.rows`)
        if words[i].size > 0:
            sizes.setdefault(row, []).append(words[i].size)
    body = sorted(s for r, row_sizes in sizes.items() if r not in across for s in row_sizes)
    if not body:
        return [found]
    size = body[len(body) // 2]
    start = 0
    if 0 in across and 0 in sizes and min(sizes[0]) > max(size, prose) * TITLE_SIZE:
        while start in across:
            start += 1
    end = table.rows
    while end - 1 > start and end - 1 in across and _note(sizes.get(end - 1, []), size):
        end -= 1
    if (start, end) == (0, table.rows) or end - start < 2:
        return [found]
    return _part(found, words, start, end)


def _note(sizes: list[float], size: float) -> bool:
    """A row's words are a note under a grid: set smaller than its cells (`NOTE_SIZE`). A note in the cells' own size
    stays the grid's last row (whether it is the table's is for the layout model's region to say,
    `analyse._region_trimmed`)."""
    return bool(sizes) and max(sizes) < size * NOTE_SIZE


def _titled_parts(found: FoundTable, words: Sequence[Word]) -> list[FoundTable]:
    """An open table (rules across, none down) cut in two at a title between two tables under one stack of rules:
    a row holding one cell alone (its words no column gap apart) that runs across a column line, centred in the
    table (within `COLUMN_GAP`; a section label inside a table stands at the left, in its label column), with
    `BAND_ROWS` rows of two cells or more both above and below it (`IL1B_511 locus` ... `TNFA_238 locus`, each
    over its own table). The title is no cell of either part: it stays text."""
    table = found.table
    if not found.open or table.cols < 2:
        return [found]
    grid = table.grid()
    filled = [sum(1 for k, cell in enumerate(row) if cell and cell.text and cell.col == k) for row in grid]
    lines_x = _grid_lines(table)
    if lines_x is None:
        return [found]
    centre = (found.bbox[0] + found.bbox[2]) / 2
    for r, row in enumerate(grid):
        if not filled[r] or sum(1 for n in filled[:r] if n >= 2) < BAND_ROWS:
            continue
        if sum(1 for n in filled[r + 1 :] if n >= 2) < BAND_ROWS:
            break
        bbox = next((c.bbox for c in row if c and c.bbox), None)
        if bbox is None:
            continue
        mine = [words[i] for i in found.words if bbox[1] <= (words[i].y0 + words[i].y1) / 2 <= bbox[3]]
        pieces = _pieces(mine)  # one cell to the reader, whichever slots its words' centres fell in
        if len(pieces) != 1:
            continue
        x0, x1 = pieces[0]
        if abs((x0 + x1) / 2 - centre) > COLUMN_GAP or not any(x0 < x < x1 for x in lines_x[1:-1]):
            continue
        return [
            *_part(found, words, 0, r),
            *_titled_parts(_part(found, words, r + 1, table.rows)[0], words),
        ]
    return [found]


def _part(found: FoundTable, words: Sequence[Word], start: int, end: int) -> list[FoundTable]:
    """Rows `start` to `end` (exclusive) of an open table as a table of their own, with the words under them."""
    cells = [c for c in found.table.cells if start <= c.row < end]
    boxes = [c.bbox for c in cells if c.bbox is not None]
    if not boxes:
        return []
    y0, y1 = min(b[1] for b in boxes), max(b[3] for b in boxes)
    ids = frozenset(i for i in found.words if y0 <= (words[i].y0 + words[i].y1) / 2 <= y1)
    shifted = tuple(
        Cell(c.row - start, c.col, c.text, min(c.row_span, end - c.row), c.col_span, c.row == start, c.bbox)
        for c in cells
    )
    grid = Table(end - start, found.table.cols, shifted)
    rows = tuple((i, r - start) for i, r in found.rows if i in ids and start <= r < end)
    return [FoundTable((found.bbox[0], y0, found.bbox[2], y1), grid, ids, found.open, found.loose, rows=rows)]


def _within(rules: Sequence[Segment], box: BBox) -> list[Segment]:
    """The rules lying inside `box` (within `JOIN`)."""
    return [
        r
        for r in rules
        if box[0] - JOIN <= r.x0 and r.x1 <= box[2] + JOIN and box[1] - JOIN <= r.y0 and r.y1 <= box[3] + JOIN
    ]


def _touches_box(rule: Segment, box: BBox) -> bool:
    return box[1] < rule.y0 < box[3]


def _grid_lines(table: Table) -> list[float] | None:
    """The x positions of a table's column lines, from its cells' boxes; None when a column has no line."""
    lines_x: dict[int, float] = {}
    for cell in table.cells:
        if cell.bbox is not None:
            lines_x.setdefault(cell.col, cell.bbox[0])
            lines_x.setdefault(cell.col + cell.col_span, cell.bbox[2])
    if len(lines_x) != table.cols + 1:
        return None
    return [lines_x[c] for c in range(table.cols + 1)]


def _outer_lines(
    found: FoundTable, words: Sequence[Word], taken: set[int], by_y: list[tuple[float, int]]
) -> list[tuple[tuple[int, ...], bool, float]]:
    """Lines just outside a table's rules that are rows its rules leave out (a table ruled in parts: a grid under
    its first row only, rules above and below the body only): each line within one row's height above or below it
    whose words each stand inside one of its columns, in at least two columns and half of them, a column gap
    (`COLUMN_GAP`) apart where the column changes, as (word indices, above, distance to the table). A caption, a
    note or a paragraph's line runs across the column lines, or changes column at a word space."""
    table = found.table
    xs = _grid_lines(table) if table.rows >= 2 and table.cols >= 2 else None
    if xs is None:
        return []
    heights = sorted(c.bbox[3] - c.bbox[1] for c in table.cells if c.bbox is not None and c.row_span == 1)
    if not heights:
        return []
    pitch = heights[len(heights) // 2]
    top, bottom = found.bbox[1], found.bbox[3]
    # the words whose middles lie within one row's height above or below (`by_y`: middles sorted, so a page of many
    # tables and words looks at each table's two bands only)
    end = len(words)  # past every index: (y, end) sorts after every word at height y
    above_band = by_y[bisect.bisect_left(by_y, (top - pitch, -1)) : bisect.bisect_left(by_y, (top, -1))]
    below_band = by_y[bisect.bisect_right(by_y, (bottom, end)) : bisect.bisect_right(by_y, (bottom + pitch, end))]
    bands = above_band + below_band
    near = [
        i
        for _, i in bands
        if i not in taken
        and words[i].rotation == 0
        and xs[0] - LINE_MERGE <= words[i].x0
        and words[i].x1 <= xs[-1] + LINE_MERGE
    ]
    index = {id(words[i]): i for i in near}
    out: list[tuple[tuple[int, ...], bool, float]] = []
    for line in text_lines([words[i] for i in near]):
        ids = tuple(sorted(index[id(w)] for w in line))
        columns = {_column_of(words[i], xs) for i in ids}
        if None in columns or len(columns) < 2 or 2 * len(columns) < table.cols:
            continue
        ordered = sorted(ids, key=lambda i: words[i].x0)
        if any(
            _column_of(words[a], xs) != _column_of(words[b], xs) and words[b].x0 - words[a].x1 < COLUMN_GAP
            for a, b in itertools.pairwise(ordered)
        ):
            continue  # a line of running text whose word spaces fall on the column lines by chance
        y0, y1 = min(words[i].y0 for i in ids), max(words[i].y1 for i in ids)
        above = y1 <= top + LINE_MERGE
        out.append((ids, above, top - y1 if above else y0 - bottom))
    return out


def _with_rows(found: FoundTable, words: Sequence[Word], above: Sequence[int], below: Sequence[int]) -> FoundTable:
    """`found` with the line `above` as its first row (its header) and the line `below` as its last."""
    xs = _grid_lines(found.table)
    if xs is None or not (above or below):
        return found
    table = found.table
    shift = 1 if above else 0
    cells = [
        Cell(c.row + shift, c.col, c.text, c.row_span, c.col_span, c.header and not above, c.bbox) for c in table.cells
    ]
    placed = [(i, r + shift) for i, r in found.rows]
    for ids, row in ((above, 0), (below, table.rows + shift)):
        if not ids:
            continue
        y0, y1 = min(words[i].y0 for i in ids), max(words[i].y1 for i in ids)
        for c in range(table.cols):
            inside = [words[i] for i in ids if _column_of(words[i], xs) == c]
            cells.append(Cell(row, c, cell_text(inside), header=row == 0, bbox=(xs[c], y0, xs[c + 1], y1)))
        # the line's words in the row's cells, which run from the first column line to the last
        placed += [(i, row) for i in ids if xs[0] <= (words[i].x0 + words[i].x1) / 2 <= xs[-1]]
    box = (
        found.bbox[0],
        min([found.bbox[1], *(words[i].y0 for i in above)]),
        found.bbox[2],
        max([found.bbox[3], *(words[i].y1 for i in below)]),
    )
    rows = table.rows + (1 if above else 0) + (1 if below else 0)
    grid = Table(rows, table.cols, tuple(sorted(cells, key=lambda c: (c.row, c.col))))
    return FoundTable(
        box, grid, found.words | frozenset([*above, *below]), found.open, found.loose, rows=tuple(sorted(placed))
    )


def _column_of(word: Word, xs: list[float]) -> int | None:
    """The column (between grid lines `xs`) holding the whole word, or None when it runs across a line."""
    for c in range(len(xs) - 1):
        if xs[c] - LINE_MERGE <= word.x0 and word.x1 <= xs[c + 1] + LINE_MERGE:
            return c
    return None


def border_breaks(rules: Sequence[Segment], words: Sequence[Word]) -> list[Segment]:
    """Row rules a table draws only as breaks in its cells' vertical borders: Word draws each cell's edges apart,
    and some producers leave out the horizontal rules between body rows, so a row's boundary is where every column's
    border ends and the next one starts (`JOIN` apart) at the same height. Read for a loose table only
    (`find_tables`): taken for every ruled table, they lowered the held-out split's cell recall (0.79 -> 0.75).
    `merge_rules` joins those pieces into one rule; this reads the breaks first. A break is a row rule only where at
    least `BREAK_COLUMNS` borders break together, every border piece meeting there is at least `BREAK_PIECE` text
    lines tall (dashes drawn as pieces break everywhere), and no word is cut by it (a row boundary runs between lines
    of text). Each such break gives a horizontal rule between each two neighbouring borders that break, unless a
    border running on through it lies between them (the cell there spans both rows). Bounded: one pass over the
    sorted borders and words per break."""
    verticals = sorted((s.x0, s.y0, s.y1) for s in rules if not s.horizontal)
    heights = sorted(w.y1 - w.y0 for w in words)
    line = heights[len(heights) // 2] if heights else 0.0  # a text line's height: the median word's
    joints: list[tuple[float, float]] = []  # (y, x) where one piece of a border ends and the next starts
    for (x, y0, y1), (nx, ny0, ny1) in itertools.pairwise(verticals):
        if abs(nx - x) <= LINE_MERGE / 2 and abs(ny0 - y1) <= JOIN and min(y1 - y0, ny1 - ny0) >= BREAK_PIECE * line:
            joints.append(((y1 + ny0) / 2, x))
    joints.sort()
    # words by top, to find those a break would cut: a word's top lies at most the tallest word's height above it
    # (a word many lines tall is no line of text: a diagonal watermark's box spans the rows it is drawn across)
    lined = [w for w in words if w.y1 - w.y0 <= BREAK_TALL * line]
    tops = sorted((w.y0, w.y1, (w.x0 + w.x1) / 2) for w in lined)
    tallest = max((w.y1 - w.y0 for w in lined), default=0.0)
    out: list[Segment] = []
    k = 0
    while k < len(joints):
        run = [joints[k]]
        while k + len(run) < len(joints) and joints[k + len(run)][0] - run[0][0] <= LINE_MERGE:
            run.append(joints[k + len(run)])
        k += len(run)
        xs = sorted({round(x, 1) for _, x in run})
        if len(xs) < BREAK_COLUMNS:
            continue
        y = sum(y for y, _ in run) / len(run)
        near = tops[bisect.bisect_left(tops, (y - tallest,)) : bisect.bisect_left(tops, (y,))]
        if any(y < y1 and xs[0] <= cx <= xs[-1] for _, y1, cx in near):
            continue  # a word runs across it: no row boundary
        # a border running on through the break bounds a cell spanning both rows: no rule across that cell
        through = [x for x, y0, y1 in verticals if xs[0] < x < xs[-1] and y0 + JOIN < y < y1 - JOIN]
        for a, b in itertools.pairwise(xs):
            if not any(a < x < b for x in through):
                out.append(Segment(a, y, b, y, 0.0))
    return out


def rule_frames(rules: Sequence[Segment]) -> list[BBox]:
    """The boxes of closed rule groups (horizontal and vertical rules that touch), table or not."""
    return [_box(group) for group in _closed_groups(rules)]


def frames_and_fields(rules: Sequence[Segment], words: Sequence[Word]) -> tuple[list[BBox], list[BBox]]:
    """A page's `rule_frames` and its forms' field boxes (`form_fields`), from one grouping of its rules: both are
    read off the same closed groups."""
    closed = _closed_groups(rules)
    return [_box(group) for group in closed], form_fields(closed, words)


def _closed_groups(rules: Sequence[Segment]) -> list[list[Segment]]:
    """The groups of rules (merged, `_groups`) that close a frame (`_closed`), in `_groups`' order."""
    return [group for group in _groups(merge_rules(rules[:MAX_RULES])) if _closed(group)]


def table_frames(rules: Sequence[Segment]) -> list[BBox]:
    """The boxes of rule groups that may be tables (two horizontal rules or more, a few points tall), before any
    word is known: the pixel path gathers the lines inside each box to read them as one table (`find_tables` then
    decides, with the words, whether it is one)."""
    out = []
    for group in _groups(merge_rules(rules[:MAX_RULES])):
        if sum(1 for s in group if s.horizontal) >= 2:
            top, bottom = min(s.y0 for s in group), max(s.y1 for s in group)
            if bottom - top >= 8:
                out.append((min(s.x0 for s in group), top, max(s.x1 for s in group), bottom))
    return out


def _inside(word: Word, box: BBox) -> bool:
    cx, cy = (word.x0 + word.x1) / 2, (word.y0 + word.y1) / 2
    return box[0] <= cx <= box[2] and box[1] <= cy <= box[3]


def _table(group: list[Segment], words: Sequence[Word], taken: set[int], lined: bool = False) -> FoundTable | None:
    """The table `group`'s rules make of the words not `taken`, or None. `lined`: its rows are the text lines between
    its rules whatever they bound (a loose table whose bands are parted into columns by its words, `_band_columns`)."""
    horizontals = [s for s in group if s.horizontal]
    verticals = [s for s in group if not s.horizontal]
    if len(group) < 2 or not horizontals:
        return None
    box = _box(group)
    if box[3] - box[1] < 8:
        return None
    members = [i for i, w in enumerate(words) if i not in taken and w.rotation in (0, 90, 270) and _inside(w, box)]
    if not members:
        return None
    inside = [words[i] for i in members]
    ys = _thin(_lines([box[1], box[3], *(s.y0 for s in horizontals)]), inside, horizontal=True)
    xs = _thin(_lines([box[0], box[2], *(s.x0 for s in verticals)]), inside, horizontal=False)
    short = _short_verticals(xs, verticals, box)
    if len(xs) - len(short) > 2:
        # a vertical rule only in a short stretch of the table (the box of a group's column labels under the group's
        # label) parts no column by its rule: the group's columns are read from its words, as between any group's
        # rules, which part its labels too (`_band_columns`); as a hard line it made each body row one cell there
        xs = [x for x in xs if x not in short]
    ruled_columns = len(xs) > 2
    ruled_rows = len(ys) > 2
    soft: list[float] = []  # column lines read from the words inside a band between vertical rules
    aligned: list[float] = []  # those of them between columns of right-aligned figures (`_aligned_columns`)
    # rules under some columns only (a `\\cmidrule`): the header just above one spans the columns it stands over
    partial = [h for h in horizontals if h.x1 - h.x0 < box[2] - box[0] - 2 * JOIN] if not verticals else []
    if not ruled_columns:
        xs = _word_columns([w for w in inside if not _over(w, partial)], box)
    else:
        soft, aligned = _band_columns(xs, inside)
        xs = sorted([*xs, *soft])
    # Rows between rules are text lines when rules do not bound every row: no interior horizontal rule, or no
    # vertical rule at all (booktabs' midrule parts the header from a band of many rows, not one multi-line cell).
    lined_rows = lined or not ruled_rows or not ruled_columns
    rows_ruled = False  # rules across part every row (`_rows_ruled`): they bound its rows as a grid's would
    rule_ys = ys
    if lined_rows:
        ys = _lines([*ys, *_word_rows(inside, ys)])
        ys = _wrapped_labels(ys, xs, inside)
        # only rules across the whole table part its rows (a link's underline in a cell, a rule under some columns,
        # parts none: a price report's underlined links)
        if (
            not lined
            and ruled_rows
            and all(any(abs(h.y0 - y) <= LINE_MERGE and _spans_box(h, box) for h in horizontals) for y in rule_ys)
        ):
            ys, rows_ruled = _rows_ruled(ys, rule_ys, xs, inside)
    # the header band of a table whose rules part its column groups and header only: rows read from its lines
    # (its foot: the first rule under the top that runs the table's width; a straddle rule under a group's label,
    # between the group's vertical rules, is inside the header)
    across = [y for y in rule_ys[1:-1] if any(abs(h.y0 - y) <= LINE_MERGE and _spans_box(h, box) for h in horizontals)]
    foot = across[0] if across else rule_ys[1]
    head = foot - LINE_MERGE if lined and soft and len(rule_ys) > 2 else float("-inf")
    if head > rule_ys[0]:
        foot = _labels_foot(foot, across, xs, inside)
        ys = _stacked_header(ys, foot, xs, inside, rule_ys)
    rows, cols = len(ys) - 1, len(xs) - 1
    if rows < 2 or cols < 2:
        return None

    def vertical_rule_at(x: float, y_mid: float) -> bool:
        if not ruled_columns:
            return not any(x0 + JOIN < x < x1 - JOIN for x0, x1 in spanning.get(_index(ys, y_mid), ()))
        if x in soft:
            return x not in spanned.get(_index(ys, y_mid), ())
        return any(abs(s.x0 - x) <= LINE_MERGE and s.y0 - JOIN <= y_mid <= s.y1 + JOIN for s in verticals) or (
            x in (xs[0], xs[-1])
        )

    def horizontal_rule_at(y: float, x_mid: float) -> bool:
        if lined_rows:
            # in the header band, a header cell over an empty slot spans it (the stub's header, set once beside the
            # group labels and the column labels under them, heads both header rows)
            return y >= head or bool(slot_words.get((_index(ys, y), _index(xs, x_mid))))
        return any(abs(s.y0 - y) <= LINE_MERGE and s.x0 - JOIN <= x_mid <= s.x1 + JOIN for s in horizontals)

    # Each slot's words, by centre, and each word's slot.
    slot_words: dict[tuple[int, int], list[Word]] = {}
    slot_of: dict[int, tuple[int, int]] = {}
    for i in members:
        w = words[i]
        cx, cy = (w.x0 + w.x1) / 2, (w.y0 + w.y1) / 2
        r = _index(ys, cy)
        c = _index(xs, cx)
        slot_words.setdefault((r, c), []).append(w)
        slot_of[i] = (r, c)

    spanned = _spanned(soft, aligned, xs, ys, slot_words) if soft else {}
    spanning: dict[int, list[tuple[float, float]]] = {}  # per row, the extents of the partial rules just under it
    for rule in partial:
        above = [w for w in inside if _over(w, [rule])]
        if above:
            spanning.setdefault(_index(ys, (above[0].y0 + above[0].y1) / 2), []).append((rule.x0, rule.x1))
    owner: dict[tuple[int, int], int] = {}
    cells: list[Cell] = []
    for r in range(rows):
        for c in range(cols):
            if (r, c) in owner:
                continue
            y_mid = (ys[r] + ys[r + 1]) / 2
            col_span = 1
            while (
                c + col_span < cols
                and not vertical_rule_at(xs[c + col_span], y_mid)
                and (
                    r,
                    c + col_span,
                )
                not in owner
            ):
                col_span += 1
            row_span = 1
            while r + row_span < rows and all(
                not horizontal_rule_at(ys[r + row_span], (xs[k] + xs[k + 1]) / 2) and (r + row_span, k) not in owner
                for k in range(c, c + col_span)
            ):
                row_span += 1
            text_words = [
                w
                for rr in range(r, r + row_span)
                for cc in range(c, c + col_span)
                for w in slot_words.get((rr, cc), [])
            ]
            for rr in range(r, r + row_span):
                for cc in range(c, c + col_span):
                    owner[(rr, cc)] = len(cells)
            cells.append(
                Cell(
                    row=r,
                    col=c,
                    text=cell_text(text_words),
                    row_span=row_span,
                    col_span=col_span,
                    header=r == 0,
                    bbox=(xs[c], ys[r], xs[c + col_span], ys[r + row_span]),
                )
            )
    filled = sum(1 for cell in cells if cell.text)
    if filled < 2 or filled < MIN_FILLED * len(cells):
        return None  # boxes of a vector drawing (a network diagram, a flow chart), not a table
    long = [cell for cell in cells if len(cell.text.split()) > MAX_CELL_WORDS]
    if long and filled - len(long) < 2 * cols:
        return None  # a ruled frame around running text (a cover, a sidebar), not a table
    if not ruled_columns and sum(words[i].monospace for i in members) >= 0.8 * len(members):
        return None  # a framed code listing
    sparse = ruled_columns and rows >= FORM_ROWS and len(cells) < FORM_FILL * rows * cols
    if sparse and _layered(inside) and _own_rows(group) is not None:
        return None  # boxes of fields: their words are read as lines, or as tables without rules where they stand so
    if not ruled_columns:
        full_rows = sum(1 for r in range(rows) if sum(1 for cell in cells if cell.row == r and cell.text) >= 2)
        if full_rows < 0.5 * rows:
            return None  # columns guessed from gaps must be filled on most rows, or they are no columns
    loose = not lined_rows and _banded(slot_words, rows, cols)
    placed = tuple((i, cells[owner[slot]].row) for i, slot in slot_of.items())  # each word's cell's row
    boxed = not ruled_columns and all(
        any(abs(s.x0 - x) <= LINE_MERGE and s.y0 <= box[1] + 2 * JOIN and s.y1 >= box[3] - 2 * JOIN for s in verticals)
        for x in (box[0], box[2])
    )
    if loose and soft:
        # bands of many lines whose words stand in columns: a table whose rules part its column groups and header
        # only, read line by line in the columns the words give (the rules still bound the groups' headers)
        return _table(group, words, taken, lined=True) or FoundTable(
            box,
            Table(rows, cols, tuple(cells)),
            frozenset(members),
            open=not ruled_columns,
            loose=loose,
            boxed=boxed,
            rows=placed,
        )
    # a table whose rules part every row is no open one: a reading without rules (`unruled.widened`) has no more
    # rows to find in it, and parted its header band into its lines again
    return FoundTable(
        box,
        Table(rows, cols, tuple(cells)),
        frozenset(members),
        open=not ruled_columns and not rows_ruled,
        loose=loose,
        boxed=boxed,
        rows=placed,
    )


def _layered(words: Sequence[Word]) -> bool:
    """Whether words come from a text layer (their fonts known; OCR'd words have none): its rules are then its
    vector drawing. A form is read from its boxes on the text path only: the pixel path's rules of a scan come in
    pieces, and its OCR'd lines of two columns of a form's options interleave when the grid is read as lines (the
    probe's irs_f1040nr_03 order check on pixels), where its grid kept them apart."""
    return sum(1 for w in words if w.font) >= 0.5 * len(words)


def _own_rows(group: Sequence[Segment]) -> FormGrid | None:
    """Where a grid's rows of boxes each draw column lines of their own (a form's fields, each as wide as what it
    asks): the grid, with each band's column lines (its box's edges and the vertical rules across its middle), top
    band first; None where the median inner column line runs through `FORM_SHARE` of the bands or more (a table's
    column lines run through its rows, whole or in pieces at one x), or the grid has fewer than `FORM_ROWS` bands.
    Read on the rules alone: missing pieces of a rule lower no line's count of bands but where they miss."""
    box = _box(group)
    horizontals = [s for s in group if s.horizontal]
    ys = _lines([box[1], box[3], *(s.y0 for s in horizontals)])
    middles = [(a + b) / 2 for a, b in itertools.pairwise(ys)]
    inner = [s for s in group if not s.horizontal and box[0] + LINE_MERGE < s.x0 < box[2] - LINE_MERGE]
    if len(middles) < FORM_ROWS or not inner:
        return None
    xs = _lines([s.x0 for s in inner])
    crossed: list[set[int]] = [set() for _ in xs]  # per inner column line, the bands whose middles its rules cross
    per_band: list[set[int]] = [set() for _ in middles]
    for s in inner:
        k = bisect.bisect_right(xs, s.x0) - 1  # the line whose merged rules it is one of (`_lines`)
        for band in range(bisect.bisect_left(middles, s.y0 - JOIN), bisect.bisect_right(middles, s.y1 + JOIN)):
            crossed[k].add(band)
            per_band[band].add(k)
    counts = sorted(len(bands) for bands in crossed)
    if counts[len(counts) // 2] >= FORM_SHARE * len(middles):
        return None
    return FormGrid(box, ys, [[box[0], *(xs[k] for k in sorted(ks)), box[2]] for ks in per_band], horizontals)


def form_fields(groups: Sequence[Sequence[Segment]], words: Sequence[Word]) -> list[BBox]:
    """The boxes of a form's fields among closed rule `groups` (`_closed_groups`; a form's grid: `_own_rows`)
    labelled at their top left (`FIELD_INSET`) beside another field of their row, or with room below the label
    (`FIELD_ROOM`): the value's, empty on a blank form, or its options. Such a label (`2. SOCIAL SECURITY NUMBER`
    over the boxes of its digits) is no heading, however it is set (a form sets its labels in capitals). A band's
    title across the form (`SECTION I: ...` on its shading, alone in its row and filling its box) or the form's title
    (centred in its box) stays what its type makes it."""
    out: list[BBox] = []
    for group in groups:
        form = _own_rows(group)
        if form is None:
            continue
        box, ys, lines_x, horizontals = form.box, form.ys, form.lines_x, form.horizontals
        # A box runs down through bands where no rule closes it (a label of three lines beside three rows of options
        # ruled apart): [left, top, right, bottom, alone in each of its bands]
        boxes: list[tuple[float, float, float, float, bool]] = []
        above: dict[tuple[float, float], int] = {}
        for (top, bottom), xs in zip(itertools.pairwise(ys), lines_x, strict=True):
            below: dict[tuple[float, float], int] = {}
            for left, right in itertools.pairwise(xs):
                k = above.get((left, right))
                middle = (left + right) / 2
                closed = any(
                    abs(h.y0 - top) <= LINE_MERGE and h.x0 - JOIN <= middle <= h.x1 + JOIN for h in horizontals
                )
                if k is None or closed:
                    boxes.append((left, top, right, bottom, len(xs) == 2))
                    k = len(boxes) - 1
                else:
                    x0, y0, x1, _, alone = boxes[k]
                    boxes[k] = (x0, y0, x1, bottom, alone and len(xs) == 2)
                below[(left, right)] = k
            above = below
        # the group's words by the heights of their centres: each box looks at its own band of them only
        placed = sorted(((w.y0 + w.y1) / 2, k) for k, w in enumerate(words) if not w.rotation and _inside(w, box))
        heights = [y for y, _ in placed]
        for left, top, right, bottom, alone in boxes:
            field = (left, top, right, bottom)
            band = placed[bisect.bisect_left(heights, top) : bisect.bisect_right(heights, bottom)]
            inside = [words[k] for _, k in band if _inside(words[k], field)]
            if not inside:
                continue
            first = min(inside, key=lambda w: w.y0)
            height = first.y1 - first.y0
            label = [w for w in inside if first.y0 <= (w.y0 + w.y1) / 2 <= first.y1]
            at_left = min(w.x0 for w in label) - left <= FIELD_INSET * height
            if at_left and (not alone or bottom - first.y1 >= FIELD_ROOM * height):
                out.append(field)
    return out


def _short_verticals(xs: list[float], verticals: Sequence[Segment], box: BBox) -> list[float]:
    """The inner column lines of `xs` whose vertical rules cover under `SHORT_RULE` of the table's height: rules
    under a group's label between its column labels only (the IRS's tax tables: `Single | Qualifying widow(er) |
    Married filing separately`, then twenty rows of figures with no rule between them). A column rule broken at
    each group row (the same tables' rules stop at their bold group rows) still covers most of it."""
    height = box[3] - box[1]
    out: list[float] = []
    for x in xs[1:-1]:
        covered = sum(s.y1 - s.y0 for s in verticals if abs(s.x0 - x) <= LINE_MERGE)
        if covered < SHORT_RULE * height:
            out.append(x)
    return out


def _spans_box(rule: Segment, box: BBox) -> bool:
    """Whether a horizontal rule runs a box's width (within `JOIN` at each end)."""
    return rule.x0 <= box[0] + JOIN and rule.x1 >= box[2] - JOIN


def _over(word: Word, rules: Sequence[Segment]) -> bool:
    """Whether `word` stands just over one of `rules` (its centre within one and a half of its heights above the rule)
    and within its extent (`JOIN`): a header over the columns a partial rule underlines."""
    cy, height = (word.y0 + word.y1) / 2, word.y1 - word.y0
    return any(
        0 < rule.y0 - cy <= 1.5 * height and rule.x0 - JOIN <= word.x0 and word.x1 <= rule.x1 + JOIN for rule in rules
    )


def _banded(slot_words: dict[tuple[int, int], list[Word]], rows: int, cols: int) -> bool:
    """Whether some row of the grid holds `LOOSE_LINES` text lines or more in two of its slots or more: a band of
    many rows between two rules (see `FoundTable.loose`). A row of wrapped cells holds that many lines too; the
    unruled reading then finds no more rows, and the ruled one stays."""
    for r in range(rows):
        deep = sum(1 for c in range(cols) if len(text_lines(slot_words.get((r, c), []))) >= LOOSE_LINES)
        if deep >= 2:
            return True
    return False


def aligned_starts(lines: Sequence[Sequence[Word]]) -> dict[int, float]:
    """The words (by `id`) that start a column though the space before them is no wider than a word space, each with
    the x of the column line in that space. A column of numbers set flush right (or centred) beside a column of text
    set flush left leaves a gap between the two as small as the cells' padding (Writer's 0.1 cm: a word space), so
    no gap width tells it from the spaces inside cells; the rows tell it by alignment: on `BAND_ROWS` lines or more
    of one stretch (the lines over that x between two lines whose words run across it), a word starts at one x
    (within `ALIGN_SLACK`) after a word that ends at one x (flush right: words of different widths, or figures of one
    width under a column name ending there) or is centred on one x (one word a cell, of different widths), these
    pairs are `ALIGNED_SHARE` of the stretch's lines, and no word stands on most of them on either side. Not a
    column: a two-word cell ("New York" over "New Haven": its first words are one word, starting and ending at one
    x), a unit after right-aligned figures ("12 kg" over "150 kg": the second words are one word), a list's labels
    before their items (`_LABEL`), justified prose (its lines run across any such x, and their spaces do not line
    up), monospaced text (every word of one length lines up: code). Text-layer words only: the pixel path's are
    read as before."""
    pairs: list[tuple[float, int, Word, Word]] = []  # the second word's start, the line, the two words
    for n, line in enumerate(lines):
        ordered = sorted((w for w in line if w.rotation == 0), key=lambda w: w.x0)
        for a, b in itertools.pairwise(ordered):
            if not (a.font and b.font) or a.monospace or b.monospace or _LABEL.match(a.text):
                continue  # OCR'd words (no font): boxes from pixels, a point or two off, align on nothing so fine
            if a.x1 < b.x0 <= a.x1 + ALIGNED_GAP_EM * max(a.size, 1.0):
                pairs.append((b.x0, n, a, b))
    pairs.sort(key=lambda p: p[0])
    out: dict[int, float] = {}
    k = 0
    while k < len(pairs):
        end = bisect.bisect_right(pairs, pairs[k][0] + ALIGN_SLACK, lo=k, key=lambda p: p[0])
        group, k = pairs[k:end], end
        if len(group) < BAND_ROWS:
            continue
        x = pairs[k - len(group)][0]
        at = {n: (a, b) for _, n, a, b in group}
        stretch: list[int] = []  # the lines of the current stretch over x
        for n, line in [*enumerate(lines), (len(lines), [])]:
            over = [w for w in line if w.rotation == 0]
            if n in at or (over and min(w.x0 for w in over) < x - ALIGN_SLACK and max(w.x1 for w in over) > x):
                crossing = n not in at and any(w.x0 < x - ALIGN_SLACK and w.x1 > x + ALIGN_SLACK for w in over)
                if not crossing:
                    stretch.append(n)
                    continue
            elif n < len(lines):
                continue
            out.update(_aligned_pairs([at[m] for m in stretch if m in at], len(stretch)))
            stretch = []
    return out


def _aligned_pairs(pairs: list[tuple[Word, Word]], lines: int) -> dict[int, float]:
    """`aligned_starts` for the pairs of one stretch of `lines` lines: their second words (by `id`) with the column
    line between the two columns, or nothing where the pairs are too few or not aligned."""
    if pairs:
        # a table's rows share one type size: a caption's line over it in another ("Table" ending where the figures
        # under it end, "1." starting where the names start) is no row of its columns (`SIZE_STEP`)
        size = statistics.median(a.size for a, _ in pairs)
        pairs = [(a, b) for a, b in pairs if abs(a.size - size) <= SIZE_STEP * size]
    if len(pairs) < BAND_ROWS or len(pairs) < ALIGNED_SHARE * lines:
        return {}
    firsts, seconds = [a for a, _ in pairs], [b for _, b in pairs]
    for side in (firsts, seconds):
        if 2 * max(collections.Counter(w.text for w in side).values()) > len(side):
            # one word on most of the lines: a two-word cell's first word ("New"), a unit after figures ("kg"), the
            # "in" of a centred "1 in 5" over "4 in 5"; a column's cells differ from row to row
            return {}
    ends = [a.x1 for a in firsts]
    starts = [a.x0 for a in firsts]
    centres = [(a.x0 + a.x1) / 2 for a in firsts]

    def spread(values: list[float]) -> float:
        return max(values) - min(values)

    # flush right: words of different widths ending at one x, or figures of one width (a font's digits share one)
    # under the column's name ending where they end ("No." over "160"): figures of one width alone, no name among
    # them, may as well be set flush left with the next word in their cell (a telephone code's groups, "0 29 59")
    figures = sum(1 for a in firsts if FIGURE.match(a.text))
    flush_right = spread(ends) <= ALIGN_SLACK and (spread(starts) > ALIGN_SLACK or figures == len(firsts) - 1)
    centred = spread(centres) <= ALIGN_SLACK and spread(ends) > ALIGN_SLACK
    left = max(ends)
    right = min(b.x0 for b in seconds)
    if not (flush_right or centred) or spread([b.x0 for b in seconds]) > ALIGN_SLACK or left >= right:
        return {}
    line_x = (left + right) / 2
    return {id(b): line_x for b in seconds}


def _joined_spans(spans: Sequence[tuple[float, float]], apart: Sequence[float] = ()) -> list[tuple[float, float]]:
    """The x spans, sorted, with neighbours closer than `COLUMN_GAP` joined unless a line of `apart` stands between
    them: what stands between two of the result is a column gap."""
    out: list[tuple[float, float]] = []
    for x0, x1 in sorted(spans):
        if out and x0 - out[-1][1] < COLUMN_GAP and not any(out[-1][1] <= x <= x0 for x in apart):
            out[-1] = (out[-1][0], max(out[-1][1], x1))
        else:
            out.append((x0, x1))
    return out


def _pieces(words: Sequence[Word], apart: Sequence[float] = ()) -> list[tuple[float, float]]:
    """The x spans of one line's words, neighbours closer than `COLUMN_GAP` joined unless a line of `apart` stands in
    the gap between them: the line's cells."""
    return _joined_spans([span for w in words if (span := inked(w)) is not None], apart)


def _band_columns(xs: list[float], words: list[Word]) -> tuple[list[float], list[float]]:
    """Column lines inside the bands between a table's vertical rules (`xs`) where the rules part only groups of
    columns: the middle of each x gap, at least `COLUMN_GAP` wide, that no line holding two cells or more in the band
    covers, with `BAND_ROWS` such lines standing on both sides of it, and more of them than lines of the band running
    across it. A line of one cell in the band (a group header centred over its columns, a label) closes no gap; a
    band of prose (one cell a line) is never parted, nor one whose cells are paragraphs with a few lines set in two
    (a description holding a list of values and their meanings, `- ALLOWED:  The user ...`). Also the lines between
    columns of right-aligned figures (`_aligned_columns`), returned apart as well."""
    out: list[float] = []
    aligned: list[float] = []
    for a, b in itertools.pairwise(xs):
        band = [w for w in words if a < (w.x0 + w.x1) / 2 < b]
        band_lines = text_lines(band)
        every = [_pieces(line) for line in band_lines]
        parted = [line for line, p in zip(band_lines, every, strict=True) if len(p) >= 2]
        rows = [p for p in every if len(p) >= 2]
        if len(rows) < BAND_ROWS:
            continue
        for left, right in itertools.pairwise(_joined_spans([span for row in rows for span in row])):
            line_x = (left[1] + right[0]) / 2
            apart = sum(1 for row in rows if row[0][1] < line_x < row[-1][0])
            across = sum(1 for p in every if any(s < line_x < e for s, e in p))
            if apart >= BAND_ROWS and apart > across:
                out.append(line_x)
        aligned.extend(_aligned_columns(parted, [x for x in out if a < x < b]))
    return sorted([*out, *aligned]), aligned


def _aligned_columns(lines: list[list[Word]], found: list[float]) -> list[float]:
    """Column lines between columns of right-aligned figures that the gaps of `_band_columns` miss (`lines`: the
    band's text lines of two cells or more): in a dense statistical table the columns stand a figure's width apart,
    so the widest figure of one column nearly meets the next column (`10,182.6  10,174.8`) and the band's lines leave
    no gap `COLUMN_GAP` wide at one x down all of them. The figures still say where the columns are: `BAND_ROWS`
    figures or more ending at one x (`ALIGN_SLACK`) are a column, and a line stands between each two neighbouring
    columns, in the gap between the left one's right edge and the right one's widest figure, where no line found
    already stands, and, as in `_band_columns`, more lines have words on both sides of it than words across it (a
    group's header over its columns on the line of the stub's header crosses it: `_spanned` makes it span them)."""
    figures = [w for line in lines for w in line if w.rotation == 0 and FIGURE.match(w.text)]
    ends: list[list[Word]] = []
    for w in sorted(figures, key=lambda w: w.x1):
        if ends and w.x1 - ends[-1][0].x1 <= ALIGN_SLACK:
            ends[-1].append(w)
        else:
            ends.append([w])
    columns = [c for c in ends if len(c) >= BAND_ROWS]
    spans = [[span for w in line if (span := inked(w)) is not None] for line in lines]
    out: list[float] = []
    for left, right in itertools.pairwise(columns):
        edge = max(w.x1 for w in left)
        start = min(w.x0 for w in right)
        if start <= edge or any(edge < x < right[0].x1 for x in found):
            continue
        # the line where fewest words stand across it: just past a word's end in the gap (a column's label wider than
        # its figures overhangs the gap on one side), its middle first
        ends_in = sorted({edge, *(x1 for line in spans for _, x1 in line if edge < x1 < start)})
        places = [(edge + start) / 2, *(x + (start - edge) / 8 for x in ends_in)]
        line_x = min(places, key=lambda x: sum(1 for line in spans for x0, x1 in line if x0 < x < x1))
        across = sum(1 for line in spans if any(x0 < line_x < x1 for x0, x1 in line))
        apart = sum(1 for line in spans if any(x1 <= line_x for _, x1 in line) and any(line_x <= x0 for x0, _ in line))
        if apart >= BAND_ROWS and apart > across:
            out.append(line_x)
    return out


def _spanned(
    soft: list[float],
    aligned: list[float],
    xs: list[float],
    ys: list[float],
    slot_words: dict[tuple[int, int], list[Word]],
) -> dict[int, set[float]]:
    """For each row, the `soft` column lines (`_band_columns`) its words run across: a cell's text crossing one spans
    it, and a cell alone on its row in a band spans the whole band when it crosses a soft line or, above the band's
    first row of several cells (a header), stands centred in the band (within `COLUMN_GAP`): a group's header
    centred over its columns (`GLM` over four models), bounded by the vertical rules either side. A line between
    columns of right-aligned figures (`aligned`) is crossed only by a word across it: the columns stand closer than a
    column gap, so two figures, or two labels wrapped in their narrow columns, may stand nearer each other than
    `COLUMN_GAP` and still be two cells."""
    hard = [x for x in xs if x not in soft]
    out: dict[int, set[float]] = {}
    for a, b in itertools.pairwise(hard):
        inner = [x for x in soft if a < x < b]
        if not inner:
            continue
        slots = [c for c in range(len(xs) - 1) if a <= (xs[c] + xs[c + 1]) / 2 <= b]
        header = True  # no row of several cells in this band yet
        for r in range(len(ys) - 1):
            band = [w for c in slots for w in slot_words.get((r, c), [])]
            cells = [p for line in text_lines(band) for p in _pieces(line, aligned)]
            crossed = {x for x in inner for x0, x1 in cells if x0 < x < x1}
            if len(cells) == 1:
                centred = abs((cells[0][0] + cells[0][1]) / 2 - (a + b) / 2) <= COLUMN_GAP
                if crossed or (header and centred):
                    crossed = set(inner)
            header = header and len(cells) < 2
            if crossed:
                out.setdefault(r, set()).update(crossed)
    return out


def _labels_foot(foot: float, across: list[float], xs: list[float], words: list[Word]) -> float:
    """The header band's foot moved down past the bands under it that hold column labels: each band between two
    rules across the table with a line of two cells or more and no line of figures only (a tax table boxes its column
    labels, `At least | But less than | Single | ...`, wrapped over up to three lines, under its groups' labels). A
    band of figures, or one of lone cells (a group row, a title), is the body's."""
    for below in (y for y in across if y > foot + LINE_MERGE):
        band = [w for w in words if foot < (w.y0 + w.y1) / 2 < below]
        cells = [(line, _pieces(line)) for line in text_lines(band)]
        if not any(len(p) >= 2 for _, p in cells) or any(all(FIGURE.match(w.text) for w in line) for line, _ in cells):
            break
        foot = below
    return foot


def _stacked_header(
    ys: list[float], rule: float, xs: list[float], words: list[Word], rules: Sequence[float] = ()
) -> list[float]:
    """Row lines (read from text lines) less those between two lines of the header band (above the first ruled line
    under the table's top that runs its width, `rule`: a straddle rule under a group's label is inside the band)
    whose cells each stand in one column: a column's label wrapped over two or three lines is one cell, as the
    reader takes it (a statistical table sets "Under" over "18 years" in its column, and
    the next label over the next column), where a line with a cell across a column line (a group's label centred
    over its columns) is a header row of its own, and so are two lines that each name themselves in the stub, the
    first column ("Distribution", "Method", "Object" over a model table's columns)."""
    head = [y for y in ys if y < rule - LINE_MERGE]
    if len(head) < 3:  # the top and two lines at least
        return ys
    own: list[bool] = []  # per header row: every cell stands within one column
    stub: list[str] = []  # per header row: the text of its cell in the first column
    for a, b in itertools.pairwise([*head, rule]):
        band = [w for w in words if a < (w.y0 + w.y1) / 2 < b]
        cells = [p for line in text_lines(band) for p in _pieces(line)]
        own.append(bool(cells) and not any(x0 + JOIN < x < x1 - JOIN for x0, x1 in cells for x in xs))
        stub.append(" ".join(w.text for w in band if w.x1 <= xs[1] + JOIN))
    drop = {  # never a rule's line (`rules`); a first column's label wrapped ("At" over "least") is one cell too
        head[k]
        for k in range(1, len(head))
        if own[k - 1]
        and own[k]
        and not (stub[k - 1] and stub[k] and not continues(stub[k - 1], stub[k]))
        and not any(abs(head[k] - y) <= JOIN for y in rules)
    }
    return [y for y in ys if y not in drop]


def _wrapped_labels(ys: list[float], xs: list[float], words: list[Word]) -> list[float]:
    """Row lines (read from text lines) less those under a label wrapped onto the line of its figures: a row holding
    only its first cell, whose text runs on (no sentence's end) into the next row's first cell, which starts in
    lowercase and has figures beside it ("Murder and nonnegligent" / "manslaughter ... 4.9 278.1"), as
    `unruled._joined` reads it in a table without rules; and less those over a row of wrapped cells (`wraps_cells`)."""
    slots: dict[tuple[int, int], list[Word]] = {}
    for w in words:
        slots.setdefault((_index(ys, (w.y0 + w.y1) / 2), _index(xs, (w.x0 + w.x1) / 2)), []).append(w)
    cols = len(xs) - 1

    def text(r: int, c: int) -> str:
        return " ".join(w.text for w in sorted(slots.get((r, c), []), key=lambda w: w.x0))

    rows = [[text(r, c) for c in range(cols)] for r in range(len(ys) - 1)]
    drop = {  # the line between r and r + 1
        r + 1 for r in range(len(rows) - 1) if wraps_label(rows[r], rows[r + 1]) or wraps_cells(rows[r], rows[r + 1])
    }
    return [y for k, y in enumerate(ys) if k not in drop]


def continues(upper: str, lower: str) -> bool:
    """Whether a cell's text `upper` runs on into the cell below (`lower`): no sentence's end, then lowercase."""
    return _RUNS_ON.search(upper) is not None and lower[:1].islower()


def wraps_cells(above: Sequence[str], row: Sequence[str]) -> bool:
    """Whether `row` (its cells' texts, the label first) holds the next lines of the cells above it: no label of its
    own, and each of its cells that holds text continues the cell above (`continues`: "Decomposition of fixed-effects
    contributions" / "or model comparison."). A row of its own with no label ("" | "each" | "0.01" under "Gnat" |
    "per gram" | "13.65") has a cell that does not (a figure)."""
    return not row[0] and any(row[1:]) and all(continues(a, b) for a, b in zip(above[1:], row[1:], strict=False) if b)


def wraps_label(above: Sequence[str], row: Sequence[str]) -> bool:
    """Whether `row` (its cells' texts, the label first) is the last line of the label above, set on the line of its
    figures (a statistical table sets a row's figures on its label's last line): the row above holds only its
    label, this row's label continues it (`continues`), and figures stand beside it."""
    return bool(above[0] and row[0]) and not any(above[1:]) and any(row[1:]) and continues(above[0], row[0])


def _index(lines: list[float], v: float) -> int:
    for k in range(len(lines) - 1):
        if v < lines[k + 1]:
            return k
    return len(lines) - 2


def _word_columns(words: list[Word], box: BBox) -> list[float]:
    # Column lines at the middle of every x gap no word's ink covers (a table without vertical rules; a label's dot
    # leaders cover none: `inked`). Where `BAND_ROWS` lines hold two cells or more, a line of one short cell
    # (under half the table's width) centred in the table (within `COLUMN_GAP`) closes no gap: a title over a table
    # stacked under another (two tables under one stack of booktabs rules), a header over all the columns. A column
    # flush right beside one flush left a word space apart is parted where its rows' alignment says (`aligned_starts`).
    lined = text_lines(words)
    apart = sorted(set(aligned_starts(lined).values()))
    rows = [(line, _pieces(line, apart)) for line in lined]
    if sum(1 for _, pieces in rows if len(pieces) >= 2) >= BAND_ROWS:
        middle, width = (box[0] + box[2]) / 2, box[2] - box[0]
        words = [
            w
            for line, pieces in rows
            if not (
                len(pieces) == 1
                and pieces[0][1] - pieces[0][0] < width / 2
                and abs((pieces[0][0] + pieces[0][1]) / 2 - middle) <= COLUMN_GAP
            )
            for w in line
        ]
    spans = _pieces(words, apart) or _joined_spans([(w.x0, w.x1) for w in words])
    return [box[0], *((left[1] + right[0]) / 2 for left, right in itertools.pairwise(spans)), box[2]]


def _rows_ruled(ys: list[float], rule_ys: list[float], xs: list[float], words: list[Word]) -> tuple[list[float], bool]:
    """The row lines `ys` of a table with rules across and none down, without those inside a band between two rules
    (`rule_ys`) where the rules part the rows, with whether they do: `BAND_ROWS` bands or more hold text, and each
    holds one line, or one line with words past the first column (a label wrapped over lines beside one line of
    figures: one row), or, in a quarter of them at most, lines that each fill every column (rows a producer set under
    one rule: each a row), but for the first band, the header: there lines of cells of several lines (an InDesign
    report's `Total Annual Expected` over `MW Capacity when` over `Operational`, read as three rows and the column's
    name cut in three) are one row. A booktabs table's few rules, or rules between groups of rows (a bank's
    statement, a price report's groups), part bands of many rows: they stay the lines."""
    bands: dict[int, dict[float, set[int]]] = {}
    for line in text_lines(words):
        if line:
            mid = round((min(w.y0 for w in line) + max(w.y1 for w in line)) / 2, 1)
            filled = bands.setdefault(_index(rule_ys, mid), {}).setdefault(mid, set())
            filled.update(_index(xs, (w.x0 + w.x1) / 2) for w in line)
    if len(bands) <= BAND_ROWS:
        return ys, False
    cols = len(xs) - 1
    whole: set[int] = set()  # the bands read as one row
    several = 0  # the bands below the first holding rows of their own
    for band, lines_of in bands.items():
        beyond = sum(1 for filled in lines_of.values() if filled - {0})
        full = sum(1 for filled in lines_of.values() if len(filled) == cols)
        if beyond <= 1 or (band == min(bands) and full < 2):
            whole.add(band)
        elif full < beyond:
            return ys, False  # rows with empty cells under one rule: the rules part groups of rows
        elif band != min(bands):
            several += 1
    if 4 * several > len(bands):
        return ys, False  # most rules part groups of full rows (a price report's groups), not rows
    kept = [y for y in ys if any(abs(y - r) <= LINE_MERGE for r in rule_ys) or _index(rule_ys, y) not in whole]
    return kept, True


def _word_rows(words: list[Word], rules: list[float]) -> list[float]:
    """Row lines between the text lines (`lines.lines`: words overlapping by half their height are one line) of each
    band between two horizontal rules (`rules`, top to bottom), halfway between neighbouring lines' centres. Glyph
    boxes of tightly set lines overlap, so a line is not found as a gap in the words' vertical coverage (a sweep for
    such gaps put a whole band of rows into one cell)."""
    centres = sorted((min(w.y0 for w in line) + max(w.y1 for w in line)) / 2 for line in text_lines(words) if line)
    return [
        (a + b) / 2
        for a, b in itertools.pairwise(centres)
        if _index(rules, a) == _index(rules, b)  # the same band: a rule between them parts them already
    ]


def cell_text(words: list[Word]) -> str:
    """A cell's words as its text: lines top to bottom (by overlap), each in reading order; rotated words after."""
    flat = " ".join(_line_text(line) for line in text_lines(words))
    # Rotated header text (read bottom to top or top to bottom) joins after: its words are in drawing order.
    turned = " ".join(w.text for w in words if w.rotation != 0)
    return _without_leaders(f"{flat} {turned}".strip())


def _line_text(line: Sequence[Word]) -> str:
    """A line's words joined by spaces, but for a word set in another size or font that touches the word before
    (`TOUCH_EM`): a subscript or an exponent set against its letter ("Y" and a smaller "i" read "Yi", "g" and "add"
    "gadd", "10" and "−2" "10−2"), a word whose face changes within it. The text layer parts words there though
    they have no space between them. Words of one size and font stay apart however close: tightly set text (Korean
    justified in a narrow cell) brings the boxes of words a space apart together."""
    out: list[str] = []
    for k, w in enumerate(line):
        if k:
            a = line[k - 1]
            small, large = sorted((a.size or a.height, w.size or w.height))
            # (a bullet or a dash before a word is a marker of its own, whatever its font; words read from pixels
            # have no font, and their boxes' heights vary by letter)
            other = (a.font != w.font or small < (1 - SIZE_STEP) * large) and any(ch.isalnum() for ch in a.text)
            other = other and bool(a.font and w.font) and not _wide(a.text[-1]) and not _wide(w.text[0])
            # overlapping boxes touch too (an italic letter's overhang reaches over its subscript)
            out.append("" if other and a.x0 < w.x0 and w.x0 - a.x1 <= TOUCH_EM * small else " ")
        out.append(w.text)
    return "".join(out)


def _wide(char: str) -> bool:
    """Whether a character is set full-width (Chinese, Japanese, Korean): such text parts words with no space, and
    where its text layer has a word break between a figure or a Latin word and a character ("2." and "藥", a
    watermark's "TACTRI" and "動", in another font, touching), the break is the text's own."""
    return unicodedata.east_asian_width(char) in ("W", "F")


def _without_leaders(text: str) -> str:
    """A label's text less the dot leaders it runs to its figures with ("Robbery . . . . . ." is "Robbery"): they are
    the gap between the columns drawn in dots, no part of the label (a table of contents' entries lose theirs too:
    `leaders`). The dot that ends the label's last word, spaced off from the leaders ("etc. . . ."), stays; a cell of
    dots alone (a figure not available) is left as it is."""
    tail = _LEADERS.search(text)
    bare = text[: tail.start()].rstrip() if tail else text
    if not tail or not bare.strip(" .·…"):
        return text
    if text[len(bare)] == "." and text[len(bare) + 1 : len(bare) + 2].isspace():
        bare += "."
    return bare


def inked(word: Word) -> tuple[float, float] | None:
    """The x range of `word` that closes a column gap: none for dot leaders (a label's dots run across the gap to its
    figure, as a statistical table or a statement sets them; the gap is still there to the reader), and a word's
    text less the leader dots it ends or starts with ("offenses......", "......204.5" where the dots touch the
    figure), in proportion to its characters (the text layer gives a word's box, not its letters')."""
    text = word.text
    tail = LEADER_TAIL.search(text)
    head = _LEADER_HEAD.match(text)
    start = head.end() if head else 0
    end = tail.start() if tail else len(text)
    if end <= start or not text[start:end].strip(" .·…"):
        dots = sum(text.count(c) for c in ".·…")
        return None if dots >= LEADER_DOTS else (word.x0, word.x1)
    if start == 0 and end == len(text):
        return word.x0, word.x1
    step = (word.x1 - word.x0) / len(text)
    return word.x0 + step * start, word.x0 + step * end

"""Tables without rules: columns of words that stay apart down a run of consecutive lines, read from the page's own
geometry and fonts.

A table that draws no rules is still a table to its reader because its words stand in columns: down several
consecutive lines the same x ranges stay empty between them, the lines follow at one pitch, the cells are short
(figures, names, a few words), and a header row is often set in another font. What else keeps x ranges empty down a
page never shows all of that at once:

- prose: word spaces line up only by chance, over two or three lines, and narrower than a column gap;
- two columns of prose: the gutter stays empty, but each "cell" is a line of many words (and a gutter with running
  text on both sides cuts rows apart before anything else is looked at, so a table inside one column is read alone);
- a numbered or bulleted list: the gap after the markers stays empty, but the first column is list markers;
- a table of contents with dot leaders: already read as a table by `leaders` before this stage runs;
- an index: its page numbers justified three or four to a line stand one under another, but its pieces end mid-list,
  with a comma or a range's dash (`_RUNS_INTO_NEXT`);
- display equations with their numbers: the words are set in math fonts;
- a paragraph's lines broken at its width: a line runs on into the next only where the next line's first word would
  not have fitted after it (`_wrapped`), so a column of short lowercase names ("beta" over "binomial") or of program
  identifiers is no running text, and a row filling every column under another is a row of its own;
- code aligned with spaces: monospace (unless a header row in a text face names its columns); a chart's tick labels:
  cut by the chart's axes; a paper's authors: centred, or records read down (each row one kind of line in all its
  cells: names, departments, e-mail addresses; the kind changing from row to row, where a table's changes between
  groups only);
- narrow justified columns, whose stretched word spaces line up by chance: lines filling their column beside a gutter
  (a table of records fills such columns too, names and addresses of one length, but its lines hold figures:
  `_figured`).

How:
1. Rows are the lines of the words no earlier stage took (`lines.lines`), never crossing a prose gutter; each row is
   cut into segments at gaps of at least `COLUMN_GAP_EM` of its font size (wider than any word space), or, between
   two figures, `FIGURE_SPACE_EM` (a dense table's columns stand a figure's width apart); a label's dot leaders close
   no gap (`tables.inked`).
2. Runs: consecutive rows, each at most `ROW_GAP` line heights below the last, that leave the same x ranges (at
   least a column gap wide) empty: the run's separators. A run starts at a row of two segments or more; a row joins
   it when it keeps every separator the run has (in a run of three columns or more, all but one that it fills only by
   a tight fit: a long cell run to within a space of the next column, or a right-aligned figure run back to within
   a space of the column before, `_tight`), or when it is a group's label
   longer than the first column is wide, the table going on under it (`_group_label`); anything else (a
   paragraph's line across the columns, a blank stretch) ends it. A column gap that most of the run's rows keep
   inside one of its columns, and the rest leave a space at or stop short of, is a column its first rows hid (a
   header whose two names stand a space apart: `_hidden`).
3. Evidence: the run becomes a table only with `MIN_ROWS` rows of two filled cells or more, most row pitches alike
   (`PITCH_SPREAD`), short cells in most columns (`PROSE_WORDS`), a first column that is not list markers, few math
   words (a figure set in a math font is a figure: `_formula`), and a positive sign: a numeric column; or, for a
   table of words, a header row set in another font or three columns or more, or zebra stripes banding the rows
   (`_striped`), not every column centred (centred names in columns are a paper's authors).
4. Header rows above the run (a row whose segments each sit over one or more of the run's columns, none shared) join
   it with their spans (a header cell "Year ended" centred over two columns of figures; a name wider than its column
   of figures overhangs the gap beside it without spanning the column beyond: `_reaches`); a header wrapped onto two
   lines in its own face, each piece over one column, is one row (`_stacked_header`). A spreadsheet's header band of
   names wrapped over two or three lines, centred or flush beside each other (their lines interleave, so rows say
   nothing of its cells), is read from its text lines: each name one cell in the column the body's words stand in,
   a group's label over the names of its columns one cell spanning them (`_band`).
5. Two tables side by side part: a list set in two halves, each under the same header, where the header repeats,
   or two tables of one key column beside others, where the key's name repeats (`_halves`); two tables of different
   lengths, each under a header of its own, where one's columns end and the other's go on (`_two_lengths`). A table
   of figures whose rows go on in a block beside it, with no header, is one table (`_continued`). A code listing set
   a column gap beside a small table (every word of its columns monospace, none of the table's, its lines going on
   past the table's rows) is no column of it (`_beside_listing`).

Gutters with running text on both sides part rows before anything else; their words are counted in each side's own
column (`_columns_beside`), so a table's gaps, with many names on each side across several columns, are no gutter.

A page read from pixels is left alone: OCR gives no fonts and its boxes wobble by a few pixels, and the layout model
marks its tables.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from modelhost.docengine.lines import Gutter, gutters, lines
from modelhost.docengine.tables import (
    ALIGN_SLACK,
    COLUMN_GAP,
    FIGURE,
    FoundTable,
    aligned_starts,
    cell_text,
    continues,
    inked,
    rule_frames,
    wraps_label,
)
from modelhost.docengine.types import BBox, Cell, Segment, Table, Word

#: A column gap is at least this many ems of the row's font size. Word spaces are 0.25-0.33 em and justified text
#: stretches them to ~0.6 em (the same measure as `lines.GUTTER_EM`); tables set their columns at least an em apart.
COLUMN_GAP_EM = 0.8
#: A row belongs to the run above it when the blank between them is at most this many line heights: rows of one table
#: follow at their line pitch, with at most a blank line between groups of rows; a paragraph or a heading after a
#: table usually stands further off, and in any case must also keep the table's columns empty to join it.
ROW_GAP = 1.3
#: Groups of a table's rows are set apart by a blank line (a statement's sections): a row at most this many line
#: heights below the run joins it when the table resumes there with a full row (`_resumes`); a paragraph after a
#: table is no row of two segments keeping its columns.
GROUP_GAP = 2.5
#: Rows (of two filled cells or more) a table needs: two lines side by side are a label and its value, a caption and
#: its number; three make columns (the same count `leaders.MIN_ROWS` asks of a table of contents).
MIN_ROWS = 3
#: A column whose filled cells hold this many words or more (median) is running text: two columns of prose read as a
#: "table" have lines of 8-12 words in each cell, a newspaper's narrow columns 5-7; table cells are figures, names and
#: short phrases. A table needs more than half of its columns short.
PROSE_WORDS = 5
#: A narrow column's lines are running text with this many words (median) when they also fill their column
#: (`FULL_LINE`, `FULL_SHARE`): a newspaper's or a four-column page's lines hold 4-7 words; three is the fewest a
#: justified line can be set in without gaping holes, and table cells that fill their column are short phrases.
RUNNING_WORDS = 3
#: A line fills its column when it reaches across this share of the column's width: justified lines reach all of
#: it, ragged-right (or ragged-left) lines 80-100% of it; a table's cells of names or phrases vary by half or more.
FULL_LINE = 0.8
#: The share of a column's lines that must fill it: all but a paragraph's last line (one in four to six lines).
FULL_SHARE = 0.6
#: Most row pitches (baseline to baseline) of a table agree within this share of their median: a table set in one
#: font advances one line at a time, with an occasional blank line between groups. "Most" is `PITCH_AGREE`.
PITCH_SPREAD = 0.25
#: The share of a run's row pitches that must agree (see `PITCH_SPREAD`).
PITCH_AGREE = 0.5
#: A numeric column has at least this share of its filled body cells numeric (figures, percentages, amounts, dashes
#: for none): a column of figures beside labels is the commonest unruled table (a financial statement, a results
#: table); a few text cells ("n/a", a footnote mark) do not make it text.
NUMERIC_SHARE = 0.6
#: A column's cells are centred when their centres agree within this many ems (glyph side bearings differ by a tenth
#: of an em or so between letters) and closer than their edges do (cells of different lengths differ there by ems).
FLUSH_EM = 0.3
#: A run more than this share of whose words are set in math fonts is display mathematics (equations with their
#: numbers aligned at the right margin), not a table.
MATH_SHARE = 0.5
#: A run this share of whose words are monospace is a code listing with its comments aligned, not a table (the share
#: `tables` uses for a framed listing).
CODE_SHARE = 0.8
#: A line ran on into the next only when the next line's first word would not have fitted after it: the narrowest
#: word space a line breaker allows, in ems of the type size (TeX shrinks its 0.333 em space to 0.222 em; Word and
#: LibreOffice set 0.25-0.28 em). A cell that stops short of its column's widest line by more than that space and the
#: next word was not wrapped: it ended, and the line below is a row of its own ("beta" over "binomial").
WRAP_SPACE_EM = 0.2
#: Two figures side by side at least this many ems apart are two values, however narrow the gap, where the rows
#: around keep a column gap there: a dense statistical table sets its columns a figure's width apart, so the widest
#: figure of one column ends a space or so short of the next column's ("10,182.6 10,174.8": 0.4 em at a 30 pt pitch
#: in 7 pt type). A number's own thin spaces ("1 234 567") are a sixth of an em, Helvetica's word space 0.28 em and
#: TeX's 0.33 em: wider than all of them.
FIGURE_SPACE_EM = 0.35
#: A group's header is widened over the free columns beside it only when that centres it better by more than this
#: many points (`_centred_span`): centring is set to a point or so; a header already centred on its span stays.
CENTRE_SLACK = 2.0
#: Row pairs whose kind of line (`_records`) must change for the rows to be records read down: every line of a
#: paper's author block differs from the one above (a name, a department, an address, an e-mail); a table's rows
#: change kind only between groups (identifiers without digits, then with: "Matrix" over "int8NDArray").
RECORD_CHANGES = 0.5
#: A header row of two segments or more may reach past the run's ends by this many line heights: a column's name
#: wider than its cells ("Species" over "setosa", left-aligned in the last column; a name over right-aligned figures
#: in the first) overhangs the table's edge by an em or a few. A paragraph's line over a table is one segment.
HEADER_OVERHANG = 3.0
#: A rule marks a group header's columns (`_ruled_under`) when it lies at most this many line heights under the
#: header's words: a `\\cmidrule` or a report's spanner rule sits in the gap between the header and the row below, a
#: third to a half of a line under it; the next row's own words start a line height down, and a rule further off
#: is the next row's, not this header's.
SPANNER_DROP = 0.8
#: ... or at most this many line heights above the words' bottom: a word box's descent reaches a little under the
#: baseline, and a rule set tight under it may sit inside; a rule higher up strikes the words through or is the
#: rule over the header, which marks no span of its.
SPANNER_RISE = 0.3
#: Rules weighed as spanners at most: each header segment looks at every one (the text layer keeps `MAX_RULES`).
MAX_SPANNERS = 2_000
#: A box's own edges may be doubled this many points inside it (a spreadsheet's double border: two rules a point or
#: two apart); a horizontal rule further inside rules the box's rows (`_boxed`).
BOX_RULE_INSET = 4.0
#: Header rows looked for above a run: a header of one or two lines ("Year ended" / "31 December").
MAX_HEADER_ROWS = 2
#: Two words of a header band stand on one text line where their boxes overlap by this share of the shorter one's
#: height: one line's words share their box (1.0), while a spreadsheet centres a one-line name beside a two-line
#: one half a line off (overlap 0.4-0.5: calc_state_crime's "Region and state" beside "Violent crime" / "rate (1)"),
#: and a wrapped name's lines stand a whole line apart. 0.75 parts the two.
SAME_LINE = 0.75
#: A header cell's next line stands at its face's leading, nearer under the line above than the table's rows stand
#: apart (their cells' padding): it is that cell's next line where the space between their boxes is under this share
#: of the space between the body's rows. Calc's exports: 0.9 and 1.2 points inside a wrapped name against 3.8 and 4.9
#: between rows (calc_state_crime, calc_macro_quarterly: 0.24 of it), and a group's label over the names under it
#: stands further than a row apart (1.3 of it). A LaTeX header of two rows stands at the body's own pitch, never
#: closer: its lines are rows (`_stacked_header` reads them).
WRAP_LEAD = 0.5
#: Rows and open runs considered at most: each row is compared with every open run, so a hostile page of thousands of
#: staggered one-word lines cannot make this grow without bound (a page of text has 40-80 lines).
MAX_ROWS = 2_000
#: Tables on one page weighed for one going on beside another (`_continued`, every pair after each join): a page
#: holds a few; a hostile page of hundreds of three-row tables must not make the pairs cost their cube.
MAX_TABLES = 32
#: Rows by which one of two tables set side by side ends before the other (`_two_lengths`): one blank row at a
#: table's foot is a missing value in its last row; two tables of different lengths differ by more.
SHORTER_BY = 2
#: A gutter bounds the column beside another gutter when it runs down at least this share of the other's height: a
#: table's column gaps all run its full height (1.0) and a three-column page's two gutters run the page; a gap inside
#: a table beside a page's gutter runs only the table's rows, a part of the page.
SAME_ROWS = 0.8
#: Gutters weighed for running text on both sides: a page has one or two (three columns), a table's cell gaps may add
#: a few; a hostile page of staggered words cannot make each of hundreds cost a pass over its lines.
MAX_GUTTERS = 16
#: Columns a table has at most: a statistical yearbook's widest tables have 20-30. A row cut into more segments is no
#: table row (scattered words); it ends the runs it overlaps, and each check of a row against a run stays bounded.
MAX_COLUMNS = 40
#: Rows looked back over for the row just above a run (its header): the other columns' lines interleave with a
#: column's own in top-to-bottom order, a few per line; a page of thousands of rows must not make each look cost all.
LOOK_BACK = 32
#: Runs followed at once: two or three columns side by side each hold one; more is a page of scattered words.
MAX_OPEN = 8

#: A figure, an amount or a percentage (`tables.FIGURE`).
_NUMBER = FIGURE
#: Zebra stripes that weigh for a table (`_striped`): two shaded rows with a plain one between are a pattern; one shaded
#: band is a highlighted row or a box behind the table.
MIN_STRIPES = 2
#: How far (points) a stripe's edges may fall short of the rows' extent, and stripes' widths differ: cell padding
#: puts a stripe's edge a few points past the text, and rounding differs by a point.
STRIPE_SLACK = 6.0
#: Fills weighed for stripes at most: each table candidate looks at every one (the text layer keeps `MAX_FILLS`).
MAX_STRIPES = 2_000
#: A list item's marker: a bullet, "1.", "(a)", "iv)". A column of these is a list's markers, not a table's column.
_MARKER = re.compile(r"^(?:[•·▪◦‣●○■□➢►▶✓✔\-–—*\uf0b7\uf0a7]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)]|\(?[ivxlc]{1,5}[.)])$")
#: A piece of text that runs on into the next: it ends with a comma or a range's dash ("26, 88," or "167–", an index's
#: page numbers broken wherever the justified line ends). A table's cells are whole: a figure, a name, a phrase.
_RUNS_INTO_NEXT = re.compile(r"\S[,–]$")
#: A name from a program (`bool_matrix_value`, `boolMatrix`, `int8NDArray`, `dMatrix.h`): an underscore, a digit, a
#: capital after a lowercase letter or a dot between letters in its first word. Running text goes on with words; a
#: column of such names under one another is a table's, each its own cell.
_IDENTIFIER = re.compile(r"^\S*(?:_|\d|[a-z][A-Z]|[A-Za-z]\.[A-Za-z])")
#: The multiplication signs of a figure in scientific notation ("6.25 · 10−2", "3 × 10⁸").
_TIMES = frozenset("·×")
#: A word that is nothing but an equation number, "(12)" or "(3a)".
_EQUATION_NUMBER = re.compile(r"^\(\d{1,3}[a-z]?\)$")


@dataclass(slots=True)
class _Row:
    """One line of words: indices into the page's words, its box, and its cuts into segments."""

    words: list[int]
    x0: float
    y0: float
    x1: float
    y1: float
    gaps: list[tuple[float, float]]  # the x ranges, a column gap wide, its words leave empty between its extremes
    segments: int
    spaces: list[tuple[float, float, float]] = dataclasses.field(default_factory=list)  # narrower: (from, to, size)
    figure_spaces: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # those between two figures
    aligned: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # column gaps by alignment, narrower

    @property
    def height(self) -> float:
        return self.y1 - self.y0


@dataclass(slots=True)
class _Run:
    """Consecutive rows that keep the same x ranges empty (`separators`)."""

    rows: list[int]
    separators: list[tuple[float, float]]
    x0: float
    x1: float
    last: _Row
    before: int = -1  # the row index just above the run's first row that overlaps it across (-1: none)


def find_unruled(
    words: Sequence[Word],
    body_size: float,
    rules: Sequence[Segment] = (),
    page_gutters: Sequence[Gutter] | None = None,
    fills: Sequence[BBox] = (),
) -> list[FoundTable]:
    """The tables without rules among `words` (a page's words no ruled table, picture or table of contents took),
    each with the indices of the words it takes. `rules` are the page's: a run of words that a closed group of rules
    (horizontal and vertical rules meeting: a chart's axes) cuts into is a figure's labels (two panels' ticks side by
    side), not a table; a frame around the whole run is only a box around it. `page_gutters` are `lines.gutters` of
    these words, when the caller has them already. `fills` are the page's filled rectangles: zebra stripes behind a
    run's rows are evidence of a table (`_striped`)."""
    if not words or sum(1 for w in words if w.font) < 0.5 * len(words):
        return []  # read from pixels (no fonts): left to the layout model
    frames = rule_frames(rules)
    plain = lines(words)
    found_gutters = gutters(words, body_size) if page_gutters is None else page_gutters
    gaps_at = _prose_gutters(found_gutters, plain)
    index = {id(w): i for i, w in enumerate(words)}
    starts = aligned_starts(plain)  # columns parted a word space apart, told by their rows' alignment
    rows = [_row([index[id(w)] for w in line], words, starts) for line in (lines(words, gaps_at) if gaps_at else plain)]
    rows = rows[:MAX_ROWS]
    found: list[FoundTable] = []
    taken: set[int] = set()
    stripes = sorted(fills[:MAX_STRIPES])
    spanners = [r for r in rules[:MAX_SPANNERS] if r.horizontal and r.length > 0]
    for run in _runs(rows):
        table = _table(run, rows, words, stripes, spanners, frames)
        if table is not None:
            table = _beside_listing(table, words)
        if table is None or table.words & taken or any(_cuts(frame, table.bbox) for frame in frames):
            continue
        found.extend(_side_by_side(table, words))
        taken |= table.words
    return _continued(found)


def _beside_listing(found: FoundTable, words: Sequence[Word]) -> FoundTable | None:
    """The table without the code listing set beside it (a manual's small table, then the code that typesets it, a
    column gap to its right), or None where what is left is no table; anything else as it is. The listing is the
    last columns, every word in them monospace where the table's own hold none (a table whose columns are program
    names has its column names in a text face over them), and its lines go on past the table's rows:
    `MIN_ROWS` - 1 rows or more hold the listing alone, or its lines go on under the table (`_goes_on_below`)."""
    table = found.table
    grid = table.grid()
    for cut in range(1, table.cols):
        # where column `cut`'s cells start: a word stands left of it by its centre
        edge = min((c.bbox[0] for c in table.cells if c.col == cut and c.bbox is not None), default=float("inf"))
        own = [i for i in found.words if (words[i].x0 + words[i].x1) / 2 < edge]
        listing = [i for i in found.words if (words[i].x0 + words[i].x1) / 2 >= edge]
        if not own or not listing or any(words[i].monospace for i in own):
            continue
        if not all(words[i].monospace for i in listing):
            continue
        alone = sum(
            1
            for row in grid
            if not any(c is not None and c.text for c in row[:cut]) and any(c is not None and c.text for c in row[cut:])
        )
        if alone < MIN_ROWS - 1 and not _goes_on_below(found, listing, words):
            return found
        kept = _parted(found, words, cut)
        if len(kept) != 2:
            return None
        left = kept[0]
        rows_of_two = sum(1 for row in left.table.grid() if sum(1 for c in row if c is not None and c.text) >= 2)
        return left if left.table.cols >= 2 and rows_of_two >= MIN_ROWS else None
    return found


def _goes_on_below(found: FoundTable, listing: list[int], words: Sequence[Word]) -> bool:
    """Whether the listing's lines go on under the table: a monospace word no table took starts where the listing's
    lines do (within `FLUSH_EM`), at most `ROW_GAP` line heights under the table's last row."""
    left = min(words[i].x0 for i in listing)
    height = statistics.median(words[i].y1 - words[i].y0 for i in listing)
    bottom = found.bbox[3]
    return any(
        w.monospace
        and abs(w.x0 - left) <= FLUSH_EM * (w.size or height)
        and bottom - 1 <= w.y0 <= bottom + ROW_GAP * height
        for n, w in enumerate(words)
        if n not in found.words
    )


def _continued(found: list[FoundTable]) -> list[FoundTable]:
    """Tables whose rows go on in a block beside them joined into one: a long table of figures set in two blocks
    side by side (a page's two text columns) with no header, the right block's top level with the left's to within
    a row (`_goes_on`). Its rows follow the left block's: the order its reader takes them in. A page of more than
    `MAX_TABLES` tables is left as it is."""
    out = list(found)
    joined = len(out) <= MAX_TABLES
    while joined:
        joined = False
        for a, b in itertools.permutations(out, 2):
            if _goes_on(a, b):
                cells = (*a.table.cells, *(dataclasses.replace(c, row=c.row + a.table.rows) for c in b.table.cells))
                box = (
                    min(a.bbox[0], b.bbox[0]),
                    min(a.bbox[1], b.bbox[1]),
                    max(a.bbox[2], b.bbox[2]),
                    max(a.bbox[3], b.bbox[3]),
                )
                merged = FoundTable(box, Table(a.table.rows + b.table.rows, a.table.cols, cells), a.words | b.words)
                out = [t for t in out if t is not a and t is not b] + [merged]
                joined = True
                break
    return out


def _goes_on(a: FoundTable, b: FoundTable) -> bool:
    """Whether `b` is the rest of `a`'s rows set beside it: right of it, its top within a row of `a`'s, no longer
    than `a`, the same columns holding the same kind of cell (figures or words) and no header row in either (a
    table of its own starts with a row of column names over its figures, or takes the header `_font_header`
    marks)."""
    ta, tb = a.table, b.table
    if ta.cols != tb.cols or ta.cols < 2 or tb.rows > ta.rows or b.bbox[0] < a.bbox[2]:
        return False
    pitch = (a.bbox[3] - a.bbox[1]) / max(ta.rows, 1)
    if abs(a.bbox[1] - b.bbox[1]) > pitch or any(
        c.header or c.row_span > 1 or c.col_span > 1 for c in ta.cells + tb.cells
    ):
        return False
    kinds = []
    for table in (ta, tb):
        grid = table.grid()
        columns = [[cell.text for row in grid if (cell := row[c]) is not None and cell.text] for c in range(table.cols)]
        numeric = [bool(col) and sum(1 for t in col if _NUMBER.match(t)) >= NUMERIC_SHARE * len(col) for col in columns]
        first = [cell.text if cell else "" for cell in grid[0]]
        if any(n and text and not _NUMBER.match(text) for n, text in zip(numeric, first, strict=True)):
            return False  # column names over figures: a header
        kinds.append(numeric)
    return kinds[0] == kinds[1]


def _side_by_side(found: FoundTable, words: Sequence[Word]) -> list[FoundTable]:
    """The table parted into the two tables set side by side that it reads (`_halves`, `_two_lengths`); anything
    else: the table as it is."""
    table = found.table
    grid = table.grid()
    cut = _halves(table, grid)
    if cut is None:
        cut = _two_lengths(table, grid)
    if cut is None:
        return [found]
    return _parted(found, words, cut)


def _halves(table: Table, grid: list[list[Cell | None]]) -> int | None:
    """Where a list set in two halves parts (a page that saves room sets a long list in two halves, each with its
    own header): its columns halve where the first row's header texts repeat in the same order, and each half
    starts with a column of labels (words, not figures, in most of its body cells); no cell spans the middle. Years
    repeated under two groups ("2010 2011 | 2010 2011" under "Men" and "Women") are one table: there the second
    half starts with figures. Two tables of one key column beside others ("dof error1 | dof error2") halve where
    the first column's name repeats, every name a word."""
    half = table.cols // 2
    if table.cols < 4 or table.cols % 2 or any(c.col < half < c.col + c.col_span for c in table.cells):
        return None
    head = [cell.text.casefold() if cell else "" for cell in grid[0]]
    if not all(head):
        return None
    if head[:half] != head[half:]:
        # Two tables sharing their first column (a key) beside other columns each: "dof error1 | dof error2",
        # column names only (years over two groups' columns are figures), none repeated inside a half.
        keyed = head[0] == head[half] and len(set(head[:half])) == len(set(head[half:])) == half
        return half if keyed and not any(_NUMBER.match(t) for t in head) else None
    for col in (0, half):
        labels = [cell.text for row in grid[1:] if (cell := row[col]) is not None and cell.text]
        if not labels or sum(1 for t in labels if _NUMBER.match(t)) * 2 >= len(labels):
            return None
    return half


def _two_lengths(table: Table, grid: list[list[Cell | None]]) -> int | None:
    """Where two tables set side by side part when they differ in length: each block of two columns or more has a
    header row of its own (words in every cell, no figure), one block's columns all end `SHORTER_BY` rows or more
    before the other's, filled down to their last row, and no cell spans the cut. One table's columns end together
    (a blank row in one column is a missing value, and a label alone on a row is a group's, in the first column);
    a table of figures set in two blocks has no header of words to part by."""
    if table.cols < 4 or len(grid) < MIN_ROWS + 1:
        return None
    head = [cell.text if cell else "" for cell in grid[0]]
    if not all(head) or any(_NUMBER.match(t) for t in head):
        return None
    last = [
        max((r for r, row in enumerate(grid) if (cell := row[c]) is not None and cell.text), default=0)
        for c in range(table.cols)
    ]
    for cut in range(2, table.cols - 1):
        if any(c.col < cut < c.col + c.col_span for c in table.cells):
            continue
        left, right = last[:cut], last[cut:]
        if len(set(left)) != 1 or len(set(right)) != 1 or abs(left[0] - right[0]) < SHORTER_BY:
            continue
        end = min(left[0], right[0])
        if all(cell is not None and cell.text for row in grid[: end + 1] for cell in row):
            return cut
    return None


def _parted(found: FoundTable, words: Sequence[Word], cut_col: int) -> list[FoundTable]:
    """`found` parted into two tables before column `cut_col`, each with its own filled rows (the list as it is
    where either side holds none)."""
    table = found.table
    cut = next(c.bbox[0] for c in table.cells if c.col == cut_col and c.bbox is not None)
    out = []
    for left in (True, False):
        side = frozenset(i for i in found.words if ((words[i].x0 + words[i].x1) / 2 < cut) == left)
        kept = [c for c in table.cells if (c.col < cut_col) == left]
        filled = sorted({c.row for c in kept if c.text})
        if not side or not filled:
            continue
        renumber = {r: n for n, r in enumerate(filled)}
        cells = tuple(
            dataclasses.replace(c, row=renumber[c.row], col=c.col if left else c.col - cut_col)
            for c in kept
            if c.row in renumber
        )
        box = (
            min(words[i].x0 for i in side),
            min(words[i].y0 for i in side),
            max(words[i].x1 for i in side),
            max(words[i].y1 for i in side),
        )
        out.append(FoundTable(box, Table(len(filled), cut_col if left else table.cols - cut_col, cells), side))
    return out if len(out) == 2 else [found]


def _cuts(frame: BBox, box: BBox) -> bool:
    """Whether a frame of rules overlaps a box without holding all of it."""
    overlaps = frame[0] < box[2] and box[0] < frame[2] and frame[1] < box[3] and box[1] < frame[3]
    holds = frame[0] <= box[0] + 1 and frame[1] <= box[1] + 1 and box[2] <= frame[2] + 1 and box[3] <= frame[3] + 1
    return overlaps and not holds


def widened(
    ruled: list[FoundTable], words: Sequence[Word], body_size: float, rules: Sequence[Segment] = ()
) -> list[FoundTable]:
    """Ruled tables, each open one (no vertical rules) replaced by the table without rules that reads the same
    words and more: rules drawn under the columns of figures only (a statement's lines above its totals) bound no
    rows and hold no labels, and read alone they put a column of figures in one cell and its labels after it. A
    loose one (rules between column groups and under its header only, `FoundTable.loose`) gives way to the table
    without rules that reads all its words in more cells: its bands and groups hold the rows and columns."""
    if not any(t.open or t.loose for t in ruled):
        return ruled  # nothing to widen: no second reading of the page
    shut = frozenset().union(*(t.words for t in ruled if not (t.open or t.loose)))
    rest = [i for i in range(len(words)) if i not in shut]
    out = [t for t in ruled if not (t.open or t.loose)]
    wide: list[FoundTable] = []
    for table in find_unruled([words[i] for i in rest], body_size, rules):
        table = FoundTable(table.bbox, table.table, frozenset(rest[i] for i in table.words))
        covered = [t for t in ruled if (t.open or t.loose) and t.words <= table.words]
        more_words = len(table.words) > sum(len(t.words) for t in covered)
        finer = all(t.loose for t in covered) and _cells(table) > sum(_cells(t) for t in covered)
        if covered and (more_words or finer):
            wide.append(table)
    gone = frozenset().union(*(t.words for t in wide))
    for t in ruled:
        if t.open and not t.words & gone:
            # read again from its own words alone: the page's lines run on into what stands beside its frame (a
            # column of charts' tick labels level with its rows), where its rules bound what it holds
            own = sorted(t.words)
            alone = [
                FoundTable(f.bbox, f.table, frozenset(own[i] for i in f.words))
                for f in find_unruled([words[i] for i in own], body_size, rules)
            ]
            held = sum(len(f.words) for f in alone)
            if 2 * held >= len(t.words) and sum(_cells(f) for f in alone) > _cells(t):
                wide.extend(alone)
                gone |= t.words
    return out + [t for t in ruled if (t.open or t.loose) and not t.words & gone] + wide


def _cells(found: FoundTable) -> int:
    return len(found.table.cells)


def _prose_gutters(found: Sequence[Gutter], plain: list[list[Word]]) -> list[Gutter]:
    """The gutters with running text on both sides (rows of `plain`, the page's lines): two columns of prose. Running
    text is `PROSE_WORDS` words or more on each side (median), or, in narrow columns, `RUNNING_WORDS` or more in
    lines that fill their column (`_full`): a narrow column's justified lines, whose stretched word spaces
    line up by chance with the next column's, would otherwise read as a table's cells across the gutter (casing
    cannot tell there: Arabic and Hebrew have none). A gutter between a table's label column and its figures is no
    reason to cut its rows. At most `MAX_GUTTERS` are weighed."""
    if not found:
        return []
    spans = [(sorted((w.x0, w.x1) for w in line), (line[0].y0 + line[0].y1) / 2) for line in plain]
    weighed = found[:MAX_GUTTERS]
    out = []
    for gutter in weighed:
        rows = [row for row, y in spans if gutter.y0 <= y <= gutter.y1]
        crossing = [line for line in plain if gutter.y0 <= (line[0].y0 + line[0].y1) / 2 <= gutter.y1]
        # Words are counted in each side's own column, up to the next gutter beside it down the same rows (a table's
        # column gaps all run its height): seven columns of names hold five words or more on each side of any of
        # their gaps, none in one column. A table's gaps beside a page's gutter run a part of it and bound nothing.
        lo, hi = _columns_beside(gutter, weighed)
        beside = [
            (
                sum(1 for x0, x1 in row if x1 <= gutter.x0 + 1 and x0 >= lo - 1),
                sum(1 for x0, x1 in row if x0 >= gutter.x1 - 1 and x1 <= hi + 1),
            )
            for row in rows
        ]
        left = [n for n, _ in beside if n]
        right = [n for _, n in beside if n]
        if not left or not right:
            continue
        if min(statistics.median(left), statistics.median(right)) >= PROSE_WORDS:
            out.append(gutter)
            continue
        # Each side's own column: up to the next gutter beside it that overlaps this one down the page.
        near = [g for g in weighed if g is not gutter and g.y0 < gutter.y1 and gutter.y0 < g.y1]
        start = max((g.x1 for g in near if g.x1 <= gutter.x0), default=float("-inf"))
        end = min((g.x0 for g in near if g.x0 >= gutter.x1), default=float("inf"))
        columns = (
            [[s for s in row if start - 1 <= s[0] and s[1] <= gutter.x0 + 1] for row in rows],
            [[s for s in row if gutter.x1 - 1 <= s[0] and s[1] <= end + 1] for row in rows],
        )
        if all(_full([line for line in column if line]) for column in columns) and not _figured(crossing):
            out.append(gutter)
    return out


def _columns_beside(gutter: Gutter, weighed: Sequence[Gutter]) -> tuple[float, float]:
    """Where the columns on each side of `gutter` start and end: at the nearest gutters beside it that run down
    `SAME_ROWS` of its height or more (the other gaps of one table, the other gutter of a three-column page); none:
    the page's edges."""
    height = gutter.y1 - gutter.y0
    along = [
        g for g in weighed if g is not gutter and min(g.y1, gutter.y1) - max(g.y0, gutter.y0) >= SAME_ROWS * height
    ]
    lo = max((g.x1 for g in along if g.x1 <= gutter.x0), default=float("-inf"))
    hi = min((g.x0 for g in along if g.x0 >= gutter.x1), default=float("inf"))
    return lo, hi


def _figured(crossing: list[list[Word]]) -> bool:
    """Whether most lines (`NUMERIC_SHARE`) hold a figure standing a column gap apart from its neighbours: the rows of
    a table of records (a name, an address, an employer, then an amount), whose narrow columns of names and addresses
    fill their width as justified lines do; a page of narrow prose columns has running text across every gutter."""
    if len(crossing) < MIN_ROWS:
        return False
    figured = 0
    for line in crossing:
        ordered = sorted(line, key=lambda w: w.x0)
        pieces: list[list[Word]] = [[ordered[0]]]
        for a, b in itertools.pairwise(ordered):
            if b.x0 - a.x1 >= COLUMN_GAP_EM * max(a.size or a.height, b.size or b.height, 1.0):
                pieces.append([])
            pieces[-1].append(b)
        figured += any(_NUMBER.match(" ".join(w.text for w in piece)) for piece in pieces)
    return figured >= NUMERIC_SHARE * len(crossing)


def _full(column: list[list[tuple[float, float]]]) -> bool:
    """Whether a column's lines (each its words' x spans) are running text by their shape: `RUNNING_WORDS` words or
    more (median), and most lines (`FULL_SHARE`) reach across `FULL_LINE` of the column's width, as a paragraph's
    lines do but its last; a table's column of words or figures has cells of many lengths."""
    if len(column) < MIN_ROWS or statistics.median(len(line) for line in column) < RUNNING_WORDS:
        return False
    extents = [(line[0][0], max(x1 for _, x1 in line)) for line in column]
    width = max(x1 for _, x1 in extents) - min(x0 for x0, _ in extents)
    full = sum(1 for x0, x1 in extents if x1 - x0 >= FULL_LINE * width)
    return full >= FULL_SHARE * len(extents)


def _row(members: list[int], words: Sequence[Word], starts: dict[int, float] | None = None) -> _Row:
    """One line's row: its words (`members`), its gaps and spaces. `starts`: words that start a column a space after
    the one before (`tables.aligned_starts`): that space is a column gap, however narrow."""
    ink = [(span, i) for i in members if (span := inked(words[i])) is not None] or [
        ((words[i].x0, words[i].x1), i) for i in members
    ]
    spans = sorted(
        (x0, x1, words[i].size or words[i].height, _NUMBER.match(words[i].text) is not None, id(words[i]))
        for (x0, x1), i in ink
    )
    gaps: list[tuple[float, float]] = []
    spaces: list[tuple[float, float, float]] = []
    figure_spaces: list[tuple[float, float]] = []
    aligned: list[tuple[float, float]] = []
    end, size, figure = spans[0][1], spans[0][2], spans[0][3]
    for x0, x1, s, is_figure, key in spans[1:]:
        apart = figure and is_figure and x0 - end >= FIGURE_SPACE_EM * max(size, s, 1.0)
        lined = starts is not None and key in starts and x0 > end
        if x0 - end >= COLUMN_GAP_EM * max(size, s, 1.0) or apart or lined:
            gaps.append((end, x0))
        elif x0 > end:
            spaces.append((end, x0, max(size, s, 1.0)))
        if apart:
            figure_spaces.append((end, x0))
        if lined:
            aligned.append((end, x0))
        end, size, figure = max(end, x1), s, is_figure
    return _Row(
        words=members,
        x0=spans[0][0],
        y0=min(words[i].y0 for i in members),
        x1=max(span[1] for span in spans),
        y1=max(words[i].y1 for i in members),
        gaps=gaps,
        segments=len(gaps) + 1,
        spaces=spaces,
        figure_spaces=figure_spaces,
        aligned=aligned,
    )


def _free(row: _Row) -> list[tuple[float, float]]:
    """The x ranges a row leaves empty: its gaps, and everything beyond its ends."""
    return [(float("-inf"), row.x0), *row.gaps, (row.x1, float("inf"))]


def _keeps(separators: list[tuple[float, float]], row: _Row) -> list[tuple[float, float]] | None:
    """The run's separators narrowed to what `row` also leaves empty, or None when the row closes one of them (a
    separator narrower than a column gap is closed)."""
    least = COLUMN_GAP_EM * max(row.height, 1.0) * 0.8
    free = _free(row)
    starts = [f0 for f0, _ in free]
    out = []
    # A row may close separators of a table of three columns or more by a tight fit (`_tight`), all but one: a long
    # surname and long given names of one donor each run to a word space of the next column. The one it keeps by a
    # column gap says it is a row of the table; a paragraph's line across the columns keeps none.
    tight = 0
    for a, b in separators:
        best: tuple[float, float] | None = None
        # The free ranges are sorted and apart: only those from the one holding `a` up to `b` can overlap.
        for f0, f1 in free[max(bisect.bisect_right(starts, a) - 1, 0) :]:
            if f0 >= b:
                break
            lo, hi = max(a, f0), min(b, f1)
            if hi - lo >= least and (best is None or hi - lo > best[1] - best[0]):
                best = (lo, hi)
        if best is None and any(f < b and a < t for f, t in [*row.figure_spaces, *row.aligned]):
            # two figures of neighbouring columns closer than a column gap (`FIGURE_SPACE_EM`), or two columns a
            # space apart that the rows' alignment parts (`tables.aligned_starts`)
            best = (a, b)
        if best is None and tight < len(separators) - 1 and _tight(row, a, b):
            best, tight = (a, b), tight + 1
        if best is None:
            return None
        out.append(best)
    return out


def _tight(row: _Row, a: float, b: float) -> bool:
    """Whether `row` fills the separator (a, b) only by a tight fit: a long cell runs into it, and a space of the row,
    narrower than a column gap, ends where the next column's cells start (within `FLUSH_EM`): "Washington-Montgomery,
    Alexandra" set against "Philadelphia" in a dense list, or "RODRIGUEZ PINGITORE" one word space from "CLAUDIA
    MONICA" (as wide as the spaces inside the names, so only where it ends tells it). A line across the columns is no
    such row: it closes the run's other separators too (`_keeps` lets a row fill one by a tight fit). The separator
    stays as the other rows make it.

    The long cell may be the right one instead: a right-aligned column's widest figure ("1,000.00") runs left into the
    separator, a space from a code column whose cells all end where the separator starts ("C00431445"): the space
    starts where the previous column's cells end (within `FLUSH_EM`)."""
    return _tight_space(row, a, b) is not None


def _tight_space(row: _Row, a: float, b: float) -> tuple[float, float] | None:
    """The space of `row` that parts two columns across the separator (a, b) by a tight fit (`_tight`), or None."""
    for f, t, size in row.spaces:
        flush = FLUSH_EM * size
        if (a < f and abs(t - b) <= flush) or (t < b and abs(f - a) <= flush):
            return f, t
    return None


def _cuts_of(row: _Row, separators: list[tuple[float, float]]) -> list[float]:
    """Where `row`, a row closing some of the run's separators by a tight fit, parts its columns: in each separator,
    the middle of the widest gap it leaves there, else of the space between two figures or of the tight space
    (`_tight_space`), else the separator's middle. A long cell runs into the separator from either side, so its
    middle may fall inside that cell's words; the row's own space between the two cells does not."""
    least = COLUMN_GAP_EM * max(row.height, 1.0) * 0.8
    cuts = []
    for a, b in separators:
        overlaps = [(min(b, f1) - max(a, f0), (max(a, f0) + min(b, f1)) / 2) for f0, f1 in _free(row)]
        wide = max((o for o in overlaps if o[0] >= least), default=None)
        figures = next(((f + t) / 2 for f, t in row.figure_spaces if f < b and a < t), None)
        space = _tight_space(row, a, b)
        if wide is not None:
            cuts.append(wide[1])
        elif figures is not None:
            cuts.append(figures)
        elif space is not None:
            cuts.append((space[0] + space[1]) / 2)
        else:
            cuts.append((a + b) / 2)
    return cuts


def _runs(rows: list[_Row]) -> list[_Run]:
    """Runs of rows keeping their separators, top to bottom; several open at once (a table in one column beside the
    other column's text)."""
    open_: list[_Run] = []
    done: list[_Run] = []
    for n, row in enumerate(rows):
        joined = False
        for run in list(open_):
            if row.x0 >= run.x1 or run.x0 >= row.x1:
                continue  # beside the run (the other column): neither joins nor ends it
            if row.segments > MAX_COLUMNS:
                open_.remove(run)
                done.append(run)
                continue
            gap = (row.y0 - run.last.y1) / max(row.height, run.last.height, 1.0)
            near = gap <= ROW_GAP or (gap <= GROUP_GAP and len(run.rows) >= MIN_ROWS - 1 and _resumes(run, n, rows))
            kept = _keeps(run.separators, row) if near and not joined else None
            if kept is not None and len(run.rows) <= MAX_HEADER_ROWS and len(row.gaps) > len(kept):
                open_.remove(run)  # a header over the columns of figures only: the run starts here (`_above`)
            elif kept is not None:
                run.rows.append(n)
                run.separators = kept
                run.x0, run.x1, run.last = min(run.x0, row.x0), max(run.x1, row.x1), row
                joined = True
            elif near and not joined and gap <= ROW_GAP and _group_label(run, n, rows):
                run.rows.append(n)  # the separators stay as the table's other rows make them
                run.last = row
                joined = True
            else:
                open_.remove(run)
                done.append(run)
        if not joined and 2 <= row.segments <= MAX_COLUMNS:
            before = next((k for k in _back(n) if rows[k].x0 < row.x1 and row.x0 < rows[k].x1), -1)
            open_.append(_Run([n], list(row.gaps), row.x0, row.x1, row, before))
            if len(open_) > MAX_OPEN:
                done.append(open_.pop(0))
    return done + open_


def _group_label(run: _Run, n: int, rows: list[_Row]) -> bool:
    """Whether row `n`, which closes a column gap of the run, is a group's label inside the table ("Inedible Packer
    Bleachable Tallow ($/cwt)" over its prices): one piece of text starting in the first column, longer than that
    column is wide but leaving the last column empty (a paragraph's line under a table runs across it), after
    `MIN_ROWS` - 1 rows of the run, and the table goes on just under it at its row pitch (`ROW_GAP`) with a row of
    two cells or more that keeps the run's separators (its first row)."""
    row = rows[n]
    if row.segments != 1 or len(run.rows) < MIN_ROWS - 1 or not run.separators:
        return False
    if row.x0 >= run.separators[0][0] or row.x1 >= run.separators[-1][1]:
        return False
    nxt = next((k for k in range(n + 1, min(n + 1 + MAX_OPEN, len(rows))) if _across(rows[k], run)), -1)
    if nxt < 0 or rows[nxt].segments < 2 or _keeps(run.separators, rows[nxt]) is None:
        return False
    return rows[nxt].y0 - row.y1 <= ROW_GAP * max(row.height, rows[nxt].height)


def _boxed(run: _Run, row: _Row, top: float, frames: Sequence[BBox], rules: Sequence[Segment]) -> bool:
    """Whether `row`, one piece of text, is a row of the run whose other cells are empty: it stands in the run's
    first column (not reaching the next column's words) and one frame of rules with no rule inside it holds both it
    and the run from its first row's `top` (a spreadsheet's box around names and values, some values not filled in:
    the frame bounds the table, where a paragraph's line under a table stands outside any frame around it)."""
    if row.segments != 1 or not run.separators or row.x1 >= run.separators[0][1] or row.x0 >= run.separators[0][0]:
        return False
    for f in frames:
        if not (
            f[0] <= min(run.x0, row.x0) + 1
            and max(run.x1, row.x1) <= f[2] + 1
            and f[1] <= top + 1
            and row.y1 <= f[3] + 1
        ):
            continue
        # a box with no rule inside it but its own edges (doubled, `BOX_RULE_INSET` inside): a grid's row rules
        # make it the ruled finder's, and a line alone under one of them is a label's second line
        inset = BOX_RULE_INSET
        if not any(
            f[1] + inset < (r.y0 + r.y1) / 2 < f[3] - inset and min(r.x0, r.x1) < row.x1 and row.x0 < max(r.x0, r.x1)
            for r in rules
        ):
            return True
    return False


def _resumes(run: _Run, n: int, rows: list[_Row]) -> bool:
    """Whether the table goes on at row `n` after a blank line: that row, or the next one across the run (a group's
    label standing alone, then its first row), has two segments or more and keeps the run's separators."""
    nxt = next((k for k in range(n + 1, min(n + 1 + MAX_OPEN, len(rows))) if _across(rows[k], run)), -1)
    for k in (n, nxt):
        if k < 0 or rows[k].segments < 2 or _keeps(run.separators, rows[k]) is None:
            continue
        if k == n or rows[nxt].y0 - rows[n].y1 <= ROW_GAP * max(rows[n].height, rows[nxt].height):
            return True
    return False


def _back(n: int) -> range:
    """The rows looked at above row `n`, nearest first: at most `LOOK_BACK`."""
    return range(n - 1, max(n - 1 - LOOK_BACK, -1), -1)


def _across(row: _Row, run: _Run) -> bool:
    return row.x0 < run.x1 and run.x0 < row.x1


def _table(
    run: _Run,
    rows: list[_Row],
    words: Sequence[Word],
    fills: Sequence[BBox] = (),
    spanners: Sequence[Segment] = (),
    frames: Sequence[BBox] = (),
) -> FoundTable | None:
    # Trailing rows of one segment (a paragraph's short last line under the table) are not the table's, unless a frame
    # of rules holds them with the table: labels whose values are left empty (`_boxed`).
    body = list(run.rows)
    while body and rows[body[-1]].segments < 2 and not _boxed(run, rows[body[-1]], rows[body[0]].y0, frames, spanners):
        body.pop()
    if not body:
        return None
    hidden = _hidden(run, body, rows)
    if hidden:
        run = dataclasses.replace(run, separators=sorted(run.separators + hidden))
    separators = run.separators
    cols = len(separators) + 1
    above, spanning = _above(run, body[0], rows, words, spanners, frames)
    # a header band of names wrapped over lines (`_band`): its rows are read from its text lines, not as rows
    band = [r for r in above if r in spanning]
    if above[: len(band)] == band:  # header rows lead: the lines under them in their face are the band's too
        band += _header_lines(band, above[len(band) :] + body, rows, words)
    body_rows = [r for r in body if r not in band]
    levels = None
    if band:
        widest = _body_separators(separators, body_rows, rows)
        levels = _band(band, body_rows, rows, words, widest, (run.x0, run.x1))
    if levels is not None:
        body, above = body_rows, [r for r in above if r not in band]
        spanning = (spanning - set(band)) | {band[0]}
    grid_rows = above + body
    middles = [(a + b) / 2 for a, b in separators]
    # rows that close a column gap by a tight fit (`_tight`): their words go by where their own spaces part them
    tight = {r for r in body if any(_keeps([separator], rows[r]) is None for separator in separators)}
    # a group's label run across a column gap (`_group_label`): one piece, all of it the first column's
    labels = {r for r in tight if rows[r].segments == 1 and rows[r].x0 < separators[0][0]}
    cells_words: list[list[list[int]]] = []
    for r in grid_rows:
        by_col: list[list[int]] = [[] for _ in range(cols)]
        cuts = _cuts_of(rows[r], separators) if r in tight else middles
        if r in labels:
            by_col[0].extend(rows[r].words)
            cells_words.append(by_col)
            continue
        for i in rows[r].words:
            # a word by the centre of its ink (leader dots go with the label they run from: `inked`), against the
            # run's separators, or in a row that runs a long cell tight against the next column, against where that
            # row's own spaces part its columns (`_cuts_of`)
            ink = inked(words[i])
            by_col[bisect.bisect_left(cuts, words[i].x0 if ink is None else (ink[0] + ink[1]) / 2)].append(i)
        cells_words.append(by_col)
    if _records([cells for r, cells in zip(grid_rows, cells_words, strict=True) if r not in spanning], words):
        return None  # a paper's authors side by side, read line by line before any line is taken for a wrapped cell
    groups = [[r] for r in grid_rows]
    if levels is not None:  # the band's rows first, each a row of its cells' words in their first columns
        for level in reversed(levels):
            by_col = [[] for _ in range(cols)]
            for start, _, ids, _ in level:
                by_col[start].extend(ids)
            cells_words.insert(0, by_col)
            groups.insert(0, [band[0]])
        groups[0] = list(band)
        fixed = len(levels)
    else:
        fixed = _stacked_header(cells_words, groups, spanning, rows, words, separators, (run.x0, run.x1), spanners)
    _joined(cells_words, groups, words, fixed)
    plain = [cells for group, cells in zip(groups, cells_words, strict=True) if group[0] not in spanning]
    banded = _header_band([rows[r] for r in grid_rows], fills)
    if not _evidence(
        plain, cells_words, [rows[r] for r in body], words, _striped([rows[r] for r in body], fills), banded
    ):
        return None
    header = _font_header(cells_words, words)
    members = frozenset(i for r in (band if levels is not None else []) + grid_rows for i in rows[r].words)
    lines_x = [run.x0, *((a + b) / 2 for a, b in separators), run.x1]
    cells: list[Cell] = []
    for r, (group, by_col) in enumerate(zip(groups, cells_words, strict=True)):
        top, bottom = rows[group[0]].y0, max(rows[k].y1 for k in group)
        if levels is not None and r < len(levels):
            # the band's first row is the header row, its second the names under the groups' labels, as the ruled
            # finder marks a grid's rows (`tables`: the first row) and docling's Markdown keeps them: a second row
            # marked a header is flattened into the first ("Deaths - Total"), the names lost as cells of their own
            for start, end, ids, down in levels[r]:
                named = [words[i] for i in ids]
                cells.append(
                    Cell(
                        row=r,
                        col=start,
                        text=cell_text(named),
                        row_span=down,
                        col_span=end - start,
                        header=r == 0,
                        bbox=(lines_x[start], min(w.y0 for w in named), lines_x[end], max(w.y1 for w in named)),
                    )
                )
            continue
        spans = None
        if group[0] in spanning:
            extent = (run.x0, run.x1)
            spans = _spans(rows[group[0]], words, separators, extent, spanners) or _spans(
                rows[group[0]], words, separators, extent
            )
        for start, end in spans or [(c, c + 1) for c in range(cols)]:
            cells.append(
                Cell(
                    row=r,
                    col=start,
                    text=cell_text([words[i] for c in range(start, end) for i in by_col[c]]),
                    col_span=end - start,
                    header=group[0] in spanning or (r == 0 and header),
                    bbox=(lines_x[start], top, lines_x[end], bottom),
                )
            )
    box = (
        min(words[i].x0 for i in members),
        min(words[i].y0 for i in members),
        max(words[i].x1 for i in members),
        max(words[i].y1 for i in members),
    )
    return FoundTable(box, Table(len(groups), cols, tuple(cells)), members)


def _hidden(run: _Run, body: list[int], rows: list[_Row]) -> list[tuple[float, float]]:
    """Column gaps the body's rows keep inside one of the run's columns that its first rows hid: a header whose
    names of two columns stand a space apart ("COMMITTEE AMOUNT") starts the run with one separator fewer than the
    rows under it part. A gap counts when at least half the body's rows (and `MIN_ROWS`) leave it free by a column
    gap and every other row after the first `MAX_HEADER_ROWS` leaves a space of its own there or stops short of it:
    a word across it (a cell running on) means the column is one. Each such gap is narrowed to what the rows that
    keep it leave free, as the run's own separators are."""
    edges = [run.x0, *(x for separator in run.separators for x in separator), run.x1]
    out: list[tuple[float, float]] = []
    for lo, hi in zip(edges[::2], edges[1::2], strict=True):
        common: tuple[float, float] | None = None
        keeping = 0
        for r in body:
            least = COLUMN_GAP_EM * max(rows[r].height, 1.0) * 0.8
            inside = [(a, b) for a, b in rows[r].gaps if a > lo and b < hi and b - a >= least]
            if len(inside) != 1:
                continue
            a, b = inside[0] if common is None else (max(common[0], inside[0][0]), min(common[1], inside[0][1]))
            if b - a < least:
                common = None  # gaps at different x (ragged words): no one boundary
                break
            common, keeping = (a, b), keeping + 1
        if common is None or keeping < max(MIN_ROWS, len(body) / 2):
            continue
        a, b = common
        crossed = any(
            _keeps([common], rows[r]) is None
            and rows[r].x1 > a
            and not any(f < b and a < t for f, t, _ in rows[r].spaces)
            for r in body[MAX_HEADER_ROWS:]
        )
        if not crossed:
            out.append(common)
    return out


def _stacked_header(
    grid: list[list[list[int]]],
    members: list[list[int]],
    spanning: set[int],
    rows: list[_Row],
    words: Sequence[Word],
    separators: list[tuple[float, float]],
    extent: tuple[float, float] | None = None,
    spanners: Sequence[Segment] = (),
) -> int:
    """A header whose cells wrap onto a second line ("Total" over "population", "Median" over "income") joined into
    one row, in place, and the count of header rows left at the top for `_joined` to keep apart. Two lines at the
    top are one header row when both are set in one face that is not the body's (a bold header over regular figures)
    and the upper line's every piece stands over a single column (a group's header over several columns spans them:
    `_spans`, it is a row of its own, and so is one a rule under it marks over several, `_ruled_under`), and some
    piece of the lower line stands under one of the upper's (a bold group's label alone in the stub under a header
    whose stub is empty, "Ethanol ($/gal)", is the body's first row). `members` (each grid row's rows) follows."""
    fixed = len(spanning)
    head = max(fixed, 1)  # the header's last line: the lowest spanning row, or the first row
    if len(grid) < MIN_ROWS + 2 or head > MAX_HEADER_ROWS:
        return fixed
    upper, lower = members[head - 1][0], members[head][0]
    spans = _spans(rows[upper], words, separators)
    if spans is not None and spanners and extent is not None:
        ruled = _spans(rows[upper], words, separators, extent, spanners)
        if ruled is not None and ruled != _spans(rows[upper], words, separators, extent):
            spans = ruled
    top = [i for cell in grid[head - 1] for i in cell]
    under = [i for cell in grid[head] for i in cell]
    body = [i for cells in grid[head + 1 :] for cell in cells for i in cell]
    if (
        spans is None
        or any(end - start > 1 for start, end in spans)
        or not top
        or not under
        or not body
        or lower in spanning
        or _face(top, words) != _face(under, words)
        or _face(under, words) == _face(body, words)
        or not any(cell and grid[head - 1][c] for c, cell in enumerate(grid[head]))
    ):
        return fixed
    for c, cell in enumerate(grid[head]):
        grid[head - 1][c].extend(cell)
    members[head - 1].extend(members[head])
    del grid[head], members[head]
    return head


@dataclass(slots=True)
class _Piece:
    """Words of one text line of a header band that stand together (no column gap between them), and their box."""

    ids: list[int]
    line: int
    x0: float
    y0: float
    x1: float
    y1: float


def _header_lines(band: list[int], body: list[int], rows: list[_Row], words: Sequence[Word]) -> list[int]:
    """The table's first rows (`body`: those above the run that keep its column gaps, then the run's) that are its
    header's lines, below the header rows found above it (`band`): rows set wholly in the header's face where the
    body below is set in another (a spreadsheet's bold names over regular figures), each after the first standing
    across a line of the one before or under it at the face's leading (`WRAP_LEAD`: names wrapped and centred or
    flush right beside each other keep the run's column gaps, so the run starts inside its header). A row of one
    piece standing alone ends it (a bold group's label over its rows), and at least `MIN_ROWS` rows stay the
    body's."""
    first = band[0] if band else (body[0] if body else -1)
    if first < 0 or len(body) <= MIN_ROWS:
        return []
    face = _face(rows[first].words, words)
    tail = [i for r in body[len(body) // 2 :] for i in rows[r].words]
    if face == _face(tail, words):
        return []
    gap = _row_gap(body[len(body) // 2 :], rows)
    out: list[int] = []
    for k, r in enumerate(body):
        row = rows[r]
        if len(body) - k <= MIN_ROWS or any(_face([i], words) != face for i in row.words):
            break
        prev = rows[out[-1]] if out else (rows[band[-1]] if band else None)
        near = prev is not None and (row.y0 < prev.y1 or (gap is not None and row.y0 - prev.y1 < WRAP_LEAD * gap))
        if (out and not near) or (row.segments < 2 and not near):
            break
        out.append(r)
    return out


def _body_separators(
    separators: list[tuple[float, float]], body: list[int], rows: list[_Row]
) -> list[tuple[float, float]]:
    """The run's separators as wide as the body's rows alone leave them: a header's lines that keep the run's column
    gaps narrow them to their own names' ends, and the band's names are placed against where the body's columns
    stand. A row that fills a separator by a tight fit says nothing of it."""
    out = []
    for a, b in separators:
        lo, hi = float("-inf"), float("inf")
        for r in body:
            free = next(((f0, f1) for f0, f1 in _free(rows[r]) if f0 <= a and b <= f1), None)
            if free is not None:
                lo, hi = max(lo, free[0]), min(hi, free[1])
        out.append((a if lo == float("-inf") else lo, b if hi == float("inf") else hi))
    return out


def _row_gap(body: list[int], rows: list[_Row]) -> float | None:
    """The space between the boxes of the body's consecutive rows (their median), None where they touch or overlap."""
    spaces = [rows[b].y0 - rows[a].y1 for a, b in itertools.pairwise(body)]
    gap = statistics.median(spaces) if spaces else 0.0
    return gap if gap > 0 else None


def _band(
    band: list[int],
    body: list[int],
    rows: list[_Row],
    words: Sequence[Word],
    separators: list[tuple[float, float]],
    extent: tuple[float, float],
) -> list[list[tuple[int, int, list[int], int]]] | None:
    """A header band's cells read from its text lines, as rows of (start column, end column, words, row span); None
    where the band shows no wrapped name or does not part into the body's columns (the rows are read as before).

    Names wrapped over two or three lines and centred beside each other (or set on one bottom line) make text lines
    that `lines.lines` joins into one row or parts at any line, so rows say nothing of cells here. Instead: the band's
    words part into text lines (`SAME_LINE`), each line into pieces at a column gap, or at a space wider than a word
    space (`FIGURE_SPACE_EM`) inside one of the body's column gaps ("Consumption Investment" set 0.7 em apart over two
    columns of figures); a piece and the one under it are one cell when they stand over each other alone (no other
    piece of either line reaches the other) at the face's leading (`WRAP_LEAD`). A cell wholly above another is a
    group's label: the band has two levels (three is read as before). The lower level's cells take the columns their
    extents reach (`_segment_ranges`, as a header row's segments do; one reaching no column's words is the column its
    middle stands in); a group's label spans the lower cells it stands over and widens over the free ones beside it
    to the range it is best centred over, of equals the widest (the range measured by the names under it: a group's
    label is centred over its columns' cells, whose names are centred in them, where right-aligned figures stand off
    their middle); a lower cell with no label over its columns that is centred down the whole band rather than on
    the lower row ("Period", the stub's name merged down both rows) heads both rows."""
    ids = [i for r in band for i in rows[r].words]
    gap = _row_gap(body, rows)
    if not ids or gap is None:
        return None
    text_lines: list[list[int]] = []
    for i in sorted(ids, key=lambda i: ((words[i].y0 + words[i].y1) / 2, words[i].x0)):
        w = words[i]
        for line in text_lines:
            u = words[line[0]]
            if min(u.y1, w.y1) - max(u.y0, w.y0) >= SAME_LINE * min(u.y1 - u.y0, w.y1 - w.y0):
                line.append(i)
                break
        else:
            text_lines.append([i])
    pieces: list[_Piece] = []
    for n, line in enumerate(text_lines):
        line.sort(key=lambda i: words[i].x0)
        top, bottom = min(words[i].y0 for i in line), max(words[i].y1 for i in line)
        current = [line[0]]
        for i in line[1:]:
            end = max(words[k].x1 for k in current)
            w = words[i]
            size = max(w.size or w.height, words[current[-1]].size or words[current[-1]].height, 1.0)
            space, middle = w.x0 - end, (end + w.x0) / 2
            if space >= COLUMN_GAP_EM * size or (
                space >= FIGURE_SPACE_EM * size and any(a <= middle <= b for a, b in separators)
            ):
                pieces.append(_piece(current, n, top, bottom, words))
                current = [i]
            else:
                current.append(i)
        pieces.append(_piece(current, n, top, bottom, words))

    def over(p: _Piece, q: _Piece) -> bool:
        return min(p.x1, q.x1) > max(p.x0, q.x0)

    parent = list(range(len(pieces)))

    def root(k: int) -> int:
        while parent[k] != k:
            k = parent[k]
        return k

    for a, p in enumerate(pieces):
        for b, q in enumerate(pieces):
            if q.line == p.line or q.y0 + q.y1 <= p.y0 + p.y1 or not over(p, q) or q.y0 - p.y1 >= WRAP_LEAD * gap:
                continue
            if any(o.line == q.line and o is not q and over(p, o) for o in pieces):
                continue
            if any(o.line == p.line and o is not p and over(q, o) for o in pieces):
                continue
            parent[root(b)] = root(a)
    stacks: dict[int, list[_Piece]] = {}
    for k, piece in enumerate(pieces):
        stacks.setdefault(root(k), []).append(piece)
    if all(len(stack) < 2 for stack in stacks.values()):
        return None  # no wrapped name: the header's rows are read as rows
    cells = [
        _Piece(
            [i for p in sorted(stack, key=lambda p: p.line) for i in p.ids],
            0,
            min(p.x0 for p in stack),
            min(p.y0 for p in stack),
            max(p.x1 for p in stack),
            max(p.y1 for p in stack),
        )
        for stack in stacks.values()
    ]
    cells.sort(key=lambda c: c.x0)
    upper, lower, _ = _levels(cells)
    if any(_levels(part)[2] == 0 for part in (upper, lower)):
        return None  # three levels or more
    ranges = _segment_ranges([(c.x0, c.x1) for c in lower], separators, extent, centred=True)
    if ranges is None:
        return None
    cols = len(separators) + 1
    if not upper:
        return [[(start, end, c.ids, 1) for (start, end), c in zip(ranges, lower, strict=True)]]
    # each column's names' extent under the labels: a lower cell's, else the column's words'
    left = [separators[c - 1][1] if c > 0 else extent[0] for c in range(cols)]
    right = [separators[c][0] if c < len(separators) else extent[1] for c in range(cols)]
    inside: set[int] = set()  # column boundaries inside a lower cell: no label's range ends there
    for (start, end), c in zip(ranges, lower, strict=True):
        for col in range(start, end):
            left[col], right[col] = c.x0, c.x1
        inside.update(range(start + 1, end))
    labels: list[tuple[int, int]] = []
    for label in upper:
        under = [r for r, c in zip(ranges, lower, strict=True) if min(c.x1, label.x1) > max(c.x0, label.x0)]
        reached = [c for c in range(cols) if _reaches(label.x0, label.x1, separators, c)]
        held = [col for start, end in under for col in range(start, end)] + reached
        if not held:
            return None
        labels.append((min(held), max(held) + 1))
    out_labels: list[tuple[int, int]] = []
    for k, (label, (start, end)) in enumerate(zip(upper, labels, strict=True)):
        low = out_labels[-1][1] if out_labels else 0
        high = labels[k + 1][0] if k + 1 < len(labels) else cols
        if start < low or end > high:
            return None
        middle = (label.x0 + label.x1) / 2
        options = [
            (s, e, abs((left[s] + right[e - 1]) / 2 - middle))
            for s in range(low, start + 1)
            for e in range(end, high + 1)
            if s not in inside and e not in inside
        ]
        if not options:
            return None
        s, e, _ = min(options, key=lambda o: (o[2], o[0] - o[1]))  # the best centred; of equals, the widest
        out_labels.append((s, e))
    first = [(s, e, label.ids, 1) for (s, e), label in zip(out_labels, upper, strict=True)]
    second: list[tuple[int, int, list[int], int]] = []
    labelled = [any(s < end and start < e for s, e in out_labels) for start, end in ranges]
    band_middle = (min(c.y0 for c in cells) + max(c.y1 for c in cells)) / 2
    row_middle = statistics.median((c.y0 + c.y1) / 2 for c, topped in zip(lower, labelled, strict=True) if topped)
    for (start, end), c, topped in zip(ranges, lower, labelled, strict=True):
        centre = (c.y0 + c.y1) / 2
        if not topped and abs(centre - band_middle) < abs(centre - row_middle):
            first.append((start, end, c.ids, 2))  # centred down the whole band, no label over it: both rows' name
        else:
            second.append((start, end, c.ids, 1))
    first.sort(key=lambda t: t[0])
    return [first, second]


def _levels(cells: list[_Piece]) -> tuple[list[_Piece], list[_Piece], int]:
    """A header band's cells parted into the level above (groups' labels) and the one below, at the height that
    parts them with the fewest cells standing across it (a name centred down both levels, counted below), and how
    many stand across; ([], cells, -1) where no height has cells wholly above and below it (one level: names of one,
    two and three lines centred beside each other overlap)."""
    best: tuple[int, list[_Piece], list[_Piece]] | None = None
    for cut in sorted({c.y1 for c in cells}):
        upper = [c for c in cells if c.y1 <= cut]
        lower = [c for c in cells if c.y1 > cut]
        if not any(c.y0 >= cut for c in lower):
            continue
        across = sum(1 for c in lower if c.y0 < cut)
        if best is None or across < best[0]:
            best = (across, upper, lower)
    return ([], cells, -1) if best is None else (best[1], best[2], best[0])


def _piece(ids: list[int], line: int, top: float, bottom: float, words: Sequence[Word]) -> _Piece:
    """A piece of a text line, its height the line's (a word's box is its letters': "rate" is x-height tall)."""
    return _Piece(list(ids), line, min(words[i].x0 for i in ids), top, max(words[i].x1 for i in ids), bottom)


def _evidence(
    plain: list[list[list[int]]],
    grid: list[list[list[int]]],
    body: list[_Row],
    words: Sequence[Word],
    striped: bool = False,
    banded: bool = False,
) -> bool:
    """Whether a run's cells read as a table (see the module docstring, step 3): `plain` the rows without spanning
    header cells, `grid` every row, `body` the run's own rows (for their pitch), `striped` whether zebra stripes band
    them (`_striped`: a sign as strong as a header in another font), `banded` whether a shaded band lies behind its
    first row alone (`_header_band`)."""
    cols = len(grid[0])
    if sum(1 for cells in grid if sum(1 for c in cells if c) >= 2) < MIN_ROWS:
        return False
    texts = [[" ".join(words[i].text for i in cell) for cell in cells] for cells in plain]
    column = [[t[c] for t in texts if t[c]] for c in range(cols)]
    if column[0] and all(_MARKER.match(t) for t in column[0]):
        return False  # a list: its markers stand in a column of their own
    every = [i for cells in grid for cell in cells for i in cell]
    if sum(1 for i in every if _formula(words[i])) > MATH_SHARE * len(every):
        return False  # display equations, their numbers aligned at the right
    if (
        sum(1 for i in every if words[i].monospace) >= CODE_SHARE * len(every)
        and not ((banded or _text_header(grid, words)) and _font_header(grid, words))
        and not _faces_apart(plain, words)
    ):
        # a code listing aligned with spaces (the ruled tables' rule, `tables._table`); a monospaced table's header
        # row stands in another face on a shaded band of its own (a listing's shading, if any, lies behind it all),
        # or in a text face over its columns (a listing's lines are all monospace, its comments too), or one of
        # its columns is set in a text face all down (`_faces_apart`)
        return False
    if column[-1] and all(_EQUATION_NUMBER.match(t) for t in column[-1]) and cols == 2:
        return False  # equations in a text font, numbered
    displayed = [[words[i] for cell in cells for i in cell] for cells in grid]
    if any(_numbered_equation(row) for row in displayed):
        # numbered display equations (a term left of `=`, the number flush right), the lines of an equation array
        # that carry no number (mostly math) and a line or two beside them (a justified line's wide spaces under
        # them: REVTeX's column after an equation array) are no table's rows
        equations = sum(1 for row in displayed if _numbered_equation(row) or _mostly_math(row))
        if sum(1 for cells in grid if sum(1 for c in cells if c) >= 2) - equations < MIN_ROWS:
            return False
    filled = [t for cells in column for t in cells]
    if 2 * sum(1 for t in filled if _RUNS_INTO_NEXT.search(t)) >= len(filled):
        return False  # a list run on across the lines (an index's page numbers, justified): its pieces end mid-list
    ids = [[cells[c] for cells in plain if cells[c]] for c in range(cols)]
    rights = _rights(plain, words)
    prose = sum(
        1 for c, cells in enumerate(column) if cells and (_flows(cells, ids[c], words, rights[c]) or _long(cells))
    )
    if 2 * prose >= cols:
        return False  # columns of running text (two columns of prose, a sidebar, a glossary's definitions)
    pitches = [b.y0 - a.y0 for a, b in itertools.pairwise(body)]
    if pitches:
        middle = statistics.median(pitches)
        agree = sum(1 for p in pitches if abs(p - middle) <= PITCH_SPREAD * middle)
        if agree < PITCH_AGREE * len(pitches):
            return False  # lines at no common pitch: scattered labels (a diagram's), not rows
    numeric = any(
        len(cells) >= MIN_ROWS - 1 and sum(1 for t in cells if _NUMBER.match(t)) >= NUMERIC_SHARE * len(cells)
        for cells in column[1:]
    )
    # Names, departments and addresses centred in columns (a paper's authors) are no table of words: a table's
    # columns stand flush on one side, its stub at least, save perhaps short centred values.
    return numeric or ((_font_header(grid, words) or cols >= 3 or striped) and not _centred(plain, words))


def _striped(body: list[_Row], fills: Sequence[BBox]) -> bool:
    """Whether zebra stripes band the rows: fills of one width (within `STRIPE_SLACK`) reaching across
    the rows' whole extent, at least `MIN_STRIPES` of them, each behind one row or more, and down the rows shaded
    and plain alternate (a row behind no stripe between every two stripes). Stripes alone make no table (taken for a
    table's rows, they raised the held-out split's CER: `tables.fill_rules`); here they only weigh for columns the
    words already keep apart down the rows."""
    if not body or not fills:
        return False
    x0, x1 = min(r.x0 for r in body), max(r.x1 for r in body)
    top, bottom = min(r.y0 for r in body), max(r.y1 for r in body)
    across = [
        f for f in fills if f[0] <= x0 + STRIPE_SLACK and f[2] >= x1 - STRIPE_SLACK and f[1] < bottom and f[3] > top
    ]
    if len(across) < MIN_STRIPES:
        return False
    width = statistics.median(f[2] - f[0] for f in across)
    # a stripe is behind a row, never half the rows: a box behind the whole table is no stripe
    stripes = [f for f in across if abs((f[2] - f[0]) - width) <= STRIPE_SLACK and f[3] - f[1] < (bottom - top) / 2]
    marks: list[int] = []  # per row, top to bottom: the stripe behind its middle, or -1
    for row in sorted(body, key=lambda r: r.y0):
        middle = (row.y0 + row.y1) / 2
        marks.append(next((k for k, f in enumerate(stripes) if f[1] <= middle <= f[3]), -1))
    bands = [k for k, _ in itertools.groupby(marks)]
    shaded = [k for k in bands if k >= 0]
    return (
        len(set(shaded)) >= MIN_STRIPES
        and len(shaded) == len(set(shaded))
        and all((a >= 0) != (b >= 0) for a, b in itertools.pairwise(bands))
    )


def _header_band(grid_rows: list[_Row], fills: Sequence[BBox]) -> bool:
    """Whether a shaded band lies behind the first row alone: a fill reaching across the rows' extent (within
    `STRIPE_SLACK`) behind the first row's middle and not behind the second's (a header band, as a report's
    monospaced tables set their column names on grey; a listing's shaded box lies behind all its lines)."""
    if len(grid_rows) < 2 or not fills:
        return False
    x0, x1 = min(r.x0 for r in grid_rows), max(r.x1 for r in grid_rows)
    first, second = grid_rows[0], grid_rows[1]
    return any(
        f[0] <= x0 + STRIPE_SLACK
        and f[2] >= x1 - STRIPE_SLACK
        and f[1] <= (first.y0 + first.y1) / 2 <= f[3]
        and not f[1] <= (second.y0 + second.y1) / 2 <= f[3]
        for f in fills[:MAX_STRIPES]
    )


def _faces_apart(plain: list[list[list[int]]], words: Sequence[Word]) -> bool:
    """Whether one column's words are all monospace and another's, filled in `MIN_ROWS` rows or more, none: a
    spreadsheet's names in Courier beside its values in Arial. A code listing aligned with spaces sets every line, its
    aligned comments too, in its one monospaced face."""
    cols = len(plain[0]) if plain else 0
    faces = []
    for c in range(cols):
        cells = [cells[c] for cells in plain if cells[c]]
        ids = [i for cell in cells for i in cell]
        faces.append(
            (len(cells), bool(ids) and all(words[i].monospace for i in ids), not any(words[i].monospace for i in ids))
        )
    return any(mono for _, mono, _ in faces) and any(n >= MIN_ROWS and text for n, _, text in faces)


def _records(plain: list[list[list[int]]], words: Sequence[Word]) -> bool:
    """Whether the run is records set side by side and read down (a paper's authors: name, department, university,
    e-mail; a letterhead's offices), not a table read across: every row of two cells or more holds one kind of line
    in all its cells (the same face, and all or none of them an e-mail address or holding a figure), and that kind
    changes from row to row below the first. A table's rows are alike below its header, and each holds a stub (a
    label) beside its values, so its rows are never of one kind; a row of figures (a matrix) is no record's line."""
    kinds: list[tuple[tuple[bool, str, float], bool, bool]] = []
    for cells in plain:
        filled = [cell for cell in cells if cell]
        if len(filled) < 2:
            continue
        texts = [" ".join(words[i].text for i in cell) for cell in filled]
        if sum(1 for t in texts if _NUMBER.match(t)) * 2 >= len(texts):
            return False
        kind = {
            (_face(cell, words), "@" in t, any(ch.isdigit() for ch in t)) for cell, t in zip(filled, texts, strict=True)
        }
        if len(kind) > 1:
            return False
        kinds.extend(kind)
    below = kinds[1:]
    changes = sum(1 for a, b in itertools.pairwise(below) if a != b)
    return len(set(below)) >= 2 and changes >= RECORD_CHANGES * (len(below) - 1)


def _centred(plain: list[list[list[int]]], words: Sequence[Word]) -> bool:
    """Whether every column of two cells or more is centred: its cells' centres agree within `FLUSH_EM` of the type
    size, closer than their left edges and their right edges do."""
    seen = False
    for col in range(len(plain[0])):
        cells = [[words[i] for i in cells[col]] for cells in plain if cells[col]]
        if len(cells) < 2:
            continue
        lefts = [min(w.x0 for w in c) for c in cells]
        rights = [max(w.x1 for w in c) for c in cells]
        centres = [(a + b) / 2 for a, b in zip(lefts, rights, strict=True)]
        size = statistics.median(w.size or w.height for c in cells for w in c)
        spread = max(centres) - min(centres)
        if spread > FLUSH_EM * size or spread >= min(max(lefts) - min(lefts), max(rights) - min(rights)):
            return False
        seen = True
    return seen


def _long(cells: list[str]) -> bool:
    """Whether a column's cells are lines of running text by their length (`PROSE_WORDS`)."""
    return statistics.median(len(t.split()) for t in cells) >= PROSE_WORDS


def _flows(cells: list[str], ids: list[list[int]], words: Sequence[Word], right: float) -> bool:
    """Whether a column's text runs on from cell to cell, as the lines of a paragraph do (a sidebar's phrases
    broken over lines: "Implement roles and" / "separation of duties"): in at least half of its consecutive pairs,
    and at least twice. A table's cells start afresh; its wrapped cells were joined (`_joined`) before this. `ids`
    are the cells' words and `right` the column's right end: a cell runs on only where it fills its line
    (`_filled`) and was wrapped (`_wrapped`), so a column of lowercase names ("beta", "binom") does not flow."""
    pairs = list(itertools.pairwise(zip(cells, ids, strict=True)))
    left = min((words[i].x0 for cell in ids for i in cell), default=right)
    runs_on = sum(
        1
        for (a, u), (b, v) in pairs
        if continues(a, b)
        and not _IDENTIFIER.match(b)
        and _filled(u, words, left, right)
        and _wrapped(u, v, words, right)
    )
    return runs_on >= 2 and 2 * runs_on >= len(pairs)


def _filled(cell: list[int], words: Sequence[Word], left: float, right: float) -> bool:
    """Whether a cell's line is one of running text by its shape: two words or more (no one sets prose a word to a
    line: a column a word wide is a list of names), reaching across `FULL_LINE` of its column (left to right), as a
    wrapped line of a paragraph does."""
    return len(cell) >= 2 and max(words[i].x1 for i in cell) - left >= FULL_LINE * (right - left)


def _rights(grid: list[list[list[int]]], words: Sequence[Word]) -> list[float]:
    """Each column's right end: where its widest line ends (a cell's text wraps at its column's width, which is at
    least that)."""
    cols = len(grid[0]) if grid else 0
    return [max((words[i].x1 for cells in grid for i in cells[c]), default=float("inf")) for c in range(cols)]


def _wrapped(upper: list[int], lower: list[int], words: Sequence[Word], right: float) -> bool:
    """Whether the line of `upper` (a cell's words) was broken before `lower`'s first word because that word did not
    fit after it within the column's right end `right` (`WRAP_SPACE_EM` of space between): a line breaker moves a
    word down only when it does not fit. A line ending in a hyphen was broken inside a word, which may fit whole."""
    if not upper or not lower:
        return False
    last = max((words[i] for i in upper), key=lambda w: w.x1)
    first = min((words[i] for i in lower), key=lambda w: w.x0)
    if last.text.endswith(("-", "\u00ad")):
        return True
    space = WRAP_SPACE_EM * (last.size or last.height)
    return last.x1 + space + (first.x1 - first.x0) > right


def _joined(grid: list[list[list[int]]], members: list[list[int]], words: Sequence[Word], fixed: int) -> None:
    """Wrapped cells joined, in place: a row (below the first `fixed` rows, the header) is the next line of the row
    above when its every filled cell continues the filled cell just above it (`tables.continues`: lowercase after no
    sentence's end), or, whatever the case, when it hangs under the row: its first column empty where most rows fill
    it (a row's label), another column empty too, and only words under words (no figures); or when the row above
    holds only a label and this row's label continues it, its figures beside (`tables.wraps_label`). A row of its
    own fills its label, or every other column (the rows under a group named once in the first column). `members`
    (each grid row's rows) follows."""
    labelled = sum(1 for cells in grid[fixed:] if cells[0])
    rights = _rights(grid[fixed:], words)
    r = fixed + 1
    while r < len(grid):
        above, row = grid[r - 1], grid[r]
        texts = [
            (" ".join(words[i].text for i in a), " ".join(words[i].text for i in b))
            for a, b in zip(above, row, strict=True)
        ]
        filled = [(a, b) for a, b in texts if b]
        hangs = (
            not row[0]
            and 2 * labelled > len(grid) - fixed
            and len(filled) < len(row) - 1
            and all(a and not _NUMBER.match(a) and not _NUMBER.match(b) for a, b in filled)
        )
        wraps = wraps_label([a for a, _ in texts], [b for _, b in texts])
        # every cell wrapped at once, in a row filling every column under another: rows of short lowercase names
        # ("log-normal" | "lnorm" | "meanlog, sdlog" over "logistic" | "logis" | ...), each line a row of its own
        full = all(above) and all(row)
        runs_on = not full and all(
            a and continues(a, b) and _wrapped(above[c], row[c], words, rights[c])
            for c, (a, b) in enumerate(texts)
            if b
        )
        if filled and (hangs or wraps or runs_on):
            for c, cell in enumerate(row):
                above[c].extend(cell)
            members[r - 1].extend(members[r])
            del grid[r], members[r]
        else:
            r += 1


def _font_header(grid: list[list[list[int]]], words: Sequence[Word]) -> bool:
    """Whether the table's first row is set in another font than the rest: bold over regular, another face or size."""
    first = [i for cell in grid[0] for i in cell]
    rest = [i for cells in grid[1:] for cell in cells for i in cell]
    if not first or not rest:
        return False
    return _face(first, words) != _face(rest, words)


def _text_header(grid: list[list[list[int]]], words: Sequence[Word]) -> bool:
    """Whether the first row names two columns or more in a text face (no monospace word): column names over a
    table of identifiers ("Type", "Function", "Source Code" over C++ names)."""
    first = [cell for cell in grid[0] if cell]
    return len(first) >= 2 and not any(words[i].monospace for cell in first for i in cell)


def _numbered_equation(row: Sequence[Word]) -> bool:
    """Whether a line is a numbered display equation: its last word an equation number ("(7b)"), and before it a
    formula's word in a math font or an equals sign. A results table's model numbers ("(1)", "(2)") head columns of
    their own, never stand last after a formula."""
    if len(row) < 2:
        return False
    last = max(row, key=lambda w: w.bbox[2])
    return bool(_EQUATION_NUMBER.match(last.text)) and any(
        w is not last and (_formula(w) or w.text == "=") for w in row
    )


def _mostly_math(row: Sequence[Word]) -> bool:
    """Whether more than `MATH_SHARE` of a line's words are a formula's (a display's line with no number)."""
    return sum(1 for w in row if _formula(w)) > MATH_SHARE * len(row)


def _formula(word: Word) -> bool:
    """Whether a word set in a math font is a formula's: figures set in math mode (`6.25`, the `·` and the exponent
    `−2` of `6.25 · 10−2`, a decimal point from a math font) are a table's figures all the same."""
    return word.math and not _NUMBER.match(word.text) and word.text not in _TIMES


def _face(ids: list[int], words: Sequence[Word]) -> tuple[bool, str, float]:
    """The face most of these words' characters are set in: bold or not, font name, size."""
    counts: dict[tuple[bool, str, float], int] = {}
    for i in ids:
        w = words[i]
        key = (w.bold, w.font, round(w.size or w.height, 1))
        counts[key] = counts.get(key, 0) + len(w.text)
    return max(counts, key=lambda k: counts[k])


def _above(
    run: _Run,
    first: int,
    rows: list[_Row],
    words: Sequence[Word],
    spanners: Sequence[Segment] = (),
    frames: Sequence[BBox] = (),
) -> tuple[list[int], set[int]]:
    """Rows just above the run that belong to it, top to bottom, and which of them are spanning header rows.

    Walking up from the run's first row over the rows that overlap it across, each at most `ROW_GAP` line heights
    above the last: a row that keeps the run's separators is one of its rows (a label standing alone in the first
    column, "Current assets", is kept only under a row that is kept too: alone it is the paragraph above); a row
    whose segments each sit over whole columns, no two over one, is a header row with spans ("Year ended" over two
    columns of figures; a lone segment only right of the first column, or it is a paragraph's short last line;
    and a row a rule under one of its names marks as a group's header (`_ruled_under`), whatever columns it keeps),
    and above a header row only header rows follow. At most `MAX_HEADER_ROWS` header rows and
    as many label rows."""
    out: list[int] = []
    spanning: set[int] = set()
    pending: list[int] = []
    below = rows[first]
    k = run.before
    while k >= 0 and len(spanning) < MAX_HEADER_ROWS and len(pending) <= MAX_HEADER_ROWS:
        row = rows[k]
        reach = HEADER_OVERHANG * max(row.height, 1.0)
        # a header set at the top of a tall row stands further above the body than a row's pitch; a frame of rules
        # holding both, and no rule between them, keeps it the table's (a spreadsheet's box around its grid)
        framed = k == run.before and _framed(row, below, frames, spanners)
        if (
            (below.y0 - row.y1 > ROW_GAP * max(row.height, below.height) and not framed)
            or row.x0 < run.x0 - 1 - (reach if row.segments >= 2 else 0.0)
            or row.x1 > run.x1 + 1 + (reach if row.segments >= 2 else 0.0)
        ):
            break
        ruled = bool(spanners) and _spans(row, words, run.separators, (run.x0, run.x1), spanners) not in (
            None,
            _spans(row, words, run.separators, (run.x0, run.x1)),
        )
        if not spanning and not ruled and _keeps(run.separators, row) is not None:
            pending.insert(0, k)
            if row.segments >= 2:
                out[:0] = pending
                pending = []
        elif _spans(row, words, run.separators) is not None and (
            ruled or row.segments >= 2 or (row.x0 > sum(run.separators[0]) / 2 and not _title(row, run))
        ):
            out[:0] = [k, *pending]
            pending = []
            spanning.add(k)
        else:
            break
        below = row
        k = next((j for j in _back(k) if _across(rows[j], run)), -1)
    return out, spanning


def _framed(upper: _Row, lower: _Row, frames: Sequence[BBox], rules: Sequence[Segment]) -> bool:
    """Whether one frame of rules holds both rows and no horizontal rule inside it runs between them."""
    for f in frames:
        if not (
            f[0] <= min(upper.x0, lower.x0) + 1
            and max(upper.x1, lower.x1) <= f[2] + 1
            and f[1] <= upper.y0 + 1
            and lower.y1 <= f[3] + 1
        ):
            continue
        x0, x1 = max(upper.x0, lower.x0), min(upper.x1, lower.x1)
        if not any(
            upper.y1 < (r.y0 + r.y1) / 2 < lower.y0 and min(r.x0, r.x1) < x1 and x0 < max(r.x0, r.x1) for r in rules
        ):
            return True
    return False


def _title(row: _Row, run: _Run) -> bool:
    """Whether a lone piece of text over the run is centred on it (within `tables.COLUMN_GAP`): the table's title set
    inside it ("Balance sheet" over a statement's two sides), as the ruled finder reads a short centred line, not
    a group's header, which is centred over the columns it names."""
    return abs((row.x0 + row.x1) / 2 - (run.x0 + run.x1) / 2) <= COLUMN_GAP


def _spans(
    row: _Row,
    words: Sequence[Word],
    separators: list[tuple[float, float]],
    extent: tuple[float, float] | None = None,
    spanners: Sequence[Segment] = (),
) -> list[tuple[int, int]] | None:
    """A header row's cells as column ranges [start, end): each segment covers the columns its extent reaches into;
    None when two segments share a column. Columns no segment covers are cells of their own (empty). A segment
    reaching past a column gap's middle covers the column beyond only if it reaches that column's words too (the
    separators run from one column's widest cell to the next one's): a header wider than its column of right-aligned
    figures ("Sepal.Length" over "5.1") overhangs into the gap before it, not into the column of row numbers there.
    Given the table's `extent` (left, right), a group's header over two columns or more spans the free columns beside
    it too where that centres it over its columns (`_centred_span`): "Total arrests" centred over three columns of
    right-aligned figures reaches only two of them. A word that ends where a column's right-aligned cells end (the
    separator's start, within `tables.ALIGN_SLACK`) ends its segment when the next word ends at the next column's
    right edge too; so does a segment starting at a column's left edge when the next word, across the next column
    gap, ends at the next column's right edge (a code's name over left-aligned codes, an amount's over right-aligned
    amounts: "COMMITTEE AMOUNT"). Given the table's extent and horizontal `spanners` (the page's rules), a segment
    with a rule just under it, wider than it, reaching no other segment and not every column, spans the columns that
    rule reaches (`_ruled_under`): the rule a report or a booktabs `\\cmidrule` draws under a group's header marks its
    columns, where centring cannot ("2019-2024" centred over six year columns is as well centred over the middle
    two)."""
    segments: list[tuple[float, float]] = []
    edges = [a for a, _ in separators] + ([extent[1]] if extent is not None else [])  # the columns' right edges
    lefts = ([extent[0]] if extent is not None else []) + [b for _, b in separators]  # and their left edges
    for i in sorted(row.words, key=lambda i: words[i].x0):
        w = words[i]
        # a word ending where a column's right-aligned cells end, and the next word where the next column's do: two
        # columns' names set a space apart over dense figures ("mpg cyl" over "21.0 6")
        flush = segments and any(abs(segments[-1][1] - a) <= ALIGN_SLACK < w.x0 - a for a, _ in separators)
        flush = flush and any(abs(w.x1 - a) <= ALIGN_SLACK for a in edges)
        # or the segment starting where a column's left-aligned cells start, and the word, across the next column gap,
        # ending where the next column's right-aligned cells end: a code's name over codes and an amount's name over
        # right-aligned amounts, a space apart ("COMMITTEE AMOUNT")
        flush = flush or bool(
            segments
            and any(abs(segments[-1][0] - b) <= ALIGN_SLACK for b in lefts)
            and any(segments[-1][1] < b and w.x0 > a for a, b in separators)
            and any(abs(w.x1 - a) <= ALIGN_SLACK for a in edges)
        )
        if segments and not flush and not any(segments[-1][1] <= a and b <= w.x0 for a, b in row.gaps):
            segments[-1] = (segments[-1][0], max(segments[-1][1], w.x1))
        else:
            segments.append((w.x0, w.x1))
    ruled: set[int] = set()
    if extent is not None and spanners:
        widened_by = [_ruled_under(k, segments, row, spanners, separators, extent) for k in range(len(segments))]
        ruled = {k for k, rule in enumerate(widened_by) if rule is not None}
        segments = [
            segment if rule is None else (min(segment[0], rule[0]), max(segment[1], rule[1]))
            for segment, rule in zip(segments, widened_by, strict=True)
        ]
    return _segment_spans(segments, separators, extent, ruled)


def _segment_spans(
    segments: list[tuple[float, float]],
    separators: list[tuple[float, float]],
    extent: tuple[float, float] | None = None,
    ruled: set[int] | frozenset[int] = frozenset(),
) -> list[tuple[int, int]] | None:
    """Header segments (x ranges, left to right) as column ranges [start, end) with the free columns between them as
    cells of their own, or None when two segments share a column (`_segment_ranges`)."""
    out = _segment_ranges(segments, separators, extent, ruled)
    if out is None:
        return None
    cells: list[tuple[int, int]] = []
    col = 0
    for start, end in out:
        cells.extend((c, c + 1) for c in range(col, start))
        cells.append((start, end))
        col = end
    cells.extend((c, c + 1) for c in range(col, len(separators) + 1))
    return cells


def _segment_ranges(
    segments: list[tuple[float, float]],
    separators: list[tuple[float, float]],
    extent: tuple[float, float] | None = None,
    ruled: set[int] | frozenset[int] = frozenset(),
    *,
    centred: bool = False,
) -> list[tuple[int, int]] | None:
    """Each header segment's column range [start, end), left to right, or None when two segments share a column
    (`_spans`, which says how a segment reaches its columns; `ruled` are the segments a rule under them widened,
    which centring does not widen again). `centred`: a segment reaching no column's words is the column's its middle
    stands in (a name centred in its cell over narrow right-aligned figures, "Days with rain" over "1"), not a gap's."""
    bounds = [(a + b) / 2 for a, b in separators]
    out: list[tuple[int, int]] = []
    col = 0
    for x0, x1 in segments:
        start = sum(1 for b in bounds if x0 > b)
        end = sum(1 for b in bounds if x1 > b) + 1
        # trimmed to the columns whose words it reaches (column c runs from separator c-1's end to separator c's
        # start), unless that leaves none (a segment inside a gap)
        reached = [c for c in range(start, end) if _reaches(x0, x1, separators, c)]
        if reached:
            start, end = reached[0], reached[-1] + 1
        elif centred:
            start = sum(1 for b in bounds if (x0 + x1) / 2 > b)
            end = start + 1
        if start < col:
            return None
        out.append((start, end))
        col = end
    if extent is not None:  # left to right, each seeing its left neighbour's widened span
        for k, segment in enumerate(segments):
            if out[k][1] - out[k][0] >= 2 and k not in ruled:
                out[k] = _centred_span(segment, out, k, separators, extent)
    return out


def _ruled_under(
    k: int,
    segments: list[tuple[float, float]],
    row: _Row,
    spanners: Sequence[Segment],
    separators: list[tuple[float, float]],
    extent: tuple[float, float],
) -> tuple[float, float] | None:
    """The x range of a rule drawn just under segment `k` of a header row to mark the columns it spans, or None: a
    horizontal rule whose height lies within `SPANNER_DROP` line heights under the row's words, that runs under the
    segment's middle and past at least one of its ends, reaches no other segment of the row (a rule under the whole
    header row is the header's rule, not one name's), and leaves some column unreached (a rule under every column is
    the table's own)."""
    x0, x1 = segments[k]
    middle = (x0 + x1) / 2
    height = max(row.height, 1.0)
    best: tuple[float, float] | None = None
    for rule in spanners:
        y = (rule.y0 + rule.y1) / 2
        lo, hi = min(rule.x0, rule.x1), max(rule.x0, rule.x1)
        if not (row.y1 - SPANNER_RISE * height <= y <= row.y1 + SPANNER_DROP * height and lo < middle < hi):
            continue
        if lo > x0 - ALIGN_SLACK and hi < x1 + ALIGN_SLACK:
            continue  # no wider than the name: an underline, it marks no columns
        if any(j != k and min(hi, b) > max(lo, a) for j, (a, b) in enumerate(segments)):
            continue
        if all(_reaches(lo, hi, separators, c) for c in range(len(separators) + 1)):
            continue
        if best is None or hi - lo > best[1] - best[0]:
            best = (lo, hi)
    return best


def _centred_span(
    segment: tuple[float, float],
    spans: list[tuple[int, int]],
    k: int,
    separators: list[tuple[float, float]],
    extent: tuple[float, float],
) -> tuple[int, int]:
    """Segment `k`'s span (`spans[k]`) widened over the columns free beside it (up to its neighbours' spans) to the
    range whose words' extent it is centred over best: a group's header is centred over the columns it names (as
    `tables` reads a band's header between vertical rules). Only a centring better by more than `CENTRE_SLACK`
    counts: a span it is already centred on stays. Column c's words run from separator c-1's end to separator c's
    start; the first and last columns end at the table's `extent`."""
    start, end = spans[k]
    low = spans[k - 1][1] if k > 0 else 0
    high = spans[k + 1][0] if k + 1 < len(spans) else len(separators) + 1
    middle = (segment[0] + segment[1]) / 2

    def off(s: int, e: int) -> float:
        left = separators[s - 1][1] if s > 0 else extent[0]
        right = separators[e - 1][0] if e - 1 < len(separators) else extent[1]
        return abs((left + right) / 2 - middle)

    best = min(((s, e) for s in range(low, start + 1) for e in range(end, high + 1)), key=lambda r: off(*r))
    return best if off(*best) < off(start, end) - CENTRE_SLACK else (start, end)


def _reaches(x0: float, x1: float, separators: list[tuple[float, float]], c: int) -> bool:
    """Whether the x range (x0, x1) overlaps column `c`'s words: from the end of the separator before it to the start
    of the one after it."""
    lo = separators[c - 1][1] if c > 0 else float("-inf")
    hi = separators[c][0] if c < len(separators) else float("inf")
    return min(x1, hi) > max(x0, lo)

"""One page's content to its layout: blocks of the right kind in reading order.

The stages, each its own module: `tables` (ruled tables take their words first), pictures (image objects, and
figures drawn as vectors that `figures` finds, take the text drawn over them: figure labels and chart ticks are not
body text), `leaders` (tables of contents), `unruled`
(tables without rules: columns of words kept apart down a run of lines), `lines` (words to lines to pieces),
`order` (XY-cut reading order), `paragraphs` (pieces to paragraphs) and `classify` (what each paragraph is).
`Style` carries what only the whole document knows (body size, heading sizes, the title's size), so a page is judged
like its neighbours; `document_style` measures it from every page's words, cheaply, before any page is analysed.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from modelhost.docengine.backdrops import is_backdrop
from modelhost.docengine.classify import (
    CAPTION,
    CODE_SHARE,
    HEADING_RATIO,
    LIST_ROWS,
    NUMBERED,
    Style,
    centred_over,
    classify,
    counts_on,
    italic_label,
    keyed,
    margin_line,
    sections,
)
from modelhost.docengine.figures import (
    box_area,
    box_overlap,
    boxes_apart,
    centre_in,
    contains,
    drawn_within,
    vector_figures,
)
from modelhost.docengine.furniture import PAGE_NUMBER
from modelhost.docengine.leaders import find_contents
from modelhost.docengine.lines import Gutter, Piece, gutters, lines, pieces
from modelhost.docengine.order import order
from modelhost.docengine.paragraphs import BULLETS, SENTENCE_END, join, paragraphs
from modelhost.docengine.tables import (
    LEADER_TAIL,
    FoundTable,
    fill_rules,
    find_tables,
    frames_and_fields,
    merge_rules,
)
from modelhost.docengine.types import (
    BBox,
    Block,
    Cell,
    ImageRegion,
    Kind,
    PageContent,
    PageLayout,
    Segment,
    Table,
    Word,
)
from modelhost.docengine.unruled import MIN_ROWS, find_unruled, widened
from modelhost.docengine.wordtable import table_blocks

__all__ = ["Style", "analyse", "continues", "document_style", "join_pages", "table_evidence", "upright"]

#: An image covering this share of the page or more is a background (a cover, a scan under its own text layer):
#: it is still a picture, but the text over it is the page's text.
BACKGROUND_SHARE = 0.6
#: The title's size must be used only in this top share of the first page to be the title's...
TITLE_ZONE = 0.5
#: ...by at most this many adjacent lines (each under 6% of the page height from the last).
TITLE_LINES = 3
#: A paragraph is continued across a column break only if it has this many words: a stray label or number
#: above a column is no sentence to continue.
MIN_CONTINUED_WORDS = 4
#: A lone number that is the page's first or last line, inside this share of the page height at the top or
#: bottom, is a page number (a page's own number sits below or above everything else).
PAGE_NUMBER_ZONE = 0.2
#: Images considered per page at most: a figure page has a handful, a scan one; each image is matched against
#: every word, so a hostile page of 100,000 tiny images keeps its MAX_IMAGES largest.
MAX_IMAGES = 200
#: An image with this many words drawn over it is a background too (a back cover's photo under its blurb): a
#: figure carries a few labels, not paragraphs.
BACKGROUND_WORDS = 50
#: A ruled frame smaller than this share of the page holds a figure or a note, whose lines are never headings.
FRAME_SHARE = 0.4
#: A page number is set at most this many times the body size.
PAGE_NUMBER_SIZE = 1.3
#: A listing's line numbers set this much smaller than its lines or more are line numbers (`_numbered_listing`):
#: algorithm2e's are 7 points beside 10-point pseudo-code (0.7), listings' \tiny or \scriptsize beside
#: \small; two sizes of type one step apart in LaTeX (10 and 9 points) differ by 0.9.
LINE_NUMBER_SIZE = 0.85
#: Lines wholly inside this share of the page height at the top or the bottom are margin lines.
MARGIN = 0.075
#: A margin-zone line is one of the body's text block when it stands from the block's nearest line at that line's
#: own spacing from the next, give or take this share of its font size (rounding of the loose glyph boxes; a running
#: head or a footer is set a blank line or more away).
LEADING_SLACK = 0.1
#: A heading's first headed block starts within this many of the heading's own heights below it. The space after a
#: heading is about one of its lines (LaTeX's \\section 1.5-2.3 ex, Word's Heading styles 3-12 points); the
#: furthest on the dev pages is a page title over a band, 4.3 heights; the covers' false headings stand over nothing
#: for 10 heights or more (a selling point over the cover's URL) or to the page's foot.
HEAD_REACH = 5.0
#: A line piece of this many words is prose: a sentence's stretch. The narrowest columns of the dev pages and the
#: probe (IRS instructions, 2.2 inch columns at 9.5 pt) set 5 to 7 words a line; a diagram's labels, a form's fields
#: and a table's cells mostly 1 to 4.
PROSE_WORDS = 5
#: A size sets prose when at least this share of its characters stand in prose pieces (a body size: most of its
#: lines are a paragraph's; the GeoBase UML page's 4.4 pt labels have 7 %, its 10 pt text 65 %)...
PROSE_SHARE = 0.25
#: ...in at least this many lines: a paragraph that wraps, not one long title line.
PROSE_LINES = 2
#: A turned paragraph of one line under this many words is a figure's label (a network diagram's "3x3 conv, 128,
#: /2", an axis's title), not text: a sentence's stretch has more.
LABEL_WORDS = 5
#: What heads nothing of the page's body: running heads, footers and page numbers.
_FURNITURE = frozenset({Kind.PAGE_HEADER, Kind.PAGE_FOOTER})
#: Two words of one size stand on one baseline when their boxes' feet are this many ems of their size apart at most.
#: The text layer's boxes reach down to the font's descent or, in some fonts, to the glyphs' own (a "p" lower than an
#: "a": 0.2 em on a sweep page), and faces' descents differ (TeX's typewriter 0.15 em below its roman), so a table's
#: row is level where some pair of its words, one each side, shares its feet to a rounding (0.0-0.1 pt: words
#: without descenders, `_on_baseline`, of one face where the row has such pairs); two prose columns side by side,
#: each at its own leading, stand 1-6 pt apart on most of their lines (a table of contents at 24 pt beside an
#: abstract at 11.5: 3, 4, 5, 5.5 pt; a change history's two columns, one 2 pt lower: 1.9, 2.3, 2.8 pt).
BASELINE_EM = 0.06
#: Glyphs that reach below the baseline in most faces: a word holding one has its box's foot lower in fonts whose boxes
#: follow the glyphs.
_DESCENDERS = frozenset("gjpqyQ,;()[]{}|/_$@")
#: Sizes this close are one size (a table's cells in one type size; 9.96 pt and 10 pt are one).
SIZE_SLACK = 0.05
#: Prose pieces that must start at one x for it to be the page's text edge: a paragraph's lines (a page of macro
#: descriptions on the sweep's documented sources has 7 to 17 such lines; three are a short paragraph).
EDGE_LINES = 3
#: A cell's first page number ("12", "12, 14", "180–185"); a leader line ending in several pages (an index's entry,
#: the list's comma followed by a space, which a figure's thousands separator is not). Leader dots closing a cell are
#: the ruled tables' (`tables.LEADER_TAIL`).
_FIRST_PAGE = re.compile(r"^[.\s]*(\d{1,4})\b")
_PAGE_LIST = re.compile(r"(?:\.\s*){3,}\d{1,4}(?:(?:,\s+|\s*–\s*)\d{1,4})+$")
#: Body sizes between a margin note's end and the text block: LaTeX's \\marginparsep (7 pt, 0.7 em at 10 pt; 0.9-1.0 em
#: on the sweep's documented sources), wider than a justified line's word space (a third of an em, stretched by half
#: at most), so a table's first cell reading on into the text block by a space is no margin note.
MARGIN_GAP = 0.6
#: Lines of a sentence's stretch (`PROSE_WORDS` words or more) in one header cell of a table without rules that make
#: it a paragraph: a column's label wraps into two such lines at most (a long label in a wide column); a paragraph
#: stacked over a table as its "header" holds three and more (a paper's column of prose over a run of aligned lines,
#: 10 lines; a report's paragraph over a heading's row, 3).
HEADER_PROSE_LINES = 3
#: A page shows a table its text path declined when this many rows of its body hold two one-line blocks side by side
#: (`_side_by_side`): a table's rows read as loose lines. Two, as a table needs MIN_ROWS rows; one such row is a
#: heading beside its page's running text, or a two-column page whose paragraphs happen to start level.
ROW_EVIDENCE = 2
#: A cell-like block is at most this many body sizes high: a line or two at the usual leading (1.2), as a table's cell
#: is one line or a wrapped two, where a paragraph of a two-column page is many lines high.
LINE_HEIGHTS = 2.5
#: Blocks after a block (by their tops) looked at for one beside it: a row of a table holds a handful of cells.
SIDE_LOOKAHEAD = 12
#: A block of a layout table (`_laid_under`) runs on under the table's last row in lines at most this many times
#: a line's height (its tallest word's) under the line above: lines of one block at a word processor's single to
#: 1.5 spacing stand 0.3-0.7 of that height apart, where a blank line before the next paragraph leaves more than one.
UNDER_GAP = 1.0
#: Vertical rules down a table's box that make it a grid of rules (`_gridded`): its two sides, or a side and a column
#: rule; a table of words with one rule beside it (a change bar, a sidebar's edge) is no grid.
GRID_RULES = 2
#: A table region the text path's tables disagree with is read whole only where it covers less than this share of the
#: page: the layout model boxes a report's whole page or spread as one table (tables-dev's amazon_sustainability_p12,
#: usda_ag_energy_roundup, clo_deal_summary: 0.73-0.90 of the page, with headings, prose and charts in the box), where
#: a table region around a table is at most half of it (0.02-0.48 on tables-dev, a page-long table aside).
JOIN_PAGE_SHARE = 0.5
#: A found table is a table region's (the layout model's) where at least this share of its box lies in the region: a
#: region boxes its table to within a few points (it may fall short of the last row), so a table of its own has most
#: of its area inside, where a table that only touches a region beside or below it (a neighbouring grid, a chart's
#: box) has a sliver in it: that region neither cuts its foot (`_region_trimmed`) nor reads it with the region's
#: other pieces as one table (`_region_joined`).
REGION_SHARE = 0.5
#: A list item's number, as a region's first column would hold it ("1.", "(a)", "iv)").
_LIST_NUMBER = re.compile(r"^\(?(?:\d{1,3}|[a-z]|[ivx]{1,5})[.)]$")
#: What a table's cell comes out as when no finder made a table of it.
_CELL_LIKE = frozenset({Kind.TEXT, Kind.SECTION_HEADER, Kind.TITLE, Kind.LIST_ITEM})


def document_style(contents: Iterable[PageContent]) -> Style:
    """The body size is the size most characters are set in (a mode, so headings never move it); every size clearly
    above it is a heading size; the largest is the title's when it is one block of lines at the first page's top."""
    chars: Counter[float] = Counter()
    prose: Counter[float] = Counter()  # characters in prose lines (PROSE_WORDS), by size
    prose_lines: Counter[float] = Counter()
    # The same counts without monospace type: a manual's code listings, set smaller than its prose and longer, set
    # no body (reportlab's user guide: 8-point listings under 10-point prose made every prose line a "heading").
    text_chars: Counter[float] = Counter()
    text_prose: Counter[float] = Counter()
    text_lines: Counter[float] = Counter()
    where: dict[float, set[tuple[int, float]]] = {}
    for content in map(upright, contents):
        flat = [w for w in content.words if not w.rotation]
        for word in flat:
            size = round(word.size or word.height, 1)
            chars[size] += len(word.text)
            text_chars[size] += 0 if word.monospace else len(word.text)
            where.setdefault(size, set()).add((content.number, round(word.y0 / content.height, 3)))
        for piece in (p for line in _layer_lines(flat) for p in pieces(line) if len(p.words) >= PROSE_WORDS):
            size = round(piece.size, 1)
            prose[size] += sum(len(w.text) for w in piece.words)
            prose_lines[size] += 1
            if not any(w.monospace for w in piece.words):
                text_prose[size] += sum(len(w.text) for w in piece.words)
                text_lines[size] += 1
    if not chars:
        return Style(body_size=10.0)
    body = _body_size(chars, prose, prose_lines)
    if any(text_lines[s] >= PROSE_LINES for s in text_lines):  # prose outside code: the body is its size
        body = _body_size(+text_chars, text_prose, text_lines)
    heads = tuple(sorted((s for s in chars if s >= HEADING_RATIO * body), reverse=True))
    title = heads[0] if heads and _one_block_on_top(where[heads[0]]) else 0.0
    return Style(body_size=body, heading_sizes=heads, title_size=title)


def _layer_lines(words: list[Word]) -> list[list[Word]]:
    """The page's lines as its text layer gave them (`Word.line`, left to right), cheaply: the style is measured on
    every page before any is analysed; where the producer knew no lines (OCR words), `lines` finds them."""
    if any(w.line < 0 for w in words):
        return lines(words)
    return [sorted(group, key=lambda w: w.x0) for _, group in itertools.groupby(words, key=lambda w: w.line)]


def _body_size(chars: Counter[float], prose: Counter[float], prose_lines: Counter[float]) -> float:
    """The size most characters are set in, among the sizes that set prose: a size whose characters stand mostly in
    short pieces (a diagram's labels, a form's fields, a table's cells: under PROSE_SHARE of them in lines of
    PROSE_WORDS words) gives way to one that sets paragraphs (PROSE_LINES such lines at least). Where no size sets
    prose (a page of labels, text set without spaces) the most characters still tell."""
    sets_prose = [s for s in chars if prose_lines[s] >= PROSE_LINES and prose[s] >= PROSE_SHARE * chars[s]]
    return max(sets_prose or chars, key=lambda s: chars[s])  # the first of equals, as Counter.most_common gives


def _one_block_on_top(places: set[tuple[int, float]]) -> bool:
    # The title's lines: all on page 1, in its top part, and adjacent (at most TITLE_LINES lines in one run).
    tops = sorted({y for page, y in places if page == 1})
    if any(page != 1 for page, _ in places) or not tops or tops[-1] > TITLE_ZONE:
        return False
    lines = [tops[0]]
    for y in tops[1:]:
        if y - lines[-1] > 0.004:  # a new line (words of one line share their top within rounding)
            lines.append(y)
    return len(lines) <= TITLE_LINES and all(b - a < 0.06 for a, b in itertools.pairwise(lines))


def upright(content: PageContent) -> PageContent:
    """The page turned so that most of its text reads upright: a page whose words mostly run sideways or upside down
    on the displayed page (an upright page under /Rotate 90, a landscape table set sideways on a portrait page) is
    turned against their direction, its size, words, rules, fills, drawings and images with it; other pages come
    back as they are. `analyse` reads the words of other directions apart, each direction upright on its own."""
    chars: Counter[int] = Counter()
    for word in content.words:
        chars[word.rotation] += len(word.text)
    turn = max(chars, key=lambda r: (chars[r], r == 0), default=0)
    if turn == 0 or chars[turn] <= chars[0]:
        return content
    w, h = content.width, content.height
    box = _turner(turn, w, h)

    def segment(s: Segment) -> Segment:
        x0, y0, x1, y1 = box((s.x0, s.y0, s.x1, s.y1))
        return replace(s, x0=x0, y0=y0, x1=x1, y1=y1)

    width, height = (h, w) if turn in (90, 270) else (w, h)
    return replace(
        content,
        width=width,
        height=height,
        words=tuple(replace(x, bbox=box(x.bbox), rotation=(x.rotation - turn) % 360) for x in content.words),
        rulings=tuple(segment(s) for s in content.rulings),
        images=tuple(replace(i, bbox=box(i.bbox)) for i in content.images),
        ocr_regions=tuple(box(b) for b in content.ocr_regions),
        fills=tuple(box(b) for b in content.fills),
        drawings=tuple(box(b) for b in content.drawings),
    )


def _turner(turn: int, w: float, h: float) -> Callable[[BBox], BBox]:
    """A box on a `w` by `h` page turned against text running `turn` degrees clockwise (so that text reads
    upright)."""

    def point(x: float, y: float) -> tuple[float, float]:
        # The inverse of turning the page clockwise by `turn` (how the page shows the text's direction).
        if turn == 90:
            return y, w - x
        if turn == 270:
            return h - y, x
        return w - x, h - y

    def box(b: BBox) -> BBox:
        (ax, ay), (bx, by) = point(b[0], b[1]), point(b[2], b[3])
        return (min(ax, bx), min(ay, by), max(ax, bx), max(ay, by))

    return box


def _turned_paragraphs(words: list[Word], content: PageContent) -> list[tuple[int, list[Piece], list[Word]]]:
    """The paragraphs of the page's text in other directions than its own, each direction read upright on its own:
    its words turned (`_turner`) make lines and paragraphs as any text does. Each comes as its direction, its
    turned pieces and its words as the page has them. A paragraph of one short line (under LABEL_WORDS words) is a
    figure's label, drawn in a diagram or along an axis, and is left out as the labels over a picture are."""
    out: list[tuple[int, list[Piece], list[Word]]] = []
    for turn in sorted({w.rotation for w in words if w.rotation}):
        mine = [w for w in words if w.rotation == turn]
        box = _turner(turn, content.width, content.height)
        turned = [replace(w, bbox=box(w.bbox), rotation=0) for w in mine]
        source = {id(t): w for t, w in zip(turned, mine, strict=True)}
        found = [p for line in lines(turned) for p in pieces(line)]
        for paragraph in paragraphs(sorted(found, key=lambda p: (p.y0, p.x0))):
            if len(paragraph) == 1 and len(paragraph[0].words) < LABEL_WORDS:
                continue  # a label: a diagram's box, an axis's title (a figure's, as the labels over an image are)
            out.append((turn, paragraph, [source[id(w)] for piece in paragraph for w in piece.words]))
    return out


def _turned_blocks(words: list[Word], content: PageContent, upright_words: list[Word]) -> list[Block]:
    """The page's text in other directions than its own (a label turned a quarter, a sideways table, a box upside
    down): each paragraph (`_turned_paragraphs`) is a text block at its box on the page, so the reading order places
    it where it sits. One sideways line standing in the side margin, wholly beside the page's upright text, is a
    margin stamp (arXiv's identifier, a journal's banner): furniture by its direction and its place together."""
    left = min((w.x0 for w in upright_words), default=content.width)
    right = max((w.x1 for w in upright_words), default=0.0)
    out: list[Block] = []
    for turn, paragraph, originals in _turned_paragraphs(words, content):
        bbox = (
            min(w.x0 for w in originals),
            min(w.y0 for w in originals),
            max(w.x1 for w in originals),
            max(w.y1 for w in originals),
        )
        stamp = len(paragraph) == 1 and turn in (90, 270) and (bbox[2] <= left or bbox[0] >= right)
        out.append(Block(Kind.PAGE_HEADER if stamp else Kind.TEXT, bbox, join([p.text for p in paragraph])))
    return out


def _turned_text(over: list[int], words: list[Word], content: PageContent) -> set[int]:
    """The words over a picture (`over`) that are turned text, not its labels: a box of sentences set sideways or
    upside down over an image (`_turned_paragraphs`: more than a one-line label), which the page reads where it
    sits."""
    turned = [i for i in over if words[i].rotation]
    if not turned:
        return set()
    index = {id(words[i]): i for i in turned}
    return {
        index[id(w)] for _, _, originals in _turned_paragraphs([words[i] for i in turned], content) for w in originals
    }


def analyse(content: PageContent, style: Style | None = None) -> PageLayout:
    """The page's blocks in reading order. Without a `style` the page's own words give it. A page whose text runs
    sideways is read turned upright (`upright`): the layout's size and boxes are the turned page's."""
    content = upright(content)
    style = style or document_style([content])
    words = list(content.words)
    taken: set[int] = set()
    fixed: list[Block] = []

    page_area = max(content.width * content.height, 1.0)
    # Small frames only: a box drawn around a diagram or a note. A frame around most of the page is a border.
    # A form's label over its field's room is no heading: its box is a frame too (one grouping of the rules for both).
    closed, fields = frames_and_fields(content.rulings, words)
    frames = [f for f in closed if (f[2] - f[0]) * (f[3] - f[1]) < FRAME_SHARE * page_area] + fields
    # Ruled tables (shaded cells rule them too: fill_rules); an open one (no vertical rules) gives way to the table
    # without rules that reads it and more.
    rules = [*content.rulings, *fill_rules(content.fills, content.rulings)]
    ruled = find_tables(rules, words)
    # A frame around a diagram, or a circuit's wires, rule "cells" around a figure's labels: the shapes drawn among
    # them make it a figure, which `vector_figures` reads with its labels.
    ruled = [
        t
        for t in ruled
        if not drawn_within(t.bbox, len(t.table.cells), len(t.words), content.drawings, style.body_size)
    ]
    # Boxes linked by lines (a UML class diagram) close two boxes or more apart, where a table closes one frame: their
    # words are the page's text, and no table without rules either (two classes side by side, attributes level).
    merged = merge_rules(rules) if ruled else []
    diagrams = [t.bbox for t in ruled if boxes_apart(t.bbox, merged, [words[i] for i in t.words], style.body_size)]
    ruled = [t for t in ruled if t.bbox not in diagrams]
    for found in widened(ruled, words, style.body_size, content.rulings):
        if _text_box(found, words):
            continue  # its words stay the page's text
        taken |= found.words
        fixed.append(Block(Kind.TABLE, found.bbox, table=found.table))

    # Figures drawn as vectors (figures.py: ink and the short labels around it) are read as images are; an image
    # inside one (a heatmap's raster inside its axes) is part of it.
    drawn = vector_figures(content, words, taken, [b.bbox for b in fixed], style.body_size)
    images = [i for i in largest_images(content.images) if not any(contains(f, i.bbox) for f in drawn)]
    for image, vector in [*((i, False) for i in images), *((ImageRegion(f), True) for f in drawn)]:
        x0, y0, x1, y1 = image.bbox
        area = (x1 - x0) * (y1 - y0)
        if any(contains(b.bbox, image.bbox) for b in fixed):
            continue  # an image inside a table cell (a logo, an icon) belongs to the table
        over = [i for i, w in enumerate(words) if i not in taken and centre_in(w, image.bbox)]
        if area < BACKGROUND_SHARE * page_area and len(over) < BACKGROUND_WORDS:
            if not vector and is_backdrop(image.bbox, [words[i] for i in over]):
                continue  # a shaded box or a banner drawn behind text: its words are the page's, and no picture
            # (a vector figure's labels were told from prose where it was found: a row of box labels may cover much)
            kept = _caption_words(over, words) | _running_in(over, words, taken, image.bbox)
            taken |= set(over) - kept - _turned_text(over, words, content)
        fixed.append(Block(Kind.PICTURE, image.bbox))

    free = [w for i, w in enumerate(words) if i not in taken and w.rotation == 0]
    # Words in other directions outside tables and pictures: read upright on their own, placed where they sit.
    fixed += _turned_blocks([w for i, w in enumerate(words) if i not in taken and w.rotation], content, free)
    index = {id(w): i for i, w in enumerate(free)}
    # The page's gutters first, from its geometry: a line never runs across one (two columns read straight across),
    # and a column break at one is a column break in the reading order. Leader lines are read column by column: a
    # two-column index's entries side by side are two entries, never one whose page numbers run on into the next
    # column's entry ("Encodings .... 4, 6 Relational databases .... 17").
    page_gutters = gutters(free, style.body_size)
    columned = _by_column(lines(free, page_gutters), page_gutters)
    contents = find_contents([[index[id(w)] for w in line] for line in columned], free)
    # An index's entries of several pages ("12, 14", "180–185") after their leaders: a statistical table's label
    # leaders end in one figure per column, a contents' entries in one page.
    listed = any(_PAGE_LIST.search(" ".join(w.text for w in line)) for line in columned)
    back_index = listed and any(_index(toc.table) for toc in contents)
    if back_index:
        # An index's page: its runs whose few pages happen to go up are its entries as well.
        contents = []
    if contents:
        fixed += [Block(Kind.TABLE, toc.bbox, table=toc.table) for toc in contents]
        free = _without(free, [toc.words for toc in contents])
        page_gutters = gutters(free, style.body_size)

    # Tables without rules: columns of words kept apart down a run of lines (unruled.py says what is evidence). The
    # gutters are found again without a table's words: its column gaps are no gutters of the page.
    # Blocks of text laid out side by side in a borderless table (`_keyed_beside`): read as text, block by block.
    laid: dict[BBox, tuple[FoundTable, list[Gutter]]] = {}

    def laid_out(found: FoundTable) -> bool:
        gaps = _keyed_beside(found, free)
        if gaps:
            laid[found.bbox] = (_laid_under(found, gaps, free), gaps)
        return bool(gaps)

    def without_rules(known: Sequence[Gutter], among: Sequence[Word]) -> tuple[list[FoundTable], list[Gutter]]:
        found_all = find_unruled(among, style.body_size, content.rulings, known, content.fills)
        if among is not free:  # the words' indexes are the page's free words' (`_without` takes them from `free`)
            at = {id(w): i for i, w in enumerate(free)}
            found_all = [replace(f, words=frozenset(at[id(among[i])] for i in f.words)) for f in found_all]
        found_all = [
            found
            for found in (_without_prose_header(f, free) for f in found_all)
            if found is not None
            and not _text_box(found, free)
            and not _numbered_listing(found, free)
            and not any(contains(d, found.bbox) for d in diagrams)
            and not (listed and _dotted(found.table) and (back_index or _index(found.table)))
        ]
        # Columns of text too short for the page's gutters (a table of contents beside an abstract, two short
        # reference lists) stand as one "table": its sides' lines are at their own leading, never on one baseline;
        # the gap between them is a gutter, read one side after the other.
        streams = [(found, _apart(found, free)) for found in found_all]
        # Names in the page's margin beside its paragraphs (a documented source's macros) are no table's first column.
        edge = _prose_edge(free) if found_all else None
        kept = [
            found
            for found, apart in streams
            if apart is None and not _margin_notes(found, free, edge, style.body_size) and not laid_out(found)
        ]
        return kept, [apart for _, apart in streams if apart is not None]

    unruled, beside = without_rules(page_gutters, free)
    for gutter in list(beside):
        # A column of prose beside a table in the next column (a paper's table set at the top of its right column)
        # stood as one "table": each side of the gutter between them is read again on its own, down the stretch
        # the gutter runs, so the table is found in its own column.
        for side in ((w for w in free if w.x1 <= gutter.x0), (w for w in free if w.x0 >= gutter.x1)):
            among = [w for w in side if w.y0 >= gutter.y0 - 1 and w.y1 <= gutter.y1 + 1]
            again, more = without_rules(page_gutters, among)
            unruled += again
            beside += more
    fixed += [Block(Kind.TABLE, found.bbox, table=found.table) for found in unruled]
    # A layout table's blocks stand in the page's order where the table stood, each read on its own (`_laid_chunks`).
    side_by_side = [(_words_box(found, free), _laid_chunks(found, gaps, free)) for found, gaps in laid.values()]
    if unruled or laid:
        free = _without(free, [found.words for found in [*unruled, *(found for found, _ in laid.values())]])
    # A table region the text path's tables disagree with (it cut the model's one table in pieces, or read a small part
    # of it and left the rest loose) is read whole from the layer's words inside it.
    # A note or a source set in a grid's own frame, on a row of one cell across its columns at its foot, which the
    # layout model leaves out of the table it boxes: read as the page's text after the table.
    fixed, released = _region_trimmed(content, words, free, fixed)
    if released:
        at = {id(w): i for i, w in enumerate(words)}
        free = sorted([*free, *released], key=lambda w: at[id(w)])
    fixed, joined = _region_joined(content, words, free, fixed)
    if joined:
        free = [w for w in free if id(w) not in joined]
    # The layout model's table regions (given for a text-layer page that shows a table: documents/engine.py) where
    # no finder above made a table, each read from the layer's words inside it by their positions (wordtable, the
    # pixel path's reader of its regions).
    tabled = _region_tables(content, free, [b.bbox for b in fixed if b.kind is Kind.TABLE])
    fixed += [block for blocks, _ in tabled for block in blocks]
    if tabled:
        free = _without(free, [frozenset(inside) for _, inside in tabled])
    if unruled or tabled or released:
        page_gutters = gutters(free, style.body_size)
    page_gutters = [*page_gutters, *beside]
    runs: list[Piece] = [p for line in lines(free, page_gutters) for p in pieces(line)]
    top, bottom, runs = _margins(runs, content, style)
    boxes: list[BBox] = [p.bbox for p in runs] + [b.bbox for b in fixed] + [bbox for bbox, _ in side_by_side]
    blocks: list[Block] = list(top)
    # A text layer's lines are read left to right on a line (`order.order`'s `by_line`); OCR's words carry no font.
    by_line = any(w.font for w in content.words)
    for leaf in order(boxes, [(g.x0, g.y0, g.x1, g.y1) for g in page_gutters], by_line=by_line):
        chunk: list[Piece] = []
        for i in leaf:
            if i < len(runs):
                chunk.append(runs[i])
                continue
            _extend(blocks, _classified(chunk, style, content, frames))
            chunk = []
            if i - len(runs) < len(fixed):
                blocks.append(fixed[i - len(runs)])
                continue
            # (a block's label over its lines, "Bill to", heads no section of the document: the layout is its frame)
            laid_box, parts = side_by_side[i - len(runs) - len(fixed)]
            for part in parts:
                _extend(blocks, _classified(part, style, content, [*frames, laid_box]))
        _extend(blocks, _classified(chunk, style, content, frames))
    blocks = _captioned(_heading_something(sections(blocks + bottom, HEAD_REACH, content.words)))
    return PageLayout(content.number, content.width, content.height, tuple(blocks), content.regions)


def table_evidence(layout: PageLayout, rulings: Sequence[Segment], body_size: float) -> bool:
    """Whether a laid-out text-layer page shows a table whose reading its layout regions may better: a table the
    text path found that no grid of rules frames (`_gridded`: a ruled grid is read from its rules, and its page is
    not asked), or a grid whose last row is one cell across it (`_spanned_foot`: a note its region may leave out,
    `_region_trimmed`), or `ROW_EVIDENCE` rows of short blocks side by side that it left as text (`_side_by_side`):
    the cells of a table it declined, read as loose lines and headings."""
    found = any(
        b.kind is Kind.TABLE and (not _gridded(b.bbox, rulings) or (b.table is not None and _spanned_foot(b.table)))
        for b in layout.blocks
    )
    return found or _side_by_side(layout.blocks, body_size) >= ROW_EVIDENCE


def _spanned_foot(table: Table) -> Cell | None:
    """The cell of a table's last row where that row is one cell across all its columns (a row of merged cells under
    the grid's figures: a note, a source), under `MIN_ROWS` rows of the table's own above it; else None."""
    if table.cols < 2 or table.rows <= MIN_ROWS:
        return None
    last = table.grid()[table.rows - 1]
    cell = last[0]
    if cell is None or cell.row != table.rows - 1 or cell.bbox is None or any(slot is not cell for slot in last):
        return None
    return cell


def _gridded(box: BBox, rulings: Sequence[Segment]) -> bool:
    """Whether vertical rules run down most of a table's box (`GRID_RULES` of them, each over half its height): a grid
    of rules, whose columns its rules say. Booktabs' horizontals alone, or a rule under a header, say no column."""
    x0, y0, x1, y1 = box
    down = [
        s
        for s in rulings
        if not s.horizontal and x0 - 1 <= s.x0 <= x1 + 1 and min(s.y1, y1) - max(s.y0, y0) >= 0.5 * (y1 - y0)
    ]
    return len(down) >= GRID_RULES


def _side_by_side(blocks: Sequence[Block], body_size: float) -> int:
    """Rows of the page's body where two blocks of text or headings, each a line or two high (`LINE_HEIGHTS` body
    sizes at most), stand side by side: how a table's row comes out when no finder made a table of it."""
    short = sorted(
        (
            b.bbox
            for b in blocks
            if b.kind in _CELL_LIKE and b.text and 0 < b.bbox[3] - b.bbox[1] <= LINE_HEIGHTS * body_size
        ),
        key=lambda box: box[1],
    )
    rows = 0
    last = -1.0  # the bottom of the last row counted: the other cells of a row count it once
    for i, a in enumerate(short):
        height = a[3] - a[1]
        if a[1] < last:
            continue
        if any(
            min(a[3], b[3]) - max(a[1], b[1]) >= 0.5 * min(height, b[3] - b[1]) and (b[0] >= a[2] or b[2] <= a[0])
            for b in short[i + 1 : i + 1 + SIDE_LOOKAHEAD]
        ):
            rows += 1
            last = a[3]
    return rows


def _region_tables(
    content: PageContent, words: Sequence[Word], tables: Sequence[BBox]
) -> list[tuple[list[Block], set[int]]]:
    """The page's table regions (the layout model's, `content.regions`) where no table was found, read from `words`
    inside them (wordtable.table_blocks), each as its blocks and its words' indexes. A region that shares its box
    with a table found from rules or columns keeps that table: a ruled grid is read from its rules (held-out
    `tables/`, all ruled grids: cells 0.99 on the text path, 0.67 from regions on the pixel path), and the text path's
    tables without rules read the dev pages' tables better than their regions (revtex's, whose wrapped cells the
    region reader cut into rows). A region whose words make no table by their positions stays the page's text."""
    out: list[tuple[list[Block], set[int]]] = []
    used: set[int] = set()
    for region in content.regions:
        if region.label != "table" or any(box_overlap(t, region.bbox) > 0 for t in tables):
            continue
        inside = {i for i, w in enumerate(words) if i not in used and not w.rotation and centre_in(w, region.bbox)}
        chosen = [words[i] for i in sorted(inside)]
        if sum(len(w.text) for w in chosen if w.monospace) >= CODE_SHARE * sum(len(w.text) for w in chosen):
            continue  # a code listing the model boxed as a table: its words are code, aligned by their spaces
        blocks = table_blocks(chosen)
        if not blocks or any(_listed(b.table) for b in blocks if b.table is not None):
            continue
        used |= inside
        out.append((blocks, inside))
    return out


def _region_trimmed(
    content: PageContent, words: Sequence[Word], free: Sequence[Word], fixed: list[Block]
) -> tuple[list[Block], list[Word]]:
    """`fixed` with the rows at a table's foot that its table region (the layout model's) leaves out cut from it, and
    the words of the rows cut, which are the page's text. A row is cut only where it is one cell across every column
    (`_spanned_foot`: a spreadsheet's or a report tool's merged row holding a note or a source inside the grid's frame)
    and none of its words stands in the region: the model boxes a table from its header to its last row of cells,
    and read as a row the note was written once per column it spans, a sentence broken into cells. A title row across
    a grid's head stays the table's, as the dev references keep it (reportlab_userguide_p61, _p64), and so does any
    row of cells, whatever the region says (a region's box can fall a few points short of a table's last row)."""
    regions = [r.bbox for r in content.regions if r.label == "table"]
    if not regions:
        return fixed, []
    free_ids = {id(w) for w in free}
    out: list[Block] = []
    released: list[Word] = []
    for block in fixed:
        table = block.table
        if block.kind is not Kind.TABLE or table is None:
            out.append(block)
            continue
        region = max(regions, key=lambda r: box_overlap(r, block.bbox))
        if box_overlap(region, block.bbox) < REGION_SHARE * box_area(block.bbox):
            out.append(block)
            continue
        cut: list[Cell] = []
        while (foot := _spanned_foot(table)) is not None and foot.bbox is not None:
            box = foot.bbox
            inside = [w for w in words if id(w) not in free_ids and not w.rotation and centre_in(w, box)]
            if not inside or any(centre_in(w, region) for w in inside):
                break
            cut.append(foot)
            released += inside
            rows = table.rows - 1
            cells = tuple(replace(c, row_span=min(c.row_span, rows - c.row)) for c in table.cells if c.row < rows)
            table = Table(rows, table.cols, cells)
        if not cut:
            out.append(block)
            continue
        x0, y0, x1, _ = block.bbox
        out.append(replace(block, bbox=(x0, y0, x1, min(c.bbox[1] for c in cut if c.bbox is not None)), table=table))
    return out, released


def _region_joined(
    content: PageContent, words: Sequence[Word], free: Sequence[Word], fixed: list[Block]
) -> tuple[list[Block], set[int]]:
    """`fixed` with the text path's tables inside a table region (the layout model's) replaced by the region read
    whole from the layer's words (wordtable.table_blocks), where the two readings disagree: several of its tables in
    one region (the model saw one table where the text path cut it in pieces: a grid ruled around its header only,
    its body read as a table of its own), or one whose region holds more loose words than the table has (the text
    path read a part of the model's table: its body without its header of several lines, or a few columns). Where
    one table and its region agree (about the same extent, few loose words: a caption or a note) the text path's
    stays: its wrapped cells are right, where the region reader cut revtex's into rows (tables-dev cells 0.96 ->
    0.84). The ids of the free words the regions took are returned with the blocks. A region of most of the page
    (`JOIN_PAGE_SHARE`), or whose reading is no table, a code listing or a list, changes nothing."""
    page_area = max(content.width * content.height, 1.0)
    joined: set[int] = set()
    for region in content.regions:
        box = region.bbox
        if region.label != "table" or box_area(box) >= JOIN_PAGE_SHARE * page_area:
            continue
        pieces = [
            b
            for b in fixed
            if b.kind is Kind.TABLE
            and b.table is not None
            and box_overlap(b.bbox, box) >= REGION_SHARE * box_area(b.bbox)
        ]
        if not pieces:
            continue
        loose = [w for w in free if id(w) not in joined and not w.rotation and centre_in(w, box)]
        loose_ids, free_ids = {id(w) for w in loose}, {id(w) for w in free}
        # the pieces' own words: taken by them, so no longer free
        held = {id(w) for w in words if id(w) not in free_ids and any(centre_in(w, b.bbox) for b in pieces)}
        if len(pieces) < 2 and len(loose) <= len(held):
            continue
        if _titled_apart(pieces, loose):
            continue
        chosen = [w for w in words if not w.rotation and (id(w) in loose_ids or id(w) in held)]
        if sum(len(w.text) for w in chosen if w.monospace) >= CODE_SHARE * sum(len(w.text) for w in chosen):
            continue
        blocks = table_blocks(chosen)
        if not blocks or any(_listed(b.table) for b in blocks if b.table is not None):
            continue
        fixed = [b for b in fixed if not any(b is p for p in pieces)] + blocks
        joined |= loose_ids
    return fixed, joined


def _titled_apart(pieces: Sequence[Block], loose: Sequence[Word]) -> bool:
    """Whether a line of loose words stands between two of the text path's tables in one region, across both: each
    table under its own title (a Word document's `Example of Data Table 1` over one grid, `... Table 2` over the
    next, which the model boxes as one table). The pieces a region joins touch: a grid ruled around a table's header
    and first row, its body read without rules right under it, with no line between them."""
    ordered = sorted(pieces, key=lambda b: b.bbox[1])
    for upper, lower in itertools.pairwise(ordered):
        x0, x1 = max(upper.bbox[0], lower.bbox[0]), min(upper.bbox[2], lower.bbox[2])
        if any(upper.bbox[3] <= (w.y0 + w.y1) / 2 <= lower.bbox[1] and x0 <= (w.x0 + w.x1) / 2 <= x1 for w in loose):
            return True
    return False


def _listed(table: Table) -> bool:
    """Whether a table's first column is list markers only (a bulleted or numbered list the model boxed as a table:
    each item's marker set apart from its text reads as a column), as the text path's tables without rules refuse."""
    first = [c.text for c in table.cells if c.col == 0 and c.row > 0 and c.text]
    return bool(first) and all(
        (len(text) <= 2 and all(ch in BULLETS for ch in text)) or _LIST_NUMBER.match(text) for text in first
    )


def _heading_something(blocks: list[Block]) -> list[Block]:
    """Unnumbered section headings that head nothing made text: a heading is followed by what it heads, so some block
    (text, a list, a table, a picture...) starts below it within `HEAD_REACH` of its own height, across its width, or
    beside it on the right (a side heading in the margin, as Redbooks set them). A
    cover's last bold selling point or a logo's big word stands over nothing of the page (issue 34's false headings
    on the Redbook's covers); a page whose only text is the heading (a part's divider) keeps it, and numbered
    headings keep their number's word."""
    if sum(1 for b in blocks if b.kind not in _FURNITURE) < 2:
        return blocks
    out = list(blocks)
    # The body's blocks by their tops, so each heading weighs only those starting near it: a hostile page of
    # thousands of headings costs n log n, not n squared (6,000 took 5 CPU s).
    body = sorted((b.bbox[1], j) for j, b in enumerate(blocks) if b.kind not in _FURNITURE)
    tops = [t for t, _ in body]
    for i, block in enumerate(blocks):
        if block.kind is not Kind.SECTION_HEADER or NUMBERED.match(block.text):
            continue
        x0, top, x1, bottom = block.bbox
        height = bottom - top
        lo, hi = min(bottom - 1, top - height), bottom + HEAD_REACH * height  # the tops either test below takes
        near = body[bisect.bisect_left(tops, lo) : bisect.bisect_right(tops, hi)]
        heads = any(
            # below it, across its width; or on its right, from its level down (a side heading in the margin)
            (bottom - 1 <= b.bbox[1] <= bottom + HEAD_REACH * height and b.bbox[0] < x1 and x0 < b.bbox[2])
            or (b.bbox[0] >= x1 - 1 and top - height <= b.bbox[1] <= bottom + HEAD_REACH * height)
            for j, b in ((j, blocks[j]) for _, j in near)
            if j != i
        )
        if not heads:
            out[i] = replace(block, kind=Kind.TEXT, level=0)
    return out


def _by_column(rows: list[list[Word]], page_gutters: Sequence[Gutter]) -> list[list[Word]]:
    """`rows` (lines parted at `page_gutters`, top to bottom) column by column: a line's column is the count of the
    gutters beside its rows that stand left of it; top to bottom within each."""

    def column(line: list[Word]) -> int:
        top, bottom, left = min(w.y0 for w in line), max(w.y1 for w in line), min(w.x0 for w in line)
        return sum(1 for g in page_gutters if g.y0 < bottom and top < g.y1 and (g.x0 + g.x1) / 2 <= left)

    return sorted(rows, key=column) if page_gutters else rows


def _numbered_listing(found: FoundTable, words: Sequence[Word]) -> bool:
    """Whether a table without rules is a code listing with its line numbers: its first column counts up by one
    from row to row (`MIN_ROWS` numbers at least, nothing else in it) and its other words are monospace
    (`CODE_SHARE`), the numbers often set in the text face (LaTeX's documented sources, listings' numbering). A
    table's row numbers stand beside names and figures in a text face; a listing's aligned values ("\\parsep 4pt")
    stand in columns only by the code's own spaces."""
    first = sorted((c.row, c.text) for c in found.table.cells if c.col == 0 and c.text)
    if len(first) < MIN_ROWS or not all(text.isdigit() for _, text in first):
        return False
    numbers = [int(text) for _, text in first]
    if any(b != a + 1 for a, b in itertools.pairwise(numbers)):
        return False
    marks = {text for _, text in first}
    rest = [words[i] for i in found.words if words[i].text not in marks]
    if not rest:
        return False
    # Line numbers set smaller than the lines beside them, in a face of their own, are a listing's whatever the
    # lines' face: algorithm2e and listings number pseudo-code in 7 points beside 10 (`LINE_NUMBER_SIZE`), CMBX7 or
    # CMR5 beside CMR10 and CMTT10; a table's row numbers are its cells' size and face. Words read from pixels name
    # no face, and their sizes are their lines' heights (a line of figures is shorter than one with descenders).
    marked = [words[i] for i in found.words if words[i].text in marks]
    faces = {w.font for w in marked}
    sizes = sorted(w.size for w in marked)
    if (
        all(faces)
        and not faces & {w.font for w in rest}
        and sizes[len(sizes) // 2] < LINE_NUMBER_SIZE * sorted(w.size for w in rest)[len(rest) // 2]
    ):
        return True
    return sum(w.monospace for w in rest) >= CODE_SHARE * len(rest)


def _index(table: Table) -> bool:
    """Whether leader lines are a back-of-book index's, not a table of contents: a contents' page numbers never go
    down, its entries in the book's order; an index's entries are in the alphabet's, their pages anywhere ("\\sin
    . . . 15", "\\sinister . . . 14"). Its entries of several pages ("12, 14") break the leader runs, so it came out
    as many small tables between lines of text; on a page holding such entries (`_PAGE_LIST`) this decides. Each
    row's first page is read from its last cell."""
    last = {c.row: c.text for c in table.cells if c.col + c.col_span == table.cols and c.text}
    firsts = [_FIRST_PAGE.match(last[r]) for r in sorted(last)]
    pages = [int(m[1]) for m in firsts if m is not None]
    return any(b < a for a, b in itertools.pairwise(pages))


def _dotted(table: Table) -> bool:
    """Whether a table's rows run on in leader dots: a cell of dots alone, or ending in them, in most rows."""
    rows = {c.row for c in table.cells if LEADER_TAIL.search(c.text)}
    return 2 * len(rows) > table.rows


def _prose_edge(words: list[Word]) -> float | None:
    """Where the page's prose lines start: the left end most of its lines share, to the point, whose first piece holds
    `PROSE_WORDS` words or more (`EDGE_LINES` of them at least), or None on a page with too little prose to say. A
    table's rows start with a short cell (a later cell of five words starts no line)."""
    firsts = [pieces(line)[0] for line in lines(words)]
    starts = Counter(round(p.bbox[0]) for p in firsts if len(p.words) >= PROSE_WORDS)
    if not starts:
        return None
    edge, count = starts.most_common(1)[0]
    return float(edge) if count >= EDGE_LINES else None


def _margin_notes(found: FoundTable, words: Sequence[Word], edge: float | None, body: float) -> bool:
    """Whether a table without rules is paragraphs with notes in their margin: LaTeX's documented sources set each
    macro's name in the margin beside the paragraph that describes it (\\printactname beside "Each command is fully
    customizable..."). Some of its words stand wholly left of where the page's prose lines start (`edge`, from
    `_prose_edge`), a margin's gap short of it (`MARGIN_GAP`), the rest start at that edge (within a body size) and
    hold prose (`PROSE_LINES` lines of `PROSE_WORDS` words at least: code set between the paragraphs is shorter), the
    margin's none. A table set in the text column starts at or right of the edge, and one wider than the text block
    has a cell across it."""
    if edge is None:
        return False
    mine = [words[i] for i in found.words]
    margin = [w for w in mine if w.x1 <= edge - MARGIN_GAP * body]
    rest = [w for w in mine if w.x0 >= edge - body]
    if len(margin) + len(rest) < len(mine) or not margin or not rest or abs(min(w.x0 for w in rest) - edge) > body:
        return False  # a word across the edge or closer to it than a margin's gap: a table's row reads on
    return _prose_lines(rest) >= PROSE_LINES and not _prose_lines(margin)


def _prose_lines(words: list[Word]) -> int:
    """How many of the lines `words` stand on hold `PROSE_WORDS` of them or more: a sentence's stretch."""
    per_line = Counter(w.line if w.line >= 0 else round(w.y0) for w in words)
    return sum(1 for n in per_line.values() if n >= PROSE_WORDS)


def _apart(found: FoundTable, words: Sequence[Word]) -> Gutter | None:
    """The gutter between two streams of text a table without rules took for its columns, or None where it is a
    table. A table's rows are rows: wherever both sides of a column gap hold words of one size in a row, some of
    them share a baseline (a wrapped cell's first line stands level with its row's other cells). Two columns
    of text set side by side, each at its own leading (a table of contents beside an abstract, a change history in
    two columns), meet in "rows" at no common baseline (`BASELINE_EM`; words of one size compared): the
    split where most such rows, and two at least, share none is a gutter (the empty x range between the sides, down
    the table's height). One side at least must hold running text (`_running`): prose at its own leading."""
    table = found.table
    placed: list[tuple[Cell, list[Word]]] = [
        (cell, [words[i] for i in found.words if centre_in(words[i], cell.bbox)])
        for cell in table.cells
        if cell.bbox is not None and not cell.header
    ]
    for cut in range(1, table.cols):
        left = [(c, ws) for c, ws in placed if c.col + c.col_span <= cut and ws]
        right = [(c, ws) for c, ws in placed if c.col >= cut and ws]
        if not left or not right:
            continue
        met = apart = 0
        for row in range(table.rows):
            mine = [[w for c, ws in side if c.row == row for w in ws if _on_baseline(w)] for side in (left, right)]
            pairs = [(a, b) for a in mine[0] for b in mine[1] if _one_size(a, b)]
            pairs = [(a, b) for a, b in pairs if a.font == b.font] or pairs  # one face's feet first: faces differ
            if not pairs:
                # No size in common at all: a table sets a row's cells in its one type; a paragraph's line beside a
                # table set smaller (a paper's table at the top of the next column, 8 pt beside 9 pt prose) is a
                # line of another stream.
                every = [[w for c, ws in side if c.row == row for w in ws] for side in (left, right)]
                if every[0] and every[1] and not any(_one_size(a, b) for a in every[0] for b in every[1]):
                    met += 1
                    apart += 1
                continue
            slack = BASELINE_EM * max(pairs[0][0].size, 1.0)
            # level: a line of each side on one baseline (cells set from their tops or their feet), or the sides
            # centred on each other (a name set halfway down its row's two-line description)
            middles = [(min(w.y1 for w in side) + max(w.y1 for w in side)) / 2 for side in mine]
            level = any(abs(a.y1 - b.y1) <= slack for a, b in pairs) or abs(middles[0] - middles[1]) <= slack
            met += 1
            apart += not level
        if apart >= 2 and 2 * apart > met and (_running(left) or _running(right)):
            x0 = max(w.x1 for _, ws in left for w in ws)
            x1 = min(w.x0 for _, ws in right for w in ws)
            if x1 > x0:
                return Gutter(x0, found.bbox[1], x1, found.bbox[3])
    return None


def _one_size(a: Word, b: Word) -> bool:
    """Whether two words are set in one type size (`SIZE_SLACK`)."""
    return abs(a.size - b.size) <= SIZE_SLACK * max(a.size, 1.0)


def _without_prose_header(found: FoundTable, words: Sequence[Word]) -> FoundTable | None:
    """A table without rules less the paragraph it took for its header rows, or None where too few rows remain. A
    column's label wraps in a line or two of a few words; a header cell holding `HEADER_PROSE_LINES` lines of
    `PROSE_WORDS` words or more is a paragraph's lines stacked over the table (a two-column page's prose above a
    short run of aligned lines, or a paragraph over a table's first rows). Its row and every row above it go back to
    the text; what remains is a table where `MIN_ROWS` rows of two filled cells remain."""
    table = found.table
    prose = [
        c.row + c.row_span
        for c in table.cells
        if c.header and c.bbox is not None and _prose_lines(_cell_words(found, words, c.bbox)) >= HEADER_PROSE_LINES
    ]
    if not prose:
        return found
    cut = max(prose)
    cells = [replace(c, row=c.row - cut) for c in table.cells if c.row >= cut]
    filled = Counter(c.row for c in cells if c.text)
    if sum(1 for n in filled.values() if n >= 2) < MIN_ROWS:
        return None
    boxes = [c.bbox for c in cells if c.bbox is not None]
    kept = frozenset(i for i in found.words if any(centre_in(words[i], b) for b in boxes))
    bbox = (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))
    return replace(found, bbox=bbox, table=replace(table, rows=table.rows - cut, cells=tuple(cells)), words=kept)


def _text_box(found: FoundTable, words: Sequence[Word]) -> bool:
    """Whether a "table" of fewer than `MIN_ROWS` rows is a box of text: a paragraph (`PROSE_LINES` lines of
    `PROSE_WORDS` words or more) in a cell across all its columns, the rest a line of labels and fields (a form's
    framed paragraph over "My account must be activated by [ ]"). Rows that few under a paragraph compare nothing; a
    table of one long row under a header of short labels (a page's first rows of a table of design decisions) has no
    cell across its columns, and stays a table."""
    table = found.table
    return table.rows < MIN_ROWS and any(
        c.col_span == table.cols and _prose_lines(_cell_words(found, words, c.bbox)) >= PROSE_LINES
        for c in table.cells
        if c.bbox is not None
    )


def _keyed_beside(found: FoundTable, words: Sequence[Word]) -> list[Gutter]:
    """The gaps between the blocks of a table without rules that is blocks of text laid out side by side, [] when it
    is a table: a list of keys and their values set beside other columns (a word processor's borderless layout table
    holding an invoice's "Bill to" and "Ship to" addresses beside its "Invoice no.   HLP-2026-0317" lines, two lists
    of a project's facts side by side). Its evidence is a column after the first whose every cell is a key in bold
    (`LIST_ROWS` more rows than one at least) with a value not all in bold in the next column's cell of its row: a
    data table's bold cells are its header row, over bold column names, or its stub, the first column (a key column
    there too, where another stands further on). The gaps part the blocks, each read on its own, top to bottom; no gap
    parts a key from its value (`_laid_chunks`)."""
    if not all(words[i].font for i in found.words):
        return []  # bold read from a text layer's faces only: OCR's is guessed from strokes
    table = found.table
    grid = table.grid()
    keyed: set[int] = set()
    for col in range(table.cols - 1):
        keys = 0
        for row in grid:
            key, value = row[col], row[col + 1]
            if key is None or key.bbox is None or not key.text.strip():
                continue
            if key.col_span > 1 or value is None or value is key or value.bbox is None:
                break
            key_words = _cell_words(found, words, key.bbox)
            value_words = _cell_words(found, words, value.bbox)
            if not key_words or not all(w.bold for w in key_words) or not value_words:
                break
            if all(w.bold for w in value_words):
                break
            keys += 1
        else:
            if keys > LIST_ROWS:
                keyed.add(col)
    if not keyed - {0}:
        return []
    # each column's words' extent: a cell's box reaches to its column's edges, its words stand inside
    spans: list[tuple[float, float]] = []
    for col in range(table.cols):
        inside = [
            w
            for c in table.cells
            if c.col == col and c.col_span == 1 and c.bbox is not None
            for w in _cell_words(found, words, c.bbox)
        ]
        spans.append((min(w.x0 for w in inside), max(w.x1 for w in inside)) if inside else (0.0, 0.0))
    top, bottom = found.bbox[1], found.bbox[3]
    return [
        Gutter(spans[col][1], top, spans[col + 1][0], bottom)
        for col in range(table.cols - 1)
        if col not in keyed and spans[col][1] < spans[col + 1][0]
    ]


def _laid_chunks(found: FoundTable, gaps: Sequence[Gutter], words: Sequence[Word]) -> list[list[Piece]]:
    """A layout table's text (`_keyed_beside`) as chunks in reading order: block by block left to right (its `gaps`
    part them), each block's lines top to bottom; a block of keys reads a line a chunk, the key and its value one
    piece ("Invoice no. HLP-2026-0317": one line of text, not two columns), where another block's lines may run on
    into one paragraph (an address)."""
    out: list[list[Piece]] = []
    edges = [-float("inf"), *sorted((g.x0 + g.x1) / 2 for g in gaps), float("inf")]
    for left, right in itertools.pairwise(edges):
        rows = lines([words[i] for i in sorted(found.words) if left <= (words[i].x0 + words[i].x1) / 2 < right])
        if rows and all(_key_line(row) for row in rows):
            out += [[Piece(tuple(row))] for row in rows]
        elif rows:
            out.append([p for row in rows for p in pieces(row)])
    return out


def _words_box(found: FoundTable, words: Sequence[Word]) -> BBox:
    """The box around a found table's words."""
    taken = [words[i] for i in found.words]
    return (min(w.x0 for w in taken), min(w.y0 for w in taken), max(w.x1 for w in taken), max(w.y1 for w in taken))


def _key_line(line: Sequence[Word]) -> bool:
    """Whether a line is a key in bold and its value: bold words first, then words that are not."""
    k = next((n for n, w in enumerate(line) if not w.bold), 0)
    return k > 0 and not any(w.bold for w in line[k:])


def _laid_under(found: FoundTable, gaps: Sequence[Gutter], words: Sequence[Word]) -> FoundTable:
    """A layout table with the lines its blocks run on with under its last row (a table without rules takes the rows
    of two cells or more: an address's last two lines under a list of three keys beside it): a line under a block's
    last line, at most `UNDER_GAP` of a line's height under it, inside the block's gaps, on a row no word of which
    stands across a gap (a paragraph across the page under the table stays the page's)."""
    taken = set(found.words)
    middles = sorted((g.x0 + g.x1) / 2 for g in gaps)
    edges = [-float("inf"), *middles, float("inf")]
    for left, right in itertools.pairwise(edges):
        block = [i for i in taken if left <= (words[i].x0 + words[i].x1) / 2 < right]
        if not block:
            continue
        x0 = min(words[i].x0 for i in block)
        bottom = max(words[i].y1 for i in block)
        height = max(words[i].y1 - words[i].y0 for i in block)
        while True:
            row = [i for i, w in enumerate(words) if i not in taken and bottom < w.y0 <= bottom + UNDER_GAP * height]
            if any(words[i].x0 < m < words[i].x1 for i in row for m in middles):
                break
            under = [i for i in row if x0 - 1 <= words[i].x0 and (words[i].x0 + words[i].x1) / 2 < right]
            if not under:
                break
            taken.update(under)
            bottom = max(words[i].y1 for i in under)
    return replace(found, words=frozenset(taken))


def _cell_words(found: FoundTable, words: Sequence[Word], bbox: BBox) -> list[Word]:
    """The words of table `found` (indexes into `words`) whose centres lie in a cell's box."""
    return [words[i] for i in found.words if centre_in(words[i], bbox)]


def _running(side: list[tuple[Cell, list[Word]]]) -> bool:
    """Whether one side of a table's column gap holds running text: its lines `PROSE_WORDS` words long, as the
    middle line goes (a sentence's stretch; a table's cells of names and figures are shorter)."""
    per_line: list[int] = []
    for _, ws in side:
        per_line.extend(Counter(w.line if w.line >= 0 else round(w.y0) for w in ws).values())
    return bool(per_line) and sorted(per_line)[len(per_line) // 2] >= PROSE_WORDS


def _on_baseline(word: Word) -> bool:
    """Whether a word's box stands on its baseline (or the font's descent under it, the same for every word of its
    face): no glyph of it reaches below (`_DESCENDERS`), which some fonts' boxes follow."""
    return not any(ch in _DESCENDERS for ch in word.text)


def _without(words: list[Word], taken: Sequence[Iterable[int]]) -> list[Word]:
    """`words` less those whose indexes a found table took (the tables read them; the text must not again)."""
    gone = frozenset().union(*taken)
    return [w for i, w in enumerate(words) if i not in gone] if gone else words


def largest_images(images: Sequence[ImageRegion]) -> list[ImageRegion]:
    """At most `MAX_IMAGES` of a page's images, the largest, in their page order."""
    if len(images) <= MAX_IMAGES:
        return list(images)
    keep = set(sorted(range(len(images)), key=lambda i: -box_area(images[i].bbox))[:MAX_IMAGES])
    return [image for i, image in enumerate(images) if i in keep]


def _captioned(blocks: list[Block]) -> list[Block]:
    """Pictures and tables linked to the caption beside them: a figure's below it, else above; a table's only above.

    A caption serves one of them. A caption set under a table (an office report's `Table 1. ...` over its `Source:`
    line) stays a caption block of its own after the table: docling writes a table's linked caption before its rows,
    so linking it moved its text above the table, where the page does not print it (writer2_unicode_report and
    writer_language_codes, LibreOffice Writer's caption under a table; pymupdf4llm keeps the page's order).
    """
    used: set[int] = set()
    out = list(blocks)
    for i, block in enumerate(blocks):
        if block.kind not in (Kind.PICTURE, Kind.TABLE):
            continue
        sides = (i - 1,) if block.kind is Kind.TABLE else (i + 1, i - 1)
        for j in sides:
            free = 0 <= j < len(blocks) and blocks[j].kind is Kind.CAPTION and j not in used
            if free and not _under_table(blocks, j):
                used.add(j)
                out[i] = replace(block, caption=j)
                break
    return out


def _under_table(blocks: list[Block], j: int) -> bool:
    """Whether caption `j` is the one set under the table read just before it: nearer that table's foot than the
    top of the block after it (so the next table or figure does not take it for the caption over it)."""
    if j == 0 or blocks[j - 1].kind is not Kind.TABLE:
        return False
    above = blocks[j].bbox[1] - blocks[j - 1].bbox[3]
    below = blocks[j + 1].bbox[1] - blocks[j].bbox[3] if j + 1 < len(blocks) else math.inf
    # a next block that starts above the caption's foot (the next column's top) is not under it
    return above <= (below if below >= 0 else math.inf)


def _margins(runs: list[Piece], content: PageContent, style: Style) -> tuple[list[Block], list[Block], list[Piece]]:
    """Lines in the top and bottom margins, apart from the body: running heads, page numbers, footers.

    They never join a body paragraph (a page number read into the first sentence of a page); a lone number is a
    page header or footer at once, the rest is classified as any line (a one-page document's title set high is its
    title) and waits for `mark_furniture` to see whether it repeats: only repetition makes it furniture.
    """
    body_size = style.body_size
    numbers: dict[int, Block] = {}  # id(piece): its page-number block
    margin: list[Piece] = []
    body: list[Piece] = []
    highest = min((p.y0 for p in runs), default=0.0)
    lowest = max((p.y1 for p in runs), default=0.0)
    for piece in runs:
        # A chapter's big number at the top of its first page is no page number: page numbers are body-sized.
        number = PAGE_NUMBER.match(piece.text) is not None and piece.size < PAGE_NUMBER_SIZE * body_size
        if number and piece.y0 <= highest and piece.y1 <= PAGE_NUMBER_ZONE * content.height:
            numbers[id(piece)] = Block(Kind.PAGE_HEADER, piece.bbox, piece.text)
        elif number and piece.y1 >= lowest and piece.y0 >= (1 - PAGE_NUMBER_ZONE) * content.height:
            numbers[id(piece)] = Block(Kind.PAGE_FOOTER, piece.bbox, piece.text)
        elif piece.y1 <= MARGIN * content.height or piece.y0 >= (1 - MARGIN) * content.height:
            margin.append(piece)
        else:
            body.append(piece)
    if not body:
        # A page of nothing but margin lines (a title page set low, a short note): it is all body.
        return [], [], runs
    # A text block may start (or end) inside the margin zone: its first line, set at the block's own line spacing
    # from the next, is body, or each column's first line would be read before the whole page. A running head or a
    # footer stands further off. Nearest the body first, so a block's second line in the zone carries its first.
    middle = content.height / 2
    in_margin = {id(p) for p in margin}
    joined: set[int] = set()
    nearest_first = sorted(margin, key=lambda p: min(abs(p.y0 - middle), abs(p.y1 - middle)))
    for piece in nearest_first:
        if _continues_block(piece, body):
            body.append(piece)
            joined.add(id(piece))
    # A column whose first paragraph ends inside the zone (the IRS instructions' second column: two lines, then a
    # paragraph's space) does not reach the body by its spacing, but its lines stand on the rows of the columns
    # beside it that did: a line on a body line's row, in its type, is the body's too; and then the lines above it.
    row_joined = [p for p in nearest_first if id(p) not in joined and _on_body_row(p, body)]
    if row_joined:
        body += row_joined
        joined |= {id(p) for p in row_joined}
        for piece in nearest_first:
            if id(piece) not in joined and _continues_block(piece, body):
                body.append(piece)
                joined.add(id(piece))
    top: list[Block] = []
    bottom: list[Block] = []
    for piece in runs:
        if id(piece) in numbers:
            block = numbers[id(piece)]
            (top if block.kind is Kind.PAGE_HEADER else bottom).append(block)
        elif id(piece) in in_margin and id(piece) not in joined:
            (top if piece.y1 <= MARGIN * content.height else bottom).append(margin_line(piece, style, content))
    return top, bottom, [p for p in runs if id(p) not in numbers and (id(p) in joined or id(p) not in in_margin)]


def _on_body_row(piece: Piece, body: list[Piece]) -> bool:
    """Whether `piece` stands on the row of a body line beside it: another column's line (not overlapping it across)
    on its baseline and in its size, each within `LEADING_SLACK` of its size (columns of one text block share their
    rows; a running head is set apart from them)."""
    slack = LEADING_SLACK * piece.size
    return any(
        (p.x1 <= piece.x0 or piece.x1 <= p.x0) and abs(p.y1 - piece.y1) <= slack and abs(p.size - piece.size) <= slack
        for p in body
    )


def _continues_block(piece: Piece, body: list[Piece]) -> bool:
    """Whether `piece` is a line of a body text block: the nearest body line above or below it (overlapping it
    across) is as near as that line's own next line on the far side, within a tenth of the font size, and those
    two are lines of one block (at most a blank line apart: double-spaced text leaves about one)."""
    across = [p for p in body if p.x0 < piece.x1 and piece.x0 < p.x1]
    below = sorted((p for p in across if p.y0 >= piece.y1 - 1), key=lambda p: p.y0)
    above = sorted((p for p in across if p.y1 <= piece.y0 + 1), key=lambda p: -p.y1)
    slack = LEADING_SLACK * piece.size
    if len(below) >= 2:
        near, far = below[0], next((p for p in below[1:] if p.y0 >= below[0].y1 - 1), None)
        if far is not None and near.y0 - piece.y1 <= min(far.y0 - near.y1, near.size) + slack:
            return True
    if len(above) >= 2:
        near, far = above[0], next((p for p in above[1:] if p.y1 <= above[0].y0 + 1), None)
        if far is not None and piece.y0 - near.y1 <= min(near.y0 - far.y1, near.size) + slack:
            return True
    return False


def _classified(chunk: list[Piece], style: Style, content: PageContent, frames: list[BBox]) -> list[Block]:
    out = []
    grouped = paragraphs(chunk, content.width / 2)
    for paragraph in grouped:
        framed = any(contains(frame, paragraph[0].bbox) for frame in frames)
        block = classify(paragraph, style, content.number, content.height, framed=framed)
        # A key beside its value on one line is no heading: a heading stands alone on its line.
        if block.kind is Kind.SECTION_HEADER and keyed(paragraph, chunk):
            block = replace(block, kind=Kind.TEXT, level=0)
        out.append(block)
    # A bold item of a numbered list counts on from its neighbours: no section of its own.
    for i, paragraph in enumerate(grouped):
        out[i] = counts_on(paragraph, out[i], out[max(0, i - 1) : i] + out[i + 1 : i + 2])
    # A label line in italics at body size heads only what follows it in the column: text, not another label, a
    # caption or nothing (a figure's italic label, a by-line).
    for i, (paragraph, block) in enumerate(zip(grouped, out, strict=True)):
        label = block.kind is Kind.SECTION_HEADER and italic_label(paragraph, block.text)
        if label and max(p.size for p in paragraph) < HEADING_RATIO * style.body_size:
            heads = i + 1 < len(out) and out[i + 1].kind is Kind.TEXT
            heads = heads and not centred_over(block.bbox, out[i + 1].bbox, max(p.size for p in paragraph))
            if not heads:
                out[i] = replace(block, kind=Kind.TEXT, level=0)
    return out


def _extend(blocks: list[Block], chunk: list[Block]) -> None:
    """A column chunk's blocks appended; its first paragraph joins the last paragraph before it (past footnotes,
    figures, tables and captions at the foot of the column: text flows around them) when a column break split it."""
    if chunk and blocks:
        k = len(blocks) - 1
        while k > 0 and blocks[k].kind in _FLOATS:
            k -= 1
        if continues(blocks[k], chunk[0]):
            blocks[k] = replace(blocks[k], text=join([blocks[k].text, chunk[0].text]))
            chunk = chunk[1:]
    blocks.extend(chunk)


#: What a column's text flows around: a paragraph split by a column break continues past these.
_FLOATS = frozenset({Kind.FOOTNOTE, Kind.PICTURE, Kind.TABLE, Kind.CAPTION})


def continues(prev: Block, block: Block) -> bool:
    """Whether `block` continues the paragraph `prev` across a column or page break: both text, `prev` ends
    mid-sentence (and is more than a stray fragment), `block` starts lowercase."""
    return (
        prev.kind is Kind.TEXT
        and block.kind is Kind.TEXT
        and block.text[:1].islower()
        and len(prev.text.split()) >= MIN_CONTINUED_WORDS
        and not SENTENCE_END.search(prev.text)
    )


def join_pages(layouts: Sequence[PageLayout]) -> list[PageLayout]:
    """Paragraphs split by a page break joined: the last body paragraph of a page (past its footnotes and
    furniture) takes the next page's first body paragraph when `continues` says so. A document-level pass, for
    whole-document output (Markdown, JSON); a page-by-page stream cannot take text back from a page it has sent."""
    out = list(layouts)
    skip = (Kind.FOOTNOTE, Kind.PAGE_HEADER, Kind.PAGE_FOOTER)
    for n in range(1, len(out)):
        prev_blocks, next_blocks = list(out[n - 1].blocks), list(out[n].blocks)
        k = max((i for i, b in enumerate(prev_blocks) if b.kind not in skip), default=-1)
        m = min((i for i, b in enumerate(next_blocks) if b.kind not in skip), default=-1)
        if k < 0 or m < 0 or not continues(prev_blocks[k], next_blocks[m]):
            continue
        prev_blocks[k] = replace(prev_blocks[k], text=join([prev_blocks[k].text, next_blocks[m].text]))
        del next_blocks[m]
        # captions point at block indices: the removed block shifts those after it
        next_blocks = [replace(b, caption=b.caption - (b.caption > m)) if b.caption >= 0 else b for b in next_blocks]
        out[n - 1] = replace(out[n - 1], blocks=tuple(prev_blocks))
        out[n] = replace(out[n], blocks=tuple(next_blocks))
    return out


def _caption_words(over: list[int], words: list[Word]) -> set[int]:
    # Lines over a picture that start like a caption ("Figure 3-11 Selecting...") are its caption, not its labels.
    index = {id(words[i]): i for i in over}
    keep: set[int] = set()
    for line in lines([words[i] for i in over]):
        if CAPTION.match(" ".join(w.text for w in line)):
            keep |= {index[id(w)] for w in line}
    return keep


def _running_in(over: list[int], words: list[Word], taken: set[int], box: BBox) -> set[int]:
    """The words over a picture (`over`) that are the end of a line of the page's text begun outside it: a piece of
    a line (`lines.pieces`, words at word spacing) that starts beside the picture and runs into it is the page's
    text set over a background photo (a cover's selling point running onto its picture); a figure's labels stand
    wholly inside it."""
    if not over:
        return set()
    top, bottom = box[1], box[3]
    band = [i for i, w in enumerate(words) if i not in taken and w.y1 > top and w.y0 < bottom]
    inside = set(over)
    if all(i in inside for i in band):
        # Nothing beside the picture for a line to begin at: skip building the band's lines, which on a hostile page
        # (pictures up to MAX_IMAGES, each over tens of thousands of words) cost a quarter CPU second a picture.
        return set()
    index = {id(words[i]): i for i in band}
    keep: set[int] = set()
    for line in lines([words[i] for i in band]):
        for piece in pieces(line):
            ids = [index[id(w)] for w in piece.words]
            if any(i in inside for i in ids) and any(i not in inside for i in ids):
                keep |= {i for i in ids if i in inside}
    return keep

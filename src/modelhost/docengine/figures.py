"""Figures drawn as vectors: a chart's or a diagram's region, found from its ink and the short labels around it.

A chart or a diagram set in a PDF as vector paths (matplotlib's, TikZ's, a drawing program's) holds its text as
text-layer words on a grid: tick labels, a legend, axis titles, panel labels, a diagram's box labels. Read as text
they make false tables (the ticks' rows and columns), false headings (a bold panel title, "10 Training epochs" set
larger than the body) and labels spliced into paragraphs. An image object tells the text path where a raster figure
stands (`analyse`: pictures take the words over them); a vector figure has no such object, so its region is found
from evidence on the page:

- its ink: the page's vector paths (`PageContent.drawings`, `rulings`, `fills`) clustered by nearness
  (`INK_GAP`): axes, ticks, curves, bars and boxes of one figure touch or nearly touch;
- what makes the ink a figure's and not a table's or a frame's: curves, slanted lines, polygons or marks inside it
  (`PageContent.drawings` other than one frame around it), ticks (rules a tick long, `TICK`), or bars (filled
  rectangles with no words on them; a fill with words on it is their backdrop, no ink); an image inside the ink
  (a heatmap's raster in its axes) is part of the figure, but an image alone is the image path's; a ruled table is
  only horizontal and vertical rules around cells of text, and the ruled tables are found (and take their words)
  before this runs;
- its words are labels, not prose: a paragraph in a rounded box is a note, not a figure (`PROSE_SHARE`);
- its labels: short pieces of text outside the ink that stand within `LABEL_REACH` of their own height from it (a
  tick label beside its tick, an axis title beside the tick labels) and within its extent along that side (a line
  of the page's text under a drawing runs past its ends), taken a few rounds outwards.

`analyse` then reads each region as it reads an image: a `<picture>` whose labels are the picture's, its caption
kept, a line of the page's text running into it kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from modelhost.docengine.lines import lines, pieces
from modelhost.docengine.partition import Partition
from modelhost.docengine.types import BBox, PageContent, Segment, Word

__all__ = ["box_area", "box_union", "boxes_apart", "centre_in", "contains", "drawn_within", "vector_figures"]

#: Ink covering this share of the page or more is its background (a coloured page, a slide's backdrop), no figure's:
#: the share `analyse` reads an image as a background from (a cover's photo under its text).
BACKGROUND_SHARE = 0.6
#: Ink boxes this many body sizes apart or nearer are one figure's: a chart's ticks touch its spines, its legend
#: and curves lie inside them, a diagram's arrows touch its boxes. Two figures side by side stand a column gap
#: (1 em and more) plus their labels apart, and are told apart again by their labels' own regions.
INK_GAP = 0.5
#: A figure's ink is at least this many body sizes on each side: an axis with ticks needs a few lines of text's
#: height (a panel of a column-wide grid of four, 2.7 sizes tall on the drawn two-column page), a row of boxed labels
#: a line and a box's padding above and below it (3.5 on the drawn page); a rule under a heading, a bullet drawn as
#: a circle, a box around a word is smaller. (Larger marks that are no figures are told by their words: a logo's
#: `MIN_LABELS`, an icon beside a paragraph's `_cuts`.)
MIN_SIDE = 2.0
#: A drawing covering this share of the ink's box or more is a frame around it (a rounded box, a border), no mark
#: inside it: a table or a note in a rounded frame is no figure.
FRAME_COVER = 0.9
#: Figure regions this many body sizes apart or nearer are one figure's panels (a grid of subplots, set a column
#: gap apart at most: LaTeX's \columnsep is 1 em, matplotlib's subplot spacing 0.2 of an axis); paragraphs of text
#: never stand between them.
PANEL_GAP = 1.5
#: A rule this many body sizes long or shorter is a tick (matplotlib's are 3.5 points beside 10 point labels, 0.35
#: of a size; TikZ's and Excel's alike); a table's rules span a cell, a word or more.
TICK = 0.8
#: Ticks side by side along a line, this many or more, are an axis (a figure's mark): an axis has five or more, a
#: frame's corners two to a side, a stray short rule (a dash drawn as a line) one.
MIN_TICKS = 3
#: Filled rectangles with no word on them, this many at least, are a bar chart's bars (a shaded table's fills hold
#: its cells' words; one or two empty fills are a background or a swatch).
MIN_BARS = 3
#: A figure is labelled with at least this many words of letters or digits: a logo carries a name or a mark ("®"),
#: a chart its ticks and titles, a diagram its boxes' names.
MIN_LABELS = 3
#: Lines of one paragraph stand less than this many of their heights apart (leading: 1.2 times the size, so 0.2-0.5
#: of a line's box between lines); a chart's stacked tick labels stand further apart or are all its own.
LINE_GAP = 0.6
#: A figure's words are labels: when at least this share of them stand in prose pieces (`PROSE_WORDS` words on one
#: line) the ink is a box around text (a sidebar, a callout), which the page reads as text.
PROSE_SHARE = 0.5
#: A piece of this many words is prose (as `analyse.PROSE_WORDS` says: a sentence's stretch; labels have 1 to 4).
PROSE_WORDS = 5
#: A label stands this many of its own heights from the figure or nearer: matplotlib sets a tick label its tick's
#: length plus a pad (3.5 + 3.5 points beside 10 point labels, 0.7 heights) from the axis, an axis title 4 points
#: (0.4) past the tick labels; a page's paragraph stands a float's separation (LaTeX's \\intextsep, 12 points and
#: more, above a line's own height) away.
LABEL_REACH = 0.8
#: Rounds of labels taken outwards: the tick labels, then the axis titles past them, then a title over a legend.
LABEL_ROUNDS = 3
#: A drawn mark (a curve or a slanted path) this many body sizes long or longer, inside a ruled "table", is a
#: figure's shape: a region of a diagram, a circuit's resistor (2.4 sizes) or coil, an arrow. A table's cells hold
#: text and at most a symbol drawn as a path (a check mark, a dot, a circle for "yes": an em or less), and its own ink
#: is its rules and fills. (Found on real pages: a framed diagram panel and circuit diagrams whose wires, being
#: rules, closed into a grid of "cells" holding their component labels.)
SHAPE_SIZES = 1.5
#: Drawn marks per word at least, in a ruled "table" that is a figure: a diagram or a plot draws a path for every
#: few of its labels (a shape, a component, a point: 0.3-1.5 on real pages); a report's table that holds a chart in
#: one of its cells has hundreds of words to the chart's few paths (0.02 on a dev page), and stays a table.
MARKS_PER_WORD = 0.1
#: A drawn mark smaller than this many body sizes on both sides is a dot (a rule's round join, a corner's pixel,
#: 0.7 points in a dev table) and weighs for nothing; a plotted point or a drawn symbol is a third of a size or more.
DOT_SIZES = 0.3


#: Ink boxes considered at most (drawings, rules and fills together, the largest first): real figures draw a few
#: hundred to a few thousand; the clustering's grid costs in proportion, so a hostile page stays bounded.
MAX_INK = 8_000
#: Grid cells one ink box may register in at most: a long rule across the page spans a few hundred cells of
#: `INK_GAP` body sizes; a larger box is rare, and its corners alone are registered.
MAX_CELLS = 4_096
#: Groups of ink joined pairwise at most: a page has a few figures, rules and boxes; each join compares every pair
#: again (a cube of the count at worst), so a page of hundreds of scattered rules (a form) keeps its groups as found.
MAX_GROUPS = 100
#: Clusters weighed as figures at most, the largest first: each is matched against every word and drawing, and a
#: page holds a handful of figures; a hostile page of thousands of separate marks stays bounded.
MAX_FIGURES = 50
#: Rules ending this many points from each other meet (a box's corner drawn as four strokes; rules merged from a
#: producer's pieces end within a stroke's width of each other).
CORNER_SLACK = 1.5
#: Body sizes a panel's frame may stand inside the figure's ends: a box nested in a box (a body's backdrop inside
#: its frame: 2 pt in on the sweep's tcolorbox listings, 10-point type) is as wide as the figure.
PANEL_INSET = 0.5
#: Two closed boxes stand apart when this many body sizes of blank lie between them at least: a diagram's class boxes
#: or flow chart's steps stand a connector's length apart (12-40 pt on the sweep's UML page, 5.6 pt type); a table's
#: cells and bands share their rules (0 apart), and a shadow drawn under a box overlaps it.
BOXES_APART = 2.0
#: Horizontal rules looked at in one table at most, for its boxes: a table ruled row by row has a few hundred.
MAX_BOX_RULES = 2_000


def vector_figures(
    content: PageContent, words: Sequence[Word], taken: set[int], claimed: Sequence[BBox], body: float
) -> list[BBox]:
    """The regions of the page's figures drawn as vectors: each its ink and its labels' box. `taken` indexes the
    words of `words` a table already read; `claimed` are boxes (tables) whose ink is theirs; `body` is the body size."""
    if not content.drawings and not content.fills:
        # Only a text layer draws paths: a page read from its pixels (its rules found in the pixels, no drawings, no
        # fills) has its figures boxed by the layout model, and a page with no path but rules holds no chart.
        return []
    body = max(body, 1.0)
    page_area = max(content.width * content.height, 1.0)

    def free(box: BBox) -> bool:
        # Ink of a found table, or a background under most of the page, is no figure's.
        return not any(contains(c, box) for c in claimed) and box_area(box) < BACKGROUND_SHARE * page_area

    upright = [(i, w) for i, w in enumerate(words) if i not in taken]
    drawings = [b for b in content.drawings if free(b)]
    rules = [(s.x0, s.y0, s.x1, s.y1) for s in content.rulings]
    ticks = [b for b in rules if max(b[2] - b[0], b[3] - b[1]) <= TICK * body and free(b)]
    # A fill with words on it is their backdrop (a shaded box, a cover's panel, a chart's own background): no ink.
    bars = [b for b in content.fills if free(b) and not any(centre_in(w, b) for _, w in upright)]
    if len(drawings) + len(ticks) + len(bars) == 0:
        return []
    ink = [*drawings, *(b for b in rules if free(b)), *bars]
    ink = sorted(ink, key=lambda b: -max(b[2] - b[0], b[3] - b[1]))[:MAX_INK]
    images = [i.bbox for i in content.images if free(i.bbox)]
    clusters = _clusters([*ink, *images], INK_GAP * body)
    clusters = sorted(clusters, key=lambda b: -box_area(b))[:MAX_FIGURES]
    found: list[BBox] = []
    for box in clusters:
        if min(box[2] - box[0], box[3] - box[1]) < MIN_SIDE * body or _bleeds(box, content):
            continue
        inner = [w for _, w in upright if centre_in(w, box)]
        marks = sum(
            1
            for d in drawings
            if contains(box, d)
            and box_area(d) < FRAME_COVER * box_area(box)
            and not _corner(d, box, body)
            and not _panel(d, box, body, inner)
        )
        marks += _axes([t for t in ticks if contains(box, t)])
        if not (marks or _bars([b for b in bars if contains(box, b)]) >= MIN_BARS) or _prose(inner):
            continue
        region = _labelled(box, upright, body)
        if region is None:
            continue
        labels = [w for _, w in upright if centre_in(w, region) and any(c.isalnum() for c in w.text)]
        # A figure with no words has no labels to keep out of the text (left alone), nor has a logo with its mark.
        if len(labels) >= MIN_LABELS:
            found.append(region)
    return _merged(found, PANEL_GAP * body)


def drawn_within(box: BBox, cells: int, words: int, drawings: Sequence[BBox], body: float) -> bool:
    """Whether a ruled table's `box` (of `cells` cells holding `words` words) holds a figure's drawing rather than a
    table's text: drawn marks (`DOT_SIZES` and over), `MARKS_PER_WORD` at least, among which a shape `SHAPE_SIZES`
    long or longer, or more of them than the table has cells (a plot's points scattered in a framed panel; a table's
    symbols stand one to a cell). A path around the whole box (a rounded frame, `FRAME_COVER`) and a corner's arc
    (within its own size of a corner) are the table's border."""
    body = max(body, 1.0)
    x0, y0, x1, y1 = box
    corners = ((x0, y0), (x1, y0), (x0, y1), (x1, y1))
    marks = 0
    shape = False
    for d in drawings:
        if not contains(box, d) or box_area(d) >= FRAME_COVER * box_area(box):
            continue
        side = max(d[2] - d[0], d[3] - d[1])
        reach = side + 1
        if any(
            max(abs(d[0] - cx), abs(d[2] - cx)) <= reach and max(abs(d[1] - cy), abs(d[3] - cy)) <= reach
            for cx, cy in corners
        ):
            continue  # a rounded corner's arc
        shape = shape or side >= SHAPE_SIZES * body
        marks += side >= DOT_SIZES * body
    return marks >= MARKS_PER_WORD * words and (shape or marks > cells)


def boxes_apart(box: BBox, rules: Sequence[Segment], words: Sequence[Word], body: float) -> bool:
    """Whether a ruled table's `box` is a diagram of boxes linked by lines (a UML class diagram, a flow chart): its
    closed boxes, each holding words, fall into two groups or more `BOXES_APART` apart (boxes nearer than that, or
    overlapping, are one group: a box and its drawn shadow, a table's cells and bands, which share their rules). A
    closed box is two vertical rules of one extent (`CORNER_SLACK`), a body size tall at least, and a horizontal rule
    from one to the other (its top, its bottom or a compartment's); a table's rules close boxes all over it that make
    one group, or none (open rules)."""
    body = max(body, 1.0)
    inside = [s for s in rules if contains(box, (s.x0, s.y0, s.x1, s.y1))]
    across = [s for s in inside if s.horizontal][:MAX_BOX_RULES]
    uprights = sorted((s for s in inside if not s.horizontal and s.y1 - s.y0 >= body), key=lambda s: s.x0)
    closed: list[BBox] = []
    for i, a in enumerate(uprights[:MAX_BOX_RULES]):
        for b in uprights[i + 1 : MAX_BOX_RULES]:
            if b.x0 - a.x0 < body or abs(a.y0 - b.y0) > CORNER_SLACK or abs(a.y1 - b.y1) > CORNER_SLACK:
                continue
            top, bottom = min(a.y0, b.y0), max(a.y1, b.y1)
            if any(
                h.x0 <= a.x0 + CORNER_SLACK
                and h.x1 >= b.x0 - CORNER_SLACK
                and top - CORNER_SLACK <= h.y0 <= bottom + CORNER_SLACK
                for h in across
            ) and any(centre_in(w, (a.x0, top, b.x0, bottom)) for w in words):
                closed.append((a.x0, top, b.x0, bottom))
    gap = BOXES_APART * body
    groups: list[BBox] = []
    for c in closed:
        # a union may reach groups its parts did not: join until it reaches none
        while near := [g for g in groups if not _apart(g, c, gap)]:
            groups = [g for g in groups if _apart(g, c, gap)]
            c = box_union([c, *near])
        groups.append(c)
    # A row rule running on through two groups ties them (a table whose one column's verticals start a row lower,
    # under a cell spanning the columns before it, closes no box across that column): a connector between a
    # diagram's boxes ends at their sides, where a table's rules run on into both.
    return len(groups) >= 2 and not all(
        any(_through(h, g, body) and _through(h, groups[0], body) for h in across) for g in groups[1:]
    )


def _through(rule: Segment, box: BBox, body: float) -> bool:
    """Whether a horizontal `rule` runs a `body` size or more into `box` and stands at a height within it."""
    return (
        rule.x0 <= box[2] - body
        and rule.x1 >= box[0] + body
        and box[1] - CORNER_SLACK <= rule.y0 <= box[3] + CORNER_SLACK
    )


def _apart(a: BBox, b: BBox, gap: float) -> bool:
    """Whether boxes `a` and `b` stand `gap` apart or more, across or down."""
    return a[2] + gap <= b[0] or b[2] + gap <= a[0] or a[3] + gap <= b[1] or b[3] + gap <= a[1]


def _axes(ticks: list[BBox]) -> int:
    """Rows of ticks: `MIN_TICKS` short rules or more of one direction standing side by side along one line (an
    axis's ticks share their ends); a frame's short corner pieces stand two to a side."""
    rows: dict[tuple[bool, int, int], set[int]] = {}
    for x0, y0, x1, y1 in ticks:
        upright = y1 - y0 > x1 - x0
        key = (upright, round(y0), round(y1)) if upright else (upright, round(x0), round(x1))
        rows.setdefault(key, set()).add(round(x0) if upright else round(y0))
    return sum(1 for places in rows.values() if len(places) >= MIN_TICKS)


def _bars(fills: list[BBox]) -> int:
    """The most empty fills standing on one baseline apart from each other: a bar chart's bars share their foot
    (vertical bars their bottom, horizontal ones their left end) with gaps between them; a box's stripes, a code
    block's shaded lines, touch each other."""
    best = 0
    for foot, lo, hi in ((3, 0, 2), (0, 1, 3)):  # vertical bars: bottoms, x spans; horizontal: left ends, y spans
        groups: dict[int, list[tuple[float, float]]] = {}
        for b in fills:
            groups.setdefault(round(b[foot]), []).append((b[lo], b[hi]))
        for spans in groups.values():
            spans.sort()
            # Sorted by start, a span stands apart when the furthest end before it and the next start leave it a
            # point clear on each side (n log n: a hostile page's MAX_FILLS on one baseline stays cheap).
            reach, apart = float("-inf"), 0
            for i, (a, z) in enumerate(spans):
                following = spans[i + 1][0] if i + 1 < len(spans) else float("inf")
                apart += reach + 1 <= a and z + 1 <= following
                reach = max(reach, z)
            best = max(best, apart)
    return best


def _bleeds(box: BBox, content: PageContent) -> bool:
    """Whether ink runs off the page's edge (within a point): a masthead's or a banner's design, printed to the trim;
    a figure stands inside the page's margins with the text."""
    return box[0] <= 1 or box[1] <= 1 or box[2] >= content.width - 1 or box[3] >= content.height - 1


def _corner(drawing: BBox, box: BBox, body: float) -> bool:
    """A frame's rounded corner: a curve smaller than a body size each way at one of the box's corners, touching a
    side and the top or bottom. A shaded box around a code listing (listings' and tcolorbox's frames) has these four
    curves for all its drawn marks, and its code was read as a figure's labels and lost; a chart's curves and marks
    stand inside its axes or run across them."""
    x0, y0, x1, y1 = drawing
    if x1 - x0 > body or y1 - y0 > body:
        return False
    side = min(abs(x0 - box[0]), abs(x1 - box[2])) <= CORNER_SLACK
    end = min(abs(y0 - box[1]), abs(y1 - box[3])) <= CORNER_SLACK
    return side and end


def _panel(drawing: BBox, box: BBox, body: float, inner: list[Word]) -> bool:
    """A box drawn around text across the whole figure's width: one of a stack of titled boxes (tcolorbox's file
    listings, a title bar over its body), each box's frame and its body's backdrop drawn as paths. Its words are
    text; a chart's plot area across its width has its axes' ticks, its curves or its bars besides."""
    x0, x1 = drawing[0], drawing[2]
    if x0 - box[0] > PANEL_INSET * body or box[2] - x1 > PANEL_INSET * body:
        return False
    return any(centre_in(w, drawing) for w in inner)


def _prose(inner: list[Word]) -> bool:
    flat = [w for w in inner if not w.rotation]
    if not flat:
        return False
    prose = sum(len(p.words) for line in lines(flat) for p in pieces(line) if len(p.words) >= PROSE_WORDS)
    return prose >= PROSE_SHARE * len(flat)


def _labelled(box: BBox, upright: list[tuple[int, Word]], body: float) -> BBox | None:
    """`box` grown by the labels around it: short pieces (`PROSE_WORDS`) within `LABEL_REACH` of their height; None
    where a label would be a line of a paragraph going on outside the box (`_cuts`): the mark is an icon beside
    text (the IRS's caution sign beside its paragraph), no figure."""
    x0, y0, x1, y1 = box
    outside = [w for _, w in upright if not centre_in(w, box)]
    if not outside:
        return box
    # Pieces of the words near the figure, built once: a label is a whole short piece, never a line's part.
    margin = (LABEL_REACH * LABEL_ROUNDS + 2) * 2 * body
    near = [
        w for w in outside if w.x1 > x0 - margin and w.x0 < x1 + margin and w.y1 > y0 - margin and w.y0 < y1 + margin
    ]
    flat = [w for w in near if not w.rotation]
    every = [list(p.words) for line in lines(flat) for p in pieces(line)]
    groups = [g for g in every if len(g) < PROSE_WORDS] + [[w] for w in near if w.rotation]
    taken: list[list[Word]] = []
    for _ in range(LABEL_ROUNDS):
        grown = False
        rest = []
        for group in groups:
            gx0, gy0 = min(w.x0 for w in group), min(w.y0 for w in group)
            gx1, gy1 = max(w.x1 for w in group), max(w.y1 for w in group)
            reach = LABEL_REACH * min(min(w.height, w.x1 - w.x0) if w.rotation else w.height for w in group)
            dx = max(x0 - gx1, gx0 - x1, 0.0)
            dy = max(y0 - gy1, gy0 - y1, 0.0)
            # Within reach, and within the figure's extent along the side it stands on: an axis's labels stand along
            # the axis, a title over the plot; a line of the page's text beside a drawing runs past its ends.
            along = (dy == 0 or (gx0 >= x0 - reach and gx1 <= x1 + reach)) and (
                dx == 0 or (gy0 >= y0 - reach and gy1 <= y1 + reach)
            )
            if max(dx, dy) <= reach and (along or (dx > 0 and dy > 0)):
                x0, y0, x1, y1 = min(x0, gx0), min(y0, gy0), max(x1, gx1), max(y1, gy1)
                taken.append(group)
                grown = True
            else:
                rest.append(group)
        groups = rest
        if not grown:
            break
    return None if _cuts(taken, every) else (x0, y0, x1, y1)


def _cuts(labels: list[list[Word]], pieces_near: list[list[Word]]) -> bool:
    """Whether a label taken is a line of a paragraph that goes on without it: a line not taken stands next under
    or over it (less than `LINE_GAP` of its height apart, across from it), in its size (the IRS's paragraph beside
    its caution sign runs on under the sign). A figure's labels are its own: tick labels stacked along an axis are
    all taken, and a caption or a paragraph stands a float's separation from an axis title."""
    ids = {id(w) for group in labels for w in group}
    rest = [p for p in pieces_near if not any(id(w) in ids for w in p)]
    for group in labels:
        if group[0].rotation:
            continue
        gx0, gx1 = min(w.x0 for w in group), max(w.x1 for w in group)
        gy0, gy1 = min(w.y0 for w in group), max(w.y1 for w in group)
        height, size = gy1 - gy0, max(w.size for w in group)
        for p in rest:
            px0, px1 = min(w.x0 for w in p), max(w.x1 for w in p)
            py0, py1 = min(w.y0 for w in p), max(w.y1 for w in p)
            near = max(py0 - gy1, gy0 - py1) < LINE_GAP * height and px0 < gx1 and gx0 < px1
            if near and abs(max(w.size for w in p) - size) < 0.5:
                return True
    return False


def _clusters(boxes: list[BBox], gap: float) -> list[BBox]:
    """The boxes of groups of `boxes` standing `gap` apart or nearer (a grid of `gap`-sized cells, union-find)."""
    if not boxes:
        return []
    partition = Partition(len(boxes))
    cell = max(gap, 1.0)
    owner: dict[tuple[int, int], int] = {}
    for i, (x0, y0, x1, y1) in enumerate(boxes):
        cx0, cy0 = int((x0 - gap / 2) // cell), int((y0 - gap / 2) // cell)
        cx1, cy1 = int((x1 + gap / 2) // cell), int((y1 + gap / 2) // cell)
        if (cx1 - cx0 + 1) * (cy1 - cy0 + 1) > MAX_CELLS:
            keys = [(cx0, cy0), (cx0, cy1), (cx1, cy0), (cx1, cy1)]
        else:
            keys = [(cx, cy) for cx in range(cx0, cx1 + 1) for cy in range(cy0, cy1 + 1)]
        for key in keys:
            j = owner.setdefault(key, i)
            if j != i:
                partition.join(i, j)
    out = [box_union([boxes[i] for i in group]) for group in partition.groups()]
    # A group's box may reach over another's (an L of ink): join those, where there are few enough groups to
    # compare pairwise (MAX_GROUPS); scattered marks by the thousand are left as they are.
    return _merged(out, gap) if len(out) <= MAX_GROUPS else out


def _merged(boxes: list[BBox], gap: float) -> list[BBox]:
    """Boxes that overlap or stand within `gap` of each other joined, until none do."""
    out = list(boxes)
    changed = True
    while changed and len(out) > 1:
        changed = False
        for i in range(len(out)):
            for j in range(i + 1, len(out)):
                a, b = out[i], out[j]
                if a[0] - gap <= b[2] and b[0] - gap <= a[2] and a[1] - gap <= b[3] and b[1] - gap <= a[3]:
                    out[i] = (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))
                    del out[j]
                    changed = True
                    break
            if changed:
                break
    return out


def box_union(boxes: Sequence[BBox]) -> BBox:
    """The smallest box holding every one of `boxes` (at least one)."""
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def box_area(box: BBox) -> float:
    """A box's area in square points (0 for an empty or inverted box)."""
    return max(box[2] - box[0], 0.0) * max(box[3] - box[1], 0.0)


def box_overlap(a: BBox, b: BBox) -> float:
    """The area two boxes share in square points (0 where they do not meet)."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def contains(outer: BBox, inner: BBox) -> bool:
    """Whether `inner` lies inside `outer`, give or take a point (producers' rounding of boxes)."""
    return (
        outer[0] <= inner[0] + 1 and outer[1] <= inner[1] + 1 and inner[2] <= outer[2] + 1 and inner[3] <= outer[3] + 1
    )


def centre_in(word: Word, box: BBox) -> bool:
    """Whether the centre of `word` lies in `box`."""
    cx, cy = (word.x0 + word.x1) / 2, (word.y0 + word.y1) / 2
    return box[0] <= cx <= box[2] and box[1] <= cy <= box[3]

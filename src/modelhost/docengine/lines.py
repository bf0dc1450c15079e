"""Words into lines, and lines into pieces: the runs of words that no column gutter or table gap cuts.

A text-layer line (pdfium's own line numbering) may run across two columns or across a table's cells when their
baselines agree; OCR gives no line numbers at all. So lines are rebuilt from geometry, in two steps:

- `gutters`: the page's gutters, found before any line is built. A gutter is a property of the page, not of one
  line's word gap: an x range that stays empty down many consecutive rows of text while text stands on both sides
  of it. A word space, however stretched, never stays at one x for several lines; a gutter does, however narrow.
- `lines`: words of one direction whose vertical extents overlap by half the smaller height are one line, unless a
  gutter beside them stands between them; each line read in its direction (left to right, or right to left for
  Arabic and Hebrew). Then `pieces` cuts a line wherever the gap between two words is wider than `PIECE_GAP` times
  the font size (a table's cell gaps, a gutter no run of rows shows). Pieces are what reading order and paragraphs
  work on.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from modelhost.docengine.types import BBox, Word

#: A gap wider than this many font sizes between two words of one line separates two pieces (gutter, table cell).
#: Justified text stretches word spaces to ~1 em at worst; a two-column gutter is ~2 em and more. Between
#: letter-spaced words (`Word.tracking`) the gap is measured with their tracking taken off.
PIECE_GAP = 1.6
#: Code aligns with runs of spaces: between monospace words only a gap this wide (in font sizes) cuts.
CODE_GAP = 6.0
#: A gutter is at least this many body-font ems wide. Word spaces are 0.25-0.33 em and justified text stretches a
#: line's spaces to ~0.6 em, rarely more; the narrowest column gaps typesetting uses are ~1 em (LaTeX's twocolumn
#: \columnsep is 10 pt beside 10 pt type; Word's default spacing is 0.5 inch). Measured from loose glyph boxes, which
#: run a little past the ink, a 1 em gutter shows as ~0.9 em: 0.8 keeps it and keeps out a stretched word space.
GUTTER_EM = 0.8
#: A gutter has text on both sides of it on at least this many rows of its run. Spaces of consecutive lines line up
#: by chance over two or three lines (a "river" in justified text), and then only as a sliver narrower than the
#: stretched spaces themselves; columns of text stand side by side for many more rows.
GUTTER_ROWS = 4
#: A row supports a gutter only where what stands on each side of it is at least this many body ems long: a column's
#: line (a two-column paper's ~24 ems, a newspaper's ~15; a paragraph's last line may be shorter and simply does not
#: count). A list marker, a line number or a form's label beside its text is 1-3 ems, and the gap after it is a tab
#: stop that belongs to its line, not a gutter.
GUTTER_SIDE_EM = 5.0
#: A word whose box is more than this many times its type size tall says nothing of its line's height: a math
#: accent's glyph ("β̂" in lme4's vignette, LMMathItalic: a 37 pt box at 10.9 pt) reached over the two lines below
#: and joined them to its own. It joins a line and leaves the line's extent as it was; only smaller type (a big
#: operator's limits under it: a display's sum sign is as tall, 30 pt at 10 pt) joins within what it reaches. A
#: line's words are at most ~1.3 times their size tall (ascender to descender).
TALL = 2.5
#: Lines still open to a new word while lines are built top to bottom: two or three columns side by side, each with
#: its baselines off the others', keep this many lines in progress at once.
OPEN_LINES = 8
#: Gutter candidates followed at once down a page: a page's rows hold a few wide gaps each (the gutters, a table's
#: cell gaps); a hostile page of staggered words cannot make the search grow without bound.
MAX_CANDIDATES = 64
#: A list marker is followed by a tab stop, often wider than PIECE_GAP: the marker and its text stay one piece.
_MARKER = re.compile(r"^(?:[•·▪◦‣●○■□➢►▶✓✔\-–—*\uf0b7\uf0a7\uf076\uf0d8\uf0fc]|\(?\d{1,3}[.)]|\(?[a-z][.)])$")
#: Fonts of pictographs, whose glyphs' Unicode in a text layer is often an unrelated ASCII character: a Word
#: document's bullet from WPTypographicSymbols reads "!", Wingdings' reads "l" or "§" (no ToUnicode, so the code is
#: taken as a Latin letter). The names are the families' own: Symbol, Wingdings, Webdings, Zapf Dingbats, WP's sets.
_PICTOGRAPH_FONT = re.compile(r"symbol|dingbat|wingding|webding", re.I)
#: The bullet a pictograph-font marker is read as: one that `paragraphs.marker` knows, so the item is a list item.
BULLET = "\u2022"


@dataclass(frozen=True, slots=True)
class Piece:
    """Words of one line that belong together, in reading order (a right-to-left line: rightmost first)."""

    words: tuple[Word, ...]

    @property
    def bbox(self) -> BBox:
        return (
            min(w.x0 for w in self.words),
            min(w.y0 for w in self.words),
            max(w.x1 for w in self.words),
            max(w.y1 for w in self.words),
        )

    @property
    def text(self) -> str:
        return " ".join(w.text for w in self.words)

    @property
    def size(self) -> float:
        """The font size of the piece: its largest lettered word's (a word with a letter or digit; an OCR word's size
        is its box height). A lone sign drawn large beside the text, a caution triangle's "!" at 17 pt before 9.5 pt
        text (the IRS instructions), a big bullet, sets no line's type: that line was taken for a heading. A piece of
        signs only is as large as its largest."""
        lettered = [w for w in self.words if any(c.isalnum() for c in w.text)]
        return max((w.size or w.height) for w in lettered or self.words)

    @property
    def x0(self) -> float:
        return min(w.x0 for w in self.words)

    @property
    def x1(self) -> float:
        return max(w.x1 for w in self.words)

    @property
    def y0(self) -> float:
        return min(w.y0 for w in self.words)

    @property
    def y1(self) -> float:
        return max(w.y1 for w in self.words)


@dataclass(frozen=True, slots=True)
class Gutter:
    """An x range (`x0`, `x1`) kept empty from `y0` to `y1` with text on both sides: no line crosses it."""

    x0: float
    y0: float
    x1: float
    y1: float

    def parts(self, left: float, right: float, word: Word) -> bool:
        """Whether this gutter stands between a line spanning `left`..`right` and `word` (beside both of them)."""
        if word.y1 <= self.y0 or word.y0 >= self.y1:
            return False
        middle = (self.x0 + self.x1) / 2
        return (word.x1 <= middle < left) or (right <= middle < word.x0) or (left < middle < right)


def gutters(words: Iterable[Word], body_size: float) -> list[Gutter]:
    """The page's gutters: x ranges at least GUTTER_EM body ems wide that no word covers down a run of consecutive
    rows, on GUTTER_ROWS of which a column's line stands on each side. Rows are the page's lines as if it had no
    gutter; the run ends at a row that covers the range (a title or a table across the columns: a full-width band),
    and reaches up over the rows just above it that leave the range empty (a column that starts with a heading,
    beside the other column's last lines)."""
    rows = [(sorted((w.x0, w.x1) for w in row), min(w.y0 for w in row), max(w.y1 for w in row)) for row in lines(words)]
    least = GUTTER_EM * max(body_size, 1.0)
    side = GUTTER_SIDE_EM * max(body_size, 1.0)
    found: list[tuple[float, float, int, int]] = []  # x0, x1, first row, last row
    # Open candidates: (x0, x1, first row, rows with a column's line on each side).
    open_: list[tuple[float, float, int, int]] = []
    for n, (spans, _, _) in enumerate(rows):
        free = _free(spans)
        following: dict[tuple[float, float], tuple[float, float, int, int]] = {}
        for x0, x1, start, support in open_:
            kept = False
            for f0, f1 in free:
                a, b = max(x0, f0), min(x1, f1)
                if b - a >= least:
                    both = _sides(spans, a, b, least) >= side
                    key = (a, b)
                    if key not in following or following[key][2] > start:
                        following[key] = (a, b, start, support + both)
                    kept = True
            if not kept and support >= GUTTER_ROWS:
                found.append((x0, x1, start, n - 1))
        for f0, f1 in free:
            if f1 - f0 >= least and (f0, f1) not in following and f0 > spans[0][0] and f1 < spans[-1][1]:
                following[(f0, f1)] = (f0, f1, n, int(_sides(spans, f0, f1, least) >= side))
        # The oldest candidates first (the gutter a run of rows confirms), then the widest; at most MAX_CANDIDATES.
        open_ = sorted(following.values(), key=lambda c: (c[2], c[0] - c[1]))[:MAX_CANDIDATES]
    found.extend((x0, x1, start, len(rows) - 1) for x0, x1, start, support in open_ if support >= GUTTER_ROWS)
    out = []
    for x0, x1, start, end in found:
        while start > 0 and not any(a < x1 and x0 < b for a, b in rows[start - 1][0]):
            start -= 1
        out.append(Gutter(x0, rows[start][1], x1, rows[end][2]))
    return _widest(out)


def _sides(spans: list[tuple[float, float]], a: float, b: float, least: float) -> float:
    """The shorter of the two runs of a row's words that touch the range `a`..`b`, one on each side (0 when a side
    is empty): words closer than `least` to each other are one run (a line of a column); a wider gap ends it (a
    table's cell is a run of its own, so a table's cell gaps are no gutter unless its cells are a column's lines)."""
    left = [x for x in spans if x[1] <= a]
    right = [x for x in spans if x[0] >= b]
    if not left or not right:
        return 0.0
    start = left[-1][0]
    for x0, x1 in reversed(left[:-1]):
        if start - x1 >= least:
            break
        start = min(start, x0)
    end = right[0][1]
    for x0, x1 in right[1:]:
        if x0 - end >= least:
            break
        end = max(end, x1)
    return min(max(x[1] for x in left) - start, end - right[0][0])


def _free(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The x ranges a row's words leave empty: the gaps between them, and everything left and right of them."""
    out: list[tuple[float, float]] = []
    end = float("-inf")
    for x0, x1 in spans:
        if x0 > end:
            out.append((end, x0))
        end = max(end, x1)
    out.append((end, float("inf")))
    return out


def _widest(found: list[Gutter]) -> list[Gutter]:
    """One gutter for each run of rows and x range: a candidate inside another's x range and rows is the same
    gutter seen from a later row, narrowed."""
    keep: list[Gutter] = []
    for g in sorted(found, key=lambda g: (g.y0 - g.y1, g.x0 - g.x1)):
        inside = any(k.y0 <= g.y0 and g.y1 <= k.y1 and not (g.x1 <= k.x0 or k.x1 <= g.x0) for k in keep)
        if not inside:
            keep.append(g)
    return keep


def lines(words: Iterable[Word], gutters: Sequence[Gutter] = ()) -> list[list[Word]]:
    """Horizontal words grouped into lines (top to bottom), each in reading order; no line crosses a gutter."""
    out: list[list[Word]] = []
    spans: list[tuple[float, float, float, float]] = []  # each line's top, bottom, left, right
    reach: list[tuple[float, float]] = []  # each line's top and bottom with its `TALL` words
    sizes: list[float] = []  # each line's largest type size but its tall words'
    for word in sorted((w for w in words if w.rotation == 0), key=lambda w: ((w.y0 + w.y1) / 2, w.x0)):
        placed = False
        height = word.y1 - word.y0
        tall = bool(word.size) and height > TALL * max(word.size, 1.0)
        # Only the last few lines can still take a word: lines are built top to bottom.
        for k in range(len(out) - 1, max(len(out) - 1 - OPEN_LINES, -1), -1):
            top, bottom, left, right = spans[k]
            overlap = min(bottom, word.y1) - max(top, word.y0)
            fits = overlap >= 0.5 * min(height, bottom - top)
            if not fits and word.size and word.size < sizes[k]:
                # smaller type (a big operator's limits, a script) within what a tall word of the line reaches
                low, high = reach[k]
                fits = min(high, word.y1) - max(low, word.y0) >= 0.5 * min(height, high - low)
            if not fits or any(g.parts(left, right, word) for g in gutters):
                continue
            out[k].append(word)
            low, high = reach[k]
            reach[k] = (min(low, word.y0), max(high, word.y1))
            if tall:
                spans[k] = (top, bottom, min(left, word.x0), max(right, word.x1))
            else:
                spans[k] = (min(top, word.y0), max(bottom, word.y1), min(left, word.x0), max(right, word.x1))
                sizes[k] = max(sizes[k], word.size)
            placed = True
            break
        if not placed:
            out.append([word])
            spans.append((word.y0, word.y1, word.x0, word.x1))
            reach.append((word.y0, word.y1))
            sizes.append(word.size)
    return [_reading_order(line) for line in out]


def _reading_order(line: list[Word]) -> list[Word]:
    # Left to right, or right to left when most of the line's letters are of a right-to-left script (Arabic,
    # Hebrew): the words of "مرحبا بالعالم" stand on the page with the first one rightmost.
    letters = sum(len(w.text) for w in line if rtl(w.text))
    if 2 * letters > sum(len(w.text) for w in line):
        return sorted(line, key=lambda w: -w.x1)
    return sorted(line, key=lambda w: w.x0)


def rtl(text: str) -> bool:
    """True when the text holds letters of a right-to-left script."""
    return any(unicodedata.bidirectional(c) in ("R", "AL") for c in text)


def pieces(line: Sequence[Word]) -> list[Piece]:
    """A line cut at its wide gaps; a pictograph-font glyph that starts it before a gap is its list item's bullet."""
    out: list[list[Word]] = []
    line = _pictograph_bullet(line)
    for word in line:
        if out:
            last = out[-1][-1]
            size = max(word.size or word.height, last.size or last.height, 1.0)
            limit = CODE_GAP if word.monospace and last.monospace else PIECE_GAP
            gap = max(word.x0 - last.x1, last.x0 - word.x1)  # either reading direction
            # Between two words of a letter-spaced line the letter gap counts twice more (after the last letter and
            # after the space, which character spacing widens too): a title tracked by 1 em has 2.3 em word gaps.
            gap -= 2 * min(word.tracking, last.tracking)
            if gap <= limit * size or (len(out) == 1 and len(out[-1]) == 1 and _MARKER.match(last.text)):
                out[-1].append(word)
                continue
        out.append([word])
    return [Piece(tuple(ws)) for ws in out]


def _pictograph_bullet(line: Sequence[Word]) -> Sequence[Word]:
    """The line with its first word read as a bullet (`BULLET`) when that word is one non-alphanumeric glyph of a
    pictograph font (`_PICTOGRAPH_FONT`) standing apart from the next word by a tab stop (at least one font size, a
    word space is a third of one): the shape and place of a list marker, whatever character its font maps it to.
    In a formula a Symbol-font sign stands among its operands, never first before a gap, and keeps its text."""
    if len(line) < 2:
        return line
    first, second = line[0], line[1]
    if len(first.text) != 1 or first.text.isalnum() or not _PICTOGRAPH_FONT.search(first.font or ""):
        return line
    size = max(first.size or first.height, 1.0)
    if max(second.x0 - first.x1, first.x0 - second.x1) < size:
        return line
    return [replace(first, text=BULLET), *line[1:]]

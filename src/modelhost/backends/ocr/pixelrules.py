"""Ruling lines found in a page image: what the text layer's vector paths give a born-digital page, for pixels.

pdf-spec sends only pixels, and a scan has no paths: without its rules a ruled table is just rows of short lines
whose cells sit closer than any gap heuristic can tell from word spaces (pdf-spec's table.pdf: cells 1.2 line
heights apart, words 0.3), and it came out as one paragraph. With them, the text layer's own ruled-table finder
(`tables.find_tables`) builds the grid from the same rules and the OCR'd words, so both paths share one table code.

How: the page's ink (grey under `INK`; then, in a second pass, anything `RULE_CONTRAST` darker than its paper) is
opened morphologically with a long thin kernel, horizontal and then vertical, which keeps only runs of ink at least
that long; each connected run that is also thin is a rule.
- Horizontal rules are at least `MIN_RULE_POINTS` long: longer than any glyph's stroke or a word's underline of a
  short word; a long underline is a lone rule, which the table finder never takes for a table.
- Vertical rules are at least `VERTICAL_LINES` detected line heights long (and `MIN_RULE_POINTS` / 2): a glyph's stem
  ('l', '|', '[') is at most about one line height, while a column rule spans at least one row, which is taller
  than its text.
- A run thicker than `MAX_THICKNESS_POINTS` is a filled area (a photo's dark part, a bar of a chart, a black box),
  not a rule.
Shading rules a table as the text layer's fills do (`tables.fill_rules`, the text path's evidence): a run thicker than
a rule but at most `BAND_LINES` text lines tall and mostly ink is a shaded band (a header row set light on colour).
In pixels a vertical rule that crosses a band merges into the band's ink and seems to end at its edge (the Korean
corpus page's column rules stop at its shaded header row, which was left out of its table); so a vertical ending
at a band's edge inside its width is continued through it, and `fill_rules` then makes the band's edges rules (a band
crossed by a vertical). A band no rule meets (a banner, a shaded note) gives none.
Rules beside or between coloured cells are lighter than ink and, for the light threshold, one thick blob with the
cell they edge: a third pass finds every thin valley of grey darker than both its sides (`_valleys`, whatever the
sides' colours), and the passes' pieces of one rule are put on one line before they are joined (`_snapped`). A ruled
frame inside a region the layout model calls a figure is a table when its rules make a grid (`ruled_grid`; the model
boxes grids of short cells as figures), and part of the drawing otherwise.
The rules found are bounded (`tables.MAX_RULES`, the longest kept): a page of hatching must not make the table
finder's pairwise grouping run for minutes.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence

import numpy as np

from modelhost.docengine.tables import JOIN, LINE_MERGE, MAX_RULES, fill_rules, merge_rules
from modelhost.docengine.types import BBox, Segment

#: A pixel darker than this (0-255 grey) is ink (the pixel path's own threshold, pixels.INK).
INK = 128
#: Rules are looked for twice: in the ink, and again among pixels at least this much darker (0-255 grey) than the
#: page's paper, for two kinds of rule lighter than ink: a rule thinner than a pixel is spread over two rows of
#: pixels, each only partly dark (pdf-spec's table.pdf drawn at 200 DPI and read at 150, as a scan read at another
#: resolution is, has its 0.5 pt rules at grey 128-168: three of its seven rules were lost and its 3 x 3 table came
#: out 2 x 2), and tables are ruled in light grey (the Korean corpus page's row rules are 201-212 on white, so at most
#: 43 darker than the paper: 32 finds them). The paper is the page's commonest grey, so a scan's darker paper moves
#: the threshold with it. Only looked for again, never instead: at this threshold coloured cells are "ink" too, and a
#: rule running along a row of them is one thick blob with them (the ReportLab guide's tables with orange and blue
#: cells lost every horizontal rule); the ink pass still finds it, as before.
RULE_CONTRAST = 32
#: A valley (`_valleys`) this much darker (0-255 grey) than the lighter of what lies either side of it is a rule: a
#: depth is measured against the darker side, and a 0.5 pt grey rule between an orange cell (grey 173) and a white one,
#: read at 150 DPI, is only 28 darker than the orange (ReportLab's guide's grids); paper grain and a scan's noise make
#: no straight run as long as a rule (`MIN_RULE_POINTS`, `VERTICAL_LINES`).
VALLEY_CONTRAST = 16
#: Shortest horizontal rule, points: a third of an inch, longer than any glyph stroke of body or heading type.
MIN_RULE_POINTS = 24.0
#: Shortest vertical rule, in the page's detected line heights: longer than a glyph's stem, as long as a row.
VERTICAL_LINES = 1.2
#: Thickest rule, points: table rules are 0.4-1.5 pt; a run thicker than this is a filled area.
MAX_THICKNESS_POINTS = 3.0
#: A shaded band is a table's row: at most this many text lines tall (a header of up to two lines and its padding);
#: taller filled areas are pictures, and without a line height it is at most 3 x 12 points.
BAND_LINES = 3.0
#: A ruled frame is a grid (a table's rules, not a drawing's box) with this many rule positions each way or more: its
#: two edges and one rule between, so two rows and two columns of cells. A framed picture has two each way.
GRID_LINES = 3
#: A grid line of `ruled_grid` runs at least this share of its frame across: a table's lattice (every rule from border
#: to border), where a syntax diagram's boxes, a screenshot's panes and arrows draw rules across part of it only.
LATTICE = 0.9
#: A shaded band's ink covers at least this share of its box: the text set on it leaves holes (the Korean corpus
#: page's header row, three short words on the shading, is ~0.8 ink), a picture's dark patch is ragged.
BAND_FILLED = 0.5


def find_rulings(rgb: np.ndarray, scale: float, line_height: float = 0.0) -> tuple[Segment, ...]:
    """The straight horizontal and vertical rules of an HxWx3 uint8 page image, in points (`scale` points per
    pixel); `line_height` is the page's usual text-line height in pixels (0 when unknown)."""
    import cv2

    if rgb.ndim != 3 or rgb.shape[0] < 2 or rgb.shape[1] < 2 or scale <= 0:
        return ()
    gray = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)  # uint8: a quarter of a float mean's bytes
    paper = int(np.bincount(gray.ravel(), minlength=256).argmax())  # the commonest grey: O(pixels), no sort
    per_point = 1.0 / scale
    # Odd kernel lengths: opening with an even-length kernel shifts every run by a pixel.
    horizontal_px = max(9, round(MIN_RULE_POINTS * per_point)) | 1
    vertical_px = max(7, round(max(MIN_RULE_POINTS / 2 * per_point, VERTICAL_LINES * line_height))) | 1
    thick_px = max(2, round(MAX_THICKNESS_POINTS * per_point))
    band_px = BAND_LINES * (line_height or 12.0 * per_point)
    lengths = (horizontal_px, vertical_px)
    light, bands, shaded = _runs((gray < paper - RULE_CONTRAST).astype(np.uint8), scale, lengths, thick_px, band_px)
    found, _, _ = _runs((gray < INK).astype(np.uint8), scale, lengths, thick_px, 0.0, shaded)
    valleys = _valleys(gray, scale, lengths, thick_px)
    del gray
    # the same rule found in several passes is one rule (merge_rules joins collinear pieces within a point)
    rules = merge_rules(_snapped([*found, *light, *valleys]))
    if len(rules) > MAX_RULES:
        rules = sorted(rules, key=lambda s: -s.length)[:MAX_RULES]
    rules += _through_bands(bands[:MAX_RULES], rules)
    return (*rules, *fill_rules(bands[:MAX_RULES], rules))


def _snapped(rules: Sequence[Segment]) -> list[Segment]:
    """The rules with collinear pieces on one coordinate across them (the first of each run of coordinates within
    `LINE_MERGE` / 2): passes find one rule a pixel wider or narrower, so its centre half a pixel apart, and
    `merge_rules`, which sorts pieces by that coordinate before their start, then joined a piece that starts earlier
    to one that starts later, losing its first part (a table's column rule kept only below a shaded row)."""
    out: list[Segment] = []
    for horizontal in (True, False):
        base = last = -1e9
        for s in sorted((s for s in rules if s.horizontal == horizontal), key=lambda s: s.y0 if horizontal else s.x0):
            across = s.y0 if horizontal else s.x0
            if across - last > LINE_MERGE / 2:
                base = across
            last = across
            out.append(
                Segment(s.x0, base, s.x1, base, s.width) if horizontal else Segment(base, s.y0, base, s.y1, s.width)
            )
    return out


def ruled_grid(frame: BBox, rules: Sequence[Segment]) -> bool:
    """Whether the rules inside `frame` make a grid: `GRID_LINES` distinct horizontal positions and as many vertical
    ones, each rule running `LATTICE` of the frame across (a drawing's ticks, arrows and part-width boxes are no grid
    lines: a syntax diagram in the Redbook read as an 8-column table while a third of the frame was enough)."""
    x0, y0, x1, y1 = frame
    for horizontal in (True, False):
        across = x1 - x0 if horizontal else y1 - y0
        positions = sorted(
            s.y0 if horizontal else s.x0
            for s in rules
            if s.horizontal == horizontal
            and s.length >= LATTICE * across
            and x0 - JOIN <= s.x0 <= s.x1 <= x1 + JOIN
            and y0 - JOIN <= s.y0 <= s.y1 <= y1 + JOIN
        )
        distinct = len(positions[:1]) + sum(1 for a, b in itertools.pairwise(positions) if b - a > LINE_MERGE)
        if distinct < GRID_LINES:
            return False
    return True


def _runs(
    ink: np.ndarray,
    scale: float,
    lengths: tuple[int, int],
    thick_px: int,
    band_px: float,
    shaded: Sequence[tuple[int, int, int, int]] = (),
) -> tuple[list[Segment], list[BBox], list[tuple[int, int, int, int]]]:
    """The rules in an ink mask (uint8, 1 where ink; cleared in place where bands are), and, when `band_px` > 0, the
    shaded bands: runs thicker than a rule and at most `band_px` tall (BAND_LINES, BAND_FILLED), in points and in
    pixels (x, y, w, h); `shaded` are bands already known, in pixels."""
    import cv2

    found: list[Segment] = []
    bands: list[BBox] = []
    shaded = list(shaded)
    for horizontal, length in zip((True, False), lengths, strict=True):
        for x, y, w, h in shaded if not horizontal else ():
            # Verticals are looked for without the bands: a band's ink between the light letters set on it makes
            # short thin columns (no rules), and a vertical rule touching a band is one thick blob with it.
            ink[y : y + h, x : x + w] = 0
        kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (length, 1) if horizontal else (1, length))
        runs = cv2.morphologyEx(ink, cv2.MORPH_OPEN, kernel)
        count, _, stats, _ = cv2.connectedComponentsWithStats(runs, connectivity=8)
        for x, y, w, h, area in stats[1:count]:
            thickness, extent = (h, w) if horizontal else (w, h)
            if horizontal and thick_px < h <= band_px and w >= length and area >= BAND_FILLED * w * h:
                shaded.append((int(x), int(y), int(w), int(h)))
                bands.append((float(x * scale), float(y * scale), float((x + w) * scale), float((y + h) * scale)))
            if thickness > thick_px or extent < length:
                continue
            x0, y0, x1, y1 = x * scale, y * scale, (x + w) * scale, (y + h) * scale
            if horizontal:
                mid = (y0 + y1) / 2
                found.append(Segment(float(x0), float(mid), float(x1), float(mid), float(h * scale)))
            else:
                mid = (x0 + x1) / 2
                found.append(Segment(float(mid), float(y0), float(mid), float(y1), float(w * scale)))
    return found, bands, shaded


def _valleys(gray: np.ndarray, scale: float, lengths: tuple[int, int], thick_px: int) -> list[Segment]:
    """The rules that are thin valleys of grey, at least `VALLEY_CONTRAST` darker than what lies on both their sides,
    whatever that is: a rule between or across coloured cells. A black-hat transform (the closing less the image)
    with a square kernel wider than the thickest rule measures each valley's depth, where two rules cross too; a
    step from one cell's colour to the next is no valley, a filled area wider than the kernel neither."""
    import cv2

    across = 2 * thick_px + 1  # wider than any rule, so a rule's valley is closed over; odd, so centred
    kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (across, across))
    valleys = (cv2.morphologyEx(gray, cv2.MORPH_BLACKHAT, kernel) > VALLEY_CONTRAST).astype(np.uint8)
    rules, _, _ = _runs(valleys, scale, lengths, thick_px, 0.0)
    return rules


def _through_bands(bands: list[BBox], rules: list[Segment]) -> list[Segment]:
    """Each vertical rule that ends at a shaded band's top or bottom edge, inside its width, continued across it."""
    verticals = sorted((s for s in rules if not s.horizontal), key=lambda s: s.x0)
    xs = [s.x0 for s in verticals]
    out: list[Segment] = []
    for x0, y0, x1, y1 in bands:
        # only the verticals inside the band's width (bisect: bands x rules compared pairwise could be 4 million)
        for rule in verticals[bisect.bisect_right(xs, x0 + JOIN) : bisect.bisect_left(xs, x1 - JOIN)]:
            if abs(rule.y0 - y1) <= JOIN or abs(rule.y1 - y0) <= JOIN:
                out.append(Segment(rule.x0, y0, rule.x0, y1, rule.width))
    return out

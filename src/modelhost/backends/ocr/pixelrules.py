"""Ruling lines found in a page image: what the text layer's vector paths give a born-digital page, for pixels.

pdf-spec sends only pixels, and a scan has no paths: without its rules a ruled table is just rows of short lines
whose cells sit closer than any gap heuristic can tell from word spaces (pdf-spec's table.pdf: cells 1.2 line
heights apart, words 0.3), and it came out as one paragraph. With them, the text layer's own ruled-table finder
(`tables.find_tables`) builds the grid from the same rules and the OCR'd words, so both paths share one table code.

How: the page's ink (grey under `INK`) is opened morphologically with a long thin kernel, horizontal and then
vertical, which keeps only runs of ink at least that long; each connected run that is also thin is a rule.
- Horizontal rules are at least `MIN_RULE_POINTS` long: longer than any glyph's stroke or a word's underline of a
  short word; a long underline is a lone rule, which the table finder never takes for a table.
- Vertical rules are at least `VERTICAL_LINES` detected line heights long (and `MIN_RULE_POINTS` / 2): a glyph's stem
  ('l', '|', '[') is at most about one line height, while a column rule spans at least one row, which is taller
  than its text.
- A run thicker than `MAX_THICKNESS_POINTS` is a filled area (a photo's dark part, a bar of a chart, a black box),
  not a rule.
The rules found are bounded (`tables.MAX_RULES`, the longest kept): a page of hatching must not make the table
finder's pairwise grouping run for minutes.
"""

from __future__ import annotations

import numpy as np

from modelhost.docengine.tables import MAX_RULES
from modelhost.docengine.types import Segment

#: A pixel darker than this (0-255 grey) is ink (the pixel path's own threshold, pixels.INK).
INK = 128
#: Shortest horizontal rule, points: a third of an inch, longer than any glyph stroke of body or heading type.
MIN_RULE_POINTS = 24.0
#: Shortest vertical rule, in the page's detected line heights: longer than a glyph's stem, as long as a row.
VERTICAL_LINES = 1.2
#: Thickest rule, points: table rules are 0.4-1.5 pt; a run thicker than this is a filled area.
MAX_THICKNESS_POINTS = 3.0


def find_rulings(rgb: np.ndarray, scale: float, line_height: float = 0.0) -> tuple[Segment, ...]:
    """The straight horizontal and vertical rules of an HxWx3 uint8 page image, in points (`scale` points per
    pixel); `line_height` is the page's usual text-line height in pixels (0 when unknown)."""
    import cv2

    if rgb.ndim != 3 or rgb.shape[0] < 2 or rgb.shape[1] < 2 or scale <= 0:
        return ()
    gray = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)  # uint8: a quarter of a float mean's bytes
    ink = (gray < INK).astype(np.uint8)
    del gray
    per_point = 1.0 / scale
    # Odd kernel lengths: opening with an even-length kernel shifts every run by a pixel.
    horizontal_px = max(9, round(MIN_RULE_POINTS * per_point)) | 1
    vertical_px = max(7, round(max(MIN_RULE_POINTS / 2 * per_point, VERTICAL_LINES * line_height))) | 1
    thick_px = max(2, round(MAX_THICKNESS_POINTS * per_point))
    found: list[tuple[float, Segment]] = []
    for horizontal, length in ((True, horizontal_px), (False, vertical_px)):
        kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (length, 1) if horizontal else (1, length))
        runs = cv2.morphologyEx(ink, cv2.MORPH_OPEN, kernel)
        count, _, stats, _ = cv2.connectedComponentsWithStats(runs, connectivity=8)
        for x, y, w, h, _area in stats[1:count]:
            thickness, extent = (h, w) if horizontal else (w, h)
            if thickness > thick_px or extent < length:
                continue
            x0, y0, x1, y1 = x * scale, y * scale, (x + w) * scale, (y + h) * scale
            if horizontal:
                mid = (y0 + y1) / 2
                segment = Segment(float(x0), float(mid), float(x1), float(mid), float(h * scale))
            else:
                mid = (x0 + x1) / 2
                segment = Segment(float(mid), float(y0), float(mid), float(y1), float(w * scale))
            found.append((segment.length, segment))
    if len(found) > MAX_RULES:
        found = sorted(found, key=lambda item: -item[0])[:MAX_RULES]
    return tuple(segment for _, segment in found)

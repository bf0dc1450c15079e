"""Images that are backdrops of text: a shaded box or a banner drawn as an image behind text-layer words.

Producers draw a boxed summary or a section banner as an image (Korean government reports, slides) and set the
text over it in the text layer. Such an image is no picture and its words are the page's text; a figure's labels
(callouts on a photo, a chart's ticks) are the picture's. What tells them apart, measured on the corpus's images
with text-layer words over them:
- how much of the image the text's lines cover (each line's box, summed, over the image's area): a figure's labels
  cover 0.02-0.07 of it (the handbook's nut photos, the Redbook's screenshots and cover photo), the text boxes and
  banners of normal_4pages 0.13-0.49; `TEXT_COVER` sits between;
- or the image's shape: a band no taller than `BAND_LINES` of the one line of text over it is that line's
  background (normal_4pages' numbered section banners, 2 lines tall, cover 0.13-0.16 with a short heading).
"""

from __future__ import annotations

from collections.abc import Sequence

from modelhost.docengine.types import BBox, Word

#: Share of an image's area the text lines over it cover from which the image is their backdrop (see above: labels
#: 0.07 at most, text boxes 0.13 and more; a quarter leaves room on both sides).
TEXT_COVER = 0.25
#: An image at most this many line heights tall behind a single line of text is that line's band (a banner is one
#: line with padding, 2 lines tall on normal_4pages; a photo with a caption-like label is many lines tall).
BAND_LINES = 2.5


def rows(words: Sequence[Word]) -> list[list[Word]]:
    """Words grouped into rows: a word joins the row whose vertical extent it overlaps by half its height."""
    out: list[list[Word]] = []
    for word in sorted(words, key=lambda w: (w.y0, w.x0)):
        for row in out:
            top, bottom = min(w.y0 for w in row), max(w.y1 for w in row)
            if min(bottom, word.y1) - max(top, word.y0) >= 0.5 * max(word.height, 1e-6):
                row.append(word)
                break
        else:
            out.append([word])
    return out


def is_backdrop(box: BBox, words: Sequence[Word]) -> bool:
    """Whether the image at `box` is the backdrop of `words` (the text-layer words whose centres lie on it)."""
    x0, y0, x1, y1 = box
    area = (x1 - x0) * (y1 - y0)
    upright = [w for w in words if w.rotation == 0]
    if area <= 0 or not upright:
        return False
    lines = rows(upright)
    covered = sum(
        (max(w.x1 for w in r) - min(w.x0 for w in r)) * (max(w.y1 for w in r) - min(w.y0 for w in r)) for r in lines
    )
    if covered >= TEXT_COVER * area:
        return True
    height = max(w.y1 for w in lines[0]) - min(w.y0 for w in lines[0])
    return len(lines) == 1 and y1 - y0 <= BAND_LINES * height

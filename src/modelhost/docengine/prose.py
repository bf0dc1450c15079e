"""Whether text read from a picture is text the document means as text (prose), or the picture's own signs.

A picture's pixels hold words of two kinds: lines of prose set in it (a scanned paragraph, a pasted screenshot of
text), which are the page's text, and a drawing's labels (a diagram's boxes, a chart's ticks, a photo's signs),
which are the picture's and which docling's Markdown (the corpus's reference) and the text path leave out. Both
readers of pictures decide with `carries_text`: the text path for the OCR regions of a born-digital page
(documents/pictures.py) and the pixel path for a `figure` region's lines (backends/ocr/scanpage.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from modelhost.docengine.types import Block

#: Blocks read as prose have at least this many words (a diagram's or a chart's few labels have fewer)...
MIN_WORDS = 8
#: ...of which this share are words of two letters or more (tick labels are numbers; a photo's text is a few signs)...
WORD_SHARE = 0.6
#: ...and this many words a block on average: lines of prose, not a diagram's labels (a word or two a box: the corpus
#: Redbook's diagrams read 2.4-3.5 words a block on the pixel path, its syntax diagram's explanations 6.3).
WORDS_PER_BLOCK = 4.0

_LETTERS = re.compile(r"[^\W\d_]{2,}")


def carries_text(blocks: Sequence[Block]) -> bool:
    """Whether blocks read from a picture read like prose (see the module doc), not like a chart's or a photo's
    signs: MIN_WORDS words at least, WORDS_PER_BLOCK a block on average, WORD_SHARE of them words of letters."""
    words = [w for b in blocks for w in b.text.split()]
    if len(words) < MIN_WORDS or len(words) < WORDS_PER_BLOCK * len(blocks):
        return False
    return sum(1 for w in words if _LETTERS.search(w)) >= WORD_SHARE * len(words)

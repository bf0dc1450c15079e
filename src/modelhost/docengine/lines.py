"""Words into lines, and lines into pieces: the runs of words that no column gutter or table gap cuts.

A text-layer line (pdfium's own line numbering) may run across two columns or across a table's cells when their
baselines agree; OCR gives no line numbers at all. So lines are rebuilt from geometry: words of one direction whose
vertical extents overlap by half the smaller height are one line, read in its direction (left to right, or right
to left for Arabic and Hebrew); then a line is cut into pieces wherever the gap between two words is wider than
`PIECE_GAP` times the font size (word spaces are ~0.25-0.5 em even in justified text; column gutters and cell gaps
are wider). Pieces are what reading order and paragraphs work on.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from modelhost.docengine.types import BBox, Word

#: A gap wider than this many font sizes between two words of one line separates two pieces (gutter, table cell).
#: Justified text stretches word spaces to ~1 em at worst; a two-column gutter is ~2 em and more.
PIECE_GAP = 1.6
#: Code aligns with runs of spaces: between monospace words only a gap this wide (in font sizes) cuts.
CODE_GAP = 6.0
#: A list marker is followed by a tab stop, often wider than PIECE_GAP: the marker and its text stay one piece.
_MARKER = re.compile(r"^(?:[•·▪◦‣●○■□➢►▶✓✔\-–—*\uf0b7\uf0a7\uf076\uf0d8\uf0fc]|\(?\d{1,3}[.)]|\(?[a-z][.)])$")


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
        """The font size of the piece: its largest word's (an OCR word's size is its box height)."""
        return max((w.size or w.height) for w in self.words)

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


def lines(words: Iterable[Word]) -> list[list[Word]]:
    """Horizontal words grouped into lines (top to bottom), each in reading order."""
    out: list[list[Word]] = []
    spans: list[tuple[float, float]] = []
    for word in sorted((w for w in words if w.rotation == 0), key=lambda w: ((w.y0 + w.y1) / 2, w.x0)):
        placed = False
        # Only the last few lines can still take a word: lines are built top to bottom.
        for k in range(len(out) - 1, max(len(out) - 4, -1), -1):
            top, bottom = spans[k]
            overlap = min(bottom, word.y1) - max(top, word.y0)
            if overlap >= 0.5 * min(word.y1 - word.y0, bottom - top):
                out[k].append(word)
                spans[k] = (min(top, word.y0), max(bottom, word.y1))
                placed = True
                break
        if not placed:
            out.append([word])
            spans.append((word.y0, word.y1))
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
    """A line cut at its wide gaps."""
    out: list[list[Word]] = []
    for word in line:
        if out:
            last = out[-1][-1]
            size = max(word.size or word.height, last.size or last.height, 1.0)
            limit = CODE_GAP if word.monospace and last.monospace else PIECE_GAP
            gap = max(word.x0 - last.x1, last.x0 - word.x1)  # either reading direction
            if gap <= limit * size or (len(out) == 1 and len(out[-1]) == 1 and _MARKER.match(last.text)):
                out[-1].append(word)
                continue
        out.append([word])
    return [Piece(tuple(ws)) for ws in out]

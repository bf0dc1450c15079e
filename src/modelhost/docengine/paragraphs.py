"""Pieces of one column chunk into paragraphs, and a paragraph's lines into its text.

A new paragraph starts, and why each rule:
- at a style change (size, all-bold, monospace): a bold heading line directly above its body is its own block,
  which is how "5.1 Hyper Parameter Optimization" stays out of the paragraph under it;
- after a label line: a paragraph's first line all in italics, standing alone (ending well before the right edge,
  `SHORT_LINE`) on no sentence end, over a line in upright type: "Boots Self-Locking Nut" over its section's first
  line in the AMT handbook, where italics alone set the heading apart from the body;
- at a vertical gap wider than `PARAGRAPH_GAP` font sizes (Word-style spacing between paragraphs);
- at an indented first line (`INDENT` font sizes right of the chunk's left edge, the line above flush): LaTeX and
  pdf-spec's paragraphs.pdf separate paragraphs by indentation alone, with the same leading (not after a bold line:
  a heading's wrapped line hangs at its text, "Chapter 1. Securing..." over "data");
- after a short line that ends a sentence (the line above stops well before the right edge): flush-left paragraphs
  without spacing;
- at a list marker (bullet or number); the item's wrapped lines, indented to its text, stay with it;
- at a piece that shares its row with the one before (cells of a form, side by side).

Text: lines are joined by spaces, a line-end hyphen before a lowercase continuation is removed ("Ef-" + "fects"),
and code keeps its line breaks and its indentation (from the monospace character width).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from modelhost.docengine.lines import Piece

#: A vertical gap (between loose line boxes) wider than this many font sizes separates paragraphs. Loose boxes of
#: consecutive lines at 1.2 leading are ~0.1-0.25 em apart; paragraph spacing adds half a line or more.
PARAGRAPH_GAP = 0.55
#: A bold line this much smaller than the bold line above it, flush and close, is still the same heading.
WRAP_RATIO = 1.12
#: Two lines whose midpoints are this many font sizes apart, or less, are centred on one axis: a centred line's
#: rounding and a trailing space (0.3 em) fit, where an indented line under a flush one is INDENT / 2 = 0.4 em off.
CENTRED = 0.35
#: In code, only a gap of this many font sizes (a blank line and more) separates two blocks.
CODE_GAP = 1.5
#: A first line indented by this many font sizes (or more) starts a paragraph: LaTeX's \parindent is 1.5 em.
INDENT = 0.8
#: A line ending this many font sizes short of the chunk's right edge, on a sentence end, ends its paragraph.
SHORT_LINE = 4.0

BULLETS = "•·▪◦‣●○■□➢►▶✓✔-–—*\uf0b7\uf0a7\uf076\uf0d8\uf0fc"
_ORDERED = re.compile(r"^(?:\(?\d{1,3}[.)]|\(?[a-z][.)]|\(?[ivx]{1,5}[.)])$")
#: A sentence's end: its full stop, question or exclamation mark, or a colon before what it announces, then any
#: closing quotes or brackets. A paragraph that ends without one goes on (`analyse.continues`: across a page break).
SENTENCE_END = re.compile(r"[.!?:]['\")\]]*$")
#: A line's end that may end its paragraph: a sentence's, or a semicolon's (a list of clauses set a clause a line);
#: a short line ending so ends its paragraph. A paragraph across a page break runs on past a semicolon.
_CLAUSE_END = re.compile(r"[.!?:;]['\")\]]*$")


def marker(piece: Piece) -> tuple[str, bool] | None:
    """The list marker a piece starts with, and whether it is ordered; None when it starts no list item."""
    first = piece.words[0].text
    if len(piece.words) >= 2 or len(first) > 1:
        if first in BULLETS or (len(first) == 1 and first in BULLETS):
            return first, False
        if first[0] in "•▪◦●○■□➢►▶✓✔\uf0b7\uf0a7\uf076\uf0d8\uf0fc" and len(first) > 1:
            return first[0], False
    if len(piece.words) >= 2 and _ORDERED.match(first):
        return first, True
    return None


def _style(piece: Piece) -> tuple[float, bool, bool]:
    words = piece.words
    return (round(piece.size * 2) / 2, all(w.bold for w in words), all(w.monospace for w in words))


def paragraphs(chunk: Sequence[Piece], page_axis: float | None = None) -> list[list[Piece]]:
    """One column chunk's pieces (top to bottom) grouped into paragraphs. `page_axis` is the x of the page's middle,
    where a centred title stands (`_centred_wrap`)."""
    if not chunk:
        return []
    left = min(p.x0 for p in chunk)
    right = max(p.x1 for p in chunk)
    axes = ((left + right) / 2,) if page_axis is None else ((left + right) / 2, page_axis)
    out: list[list[Piece]] = []
    item_text_x: float | None = None  # where a list item's text starts: its wrapped lines align there
    for piece in chunk:
        if not out:
            out.append([piece])
            item_text_x = _item_text_x(piece)
            continue
        prev = out[-1][-1]
        size = max(min(piece.size, prev.size), 1.0)
        code = _style(piece)[2] and _style(prev)[2]
        new = False
        if _style(piece) != _style(prev) and not code and not _heading_wrap(prev, piece):
            new = True
        elif piece.y0 < prev.y1 - 0.5 * min(piece.y1 - piece.y0, prev.y1 - prev.y0):
            new = True  # side by side with the previous piece
        elif code:
            # Code keeps its indentation and short lines: only a blank line (or more) ends a listing's block.
            new = piece.y0 - prev.y1 > CODE_GAP * size
        elif (
            piece.y0 - prev.y1 > PARAGRAPH_GAP * size
            or marker(piece) is not None
            or (len(out[-1]) == 1 and _label_line(prev, piece, right, size))
        ):
            new = True
        elif item_text_x is not None:
            new = abs(piece.x0 - item_text_x) > INDENT * size and piece.x0 < item_text_x
        elif (
            piece.x0 - left >= INDENT * size
            and prev.x0 - left < INDENT * size
            and not _style(prev)[1]
            and not _centred_wrap(prev, piece, axes)
        ) or (right - prev.x1 > SHORT_LINE * size and _CLAUSE_END.search(prev.text)):
            new = True
        if new:
            out.append([piece])
            item_text_x = _item_text_x(piece)
        else:
            out[-1].append(piece)
    return out


def _heading_wrap(prev: Piece, piece: Piece) -> bool:
    # A big bold title wrapped onto a second line set a little smaller (a cover's "Row and Column Access Control"
    # at 33 pt over "Support in IBM DB2 for i" at 30 pt): one heading, when flush left and close below.
    bold = all(w.bold for w in prev.words) and all(w.bold for w in piece.words)
    close = piece.y0 - prev.y1 < PARAGRAPH_GAP * piece.size and abs(piece.x0 - prev.x0) < 1.0
    return bold and close and max(prev.size, piece.size) <= WRAP_RATIO * min(prev.size, piece.size)


def _centred_wrap(prev: Piece, piece: Piece, axes: Sequence[float]) -> bool:
    # A centred line wrapped onto a shorter one (a slide's title "Standard time and summer" over "time"): the second
    # line starts far right of the first, which the indent rule reads as a new paragraph, but both stand on one axis.
    # `CENTRED` em is a centred line's rounding (a trailing space's width); a LaTeX paragraph's indented first line
    # under a flush-left line ending where it ends is off their axis by half the indent (0.4 em), so it stays parted.
    # Their axis is the column's or the page's (`axes`): a centred title stands there, where a manual's key line and
    # its indented description under it (pgfplotstable_p10: "/pgfplots/table/columns/..." over "Sets all options",
    # 20 points in and 21 short) may share an axis of their own by chance. The upper line runs on (no clause end): a
    # centred line that ends a sentence ends its paragraph.
    mid = (prev.x0 + prev.x1) / 2
    axis = abs(mid - (piece.x0 + piece.x1) / 2) <= CENTRED * piece.size
    centred = any(abs(mid - a) <= CENTRED * piece.size for a in axes)
    narrower = piece.x1 - piece.x0 < prev.x1 - prev.x0
    return axis and centred and narrower and not _CLAUSE_END.search(prev.text)


def _label_line(prev: Piece, piece: Piece, right: float, size: float) -> bool:
    # A line in italics throughout, standing alone before upright text: a run-in emphasis wraps on (its line is full,
    # or it goes on in upright type on the same line), a sentence in italics ends on its full stop.
    italic = all(w.italic for w in prev.words) and not all(w.italic for w in piece.words)
    return italic and right - prev.x1 > SHORT_LINE * size and not _CLAUSE_END.search(prev.text)


def _item_text_x(piece: Piece) -> float | None:
    if marker(piece) is None:
        return None
    words = piece.words
    return words[1].x0 if len(words) > 1 and len(words[0].text) == 1 else words[0].x0


def join(lines: Sequence[str]) -> str:
    """Lines of a paragraph as one text: spaces between, a line-end hyphen dropped before a lowercase letter."""
    text = ""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if text.endswith("-") and len(text) >= 2 and text[-2].isalpha() and line[0].islower():
            text = text[:-1] + line
        elif text:
            text = f"{text} {line}"
        else:
            text = line
    return text


def code_text(pieces: Sequence[Piece]) -> str:
    """A code block's text: one line per piece, indentation and inner spacing from the monospace advance."""
    words = [w for p in pieces for w in p.words]
    advances = [(w.x1 - w.x0) / len(w.text) for w in words if w.text]
    advance = sorted(advances)[len(advances) // 2] if advances else 5.0
    left = min(p.x0 for p in pieces)
    out: list[str] = []
    for piece in pieces:
        line = " " * max(0, round((piece.x0 - left) / advance))
        end = piece.x0
        for word in piece.words:
            if line.strip():
                # pdfium splits code at punctuation it takes for a word end ("console" ".log"): no gap, no space.
                line += " " * max(0, round((word.x0 - end) / advance))
            line += word.text
            end = word.x1
        out.append(line.rstrip())
    return "\n".join(out)

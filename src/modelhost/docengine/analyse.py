"""One page's content to its layout: blocks of the right kind in reading order.

The stages, each its own module: `lines` (words to lines to pieces), `order` (XY-cut reading order), `tables`
(ruled tables), `paragraphs` (pieces to paragraphs) and `classify` (what each paragraph is). `Style` carries what
only the whole document knows (the body font size, the heading sizes), so a page is judged like its neighbours;
`document_style` measures it from every page's words, cheaply, before any page is analysed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from modelhost.docengine.types import Block, Kind, PageContent, PageLayout, Word

#: A size this many times the body size, or more, is a heading's (LaTeX's \subsection is 1.2x, Word's 1.15x+).
HEADING_RATIO = 1.12


@dataclass(frozen=True, slots=True)
class Style:
    """The document's body font size (points) and its heading sizes, largest first (level 1 is the first)."""

    body_size: float
    heading_sizes: tuple[float, ...] = ()


def document_style(contents: Iterable[PageContent]) -> Style:
    """The body size is the size most characters are set in (a mode, so headings never move it), and every size
    clearly above it that a few lines use is a heading size."""
    chars: Counter[float] = Counter()
    for content in contents:
        for word in content.words:
            chars[round(word.size or word.height, 1)] += len(word.text)
    if not chars:
        return Style(body_size=10.0)
    body = chars.most_common(1)[0][0]
    heads = sorted((s for s in chars if s >= HEADING_RATIO * body), reverse=True)
    return Style(body_size=body, heading_sizes=tuple(heads))


def analyse(content: PageContent, style: Style | None = None) -> PageLayout:
    """The page's blocks in reading order. Without a `style` the page's own words give it."""
    from modelhost.docengine import lines as lines_mod

    style = style or document_style([content])
    blocks: list[Block] = []
    for line in lines_mod.lines(content.words):
        for piece in lines_mod.pieces(line):
            blocks.append(_block(piece.words, style))
    return PageLayout(content.number, content.width, content.height, tuple(blocks))


def _block(words: tuple[Word, ...], style: Style) -> Block:
    text = " ".join(w.text for w in words)
    bbox = (min(w.x0 for w in words), min(w.y0 for w in words), max(w.x1 for w in words), max(w.y1 for w in words))
    size = max(w.size or w.height for w in words)
    if size >= HEADING_RATIO * style.body_size and style.heading_sizes:
        level = 1 + sum(1 for s in style.heading_sizes if s > size + 0.05)
        return Block(Kind.SECTION_HEADER, bbox, text, level=level)
    return Block(Kind.TEXT, bbox, text)

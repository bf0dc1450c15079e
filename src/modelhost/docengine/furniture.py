"""Page headers, footers and page numbers: text that repeats at the top or bottom of pages is furniture.

A document-level pass (one page cannot tell a running head from a heading): a block in the top or bottom `ZONE`
of its page whose text, with its numbers masked, also appears in the same zone of another page is a page header or
footer; so is a lone page number there. Masking numbers is what makes "Page 3 of 18" and "Page 4 of 18", or a
chapter's running head with its page number, one repeated text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from modelhost.docengine.types import Block, Kind, PageLayout

#: The share of the page height, at the top and at the bottom, where headers and footers live.
ZONE = 0.1
#: Kinds that can be furniture: running heads are often set like headings; tables and pictures never are.
_CANDIDATES = (
    Kind.TEXT,
    Kind.SECTION_HEADER,
    Kind.TITLE,
    Kind.FOOTNOTE,
    Kind.CAPTION,
    Kind.PAGE_HEADER,
    Kind.PAGE_FOOTER,
)
_NUMBER = re.compile(r"^(?:page\s+)?(?:\d{1,4}|[ivxlc]{1,6})(?:\s*(?:/|of)\s*\d{1,4})?$", re.I)


def _zone(block: Block, layout: PageLayout) -> Kind | None:
    if block.kind not in _CANDIDATES:
        return None
    if block.bbox[3] <= ZONE * layout.height:
        return Kind.PAGE_HEADER
    if block.bbox[1] >= (1 - ZONE) * layout.height:
        return Kind.PAGE_FOOTER
    return None


def _key(text: str) -> str:
    return re.sub(r"\d+", "#", " ".join(text.lower().split()))


def mark_furniture(layouts: Sequence[PageLayout]) -> list[PageLayout]:
    """The layouts with repeated headers, footers and page numbers re-labelled PAGE_HEADER / PAGE_FOOTER."""
    seen: Counter[tuple[Kind, str]] = Counter()
    for layout in layouts:
        keys = {(zone, _key(b.text)) for b in layout.blocks if (zone := _zone(b, layout)) is not None and b.text}
        seen.update(keys)
    out: list[PageLayout] = []
    for layout in layouts:
        blocks = []
        for block in layout.blocks:
            zone = _zone(block, layout)
            if zone is not None and block.text and (seen[(zone, _key(block.text))] >= 2 or _NUMBER.match(block.text)):
                block = replace(block, kind=zone, level=0)
            blocks.append(block)
        out.append(replace(layout, blocks=tuple(blocks)))
    return out

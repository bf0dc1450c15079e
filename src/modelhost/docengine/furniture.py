"""Page headers, footers and page numbers: furniture only on evidence, never by position alone.

A document-level pass (one page cannot tell a running head from a heading). A block in the top or bottom `ZONE`
of its page is a page header or footer when
- its text, with its numbers masked, also appears in the same zone of another page (masking numbers is what makes
  "Page 3 of 18" and "Page 4 of 18", or a chapter's running head with its page number, one repeated text);
- it is a lone page number ("7", "Page 7", "vii", "7 of 18");
- or, at the top, it is set as the running heads are: at the place (`PLACE_SLACK`) and line height (`HEIGHT_SLACK`)
  of a header that repeats on another page (a book's running head names each chapter, once per chapter; footers
  repeat or count pages, and a one-off line at the foot is a note).
Outside the zones (a report set with wide margins puts its running head and foot an inch and more from the edge),
a block is furniture only when it is its page's topmost or bottommost block (nothing of the page wholly above it, or
below it) and the same text, letter for letter, set at the same line height, is the topmost or bottommost block of
another page: a running head repeats exactly where a chapter's title, or a page's first heading, does not.
The only copy of a line is never furniture otherwise: a one-page document's title at the top of its page is its title.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from modelhost.docengine.types import Block, Kind, PageLayout

#: The share of the page height, at the top and at the bottom, where headers and footers live.
ZONE = 0.1
#: A block within this many points of a repeated running head's top edge is at its place: running heads are set at
#: one fixed position by the page style; 2 points allows for the glyph boxes of different letters (ascenders, accents).
PLACE_SLACK = 2.0
#: ...and of its line height within this many points: one font size (a heading set larger is no running head).
HEIGHT_SLACK = 0.5
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
#: A lone page number, bare or counted, in the languages whose page lines the probe and corpus show and their
#: neighbours: "7", "vii", "Page 7 of 18", "Page 1 sur 1" (a French browser's print header), "Seite 2 von 5",
#: "Página 3 de 9", "Pagina 4 di 7". The one definition: `analyse` reads a page's own number with it too.
PAGE_NUMBER = re.compile(
    r"^(?:(?:page|seite|p[aá]gina)\s+)?(?:\d{1,4}|[ivxlc]{1,6})(?:\s*(?:/|of|sur|von|de|di)\s*\d{1,4})?$", re.I
)


def _zone(block: Block, layout: PageLayout) -> Kind | None:
    if block.kind not in _CANDIDATES:
        return None
    if block.bbox[3] <= ZONE * layout.height:
        return Kind.PAGE_HEADER
    if block.bbox[1] >= (1 - ZONE) * layout.height:
        return Kind.PAGE_FOOTER
    return None


def _edge(block: Block, layout: PageLayout) -> Kind | None:
    """PAGE_HEADER for a candidate block with nothing of its page wholly above it, PAGE_FOOTER for one with nothing
    wholly below it (the left, centre and right parts of one running foot each qualify); None otherwise, and on a
    page of fewer than three blocks, where the first block is also the last and nothing tells head from body."""
    if block.kind not in _CANDIDATES or len(layout.blocks) < 3:
        return None
    others = [b for b in layout.blocks if b is not block]
    if not any(b.bbox[3] <= block.bbox[1] for b in others):
        return Kind.PAGE_HEADER
    if not any(b.bbox[1] >= block.bbox[3] for b in others):
        return Kind.PAGE_FOOTER
    return None


def _edge_repeats(layouts: Sequence[PageLayout], slack: float) -> dict[tuple[int, int], Kind]:
    """The side (`_edge`) of each edge block outside the zones, by (page, block index), whose exact text is an edge
    block of the same side on another page, at the same line height (within `slack` points)."""
    found: dict[tuple[Kind, str], list[tuple[int, int, float]]] = {}
    for n, layout in enumerate(layouts):
        for i, block in enumerate(layout.blocks):
            if block.text.strip() and _zone(block, layout) is None and (side := _edge(block, layout)) is not None:
                height = block.bbox[3] - block.bbox[1]
                found.setdefault((side, " ".join(block.text.split())), []).append((n, i, height))
    out: dict[tuple[int, int], Kind] = {}
    for (side, _), copies in found.items():
        for n, i, height in copies:
            if any(m != n and abs(h - height) <= slack for m, _, h in copies):
                out[(n, i)] = side
    return out


def _key(text: str) -> str:
    return re.sub(r"\d+", "#", " ".join(text.lower().split()))


def mark_furniture(layouts: Sequence[PageLayout], height_slack: float = HEIGHT_SLACK) -> list[PageLayout]:
    """The layouts with repeated headers, footers and page numbers re-labelled PAGE_HEADER / PAGE_FOOTER.
    `height_slack` is how far two copies of a running head outside the zones may differ in line height: HEIGHT_SLACK
    on text-layer pages, more where boxes were read back from DocTags' coarser grid (documents/pipeline)."""
    seen: Counter[tuple[Kind, str]] = Counter()
    for layout in layouts:
        keys = {(zone, _key(b.text)) for b in layout.blocks if (zone := _zone(b, layout)) is not None and b.text}
        seen.update(keys)
    # Where the repeated blocks sit, page by page: (zone, top edge, line height) of each.
    places: list[tuple[int, Kind, float, float]] = []
    for n, layout in enumerate(layouts):
        for block in layout.blocks:
            zone = _zone(block, layout)
            if zone is not None and block.text and seen[(zone, _key(block.text))] >= 2:
                places.append((n, zone, block.bbox[1], block.bbox[3] - block.bbox[1]))
    edges = _edge_repeats(layouts, height_slack)
    out: list[PageLayout] = []
    for n, layout in enumerate(layouts):
        blocks = []
        for i, block in enumerate(layout.blocks):
            zone = _zone(block, layout)
            if zone is not None and block.text:
                repeated = seen[(zone, _key(block.text))] >= 2 or PAGE_NUMBER.match(block.text) is not None
                if repeated or _set_as_running_head(block, zone, n, places):
                    block = replace(block, kind=zone, level=0)
            elif (n, i) in edges:
                block = replace(block, kind=edges[(n, i)], level=0)
            blocks.append(block)
        out.append(replace(layout, blocks=tuple(blocks)))
    return out


def _set_as_running_head(block: Block, zone: Kind, page: int, places: list[tuple[int, Kind, float, float]]) -> bool:
    # At the place and line height of a block repeated on another page: the running head of another chapter.
    height = block.bbox[3] - block.bbox[1]
    return any(
        other != page and where is zone and abs(top - block.bbox[1]) <= PLACE_SLACK and abs(h - height) <= HEIGHT_SLACK
        for other, where, top, h in places
        if zone is Kind.PAGE_HEADER
    )

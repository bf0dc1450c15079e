"""A page's layout regions as one compact answer: what the `ocr` model answers REGIONS_PROMPT with, and how the page
loop reads that answer back into `Region`s for a text-layer page (documents/engine.py).

The text path asks a model for a page's regions, never for its text: the text layer's words are exact, and the layout
model's table regions find the tables that no hand-built finder of the text path found on pages nobody tuned on (the
pixel path, reading tables from its regions, read held-out tables-fresh's tables 8/9 against the text path's 4/9).
So the question goes through the page loop's reader, like any page (documents/ and docengine/ import no backend),
and the answer is DocTags-shaped: one tag per region, named by its label, holding its box's four location tokens on
the 0-499 grid (emit.loc), `<doctag><table><loc_60><loc_100><loc_440><loc_210></table>...</doctag>`. The grid is
coarse (1.2 points on a letter page's width), far finer than the padding of the model's boxes. This module is the
one place that knows the format: the `ocr` model writes it with `regions_answer`, the engine reads it with
`read_regions`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from modelhost.docengine.emit import GRID, locations
from modelhost.docengine.types import Region

#: What the page loop asks a reader for when it wants a page's layout regions only (no line detection, no
#: recognition): the `ocr` model answers it with `regions_answer`; any other prompt gets the page's DocTags.
REGIONS_PROMPT = "List this page's layout regions."
#: The labels a region may carry (layoutmodel.LABELS' values): anything else in an answer is no region.
LABELS = frozenset({"text", "title", "figure", "caption", "table", "header", "footer", "equation"})
#: One region in an answer: its label's tag around its four location tokens.
_REGION = re.compile(r"<([a-z_]+)><loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)></\1>")


def regions_answer(regions: Sequence[Region], width: float, height: float) -> Iterator[str]:
    """The answer's parts for the regions of a `width` x `height` page: `<doctag>`, one part per region, `</doctag>`
    (a streaming model yields one part per token)."""
    yield "<doctag>"
    for region in regions:
        if region.label in LABELS:
            yield f"<{region.label}>{locations(region.bbox, width, height)}</{region.label}>"
    yield "</doctag>"


def read_regions(answer: str, width: float, height: float) -> tuple[Region, ...]:
    """The regions of an answer (`regions_answer`'s format) on a `width` x `height` page, boxes in its points. Text
    that is no region (a reader that answered the page's DocTags instead) gives none."""
    out = []
    for label, *locs in _REGION.findall(answer):
        if label not in LABELS:
            continue
        x0, y0, x1, y1 = (int(v) / GRID * size for v, size in zip(locs, (width, height, width, height), strict=True))
        if x1 > x0 and y1 > y0:
            out.append(Region(label, (x0, y0, x1, y1)))
    return tuple(out)

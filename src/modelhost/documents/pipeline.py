"""The conversion: a document's pages from the engine (text layer first, a model for the rest), each into the
document model (model.py: a text-layer page's layout as the engine made it, a model-read page's elements read from
its DocTags), written out as Markdown and DocTags without docling-core; JSON and HTML from a DoclingDocument built
when asked for.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelhost.docengine.emit import GRID, doctags_page, to_docling
from modelhost.docengine.furniture import HEIGHT_SLACK, mark_furniture
from modelhost.docengine.sandbox import page_ranges
from modelhost.docengine.source import DocumentError, check_dpi, parse_pages
from modelhost.docengine.types import PageLayout
from modelhost.documents import assemble, doctags
from modelhost.documents.engine import TEXT_LAYER, DocumentEngine, PageResult, Unread
from modelhost.documents.model import Document, Page
from modelhost.documents.readers import PageReader
from modelhost.documents.settings import DEFAULTS, ConvertSettings

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Conversion:
    """A converted document: its pages as modelhost holds them (`content`, model.py), each page's result, the pages
    that could not be read (number to reason), and the time it all took.

    `document` is the DoclingDocument of the same pages, built at first use (docling-core's import costs 2.3 CPU s):
    for JSON, HTML and the doors that hand docling's document on. A page read from its pixels is part of it only when
    the conversion kept its part (`convert(..., docling=True)`: it needs the page's pixels, which are not kept)."""

    name: str
    content: Document
    pages: list[PageResult] = field(default_factory=list)
    seconds: float = 0.0
    unread: dict[int, str] = field(default_factory=dict)
    #: The DoclingDocument part of each page read from its pixels, by page number (built while its pixels lived).
    parts: dict[int, Any] = field(default_factory=dict)
    _document: Any = None

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

    @property
    def document(self) -> Any:
        """The DoclingDocument of the pages (built once; its `name` may be changed before rendering). ValueError when
        a page read from its pixels was converted without its part (`docling=False`)."""
        if self._document is None:
            self._document = to_document(self.content, self.parts)
        return self._document

    def render(self, fmt: str) -> str:
        """The document as `md`, `json`, `html` or `doctags`: Markdown and DocTags from `content`, without
        docling-core; JSON and HTML from `document`."""
        if fmt == "md":
            return self.content.markdown()
        if fmt == "doctags":
            return self.content.doctags()
        return assemble.render(self.document if fmt in assemble.FORMATS else None, fmt)


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
    docling: bool = True,
) -> Conversion:
    """Convert one document on `engine` (this process's, by default) as `settings` say. Raises DocumentError (naming
    the file) for one that cannot be read at all.

    A PDF page with a usable text layer is read from it (`settings.text_layer=False`: every page goes to `reader`);
    the others are read from their pixels by `reader` (with `settings.pixels` off, or no reader, they are unread);
    `settings.pictures` has it read the text a text-layer page holds only in its pictures too (a scanned paragraph,
    a screenshot of prose: settings.PICTURES says why it is off unless asked). `name` is how messages name the file
    (an upload's own name); `on_start(total)` is called once the page count is known; `on_page` after each page. A
    page that cannot be read is left out and named in `Conversion.unread`; a document none of whose pages can be
    read is a DocumentError. `docling=False` says the caller will not ask for `Conversion.document` (nor JSON or
    HTML): a page read from its pixels then gets no DoclingDocument part, and docling-core is not imported for it
    (unless its DocTags hold what doctags.read does not model).

    Memory is bounded by a few pages: each model-read page's image is dropped as soon as the page is read (and,
    with `docling`, its DocTags turned into its part of the DoclingDocument), so a 1,000-page document costs what a
    few pages cost, not a thousand page images held until assembly. Pages keep their layout or DocTags (plain data,
    kilobytes) until the end, where the document-level furniture pass needs them all.
    """
    check_dpi(settings.dpi)
    path = Path(path)
    name = name or path.name
    engine = engine or default_engine()
    started = time.perf_counter()
    source = await asyncio.to_thread(engine.open, path, name=name)
    results: list[PageResult] = []
    parts: dict[int, Any] = {}
    # The elements of pixel pages read back from their DocTags here, kept for the end so they are read once.
    read: dict[int, PageLayout] = {}
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
            if page.layout is None and not docling and (layout := read_page(page)) is not None:
                read[page.number] = layout
            elif page.layout is None:
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
    return await conclude(name, path.stem, results, parts, unread, started, read)


def read_page(page: PageResult) -> PageLayout | None:
    """A page read from its pixels: its elements, from the DocTags its reader wrote (doctags.read; None when they
    hold what that reader does not model, which docling-core's parser then reads)."""
    width, height = page.size
    return doctags.read(page.doctags, page.number, width, height)


async def conclude(
    name: str,
    stem: str,
    results: list[PageResult],
    parts: dict[int, Any],
    unread: dict[int, str],
    started: float,
    read: Mapping[int, PageLayout] | None = None,
) -> Conversion:
    """The Conversion of a document whose pages are all done: each text-layer page's layout (its result's), and each
    model-read page's elements read from its DocTags, or its part (`assemble.build` of its DocTags and pixels) where
    that reader does not model them, in the order of `results`. DocumentError when no page could be read. `started`
    is the perf_counter() at which the conversion began; `read` holds the pages already read from their DocTags
    (`read_page`), which are not read again. modelhost.ray concludes the pages its engines read elsewhere
    here too, so both make one document alike."""
    if not results:
        first = min(unread)
        raise DocumentError(f"{name}: no page could be read (page {first} {unread[first]})")
    content, results = await asyncio.to_thread(_assemble, stem, results, parts, read or {})
    return Conversion(name, content, results, time.perf_counter() - started, unread, parts)


def _assemble(
    stem: str, results: list[PageResult], parts: dict[int, Any], known: Mapping[int, PageLayout]
) -> tuple[Document, list[PageResult]]:
    """Every page into the document model, with the furniture of all its pages marked across the document
    (`mark_furniture`: running heads and page numbers repeat from page to page, whichever path read each page). A
    text-layer page's DocTags are written from its marked layout; a page read from its pixels keeps its reader's
    DocTags unless the pass re-labelled one of its blocks (the `ocr` model answers one page at a time and cannot see
    that its first line repeats on every page)."""
    read = {
        r.number: r.layout if r.layout is not None else known[r.number] if r.number in known else read_page(r)
        for r in results
    }
    layouts = {number: layout for number, layout in read.items() if layout is not None}
    # A box read back from DocTags is in whole steps of the grid (a 500th of the page side), so two copies of one
    # running foot can differ in height by a step at each edge (dmca_summary's "December 1998" on pixels: 8-10 steps).
    steps = [2 * layout.height / GRID for r in results if r.layout is None and (layout := layouts.get(r.number))]
    slack = max([HEIGHT_SLACK, *steps])
    marked = dict(zip(layouts, mark_furniture(list(layouts.values()), slack), strict=True)) if layouts else {}
    results = [
        dataclasses.replace(r, doctags=doctags_page(marked[r.number]))
        if r.number in marked and (r.layout is not None or marked[r.number] != layouts[r.number])
        else r
        for r in results
    ]
    pages: list[Page] = []
    for r in results:
        layout = marked.get(r.number)
        if layout is None:
            # What our DocTags reader does not model: docling-core's Markdown of the part its parser made.
            pages.append(Page(r.number, r.doctags, markdown=assemble.render(parts[r.number], "md")[:-1]))
        else:
            pages.append(Page(r.number, r.doctags, layout, text_layer=r.layout is not None))
    return Document(stem, tuple(pages)), results


def to_document(content: Document, parts: dict[int, Any]) -> Any:
    """The DoclingDocument of `content`: each text-layer page built from its layout (emit.to_docling), each page
    read from its pixels its part, joined in order (pages renumbered from 1). ValueError when such a part is
    missing."""
    built = []
    for page in content.pages:
        if page.number in parts:
            built.append(parts[page.number])
        elif page.text_layer and page.layout is not None:
            # A part's page is renumbered by the join (pages in the order converted), like a model-read page's.
            built.append(to_docling(content.name, [dataclasses.replace(page.layout, number=1)]))
        else:
            raise ValueError(f"page {page.number} was read from its pixels without keeping its docling part")
    return assemble.join(content.name, built)


_engine: DocumentEngine | None = None


def default_engine() -> DocumentEngine:
    """This process's engine, made on first use (its sandbox's children are started once and reused)."""
    global _engine
    if _engine is None:
        _engine = DocumentEngine()
    return _engine


def summary(conversion: Conversion) -> str:
    """One line: pages, time, rate, which pages are partial, which carry a warning, which were read from their
    pixels although they have a text layer (and why), and which could not be read."""
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
    aside = {p.number: p.why for p in conversion.pages if p.why}
    if aside:
        first = min(aside)
        line += f"; text layers set aside on pages {page_ranges(aside)} (page {first}: {aside[first]})"
    if conversion.unread:
        first = min(conversion.unread)
        line += f"; pages not read: {page_ranges(conversion.unread)} (page {first} {conversion.unread[first]})"
    return line

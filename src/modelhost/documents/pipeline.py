"""The conversion: a document's pages, rasterized, read by a model one by one, each its part of one document.

Pages overlap: the next page is rasterized on a worker thread while the model reads this one (rendering a 300 DPI
page costs ~0.1-0.3 s; the model, seconds), so the model never waits for pixels after the first page. One page is
read at a time: the ocr model does not batch, and a host shared with other doors is fairer page by page.

Cancelling the task that runs `convert` stops it where it is: between pages, or within a page (the host request is
closed, which stops the model at its next check).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelhost.docengine.sandbox import Sandbox, page_ranges
from modelhost.documents import assemble
from modelhost.documents.readers import DEFAULT_PAGE_TOKENS, PageAnswer, PageReader
from modelhost.documents.sources import DocumentError, PageError, RenderedPage, Source, check_dpi, parse_pages

#: The DPI pages are rasterized at unless asked: what OCR reads well, and what pdf-spec's CLI sends.
DEFAULT_DPI = 150


@dataclass(frozen=True, slots=True)
class PageResult:
    """One page: its number in the document, its DocTags, how the model's answer ended, and the seconds it took."""

    number: int
    doctags: str
    finish_reason: str
    error: str = ""
    seconds: float = 0.0
    size: tuple[int, int] = (0, 0)

    @property
    def partial(self) -> bool:
        """True when the page stopped at its token bound or failed; its text so far is kept."""
        return self.finish_reason != "stop"


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
    def pages_per_second(self) -> float:
        return len(self.pages) / self.seconds if self.seconds > 0 else 0.0

    def render(self, fmt: str) -> str:
        """The document as `md`, `json`, `html` or `doctags`."""
        return assemble.render(self.document, fmt, [p.doctags for p in self.pages])


#: Called after each page with (pages done, pages in total, that page's result).
Progress = Callable[[int, int, PageResult], None]

#: Pages in a row that may fail to load before the rest of the document is given up on unread: a PDF that declares
#: 10,000 pages and holds one costs 50 quick refusals, not 9,999 (nor a billion, for a declared count of 10**9).
MAX_UNLOADABLE_RUN = 50
#: Pages in a row that may exhaust the sandbox (each costs up to its CPU and memory bound) before the document is
#: given up on: one bomb page is reported and skipped, a document of them is not tried page after page.
MAX_KILLED_RUN = 2


async def convert(
    path: Path | str,
    reader: PageReader,
    *,
    dpi: int = DEFAULT_DPI,
    pages: str | None = None,
    max_tokens: int = DEFAULT_PAGE_TOKENS,
    on_start: Callable[[int], None] | None = None,
    on_page: Progress | None = None,
    name: str | None = None,
    sandbox: Sandbox | None = None,
) -> Conversion:
    """Convert one document. Raises DocumentError (naming the file) for one that cannot be read at all.

    `name` is how messages name the file (an upload's own name); `on_start(total)` is called once the page count
    is known; `on_page` after each page. A page that cannot be read is left out and named in `Conversion.unread`;
    a document none of whose pages can be read is a DocumentError.

    Memory is bounded by a page or two: each page's image is dropped as soon as its DocTags are turned into that
    page's part of the document (the pages' parts are joined at the end), so a 1,000-page document costs what one
    page costs, not a thousand page images held until assembly.
    """
    check_dpi(dpi)
    path = Path(path)
    name = name or path.name
    started = time.perf_counter()
    source = await asyncio.to_thread(Source, path, sandbox, name=name)
    results: list[PageResult] = []
    parts: list[Any] = []
    unread: dict[int, str] = {}
    try:
        numbers = parse_pages(pages, source.count)
        if on_start is not None:
            on_start(len(numbers))
        pending = _Renders(source, numbers, dpi)
        try:
            unloadable = killed = 0
            for i, number in enumerate(numbers):
                try:
                    page = await pending.next()
                except PageError as exc:
                    unread[number] = str(exc).removeprefix(f"{name}: ")
                    unloadable, killed = (0, killed + 1) if exc.killed else (unloadable + 1, 0)
                    if unloadable >= MAX_UNLOADABLE_RUN or killed >= MAX_KILLED_RUN:
                        why = "nor any after it (too many in a row failed)"
                        unread.update({n: why for n in numbers[i + 1 :]})
                        break
                    continue
                unloadable = killed = 0
                t0 = time.perf_counter()
                answer: PageAnswer = await reader.read(page.image, max_tokens=max_tokens)
                result = PageResult(
                    number,
                    answer.text,
                    answer.finish_reason,
                    answer.error,
                    time.perf_counter() - t0,
                    page.image.size,
                )
                parts.append(await asyncio.to_thread(assemble.build, path.stem, [answer.text], [page.image]))
                del page  # the next page's render is already under way; this one's pixels are done with
                results.append(result)
                if on_page is not None:
                    on_page(i + 1, len(numbers), result)
        finally:
            await pending.aclose()
    finally:
        await asyncio.to_thread(source.close)
    if not results:
        first = min(unread)
        raise DocumentError(f"{name}: no page could be read; page {first}: {unread[first]}")
    document = await asyncio.to_thread(assemble.join, path.stem, parts)
    return Conversion(name, document, results, time.perf_counter() - started, unread)


class _Renders:
    """The pages of a document rendered one ahead: the next page renders while the model reads this one."""

    def __init__(self, source: Source, numbers: Sequence[int], dpi: int) -> None:
        self._source, self._numbers, self._dpi = source, numbers, dpi
        self._at = 0
        self._ahead: asyncio.Future[RenderedPage] | None = self._start()

    def _start(self) -> asyncio.Future[RenderedPage] | None:
        if self._at >= len(self._numbers):
            return None
        number = self._numbers[self._at]
        self._at += 1
        return asyncio.ensure_future(asyncio.to_thread(self._source.render, number, self._dpi))

    async def next(self) -> RenderedPage:
        assert self._ahead is not None
        current = self._ahead
        self._ahead = self._start()
        return await current

    async def aclose(self) -> None:
        if self._ahead is not None and not self._ahead.done():
            self._ahead.cancel()
            # The render thread is waiting on a sandbox child: let it finish before the document is closed.
            await asyncio.gather(self._ahead, return_exceptions=True)


def summary(conversion: Conversion) -> str:
    """One line: pages, time, rate, which pages are partial, and which could not be read."""
    line = (
        f"{conversion.name}: {len(conversion.pages)} pages in {conversion.seconds:.1f} s "
        f"({conversion.pages_per_second:.2f} pages/s)"
    )
    partial = conversion.partial_pages
    if partial:
        reasons = {p.number: p.error or p.finish_reason for p in conversion.pages if p.partial}
        line += "; partial pages: " + ", ".join(f"{n} ({reasons[n]})" for n in partial)
    if conversion.unread:
        first = min(conversion.unread)
        line += f"; pages not read: {page_ranges(conversion.unread)} (page {first}: {conversion.unread[first]})"
    return line


def output_names(pages: Sequence[PageResult]) -> list[str]:
    """The worker's output names for a conversion: document.md, document.json, page-N.doctags for each page."""
    return ["document.md", "document.json", *(f"page-{p.number}.doctags" for p in pages)]

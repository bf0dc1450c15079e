"""The conversion: a document's pages, rasterized, read by a model one by one, assembled into one document.

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

from modelhost.documents import assemble
from modelhost.documents.readers import DEFAULT_PAGE_TOKENS, PageAnswer, PageReader
from modelhost.documents.sources import RenderedPage, Source, check_dpi, parse_pages

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
    """A converted document: the DoclingDocument, each page's result, and the time it all took."""

    name: str
    document: Any
    pages: list[PageResult] = field(default_factory=list)
    seconds: float = 0.0

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


async def convert(
    path: Path | str,
    reader: PageReader,
    *,
    dpi: int = DEFAULT_DPI,
    pages: str | None = None,
    max_tokens: int = DEFAULT_PAGE_TOKENS,
    on_start: Callable[[int], None] | None = None,
    on_page: Progress | None = None,
) -> Conversion:
    """Convert one document. Raises DocumentError (naming the file) for one that cannot be read at all.

    `on_start(total)` is called once the page count is known; `on_page` after each page.
    """
    check_dpi(dpi)
    path = Path(path)
    started = time.perf_counter()
    source = await asyncio.to_thread(Source, path)
    try:
        numbers = parse_pages(pages, source.count)
        if on_start is not None:
            on_start(len(numbers))
        results: list[PageResult] = []
        images: list[Any] = []
        render = asyncio.ensure_future(asyncio.to_thread(source.render, numbers[0], dpi))
        try:
            for i, number in enumerate(numbers):
                page: RenderedPage = await render
                if i + 1 < len(numbers):
                    render = asyncio.ensure_future(asyncio.to_thread(source.render, numbers[i + 1], dpi))
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
                results.append(result)
                images.append(page.image)
                if on_page is not None:
                    on_page(i + 1, len(numbers), result)
        finally:
            if not render.done():
                render.cancel()
                # The render thread holds pdfium: let it finish before the document is closed under it.
                await asyncio.gather(render, return_exceptions=True)
    finally:
        await asyncio.to_thread(source.close)
    document = await asyncio.to_thread(assemble.build, path.stem, [r.doctags for r in results], images)
    return Conversion(path.name, document, results, time.perf_counter() - started)


def summary(conversion: Conversion) -> str:
    """One line: pages, time, rate, and which pages are partial."""
    line = (
        f"{conversion.name}: {len(conversion.pages)} pages in {conversion.seconds:.1f} s "
        f"({conversion.pages_per_second:.2f} pages/s)"
    )
    partial = conversion.partial_pages
    if partial:
        reasons = {p.number: p.error or p.finish_reason for p in conversion.pages if p.partial}
        line += "; partial pages: " + ", ".join(f"{n} ({reasons[n]})" for n in partial)
    return line


def output_names(pages: Sequence[PageResult]) -> list[str]:
    """The worker's output names for a conversion: document.md, document.json, page-N.doctags for each page."""
    return ["document.md", "document.json", *(f"page-{p.number}.doctags" for p in pages)]

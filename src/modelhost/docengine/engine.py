"""The engine's orchestration: a document's pages, each from its text layer when that layer is usable, else read
from its pixels by a model, yielded one page at a time as soon as each is known.

    engine = DocumentEngine()                      # once per process: its sandbox's children are reused
    source = engine.open(path, name="report.pdf")  # blocking; DocumentError naming the file
    async for page in engine.pages(source, [1, 2, 3], reader=reader, dpi=150):
        ...                                         # an EnginePage, or Unread(number, reason)

- Text layer first: a PDF page's words come from pdfium (in the sandbox) and `analyse` lays them out; only a page
  whose layer is unusable (no text, U+FFFD, private-use glyphs, no ToUnicode, an invisible OCR layer), or whose
  words all vanish in its layout, is rendered and read by `reader` (the `ocr` model, a DocTags VLM, or a socket).
  `text_layer=False` sends every page to it.
- With `pictures=True`, a usable text layer's page whose pictures hold text only as pixels (a scanned paragraph, a
  pasted screenshot: its `ocr_regions`) is rendered once, and each such region (pictures.py bounds how many) is
  read by `reader` like a page; text that reads like text joins the layout after its picture.
- Pages are prepared ahead in parallel on the sandbox's children (text layer, analysis, or rendering: one job per
  child), and yielded in order; a model reads one page at a time (the host serialises a model's work anyway).
- Memory is bounded by a few pages: the window of pages prepared ahead (`window`, children + 1), of which only
  PIXEL_PAGES_AHEAD may hold pixels beside the page being read; a page's pixels live from its render until its
  reader is done with it and the caller drops `EnginePage.image`; nothing keeps them after, and the heap's freed
  pages are handed back to the system after each such page and after the document (memory.py). A PDF page's
  pixels are one array sharing the bytes its sandbox child rendered, never copied into a PIL image on the way.
- A page that cannot be loaded, or that exhausts its sandbox, is yielded as `Unread` and the others go on; after
  MAX_UNLOADABLE_RUN unloadable pages in a row (a PDF that declares 10,000 pages and has one) or MAX_KILLED_RUN
  bombs in a row, the rest are `Unread` without being tried.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from modelhost.docengine.analyse import Style, analyse, document_style, upright
from modelhost.docengine.emit import doctags_page
from modelhost.docengine.memory import release_freed_memory
from modelhost.docengine.pictures import (
    answer_blocks,
    carries_text,
    crop,
    looks_like_text,
    regions_to_read,
    with_region_text,
)
from modelhost.docengine.sandbox import PageError, Sandbox, shared_sandbox
from modelhost.docengine.source import Source
from modelhost.docengine.types import BBox, PageContent, PageLayout

#: Pages in a row that may fail to load before the rest of the document is given up on unread: a PDF that declares
#: 10,000 pages and holds one costs 50 quick refusals, not 9,999 (nor a billion, for a declared count of 10**9).
MAX_UNLOADABLE_RUN = 50
#: Pages in a row that may exhaust the sandbox (each costs up to its CPU and memory bound) before the document is
#: given up on: one bomb page is reported and skipped, a document of them is not tried page after page.
MAX_KILLED_RUN = 2
#: Why the pages after such a run are not read.
GIVEN_UP = "not tried (too many pages in a row before them failed)"
#: Rendered pages that may wait for the reader beside the one it reads: pixels are the big thing (a 6250x6250 page
#: is 156 MB as a PIL image), so only one is rendered ahead, however wide the window of text-layer pages is.
PIXEL_PAGES_AHEAD = 1
#: Pages whose text layers set the document's style (body size, heading sizes, title size) before its first page is
#: analysed. A heading's level is its size's rank among the document's heading sizes, and one page alone gets it
#: wrong: a page whose largest heading is a subsection calls it level 1. Measured on the corpus's born-digital
#: files (bench/documents_quality.py): level agreement 0.61 with each page's own style, 0.86 with the whole
#: document's. A document's heading styles appear in its first pages; reading more would hold back the first page
#: of a long document (each text layer costs ~10-40 ms in the sandbox) for little.
STYLE_PAGES = 24
#: Whether `pages()` reads a text-layer page's pictures unless told: off. Each picture read costs the reader a
#: page's work, and on the
#: corpus (bench/documents_quality.py --rounds 3, born-digital, load 15) reading them took modelhost from 64x
#: pymupdf4llm's pages/s to 1.84x (issue 19's target is 2x) and CER from 0.10 to 0.115 (docling's ground truth
#: leaves a picture's text out), for no word of the ground truth more. A caller whose documents carry scanned
#: inserts turns it on.
PICTURES = False
#: How an EnginePage read from its text layer names its reader.
TEXT_LAYER = "text layer"


class Answer(Protocol):
    """A reader's answer for one page: DocTags text, why it ended ("stop", "length", "error"), the error if any."""

    @property
    def text(self) -> str: ...

    @property
    def finish_reason(self) -> str: ...

    @property
    def error(self) -> str: ...


class PageReader(Protocol):
    """Reads one page image into DocTags; cancelling the awaiting task stops the model's work on it."""

    name: str

    async def read(self, image: Any, *, max_tokens: int) -> Answer: ...


@dataclass(frozen=True, slots=True)
class EnginePage:
    """One page done: its DocTags, its layout when read from the text layer, and how it was read.

    `image` is the pixels a reader read (an HxWx3 uint8 array, or a PIL image for an image file's frame; docling's
    pictures are cropped out of them), None for a text-layer page: the caller drops it once the page is assembled,
    so no page image outlives its page. `size` is the image's pixels, or the page's points for a text-layer page."""

    number: int
    doctags: str
    via: str
    layout: PageLayout | None = None
    finish_reason: str = "stop"
    error: str = ""
    seconds: float = 0.0
    size: tuple[int, int] = (0, 0)
    image: Any = None


@dataclass(frozen=True, slots=True)
class Unread:
    """A page that could not be read, and why: `reason` follows "page N " ("cannot be loaded (...)"), so pages
    that failed alike share it."""

    number: int
    reason: str


@dataclass(slots=True)
class _Prepared:
    number: int
    layout: PageLayout | None = None
    image: Any = None
    seconds: float = 0.0
    #: A text-layer page's picture regions to read: each box (points) and its pixels.
    crops: list[tuple[BBox, Any]] = field(default_factory=list)


class DocumentEngine:
    """The sandbox its PDFs are read in, and the policy that turns a document's pages into EnginePages."""

    def __init__(self, sandbox: Sandbox | None = None) -> None:
        self.sandbox = sandbox or shared_sandbox()

    @property
    def window(self) -> int:
        """Pages prepared ahead of the one being read: one per child, and one more so no child waits."""
        return self.sandbox.workers + 1

    def open(self, path: Path | str, *, name: str | None = None) -> Source:
        """The document opened (a PDF in the sandbox); blocking. DocumentError naming the file."""
        return Source(Path(path), self.sandbox, name=name)

    async def pages(
        self,
        source: Source,
        numbers: Sequence[int],
        *,
        reader: PageReader | None,
        dpi: int,
        max_tokens: int,
        text_layer: bool = True,
        style_pages: Sequence[int] | None = None,
        pictures: bool = PICTURES,
    ) -> AsyncIterator[EnginePage | Unread]:
        """Each of `numbers` (1-based) in order, as soon as it is known. A page that needs its pixels read and has no
        `reader` is Unread. `pictures=True` has `reader` read the text a text-layer page holds only in its pictures
        (off by default: PICTURES says why).

        `style_pages`: the pages whose text layers set the document's style (the first STYLE_PAGES of them are
        read); by default `numbers`. A caller that converts one document in pieces (modelhost.ray spreads them over
        several engines) gives every piece the whole document's numbers, so each piece is laid out with the style
        the whole document gets, and the pieces join into the document one engine would have made."""
        use_layer = text_layer and source.is_pdf
        style: Style | None = None
        early: dict[int, PageContent | PageError] = {}
        if use_layer:
            chosen = list(numbers if style_pages is None else style_pages)[:STYLE_PAGES]
            style, early = await asyncio.to_thread(_document_style, source, chosen, self.sandbox.workers)
        read_pictures = pictures and reader is not None
        ahead: dict[int, asyncio.Future[_Prepared]] = {}
        cursor = 0
        # Admits renders in page order, up to PIXEL_PAGES_AHEAD past the page being read.
        renders = _Gate(PIXEL_PAGES_AHEAD)

        def fill(upto: int) -> None:
            nonlocal cursor
            while cursor < min(upto, len(numbers)):
                number = numbers[cursor]
                read = early.pop(number, None)
                job = asyncio.to_thread(
                    _prepare, source, number, cursor, dpi, use_layer, renders, style, read, read_pictures
                )
                ahead[cursor] = asyncio.ensure_future(job)
                cursor += 1

        unloadable = killed = 0
        try:
            for i, number in enumerate(numbers):
                fill(i + self.window)
                try:
                    prepared = await ahead.pop(i)
                except PageError as exc:
                    renders.advance()
                    yield Unread(number, str(exc).removeprefix(f"{source.name}: ").removeprefix(f"page {number} "))
                    unloadable, killed = (0, killed + 1) if exc.killed else (unloadable + 1, 0)
                    if unloadable >= MAX_UNLOADABLE_RUN or killed >= MAX_KILLED_RUN:
                        for rest in numbers[i + 1 :]:
                            yield Unread(rest, GIVEN_UP)
                        return
                    continue
                unloadable = killed = 0
                if prepared.layout is not None:
                    crops, prepared.crops = prepared.crops, []
                    t0 = time.perf_counter()
                    try:
                        layout = await _read_pictures(reader, prepared.layout, crops, max_tokens)
                    finally:
                        del crops
                        renders.advance()
                    size = (round(layout.width), round(layout.height))
                    seconds = prepared.seconds + time.perf_counter() - t0
                    yield EnginePage(number, doctags_page(layout), TEXT_LAYER, layout, seconds=seconds, size=size)
                    continue
                image, prepared.image = prepared.image, None
                if reader is None:
                    del image
                    renders.advance()
                    yield Unread(number, "has no usable text layer, and no model reads its pixels")
                    continue
                t0 = time.perf_counter()
                try:
                    answer = await reader.read(image, max_tokens=max_tokens)
                finally:
                    renders.advance()  # the reader is done with these pixels: the next page may render
                seconds = prepared.seconds + time.perf_counter() - t0
                yield EnginePage(
                    number,
                    answer.text,
                    reader.name,
                    None,
                    answer.finish_reason,
                    answer.error,
                    seconds,
                    pixel_size(image),
                    image,
                )
                del image
                # The consumer is done with the page (it asked for the next one): what reading it freed goes back to
                # the system, or the heap keeps hundreds of MB of it per large page (memory.py has the figures).
                await asyncio.to_thread(release_freed_memory)
        finally:
            renders.close()  # a preparation waiting for its turn to render gives up
            for future in ahead.values():
                future.cancel()
            # Each is a thread waiting on a sandbox child: let them end before the caller closes the document.
            await asyncio.gather(*ahead.values(), return_exceptions=True)
            ahead.clear()
            await asyncio.to_thread(release_freed_memory)  # the document's pages are all dropped now


async def _read_pictures(
    reader: PageReader | None, layout: PageLayout, crops: list[tuple[BBox, Any]], max_tokens: int
) -> PageLayout:
    """The layout with the text `reader` finds in each picture region that reads like text (pictures.py). A region
    the reader fails on is left as it was: the page's own text is already there."""
    if reader is None:
        return layout
    for box, pixels in crops:
        answer = await reader.read(pixels, max_tokens=max_tokens)
        blocks = answer_blocks(answer.text, box)
        if carries_text(blocks):
            layout = with_region_text(layout, box, blocks)
    return layout


def pixel_size(image: Any) -> tuple[int, int]:
    """(width, height) of a page's pixels: an HxWx3 array or a PIL image."""
    shape = getattr(image, "shape", None)
    if shape is not None:
        return int(shape[1]), int(shape[0])
    width, height = image.size
    return int(width), int(height)


class _Gate:
    """Which pages may render now: the one the consumer is at and the PIXEL_PAGES_AHEAD after it, in page order (so
    a later page can never take the room the page the consumer waits for needs). Worker threads wait on it; once
    closed, waiters give up with CancelledError."""

    def __init__(self, ahead: int) -> None:
        self._ahead = ahead
        self._done = 0  # positions the consumer has finished with
        self._closed = False
        self._cond = threading.Condition()

    def admit(self, position: int) -> None:
        with self._cond:
            while position > self._done + self._ahead and not self._closed:
                self._cond.wait()
            if self._closed:
                raise asyncio.CancelledError

    def advance(self) -> None:
        with self._cond:
            self._done += 1
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def _prepare(
    source: Source,
    number: int,
    position: int,
    dpi: int,
    use_layer: bool,
    renders: _Gate,
    style: Style | None = None,
    read: PageContent | PageError | None = None,
    pictures: bool = False,
) -> _Prepared:
    """A page made ready to yield (blocking, on a worker thread): its analysed text layer when usable, else its
    pixels (rendered once `renders` admits its position in the document). PageError when it cannot be read.
    `read` is its text layer (or the PageError it gave) when the style pass already read it. With `pictures`, a
    text-layer page's picture regions worth reading are cut from its rendering (which is then dropped)."""
    t0 = time.perf_counter()
    if use_layer:
        if isinstance(read, PageError):
            raise read
        content = read or source.text_layer(number)
        layout = analyse(content, page_style(content, style)) if content.usable else None
        # A layer whose words all vanish in the layout (every one dropped as a stamp in some direction nobody
        # reads) is no page to yield empty: its pixels are read instead, or it is Unread, never silently blank.
        if layout is not None and (layout.blocks or not content.words):
            # Picture regions are boxes on the displayed page: a page read turned upright has its layout's boxes
            # in another frame, so its pictures are not read into it.
            boxes = regions_to_read(content) if pictures and upright(content) is content else []
            crops: list[tuple[BBox, Any]] = []
            if boxes:
                renders.admit(position)
                try:
                    image = source.render(number, dpi).image
                except PageError:
                    image = None  # its text layer is read: a page that will not render keeps that, unpictured
                if image is not None:
                    cut = [(box, crop(image, box, content.width, content.height)) for box in boxes]
                    crops = [(box, pixels) for box, pixels in cut if looks_like_text(pixels)]
                del image
            return _Prepared(number, layout=layout, seconds=time.perf_counter() - t0, crops=crops)
    renders.admit(position)
    image = source.render(number, dpi).image
    return _Prepared(number, image=image, seconds=time.perf_counter() - t0)


def page_style(content: PageContent, document: Style | None) -> Style:
    """The style a page is analysed with: its own body size (what is big on it: a sidebar page set in 7 pt has
    9 pt headings, under the document's 10 pt body), the heading sizes of the document and of the page together
    (a heading's level is its size's rank among them), and the document's title size."""
    own = document_style([content])
    if document is None:
        return own
    sizes = tuple(sorted(set(document.heading_sizes) | set(own.heading_sizes), reverse=True))
    return Style(own.body_size, sizes, document.title_size)


def _document_style(
    source: Source, numbers: Sequence[int], workers: int
) -> tuple[Style | None, dict[int, PageContent | PageError]]:
    """The style of the document's usable text layers among `numbers` (None when none is usable), and what each
    page gave (kept for its own preparation, so no layer is read twice). Read on `workers` threads, one per
    sandbox child; a page that exhausts its sandbox ends the pass (each such page costs up to its bound, and a
    document of them is given up on after MAX_KILLED_RUN anyway)."""
    read: dict[int, PageContent | PageError] = {}
    queue = list(reversed(numbers))
    lock = threading.Lock()
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            with lock:
                if not queue:
                    return
                number = queue.pop()
            try:
                read[number] = source.text_layer(number)
            except PageError as exc:
                read[number] = exc
                if exc.killed:
                    stop.set()

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, min(workers, len(numbers))))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    usable = [c for c in read.values() if isinstance(c, PageContent) and c.usable]
    return (document_style(usable) if usable else None), read

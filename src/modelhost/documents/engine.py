"""The page loop: a document's pages, each from its text layer when that layer is usable, else read from its pixels
by a model, yielded one page at a time as soon as each is known.

    engine = DocumentEngine()                      # once per process: its sandbox's children are reused
    source = engine.open(path, name="report.pdf")  # blocking; DocumentError naming the file
    async for page in engine.pages(source, [1, 2, 3], reader=reader, settings=ConvertSettings()):
        ...                                         # a PageResult, or Unread(number, reason)

A page goes through stages kept in one list, as docling's PaginatedPipeline sends a page through its list of page
models: PREPARE (read_text_layer, lay_out, find_regions, cut_pictures, render) runs on a worker thread ahead of the
reader; then the reader reads what they left (a page's layout regions, with which it is analysed again, the
pictures' text into the layout, or the page's pixels into DocTags), and the pipeline (pipeline.py) builds the
page's part of the document. Each PREPARE stage takes the page's `_Work` and does its part or nothing (a stage that
does not apply to the page leaves it as it is), so a stage is added, removed or measured by editing the list.

- Text layer first: a PDF page's words come from pdfium (in the sandbox) and `analyse` lays them out; only a page
  whose layer is unusable (no text, U+FFFD, private-use glyphs, no ToUnicode, an invisible OCR layer, letters no
  language writes), or whose words all vanish in its layout, is rendered and read by `reader` (the `ocr` model, a
  DocTags VLM, or a socket); `PageResult.why` says why a layer was set aside. `settings.text_layer=False` sends
  every page to it.
- With `settings.pictures`, a usable text layer's page whose pictures hold text only as pixels (a scanned paragraph, a
  pasted screenshot: its `ocr_regions`) is rendered once, and each such region (pictures.py bounds how many) is
  read by `reader` like a page; text that reads like text joins the layout after its picture.
- With `settings.regions`, a usable text layer's page that shows a table (analyse.table_evidence) is rendered once
  and its layout regions asked of `reader` (docengine.regions); the page is analysed again with them, and a table
  region where the text path found no table is read from the layer's words inside it.
- Pages are prepared ahead in parallel on the sandbox's children (text layer, analysis, or rendering: one job per
  child), and yielded in order; a model reads one page at a time (the host serialises a model's work anyway).
- Memory is bounded by a few pages: the window of pages prepared ahead (`window`, children + 1), of which only
  PIXEL_PAGES_AHEAD may hold pixels beside the page being read; a page's pixels live from its render until its
  reader is done with it and the caller drops `PageResult.image`; nothing keeps them after, and the heap's freed
  pages are handed back to the system after each such page and after the document (memory.py). A PDF page's
  pixels are one array sharing the bytes its sandbox child rendered, never copied into a PIL image on the way.
- A page that cannot be loaded, or that exhausts its sandbox, is yielded as `Unread` and the others go on; after
  MAX_UNLOADABLE_RUN unloadable pages in a row (a PDF that declares 10,000 pages and has one) or MAX_KILLED_RUN
  bombs in a row, the rest are `Unread` without being tried.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from modelhost.docengine.analyse import Style, analyse, document_style, table_evidence, upright
from modelhost.docengine.emit import doctags_page
from modelhost.docengine.memory import release_freed_memory
from modelhost.docengine.regions import read_regions
from modelhost.docengine.sandbox import PageError, Sandbox, shared_sandbox
from modelhost.docengine.source import Source
from modelhost.docengine.types import BBox, PageContent, PageLayout, Usability
from modelhost.documents.pictures import (
    answer_blocks,
    carries_text,
    crop,
    looks_like_text,
    regions_to_read,
    with_region_text,
)
from modelhost.documents.readers import PageReader, RegionReader
from modelhost.documents.settings import ConvertSettings

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
#: How a page read from its text layer names its reader.
TEXT_LAYER = "text layer"
#: How a page whose pixels are all one colour names its reader (none was asked), and its DocTags: an empty page, as
#: the `ocr` model answers one.
BLANK = "blank"
EMPTY_PAGE = "<doctag></doctag>"
#: Why a PDF page that has a text layer was read from its pixels instead, by the layer's verdict (`PageResult.why`;
#: the summary line names such pages). A page with no text at all (a scan) needs no reason.
SET_ASIDE = {
    Usability.REPLACEMENT: "its text layer's characters are U+FFFD",
    Usability.PRIVATE_USE: "its text layer's characters are private-use codes",
    Usability.NO_UNICODE: "its text layer's fonts have no Unicode map",
    Usability.INVISIBLE: "its text layer is an invisible OCR layer over an image",
    Usability.MISMAPPED: "its text layer's letters are not the page's (a font maps glyphs to wrong characters)",
}
#: A text layer whose letters no language writes (Usability.MISMAPPED) is only doubted: its page is read from its
#: pixels, and the layer is kept after all where what the reader read agrees with it this much (`agreement`: the
#: letter pairs both share, order-free). The statistics flag a true layer rarely (Welsh, whose w and y are vowels),
#: and then the `ocr` model's reading agrees with it as with any clean page: 0.97-1.0 (right_to_left_01, multi_page,
#: the drawn test pages, at 150 DPI); a lying layer shares pairs by chance: 0.0-0.07 for a shifted alphabet or a
#: Type3 page read as its codes, 0.51 for right_to_left_02, whose map sends only some glyphs astray.
AGREEMENT = 0.75
#: Tags and location tokens of a reader's DocTags, left out of the text compared.
_TAG = re.compile(r"<[^>]*>")
#: Rows compared at once when judging a page blank: 64 rows of a 6250-pixel-wide page are 1.2 MB of comparison.
BLANK_BAND = 64


@dataclass(frozen=True, slots=True)
class PageResult:
    """One page done: its number in the document, its DocTags, how the reader's answer ended, the error if any, the
    seconds it took, its size, what read it (the reader's name, or TEXT_LAYER), its layout when read from the text
    layer, and the pixels a reader read.

    `size` is the image's pixels, or the page's points for a text-layer page. `image` (an HxWx3 uint8 array, or a
    PIL image for an image file's frame; docling's pictures are cropped out of it) is None for a text-layer page,
    and the pipeline drops it as soon as the page's part of the document is built, so no page image outlives its
    page. `layout` (plain data, kilobytes) is kept to the end, where the document-level furniture pass needs every
    page's. `warning` is what the reader found doubtful about the page ("" when nothing): the `ocr` model's warning
    that most of the page's lines are in a script it cannot read. `why` says why a PDF page with a text layer was
    read from its pixels instead (SET_ASIDE; "" for every other page)."""

    number: int
    doctags: str
    finish_reason: str = "stop"
    error: str = ""
    seconds: float = 0.0
    size: tuple[int, int] = (0, 0)
    via: str = ""
    layout: PageLayout | None = None
    image: Any = None
    warning: str = ""
    why: str = ""

    @property
    def partial(self) -> bool:
        """True when the page stopped at its token bound or failed; its text so far is kept."""
        return self.finish_reason != "stop"


@dataclass(frozen=True, slots=True)
class Unread:
    """A page that could not be read, and why: `reason` follows "page N " ("cannot be loaded (...)"), so pages
    that failed alike share it."""

    number: int
    reason: str


@dataclass(slots=True)
class _Work:
    """A page between the PREPARE stages, on its worker thread: what it is, how to read it, and what each stage left."""

    source: Source
    number: int
    position: int  # in the pages asked for: the order renders are admitted in
    dpi: int
    use_layer: bool
    renders: _Gate
    style: Style | None
    early: PageContent | PageError | None  # its text layer when the style pass already read it
    pictures: bool
    content: PageContent | None = None
    layout: PageLayout | None = None
    image: Any = None
    warning: str = ""
    why: str = ""  # why its text layer was set aside (SET_ASIDE)
    #: A doubted layer's layout (Usability.MISMAPPED) and its words' text: kept if its pixels agree with it.
    doubted: PageLayout | None = None
    doubted_text: str = ""
    #: A text-layer page's picture regions to read: each box (points) and its pixels.
    crops: list[tuple[BBox, Any]] = field(default_factory=list)
    seconds: float = 0.0
    #: Whether a text-layer page that shows a table is rendered for its layout regions (settings.regions, and a
    #: reader that answers them), the style it was analysed with, and its pixels for the reader.
    regions: bool = False
    page_style: Style | None = None
    region_image: Any = None


def read_text_layer(work: _Work) -> None:
    """A PDF page's text layer, from the sandbox (or the style pass, which read it already). PageError when the page
    cannot be loaded."""
    if not work.use_layer:
        return
    if isinstance(work.early, PageError):
        raise work.early
    work.content = work.early or work.source.text_layer(work.number)


def lay_out(work: _Work) -> None:
    """A usable text layer laid out (`analyse`, with the page's style within the document's). A layer whose words
    all vanish in the layout (every one dropped as a stamp in some direction nobody reads) is no page to yield
    empty: it is left without a layout, so its pixels are read instead, or it is Unread, never silently blank."""
    content = work.content
    if content is None:
        return
    if not content.usable:
        work.why = SET_ASIDE.get(content.usability, "")
        if content.usability is Usability.MISMAPPED:
            work.doubted = analyse(content, page_style(content, work.style))
            work.doubted_text = " ".join(w.text for w in content.words)
        return
    work.page_style = page_style(content, work.style)
    layout = analyse(content, work.page_style)
    if layout.blocks or not content.words:
        work.layout = layout


def find_regions(work: _Work) -> None:
    """With `regions`, a text-layer page that shows a table (`table_evidence`) rendered for its reader's layout
    regions, which the page's tables are then read from (`_with_regions`). Other pages are never rendered: the
    layout model costs ~1 CPU s to load and 0.1-1.5 s a page on a 2-core machine, and a page of prose gains nothing
    by it. Like its pictures, a page read turned upright is not asked (its regions would be in another frame)."""
    content = work.content
    if not work.regions or work.layout is None or content is None or upright(content) is not content:
        return
    if work.page_style is None or not table_evidence(work.layout, content.rulings, work.page_style.body_size):
        return
    work.renders.admit(work.position)
    try:
        work.region_image = work.source.render(work.number, work.dpi).image
    except PageError:
        return


def cut_pictures(work: _Work) -> None:
    """With `pictures`, a text-layer page's picture regions worth reading (pictures.py), cut from one rendering of
    the page, which is then dropped. Picture regions are boxes on the displayed page: a page read turned upright has
    its layout's boxes in another frame, so its pictures are not read into it. A page that will not render keeps its
    text layer, unpictured."""
    content = work.content
    if work.layout is None or content is None or not work.pictures or upright(content) is not content:
        return
    boxes = regions_to_read(content)
    if not boxes:
        return
    image = work.region_image  # rendered once for both, when the page's regions are asked too
    if image is None:
        work.renders.admit(work.position)
        try:
            image = work.source.render(work.number, work.dpi).image
        except PageError:
            return
    cut = [(box, crop(image, box, content.width, content.height)) for box in boxes]
    work.crops = [(box, pixels) for box, pixels in cut if looks_like_text(pixels)]
    del image


def render(work: _Work) -> None:
    """A page with no layout rendered for its reader, once `renders` admits its position in the document."""
    if work.layout is not None:
        return
    work.renders.admit(work.position)
    work.image = work.source.render(work.number, work.dpi).image


#: The stages that make a page ready for its reader, in order, on a worker thread ahead of the page being read; the
#: reader then reads what they left, one page at a time (`pages()`: the pictures' text into a text-layer page's
#: layout, or a rendered page's pixels into its DocTags), and the pipeline builds each page's part of the document
#: and joins them (pipeline.py).
PREPARE: tuple[Callable[[_Work], None], ...] = (read_text_layer, lay_out, find_regions, cut_pictures, render)


class DocumentEngine:
    """The sandbox its PDFs are read in, and the loop that turns a document's pages into PageResults."""

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
        settings: ConvertSettings,
        style_pages: Sequence[int] | None = None,
    ) -> AsyncIterator[PageResult | Unread]:
        """Each of `numbers` (1-based) in order, as soon as it is known. A page that needs its pixels read and has no
        `reader` (or `settings.pixels` is off) is Unread. `settings.pictures` has `reader` read the text a
        text-layer page holds only in its pictures (off by default: settings.PICTURES says why). `settings.pages`
        is the caller's business: `numbers` are the pages read.

        `style_pages`: the pages whose text layers set the document's style (the first STYLE_PAGES of them are
        read); by default `numbers`. A caller that converts one document in pieces (modelhost.ray spreads them over
        several engines) gives every piece the whole document's numbers, so each piece is laid out with the style
        the whole document gets, and the pieces join into the document one engine would have made."""
        reader = reader if settings.pixels else None
        max_tokens = settings.max_tokens
        use_layer = settings.text_layer and source.is_pdf
        style: Style | None = None
        early: dict[int, PageContent | PageError] = {}
        if use_layer:
            chosen = list(numbers if style_pages is None else style_pages)[:STYLE_PAGES]
            style, early = await asyncio.to_thread(_document_style, source, chosen, self.sandbox.workers)
        read_pictures = settings.pictures and reader is not None
        ask_regions = settings.regions and isinstance(reader, RegionReader)
        ahead: dict[int, asyncio.Future[_Work]] = {}
        cursor = 0
        # Admits renders in page order, up to PIXEL_PAGES_AHEAD past the page being read.
        renders = _Gate(PIXEL_PAGES_AHEAD)

        def fill(upto: int) -> None:
            nonlocal cursor
            while cursor < min(upto, len(numbers)):
                number = numbers[cursor]
                work = _Work(
                    source,
                    number,
                    cursor,
                    settings.dpi,
                    use_layer,
                    renders,
                    style,
                    early.pop(number, None),
                    read_pictures,
                    regions=ask_regions,
                )
                ahead[cursor] = asyncio.ensure_future(asyncio.to_thread(_prepare, work))
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
                        layout = prepared.layout
                        if prepared.region_image is not None and isinstance(reader, RegionReader):
                            layout = await _with_regions(reader, prepared)
                        layout = await _read_pictures(reader, layout, crops, max_tokens)
                    finally:
                        del crops
                        renders.advance()
                    size = (round(layout.width), round(layout.height))
                    seconds = prepared.seconds + time.perf_counter() - t0
                    yield PageResult(
                        number, doctags_page(layout), seconds=seconds, size=size, via=TEXT_LAYER, layout=layout
                    )
                    continue
                image, prepared.image = prepared.image, None
                if blank(image):
                    # Nothing drawn on it (a blank page between chapters): no text to read, so no model is started
                    # for it; it is the empty page the `ocr` model would have answered, and a VLM cannot invent one.
                    renders.advance()
                    size = pixel_size(image)
                    yield PageResult(number, EMPTY_PAGE, seconds=prepared.seconds, size=size, via=BLANK, image=image)
                    del image
                    continue
                doubted = prepared.doubted
                if reader is None:
                    del image
                    renders.advance()
                    if doubted is not None:
                        # Nothing reads its pixels: the doubted layer is all there is of the page.
                        yield _layer_page(number, doubted, prepared.seconds)
                        continue
                    yield Unread(number, "has no usable text layer, and no model reads its pixels")
                    continue
                t0 = time.perf_counter()
                try:
                    answer = await reader.read(image, max_tokens=max_tokens)
                finally:
                    renders.advance()  # the reader is done with these pixels: the next page may render
                seconds = prepared.seconds + time.perf_counter() - t0
                if doubted is not None and agreement(prepared.doubted_text, answer.text) >= AGREEMENT:
                    del image
                    yield _layer_page(number, doubted, seconds)  # its pixels say the layer is the text after all
                    continue
                yield PageResult(
                    number,
                    answer.text,
                    answer.finish_reason,
                    answer.error,
                    seconds,
                    pixel_size(image),
                    reader.name,
                    image=image,
                    warning=answer.warning,
                    why=prepared.why,
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


def _layer_page(number: int, layout: PageLayout, seconds: float) -> PageResult:
    size = (round(layout.width), round(layout.height))
    return PageResult(number, doctags_page(layout), seconds=seconds, size=size, via=TEXT_LAYER, layout=layout)


def agreement(layer: str, read: str) -> float:
    """How far a text layer's text and what a reader read from the same page's pixels (DocTags; tags left out)
    agree: the Dice share of letter pairs within words that both hold, counted with repeats, in any order (a
    reader's reading order and a layout's differ; their letters do not). 0.0 when either has none."""

    def pairs(text: str) -> Counter[str]:
        counted: Counter[str] = Counter()
        for word in text.lower().split():
            letters = [c for c in word if c.isalnum()]
            counted.update(a + b for a, b in itertools.pairwise(letters))
        return counted

    ours, theirs = pairs(layer), pairs(_TAG.sub(" ", read))
    total = sum(ours.values()) + sum(theirs.values())
    return 2 * sum((ours & theirs).values()) / total if total else 0.0


async def _with_regions(reader: RegionReader, work: _Work) -> PageLayout:
    """A text-layer page analysed again with its layout regions (`reader.regions`, docengine.regions): the model's
    table regions are read from the layer's words (analyse). A reader that answers no regions leaves the layout."""
    image, work.region_image = work.region_image, None
    content, work.content = work.content, None
    assert work.layout is not None
    answer = await reader.regions(image)
    del image
    if content is None:
        return work.layout
    regions = read_regions(answer.text, content.width, content.height)
    if not regions:
        return work.layout
    if not any(r.label == "table" for r in regions):
        # analyse reads a page's table regions only: without one it would lay the page out as it did
        return replace(work.layout, regions=regions)
    return await asyncio.to_thread(analyse, replace(content, regions=regions), work.page_style)


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


def blank(image: Any) -> bool:
    """True when a rendered page's pixels are all one colour (an HxWx3 array; an image file's frame is never judged
    blank). A full-page comparison costs a few ms at 150 dpi, against seconds of starting a model for nothing."""
    shape = getattr(image, "shape", None)
    if shape is None or len(shape) != 3 or not shape[0] or not shape[1]:
        return False
    first = image[0, 0]
    # Band by band, so the comparison's own array stays small on a huge page and a page with ink stops at its band.
    return all(bool((image[top : top + BLANK_BAND] == first).all()) for top in range(0, shape[0], BLANK_BAND))


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


def _prepare(work: _Work) -> _Work:
    """A page made ready to yield (blocking, on a worker thread): the PREPARE stages in order, timed. PageError when
    it cannot be read."""
    t0 = time.perf_counter()
    for stage in PREPARE:
        stage(work)
    work.seconds = time.perf_counter() - t0
    work.early = None
    if work.region_image is None:
        work.content = None  # the layout holds what the page needs now; a page to read again keeps its content
    return work


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

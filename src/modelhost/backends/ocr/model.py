"""OcrModel: the document engine's pixel path as a vision TextModel that answers a page image with DocTags.

A page streams ONE ELEMENT PER TOKEN, as soon as each is known: `<doctag>` before any model runs, then detection
(lines, orientation, layout regions: the page's reading order is known before any text is read), then each region
is recognised only when the consumer asks for its next element (scanpage.py), then `</doctag>`. So the
first element arrives after one region's recognition, not the page's, and `max_tokens` bounds the WORK: 2 tokens
detect the page and recognise its first region only. The shared `decode_loop` does the stopping, so `max_tokens`,
stop strings and `cancel=` behave as for any backend, and a page cut by its bound keeps every element before it.

Text goes out as recognised: `<` and `>` are written literally, as pdf-spec's DocTags parser reads them (escaping
for docling-core is the business of `convert`, which parses with docling).

The prompt picks the answer's format: a prompt that asks for Markdown (docling's VLM API pipeline sends "Convert
this page to markdown. Do not miss any text and only output the bare markdown!" with its MARKDOWN response format,
see docling's `vlm_model_specs`) gets Markdown, one block per token, blocks separated by a blank line, page
furniture left out as docling's Markdown leaves it out; docengine.regions.REGIONS_PROMPT gets the layout model's
regions alone (no line detection, no recognition: what the page loop asks of a text-layer page whose text layer shows
a table); any other prompt ("Convert this page to docling.", pdf-spec's) gets DocTags. A request without an image is
refused before any compute, as pdf-spec's own host refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

from modelhost.backends.ocr import scanpage
from modelhost.backends.ocr.pixels import PixelReader, check_image, check_size
from modelhost.docengine.emit import element, markdown_page
from modelhost.docengine.regions import REGIONS_PROMPT, regions_answer
from modelhost.docengine.types import Block, Kind, PageLayout
from modelhost.errors import GenerationError, InvalidInputError, ModelClosedError, ModelHostError
from modelhost.inference.adapters import StreamEngine
from modelhost.inference.generation import LoopOutcome, MetricsClock, decode_loop
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import BatchResult, ClassifyResult, GenerateMetrics, Message, ModelInfo, Token

#: Elements a page may stream unless the request bounds it: far above any real page (a dense page is ~200 lines).
DEFAULT_MAX_ELEMENTS = 4096
#: The token id of the end of the page; elements are numbered from 1.
EOS_ID = 0
#: A page image carries no DPI; it is taken as a letter/A4 page (its long side 11 inches), so sizes in points are
#: about right whatever the scan's resolution. DocTags locations are relative, so they never depend on it.
PAGE_LONG_SIDE_INCHES = 11.0
#: A page whose recognisers could not read more than this share of its lines (pixels.DOUBT_SCORE, scripts.LINE_CONF)
#: is in a script none of them reads: half, so one doubtful logo or stamp on a Latin page never warns, and a page of
#: Georgian (every line doubtful, measured) always does.
UNREADABLE_SHARE = 0.5
#: ...counted only over this many lines or more: a page of one or two lines (a title slide) is too little evidence.
MIN_SCRIPT_LINES = 3
#: What the model says of such a page (the pipeline names the page).
UNREADABLE_SCRIPT = (
    "{unread} of its {lines} text lines could not be read: the ocr model's recognisers read {scripts}, and "
    "text in another script is missing or wrong"
)
#: A prompt asking for Markdown (docling's "Convert this page to markdown.", any "... as Markdown").
_MARKDOWN = re.compile(r"\bmark\s*down\b", re.IGNORECASE)

NO_IMAGE = (
    "the ocr model reads page images: send one image in the last user message "
    "(with any prompt, e.g. 'Convert this page to docling.')"
)


def rgb_array(image: Any) -> Any:
    """A caller image (PIL image, HxWx3 uint8 array, PNG/JPEG bytes) as a contiguous HxWx3 uint8 RGB array."""
    import io

    import numpy as np

    if isinstance(image, np.ndarray):
        # the document engine's rendered page: no PIL to import (~0.05 s of a text-layer page's regions, issue 34)
        return np.ascontiguousarray(check_image(image))
    from PIL import Image

    if isinstance(image, (bytes, bytearray, memoryview)):
        try:
            img = Image.open(io.BytesIO(bytes(image)), formats=("PNG", "JPEG"))
        except Exception as exc:
            raise InvalidInputError(f"the page image is not a readable PNG or JPEG ({exc})") from exc
        check_size(img.width, img.height)
        image = img.convert("RGB")
    if isinstance(image, Image.Image):
        check_size(image.width, image.height)
        return np.asarray(image if image.mode == "RGB" else image.convert("RGB"))
    return np.ascontiguousarray(check_image(image))


def wants_regions(messages: Sequence[Message]) -> bool:
    """True when the last user turn's prompt is REGIONS_PROMPT: the page's layout regions only."""
    user = [m for m in messages if m.role == "user"]
    return bool(user) and (user[-1].content or "").strip() == REGIONS_PROMPT


def wants_markdown(messages: Sequence[Message]) -> bool:
    """True when the last user turn's prompt asks for Markdown."""
    user = [m for m in messages if m.role == "user"]
    return bool(user) and bool(_MARKDOWN.search(user[-1].content or ""))


class OcrModel:
    """A loaded pixel path (pixels.PixelReader). Drive it from one thread, as the host does."""

    model_type = "pp-ocr"
    #: It answers docengine.regions.REGIONS_PROMPT with its layout model's regions (readers.HostReader.regions asks).
    answers_regions = True

    def __init__(self, reader: PixelReader, folder: Path, *, architecture: str) -> None:
        self._reader: PixelReader | None = reader
        self.folder = folder
        self.architecture = architecture
        self._metrics = GenerateMetrics()
        self._err: BaseException | None = None
        # The pixel path cannot be stepped in llama.cpp's sense (a page is detection, then one recognition per
        # region), but its stream yields one element per token: one slot over that stream keeps the engine contract
        # whole (each step is one element; a cancelled page stops before its next region is recognised).
        self._engine = StreamEngine(self)

    def engine(self) -> StreamEngine:
        """The model's engine (EngineModel): one slot over its own element stream."""
        self._live()
        return self._engine

    @property
    def reader(self) -> PixelReader:
        """The pixel path itself (for `convert` and tests that count its recognition calls)."""
        return self._live()

    # -- the page --------------------------------------------------------------------------------------------------
    def page_doctags(self, image: Any) -> str:
        """The whole DocTags of one page, at once (for callers outside the host, and the benchmark)."""
        return "".join(t.text for t in self.chat([Message("user", "", (image,))]))

    # -- the contract ----------------------------------------------------------------------------------------------
    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        """Stream the DocTags (or Markdown, when asked) of the last user turn's one image, element by element."""
        self._live()
        user = [m for m in messages if m.role == "user"]
        images = user[-1].images if user else ()
        if len(images) != 1:
            raise InvalidInputError(NO_IMAGE if not images else f"one page image per request, got {len(images)}")
        o = GenerateOptions.parse(opts)
        o.refuse("ocr", ["json_schema", "logprobs", "tools"], "it answers DocTags")
        o = o.resolved({"max_tokens": DEFAULT_MAX_ELEMENTS})
        # Decoded and bounds-checked now: a bad image is refused before the stream starts, not after `<doctag>`.
        return self._run(rgb_array(images[0]), o, markdown=wants_markdown(messages), regions=wants_regions(messages))

    def _pieces(
        self, rgb: Any, opts: GenerateOptions, clock: MetricsClock, markdown: bool, regions: bool = False
    ) -> Generator[str, None, None]:
        # The page's text, piece by piece; each piece is computed only when decode_loop asks for the next token.
        if regions:
            # A text-layer page's regions (docengine.regions): the layout model alone, one region per token.
            found = self._live().regions(rgb)
            clock.prefill_done(len(found))
            yield from regions_answer(found, rgb.shape[1], rgb.shape[0])
            return
        if not markdown:
            yield "<doctag>"
        if opts.cancelled():
            return
        reader = self._live()
        detection = reader.detect(rgb, max(rgb.shape[:2]) / PAGE_LONG_SIDE_INCHES)
        clock.prefill_done(len(detection.quads))
        previous: Block | None = None
        pending = ""  # a list's closing tag waits until the next block is known not to continue it
        for block in scanpage.blocks(reader, detection):
            if markdown:
                text = _markdown(block, detection.width, detection.height)
                if text:
                    yield text if previous is None else "\n\n" + text
                    previous = block
                continue
            name = _wrapper(block)
            same = bool(name) and name == _wrapper(previous)
            opening = "" if same or not name else f"<{name}>"
            yield ("" if same else pending) + opening + element(block, detection.width, detection.height)
            pending = f"</{name}>" if name else ""
            previous = block
        if not markdown:
            yield pending + "</doctag>"

    def _run(self, image: Any, opts: GenerateOptions, *, markdown: bool, regions: bool = False) -> Iterator[Token]:
        clock = MetricsClock()
        outcome = LoopOutcome()
        self._err = None
        reader = self._live()
        lines, unread = reader.recognised_lines, reader.unreadable_lines
        pieces: list[str] = []
        source = self._pieces(image, opts, clock, markdown, regions)

        def ids() -> Iterator[int]:
            for piece in source:
                pieces.append(piece)
                yield len(pieces)
            yield EOS_ID

        try:
            yield from decode_loop(
                ids(), lambda i: pieces[i - 1].encode(), opts, eos_ids=(EOS_ID,), clock=clock, outcome=outcome
            )
        except ModelHostError as exc:
            self._err = exc
            outcome.finish_reason = "error"
            raise
        except Exception as exc:
            error = GenerationError(f"ocr failed: {type(exc).__name__}: {exc}")
            self._err = error
            outcome.finish_reason = "error"
            raise error from exc
        finally:
            source.close()
            metrics = clock.finish(outcome.finish_reason)
            read, unreadable = reader.recognised_lines - lines, reader.unreadable_lines - unread
            # `reader.scripts` finds the script models (tesserocr): asked only where a line went unread, so never
            # for a page's layout regions (script_warning has no warning without one)
            warning = script_warning(read, unreadable, reader.scripts) if unreadable else ""
            self._metrics = replace(metrics, warning=warning) if warning else metrics

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        """Refused: the ocr model has nothing to say about text alone."""
        raise InvalidInputError(NO_IMAGE)

    def classify(self, prompts: Sequence[str], **opts: Any) -> list[ClassifyResult]:
        """Refused: pages only."""
        raise InvalidInputError(NO_IMAGE)

    def batch_generate(self, prompts: Sequence[str], **opts: Any) -> list[BatchResult]:
        """Each prompt refused: pages only."""
        return [BatchResult(error=InvalidInputError(NO_IMAGE), finish_reason="error") for _ in prompts]

    def accepts_images(self) -> bool:
        """Always: a page image is all it reads."""
        return True

    def info(self) -> ModelInfo:
        """The detection model's family (e.g. pp-ocrv6)."""
        return ModelInfo(self.architecture)

    def metrics(self) -> GenerateMetrics:
        """The last page's metrics (prompt tokens: detected lines; generated: elements)."""
        return self._metrics

    def err(self) -> BaseException | None:
        """The last page's error, if it failed."""
        return self._err

    def _live(self) -> PixelReader:
        if self._reader is None:
            raise ModelClosedError("the ocr model was closed")
        return self._reader

    def close(self) -> None:
        """Release the models."""
        self._engine.close()
        if self._reader is not None:
            self._reader.close()
        self._reader = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def script_warning(lines: int, unread: int, scripts: Sequence[str] = ("Latin",)) -> str:
    """The warning for a page whose recognisers (reading `scripts`) read `lines` lines and could not read `unread` of
    them, or ""."""
    if lines < MIN_SCRIPT_LINES or unread <= UNREADABLE_SHARE * lines:
        return ""
    names = ", ".join(scripts[:-1]) + f" and {scripts[-1]}" if len(scripts) > 1 else "".join(scripts)
    return UNREADABLE_SCRIPT.format(unread=unread, lines=lines, scripts=names)


def _wrapper(block: Block | None) -> str:
    if block is None or block.kind is not Kind.LIST_ITEM:
        return ""
    return "ordered_list" if block.ordered else "unordered_list"


def _markdown(block: Block, width: float, height: float) -> str:
    # A one-block page's Markdown, as docling-core writes it (headings, lists, tables, pictures) without building a
    # DoclingDocument per block (tests/documents/test_markdown_writer.py compares the two block by block).
    return markdown_page(PageLayout(1, width, height, (block,))).strip()

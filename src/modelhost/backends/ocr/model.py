"""OcrModel: RapidOCR's PP-OCR ONNX models as a vision TextModel that answers a page image with DocTags.

A page goes detection -> recognition -> layout (`layout.py`) -> DocTags, streamed one element a token: `<doctag>`,
each element in reading order, `</doctag>`. The shared `decode_loop` does the stopping, so `max_tokens` (counted
in elements), stop strings and `cancel=` behave as for any backend, and a page cut by its bound keeps every element
before the cut. Cancellation is also honoured inside the page: between detection and recognition, and between
recognition batches, which is where the seconds go.

The prompt is not read (pdf-spec sends "Convert this page to docling."): the model does one thing. A request
without an image is refused before any compute, as pdf-spec's own host refuses it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Self

from modelhost.errors import GenerationError, InvalidInputError, ModelClosedError, ModelHostError
from modelhost.inference.generation import LoopOutcome, MetricsClock, decode_loop
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import BatchResult, ClassifyResult, GenerateMetrics, Message, ModelInfo, Token

from . import layout

#: Elements a page may stream unless the request bounds it: far above any real page (a dense page is ~200 lines).
DEFAULT_MAX_ELEMENTS = 4096
#: The token id of the end of the page; elements are numbered from 1.
EOS_ID = 0
#: Text lines recognised per batch, between which a cancel is noticed.
REC_CHUNK = 24
#: Bounds of an image, as the inferd wire's: an axis of at most 2^16, 128 MiB of RGB.
MAX_IMAGE_AXIS = 1 << 16
MAX_IMAGE_PIXELS = (128 << 20) // 3

NO_IMAGE = (
    "the ocr model reads page images: send one image in the last user message "
    "(with any prompt, e.g. 'Convert this page to docling.')"
)


def rgb_array(image: Any) -> Any:
    """A caller image (PIL image, HxWx3 uint8 array, PNG/JPEG bytes) as a contiguous HxWx3 uint8 RGB array."""
    import io

    import numpy as np
    from PIL import Image

    if isinstance(image, (bytes, bytearray, memoryview)):
        try:
            img = Image.open(io.BytesIO(bytes(image)), formats=("PNG", "JPEG"))
        except Exception as exc:
            raise InvalidInputError(f"the page image is not a readable PNG or JPEG ({exc})") from exc
        _check(img.width, img.height)
        image = img.convert("RGB")
    if isinstance(image, Image.Image):
        _check(image.width, image.height)
        return np.asarray(image if image.mode == "RGB" else image.convert("RGB"))
    shape = getattr(image, "shape", None)
    if shape is None or len(shape) != 3 or shape[2] != 3 or str(getattr(image, "dtype", "")) != "uint8":
        raise InvalidInputError(f"the page image must be a PIL image, PNG/JPEG bytes or HxWx3 uint8, got {shape}")
    _check(int(shape[1]), int(shape[0]))
    return np.ascontiguousarray(image)


def _check(width: int, height: int) -> None:
    if width <= 0 or height <= 0:
        raise InvalidInputError(f"the page image is empty ({width}x{height})")
    if width > MAX_IMAGE_AXIS or height > MAX_IMAGE_AXIS or width * height > MAX_IMAGE_PIXELS:
        raise InvalidInputError(f"the page image is {width}x{height}, over {MAX_IMAGE_PIXELS} pixels")


class OcrModel:
    """A loaded RapidOCR pipeline (detection + recognition ONNX models). Drive it from one thread, as the host does."""

    model_type = "pp-ocr"

    def __init__(self, engine: Any, folder: Path, *, architecture: str) -> None:
        self._engine = engine
        self.folder = folder
        self.architecture = architecture
        self._metrics = GenerateMetrics()
        self._err: BaseException | None = None

    # -- the page --------------------------------------------------------------------------------------------------
    def read_lines(self, image: Any, cancel: Any = None) -> list[layout.Line] | None:
        """The text lines of a page (boxes in its pixels), or None when `cancel` was set on the way."""
        engine = self._live()
        if cancel is not None and cancel.is_set():
            return None
        bgr = rgb_array(image)[:, :, ::-1]
        det = engine(bgr, use_det=True, use_cls=False, use_rec=False)
        boxes = getattr(det, "boxes", None)
        if boxes is None or len(boxes) == 0:
            return []
        if cancel is not None and cancel.is_set():
            return None
        # Crops come from the page at full resolution even when detection ran on a shrunken copy (max_side_len).
        crops = engine.crop_text_regions(bgr, boxes)
        lines: list[layout.Line] = []
        threshold = float(engine.text_score)
        for start in range(0, len(crops), REC_CHUNK):
            if cancel is not None and cancel.is_set():
                return None
            rec = engine.recognize_txt(crops[start : start + REC_CHUNK])
            for box, text, score in zip(boxes[start : start + REC_CHUNK], rec.txts, rec.scores, strict=True):
                if text.strip() and float(score) >= threshold:
                    lines.append(layout.Line.from_quad(box.tolist(), text.strip(), float(score)))
        return lines

    def page_doctags(self, image: Any) -> str:
        """The whole DocTags of one page, at once (for callers outside the host, and the benchmark)."""
        return "".join(t.text for t in self.chat([Message("user", "", (image,))]))

    # -- the contract ----------------------------------------------------------------------------------------------
    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        """Stream the DocTags of the last user turn's one image, element by element."""
        self._live()
        user = [m for m in messages if m.role == "user"]
        images = user[-1].images if user else ()
        if len(images) != 1:
            raise InvalidInputError(NO_IMAGE if not images else f"one page image per request, got {len(images)}")
        o = GenerateOptions.parse(opts)
        o.refuse("ocr", ["json_schema", "logprobs", "tools"], "it answers DocTags")
        o = o.resolved({"max_tokens": DEFAULT_MAX_ELEMENTS})
        return self._run(images[0], o)

    def _run(self, image: Any, opts: GenerateOptions) -> Iterator[Token]:
        clock = MetricsClock()
        outcome = LoopOutcome()
        self._err = None
        try:
            array = rgb_array(image)
            lines = self.read_lines(array, opts.cancel)
            if lines is None:
                return  # cancelled inside the page: outcome stays "cancelled"
            clock.prefill_done(len(lines))
            height, width = array.shape[:2]
            pieces = ["<doctag>", *(layout.doctags(e, width, height) for e in layout.elements(lines)), "</doctag>"]
            ids = iter([*range(1, len(pieces) + 1), EOS_ID])
            yield from decode_loop(
                ids, lambda i: pieces[i - 1].encode(), opts, eos_ids=(EOS_ID,), clock=clock, outcome=outcome
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
            self._metrics = clock.finish(outcome.finish_reason)

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        """Refused: the ocr model has nothing to say about text alone."""
        raise InvalidInputError(NO_IMAGE)

    def classify(self, prompts: Sequence[str], **opts: Any) -> list[ClassifyResult]:
        raise InvalidInputError(NO_IMAGE)

    def batch_generate(self, prompts: Sequence[str], **opts: Any) -> list[BatchResult]:
        return [BatchResult(error=InvalidInputError(NO_IMAGE), finish_reason="error") for _ in prompts]

    def accepts_images(self) -> bool:
        return True

    def info(self) -> ModelInfo:
        return ModelInfo(self.architecture)

    def metrics(self) -> GenerateMetrics:
        return self._metrics

    def err(self) -> BaseException | None:
        return self._err

    def _live(self) -> Any:
        if self._engine is None:
            raise ModelClosedError("the ocr model was closed")
        return self._engine

    def close(self) -> None:
        self._engine = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

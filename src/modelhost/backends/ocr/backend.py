"""The ocr backend: the document engine's pixel path (PP-OCR detection + recognition, the page orientation vote and
the layout model, all ONNX models inside registry wheels) as a vision model that answers pages with DocTags.

The catalogue's `ocr` is the folder of models inside the `rapidocr` wheel: nothing is downloaded at run time.
RapidOCR would fetch a model it cannot find, so the load names each file explicitly and refuses a folder that lacks
one, instead of letting a download be tried.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelhost.errors import ModelLoadError
from modelhost.inference.capabilities import missing_modules
from modelhost.inference.options import LoadOptions

if TYPE_CHECKING:
    from .model import OcrModel


class OcrBackend:
    """The pixel path (`pixels`, `scanpage`: OCR laid out by the document engine) as a vision model that answers
    page images with DocTags or Markdown."""

    name = "ocr"

    def available(self) -> bool:
        """True when rapidocr and onnxruntime are installed (the `documents` extra; rapid-layout is optional)."""
        try:
            return all(importlib.util.find_spec(m) is not None for m in ("rapidocr", "onnxruntime"))
        except (ImportError, ValueError):
            return False

    def unavailable_reason(self) -> str:
        """The missing packages, and the extra that brings them."""
        missing = missing_modules(("rapidocr", "onnxruntime")) or ["a package that does not import"]
        return f"missing {', '.join(missing)}: pip install 'modelhost[documents]'"

    def accepts(self, path: str) -> bool:
        """True for a folder holding a detection and a recognition ONNX model."""
        from modelhost.backends.ocr.pixels import find_models

        return find_models(Path(path)) is not None

    def load_model(self, path: str, **load_opts: Any) -> OcrModel:
        """Load the folder's models and the layout model; `threads` sets onnxruntime's intra-op threads."""
        from modelhost.backends.ocr.pixels import PixelReader, find_models

        from .model import OcrModel  # here: the model imports the document engine, which `available` need not

        opts = LoadOptions.parse(load_opts)
        folder = Path(path)
        models = find_models(folder)
        if models is None:
            raise ModelLoadError(
                f"{path!r} holds no PP-OCR detection and recognition models (*_det*.onnx, *_rec*.onnx)"
            )
        reader = PixelReader.load(folder, threads=opts.threads)
        return OcrModel(reader, folder, architecture=models["det"].stem.rsplit("_det", 1)[0].lower() or "pp-ocr")

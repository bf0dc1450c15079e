"""The ocr backend: loads a folder of PP-OCR ONNX models (detection, recognition) with RapidOCR on onnxruntime.

The catalogue's `ocr` is the folder of models inside the `rapidocr` wheel (PP-OCRv6 small detection and
recognition): nothing is downloaded at run time. RapidOCR would fetch a model it cannot find, so the load names
each file explicitly and refuses a folder that lacks one, instead of letting a download be tried.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from modelhost.errors import ModelLoadError
from modelhost.inference.options import LoadOptions

from .model import OcrModel

#: A page's long side is shrunk to this for detection (RapidOCR's own default). Recognition reads crops of the page
#: at full resolution, so a 300 DPI page (3300 px) is still read at 300 DPI; detection alone, at full size, would
#: cost ~2.7x the time for boxes that are no better.
DETECTION_MAX_SIDE = 2000


def find_models(folder: Path) -> tuple[Path, Path] | None:
    """The detection and recognition models of a folder (names holding `det` and `rec`), or None."""
    if not folder.is_dir():
        return None
    onnx = sorted(folder.glob("*.onnx"))
    det = [p for p in onnx if "_det" in p.name.lower()]
    rec = [p for p in onnx if "_rec" in p.name.lower()]
    return (det[0], rec[0]) if det and rec else None


class OcrBackend:
    """RapidOCR's PP-OCR models on onnxruntime, as a vision model that answers pages with DocTags."""

    name = "ocr"

    def available(self) -> bool:
        """True when rapidocr and onnxruntime are installed (the `documents` extra)."""
        try:
            return all(importlib.util.find_spec(m) is not None for m in ("rapidocr", "onnxruntime"))
        except (ImportError, ValueError):
            return False

    def accepts(self, path: str) -> bool:
        """True for a folder holding a detection and a recognition ONNX model."""
        return find_models(Path(path)) is not None

    def load_model(self, path: str, **load_opts: Any) -> OcrModel:
        """Load the folder's models; `threads` sets onnxruntime's intra-op threads (default: all cores)."""
        opts = LoadOptions.parse(load_opts)
        folder = Path(path)
        models = find_models(folder)
        if models is None:
            raise ModelLoadError(
                f"{path!r} holds no PP-OCR detection and recognition models (*_det*.onnx, *_rec*.onnx)"
            )
        det, rec = models
        try:
            from rapidocr import RapidOCR
        except ImportError as exc:
            raise ModelLoadError(f"the ocr backend needs rapidocr and onnxruntime ({exc})") from exc
        params: dict[str, Any] = {
            "Global.log_level": "warning",
            "Global.use_cls": False,  # upright pages: the 180-degree line classifier only costs time
            "Global.max_side_len": DETECTION_MAX_SIDE,
            "Global.model_root_dir": str(folder),
            "Det.model_path": str(det),
            "Rec.model_path": str(rec),
        }
        if opts.threads is not None:
            params["EngineConfig.onnxruntime.intra_op_num_threads"] = opts.threads
        try:
            engine = RapidOCR(params=params)
            # Load both sessions now, on the loading thread: a first page should not pay for them.
            engine._load_det_model()
            engine._load_rec_model()
        except Exception as exc:
            raise ModelLoadError(f"ocr models in {path!r} failed to load: {type(exc).__name__}: {exc}") from exc
        return OcrModel(engine, folder, architecture=det.stem.rsplit("_det", 1)[0].lower() or "pp-ocr")

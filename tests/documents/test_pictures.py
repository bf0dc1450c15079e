"""A born-digital page whose picture holds prose only as pixels (a pasted screenshot): the real ocr model reads it
through the host, and its text joins the page after the picture; the page's own text layer stays as it is."""

from __future__ import annotations

import asyncio
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.backends.ocr.model import OcrModel
from modelhost.documents import ConvertSettings, HostReader, convert
from modelhost.host import Host
from modelhost.testing.hostile_pdfs import _FONT, _pdf, _stream, _text_page
from modelhost.testing.pages import cer

from .test_convert import _Unclosable

SCREENSHOT = [
    "The quick brown fox jumps over the lazy dog",
    "while the river runs past the old mill and",
    "the miller counts his sacks of grain again",
]


def _screenshot_pdf(path: Path, pictures: int = 1) -> Path:
    # One letter page: a line of real text, then `pictures` images of a paragraph drawn in pixels only.
    from PIL import Image, ImageDraw

    from modelhost.testing.pages import _font

    image = Image.new("RGB", (1200, 300), "white")
    for i, line in enumerate(SCREENSHOT):
        ImageDraw.Draw(image).text((30, 30 + 85 * i), line, font=_font(44), fill="black")
    data = zlib.compress(np.asarray(image).tobytes())
    draws = b"".join(b"q 360 0 0 90 72 %d cm /Im0 Do Q " % (600 - 100 * i) for i in range(pictures))
    content = b"BT /F1 12 Tf 72 720 Td (A line of the text layer above the screenshot.) Tj ET " + draws
    xobject = _stream(b"/Type /XObject /Subtype /Image /Width 1200 /Height 300 /ColorSpace /DeviceRGB "
                      b"/BitsPerComponent 8 /Filter /FlateDecode", data)  # fmt: skip
    page = _text_page(b"", 4, 5, b"/XObject << /Im0 6 0 R >> ")
    pdf = _pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>", page,
                _stream(b"", content), _FONT, xobject])  # fmt: skip
    path.write_bytes(pdf)
    return path


class _Counting(HostReader):
    def __init__(self, host: Host) -> None:
        super().__init__(host)
        self.reads = 0

    async def read(self, image: Any, *, max_tokens: int = 8192) -> Any:
        self.reads += 1
        return await super().read(image, max_tokens=max_tokens)


def _convert(ocr_model: OcrModel, path: Path, **options: Any) -> tuple[Any, int]:
    async def run() -> tuple[Any, int]:
        host = Host.from_model(_Unclosable(ocr_model), name="ocr")
        await host.start()
        try:
            reader = _Counting(host)
            return await convert(path, reader, ConvertSettings(**options)), reader.reads
        finally:
            await host.aclose()

    return asyncio.run(run())


def test_a_screenshot_of_prose_is_read_into_the_page(ocr_model: OcrModel, tmp_path: Path) -> None:
    conversion, reads = _convert(ocr_model, _screenshot_pdf(tmp_path / "shot.pdf"), pictures=True)
    assert reads == 1 and conversion.pages[0].via == "text layer"
    markdown = conversion.document.export_to_markdown()
    first, image, rest = markdown.partition("<!-- image -->")
    assert first.strip() == "A line of the text layer above the screenshot." and image
    assert cer(" ".join(SCREENSHOT), " ".join(rest.split())) <= 0.05, rest  # its lines, in order, after it
    # by default (or without a reader) the page is its text layer alone, read at text-layer speed
    unread, reads = _convert(ocr_model, tmp_path / "shot.pdf")
    assert reads == 0 and "quick brown fox" not in unread.document.export_to_markdown()


def test_the_pictures_read_on_a_page_are_bounded(ocr_model: OcrModel, tmp_path: Path) -> None:
    from modelhost.documents.pictures import MAX_REGIONS

    many = _screenshot_pdf(tmp_path / "many.pdf", pictures=MAX_REGIONS + 2)
    conversion, reads = _convert(ocr_model, many, pictures=True)
    assert reads == MAX_REGIONS
    assert conversion.document.export_to_markdown().count("quick brown fox") == MAX_REGIONS
    assert len(conversion.document.pictures) == MAX_REGIONS + 2  # the pictures themselves all stay pictures


REDBOOK = Path(__file__).resolve().parents[1] / "corpus" / "documents" / "pdf" / "redp5110_sampled.pdf"
#: Page 3 of the corpus Redbook: its "Highlights" list is a picture, prose only as pixels.
HIGHLIGHT = "Enhance the performance of your database operations"


def test_convert_pictures_reads_the_prose_in_a_corpus_picture(
    ocr_model: OcrModel, monkeypatch: Any, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from modelhost.cli import app
    from modelhost.inference import registry

    # the session's model, not a second load: `convert` loads it the first time a page needs it
    monkeypatch.setattr(registry, "load_model", lambda *args, **kwargs: _Unclosable(ocr_model))
    plain, read = tmp_path / "plain.md", tmp_path / "pictures.md"
    result = CliRunner().invoke(app, ["convert", str(REDBOOK), "--pages", "3", "-o", str(plain)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["convert", str(REDBOOK), "--pages", "3", "--pictures", "-o", str(read)])
    assert result.exit_code == 0, result.output
    assert "1 from the text layer" in result.output
    text, more = plain.read_text(), read.read_text()
    assert HIGHLIGHT not in text
    assert HIGHLIGHT in more and "Take advantage of access to a worldwide source of expertise" in more
    # the page's own text layer is all still there, in its order; the picture's text is added, nothing replaced
    lines = [line for line in text.splitlines() if line]
    assert [line for line in more.splitlines() if line in lines] == lines, (text, more)

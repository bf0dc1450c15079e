"""Running heads and feet on pages read from their pixels: the document-level furniture pass (docengine.furniture)
applies to them as to text-layer pages. Pages drawn with pymupdf, converted with `text_layer=False` (every page
rendered and read by the real `ocr` model, as pdf-spec's pages arrive over the socket)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pymupdf = pytest.importorskip("pymupdf")
pytest.importorskip("rapidocr")

from modelhost.backends.ocr.model import OcrModel  # noqa: E402
from modelhost.backends.ocr.pixels import PixelReader, models_folder  # noqa: E402
from modelhost.documents import ConvertSettings, HostReader, convert  # noqa: E402
from modelhost.host import Host  # noqa: E402

#: The running foot every page carries beside its page number, as the Redbook's pages do.
FOOT = "Row and Column Access Control Support in IBM DB2 for i"
TOPICS = ("permissions", "masks", "auditing")


def book(path: Path) -> Path:
    """Three Letter pages, each a paragraph of its own and, at its foot, its page number and FOOT."""
    doc = pymupdf.open()
    for n, topic in enumerate(TOPICS, 1):
        page = doc.new_page(width=612, height=792)
        body = (
            f"Paragraph{n} about {topic}: the database manager checks the rule on every query that reads the table, "
            "so a user sees only the rows the rule lets through. "
        )
        page.insert_textbox(pymupdf.Rect(72, 90, 540, 300), body * 4, fontsize=10, fontname="helv")
        page.insert_text((63, 762), str(2 * n + 14), fontsize=9, fontname="helv")
        page.insert_text((90, 762), FOOT, fontsize=9, fontname="helv")
    doc.save(path)
    doc.close()
    return path


def test_a_running_foot_read_from_pixels_is_furniture_across_the_document(tmp_path: Path) -> None:
    # The Redbook on pixels kept its feet ("© Copyright IBM Corp. 2014...", "Row and Column Access Control Support in
    # IBM DB2 for i", the page numbers) in the text: the layout model's footer boxes missed their lines, and a page
    # alone cannot tell a running foot from a last line. Without the layout model nothing but the repetition across
    # pages tells them, which is the evidence the text path's furniture pass reads.
    model = OcrModel(PixelReader.load(layout=False), models_folder(), architecture="pp-ocr")

    async def main() -> str:
        host = Host.from_model(model, name="ocr")
        await host.start()
        try:
            settings = ConvertSettings(dpi=150, text_layer=False)
            conversion = await convert(book(tmp_path / "book.pdf"), HostReader(host), settings)
        finally:
            await host.aclose()
        assert all("<page_footer>" in p.doctags for p in conversion.pages), [p.doctags for p in conversion.pages]
        return conversion.render("md")

    markdown = asyncio.run(main())
    assert all(f"Paragraph{n} about {topic}" in markdown for n, topic in enumerate(TOPICS, 1)), markdown
    assert FOOT not in markdown and "\n16\n" not in markdown, markdown

"""Session fixtures of the documents tests: the real ocr model, loaded once, and pages rendered once.

Pages are small (half a letter page) at 150 DPI so each OCR pass costs ~1-3 s on 2 cores; results the model gives
for a page are cached per session, since the model is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rapidocr")
pytest.importorskip("pypdfium2")
pytest.importorskip("docling_core")

from modelhost.backends.ocr.model import OcrModel
from modelhost.inference import registry
from modelhost.testing.pages import Page, render_page, write_pdf


@pytest.fixture(scope="session")
def ocr_model() -> Iterator[OcrModel]:
    model = registry.load_model("ocr")
    assert isinstance(model, OcrModel)
    yield model
    model.close()


@pytest.fixture(scope="session")
def page() -> Page:
    return render_page(1, 150)


@pytest.fixture(scope="session")
def pages() -> list[Page]:
    return [render_page(n, 150) for n in (1, 2)]


@pytest.fixture(scope="session")
def page_doctags(ocr_model: OcrModel, page: Page) -> str:
    return ocr_model.page_doctags(page.image)


@pytest.fixture(scope="session")
def docs(tmp_path_factory: pytest.TempPathFactory, page: Page, pages: list[Page]) -> dict[str, Any]:
    """Files on disk: a PNG page, an image-only 2-page PDF, a broken PDF, an empty file, a PDF of no pages."""
    import pypdfium2 as pdfium

    folder = tmp_path_factory.mktemp("docs")
    png = folder / "page.png"
    page.image.save(png)
    pdf = write_pdf(pages, folder / "sample.pdf")
    broken = folder / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage")
    empty = folder / "empty.pdf"
    empty.write_bytes(b"")
    no_pages = folder / "no-pages.pdf"
    pdfium.PdfDocument.new().save(str(no_pages))
    return {"png": png, "pdf": pdf, "broken": broken, "empty": empty, "no_pages": no_pages, "folder": folder}


def markdown_text(markdown: str) -> str:
    """Markdown reduced to its words: heading marks, table rules and pipes removed."""
    words = []
    for line in markdown.splitlines():
        line = line.strip()
        if set(line) <= set("|-: "):
            continue
        words.append(line.lstrip("#").replace("|", " "))
    return " ".join(" ".join(words).split())


@pytest.fixture
def md_words() -> Any:
    return markdown_text


@pytest.fixture
def pdf_path(docs: dict[str, Any]) -> Path:
    return Path(docs["pdf"])

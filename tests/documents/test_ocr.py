"""The `ocr` model on a real page rendered here: its DocTags, read back by docling-core, match the known text."""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import pytest

from modelhost.backends.ocr.model import OcrModel
from modelhost.documents import assemble
from modelhost.errors import InvalidInputError
from modelhost.inference import accepts_images
from modelhost.inference.types import Message
from modelhost.testing.pages import Page, cer


def test_catalogue_and_backend(ocr_model: OcrModel) -> None:
    from modelhost.inference import catalogue, registry

    assert "ocr" in registry.names()
    folder = catalogue.resolve("ocr")
    assert folder.endswith("models")  # inside the rapidocr wheel: nothing downloaded
    assert registry.get("ocr").accepts(folder)  # type: ignore[attr-defined]
    assert accepts_images(ocr_model)
    assert ocr_model.info().architecture.startswith("pp-ocr")


def test_page_reads_back_with_docling(page: Page, page_doctags: str, md_words: Any) -> None:
    assert page_doctags.startswith("<doctag><section_header_level_1><loc_")
    assert page_doctags.endswith("</doctag>")
    doc = assemble.build("page", [page_doctags], [page.image])
    markdown = doc.export_to_markdown()
    assert cer(page.known_text, md_words(markdown)) <= 0.02, markdown
    headers = [(t.text, t.level) for t in doc.texts if type(t).__name__ == "SectionHeaderItem"]
    assert headers == [(page.heading, 1)]
    assert len(doc.tables) == 1
    grid = [[cell.text for cell in row] for row in doc.tables[0].data.grid]
    assert grid == [list(row) for row in page.table]
    # JSON loads back with docling-core, page size intact and no page image inside
    from docling_core.types.doc.document import DoclingDocument

    text = assemble.render(doc, "json")
    again = DoclingDocument.model_validate_json(text)
    assert again.export_to_markdown() == markdown
    assert json.loads(text)["pages"]["1"]["size"] == {"width": page.image.width, "height": page.image.height}
    assert "image" not in json.loads(text)["pages"]["1"] or json.loads(text)["pages"]["1"]["image"] is None


def test_streams_elements_and_keeps_a_cut_page(ocr_model: OcrModel, page: Page, page_doctags: str) -> None:
    tokens = list(ocr_model.chat([Message("user", "Convert this page to docling.", (np.asarray(page.image),))]))
    assert tokens[0].text == "<doctag>"
    assert "".join(t.text for t in tokens) == page_doctags
    assert ocr_model.metrics().finish_reason == "stop"
    cut = list(ocr_model.chat([Message("user", "", (page.image,))], max_tokens=2))
    assert len(cut) == 2 and ocr_model.metrics().finish_reason == "length"
    assert page_doctags.startswith("".join(t.text for t in cut))


def test_refuses_a_request_without_an_image(ocr_model: OcrModel) -> None:
    with pytest.raises(InvalidInputError, match="reads page images"):
        ocr_model.chat([Message("user", "Convert this page to docling.")])
    with pytest.raises(InvalidInputError, match="reads page images"):
        ocr_model.generate("hello")
    with pytest.raises(InvalidInputError, match="one page image per request"):
        ocr_model.chat([Message("user", "", (b"x", b"y"))])
    with pytest.raises(InvalidInputError, match="not a readable PNG"):
        list(ocr_model.chat([Message("user", "", (b"not an image",))]))


def test_cancel_set_before_recognition_stops_the_page(ocr_model: OcrModel, page: Page) -> None:
    cancel = threading.Event()
    cancel.set()
    assert list(ocr_model.chat([Message("user", "", (page.image,))], cancel=cancel)) == []
    assert ocr_model.metrics().finish_reason == "cancelled"

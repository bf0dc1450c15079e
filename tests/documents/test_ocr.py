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


def test_each_element_streams_before_the_rest_of_the_page_is_recognised(ocr_model: OcrModel, page: Page) -> None:
    reader = ocr_model.reader
    start = reader.recognised_lines
    seen = []  # lines recognised when each token arrived
    for token in ocr_model.chat([Message("user", "Convert this page to docling.", (page.image,))]):
        seen.append((token.text, reader.recognised_lines - start))
    total = reader.recognised_lines - start
    assert seen[0] == ("<doctag>", 0)  # the page's first delta comes before any recognition
    first_element = seen[1]
    assert first_element[0].startswith("<section_header_level_1>") and first_element[1] == 1 < total
    assert [calls for _, calls in seen] == sorted(calls for _, calls in seen)  # recognised as it is streamed


def test_max_tokens_bounds_the_work(ocr_model: OcrModel, page: Page) -> None:
    reader = ocr_model.reader
    start = reader.recognised_lines
    list(ocr_model.chat([Message("user", "", (page.image,))]))
    whole = reader.recognised_lines - start
    start = reader.recognised_lines
    cut = list(ocr_model.chat([Message("user", "", (page.image,))], max_tokens=2))
    assert len(cut) == 2
    assert reader.recognised_lines - start == 1 < whole  # the heading's line recognised, not the page's lines
    start = reader.recognised_lines
    assert len(list(ocr_model.chat([Message("user", "", (page.image,))], max_tokens=1))) == 1
    assert reader.recognised_lines == start  # `<doctag>` alone needs no recognition at all


def test_markdown_when_the_prompt_asks_for_it(ocr_model: OcrModel, page: Page, md_words: Any) -> None:
    # docling's VLM API pipeline's own prompt (vlm_model_specs, response format MARKDOWN)
    prompt = "Convert this page to markdown. Do not miss any text and only output the bare markdown!"
    tokens = list(ocr_model.chat([Message("user", prompt, (page.image,))]))
    markdown = "".join(t.text for t in tokens)
    assert "<doctag>" not in markdown and "<loc_" not in markdown
    assert markdown.startswith(f"## {page.heading}\n\n")
    assert "| Region " in markdown and "| North " in markdown  # the table is a Markdown table
    assert cer(page.known_text, md_words(markdown)) <= 0.02, markdown
    assert len(tokens) > 3  # streamed block by block, not as one piece


def test_angle_brackets_go_out_literally(ocr_model: OcrModel) -> None:
    from PIL import Image, ImageDraw

    from modelhost.testing.pages import _font

    img = Image.new("RGB", (1275, 300), "white")
    ImageDraw.Draw(img).text((100, 100), "if x < y and z > w then stop", font=_font(28), fill="black")
    doctags = ocr_model.page_doctags(img)
    assert ">if x < y and z > w then stop</" in doctags, doctags
    assert "&lt;" not in doctags and "&gt;" not in doctags


def test_refuses_a_request_without_an_image(ocr_model: OcrModel) -> None:
    with pytest.raises(InvalidInputError, match="reads page images"):
        ocr_model.chat([Message("user", "Convert this page to docling.")])
    with pytest.raises(InvalidInputError, match="reads page images"):
        ocr_model.generate("hello")
    with pytest.raises(InvalidInputError, match="one page image per request"):
        ocr_model.chat([Message("user", "", (b"x", b"y"))])
    with pytest.raises(InvalidInputError, match="not a readable PNG"):
        ocr_model.chat([Message("user", "", (b"not an image",))])  # refused before any token
    with pytest.raises(InvalidInputError, match="over"):
        ocr_model.chat([Message("user", "", (np.zeros((1, 70000, 3), np.uint8),))])


def test_cancel_set_before_recognition_stops_the_page(ocr_model: OcrModel, page: Page) -> None:
    cancel = threading.Event()
    cancel.set()
    assert list(ocr_model.chat([Message("user", "", (page.image,))], cancel=cancel)) == []
    assert ocr_model.metrics().finish_reason == "cancelled"


def _page_request(image: Any, request_id: str, max_tokens: int | None = None) -> Any:
    # What pdf-spec's `ocr/ipc` client sends: one user turn of the page's raw RGB and its prompt.
    from modelhost.wire import codec

    return codec.Request(
        id=request_id,
        messages=(
            codec.Message(
                codec.Role.USER, (codec.ImageBlock(request_id), codec.TextBlock("Convert this page to docling."))
            ),
        ),
        attachments=(codec.image_attachment(request_id, np.asarray(image)),),
        max_tokens=max_tokens,
        temperature=0.0,
    )


def test_over_the_socket_each_element_arrives_before_the_page_is_done(
    ocr_model: OcrModel, page: Page, page_doctags: str, tmp_path: Any
) -> None:
    # A real wire server and client in this process. The page's second region is not recognised until the client
    # has received the first element: a server that sent the page only once it was done would leave the client
    # waiting for a first element that never comes, and this test would fail (the gate gives up after minutes).
    from tests.wire._support import Served

    from modelhost.testing.waiting import STATE_WAIT_SECONDS
    from modelhost.wire import codec
    from modelhost.wire.client import Client

    from .test_convert import _Unclosable

    reader = ocr_model.reader
    recognise = reader.recognise
    first_seen = threading.Event()
    gated: list[bool] = []  # per recognition after the first: whether the client had the first element by then

    calls = reader.recognition_calls

    def gated_recognise(detection: Any, lines: Any) -> Any:
        if reader.recognition_calls > calls and not gated:
            gated.append(first_seen.wait(STATE_WAIT_SECONDS))
        return recognise(detection, lines)

    served = Served(_Unclosable(ocr_model), tmp_path / "inferd.sock")  # the session's model outlives this host
    reader.recognise = gated_recognise  # type: ignore[method-assign]
    try:
        deltas: list[str] = []
        with Client(served.path, timeout=STATE_WAIT_SECONDS) as client:
            for event in client.request(_page_request(page.image, "page-1")):
                if isinstance(event, codec.FrameDelta) and event.text:
                    deltas.append(event.text)
                    if event.text.startswith("<section_header_level_1>"):
                        first_seen.set()
                elif isinstance(event, codec.Done):
                    assert event.stop_reason == codec.StopReason.END_TURN
            assert gated == [True], gated  # the second region waited for the first element, and it came
            assert deltas[0] == "<doctag>" and deltas[1].startswith("<section_header_level_1>")
            assert "".join(deltas) == page_doctags and len(deltas) > 3

            # max_tokens bounds the work over the wire too: 2 elements cost the page's detection and one region
            start = reader.recognised_lines
            cut = list(client.request(_page_request(page.image, "page-2", max_tokens=2)))
            done = cut[-1]
            assert isinstance(done, codec.Done) and done.stop_reason == codec.StopReason.MAX_TOKENS
            assert [e.text for e in cut if isinstance(e, codec.FrameDelta) and e.text] == deltas[:2]
            assert reader.recognised_lines - start == 1
    finally:
        reader.recognise = recognise  # type: ignore[method-assign]
        served.close()

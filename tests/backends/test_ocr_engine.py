"""The ocr model as an engine: one slot over its element stream keeps the engine contract whole (the engine
conformance kit on the real pixel path), and the host drives it like any other engine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("rapidocr")
pytest.importorskip("pypdfium2")

from modelhost.backends.ocr.model import OcrModel
from modelhost.errors import InvalidInputError
from modelhost.inference import engine_conformance, registry
from modelhost.inference.adapters import engine_of
from modelhost.inference.engine import EngineRequest
from modelhost.inference.engine_conformance import EngineKit, drive
from modelhost.inference.types import Message
from modelhost.testing.pages import render_page


@pytest.fixture(scope="module")
def ocr() -> Iterator[OcrModel]:
    model = registry.load_model("ocr")
    assert isinstance(model, OcrModel)
    yield model
    model.close()


@pytest.fixture(scope="module")
def page_image() -> Any:
    return render_page(1, 100).image


def page_request(image: Any, **opts: Any) -> EngineRequest:
    return EngineRequest(messages=(Message("user", "Convert this page to docling.", (image,)),), options=opts)


@pytest.mark.parametrize("check", engine_conformance.CHECKS, ids=lambda c: c.__name__)
def test_engine_conformance(ocr: OcrModel, page_image: Any, check: Any) -> None:
    requests = [page_request(page_image, max_tokens=3), page_request(page_image, max_tokens=2)]
    check(EngineKit(ocr.engine(), requests))


def test_the_engine_streams_the_page_the_model_streams(ocr: OcrModel, page_image: Any) -> None:
    assert engine_of(ocr) is ocr.engine() and ocr.engine().slots == 1
    (run,) = drive(ocr.engine(), [page_request(page_image, max_tokens=4)])
    direct = [t.text for t in ocr.chat([Message("user", "Convert this page to docling.", (page_image,))], max_tokens=4)]
    assert [t.text for t in run.tokens] == direct and run.text.startswith("<doctag>")
    with pytest.raises(InvalidInputError, match="image"):
        ocr.engine().admit(EngineRequest(messages=(Message("user", "no page"),)))
    assert ocr.engine().free_slots() == 1

"""The engine's orchestration on real PDFs: text layer first, pixels to a reader only where the layer is unusable,
pages yielded in order as they are known, unread pages reported and the others kept."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelhost.docengine.sandbox import Sandbox
from modelhost.documents.engine import BLANK, EMPTY_PAGE, TEXT_LAYER, DocumentEngine, PageResult, Unread
from modelhost.documents.readers import PageAnswer
from modelhost.documents.settings import ConvertSettings
from modelhost.testing import hostile_pdfs
from modelhost.testing.pages import render_page, write_pdf

from .conftest import corpus


@pytest.fixture(scope="module")
def engine() -> Iterator[DocumentEngine]:
    with Sandbox(2) as box:
        yield DocumentEngine(box)


class RecordingReader:
    """A reader that answers a fixed page and records the images it was given: what the engine sent to a model is
    the point here (the real models are tested through the doors)."""

    name = "recording"

    def __init__(self) -> None:
        self.sizes: list[tuple[int, int]] = []

    async def read(self, image: Any, *, max_tokens: int) -> PageAnswer:
        # a rendered PDF page reaches a model as an HxWx3 uint8 array (sharing the page image's memory), which every
        # backend reads without copying it
        assert image.dtype == "uint8" and image.shape[2] == 3, (type(image), getattr(image, "shape", None))
        self.sizes.append((image.shape[1], image.shape[0]))
        return PageAnswer("<doctag><text><loc_0><loc_0><loc_500><loc_50>read from pixels</text></doctag>", "stop")


def collect(
    engine: DocumentEngine,
    path: Path,
    numbers: list[int] | None = None,
    *,
    reader: RecordingReader | None,
    **options: Any,
) -> list[Any]:
    """The pages `engine` yields for `numbers` of `path` (every page by default), read with ConvertSettings of
    `options` at 72 DPI."""
    settings = ConvertSettings(dpi=72, max_tokens=64, **options)

    async def run() -> list[Any]:
        source = engine.open(path)
        try:
            wanted = numbers or list(range(1, source.count + 1))
            return [page async for page in engine.pages(source, wanted, reader=reader, settings=settings)]
        finally:
            source.close()

    return asyncio.run(run())


def test_born_digital_pages_come_from_their_text_layer_and_no_model_is_asked(engine: DocumentEngine) -> None:
    reader = RecordingReader()
    pages = collect(engine, corpus("pdf/multi_page.pdf"), reader=reader)
    assert [p.number for p in pages] == [1, 2, 3, 4, 5]
    assert all(isinstance(p, PageResult) and p.via == TEXT_LAYER and p.layout is not None for p in pages)
    assert reader.sizes == []
    first = " ".join(b.text for b in pages[0].layout.blocks)
    assert "Evolution" in first and "Word Processor" in first.replace("\n", " ")
    assert pages[0].doctags.startswith("<doctag>") and "Evolution" in pages[0].doctags


def test_a_page_without_a_text_layer_goes_to_the_reader_and_text_layer_off_sends_every_page(
    engine: DocumentEngine, tmp_path: Path
) -> None:
    scan = write_pdf([render_page(1, 72)], tmp_path / "scan.pdf", dpi=72)
    reader = RecordingReader()
    [page] = collect(engine, scan, reader=reader)
    assert isinstance(page, PageResult) and page.via == "recording" and page.layout is None
    assert page.image is not None and reader.sizes == [page.size] == [(612, 396)]
    assert "read from pixels" in page.doctags
    born = collect(engine, corpus("pdf/multi_page.pdf"), [2, 1], reader=reader, text_layer=False)
    assert [p.number for p in born] == [2, 1] and {p.via for p in born} == {"recording"}
    # and without a reader, such a page is reported, not dropped silently; so it is when the settings say no pixels
    # are read (a worker job's `pixels: false`, docling's `do_ocr: false`), whatever reader is at hand
    [unread] = collect(engine, scan, reader=None)
    assert unread == Unread(1, "has no usable text layer, and no model reads its pixels")
    reads = len(reader.sizes)
    assert collect(engine, scan, reader=reader, pixels=False) == [unread] and len(reader.sizes) == reads


def with_blank_page(pdf: bytes, path: Path) -> Path:
    """`pdf` with an empty page (nothing drawn on it, as between a book's chapters) added after its first, at `path`."""
    import pypdfium2

    doc = pypdfium2.PdfDocument(pdf)
    try:
        doc.new_page(612, 792)
        doc.save(str(path))
    finally:
        doc.close()
    return path


def test_a_blank_page_is_an_empty_page_and_no_model_is_asked(engine: DocumentEngine, tmp_path: Path) -> None:
    # A page with nothing on it has no usable text layer, but its pixels hold nothing to read either: no reader is
    # asked (a `convert` of such a document starts no model), and without a reader it is still an empty page, not
    # an unread one. A scanned page beside it still goes to the reader.
    pdf = with_blank_page(hostile_pdfs.text_pdf("Before the blank page"), tmp_path / "blank.pdf")
    reader = RecordingReader()
    text, empty = collect(engine, pdf, reader=reader)
    assert isinstance(text, PageResult) and text.via == TEXT_LAYER and "Before the blank page" in text.doctags
    assert isinstance(empty, PageResult) and empty.via == BLANK and empty.doctags == EMPTY_PAGE
    assert empty.size == (612, 792) and reader.sizes == []
    [alone] = collect(engine, pdf, [2], reader=None)
    assert isinstance(alone, PageResult) and (alone.via, alone.doctags, alone.size) == (BLANK, EMPTY_PAGE, (612, 792))
    scan = write_pdf([render_page(1, 72)], tmp_path / "scan.pdf", dpi=72)
    [page] = collect(engine, scan, reader=reader, text_layer=False)
    assert page.via == "recording" and reader.sizes == [page.size]


def test_unread_pages_are_reported_and_a_long_run_of_them_ends_the_document(
    engine: DocumentEngine, tmp_path: Path
) -> None:
    declared = hostile_pdfs.write(tmp_path / "declared.pdf", hostile_pdfs.declared_pages(10_000, "Only page"))
    pages = collect(engine, declared, reader=None)
    assert len(pages) == 10_000 and isinstance(pages[0], PageResult) and "Only page" in pages[0].doctags
    tried = [p for p in pages[1:] if p.reason.startswith("cannot be loaded")]
    assert [p.number for p in tried] == list(range(2, 52))
    assert all(p.reason.startswith("not tried") for p in pages[51:])

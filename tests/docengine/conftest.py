"""Corpus paths and open documents for the engine's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pypdfium2 as pdfium
import pytest

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "documents"


def corpus(relative: str) -> Path:
    """A file of tests/corpus/documents."""
    return CORPUS / relative


@pytest.fixture
def open_pdf() -> Iterator[object]:
    """Opens corpus PDFs by relative path; closes them after the test."""
    opened: list[pdfium.PdfDocument] = []

    def _open(relative: str) -> pdfium.PdfDocument:
        doc = pdfium.PdfDocument(str(corpus(relative)))
        opened.append(doc)
        return doc

    yield _open
    for doc in opened:
        doc.close()

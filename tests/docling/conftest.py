"""Fixtures of the docling door's tests: one real `serve --http --docling` over the offline `ocr` model for the
session, and `modelhost convert`'s own output of the corpus files the tests send it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("docling.service_client", reason="docling-client (the test extra) is not installed")
pytest.importorskip("rapidocr")
pytest.importorskip("docling_core")

from docling_support import CORPUS, Served, serve_docling

if not CORPUS.is_dir():
    pytest.skip(f"the shared document corpus is not at {CORPUS}", allow_module_level=True)


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The session's server: no API key, no URL sources."""
    server = serve_docling(tmp_path_factory.mktemp("docling-state"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where `modelhost convert`'s outputs go."""
    return tmp_path_factory.mktemp("converted")

"""The benchmark's modelhost adapters still reach modelhost's conversion (a changed entry point must fail here, not
silently score an empty output)."""

from __future__ import annotations

import pytest

import doccorpus
import docmetrics
import doctools


@pytest.mark.slow
@pytest.mark.parametrize("tool", [doctools.Modelhost, doctools.Docengine], ids=lambda t: t.name)
def test_a_modelhost_adapter_converts_a_corpus_page(tool: type[doctools.Tool]) -> None:
    entry = next(e for e in doccorpus.entries() if e.name == "pdfspec/paragraphs")
    converter = tool()
    converter.start()
    try:
        markdown = converter.convert(entry.pdf)
    finally:
        converter.close()
    assert docmetrics.score(markdown, entry.reference()).word_recall > 0.9, markdown

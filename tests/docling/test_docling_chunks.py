"""Chunking for RAG through docling's own client: /v1/chunk/hierarchical gives docling-core's HierarchicalChunker
over the same DoclingDocument `modelhost convert` writes; the hybrid chunker (a tokenizer from a hub) is refused."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest
from docling.datamodel.service.responses import ChunkDocumentResponse
from docling.service_client import ChunkerKind, DoclingServiceClient, ServiceError
from docling_core.transforms.chunker.hierarchical_chunker import HierarchicalChunker
from docling_core.types.doc.document import DoclingDocument
from docling_support import MULTI_PAGE, Served, modelhost_convert

from modelhost.testing.waiting import STATE_WAIT_SECONDS


def test_the_client_chunks_a_pdf_as_docling_core_chunks_its_document(served: Served, converted: Path) -> None:
    document = DoclingDocument.model_validate(json.loads(modelhost_convert(MULTI_PAGE, "json", tmp=converted)))
    chunker = HierarchicalChunker()
    expected = [chunker.contextualize(chunk) for chunk in chunker.chunk(document)]
    with DoclingServiceClient(served.url, job_timeout=STATE_WAIT_SECONDS) as docling:
        answer = docling.chunk(MULTI_PAGE, chunker=ChunkerKind.HIERARCHICAL)
    assert [c.text for c in answer.chunks] == expected and len(expected) > 3
    assert [c.chunk_index for c in answer.chunks] == list(range(len(expected)))
    assert all(c.filename == "multi_page.pdf" and c.doc_items for c in answer.chunks)
    assert answer.chunks[0].page_numbers == [1] and answer.chunks[-1].page_numbers == [5]
    assert any(c.headings for c in answer.chunks)
    [doc] = answer.documents
    assert doc.status == "success" and doc.document.md_content is None  # include_converted_doc not asked

    with pytest.raises(ServiceError) as refused:
        DoclingServiceClient(served.url).chunk(MULTI_PAGE, chunker=ChunkerKind.HYBRID)
    assert refused.value.status_code == 422 and "tokenizer" in str(refused.value.detail)


def test_a_sync_chunk_of_a_source_includes_the_document_when_asked(served: Served, converted: Path) -> None:
    source = {"kind": "file", "filename": "m.pdf", "base64_string": base64.b64encode(MULTI_PAGE.read_bytes()).decode()}
    body = {
        "convert_options": {"to_formats": ["md"]},
        "chunking_options": {"include_raw_text": True},
        "sources": [source],
        "include_converted_doc": True,
    }
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        answer = http.post("/v1/chunk/hierarchical/source", json=body)
    assert answer.status_code == 200, answer.text
    chunks = ChunkDocumentResponse.model_validate_json(answer.text)
    assert chunks.chunks and all(c.raw_text for c in chunks.chunks)
    assert chunks.documents[0].document.md_content == modelhost_convert(MULTI_PAGE, "md", tmp=converted)

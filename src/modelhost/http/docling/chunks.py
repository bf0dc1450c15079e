"""Chunking a converted document for RAG, as docling-serve's /v1/chunk routes do: docling-core's HierarchicalChunker
over the task's DoclingDocument, one chunk per document item group under its headings.

Only the hierarchical chunker: docling's hybrid chunker sizes chunks with a Hugging Face tokenizer that it downloads
by name (`tokenizer`, default sentence-transformers/all-MiniLM-L6-v2), and a machine that reaches no hub cannot
run it, so the hybrid routes are refused (422) with that reason rather than chunked another way.
"""

from __future__ import annotations

from typing import Any, Final

#: The chunkers this door runs.
CHUNKERS: Final = ("hierarchical",)
HYBRID_REFUSED: Final = (
    "the hybrid chunker sizes chunks with a Hugging Face tokenizer it downloads by name, which this server does not; "
    "use /v1/chunk/hierarchical"
)


def chunking_missing() -> str:
    """Why this installation cannot chunk ("" when it can): docling-core's chunker package imports tree-sitter and
    semchunk (its `chunking` extra), looked for without importing them (an import costs seconds)."""
    import importlib.util

    missing = [name for name in ("semchunk", "tree_sitter") if importlib.util.find_spec(name) is None]
    if not missing:
        return ""
    need = ", ".join(missing)
    return f"chunking needs docling-core's chunking extra ({need} missing): pip install 'docling-core[chunking]'"


def chunk_document(json_text: str, filename: str, options: dict[str, Any]) -> list[dict[str, Any]]:
    """The ChunkedDocumentResultItems of a DoclingDocument's JSON. Imports docling-core's chunker (seconds, once
    per process): call it off the event loop."""
    from docling_core.transforms.chunker.hierarchical_chunker import HierarchicalChunker
    from docling_core.types.doc.document import DoclingDocument

    doc = DoclingDocument.model_validate_json(json_text)
    chunker = HierarchicalChunker()
    raw_text = bool(options.get("include_raw_text"))
    items = []
    for index, chunk in enumerate(chunker.chunk(doc)):
        meta: Any = chunk.meta
        pages = sorted({prov.page_no for item in meta.doc_items for prov in getattr(item, "prov", [])})
        items.append(
            {
                "filename": filename,
                "chunk_index": index,
                "text": chunker.contextualize(chunk),
                "raw_text": chunk.text if raw_text else None,
                "num_tokens": None,
                "headings": list(meta.headings) if meta.headings else None,
                "captions": list(meta.captions) if getattr(meta, "captions", None) else None,
                "doc_items": [item.self_ref for item in meta.doc_items],
                "page_numbers": pages or None,
                "metadata": None,
            }
        )
    return items


__all__ = ["CHUNKERS", "HYBRID_REFUSED", "chunk_document", "chunking_missing"]

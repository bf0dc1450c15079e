"""How much memory a GGUF model will hold once loaded, known before loading it: the budget of a model set
(`serve --max-memory`) needs it to decide what fits, and the file's size alone misses the KV cache, which for a
batching host is often larger than the weights (a 4 GB 7B model at 4 slots x 4096 tokens holds 8 GB of f16 KV).

The estimate is the file (llama.cpp maps it whole), the projector file when there is one, and the KV cache the load
sets up: `parallel` slots of `context_length` cells each, the engine's one context (a model has no other: one
slot when `parallel` is 1). Compute buffers (tens of MB) are left out; the embedding context (made at the first
embedding request) too.

The header is read by gguf.py, the backend's one GGUF header reader.
"""

from __future__ import annotations

import os
from typing import Any

from modelhost.errors import ModelLoadError
from modelhost.inference.gguf_header import read_header

__all__ = ["estimate", "kv_bytes_per_cell", "read_header"]

#: Bytes per KV cell per layer and head dimension: llama.cpp's default K and V cache type is f16.
KV_BYTES = 2


def kv_bytes_per_cell(header: dict[str, Any], arch: str) -> int:
    """Bytes one KV cell (one token of one sequence) takes across all layers, from the header's attention shape."""
    layers = int(header.get(f"{arch}.block_count", 0))
    heads = int(header.get(f"{arch}.attention.head_count", 0))
    kv_heads = int(header.get(f"{arch}.attention.head_count_kv", heads) or heads)
    width = int(header.get(f"{arch}.embedding_length", 0))
    head_dim = width // heads if heads else 0
    key = int(header.get(f"{arch}.attention.key_length", head_dim))
    value = int(header.get(f"{arch}.attention.value_length", head_dim))
    return layers * kv_heads * (key + value) * KV_BYTES


def estimate(path: str, *, context: int | None, default_context: int, parallel: int, mmproj: str | None = None) -> int:
    """Bytes the loaded model will hold (see the module doc). `context` is the caller's context_length, else the
    model's own trained length when shorter than `default_context`, as the backend chooses it at load."""
    # One pass over the header: the keys are named after the architecture, which the same header names.
    header = read_header(path)
    arch = header.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelLoadError(f"{path}: the GGUF header names no architecture")
    trained = int(header.get(f"{arch}.context_length", 0))
    cells_per_slot = context or (trained if 0 < trained < default_context else default_context)
    slots = max(1, parallel)  # the engine's one context: `parallel` slots
    size = os.path.getsize(path) + (os.path.getsize(mmproj) if mmproj else 0)
    return size + slots * cells_per_slot * kv_bytes_per_cell(header, arch)

"""What a GGUF model will hold once loaded, known before loading it (the memory budget of `serve --max-memory`): the
header reader, the KV arithmetic against llama.cpp's own figure, hostile headers, and the budget using it."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from modelhost.backends.llama_cpp import memory
from modelhost.backends.llama_cpp.backend import DEFAULT_CONTEXT_LENGTH, DEFAULT_PARALLEL
from modelhost.errors import ModelLoadError
from modelhost.inference import catalogue, registry
from modelhost.serve import ServeConfig, model_specs

MIB = 2**20


def test_the_header_gives_the_attention_shape(tiny_llama_gguf: Path) -> None:
    header = memory.read_header(tiny_llama_gguf)
    assert header["general.architecture"] == "llama"
    assert header["llama.block_count"] == 2 and header["llama.embedding_length"] == 64


def test_smollm2s_kv_cell_is_what_llamacpp_allocates() -> None:
    # llama.cpp logs "KV buffer size = 90.00 MiB" for SmolLM2-135M at 4096 cells (f16 K and V): 30 layers x 3 KV
    # heads x (64 + 64) x 2 bytes per cell.
    path = catalogue.resolve("default")
    header = memory.read_header(path)
    assert memory.kv_bytes_per_cell(header, "llama") * 4096 == 90 * MIB


def test_the_estimate_counts_every_slot_of_the_one_context() -> None:
    path = catalogue.resolve("default")
    size = Path(path).stat().st_size
    cell = 90 * MIB // 4096
    batching = registry.memory_estimate("default", "llama_cpp", parallel=4)
    assert batching == size + DEFAULT_PARALLEL * DEFAULT_CONTEXT_LENGTH * cell
    alone = registry.memory_estimate("default", "llama_cpp", parallel=1, context_length=2048)
    assert alone == size + 2048 * cell
    # `serve` counts the estimate, not the file: 4 slots of SmolLM2's KV outweigh its 90 MB of weights.
    specs, _ = model_specs(ServeConfig(models=("default",), parallel=4))
    assert specs[0].size == batching > 4 * size


@pytest.mark.parametrize(
    "content",
    [
        b"NOPE" + bytes(20),  # not a GGUF
        b"GGUF" + struct.pack("<IQQ", 3, 0, 1),  # a key promised, none there
        b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 40),  # a 1 TB key
        b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 8, 1 << 40),
        b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 40),  # a trillion keys
        b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<I", 99),  # unknown type
    ],
    ids=["magic", "truncated", "huge-key", "huge-array", "many-keys", "bad-type"],
)
def test_a_damaged_or_hostile_header_is_a_clear_error_not_an_allocation(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    with pytest.raises(ModelLoadError):
        memory.read_header(bad, {"general.architecture"})


def test_serve_falls_back_to_the_file_size_when_the_header_cannot_be_read(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1))
    specs, _ = model_specs(ServeConfig(models=(str(bad),), parallel=4))
    assert specs[0].size == bad.stat().st_size

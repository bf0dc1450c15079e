"""What a transformers model will hold once loaded, known before loading it (the memory budget of `serve
--max-memory`): the weights against what the loaded model really holds, the KV arithmetic against the config and a
real cache, the dtype the load gives the weights, GGUFs, damaged checkpoints, and the budget using it."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

import torch
from safetensors.torch import load_file, save_file
from transformers import DynamicCache, MistralConfig

from modelhost.backends.transformers import TransformersBackend, memory
from modelhost.backends.transformers.model import DEFAULT_PARALLEL, TransformersModel
from modelhost.errors import ModelLoadError
from modelhost.host.models import resident_size
from modelhost.inference import registry
from modelhost.serve import ServeConfig, model_specs

#: Every estimate here is for the CPU (gpu_layers=0), where the load gives the weights fp32 unless told otherwise;
#: on a machine with a GPU the default would be the checkpoint's own dtype instead.
CPU = {"gpu_layers": 0}


@pytest.fixture(scope="module")
def loaded(tiny_llama_dir: Path) -> Iterator[TransformersModel]:
    with TransformersBackend().load_model(str(tiny_llama_dir), threads=1, **CPU) as m:
        assert isinstance(m, TransformersModel)
        yield m


def held_weights(m: TransformersModel) -> int:
    """Bytes of the loaded model's parameters (tied ones once, as `parameters()` yields them)."""
    return sum(p.numel() * p.element_size() for p in m.checkpoint.model.parameters())


def kv_per_token(folder: Path, element_bytes: int) -> int:
    """One token's K and V across all layers, by hand from config.json."""
    c = json.loads((folder / "config.json").read_text())
    kv_heads = c.get("num_key_value_heads") or c["num_attention_heads"]
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    return c["num_hidden_layers"] * 2 * kv_heads * head_dim * element_bytes


def test_the_estimate_is_the_loaded_weights_plus_the_configs_kv_cache(
    tiny_llama_dir: Path, loaded: TransformersModel
) -> None:
    backend = TransformersBackend()
    cell = kv_per_token(tiny_llama_dir, 4)  # fp32 on the CPU
    trained = json.loads((tiny_llama_dir / "config.json").read_text())["max_position_embeddings"]
    weights = held_weights(loaded)
    # One sequence of one token: the weight part alone, to the byte.
    assert backend.memory_estimate(str(tiny_llama_dir), parallel=1, context_length=1, **CPU) == weights + cell
    # The default: DEFAULT_PARALLEL batch rows plus the prefill's batch of one, each grown to max_position_embeddings
    # (the backend sets no context of its own).
    expected = weights + (DEFAULT_PARALLEL + 1) * trained * cell
    assert backend.memory_estimate(str(tiny_llama_dir), **CPU) == expected
    # The registry asks the transformers backend when it is pinned, and serve budgets that figure.
    assert registry.memory_estimate(str(tiny_llama_dir), "transformers", **CPU) == expected
    assert registry.memory_estimate(str(tiny_llama_dir), "transformers", parallel=2, context_length=100, **CPU) == (
        weights + 3 * 100 * cell
    )


def test_the_kv_arithmetic_is_what_a_real_cache_holds(tiny_llama_dir: Path, loaded: TransformersModel) -> None:
    tokens = 37
    cache = DynamicCache(config=loaded.checkpoint.model.config)
    with torch.inference_mode():
        ids = torch.arange(tokens).unsqueeze(0) + 3
        loaded.checkpoint.model(input_ids=ids, use_cache=True, **{loaded.checkpoint.cache_kwarg: cache})
    held = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
    assert held == tokens * kv_per_token(tiny_llama_dir, 4)


def test_the_estimate_grows_with_slots_and_context(tiny_llama_dir: Path) -> None:
    backend = TransformersBackend()

    def est(**opts: Any) -> int:
        return backend.memory_estimate(str(tiny_llama_dir), **CPU, **opts)

    assert est(parallel=1, context_length=64) < est(parallel=2, context_length=64) < est(parallel=4, context_length=64)
    assert est(parallel=4, context_length=64) < est(parallel=4, context_length=128) < est(parallel=4)
    # Each extra slot adds one full-context sequence; one slot (no batching) is a single sequence.
    step = est(parallel=3, context_length=64) - est(parallel=2, context_length=64)
    assert est(parallel=2, context_length=64) - est(parallel=1, context_length=64) == 2 * step


def test_a_bf16_checkpoint_upcast_to_fp32_holds_twice_its_weights(tiny_llama_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "bf16"
    shutil.copytree(tiny_llama_dir, folder)
    tensors = load_file(folder / "model.safetensors")
    save_file({k: v.to(torch.bfloat16) for k, v in tensors.items()}, folder / "model.safetensors", {"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16"}))
    stored = sum(t.numel() * 2 for t in tensors.values())
    backend = TransformersBackend()

    def weights(**opts: Any) -> int:  # one sequence of one token: the KV part is one cell at the weights' dtype
        return backend.memory_estimate(str(folder), parallel=1, context_length=1, **CPU, **opts)

    assert weights() == 2 * stored + kv_per_token(folder, 4)  # the CPU default: fp32
    assert weights(dtype="auto") == stored + kv_per_token(folder, 2)  # the checkpoint's own bf16
    assert weights(dtype="float16") == stored + kv_per_token(folder, 2)


def test_a_gguf_not_yet_dequantised_is_estimated_from_its_config(
    tiny_llama_dir: Path, tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODELHOST_CACHE_DIR", str(tmp_path / "empty-cache"))  # nothing dequantised there
    backend = TransformersBackend()
    opts: dict[str, Any] = {"parallel": 2, "context_length": 32, **CPU}
    # The same weights, dequantised to fp32: the same bytes as the folder it was written from.
    assert backend.memory_estimate(str(tiny_llama_gguf), **opts) == backend.memory_estimate(str(tiny_llama_dir), **opts)
    assert not (tmp_path / "empty-cache").exists()  # estimating wrote nothing


def test_a_sliding_window_model_is_one_sequence_and_its_window_bounds_the_cache() -> None:
    config = MistralConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, sliding_window=16
    )
    cell = 2 * 2 * 2 * 16 * 4  # layers x (K, V) x KV heads x head dim x fp32
    # Not splicable (batch.py), so `parallel` buys no extra sequence; no layer holds more than its window.
    assert memory.kv_cache_bytes(config, context=1000, parallel=4, element_bytes=4) == 16 * cell
    assert memory.kv_cache_bytes(config, context=10, parallel=4, element_bytes=4) == 10 * cell


@pytest.mark.parametrize(
    "header",
    [
        b"\x01\x02",  # shorter than the length prefix
        struct.pack("<Q", 1 << 40),  # a 1 TB header
        struct.pack("<Q", 100) + b"{}",  # promises more than it has
        struct.pack("<Q", 5) + b"[1,2]",  # JSON, but not a table of tensors
        struct.pack("<Q", 30) + b'{"w":{"dtype":"F32","shape":7}}',  # a shape that is not a list
    ],
    ids=["short", "huge", "truncated", "not-a-table", "bad-shape"],
)
def test_a_damaged_or_hostile_safetensors_header_is_a_clear_error(tmp_path: Path, header: bytes) -> None:
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(header)
    with pytest.raises(ModelLoadError):
        memory.read_header(bad)


def test_a_broken_config_is_the_backends_error_and_serve_counts_the_files(tiny_llama_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(tiny_llama_dir, broken)
    (broken / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": ')
    with pytest.raises(ModelLoadError):
        TransformersBackend().memory_estimate(str(broken), **CPU)
    specs, _ = model_specs(ServeConfig(models=(str(broken),), parallel=4))
    assert specs[0].size == resident_size(broken)
    # And a sound folder is budgeted by the estimate, not by its files.
    specs, _ = model_specs(ServeConfig(models=(str(tiny_llama_dir),), parallel=4))
    assert specs[0].size == registry.memory_estimate(str(tiny_llama_dir), None, parallel=4)
    assert specs[0].size > resident_size(tiny_llama_dir)

"""Model and adapter files nested past the interpreter's recursion limit are a clear load error, not a 500 from a
RecursionError (issue 35 item 5): a GGUF header of arrays in arrays, an adapter's `adapter_config.json`, a
safetensors header. Real files written byte by byte, read by the readers `serve` and the adapter routes use."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from modelhost.backends.transformers import memory
from modelhost.errors import InvalidOptionError, ModelLoadError, ModelNotFoundError
from modelhost.http.errors import from_host_exception
from modelhost.inference.gguf_header import read_header
from modelhost.inference.lora_files import inspect_adapter

#: Levels of nesting: far past the recursion limit (1,000), as the probe wrote them.
DEEP = 100_000
_ARRAY = 9  # GGUF's value type of an array


def _gguf_of_nested_arrays(path: Path) -> Path:
    key = b"general.nested"
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<I", _ARRAY)
    data += struct.pack("<IQ", _ARRAY, 1) * DEEP + struct.pack("<IQ", 4, 0)  # the innermost: no u32 at all
    path.write_bytes(data)
    return path


def test_a_gguf_header_of_nested_arrays_is_a_load_error(tmp_path: Path) -> None:
    gguf = _gguf_of_nested_arrays(tmp_path / "nested.gguf")
    with pytest.raises(ModelLoadError, match="array of arrays"):
        read_header(gguf)
    # As an adapter: the 400 an adapter route answers names the file.
    with pytest.raises(InvalidOptionError, match="array of arrays"):
        inspect_adapter(gguf, field="lora_path")


def test_a_deeply_nested_adapter_config_is_refused_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "adapter_config.json").write_text("[" * DEEP + "]" * DEEP)
    with pytest.raises(InvalidOptionError, match=r"adapter_config\.json"):
        inspect_adapter(folder, field="lora_path")


def test_a_deeply_nested_safetensors_header_is_a_load_error(tmp_path: Path) -> None:
    header = ("[" * DEEP + "]" * DEEP).encode()
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(ModelLoadError, match="safetensors header"):
        memory.read_header(weights)
    # Within the limit it reads as before (the bound is on nesting, not on the file).
    plain = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}).encode()
    weights.write_bytes(struct.pack("<Q", len(plain)) + plain + bytes(16))
    assert memory.read_header(weights) == {"w": ("F32", (2, 2))}


def test_a_model_gone_by_admission_is_404_not_500() -> None:
    # A chat naming an adapter unloaded between its routing and its admission: the host's ModelNotFoundError.
    err = from_host_exception(ModelNotFoundError("model 'tiny' holds no adapter 'secret'"), {})
    assert (err.status, err.type, err.code) == (404, "not_found_error", "model_not_found")

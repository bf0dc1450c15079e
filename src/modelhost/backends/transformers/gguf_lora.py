"""A peft LoRA adapter folder, written as a llama.cpp LoRA GGUF (what llama.cpp's convert_lora_to_gguf.py makes).

The file holds `general.type = adapter`, `adapter.type = lora`, `adapter.lora.alpha`, and for each adapted weight
`W` (named as llama.cpp names it, e.g. `blk.0.attn_q.weight`) two tensors `W.lora_a` (peft's A, rank x in) and
`W.lora_b` (peft's B, out x rank). llama.cpp computes `W x + (alpha / rank) * B A x`, as peft does.

One trap: llama.cpp's llama architecture rotates adjacent pairs of each head, and the Hugging Face checkpoint was
permuted to rotate halves instead (see convert_hf_to_gguf.py's LlamaModel.permute). The base GGUF's Q and K rows are
in llama.cpp's order, so the adapter's output rows must be too: B of q_proj and k_proj is permuted the same way
(A acts on the input side, which no permutation touches). Without it the adapter loads and quietly does harm.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from modelhost.errors import ModelLoadError

#: The file name the adapter takes in the adapter folder: the llama.cpp backend loads the one .gguf it finds there.
GGUF_NAME = "adapter.gguf"

#: peft module names -> llama.cpp tensor names, for the Llama-like architectures below.
_TENSOR_NAMES: dict[str, str] = {
    "q_proj": "attn_q",
    "k_proj": "attn_k",
    "v_proj": "attn_v",
    "o_proj": "attn_output",
    "gate_proj": "ffn_gate",
    "up_proj": "ffn_up",
    "down_proj": "ffn_down",
}

#: transformers model_type -> (llama.cpp architecture, whether Q/K rows are permuted for it). llama.cpp's "llama"
#: covers Llama, Mistral and SmolLM; Qwen2/3 use NEOX-style rotation, which matches Hugging Face's layout as is.
_ARCHITECTURES: dict[str, tuple[str, bool]] = {
    "llama": ("llama", True),
    "mistral": ("llama", True),
    "qwen2": ("qwen2", False),
    "qwen3": ("qwen3", False),
}

_LORA_KEY = re.compile(r"(?:.*\.)?layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])(?:\.\w+)?\.weight$")


def exportable(model_type: str) -> bool:
    """True when adapters of this architecture can be written for llama.cpp."""
    return model_type in _ARCHITECTURES


def permute_rows(w: Any, n_head: int) -> Any:
    """Reorder the output rows of a Q or K matrix from Hugging Face's rotary layout to llama.cpp's (per head:
    interleave the two halves)."""
    rows = w.shape[0]
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf_lora(adapter_dir: str | Path, base_config: dict[str, Any], out: str | Path) -> Path:
    """Write the peft adapter in `adapter_dir` as a llama.cpp LoRA GGUF at `out`, for the base model whose
    transformers config (as a dict) is `base_config`. Raises ModelLoadError for what llama.cpp could not load."""
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    folder = Path(adapter_dir)
    model_type = str(base_config.get("model_type", ""))
    if model_type not in _ARCHITECTURES:
        raise ModelLoadError(f"no GGUF LoRA export for {model_type!r} models (known: {', '.join(_ARCHITECTURES)})")
    arch, permute = _ARCHITECTURES[model_type]
    adapter_config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    if adapter_config.get("use_rslora") or adapter_config.get("use_dora"):
        raise ModelLoadError("rsLoRA and DoRA adapters have no llama.cpp form")
    n_head = int(base_config["num_attention_heads"])
    n_kv = int(base_config.get("num_key_value_heads") or n_head)
    tensors = load_file(str(folder / "adapter_model.safetensors"))

    pairs: dict[str, dict[str, Any]] = {}
    for key, value in tensors.items():
        match = _LORA_KEY.match(key)
        if match is None or match.group(2) not in _TENSOR_NAMES:
            raise ModelLoadError(f"adapter tensor {key!r} has no llama.cpp counterpart")
        layer, module, side = int(match.group(1)), match.group(2), match.group(3)
        array = np.ascontiguousarray(value, dtype=np.float32)
        if side == "B" and permute and module in ("q_proj", "k_proj"):
            array = np.ascontiguousarray(permute_rows(array, n_head if module == "q_proj" else n_kv))
        pairs.setdefault(f"blk.{layer}.{_TENSOR_NAMES[module]}.weight", {})[side] = array

    out_path = Path(out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(out_path), arch=arch)
    writer.add_string(gguf.Keys.General.TYPE, gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(adapter_config.get("lora_alpha", 0)))
    for name in sorted(pairs, key=_natural):
        pair = pairs[name]
        if set(pair) != {"A", "B"}:
            raise ModelLoadError(f"adapter weight {name} lacks its lora_A or lora_B half")
        writer.add_tensor(f"{name}.lora_a", pair["A"])
        writer.add_tensor(f"{name}.lora_b", pair["B"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out_path


def _natural(name: str) -> tuple[int, str]:
    parts = name.split(".")
    return (int(parts[1]), parts[2])

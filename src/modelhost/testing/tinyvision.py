"""The tiny Idefics3 of `tinymodels` as a llama.cpp vision pair: a text GGUF and its mmproj GGUF, written offline.

llama.cpp runs a vision-language model as two files: the language model (here the tiny Llama inside Idefics3, as a
plain `llama` GGUF) and a multimodal projector (`mmproj`: the SigLIP-style vision tower and the pixel-shuffle
connector, `general.architecture = "clip"`, `clip.projector_type = "idefics3"`). Both are written directly with
the `gguf` package, under the names and keys llama.cpp's `convert_hf_to_gguf.py` (its SmolVLMModel and LlamaModel)
would write, so no converter, sentencepiece or network is needed.

One fact the pair depends on: llama.cpp's Idefics3 image template (mtmd) looks up `"\\n\\n"` as a single token and
aborts the process (`GGML_ASSERT`) when the vocabulary has none. The tiny tokenizer's BPE merges never learnt it,
so `build_tiny_idefics3_gguf` builds the Idefics3 with `"\\n\\n"` as an added (non-special) token; transformers
then tokenizes the same prompt the same way, which is what makes the two runtimes' prompt ids comparable.

Public API:

- `build_tiny_idefics3_gguf`: the transformers folder, the text GGUF and the mmproj GGUF from one seed.
- `write_idefics3_gguf`: write the pair for an existing Idefics3 folder (one whose tokenizer has `"\\n\\n"`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from modelhost.testing.tinymodels import build_tiny_idefics3, write_llama_gguf

__all__ = ["DOUBLE_NEWLINE", "build_tiny_idefics3_gguf", "write_idefics3_gguf"]

PathLike = str | Path

#: The token mtmd's Idefics3 template needs whole (before the global image view).
DOUBLE_NEWLINE = "\n\n"

_TEXT_PREFIX = "model.text_model."
_VISION_PREFIXES = ("model.vision_model.", "model.connector.")


def build_tiny_idefics3_gguf(out_dir: PathLike, seed: int = 0, **idefics3: Any) -> tuple[Path, Path, Path]:
    """Build the tiny Idefics3 (with `"\\n\\n"` as one token) and write it as `vlm.gguf` + `mmproj-vlm.gguf`.

    `idefics3` goes to `build_tiny_idefics3` (e.g. `longest_edge=256` for more tiles per page).

    Returns:
        (transformers folder, text GGUF, mmproj GGUF), all under `out_dir`; the two GGUFs hold exactly the
        folder's fp32 weights.
    """
    out = Path(out_dir)
    folder = build_tiny_idefics3(out / "hf", seed, extra_tokens=(DOUBLE_NEWLINE,), **idefics3)
    model, mmproj = write_idefics3_gguf(folder, out / "vlm.gguf", out / "mmproj-vlm.gguf")
    return folder, model, mmproj


def write_idefics3_gguf(model_dir: PathLike, gguf_path: PathLike, mmproj_path: PathLike) -> tuple[Path, Path]:
    """Write the Idefics3 folder `model_dir` as a llama text GGUF and an idefics3 mmproj GGUF (both fp32)."""
    from safetensors.numpy import load_file, save_file

    src = Path(model_dir)
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    if cfg.get("model_type") != "idefics3":
        raise ValueError(f"{src} is not an Idefics3 model (model_type={cfg.get('model_type')!r})")
    weights = load_file(str(src / "model.safetensors"))

    # The language model: the same folder layout as a tiny Llama, then the Llama writer.
    text = {("model." + k[len(_TEXT_PREFIX) :]): v for k, v in weights.items() if k.startswith(_TEXT_PREFIX)}
    text["lm_head.weight"] = weights["lm_head.weight"]
    with tempfile.TemporaryDirectory(prefix="idefics3-text-") as tmp:
        folder = Path(tmp)
        text_cfg = {**cfg["text_config"], "model_type": "llama", "architectures": ["LlamaForCausalLM"]}
        (folder / "config.json").write_text(json.dumps(text_cfg), encoding="utf-8")
        save_file(text, str(folder / "model.safetensors"))
        for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            if (src / name).is_file():
                shutil.copy(src / name, folder / name)
        model = write_llama_gguf(folder, gguf_path)

    vision = {k: v for k, v in weights.items() if k.startswith(_VISION_PREFIXES)}
    return model, _write_mmproj(src, cfg, vision, Path(mmproj_path))


def _write_mmproj(src: Path, cfg: dict, weights: dict, dst: Path) -> Path:  # type: ignore[type-arg]
    import gguf
    import numpy as np

    vcfg = cfg["vision_config"]
    processor = json.loads((src / "processor_config.json").read_text(encoding="utf-8"))["image_processor"]
    n_block = int(vcfg["num_hidden_layers"])
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, n_block)
    dst.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(dst), arch=gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MMPROJ])
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_name(src.name or "tiny-idefics3")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_clip_has_vision_encoder(True)
    w.add_vision_projection_dim(int(cfg["text_config"]["hidden_size"]))
    w.add_vision_image_size(int(vcfg["image_size"]))
    w.add_vision_patch_size(int(vcfg["patch_size"]))
    w.add_vision_embedding_length(int(vcfg["hidden_size"]))
    w.add_vision_feed_forward_length(int(vcfg["intermediate_size"]))
    w.add_vision_block_count(n_block)
    w.add_vision_head_count(int(vcfg["num_attention_heads"]))
    w.add_vision_image_mean([float(x) for x in processor["image_mean"]])
    w.add_vision_image_std([float(x) for x in processor["image_std"]])
    w.add_clip_projector_type(gguf.VisionProjectorType.IDEFICS3)
    w.add_vision_attention_layernorm_eps(float(vcfg.get("layer_norm_eps", 1e-5)))
    w.add_vision_projector_scale_factor(int(cfg.get("scale_factor", 2)))
    w.add_vision_use_gelu(True)
    w.add_vision_preproc_image_size(int(processor["size"]["longest_edge"]))
    for hf_name, array in sorted(weights.items()):
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ValueError(f"no llama.cpp name for the vision tensor {hf_name!r}")
        w.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst

"""How much memory a transformers model will hold once loaded, known before loading it: the budget of a model set
(`serve --max-memory`) needs it to decide what fits, and the files' size misses both the KV cache and the upcast
(on the CPU weights load as fp32, so a bf16 checkpoint holds twice its files).

The estimate is the weights plus the KV cache:
- weights: every tensor the safetensors headers list (the vision tower's too), at the dtype the load gives it
  (loading.pick_dtype: fp32 on the CPU unless `dtype` says otherwise, "auto" keeps the checkpoint's own); a tied LM
  head saved beside its embedding counts once, as the loaded model holds it once. A GGUF is estimated from the
  dequantised folder its first load writes (loading.py); before that folder exists, from the model its config
  describes, built on the meta device (shapes only), at fp32 as the dequantised folder holds it.
- KV cache: the generation caches are DynamicCaches that grow with use, bounded only by the context a sequence may
  reach: the `context_length` option, else the model's `max_position_embeddings` (loading.py sets no default of its
  own), so a full cell count is what a long conversation ends up holding. A batching model (`parallel` > 1 and only
  full-attention cache layers, see batch.py) holds `parallel` rows, each left-padded to the longest, plus the
  batch-of-one cache of a prompt being prefilled before it is spliced in; any other model one sequence. A
  sliding-window layer holds at most its window. K and V are kept in the weights' dtype.
Buffers (rotary tables, a few KB), activations and the allocator's slack are left out.

Each safetensors header is read with a bound (MAX_HEADER_BYTES) and parsed as JSON; no tensor is loaded. The config
is read with transformers itself (AutoConfig, DynamicCache), so each family's defaults and cache layout are the ones
the load will use; that costs the torch and transformers imports (seconds, which the load pays anyway), and a GGUF
not yet dequantised costs its header parse too (SmolLM2: about 9 s on a busy 2-core machine).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

from modelhost.errors import ModelLoadError
from modelhost.inference import catalogue
from modelhost.inference.options import LoadOptions

#: Largest safetensors header we read: the safetensors library refuses more than 100 MB too. A damaged or hostile
#: file must not make us allocate gigabytes for its "header"; a real one with thousands of tensors is a few MB.
MAX_HEADER_BYTES = 100_000_000

#: Largest `model.safetensors.index.json` we read: a real one maps a few thousand names (well under 1 MB).
MAX_INDEX_BYTES = 16 << 20

#: Bytes per element of each safetensors dtype (the format's own names).
DTYPE_BYTES: dict[str, int] = {
    "F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "U16": 2,
    "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "BOOL": 1,
}  # fmt: skip
_FLOATS = frozenset({"F64", "F32", "F16", "BF16"})

#: torch dtype names (as config.json and loading.DTYPE_NAMES spell them) to bytes per element.
_TORCH_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def estimate(path: str, opts: LoadOptions, *, default_parallel: int) -> int:
    """Bytes `load(path, opts)` will hold (see the module doc). ModelLoadError when the checkpoint's config or
    headers cannot be read, or nothing bounds its context."""
    from modelhost.backends.transformers.device import pick_device
    from modelhost.backends.transformers.loading import gguf_cache_folder, pick_dtype

    p = Path(path).expanduser()
    dtype = pick_dtype(opts.dtype, pick_device(opts.gpu_layers))
    loaded = _dtype_bytes(dtype)  # None for "auto": the checkpoint's own dtype
    folder = p
    if p.is_file() and catalogue.is_gguf(p):
        folder = gguf_cache_folder(p)
    elif not catalogue.is_model_folder(p):
        raise ModelLoadError(f"transformers backend: {path!r} is neither a model folder (config.json) nor a GGUF file")
    if folder is not p and not (folder / "config.json").is_file():
        # Not dequantised yet: the model its first load builds, counted on the meta device (no memory), saved and
        # reloaded as fp32 (loading._dequantise_gguf), so "auto" loads it as fp32 too.
        config = _gguf_config(p)
        weights = parameter_count(config) * (loaded or _TORCH_BYTES["float32"])
        kv_bytes = loaded or _TORCH_BYTES["float32"]
    else:
        config = _config(folder)
        tensors = read_tensors(folder)
        text = config.get_text_config()
        own = _dtype_bytes(getattr(text, "dtype", None) or getattr(config, "dtype", None))
        weights = weight_bytes(tensors, loaded or own, tied=bool(getattr(text, "tie_word_embeddings", False)))
        kv_bytes = loaded or own or _first_float_bytes(tensors)
    text = config.get_text_config()
    context = opts.context_length or int(getattr(text, "max_position_embeddings", 0) or 0)
    if context <= 0:
        raise ModelLoadError(f"{path}: no context_length given and the config has no max_position_embeddings")
    parallel = opts.parallel or default_parallel
    return weights + kv_cache_bytes(config, context=context, parallel=parallel, element_bytes=kv_bytes)


def _dtype_bytes(dtype: Any) -> int | None:
    """Bytes per element of a torch dtype or its name ("torch.bfloat16", "float32"); None for "auto" or unset."""
    return _TORCH_BYTES.get(str(dtype).removeprefix("torch."))


def _config(folder: Path) -> Any:
    """The checkpoint's config as the load reads it (transformers fills each family's defaults)."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(folder))
    except Exception as exc:  # malformed JSON, an unknown model_type: the load would fail the same way
        raise ModelLoadError(f"{folder}: cannot read config.json: {exc}") from exc


def _gguf_config(gguf: Path) -> Any:
    """The config transformers derives from a GGUF's header, as `_dequantise_gguf` builds the model from it."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    except Exception as exc:  # a damaged header, an architecture transformers cannot convert
        raise ModelLoadError(f"{gguf}: transformers cannot read its config: {exc}") from exc


def parameter_count(config: Any) -> int:
    """Parameters of the causal LM `config` describes, built on the meta device (shapes only, no memory), tied
    weights counted once as the loaded model holds them."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except Exception as exc:
        raise ModelLoadError(f"cannot build the model its config describes: {exc}") from exc
    return sum(p.numel() for p in model.parameters())


def read_header(file: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Name -> (dtype, shape) of every tensor in a safetensors file, from its header only."""
    try:
        with file.open("rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise ModelLoadError(f"{file}: too short for a safetensors header")
            (size,) = struct.unpack("<Q", raw)
            if size > MAX_HEADER_BYTES:
                raise ModelLoadError(f"{file}: a safetensors header of {size} bytes (at most {MAX_HEADER_BYTES})")
            body = f.read(size)
        header = json.loads(body)
        if len(body) != size or not isinstance(header, dict):
            raise ModelLoadError(f"{file}: the safetensors header is damaged")
        return {
            name: (str(entry["dtype"]), tuple(int(n) for n in entry["shape"]))
            for name, entry in header.items()
            if name != "__metadata__"
        }
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise ModelLoadError(f"{file}: cannot read the safetensors header: {exc}") from exc


def read_tensors(folder: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The tensors of the checkpoint's weight files: the shards its index names, else model.safetensors (the files
    `from_pretrained` reads; stray files beside them, such as a consolidated copy, are not loaded)."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            if index.stat().st_size > MAX_INDEX_BYTES:
                raise ModelLoadError(f"{index}: larger than {MAX_INDEX_BYTES} bytes")
            files = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelLoadError(f"{index}: cannot read the shard index: {exc}") from exc
    elif (folder / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        raise ModelLoadError(f"{folder}: no safetensors weights (model.safetensors or its index)")
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name in files:
        shard = (folder / name).resolve()
        if shard.parent != folder.resolve():
            raise ModelLoadError(f"{index}: shard {name!r} is outside the model folder")
        tensors.update(read_header(shard))
    return tensors


def weight_bytes(tensors: dict[str, tuple[str, tuple[int, ...]]], float_bytes: int | None, *, tied: bool) -> int:
    """Bytes of the loaded weights: floating tensors at `float_bytes` (None: as stored), others as stored. With tied
    embeddings an LM head saved beside the embedding is the same parameter once loaded, so it counts once."""
    tied = tied and any(n.endswith("embed_tokens.weight") for n in tensors)
    total = 0
    for name, (dtype, shape) in tensors.items():
        if tied and name.endswith("lm_head.weight"):
            continue
        if dtype not in DTYPE_BYTES:
            raise ModelLoadError(f"tensor {name}: unknown safetensors dtype {dtype!r}")
        per = float_bytes if float_bytes is not None and dtype in _FLOATS else DTYPE_BYTES[dtype]
        total += math.prod(shape) * per
    return total


def _first_float_bytes(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> int:
    """Bytes per element of the checkpoint's first floating tensor: what "auto" loads without a config dtype."""
    return next((DTYPE_BYTES[d] for d, _ in tensors.values() if d in _FLOATS), 4)


def kv_bytes_per_token(text_config: Any, element_bytes: int) -> int:
    """Bytes one token of one sequence takes in one layer's K and V, from the attention shape in the config."""
    heads = int(text_config.num_attention_heads)
    kv_heads = int(getattr(text_config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(text_config, "head_dim", None) or text_config.hidden_size // heads)
    return 2 * kv_heads * head_dim * element_bytes


def kv_cache_bytes(config: Any, *, context: int, parallel: int, element_bytes: int) -> int:
    """Bytes of the KV cache at full use: per layer, the cells its cache kind keeps, times the sequences held."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    try:
        layers = DynamicCache(config=config).layers
        per_token = kv_bytes_per_token(config.get_text_config(decoder=True), element_bytes)
    except Exception as exc:  # a config whose attention shape is missing or malformed
        raise ModelLoadError(f"cannot work out the KV cache's shape from the config: {exc}") from exc
    batching = parallel > 1 and bool(layers) and all(type(layer) is DynamicLayer for layer in layers)
    sequences = parallel + 1 if batching else 1
    total = 0
    for layer in layers:
        if type(layer) is DynamicLayer:
            cells = context
        elif isinstance(layer, DynamicSlidingWindowLayer):
            cells = min(context, int(layer.sliding_window))
        else:  # linear attention, recurrent state...: a shape this arithmetic does not know
            raise ModelLoadError(f"cannot estimate a {type(layer).__name__} cache layer")
        total += sequences * cells * per_token
    return total

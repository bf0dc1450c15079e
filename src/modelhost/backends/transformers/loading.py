"""Loading a checkpoint: a Hugging Face folder, or a GGUF file dequantised once into a cached folder.

Everything a loaded model needs to know about its checkpoint is gathered here, once, into `Checkpoint`: the torch
module, tokenizer and (for vision-language models) processor, the device and dtype, the checkpoint's own sampling
defaults (`generation_config.json`), its end-of-sequence ids and context length.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelhost.errors import InvalidOptionError, ModelLoadError, ModelNotFoundError
from modelhost.inference import catalogue, hub_cache
from modelhost.inference.options import LoadOptions

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

#: Bumped when the layout of the dequantised-GGUF cache changes, so an old cache is never read as a new one.
GGUF_CACHE_FORMAT = "1"

#: How much of a GGUF file feeds its cache key (three samples of this size plus the size). Hashing a whole
#: multi-gigabyte file would cost more than the cache saves; a re-quantised or edited file differs in size or in
#: the sampled header and tensor data.
_GGUF_KEY_SAMPLE = 1 << 20

#: Names `dtype=` accepts, to the torch dtype name ("auto" keeps the checkpoint's own dtype).
DTYPE_NAMES: dict[str, str] = {
    "auto": "auto",
    "float32": "float32",
    "fp32": "float32",
    "f32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "f16": "float16",
}

#: generation_config.json keys that map onto request options (HF name -> modelhost option).
_GENERATION_KEYS: dict[str, str] = {
    "temperature": "temperature",
    "top_k": "top_k",
    "top_p": "top_p",
    "min_p": "min_p",
    "repetition_penalty": "repeat_penalty",
    "max_new_tokens": "max_tokens",
}


@dataclass(slots=True)
class Checkpoint:
    """A loaded checkpoint and the facts about it that generation needs."""

    model: Any  # transformers.PreTrainedModel
    tokenizer: Any  # transformers.PreTrainedTokenizerBase
    processor: Any | None  # transformers.ProcessorMixin for vision-language models, else None
    device: torch.device
    source: str  # what the caller asked to load (a GGUF file, or the folder)
    folder: Path  # the folder actually loaded (the dequantised cache for a GGUF)
    generation_defaults: dict[str, Any] = field(default_factory=dict)
    eos_ids: frozenset[int] = frozenset()
    context_length: int = 0
    parallel: int | None = None
    quant_bits: int = 0
    cache_kwarg: str = "past_key_values"  # transformers renamed it `cache` in 5.x; see `_cache_kwarg`
    logits_to_keep: bool = False


def quiet_libraries() -> None:
    """Keep transformers' and peft's noise off a person's terminal (issue 38): the progress bars of its own logging
    ("Loading weights" at every load, "Writing model shards") and the FutureWarning a LoRA run gets from peft
    reading a property transformers deprecated: neither is the user's to act on. The one-time dequantisation of a
    GGUF (minutes on a small machine) keeps its bar, a plain tqdm, under a line modelhost prints. Process-wide."""
    import warnings

    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    # peft 0.13+ reads `is_gradient_checkpointing`, which transformers 5 deprecates for `is_activation_checkpointing`.
    warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.* is deprecated", category=FutureWarning)


def load(path: str, opts: LoadOptions) -> Checkpoint:
    """Load `path` (a folder with config.json or a GGUF file) with the given load options."""
    import torch

    from modelhost.backends.transformers.device import pick_device

    quiet_libraries()
    p = Path(os.path.expanduser(path))
    if not p.exists():
        raise ModelNotFoundError(f"no model at {path!r}")
    if opts.threads is not None:
        # Process-wide, and deliberately only on request: on small shared machines one thread often beats two, but
        # that is the caller's measurement to make, not a default to impose at import time.
        torch.set_num_threads(opts.threads)
    device = pick_device(opts.gpu_layers)
    dtype = pick_dtype(opts.dtype, device)
    if p.is_file() and catalogue.is_gguf(p):
        folder = dequantised_gguf_folder(p)
    elif catalogue.is_model_folder(p):
        folder = p
    else:
        raise ModelLoadError(f"transformers backend: {path!r} is neither a model folder (config.json) nor a GGUF file")
    try:
        return _load_folder(folder, source=str(p), device=device, dtype=dtype, opts=opts)
    except (ModelLoadError, InvalidOptionError):
        raise
    except Exception as exc:
        raise ModelLoadError(f"transformers backend failed to load {path!r}: {exc}") from exc


def pick_dtype(name: str | None, device: torch.device) -> Any:
    """The torch dtype for `dtype=` (or "auto"). Default: fp32 on the CPU, the checkpoint's own dtype elsewhere.

    fp32 on the CPU because bf16 matmuls on AVX2-only CPUs are emulated and several times slower in prefill.
    """
    import torch

    if name is None:
        return torch.float32 if device.type == "cpu" else "auto"
    canonical = DTYPE_NAMES.get(name.lower())
    if canonical is None:
        raise InvalidOptionError("dtype", f"unknown dtype {name!r}; known: {', '.join(sorted(DTYPE_NAMES))}")
    return canonical if canonical == "auto" else getattr(torch, canonical)


def _load_folder(folder: Path, *, source: str, device: torch.device, dtype: Any, opts: LoadOptions) -> Checkpoint:
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(str(folder))
    processor = _load_processor(folder, config)
    tokenizer = processor.tokenizer if processor is not None else AutoTokenizer.from_pretrained(str(folder))
    model = _model_class(config).from_pretrained(str(folder), config=config, dtype=dtype)
    model.to(device)
    model.eval()
    if opts.adapter is not None:
        model = apply_adapter(model, opts.adapter)

    text_config = config.get_text_config()
    defaults, gen_eos = read_generation_config(folder)
    eos = set(gen_eos) | _ids(getattr(text_config, "eos_token_id", None)) | _ids(getattr(config, "eos_token_id", None))
    if tokenizer.eos_token_id is not None:
        eos.add(int(tokenizer.eos_token_id))
    trained_context = int(getattr(text_config, "max_position_embeddings", 0) or 0)
    quant = getattr(config, "quantization_config", None) or {}
    quant_bits = quant.get("bits", 0) if isinstance(quant, dict) else getattr(quant, "bits", 0)
    params = inspect.signature(model.forward).parameters
    return Checkpoint(
        model=model,
        tokenizer=tokenizer,
        processor=processor,
        device=device,
        source=source,
        folder=folder,
        generation_defaults=defaults,
        eos_ids=frozenset(eos),
        context_length=opts.context_length or trained_context,
        parallel=opts.parallel,
        quant_bits=int(quant_bits or 0),
        cache_kwarg="cache" if "cache" in params else "past_key_values",
        logits_to_keep="logits_to_keep" in params,
    )


def _model_class(config: Any) -> Any:
    """The class the checkpoint names in `architectures` (as vLLM does), else the Auto class for its kind."""
    import transformers

    for arch in getattr(config, "architectures", None) or ():
        cls = getattr(transformers, arch, None)
        # A bare "LlamaModel" has no LM head; only generative heads will do.
        if cls is not None and arch.endswith(("ForCausalLM", "ForConditionalGeneration", "LMHeadModel")):
            return cls
    if getattr(config, "vision_config", None) is not None:
        return transformers.AutoModelForImageTextToText
    return transformers.AutoModelForCausalLM


def _load_processor(folder: Path, config: Any) -> Any | None:
    """The multimodal processor of a vision-language checkpoint, or None for text-only ones.

    A vision checkpoint whose processor cannot load (say its image processor needs torchvision) still serves text:
    it loads with its tokenizer alone and `accepts_images()` says False, which is the truth about this install.
    """
    has_processor_files = any((folder / f).is_file() for f in ("processor_config.json", "preprocessor_config.json"))
    if not has_processor_files and getattr(config, "vision_config", None) is None:
        return None
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(str(folder))
    except Exception:
        log.warning("%s: the processor did not load; serving text only", folder, exc_info=True)
        return None
    # AutoProcessor returns a bare tokenizer for text-only folders; only a real processor has an image processor.
    return processor if getattr(processor, "image_processor", None) is not None else None


def read_generation_config(folder: Path) -> tuple[dict[str, Any], set[int]]:
    """The checkpoint's sampling defaults (as request option names) and its end-of-sequence ids.

    Read from the raw JSON rather than GenerationConfig, whose class defaults cannot be told apart from values the
    checkpoint set. `do_sample: false` makes greedy the default, as transformers itself would decode.
    """
    path = folder / "generation_config.json"
    if not path.is_file():
        return {}, set()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        log.warning("%s is unreadable; using the engine's sampling fallbacks", path)
        return {}, set()
    defaults = {ours: raw[theirs] for theirs, ours in _GENERATION_KEYS.items() if raw.get(theirs) is not None}
    if raw.get("do_sample") is False:
        defaults["temperature"] = 0.0
    return defaults, _ids(raw.get("eos_token_id"))


def _ids(value: Any) -> set[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return {value}
    if isinstance(value, (list, tuple)):
        return {int(v) for v in value if isinstance(v, int)}
    return set()


def apply_adapter(model: Any, adapter: str) -> Any:
    """Apply a peft LoRA folder and merge it into the weights (no per-token adapter cost; fixed for this load)."""
    folder = Path(os.path.expanduser(adapter))
    if not (folder / "adapter_config.json").is_file():
        raise ModelLoadError(f"adapter {adapter!r} is not a peft adapter folder (no adapter_config.json)")
    try:
        from peft import PeftModel
    except ImportError as exc:
        raise ModelLoadError("adapter= needs the peft package: pip install peft") from exc
    return PeftModel.from_pretrained(model, str(folder)).merge_and_unload()


# ------------------------------------------------------------------------------------------------------------------
# GGUF: dequantise once, then load the cached safetensors folder like any other


def gguf_cache_key(gguf: Path) -> str:
    """A key for a GGUF file's content: its size and samples of its start, middle and end (see _GGUF_KEY_SAMPLE)."""
    size = gguf.stat().st_size
    digest = hashlib.sha256(f"{GGUF_CACHE_FORMAT}:{size}:".encode())
    with gguf.open("rb") as f:
        for offset in (0, max(0, size // 2 - _GGUF_KEY_SAMPLE // 2), max(0, size - _GGUF_KEY_SAMPLE)):
            f.seek(offset)
            digest.update(f.read(_GGUF_KEY_SAMPLE))
    return digest.hexdigest()[:20]


def gguf_cache_folder(gguf: Path) -> Path:
    """Where the dequantised safetensors of `gguf` are (or will be) cached: one folder per file's name and content
    key, so a changed file never reuses a stale conversion."""
    return hub_cache.modelhost_cache_root() / "gguf" / f"{gguf.stem}-{gguf_cache_key(gguf)}"


def gguf_cache_lock(folder: Path) -> Path:
    """The lock file loaders of one GGUF take turns on while one of them writes its cache `folder`."""
    return folder.parent / f"{folder.name}.lock"


def dequantised_gguf_folder(gguf: Path) -> Path:
    """The cached safetensors folder for `gguf`, dequantising it first if this is the first load.

    Dequantising a GGUF takes tens of seconds even for a small model; loading the cached safetensors takes about
    one. The folder is written under a temporary name and renamed, so a crash or a concurrent load never leaves a
    half-written folder where a later load would trust it. Loaders of one file take turns on a lock file beside
    the folder: a second process (two `serve`s, a training beside a server) waits for the first one's conversion
    and reads it, where each converting at once cost every one of them its full time and memory (on a busy
    2-core machine two concurrent first loads of SmolLM2 took over 120 s each). The lock is the kernel's (flock):
    a loader killed mid-conversion releases it with its process, and the next one converts.
    """
    from filelock import FileLock

    folder = gguf_cache_folder(gguf)
    if (folder / "config.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(gguf_cache_lock(folder)):
        if (folder / "config.json").is_file():  # converted by the loader this one waited for
            return folder
        partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        try:
            _dequantise_gguf(gguf, partial)
            try:
                os.replace(partial, folder)
            except OSError:
                if not (folder / "config.json").is_file():  # not a lost race with another loader: a real failure
                    raise
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return folder


def _dequantise_gguf(gguf: Path, out: Path) -> None:
    """Write `gguf` as a plain transformers folder (fp32 safetensors, config, tokenizer, chat template).

    The model is built from the GGUF's config and filled with transformers' own GGUF tensor conversion. That gives
    a plain module that `save_pretrained` can write (a model loaded with `from_pretrained(gguf_file=)` cannot), and
    it needs no accelerate. fp32 because dequantised values are not exact in bf16 or fp16.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    # A warning, so that it shows: the first load of a GGUF waits minutes here, and this line says why (once).
    log.warning("modelhost: dequantising %s for transformers (once; later loads read the cache)", gguf.name)
    where, name = str(gguf.parent), gguf.name
    config = AutoConfig.from_pretrained(where, gguf_file=name)
    tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=name)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model, torch_dtype=torch.float32)
    missing, _unexpected = model.load_state_dict(tensors["tensors"], strict=False)
    model.tie_weights()
    # A tied LM head has no tensor of its own in the file; anything else missing would be random weights.
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded = {id(params[k]) for k in tensors["tensors"] if k in params}
    untied = [k for k in missing if k not in params or id(params[k]) not in loaded]
    if untied:
        raise ModelLoadError(f"GGUF {gguf} left weights unset after conversion: {', '.join(untied[:5])}")
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))

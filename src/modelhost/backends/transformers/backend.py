"""TransformersBackend: the registry's face of this engine (name, availability, formats, device, loading)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from modelhost.inference import catalogue, openmp
from modelhost.inference.capabilities import missing_modules
from modelhost.inference.model import TextModel
from modelhost.inference.options import LoadOptions
from modelhost.inference.types import DeviceInfo


class TransformersBackend:
    """Loads Hugging Face folders (config.json + safetensors + tokenizer) and GGUF files through transformers.

    Implements Backend, FormatProbe, DeviceInfoProvider and MemoryEstimator. Where llama.cpp can also load a GGUF
    file the registry's preference order picks llama.cpp; folders (and vision-language models) come here.
    """

    name = "transformers"

    def available(self) -> bool:
        """True when torch and transformers are installed. Never imports them (that costs seconds)."""
        try:
            return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "safetensors"))
        except Exception:  # a broken install can make find_spec raise; "not available" is the honest answer
            return False

    def unavailable_reason(self) -> str:
        """The missing packages, and the extra that brings them."""
        missing = missing_modules(("torch", "transformers", "safetensors")) or ["a package that does not import"]
        return f"missing {', '.join(missing)}: pip install 'modelhost[transformers]' (make install does)"

    def accepts(self, path: str) -> bool:
        """True for a model folder with config.json, and for a GGUF file (judged by its magic bytes)."""
        p = Path(path)
        return catalogue.is_model_folder(p) or (p.is_file() and catalogue.is_gguf(p))

    def device_info(self) -> DeviceInfo:
        """The device a model loaded now would compute on: CUDA or MPS through torch, else the CPU."""
        openmp.import_engine("torch")  # torch's import loads OpenMP, which reads how its threads wait once
        from modelhost.backends.transformers.device import describe_device, pick_device

        return describe_device(pick_device(None))

    def memory_estimate(self, path: str, **load_opts: Any) -> int:
        """Bytes the model will hold once loaded with these options (the MemoryEstimator capability): its weights at
        the dtype the load gives them, and the KV cache of `parallel` slots grown to the context (memory.py)."""
        opts = LoadOptions.parse(load_opts)
        openmp.import_engine("torch", opts.poll)  # torch's import loads OpenMP, which reads its wait once
        from modelhost.backends.transformers import memory
        from modelhost.backends.transformers.model import DEFAULT_PARALLEL

        return memory.estimate(catalogue.resolve(path), opts, default_parallel=DEFAULT_PARALLEL)

    def load_model(self, path: str, **load_opts: Any) -> TextModel:
        """Load a folder or GGUF file; options as in `LoadOptions` (dtype, threads, poll, gpu_layers, adapter, ...)."""
        opts = LoadOptions.parse(load_opts)
        openmp.import_engine("torch", opts.poll)  # torch's import loads OpenMP, which reads its wait once
        from modelhost.backends.transformers.loading import load
        from modelhost.backends.transformers.model import TransformersModel

        return TransformersModel(load(path, opts))

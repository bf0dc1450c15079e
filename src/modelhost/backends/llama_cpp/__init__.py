"""The llama_cpp backend: GGUF models through llama-cpp-python.

Importing this package does not import llama_cpp (the registry reads entry points eagerly enough that an engine
import here would cost every modelhost command its load time); `LlamaCppBackend.available()` probes for it.

Modules: `backend` (load options, device facts), `model` (the TextModel), `sampling` (options to a native sampler
chain), `chat` (the GGUF's own chat template), `metadata` (ModelInfo and sampling defaults from GGUF keys).
"""

from modelhost.backends.llama_cpp.backend import DEFAULT_CONTEXT_LENGTH, LlamaCppBackend

__all__ = ["DEFAULT_CONTEXT_LENGTH", "LlamaCppBackend"]

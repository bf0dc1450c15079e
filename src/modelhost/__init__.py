"""modelhost: load a language or vision-language model once and serve it through every door.

The public Python API is small and lives here:

    import modelhost
    with modelhost.load_model("default") as model:
        for token in model.chat([modelhost.Message("user", "What is the capital of France?")], max_tokens=32):
            print(token.text, end="")

See `modelhost.inference` for the contract every backend implements.
"""

import os as _os

# OpenMP's worker threads (llama.cpp's compute, torch's) spin while they wait for work unless told otherwise. On a
# machine whose cores are shared (CI, a laptop building something, two models in one host) a spinning thread burns
# the very time slice that the thread it waits for needs, and decoding collapses: SmolLM2 on 2 cores at load 18
# decoded 0.2 tokens/s with spinning waits and 10-45 tokens/s with passive ones, the same tokens
# (bench/contention.py). libgomp reads the policy once, when it is loaded (the first `import llama_cpp` or
# `import torch`), so it is set here, before any backend can be imported; a value the user set wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from modelhost.errors import ModelHostError
from modelhost.inference import (
    BatchResult,
    ClassifyResult,
    GenerateMetrics,
    Message,
    ModelInfo,
    TextModel,
    Token,
    as_capability,
    load_model,
)

__all__ = [
    "BatchResult",
    "ClassifyResult",
    "GenerateMetrics",
    "Message",
    "ModelHostError",
    "ModelInfo",
    "TextModel",
    "Token",
    "as_capability",
    "load_model",
]

__version__ = "0.1.0"

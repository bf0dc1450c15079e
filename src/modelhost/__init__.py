"""modelhost: load a language or vision-language model once and serve it through every door.

The public Python API is small and lives here:

    import modelhost
    with modelhost.load_model("default") as model:
        for token in model.chat([modelhost.Message("user", "What is the capital of France?")], max_tokens=32):
            print(token.text, end="")

See `modelhost.inference` for the contract every backend implements.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from modelhost._lazy import exports as _exports

if _TYPE_CHECKING:
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


__getattr__ = _exports(
    __name__,
    {
        "ModelHostError": "modelhost.errors",
        **{name: "modelhost.inference" for name in __all__ if name != "ModelHostError"},
    },
)

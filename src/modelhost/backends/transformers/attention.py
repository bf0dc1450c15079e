"""Capturing post-RoPE queries and keys from one prefill, through transformers' attention interface.

transformers 5 models call attention through a registry keyed by `config._attn_implementation`, passing the
queries and keys *after* rotary embeddings (and keys before grouped-query heads are repeated). So we register one
more implementation that records its inputs and then calls the model's own implementation, and point the decoder's
config at it for the length of one forward pass. No RoPE arithmetic is re-done here, so every architecture that
uses the interface (Llama, Qwen, Gemma, Mistral, the text half of Idefics3 ...) is inspected exactly as it computes.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

#: The name this module registers in transformers' attention and mask interfaces.
CAPTURE = "modelhost_capture"

# Which recorder the capturing function writes to. Per thread, because the config switch is per model and each
# model is driven from one thread; a model running on another thread never reaches this name.
_local = threading.local()
_register_lock = threading.Lock()
_registered = False


@dataclass(slots=True)
class Recorder:
    """Queries and keys by layer index, as the attention function saw them (batch, heads, seq, head_dim)."""

    original: str
    queries: dict[int, Any] = field(default_factory=dict)
    keys: dict[int, Any] = field(default_factory=dict)


def _delegate(module: Any, name: str) -> Callable[..., Any]:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if name in ALL_ATTENTION_FUNCTIONS:
        return ALL_ATTENTION_FUNCTIONS[name]  # type: ignore[no-any-return]
    # "eager" is not in the registry: each model file defines its own `eager_attention_forward`.
    eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
    if eager is None:
        raise RuntimeError(f"cannot find the {name!r} attention of {type(module).__name__}")
    return eager  # type: ignore[no-any-return]


def _capture_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
    recorder: Recorder | None = getattr(_local, "recorder", None)
    original = recorder.original if recorder is not None else "sdpa"
    layer = getattr(module, "layer_idx", None)
    if recorder is not None and layer is not None:
        recorder.queries[int(layer)] = query.detach()
        recorder.keys[int(layer)] = key.detach()
    return _delegate(module, original)(module, query, key, value, attention_mask, **kwargs)


def _capture_mask(*args: Any, **kwargs: Any) -> Any:
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    recorder: Recorder | None = getattr(_local, "recorder", None)
    return ALL_MASK_ATTENTION_FUNCTIONS[recorder.original if recorder is not None else "sdpa"](*args, **kwargs)


def _register() -> None:
    global _registered
    with _register_lock:
        if _registered:
            return
        from transformers.masking_utils import AttentionMaskInterface
        from transformers.modeling_utils import AttentionInterface

        AttentionInterface.register(CAPTURE, _capture_attention)
        # The masks must be built as the original implementation expects them (sdpa and eager differ).
        AttentionMaskInterface.register(CAPTURE, _capture_mask)
        _registered = True


def _decoder_configs(model: Any) -> list[Any]:
    """The configs of the text decoder and its attention layers (a vision tower keeps its own implementation)."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model
    configs = {id(decoder.config): decoder.config}
    for module in decoder.modules():
        config = getattr(module, "config", None)
        if config is not None and hasattr(module, "layer_idx"):
            configs[id(config)] = config
    return list(configs.values())


@contextmanager
def capturing(model: Any) -> Iterator[Recorder]:
    """Within the block, forward passes of `model`'s decoder record each layer's queries and keys."""
    _register()
    configs = _decoder_configs(model)
    originals = [c._attn_implementation for c in configs]
    recorder = Recorder(original=originals[0] or "eager")
    previous = getattr(_local, "recorder", None)
    _local.recorder = recorder
    try:
        for config in configs:
            config._attn_implementation = CAPTURE
        yield recorder
    finally:
        for config, original in zip(configs, originals, strict=True):
            config._attn_implementation = original
        _local.recorder = previous

"""The LoRA adapters of one llama.cpp engine's context: the one given at load (LoadOptions.adapter, applied to every
request) and the ones served by name (AdapterEngine), each loaded once on the llama_model and applied to the context
for the decode calls of the requests that name it.

Why per decode call and not per sequence: llama.cpp (the version llama-cpp-python 0.3.36 bundles) applies adapters
to a whole context (`llama_set_adapters_lora`), never to one sequence of it, and has no per-sequence or per-row
adapter call. So the engine groups a step's decoding slots by adapter and makes one llama_decode per group,
switching the context's adapters between them, as llama-server does for requests whose LoRA settings differ; it
places each adapter's requests in neighbouring slots (engine._fit), so that each group is one pass over the weights,
and starts a step with the adapter the context already holds. The slots, their KV cache and the base weights stay
one; the price is one more pass over the weights (and llama.cpp's graph re-reservation at each switch) per distinct
adapter in a step: measured, with the other ways considered, in docs/adapters.md.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

from modelhost.errors import GenerationError, InvalidOptionError, ModelLoadError, ModelNotFoundError
from modelhost.inference.gguf_header import read_model_tensor_shapes
from modelhost.inference.lora_files import check_gguf_lora_shapes, inspect_adapter

_UNSET = object()  # the context's adapters are not known yet (nothing set since it was made)


def model_shapes(model: str) -> dict[str, tuple[int, ...]]:
    """The tensor shapes of the model GGUF at `model`, to check an adapter against; InvalidOptionError ("adapter")
    when they cannot be read."""
    try:
        return read_model_tensor_shapes(model)
    except ModelLoadError as exc:
        raise InvalidOptionError("adapter", f"cannot check the adapter against the model: {exc}") from None


def check_against_model(adapter: Path, model: str) -> None:
    """Check the LoRA GGUF `adapter` fits the model GGUF at `model` (lora_files.check_gguf_lora_shapes)."""
    check_gguf_lora_shapes(adapter, model_shapes(model), field="adapter")


class ContextAdapters:
    """The named adapters of one context and the set applied to it now. One thread drives it (the engine's)."""

    def __init__(self, lib: Any, llm: Any, ctx: Any) -> None:
        self._lib = lib
        self._llm = llm
        self._ctx = ctx
        loaded = getattr(llm, "_lora_adapter", None)
        #: The load-time adapter (Llama(lora_path=...)), under every request's own.
        self._base: list[tuple[Any, float]] = [(loaded, float(llm.lora_scale))] if loaded is not None else []
        self._named: dict[str, Any] = {}
        self._active: object = _UNSET
        self._base_shapes: dict[str, tuple[int, ...]] | None = None  # the model's tensors, read at the first load

    @property
    def active(self) -> object:
        """The named adapter applied to the context now (None: the load-time one alone; a sentinel before the first
        `use`)."""
        return self._active

    @property
    def names(self) -> frozenset[str]:
        """The adapters served by name now."""
        return frozenset(self._named)

    def check(self, name: str | None) -> None:
        """Refuse a request for an adapter not loaded here (ModelNotFoundError)."""
        if name is not None and name not in self._named:
            raise ModelNotFoundError(f"no adapter named {name!r} is loaded on this model")

    def load(self, name: str, path: str) -> None:
        """Load the LoRA GGUF at `path` (the file, or the one .gguf of a folder) on the model as `name`;
        InvalidOptionError ("adapter") when it is not one, a tensor of it does not fit the model's (checked here:
        llama.cpp would accept some and abort at the first decode), or llama.cpp refuses it."""
        files = inspect_adapter(path, field="adapter")
        if files.gguf is None:
            why = "the llama.cpp backend serves GGUF adapters (lora.train writes adapter.gguf beside the peft files)"
            raise InvalidOptionError("adapter", f"{path!r} has no LoRA GGUF: {why}")
        if name in self._named:
            raise InvalidOptionError("adapter", f"an adapter named {name!r} is loaded already")
        if self._base_shapes is None:  # read once: the model's tensors never change
            self._base_shapes = model_shapes(self._llm.model_path)
        check_gguf_lora_shapes(files.gguf, self._base_shapes, field="adapter")
        adapter = self._lib.llama_adapter_lora_init(self._llm.model, str(files.gguf).encode())
        if not adapter:
            raise InvalidOptionError("adapter", f"llama.cpp refused the LoRA GGUF {str(files.gguf)!r} for this model "
                                                "(another architecture or shape?)")  # fmt: skip
        self._named[name] = adapter

    def unload(self, name: str) -> None:
        """Free the adapter `name` (an unknown name is harmless); the context stops applying it first."""
        adapter = self._named.pop(name, None)
        if adapter is None:
            return
        if self._active == name:
            self.use(None)
        self._lib.llama_adapter_lora_free(adapter)

    def use(self, name: str | None) -> None:
        """Apply the load-time adapter and `name`'s (None: the load-time one alone) to the context, if it does not
        already; GenerationError when llama.cpp refuses."""
        if self._active == name:
            return
        chosen = [*self._base, *([(self._named[name], 1.0)] if name is not None else [])]
        adapters = (self._lib.llama_adapter_lora_p_ctypes * max(1, len(chosen)))(*(a for a, _ in chosen))
        scales = (ctypes.c_float * max(1, len(chosen)))(*(s for _, s in chosen))
        if int(self._lib.llama_set_adapters_lora(self._ctx.ctx, adapters, len(chosen), scales)) != 0:
            raise GenerationError(f"llama.cpp could not apply the adapters {[name] if name else []} to the context")
        self._active = name

    def close(self) -> None:
        """Free every named adapter (the model frees them too when it is freed; this gives their memory back now)."""
        for name in list(self._named):
            self._lib.llama_adapter_lora_free(self._named.pop(name))

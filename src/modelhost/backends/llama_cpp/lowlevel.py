"""llama-cpp-python's private names, in one module: the backend's other modules use only these functions and the
package's public C bindings (`llama_cpp.llama_*`).

Why: the backend drives llama.cpp below `llama_cpp.Llama` (its own contexts, batches and samplers), which needs a
few members llama-cpp-python does not promise (`Llama._model`, `Llama._ctx`, `Llama._is_recurrent`,
`llama_cpp._internals`, the log callback in `llama_cpp._logger`). They can change in any release; `pyproject.toml`
bounds the package below 0.4 (tested on 0.3.x), and a newer release is checked by changing this one file.
"""

from __future__ import annotations

from typing import Any


def new_context(llm: Any, params: Any) -> Any:
    """A new llama.cpp context on `llm`'s weights with `params` (a `llama_context_params`): llama-cpp-python's
    `LlamaContext` wrapper, whose `.ctx` is the C pointer and whose `close()` frees it. ValueError when llama.cpp
    cannot make it (out of memory, a context size it refuses)."""
    from llama_cpp import _internals

    return _internals.LlamaContext(model=llm._model, params=params, verbose=False)


def free_own_context(llm: Any) -> None:
    """Free the context `llama_cpp.Llama` opened for itself, which the backend never uses (it makes its own)."""
    llm._ctx.close()


def vocab_pointer(llm: Any) -> Any:
    """The C `llama_vocab *` of `llm`'s weights, for the `llama_vocab_*` and `llama_token_*` functions."""
    return llm._model.vocab


def token_text(llm: Any, token: int) -> str:
    """The vocabulary's text of `token` (its spelling, special tokens included)."""
    return str(llm._model.token_get_text(token))


def is_recurrent(llm: Any) -> bool:
    """True for a recurrent or hybrid model (Mamba, Jamba): its state cannot be cut back to a prefix."""
    return bool(getattr(llm, "_is_recurrent", False) or getattr(llm, "_is_hybrid", False))


def new_sampler() -> Any:
    """An empty llama.cpp sampler chain (llama-cpp-python's `LlamaSampler`: `add_*` links, `close()` frees it)."""
    from llama_cpp import _internals

    return _internals.LlamaSampler()


def log_callback() -> Any:
    """llama-cpp-python's C log callback (`llama_cpp._logger.llama_log_callback`), which writes llama.cpp's log lines
    to its Python logger; mtmd's own log is pointed at it too, so images log as the model does."""
    from llama_cpp._logger import llama_log_callback

    return llama_log_callback

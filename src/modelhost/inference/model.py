"""The two core protocols: TextModel (a loaded model) and Backend (an engine that loads them).

Streaming is a Python iterator. An error raises from the iterator after the tokens produced so far were yielded,
and `err()` keeps it for callers that drain first. Breaking out of the loop (or closing the iterator) stops
generation within one token and frees the compute; it is not an error. `cancel=` (anything with `is_set()`) stops
it from another thread. `metrics().finish_reason` says why the last operation stopped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from modelhost.inference.types import BatchResult, ClassifyResult, GenerateMetrics, Message, ModelInfo, Token


@runtime_checkable
class TextModel(Protocol):
    """A loaded model. Every backend's model satisfies this; optional powers are capabilities (see capabilities)."""

    model_type: str
    """The architecture from the checkpoint's own metadata: "llama", "qwen2", "idefics3", ..."""

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        """Stream tokens for a raw prompt (no chat template)."""
        ...

    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        """Stream tokens for a conversation; the engine applies the model's own chat template."""
        ...

    def classify(self, prompts: Sequence[str], **opts: Any) -> list[ClassifyResult]:
        """One forward pass per prompt (batched where the engine can), one token chosen at the last position."""
        ...

    def batch_generate(self, prompts: Sequence[str], **opts: Any) -> list[BatchResult]:
        """Generate for every prompt; a prompt's failure lands in its own result, the call succeeds."""
        ...

    def info(self) -> ModelInfo:
        """Static facts from the checkpoint."""
        ...

    def metrics(self) -> GenerateMetrics:
        """Metrics of the last finished operation."""
        ...

    def err(self) -> BaseException | None:
        """The error of the last generate/chat, or None after a clean end."""
        ...

    def close(self) -> None:
        """Free memory, caches and threads. Idempotent."""
        ...

    def __enter__(self) -> TextModel: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class Backend(Protocol):
    """A named engine that loads models. `available()` is a cheap probe that never raises."""

    name: str

    def load_model(self, path: str, **load_opts: Any) -> TextModel:
        """Load a model from a path; raise ModelLoadError (or a subclass of ModelHostError) on failure."""
        ...

    def available(self) -> bool:
        """True when this engine can run here (its library imports, its device exists)."""
        ...


@runtime_checkable
class FormatProbe(Protocol):
    """Optional on a Backend: says whether it can load a given path, so an unpinned load picks a suitable engine."""

    def accepts(self, path: str) -> bool:
        """True when `path` is in a format this backend loads (a .gguf file, a Hugging Face folder, ...)."""
        ...

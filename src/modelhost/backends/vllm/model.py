"""VllmModel: a folder loaded into vLLM behind the TextModel contract.

generate, chat, classify, batch_generate, metrics and err come from the contract's OverEngine, over the model's
one engine (engine.py); what is written here is the model's static facts, its capabilities and its shutdown.
"""

from __future__ import annotations

import gc

from modelhost.backends.vllm.engine import VllmEngine
from modelhost.backends.vllm.loading import Loaded
from modelhost.backends.vllm.prompts import Prompts
from modelhost.errors import ModelClosedError
from modelhost.inference.chat_tools import ToolSupport
from modelhost.inference.options import GenerateOptions
from modelhost.inference.over_engine import OverEngine
from modelhost.inference.types import ModelInfo


class VllmModel(OverEngine):
    """A checkpoint served by vLLM. TextModel (over its EngineModel engine), ChatFeatures, OptionChecker and
    PromptBound. Not thread-safe, as every model: the host drives it from one long-lived thread."""

    def __init__(self, loaded: Loaded) -> None:
        self.loaded = loaded
        self.model_type: str = loaded.model_type
        info = loaded.info
        self.prompts = Prompts(loaded.tokenizer, context_length=info.context_length, vocab_size=info.vocab_size)
        self._engine = VllmEngine(loaded, self.prompts, loaded.parallel)
        super().__init__()

    def engine(self) -> VllmEngine:
        """The model's one engine (EngineModel): `parallel` slots over vLLM's engine."""
        if self.loaded.llm is None:
            raise ModelClosedError("this vllm model was closed")
        return self._engine

    def info(self) -> ModelInfo:
        """Static facts from the checkpoint's config, as vLLM read it."""
        return self.loaded.info

    def check_options(self, options: GenerateOptions) -> None:
        """Refuse options this model cannot honour, before any compute (the OptionChecker capability)."""
        self._engine.options(options)

    def prompt_byte_limit(self) -> int:
        """Most UTF-8 bytes a prompt may have (PromptBound), fixed at load, so any thread may ask."""
        return self.prompts.byte_limit

    def renders_tools(self) -> bool:
        """Whether the chat template renders `tools` (ChatFeatures), probed once from the template text."""
        return self.tool_support().tools

    def tool_support(self) -> ToolSupport:
        """What this model's template renders of tools and earlier calls (chat_tools.probe, run once)."""
        return self.prompts.tool_support()

    def thinks(self) -> bool:
        """No thought channel is tracked by this backend (ChatFeatures): its tokens are all content."""
        return False

    def close(self) -> None:
        """End every request and shut vLLM's engine down (its workers, its KV cache). Idempotent."""
        llm = self.loaded.llm
        if llm is None:
            return
        self._engine.close()
        self.loaded.llm = None  # every later call reads this as closed
        llm.engine_core.shutdown()
        del llm
        gc.collect()

    def __enter__(self) -> VllmModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

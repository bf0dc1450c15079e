"""What a caller sends (a raw prompt, prompt ids, or chat messages with tools) as the token ids vLLM is given.

modelhost renders and tokenizes here rather than handing vLLM text: the contract's decoder needs the prompt's ids
(a template that opens a thought in the prompt), a prompt is bounded before it costs anything, and the host can
then tokenize on a worker thread (`VllmEngine.prepare`) so the thread that steps every request only admits.
The tokenizer is the one vLLM loaded for the checkpoint, so vLLM sees exactly the ids it would have made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modelhost.errors import InvalidInputError, ModelHostError, UnsupportedAttachmentError
from modelhost.inference import chat_tools, prompt_checks
from modelhost.inference.chat_tools import ToolSupport
from modelhost.inference.engine import EngineRequest
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Message, has_images


class Prompts:
    """Renders and tokenizes prompts for one loaded checkpoint; safe on any thread (it touches no engine state)."""

    def __init__(self, tokenizer: Any, *, context_length: int, vocab_size: int) -> None:
        self._tokenizer = tokenizer
        self._context = context_length
        self._vocab_size = vocab_size
        template = str(getattr(tokenizer, "chat_template", None) or "")
        # enable_thinking goes only to templates that read it; any other template renders exactly as it was written.
        self._template_thinks = "enable_thinking" in template
        self._tools: ToolSupport | None = None
        #: Most UTF-8 bytes a prompt can have and still fit the context (PromptBound), fixed at load.
        self.byte_limit = prompt_checks.byte_limit(context_length, tokenizer.get_vocab())

    def ids(self, request: EngineRequest, opts: GenerateOptions) -> tuple[int, ...]:
        """The prompt's token ids: a chat's through the template, raw text with the tokenizer's BOS policy."""
        if request.messages:
            return self.chat(request.messages, opts)
        if request.prompt_ids is not None:
            return self.from_ids(request.prompt_ids)
        return self.raw(request.prompt if request.prompt is not None else "")

    def raw(self, text: str) -> tuple[int, ...]:
        """A raw prompt (no chat template), tokenized with the tokenizer's own BOS/EOS policy."""
        return self._encode(text, special=True)

    def from_ids(self, ids: Sequence[int]) -> tuple[int, ...]:
        """A prompt given as token ids of this vocabulary: bounded by the context first, then each id checked."""
        return prompt_checks.check_prompt_ids(ids, self._vocab_size, self._context)

    def chat(self, messages: Sequence[Message], opts: GenerateOptions) -> tuple[int, ...]:
        """The assistant's turn after `messages`, through the chat template (tools and enable_thinking reach it)."""
        prompt_checks.check_messages(messages)
        if has_images(messages):
            raise UnsupportedAttachmentError("the vllm backend takes text only; serve a vision model with transformers")
        # The template only adds text around the messages: contents over the byte bound are over it rendered too.
        prompt_checks.check_bytes(sum(len(m.content.encode("utf-8")) for m in messages), self.byte_limit, self._context)
        extra: dict[str, Any] = {}
        if opts.enable_thinking is not None and self._template_thinks:
            extra["enable_thinking"] = opts.enable_thinking
        inputs = chat_tools.template_inputs(messages, opts.tool_specs(), self.tool_support)
        extra.update(inputs.variables())
        try:
            text = self._tokenizer.apply_chat_template(
                inputs.text_turns(), add_generation_prompt=True, tokenize=False, **extra
            )
        except ModelHostError:
            raise
        except Exception as exc:  # no template, or a template that refuses this conversation
            raise InvalidInputError(f"the chat template cannot render these messages: {exc}") from exc
        return self._encode(str(text), special=False)

    def tool_support(self) -> ToolSupport:
        """Whether this model's template renders tools and earlier calls: probed once (see chat_tools)."""
        if self._tools is None:
            self._tools = chat_tools.probe_hf(self._tokenizer)
        return self._tools

    def _encode(self, text: str, *, special: bool) -> tuple[int, ...]:
        if not isinstance(text, str):
            raise InvalidInputError(f"a prompt must be a string, got {type(text).__name__}")
        prompt_checks.check_bytes(len(text.encode("utf-8")), self.byte_limit, self._context)
        ids = self._tokenizer(text, add_special_tokens=special)["input_ids"]
        return prompt_checks.fits(tuple(int(i) for i in ids), self._context)

"""What a caller sends (a raw prompt, or chat messages with images and tools) as a `Prompt` ready for prefill.

A raw prompt is tokenised with the tokenizer's own BOS/EOS policy; chat goes through the checkpoint's chat
template (the processor's for a vision-language model, whose images the contract's images module checks and
decodes here).
Every prompt is bounded before it costs anything: by its bytes before tokenising (a 25 MiB prompt otherwise held
the model thread for 10-30 s only to be refused for its token count), then by its tokens against the context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from modelhost.errors import InvalidInputError, ModelHostError, UnsupportedAttachmentError
from modelhost.inference import chat_tools, prompt_checks
from modelhost.inference.chat_tools import ToolSupport
from modelhost.inference.images import to_rgb_image
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Message, has_images

if TYPE_CHECKING:
    from modelhost.backends.transformers.loading import Checkpoint

#: Submodule names under which vision-language models in transformers keep their image encoder.
VISION_TOWERS = frozenset({"vision_model", "vision_tower", "visual", "vision_encoder"})


@dataclass(frozen=True, slots=True)
class Prompt:
    """A prompt ready for prefill: its token ids, and any extra model inputs (pixel values) for the first pass."""

    ids: tuple[int, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)


class Prompts:
    """Renders and tokenises prompts for one loaded checkpoint.

    The tools probe (does the template render `tools`?) runs at most once, on first need, and renders template
    text only, touching no weights or cache, so a door may ask it beside a generation.
    """

    def __init__(self, checkpoint: Checkpoint, *, vocab_size: int) -> None:
        self.checkpoint = checkpoint
        self._vocab_size = vocab_size  # the logits' width: the ids a prompt may hold
        #: Most UTF-8 bytes a prompt can have and still fit the context (PromptBound), fixed at load.
        self.byte_limit = prompt_checks.byte_limit(checkpoint.context_length, checkpoint.tokenizer.get_vocab())
        template = getattr(checkpoint.processor or checkpoint.tokenizer, "chat_template", None) or ""
        # enable_thinking goes only to templates that read it; any other template renders exactly as it was written.
        self.template_thinks = "enable_thinking" in str(template)
        self._tools_probed: ToolSupport | None = None

    def raw(self, text: str) -> Prompt:
        """A raw prompt (no chat template), tokenised with the tokenizer's own BOS/EOS policy."""
        return Prompt(self._encode(text, special=True))

    def from_ids(self, ids: Sequence[int]) -> Prompt:
        """A prompt given as token ids of this vocabulary: bounded by the context first, then each id checked."""
        return Prompt(prompt_checks.check_prompt_ids(ids, self._vocab_size, self.checkpoint.context_length))

    def chat(self, messages: Sequence[Message], opts: GenerateOptions) -> Prompt:
        """The assistant's turn after `messages`, through the chat template (images included); `opts` are the
        request's checked options (enable_thinking and tools reach the template)."""
        prompt_checks.check_messages(messages)
        if has_images(messages) and not self.accepts_images():
            kind = self.checkpoint.model.config.model_type
            raise UnsupportedAttachmentError(f"this {kind} model does not accept images")
        # The template only adds text around the messages: contents over the byte bound are over it rendered too.
        self._check_bytes(sum(len(m.content.encode("utf-8")) for m in messages))
        thinking = opts.enable_thinking is not None and self.template_thinks
        extra: dict[str, Any] = {"enable_thinking": opts.enable_thinking} if thinking else {}
        inputs = chat_tools.template_inputs(messages, opts.tool_specs(), self.tool_support)
        extra.update(inputs.variables())
        try:
            if self.checkpoint.processor is not None:
                return self._vision_chat(inputs.turns, extra, inputs.support)
            text = self.checkpoint.tokenizer.apply_chat_template(
                inputs.text_turns(), add_generation_prompt=True, tokenize=False, **extra
            )
        except ModelHostError:
            raise
        except Exception as exc:  # no template, or a template that refuses this conversation
            raise InvalidInputError(f"the chat template cannot render these messages: {exc}") from exc
        return Prompt(self._encode(str(text), special=False))

    def accepts_images(self) -> bool:
        """A live probe: a processor with an image processor, and a vision tower in the loaded weights."""
        ckpt = self.checkpoint
        if ckpt.model is None or ckpt.processor is None or getattr(ckpt.processor, "image_processor", None) is None:
            return False
        return any(name.rsplit(".", 1)[-1] in VISION_TOWERS for name, _ in ckpt.model.named_modules())

    def tool_support(self) -> ToolSupport:
        """Whether this model's template renders tools and earlier calls: probed once (see chat_tools)."""
        if self._tools_probed is None:
            self._tools_probed = chat_tools.probe_hf(self.checkpoint.processor or self.checkpoint.tokenizer)
        return self._tools_probed

    # ------------------------------------------------------------------------------------------------ internals

    def _encode(self, text: str, *, special: bool) -> tuple[int, ...]:
        """Token ids of `text`; `special` adds the tokenizer's own BOS/EOS policy (raw prompts, not templates)."""
        if not isinstance(text, str):
            raise InvalidInputError(f"a prompt must be a string, got {type(text).__name__}")
        self._check_bytes(len(text.encode("utf-8")))
        ids = self.checkpoint.tokenizer(text, add_special_tokens=special)["input_ids"]
        return self._fits(tuple(int(i) for i in ids))

    def _check_bytes(self, size: int) -> None:
        """Refuse text of more bytes than the context's tokens can stand for, before it is tokenised."""
        prompt_checks.check_bytes(size, self.byte_limit, self.checkpoint.context_length)

    def _fits(self, ids: tuple[int, ...]) -> tuple[int, ...]:
        return prompt_checks.fits(ids, self.checkpoint.context_length)

    def _vision_chat(self, messages: Sequence[Message], extra: dict[str, Any], support: ToolSupport) -> Prompt:
        # Content as a list of parts, images first: the form Idefics3/SmolVLM templates iterate over, and the order
        # docling and the wire use (the page, then the instruction).
        import torch

        processor: Any = self.checkpoint.processor
        conversation = []
        images: list[Any] = []
        for m in messages:
            parts: list[dict[str, Any]] = [{"type": "image"} for _ in m.images]
            text = chat_tools.text_of(m, support)
            if text:
                parts.append({"type": "text", "text": text})
            conversation.append(chat_tools.turn(m, parts, support))
            images.extend(to_rgb_image(img, len(images)) for img in m.images)
        text = processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False, **extra)
        encoded = processor(text=[text], images=[images] if images else None, return_tensors="pt")
        ids = self._fits(tuple(int(i) for i in encoded["input_ids"][0].tolist()))
        dtype = next(self.checkpoint.model.parameters()).dtype
        pixels: dict[str, Any] = {}
        for key, value in encoded.items():
            if key in ("input_ids", "attention_mask") or not isinstance(value, torch.Tensor):
                continue
            value = value.to(self.checkpoint.device)
            pixels[key] = value.to(dtype) if value.is_floating_point() else value
        return Prompt(ids, pixels)

"""Engine requests to what llama.cpp evaluates: options checked and resolved, prompts rendered and tokenized.

Everything a request is checked against happens here, before it takes a slot: the options (the contract's, then
llama.cpp's own limits, then a JSON Schema its grammar engine must be able to follow), the prompt's size (by its
bytes before tokenizing, then by its tokens), images (their bounds, then the projector's preprocessing). So a bad
request is refused at `admit` with an error naming what was wrong, and costs no compute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from modelhost.backends.llama_cpp import chat as chat_template
from modelhost.backends.llama_cpp import grammar as constrained
from modelhost.backends.llama_cpp.sampling import TokenChooser, check_supported
from modelhost.backends.llama_cpp.vision import Projector, VisionPrompt, render_with_markers, rgb_pixels
from modelhost.backends.llama_cpp.vocab import Vocab
from modelhost.errors import InvalidInputError, UnsupportedAttachmentError
from modelhost.inference.decoding import ThoughtTracker
from modelhost.inference.engine import EngineRequest
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import Message, has_images


class Prompter:
    """The request side of one loaded GGUF (its vocabulary, chat template, sampling defaults, projector)."""

    def __init__(
        self,
        vocab: Vocab,
        *,
        template: str | None,
        defaults: Mapping[str, Any],
        context_length: int,
        model_type: str,
        projector: Projector | None = None,
    ) -> None:
        self.vocab = vocab
        self.template = template
        #: The checkpoint's own sampling defaults (general.sampling.*): between a request's options and the
        #: contract's fallbacks.
        self.defaults: dict[str, Any] = dict(defaults)
        self.context_length = context_length
        self.model_type = model_type
        self.projector = projector

    def options(self, raw: GenerateOptions | Mapping[str, Any]) -> GenerateOptions:
        """The request's options parsed (unless they come parsed), checked against llama.cpp's limits and its grammar
        engine (which caches what it compiled), resolved."""
        parsed = GenerateOptions.of(raw)
        check_supported(parsed)
        constrained.check(parsed, self.vocab.handle)  # a schema llama.cpp cannot follow is refused before compute
        return parsed.resolved(self.defaults)

    def grammar(self, opts: GenerateOptions) -> tuple[Any, str] | None:
        """(vocab, GBNF) of a request with a JSON Schema, else None."""
        gbnf = constrained.check(opts, self.vocab.handle)
        return None if gbnf is None else (self.vocab.handle, gbnf)

    def prompt(self, request: EngineRequest, options: GenerateOptions) -> list[int] | VisionPrompt:
        """What the engine evaluates for `request`: token ids, or a vision prompt (ids and mtmd chunks)."""
        if request.prompt_ids is not None:
            return self._ids(request.prompt_ids)
        if request.messages:
            if has_images(request.messages):
                return self.vision_prompt(request.messages, options)
            return self.chat_tokens(request.messages, options)
        return self.vocab.encode(request.prompt or "", chat=False, limit=self.context_length)

    def chat_tokens(self, messages: Sequence[Message], options: GenerateOptions) -> list[int]:
        """The GGUF's own chat template rendered and tokenized (text turns only)."""
        if has_images(messages):
            raise UnsupportedAttachmentError(
                f"model {self.model_type!r} was loaded without a vision projector, so it cannot take images "
                "(give a GGUF vision model its mmproj file, or load a vision model with the transformers backend)"
            )
        text = chat_template.render(
            self.template,
            messages,
            bos_token=self.vocab.bos_text,
            eos_token=self.vocab.eos_text,
            enable_thinking=options.enable_thinking,
            tools=options.tool_specs(),
        )
        return self.vocab.encode(text, chat=True, limit=self.context_length)

    def vision_prompt(self, messages: Sequence[Message], options: GenerateOptions) -> VisionPrompt:
        """Turns with images: checked, rendered with a media marker per image, tokenized by mtmd."""
        projector = self.projector
        if projector is None:
            self.chat_tokens(messages, options)  # raises: this model takes no images
            raise AssertionError("unreachable")
        chat_template.check_messages(messages)
        pixels = [rgb_pixels(img, i) for i, img in enumerate(img for m in messages for img in m.images)]
        vocab = self.vocab
        text = render_with_markers(
            self.template, messages, options, len(pixels), bos_text=vocab.bos_text, eos_text=vocab.eos_text
        )
        add_special = vocab.add_bos and vocab.bos >= 0 and not text.startswith(vocab.bos_text or "\0")
        chunks = projector.tokenize(text, pixels, add_special=add_special)
        if sum(chunks.positions) > self.context_length:
            chunks.free()
            raise InvalidInputError(
                f"the prompt with its images takes {sum(chunks.positions)} positions but the context holds "
                f"{self.context_length}; send fewer or smaller images, or load the model with a larger context_length"
            )
        return VisionPrompt(chunks)

    def chooser(self, options: GenerateOptions, history: Sequence[int]) -> TokenChooser:
        """The request's token chooser (its sampler chain, thought tracker and grammar)."""
        grammar = self.grammar(options)
        vocab = self.vocab
        return TokenChooser(
            options,
            n_vocab=vocab.size,
            stops=vocab.eog | set(options.stop_tokens),
            history=history,
            thought=ThoughtTracker.for_request(vocab.think, options, history, constrained=grammar is not None),
            grammar=grammar,
            piece=vocab.piece,
        )

    def _ids(self, ids: Sequence[int]) -> list[int]:
        tokens = [int(t) for t in ids]
        if not tokens:
            raise InvalidInputError("prompt_ids: an empty prompt has nothing to continue")
        if len(tokens) > self.context_length:
            raise InvalidInputError(f"prompt_ids: {len(tokens)} tokens but the context holds {self.context_length}")
        bad = next((t for t in tokens if not 0 <= t < self.vocab.size), None)
        if bad is not None:
            raise InvalidInputError(f"prompt_ids: {bad} is not a token of this vocabulary ({self.vocab.size} ids)")
        return tokens

"""TransformersModel: a loaded checkpoint behind the TextModel contract, plus vision and attention inspection.

Generation is a manual prefill/decode over a `DynamicCache` rather than `model.generate()`: the contract wants one
token at a time from a lazy iterator (so breaking out stops the engine within a token), our own sampler steps, and
batching with finished rows dropped. Each engine step is an `inference_mode` call of its own, never a block held
open across a `yield`, because the caller's code runs between yields and must not inherit inference mode.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from modelhost.backends.transformers.attention import capturing
from modelhost.backends.transformers.device import memory_usage, reset_peak_memory
from modelhost.backends.transformers.grammar import Grammars
from modelhost.backends.transformers.grammar import check as check_schema
from modelhost.backends.transformers.loading import Checkpoint
from modelhost.backends.transformers.pieces import token_bytes
from modelhost.backends.transformers.sampling import RowState, Sampler, ThoughtTokens, loop_hooks, make_sampler
from modelhost.backends.transformers.training import TrainingMixin
from modelhost.backends.transformers.vision import to_rgb_image
from modelhost.errors import (
    GenerationError,
    InvalidInputError,
    ModelClosedError,
    ModelHostError,
    UnsupportedAttachmentError,
)
from modelhost.inference import chat_tools
from modelhost.inference.chat_tools import ToolSupport
from modelhost.inference.generation import LoopOutcome, MetricsClock, TokenFeed, decode_loop
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import (
    ROLES,
    AttentionSnapshot,
    BatchResult,
    ClassifyResult,
    EmbeddingResult,
    FinishReason,
    GenerateMetrics,
    Message,
    ModelInfo,
    Token,
    has_images,
)

if TYPE_CHECKING:
    from modelhost.backends.transformers.batch import TransformersBatchEngine

#: Requests decoded together when the load sets no `parallel` (as llama_cpp): batched decode steps cost little more
#: than one on a CPU (bench/batching.py: ~1.8x the aggregate of one at a time for 4 rows).
DEFAULT_PARALLEL = 4

#: Submodule names under which vision-language models in transformers keep their image encoder.
_VISION_TOWERS = frozenset({"vision_model", "vision_tower", "visual", "vision_encoder"})


@dataclass(slots=True)
class _Prompt:
    """A prompt ready for prefill: its token ids and any extra model inputs (pixel values) for the first pass."""

    ids: list[int]
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class _BatchRow:
    """One prompt of `batch_generate` while the batch decodes."""

    prompt_ids: list[int]
    state: RowState
    feed: TokenFeed = field(default_factory=TokenFeed)
    clock: MetricsClock = field(default_factory=MetricsClock)
    outcome: LoopOutcome = field(default_factory=LoopOutcome)
    loop: Iterator[Token] | None = None
    tokens: list[Token] = field(default_factory=list)
    error: BaseException | None = None


class TransformersModel(TrainingMixin):
    """A checkpoint loaded with transformers. TextModel, VisionModel, ChatFeatures, AttentionInspector, and (through
    TrainingMixin, see training.py) TrainableModel and TrainerModel for LoRA fine-tuning.

    Not thread-safe: the host drives each model from one long-lived thread. ChatFeatures are the exception (a door
    asks them beside a generation): the tools probe renders the template text only, touching no weights or cache.
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        self._ckpt = checkpoint
        self._model: Any = checkpoint.model
        self._tokenizer: Any = checkpoint.tokenizer
        self._processor: Any = checkpoint.processor
        self._device = checkpoint.device
        config = checkpoint.model.config
        self._text_config = config.get_text_config()
        self.model_type: str = str(config.model_type)
        self._piece = token_bytes(checkpoint.tokenizer)
        self._thought = ThoughtTokens.find(checkpoint.tokenizer.get_vocab().get)
        template = getattr(self._processor or self._tokenizer, "chat_template", None) or ""
        # enable_thinking goes only to templates that read it; any other template renders exactly as it was written.
        self._template_thinks = "enable_thinking" in str(template)
        self._tools_probed: ToolSupport | None = None  # whether the template renders tools; probed on first use
        pad = self._tokenizer.pad_token_id
        self._pad_id = int(pad if pad is not None else min(checkpoint.eos_ids, default=0))
        self._info = self._read_info()
        # json_schema's token masks over the logits' width (grammar.py); llguidance's view of the tokenizer is
        # built at the first schema.
        self._grammars = Grammars(self._tokenizer, vocab_size=self._info.vocab_size, eos_ids=checkpoint.eos_ids)
        self._metrics = GenerateMetrics()
        self._err: BaseException | None = None
        self._closed = False
        self._splicable: bool | None = None

    # ---------------------------------------------------------------------------------------------------- contract

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        """Stream tokens continuing a raw prompt (no chat template). Options are validated here, before any work."""
        options = self._options(opts)
        return self._run(_Prompt(self._encode(prompt, special=True)), options)

    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        """Stream the assistant's reply to `messages` through the checkpoint's chat template (images included)."""
        options = self._options(opts)
        return self._run(self._render_chat(messages, options), options)

    def classify(self, prompts: Sequence[str], **opts: Any) -> list[ClassifyResult]:
        """One batched forward pass over all prompts (left-padded); one token chosen at each last position."""
        options = self._options(opts)
        seqs = [self._encode(p, special=True) for p in prompts]
        clock = MetricsClock()
        reset_peak_memory(self._device)
        results: list[ClassifyResult] = []
        for chunk in self._chunks(seqs):
            logits = self._prefill(chunk, cache=None)[0]
            sampler = self._sampler(options)
            rows = [self._row(ids, options) for ids in chunk]
            chosen = self._sample(sampler, logits, rows)
            raw = logits.float().cpu().numpy() if options.logits else None
            for i, token in enumerate(chosen):
                text = self._piece(token).decode("utf-8", errors="replace")
                results.append(ClassifyResult(Token(token, text), raw[i] if raw is not None else None))
        clock.prefill_done(sum(len(s) for s in seqs))
        clock.generated_tokens = len(results)
        self._metrics = self._finish(clock, "length")
        return results

    def batch_generate(self, prompts: Sequence[str], **opts: Any) -> list[BatchResult]:
        """Decode all prompts together: one forward per step for the whole batch, finished rows dropped.

        A prompt that cannot run (empty, too long, not text) gets its error in its own result; so do the rows in
        flight when the engine itself fails. The call succeeds either way.
        """
        options = self._options(opts)
        self._check_open()
        rows: list[_BatchRow | None] = []
        errors: dict[int, BaseException] = {}
        for i, prompt in enumerate(prompts):
            try:
                ids = self._encode(prompt, special=True)
            except ModelHostError as exc:
                errors[i] = exc
                rows.append(None)
                continue
            rows.append(_BatchRow(prompt_ids=ids, state=self._row(ids, options)))
        live = [r for r in rows if r is not None]
        clock = MetricsClock()
        clock.prompt_tokens = sum(len(r.prompt_ids) for r in live)
        reset_peak_memory(self._device)
        for row in live:
            row.loop = decode_loop(
                row.feed, self._piece, options, eos_ids=self._ckpt.eos_ids, clock=row.clock, outcome=row.outcome,
                **loop_hooks(options, row.state),
            )  # fmt: skip
        if options.max_tokens:  # max_tokens=0: every loop ends before asking for an id; no forward pass at all
            for chunk in self._chunks(live):
                self._decode_batch(chunk, options, clock)
        for row in live:
            assert row.loop is not None
            row.tokens.extend(row.loop)  # finished loops yield nothing more; this only closes them cleanly
        results: list[BatchResult] = []
        for i, maybe in enumerate(rows):
            if maybe is None:
                results.append(BatchResult(error=errors[i], finish_reason="error"))
            else:
                reason = "error" if maybe.error is not None else maybe.outcome.finish_reason
                results.append(BatchResult(tuple(maybe.tokens), maybe.error, reason))
        clock.generated_tokens = sum(r.clock.generated_tokens for r in live)
        forced = any(r.state.budget_forced for r in live)
        self._metrics = self._finish(clock, _summary_reason(results), thinking_budget_forced=forced)
        return results

    def info(self) -> ModelInfo:
        """Static facts from the checkpoint's config."""
        return self._info

    def metrics(self) -> GenerateMetrics:
        """Metrics of the last finished operation."""
        return self._metrics

    def err(self) -> BaseException | None:
        """The error of the last generate/chat, None after a clean (or abandoned) end."""
        return self._err

    def close(self) -> None:
        """Drop the weights and caches. Idempotent; later calls raise ModelClosedError."""
        if self._closed:
            return
        self._closed = True
        self._model = self._processor = None
        self._ckpt.model = self._ckpt.processor = None
        gc.collect()
        if self._device.type == "cuda":
            torch.cuda.empty_cache()

    def __enter__(self) -> TransformersModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------ capabilities

    def batch_slots(self) -> int:
        """Requests `open_batch()` decodes together: the `parallel` load option (default DEFAULT_PARALLEL); 1 when
        this model's cache cannot be spliced (see batch.py)."""
        if self._splicable is None:
            from modelhost.backends.transformers.batch import splicable

            self._splicable = splicable(self._model)
        return (self._ckpt.parallel or DEFAULT_PARALLEL) if self._splicable else 1

    def open_batch(self) -> TransformersBatchEngine:
        """A continuous-batching engine with `batch_slots()` slots over this model (see batch.py)."""
        self._check_open()
        from modelhost.backends.transformers.batch import TransformersBatchEngine

        return TransformersBatchEngine(self, self.batch_slots())

    def embedding_size(self) -> int:
        """Length of the vectors `embed` returns: the text config's hidden size (the EmbeddingModel capability)."""
        self._check_open()
        from modelhost.backends.transformers import embedding

        return embedding.embedding_size(self._model)

    def embed(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingResult:
        """Mean-pooled last hidden states of `texts`, a padded batch at a time (embedding.py). Runs without a cache,
        so a generation suspended between two tokens is left as it was (the EmbeddingModel capability)."""
        self._check_open()
        from modelhost.backends.transformers import embedding

        return embedding.embed(
            self._model, self._tokenizer, texts, limit=self._ckpt.context_length, pad_id=self._pad_id,
            device=self._device, normalize=normalize, truncate=truncate,
        )  # fmt: skip

    def accepts_images(self) -> bool:
        """A live probe: a processor with an image processor, and a vision tower in the loaded weights."""
        if self._closed or self._processor is None or getattr(self._processor, "image_processor", None) is None:
            return False
        return any(name.rsplit(".", 1)[-1] in _VISION_TOWERS for name, _ in self._model.named_modules())

    def renders_tools(self) -> bool:
        """Whether the chat template renders `tools` (ChatFeatures): the probe chat rendering already makes, run
        once per model and cached."""
        return self._tool_support().tools

    def thinks(self) -> bool:
        """Whether the vocabulary has a thought channel's markers (ChatFeatures): found once, at load."""
        return self._thought is not None

    def inspect_attention(self, prompt: str, **opts: Any) -> AttentionSnapshot:
        """One prefill over `prompt`, capturing each layer's post-RoPE keys and queries as numpy arrays.

        keys[layer] is (KV heads, seq_len, head_dim); queries[layer] is (query heads, seq_len, head_dim).
        """
        GenerateOptions.parse(opts)  # the same options as generate are accepted (and validated), none apply
        ids = self._encode(prompt, special=True)
        with capturing(self._model) as recorder:
            self._step(torch.tensor([ids], device=self._device), cache=None)
        layers = sorted(recorder.keys)
        keys = tuple(recorder.keys[n][0].float().cpu().numpy() for n in layers)
        queries = tuple(recorder.queries[n][0].float().cpu().numpy() for n in layers)
        if not keys:
            raise GenerationError(f"{type(self._model).__name__} does not use the attention interface; nothing seen")
        return AttentionSnapshot(
            num_layers=len(keys),
            num_heads=int(keys[0].shape[0]),
            num_query_heads=int(queries[0].shape[0]),
            seq_len=len(ids),
            head_dim=int(keys[0].shape[-1]),
            architecture=self.model_type,
            keys=keys,
            queries=queries,
            token_ids=tuple(ids),
        )

    # ------------------------------------------------------------------------------------------ single generation

    def _run(self, prompt: _Prompt, opts: GenerateOptions) -> Iterator[Token]:
        """The token stream of one generation; records metrics and err() however it ends."""
        clock = MetricsClock()
        outcome = LoopOutcome()
        row = self._row(prompt.ids, opts)
        self._err = None
        reset_peak_memory(self._device)
        loop = decode_loop(
            self._token_ids(prompt, opts, clock, row),
            self._piece,
            opts,
            eos_ids=self._ckpt.eos_ids,
            clock=clock,
            outcome=outcome,
            **loop_hooks(opts, row),
        )
        try:
            yield from loop
        except Exception as exc:
            outcome.finish_reason = "error"
            error = exc if isinstance(exc, ModelHostError) else GenerationError(f"generation failed: {exc}")
            outcome.error = self._err = error
            if error is exc:
                raise
            raise error from exc
        finally:
            _close(loop)  # also closes the engine's id stream, dropping its cache now rather than at GC
            self._metrics = self._finish(clock, outcome.finish_reason, thinking_budget_forced=row.budget_forced)

    def _token_ids(self, prompt: _Prompt, opts: GenerateOptions, clock: MetricsClock, row: RowState) -> Iterator[int]:
        """The engine's sampled ids, one model step per id, computed only when the loop asks for the next one."""
        from transformers import DynamicCache

        self._check_open()
        sampler = self._sampler(opts)
        cache = DynamicCache(config=self._model.config)
        ids = torch.tensor([prompt.ids], device=self._device)
        token = self._sample(sampler, self._step(ids, cache=cache, extra=prompt.extra), [row])[0]
        clock.prefill_done(len(prompt.ids))
        length = len(prompt.ids) + 1
        limit = self._ckpt.context_length
        while True:
            yield token
            if limit and length >= limit:
                return  # the context is full: the loop reports a length stop
            logits = self._step(torch.tensor([[token]], device=self._device), cache=cache)
            token = self._sample(sampler, logits, [row])[0]
            length += 1

    # ------------------------------------------------------------------------------------------------- batching

    def _decode_batch(self, rows: list[_BatchRow], opts: GenerateOptions, clock: MetricsClock) -> None:
        """Prefill `rows` together, then decode them in lockstep until each one's loop has ended."""
        from transformers import DynamicCache

        sampler = self._sampler(opts)
        cache = DynamicCache(config=self._model.config)
        active = list(rows)
        try:
            logits, mask, positions = self._prefill([r.prompt_ids for r in rows], cache=cache)
            while active:
                chosen = self._sample(sampler, logits, [r.state for r in active])
                if not clock.prefill_done_at:  # the first chunk's first token ends the batch's prefill
                    clock.prefill_done(clock.prompt_tokens)
                keep = [slot for slot, row in enumerate(active) if self._advance(row, chosen[slot])]
                if not keep:
                    return
                if len(keep) < len(active):
                    # Finished rows leave the batch: their cache rows, mask and positions go with them.
                    index = torch.tensor(keep, device=self._device)
                    cache.batch_select_indices(index)
                    mask, positions = mask[index], positions[index]
                    active = [active[k] for k in keep]
                    chosen = [chosen[k] for k in keep]
                mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
                positions = positions[:, -1:] + 1
                step_ids = torch.tensor(chosen, device=self._device).unsqueeze(1)
                logits = self._step(step_ids, cache=cache, attention_mask=mask, position_ids=positions)
        except Exception as exc:
            error = exc if isinstance(exc, ModelHostError) else GenerationError(f"batch generation failed: {exc}")
            for row in active:
                if row.error is None and row.loop is not None:
                    row.error = error
                    row.outcome.finish_reason = "error"
                    _close(row.loop)

    def _advance(self, row: _BatchRow, token: int) -> bool:
        """Give `row` its next id and collect what its loop yields; True while the row wants more ids."""
        assert row.loop is not None
        row.feed.push(token)
        try:
            row.tokens.append(next(row.loop))
        except StopIteration:
            return False
        # decode_loop records its final reason before yielding its last token; "cancelled" is its initial value
        # and also what a cancelled loop ends with, but that path yields nothing, so it ended in StopIteration.
        if row.outcome.finish_reason != "cancelled":
            _close(row.loop)
            return False
        limit = self._ckpt.context_length
        if limit and len(row.prompt_ids) + row.state.generated >= limit:
            row.tokens.extend(row.loop)  # the feed is empty: the loop ends as a length stop, flushing held text
            return False
        return True

    def _prefill(self, seqs: Sequence[list[int]], *, cache: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Forward left-padded `seqs`; return last-position logits, the attention mask and the position ids.

        Left padding puts every row's last real token in the same column, so one slice gives every row's logits and
        decode steps append in lockstep. Positions count real tokens only, so a padded row sees the same rotary
        positions as it would alone.
        """
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, seq in enumerate(seqs):
            ids[r, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[r, width - len(seq) :] = 1
        ids, mask = ids.to(self._device), mask.to(self._device)
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        logits = self._step(ids, cache=cache, attention_mask=mask, position_ids=positions)
        return logits, mask, positions

    # ------------------------------------------------------------------------------------------------ engine steps

    @torch.inference_mode()
    def _step(
        self,
        input_ids: torch.Tensor,
        *,
        cache: Any,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        extra: dict[str, Any] | None = None,
    ) -> torch.Tensor:
        """One forward pass; the logits at each row's last position, (rows, vocabulary)."""
        self._check_open()
        kwargs: dict[str, Any] = {"input_ids": input_ids, "use_cache": cache is not None, **(extra or {})}
        if cache is not None:
            kwargs[self._ckpt.cache_kwarg] = cache
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        if position_ids is not None:
            kwargs["position_ids"] = position_ids
        if self._ckpt.logits_to_keep:
            kwargs["logits_to_keep"] = 1  # the LM head over the last position only, not the whole prompt
        return self._model(**kwargs).logits[:, -1, :]  # type: ignore[no-any-return]

    @torch.inference_mode()
    def _sample(self, sampler: Sampler, logits: torch.Tensor, rows: Sequence[RowState]) -> list[int]:
        return sampler(logits, rows)

    def _sampler(self, opts: GenerateOptions) -> Sampler:
        stops = set(self._ckpt.eos_ids) | set(opts.stop_tokens)
        return make_sampler(opts, stop_ids=stops, thought=self._thought, device=self._device, piece=self._piece)

    def _row(self, ids: list[int], opts: GenerateOptions) -> RowState:
        """One sequence's sampling state: whether its prompt left it inside a thought, and its grammar matcher."""
        matcher = self._grammars.matcher(opts)
        # A grammar-constrained answer is the reply itself, whatever the template opened (RowState.accept).
        inside = matcher is None and self._thought is not None and self._thought.inside_after(ids)
        return RowState(context=list(ids), in_thought=inside, matcher=matcher)

    # ------------------------------------------------------------------------------------------------ prompts

    def check_options(self, **opts: Any) -> None:
        """Refuse options this model cannot honour, before any compute (the OptionChecker capability)."""
        self._options(opts)

    def _options(self, opts: dict[str, Any]) -> GenerateOptions:
        self._check_open()
        parsed = GenerateOptions.parse(opts)
        check_schema(parsed)  # a schema llguidance cannot enforce is refused here, naming json_schema (grammar.py)
        return parsed.resolved(self._ckpt.generation_defaults)

    def _encode(self, text: str, *, special: bool) -> list[int]:
        """Token ids of `text`; `special` adds the tokenizer's own BOS/EOS policy (raw prompts, not templates)."""
        if not isinstance(text, str):
            raise InvalidInputError(f"a prompt must be a string, got {type(text).__name__}")
        ids = [int(i) for i in self._tokenizer(text, add_special_tokens=special)["input_ids"]]
        return self._fits(ids)

    def _fits(self, ids: list[int]) -> list[int]:
        if not ids:
            raise InvalidInputError("the prompt is empty: there is nothing to continue")
        limit = self._ckpt.context_length
        if limit and len(ids) >= limit:
            raise InvalidInputError(f"the prompt has {len(ids)} tokens; the context holds {limit}")
        return ids

    def _render_chat(self, messages: Sequence[Message], opts: GenerateOptions) -> _Prompt:
        """Apply the chat template (the processor's for vision models); images are checked and decoded here."""
        if not messages:
            raise InvalidInputError("chat needs at least one message")
        for m in messages:
            if not isinstance(m, Message):
                raise InvalidInputError(f"chat messages must be Message values, got {type(m).__name__}")
            if m.role not in ROLES:
                raise InvalidInputError(f"unknown role {m.role!r}; known: {', '.join(sorted(ROLES))}")
            if not isinstance(m.content, str):
                raise InvalidInputError(f"message content must be a string, got {type(m.content).__name__}")
        if has_images(messages) and not self.accepts_images():
            raise UnsupportedAttachmentError(f"this {self.model_type} model does not accept images")
        thinking = opts.enable_thinking is not None and self._template_thinks
        extra: dict[str, Any] = {"enable_thinking": opts.enable_thinking} if thinking else {}
        tools = opts.tool_specs()
        support = self._tool_support() if chat_tools.needs_tools(messages, tools) else chat_tools.NO_SUPPORT
        turns, tools_variable = chat_tools.template_inputs(messages, tools, support)
        if tools_variable is not None:
            extra["tools"] = tools_variable
        try:
            if self._processor is not None:
                return self._render_vision_chat(turns, extra, support)
            conversation = chat_tools.template_messages(turns, support)
            text = self._tokenizer.apply_chat_template(
                conversation, add_generation_prompt=True, tokenize=False, **extra
            )
        except ModelHostError:
            raise
        except Exception as exc:  # no template, or a template that refuses this conversation
            raise InvalidInputError(f"the chat template cannot render these messages: {exc}") from exc
        return _Prompt(self._encode(str(text), special=False))

    def _tool_support(self) -> ToolSupport:
        """Whether this model's template renders tools and earlier calls: probed once (see chat_tools)."""
        if self._tools_probed is None:
            renderer = self._processor if self._processor is not None else self._tokenizer

            def probe_render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
                return str(renderer.apply_chat_template(messages, tools=tools, add_generation_prompt=True,
                                                        tokenize=False))  # fmt: skip

            self._tools_probed = chat_tools.probe(probe_render)
        return self._tools_probed

    def _render_vision_chat(
        self, messages: Sequence[Message], extra: dict[str, Any], support: ToolSupport = chat_tools.NO_SUPPORT
    ) -> _Prompt:
        # Content as a list of parts, images first: the form Idefics3/SmolVLM templates iterate over, and the order
        # docling and the wire use (the page, then the instruction).
        conversation = []
        images: list[Any] = []
        for m in messages:
            parts: list[dict[str, Any]] = [{"type": "image"} for _ in m.images]
            text = chat_tools.text_of(m, support)
            if text:
                parts.append({"type": "text", "text": text})
            conversation.append(chat_tools.turn(m, parts, support))
            images.extend(to_rgb_image(img, len(images)) for img in m.images)
        text = self._processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False, **extra)
        encoded = self._processor(text=[text], images=[images] if images else None, return_tensors="pt")
        ids = self._fits([int(i) for i in encoded["input_ids"][0].tolist()])
        dtype = next(self._model.parameters()).dtype
        pixels: dict[str, Any] = {}
        for key, value in encoded.items():
            if key in ("input_ids", "attention_mask") or not isinstance(value, torch.Tensor):
                continue
            value = value.to(self._device)
            pixels[key] = value.to(dtype) if value.is_floating_point() else value
        return _Prompt(ids, pixels)

    # ------------------------------------------------------------------------------------------------ helpers

    def _chunks(self, items: Sequence[Any]) -> Iterator[list[Any]]:
        """All items at once, or groups of `parallel` when the load said how many sequences to decode together."""
        size = self._ckpt.parallel or len(items) or 1
        for start in range(0, len(items), size):
            yield list(items[start : start + size])

    def _finish(
        self, clock: MetricsClock, reason: FinishReason, *, thinking_budget_forced: bool = False
    ) -> GenerateMetrics:
        peak, active = memory_usage(self._device) if not self._closed else (0, 0)
        return clock.finish(
            reason, peak_memory_bytes=peak, active_memory_bytes=active, thinking_budget_forced=thinking_budget_forced
        )

    def _check_open(self) -> None:
        if self._closed:
            raise ModelClosedError("this model was closed")

    def _read_info(self) -> ModelInfo:
        tc = self._text_config
        head = self._model.get_output_embeddings()
        # The LM head's rows are the logits' width, which can exceed the config's vocab_size (padded heads).
        vocab = int(head.weight.shape[0]) if head is not None else int(getattr(tc, "vocab_size", 0) or 0)
        return ModelInfo(
            architecture=self.model_type,
            vocab_size=vocab,
            num_layers=int(getattr(tc, "num_hidden_layers", 0) or 0),
            hidden_size=int(getattr(tc, "hidden_size", 0) or 0),
            quant_bits=self._ckpt.quant_bits,
            context_length=self._ckpt.context_length,
        )


def _summary_reason(results: Sequence[BatchResult]) -> FinishReason:
    """One finish reason for a batch: "error" only when no row ran, else the most telling of the rows that did.

    A rejected prompt is that prompt's error (in its result); it does not make the batch a failure.
    """
    reasons = {r.finish_reason for r in results if r.error is None}
    if not reasons:
        return "error" if results else "stop"
    for reason in ("cancelled", "length"):
        if reason in reasons:
            return reason  # type: ignore[return-value]
    return "stop"


def _close(stream: Iterator[Token]) -> None:
    """Close a generator early (decode_loop is typed as an Iterator, but is one)."""
    close = getattr(stream, "close", None)
    if close is not None:
        close()

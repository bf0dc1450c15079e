"""The loaded checkpoint's compute, shared by every way this backend generates.

One forward pass, a fresh KV cache, a request's options checked once, a sampler per request, a sampling row per
sequence, and the metrics of a request that ended. The engine (engine.py) drives it for every generation; the model
(model.py) for what is not a generation (attention inspection), so neither reaches into the other.

Each step is an `inference_mode` call of its own, never a block held open across a `yield`: the caller's code runs
between two steps and must not inherit inference mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from modelhost.backends.transformers import grammar
from modelhost.backends.transformers.device import memory_usage
from modelhost.backends.transformers.sampling import RowState, Sampler, make_sampler
from modelhost.backends.transformers.served_lora import ServedLoRA
from modelhost.errors import ModelClosedError
from modelhost.inference.generation import MetricsClock, ThoughtMarkers
from modelhost.inference.options import GenerateOptions
from modelhost.inference.pieces import token_bytes
from modelhost.inference.types import FinishReason, GenerateMetrics, ModelInfo

if TYPE_CHECKING:
    from modelhost.backends.transformers.loading import Checkpoint


class Runner:
    """Forward passes, sampling and metrics over one loaded checkpoint. Drive it from one thread.

    Closed when the checkpoint's module is dropped (`TransformersModel.close` sets it to None): every step then
    raises ModelClosedError.
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        self.device: torch.device = checkpoint.device
        self.eos_ids: frozenset[int] = checkpoint.eos_ids
        self.context_length: int = checkpoint.context_length
        #: Token id to the exact bytes it stands for (pieces.py), for the shared decode loop.
        self.piece = token_bytes(checkpoint.tokenizer)
        #: The vocabulary's thought-channel markers, None when it has none.
        self.thought: ThoughtMarkers | None = ThoughtMarkers.find(checkpoint.tokenizer.get_vocab().get)
        pad = checkpoint.tokenizer.pad_token_id
        #: What left padding fills with (masked out, so any id would do; the tokenizer's own pad when it has one).
        self.pad_id = int(pad if pad is not None else min(checkpoint.eos_ids, default=0))
        self.info = read_info(checkpoint)
        #: The LoRA adapters served by name over these weights (served_lora.py); a forward's rows name theirs.
        self.lora = ServedLoRA(checkpoint)
        # json_schema's token masks over the logits' width (grammar.py); llguidance's view of the tokenizer is
        # built at the first schema.
        self._grammars = grammar.Grammars(checkpoint.tokenizer, vocab_size=self.info.vocab_size,
                                          eos_ids=checkpoint.eos_ids)  # fmt: skip

    @property
    def closed(self) -> bool:
        """True once the model's weights were dropped."""
        return self.checkpoint.model is None

    def check_open(self) -> None:
        """Raise ModelClosedError once the model was closed."""
        if self.closed:
            raise ModelClosedError("this model was closed")

    def options(self, opts: GenerateOptions | Mapping[str, Any]) -> GenerateOptions:
        """A request's options, validated once, here, before any compute: the contract's checks, then what this
        backend refuses (a json_schema llguidance cannot enforce, names the option; grammar.py), then the
        checkpoint's own defaults (generation_config.json) where the request is silent."""
        self.check_open()
        parsed = GenerateOptions.of(opts)
        grammar.check(parsed)
        return parsed.resolved(self.checkpoint.generation_defaults)

    def new_cache(self) -> Any:
        """An empty KV cache for one sequence (or one padded batch) of this model."""
        from transformers import DynamicCache

        return DynamicCache(config=self.checkpoint.model.config)

    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        cache: Any,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        extra: Mapping[str, Any] | None = None,
        adapters: Sequence[str | None] | None = None,
    ) -> torch.Tensor:
        """One forward pass; the logits at each row's last position, (rows, vocabulary). `adapters`: each row's
        LoRA adapter by name (None: the base), or None when every row is the base's."""
        self.check_open()
        module, lora = self.lora.module(adapters)
        kwargs: dict[str, Any] = {"input_ids": input_ids, "use_cache": cache is not None, **(extra or {}), **lora}
        if cache is not None:
            kwargs[self.checkpoint.cache_kwarg] = cache
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        if position_ids is not None:
            kwargs["position_ids"] = position_ids
        if self.checkpoint.logits_to_keep:
            kwargs["logits_to_keep"] = 1  # the LM head over the last position only, not the whole prompt
        return module(**kwargs).logits[:, -1, :]  # type: ignore[no-any-return]

    def prefill_padded(
        self, seqs: Sequence[Sequence[int]], *, cache: Any, adapters: Sequence[str | None] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Forward left-padded `seqs`; return last-position logits, the attention mask and the position ids.

        Left padding puts every row's last real token in the same column, so one slice gives every row's logits and
        decode steps append in lockstep. Positions count real tokens only, so a padded row sees the same rotary
        positions as it would alone.
        """
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, seq in enumerate(seqs):
            ids[r, width - len(seq) :] = torch.tensor(list(seq), dtype=torch.long)
            mask[r, width - len(seq) :] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        logits = self.forward(ids, cache=cache, attention_mask=mask, position_ids=positions, adapters=adapters)
        return logits, mask, positions

    def sampler(self, opts: GenerateOptions) -> Sampler:
        """The token chooser of one request (`opts` from `options`)."""
        stops = set(self.eos_ids) | set(opts.stop_tokens)
        return make_sampler(opts, stop_ids=stops, device=self.device, piece=self.piece)

    @torch.inference_mode()
    def sample(self, sampler: Sampler, logits: torch.Tensor, rows: Sequence[RowState]) -> list[int]:
        """One token per row of `logits`, recorded in each row's state."""
        return sampler(logits, rows)

    def row(self, ids: Sequence[int], opts: GenerateOptions) -> RowState:
        """One sequence's sampling state: its context (the prompt) and its grammar matcher."""
        return RowState(context=list(ids), matcher=self._grammars.matcher(opts))

    def metrics(
        self, clock: MetricsClock, reason: FinishReason, *, thinking_budget_forced: bool = False
    ) -> GenerateMetrics:
        """The metrics of an operation ending now, with the device's memory figures."""
        peak, active = memory_usage(self.device) if not self.closed else (0, 0)
        return clock.finish(
            reason, peak_memory_bytes=peak, active_memory_bytes=active, thinking_budget_forced=thinking_budget_forced
        )


def read_info(checkpoint: Checkpoint) -> ModelInfo:
    """Static facts from the checkpoint's config."""
    model = checkpoint.model
    tc = model.config.get_text_config()
    head = model.get_output_embeddings()
    # The LM head's rows are the logits' width, which can exceed the config's vocab_size (padded heads).
    vocab = int(head.weight.shape[0]) if head is not None else int(getattr(tc, "vocab_size", 0) or 0)
    return ModelInfo(
        architecture=str(model.config.model_type),
        vocab_size=vocab,
        num_layers=int(getattr(tc, "num_hidden_layers", 0) or 0),
        hidden_size=int(getattr(tc, "hidden_size", 0) or 0),
        quant_bits=checkpoint.quant_bits,
        context_length=checkpoint.context_length,
    )

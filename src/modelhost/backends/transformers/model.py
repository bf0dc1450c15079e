"""TransformersModel: a loaded checkpoint behind the TextModel contract, plus vision and attention inspection.

Generation is a manual prefill/decode over a `DynamicCache` rather than `model.generate()`: the contract wants one
token at a time from a lazy iterator (so breaking out stops the engine within a token), our own sampler steps, and
batching with finished rows dropped. Each engine step is an `inference_mode` call of its own, never a block held
open across a `yield`, because the caller's code runs between yields and must not inherit inference mode.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from modelhost.backends.transformers.attention import capturing
from modelhost.backends.transformers.batch import TransformersBatchEngine, splicable
from modelhost.backends.transformers.device import reset_peak_memory
from modelhost.backends.transformers.loading import Checkpoint
from modelhost.backends.transformers.prompts import Prompt, Prompts
from modelhost.backends.transformers.runner import Runner
from modelhost.backends.transformers.sampling import RowState, loop_hooks
from modelhost.backends.transformers.training import LoRATraining, TransformersAdapter, TransformersTrainer
from modelhost.errors import GenerationError, ModelHostError
from modelhost.inference.chat_tools import ToolSupport
from modelhost.inference.examples import Example
from modelhost.inference.generation import LoopOutcome, MetricsClock, TokenFeed, decode_loop
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import (
    AttentionSnapshot,
    BatchResult,
    ClassifyResult,
    EmbeddingResult,
    FinishReason,
    GenerateMetrics,
    LoRAConfig,
    Message,
    ModelInfo,
    Token,
    TrainingConfig,
)

#: Requests decoded together when the load sets no `parallel` (as llama_cpp): batched decode steps cost little more
#: than one on a CPU (bench/batching.py: ~1.8x the aggregate of one at a time for 4 rows).
DEFAULT_PARALLEL = 4


@dataclass(slots=True)
class _BatchRow:
    """One prompt of `batch_generate` while the batch decodes."""

    prompt_ids: Sequence[int]
    state: RowState
    feed: TokenFeed = field(default_factory=TokenFeed)
    clock: MetricsClock = field(default_factory=MetricsClock)
    outcome: LoopOutcome = field(default_factory=LoopOutcome)
    loop: Iterator[Token] | None = None
    tokens: list[Token] = field(default_factory=list)
    error: BaseException | None = None


class TransformersModel:
    """A checkpoint loaded with transformers. TextModel, VisionModel, ChatFeatures, AttentionInspector, and (through
    LoRATraining, training.py) TrainableModel and TrainerModel for LoRA fine-tuning.

    Its parts are public seams: `checkpoint` (the loaded module, tokenizer, processor and facts; loading.py),
    `runner` (forward passes, sampling, metrics; runner.py), `prompts` (rendering and tokenising; prompts.py) and
    `training`. The batch engine (batch.py) is built from the runner and prompts alone.

    Not thread-safe: the host drives each model from one long-lived thread. ChatFeatures are the exception (a door
    asks them beside a generation): the tools probe renders the template text only, touching no weights or cache.
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        self.model_type: str = str(checkpoint.model.config.model_type)
        self.runner = Runner(checkpoint)
        self.prompts = Prompts(checkpoint, self.runner.piece)
        self.training = LoRATraining(checkpoint)
        self._metrics = GenerateMetrics()
        self._err: BaseException | None = None
        self._splicable: bool | None = None

    # ---------------------------------------------------------------------------------------------------- contract

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        """Stream tokens continuing a raw prompt (no chat template). Options are validated here, before any work."""
        options = self.runner.options(opts)
        return self._run(self.prompts.raw(prompt), options)

    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        """Stream the assistant's reply to `messages` through the checkpoint's chat template (images included)."""
        options = self.runner.options(opts)
        return self._run(self.prompts.chat(messages, options), options)

    def classify(self, prompts: Sequence[str], **opts: Any) -> list[ClassifyResult]:
        """One batched forward pass over all prompts (left-padded); one token chosen at each last position."""
        runner = self.runner
        options = runner.options(opts)
        seqs = [self.prompts.raw(p).ids for p in prompts]
        clock = MetricsClock()
        reset_peak_memory(runner.device)
        results: list[ClassifyResult] = []
        for chunk in self._chunks(seqs):
            logits = runner.prefill_padded(chunk, cache=None)[0]
            sampler = runner.sampler(options)
            rows = [runner.row(ids, options) for ids in chunk]
            chosen = runner.sample(sampler, logits, rows)
            raw = logits.float().cpu().numpy() if options.logits else None
            for i, token in enumerate(chosen):
                text = runner.piece(token).decode("utf-8", errors="replace")
                results.append(ClassifyResult(Token(token, text), raw[i] if raw is not None else None))
        clock.prefill_done(sum(len(s) for s in seqs))
        clock.generated_tokens = len(results)
        self._metrics = runner.metrics(clock, "length")
        return results

    def batch_generate(self, prompts: Sequence[str], **opts: Any) -> list[BatchResult]:
        """Decode all prompts together: one forward per step for the whole batch, finished rows dropped.

        A prompt that cannot run (empty, too long, not text) gets its error in its own result; so do the rows in
        flight when the engine itself fails. The call succeeds either way.
        """
        runner = self.runner
        options = runner.options(opts)
        rows: list[_BatchRow | None] = []
        errors: dict[int, BaseException] = {}
        for i, prompt in enumerate(prompts):
            try:
                ids = self.prompts.raw(prompt).ids
            except ModelHostError as exc:
                errors[i] = exc
                rows.append(None)
                continue
            rows.append(_BatchRow(prompt_ids=ids, state=runner.row(ids, options)))
        live = [r for r in rows if r is not None]
        clock = MetricsClock()
        clock.prompt_tokens = sum(len(r.prompt_ids) for r in live)
        reset_peak_memory(runner.device)
        for row in live:
            row.loop = decode_loop(
                row.feed, runner.piece, options, eos_ids=runner.eos_ids, clock=row.clock, outcome=row.outcome,
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
        self._metrics = runner.metrics(clock, _summary_reason(results), thinking_budget_forced=forced)
        return results

    def info(self) -> ModelInfo:
        """Static facts from the checkpoint's config."""
        return self.runner.info

    def metrics(self) -> GenerateMetrics:
        """Metrics of the last finished operation."""
        return self._metrics

    def err(self) -> BaseException | None:
        """The error of the last generate/chat, None after a clean (or abandoned) end."""
        return self._err

    def close(self) -> None:
        """Drop the weights and caches. Idempotent; later calls raise ModelClosedError."""
        if self.runner.closed:
            return
        device = self.checkpoint.device
        self.checkpoint.model = self.checkpoint.processor = None  # every part reads this as closed (Runner.closed)
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()

    def __enter__(self) -> TransformersModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------ capabilities

    def check_options(self, **opts: Any) -> None:
        """Refuse options this model cannot honour, before any compute (the OptionChecker capability)."""
        self.runner.options(opts)

    def batch_slots(self) -> int:
        """Requests `open_batch()` decodes together: the `parallel` load option (default DEFAULT_PARALLEL); 1 when
        this model's cache cannot be spliced (see batch.py)."""
        if self._splicable is None:
            self._splicable = splicable(self.checkpoint.model)
        return (self.checkpoint.parallel or DEFAULT_PARALLEL) if self._splicable else 1

    def open_batch(self) -> TransformersBatchEngine:
        """A continuous-batching engine with `batch_slots()` slots over this model (see batch.py)."""
        self.runner.check_open()
        return TransformersBatchEngine(self.runner, self.prompts, self.batch_slots())

    def embedding_size(self) -> int:
        """Length of the vectors `embed` returns: the text config's hidden size (the EmbeddingModel capability)."""
        self.runner.check_open()
        from modelhost.backends.transformers import embedding

        return embedding.embedding_size(self.checkpoint.model)

    def embed(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingResult:
        """Mean-pooled last hidden states of `texts`, a padded batch at a time (embedding.py). Runs without a cache,
        so a generation suspended between two tokens is left as it was (the EmbeddingModel capability)."""
        self.runner.check_open()
        from modelhost.backends.transformers import embedding

        ckpt = self.checkpoint
        return embedding.embed(
            ckpt.model, ckpt.tokenizer, texts, limit=ckpt.context_length, pad_id=self.runner.pad_id,
            device=ckpt.device, normalize=normalize, truncate=truncate,
        )  # fmt: skip

    def accepts_images(self) -> bool:
        """A live probe: a processor with an image processor, and a vision tower in the loaded weights."""
        return self.prompts.accepts_images()

    def renders_tools(self) -> bool:
        """Whether the chat template renders `tools` (ChatFeatures): the probe chat rendering already makes, run
        once per model and cached."""
        return self.tool_support().tools

    def tool_support(self) -> ToolSupport:
        """What this model's template renders of tools and earlier calls (chat_tools.probe, run once)."""
        return self.prompts.tool_support()

    def thinks(self) -> bool:
        """Whether the vocabulary has a thought channel's markers (ChatFeatures): found once, at load."""
        return self.runner.thought is not None

    def inspect_attention(self, prompt: str, **opts: Any) -> AttentionSnapshot:
        """One prefill over `prompt`, capturing each layer's post-RoPE keys and queries as numpy arrays.

        keys[layer] is (KV heads, seq_len, head_dim); queries[layer] is (query heads, seq_len, head_dim).
        """
        GenerateOptions.parse(opts)  # the same options as generate are accepted (and validated), none apply
        ids = self.prompts.raw(prompt).ids
        module = self.checkpoint.model
        with capturing(module) as recorder:
            self.runner.forward(torch.tensor([ids], device=self.runner.device), cache=None)
        layers = sorted(recorder.keys)
        keys = tuple(recorder.keys[n][0].float().cpu().numpy() for n in layers)
        queries = tuple(recorder.queries[n][0].float().cpu().numpy() for n in layers)
        if not keys:
            raise GenerationError(f"{type(module).__name__} does not use the attention interface; nothing seen")
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

    # --- TrainableModel and TrainerModel, by LoRATraining (training.py) ----------------------------------------

    @property
    def num_layers(self) -> int:
        """Transformer blocks of the text model."""
        return self.training.num_layers

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` as the tokenizer splits it, adding no special tokens."""
        return self.training.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` (special tokens kept, so a rendered template reads back as it was)."""
        return self.training.decode(ids)

    def apply_lora(self, config: LoRAConfig, *, dropout: float = 0.0, seed: int | None = None) -> TransformersAdapter:
        """Inject LoRA layers into the target projections (once per load); see LoRATraining.apply_lora."""
        return self.training.apply_lora(config, dropout=dropout, seed=seed)

    def adapter(self) -> TransformersAdapter | None:
        """The adapter `apply_lora` injected, if any."""
        return self.training.adapter()

    def encode_example(self, record: Mapping[str, Any], *, max_length: int | None = None) -> Example:
        """Tokenise a training record (the ExampleEncoder capability; see LoRATraining.encode_example)."""
        return self.training.encode_example(record, max_length=max_length)

    def open_trainer(
        self, config: TrainingConfig, *, dropout: float = 0.0, seed: int | None = None
    ) -> TransformersTrainer:
        """Start a fine-tune (see LoRATraining.open_trainer)."""
        return self.training.open_trainer(config, dropout=dropout, seed=seed)

    # ------------------------------------------------------------------------------------------ single generation

    def _run(self, prompt: Prompt, opts: GenerateOptions) -> Iterator[Token]:
        """The token stream of one generation; records metrics and err() however it ends."""
        runner = self.runner
        clock = MetricsClock()
        outcome = LoopOutcome()
        row = runner.row(prompt.ids, opts)
        self._err = None
        reset_peak_memory(runner.device)
        loop = decode_loop(
            self._token_ids(prompt, opts, clock, row),
            runner.piece,
            opts,
            eos_ids=runner.eos_ids,
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
            self._metrics = runner.metrics(clock, outcome.finish_reason, thinking_budget_forced=row.budget_forced)

    def _token_ids(self, prompt: Prompt, opts: GenerateOptions, clock: MetricsClock, row: RowState) -> Iterator[int]:
        """The engine's sampled ids, one model step per id, computed only when the loop asks for the next one."""
        runner = self.runner
        runner.check_open()
        sampler = runner.sampler(opts)
        cache = runner.new_cache()
        ids = torch.tensor([prompt.ids], device=runner.device)
        token = runner.sample(sampler, runner.forward(ids, cache=cache, extra=prompt.extra), [row])[0]
        clock.prefill_done(len(prompt.ids))
        length = len(prompt.ids) + 1
        limit = runner.context_length
        while True:
            yield token
            if limit and length >= limit:
                return  # the context is full: the loop reports a length stop
            logits = runner.forward(torch.tensor([[token]], device=runner.device), cache=cache)
            token = runner.sample(sampler, logits, [row])[0]
            length += 1

    # ------------------------------------------------------------------------------------------------- batching

    def _decode_batch(self, rows: list[_BatchRow], opts: GenerateOptions, clock: MetricsClock) -> None:
        """Prefill `rows` together, then decode them in lockstep until each one's loop has ended."""
        runner = self.runner
        sampler = runner.sampler(opts)
        cache = runner.new_cache()
        active = list(rows)
        try:
            logits, mask, positions = runner.prefill_padded([r.prompt_ids for r in rows], cache=cache)
            while active:
                chosen = runner.sample(sampler, logits, [r.state for r in active])
                if not clock.prefill_done_at:  # the first chunk's first token ends the batch's prefill
                    clock.prefill_done(clock.prompt_tokens)
                keep = [slot for slot, row in enumerate(active) if self._advance(row, chosen[slot])]
                if not keep:
                    return
                if len(keep) < len(active):
                    # Finished rows leave the batch: their cache rows, mask and positions go with them.
                    index = torch.tensor(keep, device=runner.device)
                    cache.batch_select_indices(index)
                    mask, positions = mask[index], positions[index]
                    active = [active[k] for k in keep]
                    chosen = [chosen[k] for k in keep]
                mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
                positions = positions[:, -1:] + 1
                step_ids = torch.tensor(chosen, device=runner.device).unsqueeze(1)
                logits = runner.forward(step_ids, cache=cache, attention_mask=mask, position_ids=positions)
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
        limit = self.runner.context_length
        if limit and len(row.prompt_ids) + row.state.generated >= limit:
            row.tokens.extend(row.loop)  # the feed is empty: the loop ends as a length stop, flushing held text
            return False
        return True

    def _chunks(self, items: Sequence[Any]) -> Iterator[list[Any]]:
        """All items at once, or groups of `parallel` when the load said how many sequences to decode together."""
        size = self.checkpoint.parallel or len(items) or 1
        for start in range(0, len(items), size):
            yield list(items[start : start + size])


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

"""A LoRA fine-tuning run from records to a finished adapter folder: the one loop the CLI and the job worker share.

The loop is backend-neutral: it needs a model that offers TrainerModel (and encodes records, `ExampleEncoder`).
It writes into the output folder: the adapter (peft's `adapter_config.json` + `adapter_model.safetensors`, and
`adapter.gguf` for llama.cpp where the backend can export it), `metrics.json` (every step's loss, the evaluations,
throughput, the settings) and `loss.png` (the curve).

Cancellation (anything with `is_set()`) is checked between optimiser steps, never inside one: a step is a few
hundred milliseconds, and stopping halfway would leave gradients no one applies. With `save_on_cancel` what was
learned so far is saved as a normal adapter, and `metrics.json` says the run was cancelled.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from modelhost.errors import InvalidOptionError, NotTrainableError
from modelhost.inference.capabilities import TrainerModel, as_capability
from modelhost.inference.types import LoRAConfig, TrainingConfig
from modelhost.training.data import Example, ExampleEncoder, fixed_batches, split_eval, stream_batches

log = logging.getLogger(__name__)

#: Projections adapted by default: all of a Llama-like block's linear layers. Attention-only (the contract's
#: q_proj/v_proj) learns several times slower per step for the same rank; the adapter is still small (rank 8 on
#: SmolLM2-135M: ~4.9 M parameters, 19 MB). A model without these names falls back to its architecture's own.
DEFAULT_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

#: The largest settings a run accepts. Each bound sits far above any useful value and below the one that hurts:
#: without them `steps: 2**64` or `epochs: 10**15` was accepted and trained until someone cancelled it, and
#: `gradient_accumulation: 10**9` made one optimiser step that never ends (cancel is only seen between steps).
#: A million steps is days of training at the fastest step this host makes.
MAX_STEPS = 1_000_000
MAX_EPOCHS = 10_000
MAX_GRADIENT_ACCUMULATION = 1024
#: Examples per micro-batch: the batch is padded to its longest example and held as activations at once, so
#: 10**6 examples of a full context would not fit anywhere; 1024 is beyond any CPU or single-GPU batch.
MAX_BATCH_SIZE = 1024
#: LoRA rank: published adapters use 4-256; `rank: 100000` allocated A and B matrices of 100000 x width for every
#: adapted layer (out of memory), `10**9` overflowed inside torch (a 500). The trainer also refuses a rank above
#: the smallest adapted layer's width (more than that adds parameters and no expressiveness).
MAX_RANK = 4096
#: The seed goes to torch.manual_seed, which takes at most 64 bits (`2**70` was a 500); 2**32 also suits numpy and
#: any other generator a backend may seed.
MAX_SEED = 2**32 - 1
#: Tokens per example: bounds the truncation length itself; an example is also bounded by the record size
#: (training.data.MAX_RECORD_BYTES) and the model's context.
MAX_LENGTH = 1 << 20
#: Target projection names: at most this many, each at most TARGET_NAME_CHARS characters (module names are short;
#: a megabyte of them only slows the lookup and bloats metrics.json).
MAX_TARGETS = 64
TARGET_NAME_CHARS = 128

METRICS_NAME = "metrics.json"
PLOT_NAME = "loss.png"


class Cancel(Protocol):
    """Anything with `is_set()`: a threading.Event, an asyncio.Event."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class TrainSettings:
    """The hyperparameters of a run. `steps` (optimiser steps) wins over `epochs` when given."""

    steps: int | None = None
    epochs: int = 1
    batch_size: int = 1
    gradient_accumulation: int = 1
    learning_rate: float = 2e-4
    rank: int = 8
    alpha: float | None = None  # None: 2 x rank, the common choice (scale 2)
    dropout: float = 0.0
    target_keys: tuple[str, ...] = DEFAULT_TARGETS
    seed: int = 0
    max_length: int | None = None  # tokens per example; None: the model's context
    eval_fraction: float = 0.0  # held out of the training records when no eval set is given
    eval_every: int = 0  # steps between evaluations; 0: only at the end
    save_on_cancel: bool = True

    def check(self) -> None:
        """InvalidOptionError naming the first setting out of range (the one check the CLI, the worker's
        submission and the run itself share)."""
        bounded = {
            "epochs": (self.epochs, MAX_EPOCHS),
            "batch_size": (self.batch_size, MAX_BATCH_SIZE),
            "gradient_accumulation": (self.gradient_accumulation, MAX_GRADIENT_ACCUMULATION),
            "rank": (self.rank, MAX_RANK),
        }
        if self.steps is not None:
            bounded["steps"] = (self.steps, MAX_STEPS)
        for name, (value, most) in bounded.items():
            if not _is_int(value) or not 1 <= value <= most:
                raise InvalidOptionError(name, f"must be an integer from 1 to {most}, got {_shown(value)}")
        if not _is_int(self.seed) or not 0 <= self.seed <= MAX_SEED:
            raise InvalidOptionError("seed", f"must be an integer from 0 to {MAX_SEED}, got {_shown(self.seed)}")
        if not (isinstance(self.learning_rate, (int, float)) and 0 < self.learning_rate < 1):
            raise InvalidOptionError("learning_rate", f"must be in (0, 1), got {self.learning_rate!r}")
        if self.alpha is not None and not (
            isinstance(self.alpha, (int, float)) and math.isfinite(self.alpha) and 0 < self.alpha <= 1e6
        ):
            raise InvalidOptionError("alpha", f"must be a number in (0, 1e6], got {self.alpha!r}")
        if not 0 <= self.dropout < 1:
            raise InvalidOptionError("dropout", f"must be in [0, 1), got {self.dropout!r}")
        if not 0 <= self.eval_fraction < 1:
            raise InvalidOptionError("eval_fraction", f"must be in [0, 1), got {self.eval_fraction!r}")
        if self.max_length is not None and (not _is_int(self.max_length) or not 2 <= self.max_length <= MAX_LENGTH):
            raise InvalidOptionError(
                "max_length", f"must be an integer from 2 to {MAX_LENGTH}, got {_shown(self.max_length)}"
            )
        if not _is_int(self.eval_every) or not 0 <= self.eval_every <= MAX_STEPS:
            raise InvalidOptionError(
                "eval_every", f"must be an integer from 0 to {MAX_STEPS}, got {_shown(self.eval_every)}"
            )
        if not self.target_keys or len(self.target_keys) > MAX_TARGETS:
            raise InvalidOptionError("targets", f"must name 1 to {MAX_TARGETS} projections")
        if any(not isinstance(t, str) or not 0 < len(t) <= TARGET_NAME_CHARS for t in self.target_keys):
            raise InvalidOptionError("targets", f"each must be a name of 1 to {TARGET_NAME_CHARS} characters")

    def check_total(self, examples: int) -> int:
        """The optimiser steps of a run over `examples` (total_steps), refused when epochs make more than
        MAX_STEPS: `epochs` is bounded alone, but epochs x batches per epoch is what the run takes."""
        total = total_steps(self, examples)
        if total > MAX_STEPS:
            raise InvalidOptionError(
                "epochs", f"{self.epochs} epochs of {examples} examples make {total} steps; at most {MAX_STEPS}"
            )
        return total

    def training_config(self) -> TrainingConfig:
        """The contract's TrainingConfig for these settings."""
        lora = LoRAConfig(
            rank=self.rank,
            alpha=float(self.alpha if self.alpha is not None else 2 * self.rank),
            target_keys=tuple(self.target_keys),
        )
        return TrainingConfig(
            epochs=self.epochs,
            batch_size=self.batch_size,
            gradient_accumulation=self.gradient_accumulation,
            learning_rate=float(self.learning_rate),
            lora=lora,
        )


@dataclass(frozen=True, slots=True)
class TrainStep:
    """Where a run is after an optimiser step (what a progress bar shows)."""

    step: int
    total: int
    loss: float
    tokens: int  # real tokens read so far
    seconds: float  # since the first step began
    tokens_per_second: float
    remaining_seconds: float
    eval_loss: float | None = None  # when this step ended with an evaluation


@dataclass(slots=True)
class TrainResult:
    """What a run did and wrote."""

    output: Path
    steps: int
    total_steps: int
    losses: list[float] = field(default_factory=list)
    evals: list[tuple[int, float]] = field(default_factory=list)
    tokens: int = 0
    seconds: float = 0.0
    cancelled: bool = False
    examples: int = 0
    eval_examples: int = 0
    files: list[str] = field(default_factory=list)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    """A rejected value for a message: a huge integer is named by its size (repr of one past 4300 digits raises,
    and a megabyte of digits is no use in an error)."""
    if _is_int(value) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    return repr(value)[:80]


def total_steps(settings: TrainSettings, examples: int) -> int:
    """Optimiser steps the run takes: `steps`, else epochs x ceil(batches per epoch / accumulation)."""
    if settings.steps is not None:
        return settings.steps
    per_epoch = math.ceil(math.ceil(examples / settings.batch_size) / settings.gradient_accumulation)
    return max(1, per_epoch * settings.epochs)


def encode_all(model: Any, records: Sequence[Any], max_length: int | None) -> list[Example]:
    """Every record tokenised by the model's own tokenizer and template."""
    encoder = as_capability(model, ExampleEncoder)
    if encoder is None:
        raise NotTrainableError(f"{type(model).__name__} cannot tokenise training records")
    return [encoder.encode_example(r, max_length=max_length) for r in records]


def train(
    model: Any,
    records: Sequence[Any],
    settings: TrainSettings,
    output: str | Path,
    *,
    eval_records: Sequence[Any] | None = None,
    cancel: Cancel | None = None,
    on_step: Callable[[TrainStep], None] | None = None,
    plot: bool = True,
) -> TrainResult:
    """Fine-tune a LoRA adapter on `model` (a loaded trainable model) and write it with its metrics to `output`."""
    settings.check()
    trainer_model = as_capability(model, TrainerModel)
    if trainer_model is None:
        raise NotTrainableError(f"{type(model).__name__} does not support LoRA training")
    if eval_records is None:
        records, eval_records = split_eval(records, settings.eval_fraction, settings.seed)
    examples = encode_all(model, records, settings.max_length)
    evals = encode_all(model, eval_records, settings.max_length) if eval_records else []
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    total = settings.check_total(len(examples))
    result = TrainResult(out, 0, total, examples=len(examples), eval_examples=len(evals))
    eval_batches = fixed_batches(evals, settings.batch_size) if evals else []
    batches = stream_batches(examples, settings.batch_size, settings.seed)
    trainer = _open_trainer(trainer_model, settings)
    try:
        start = time.perf_counter()
        for step in range(1, total + 1):
            if cancel is not None and cancel.is_set():
                result.cancelled = True
                break
            loss = trainer.step_accumulated([next(batches) for _ in range(settings.gradient_accumulation)])
            result.losses.append(loss)
            result.steps = step
            result.tokens += int(getattr(trainer, "last_tokens", 0))
            result.seconds = time.perf_counter() - start
            eval_loss = None
            if eval_batches and (step == total or (settings.eval_every and step % settings.eval_every == 0)):
                eval_loss = _evaluate(trainer, eval_batches)
                result.evals.append((step, eval_loss))
            if on_step is not None:
                rate = result.seconds / step
                on_step(
                    TrainStep(
                        step=step,
                        total=total,
                        loss=loss,
                        tokens=result.tokens,
                        seconds=result.seconds,
                        tokens_per_second=result.tokens_per_second,
                        remaining_seconds=rate * (total - step),
                        eval_loss=eval_loss,
                    )
                )
        if result.cancelled and eval_batches and result.steps and not any(s == result.steps for s, _ in result.evals):
            result.evals.append((result.steps, _evaluate(trainer, eval_batches)))
        if result.steps and (not result.cancelled or settings.save_on_cancel):
            trainer.save(str(out))
    finally:
        trainer.close()
    write_metrics(result, settings)
    if plot and result.losses:
        from modelhost.training.plot import plot_losses

        title = f"LoRA fine-tune: {result.steps} steps, {result.tokens_per_second:.0f} tokens/s"
        plot_losses(result.losses, result.evals, title + (" (cancelled)" if result.cancelled else ""), out / PLOT_NAME)
    result.files = sorted(p.name for p in out.iterdir() if p.is_file())
    return result


def _open_trainer(model: TrainerModel, settings: TrainSettings) -> Any:
    """The model's trainer; `dropout` and `seed` go to backends whose `open_trainer` takes them (the contract's
    takes the TrainingConfig alone)."""
    extras = {"dropout": settings.dropout, "seed": settings.seed}
    accepted = inspect.signature(model.open_trainer).parameters
    return model.open_trainer(settings.training_config(), **{k: v for k, v in extras.items() if k in accepted})


def _evaluate(trainer: Any, batches: Sequence[Sequence[Example]]) -> float:
    """Held-out loss: the trainer's token-weighted `evaluate` where it has one, else the mean of `loss(batch)`."""
    evaluate = getattr(trainer, "evaluate", None)
    if callable(evaluate):
        return float(evaluate(batches))
    return sum(float(trainer.loss(b)) for b in batches) / len(batches)


def write_metrics(result: TrainResult, settings: TrainSettings) -> Path:
    """`metrics.json`: the losses per step, the evaluations, throughput, and the settings of the run."""
    body = {
        "steps": result.steps,
        "total_steps": result.total_steps,
        "cancelled": result.cancelled,
        "losses": result.losses,
        "first_loss": result.losses[0] if result.losses else None,
        "final_loss": result.losses[-1] if result.losses else None,
        "eval_losses": [{"step": s, "loss": loss} for s, loss in result.evals],
        "examples": result.examples,
        "eval_examples": result.eval_examples,
        "tokens": result.tokens,
        "seconds": round(result.seconds, 3),
        "steps_per_second": round(result.steps_per_second, 4),
        "tokens_per_second": round(result.tokens_per_second, 1),
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(settings).items()},
    }
    path = result.output / METRICS_NAME
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return path


def train_file(
    model: str,
    data: str | Path,
    output: str | Path,
    settings: TrainSettings,
    *,
    eval_data: str | Path | None = None,
    backend: str | None = "transformers",
    cancel: Cancel | None = None,
    on_step: Callable[[TrainStep], None] | None = None,
    load_options: dict[str, Any] | None = None,
) -> TrainResult:
    """Load `model` for training (a GGUF through its dequantised transformers twin), train on the JSONL file
    `data`, write the adapter folder `output`, close the model."""
    from modelhost.inference import registry
    from modelhost.training.data import read_jsonl

    settings.check()
    records = read_jsonl(data)
    eval_records = read_jsonl(eval_data) if eval_data is not None else None
    loaded = registry.load_trainable(model, backend, **(load_options or {}))
    try:
        return train(loaded, records, settings, output, eval_records=eval_records, cancel=cancel, on_step=on_step)
    finally:
        loaded.close()

"""The `lora.train` operation: fine-tune a LoRA adapter on the served model from an uploaded JSONL file.

Input: `{"data": {"$file": "<field>"}, "eval"?: {"$file": ...}, "steps"?, "epochs"?, "rank"?, "alpha"?,
"learning_rate"?, "batch_size"?, "gradient_accumulation"?, "dropout"?, "seed"?, "max_length"?, "eval_fraction"?,
"targets"?: [str]}`. Outputs: the adapter (`adapter_config.json`, `adapter_model.safetensors`, `adapter.gguf` where
llama.cpp can load it), `metrics.json` and `loss.png`. Progress: `loading_model`, then `training` with step of total
and the remaining seconds at the measured rate. DELETE stops the run between two optimiser steps.

Training loads its own trainable copy of the model (a GGUF through its dequantised transformers twin), on a thread
of its own, beside the host's copy that keeps serving: the host's model may be a llama.cpp one that cannot train,
and a fine-tune must not change what the other doors are answering with. On a small CPU machine the two compete
for cores, so generation slows while a job trains.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from modelhost.errors import InvalidInputError, InvalidOptionError, ModelHostError, ModelNotFoundError
from modelhost.host.models import Servable
from modelhost.inference import catalogue
from modelhost.jobs.operation import JobContext, Operation, RunJob, failure_of
from modelhost.worker import protocol
from modelhost.worker.protocol import failed, invalid

STAGE_TRAINING = protocol.STAGE_TRAINING

#: Input fields that map onto TrainSettings (input name -> setting name).
SETTINGS: dict[str, str] = {
    "steps": "steps",
    "epochs": "epochs",
    "rank": "rank",
    "alpha": "alpha",
    "learning_rate": "learning_rate",
    "lr": "learning_rate",
    "batch_size": "batch_size",
    "gradient_accumulation": "gradient_accumulation",
    "dropout": "dropout",
    "seed": "seed",
    "max_length": "max_length",
    "eval_fraction": "eval_fraction",
    "eval_every": "eval_every",
}
_INTEGER = {"steps", "epochs", "rank", "batch_size", "gradient_accumulation", "seed", "max_length", "eval_every"}


def settings_from(value: Any) -> Any:
    """TrainSettings from a job's input; the job's fault (400) when a value is of the wrong kind or out of range."""
    from modelhost.training.run import TrainSettings

    if not isinstance(value, dict):
        raise invalid("lora.train input must be a JSON object")
    chosen: dict[str, Any] = {}
    for key, setting in SETTINGS.items():
        if key not in value or value[key] is None:
            continue
        v = value[key]
        numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not numeric or (setting in _INTEGER and not isinstance(v, int)):
            kind = "an integer" if setting in _INTEGER else "a number"
            raise invalid(f"lora.train: `{key}` must be {kind}, got {v!r}")
        chosen[setting] = v
    targets = value.get("targets")
    if targets is not None:
        if not isinstance(targets, list) or not targets or not all(isinstance(t, str) and t for t in targets):
            raise invalid("lora.train: `targets` must be a non-empty list of projection names")
        chosen["target_keys"] = tuple(targets)
    settings = TrainSettings(**chosen)
    try:
        settings.check()
    except InvalidOptionError as exc:
        raise invalid(f"lora.train: {exc}") from exc
    return settings


def check_lora_train(value: Any) -> None:
    """The submission-time check of a lora.train input: an uploaded `data` file and settings in range."""
    settings_from(value)
    if not _is_file(value.get("data")):
        raise invalid('lora.train needs `data`: an uploaded JSONL file ({"$file": "<field>"})')
    if value.get("eval") is not None and not _is_file(value["eval"]):
        raise invalid('lora.train: `eval` must be an uploaded JSONL file ({"$file": "<field>"})')


def _is_file(value: Any) -> bool:
    # At submission an upload is still `{"$file": field}`; when the job runs it is `{"$inputFile": {...}}`.
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(protocol.FILE_REF), str):
        return True
    return protocol.input_path(value) is not None


def lora_train_for(base: str | None = None, *, backend: str | None = "transformers") -> RunJob:
    """A `lora.train` operation that trains `base` (a path or catalogue name); None: the job's own model name,
    resolved through the catalogue (right for `default` and catalogue names; a server of a file passes its path)."""

    async def lora_train(ctx: JobContext) -> list[str]:
        value = ctx.work.input
        settings = settings_from(value)
        data = protocol.input_path(value.get("data"))
        if data is None:
            raise invalid('lora.train needs `data`: an uploaded JSONL file ({"$file": "<field>"})')
        eval_data = protocol.input_path(value["eval"]) if value.get("eval") is not None else None
        if value.get("eval") is not None and eval_data is None:
            raise invalid('lora.train: `eval` must be an uploaded JSONL file ({"$file": "<field>"})')
        # The served model's own files when it knows them (a model served from a path is named by its stem).
        model = _resolve(base or getattr(ctx.host, "path", None) or ctx.work.model)
        ctx.progress(protocol.STAGE_LOADING_MODEL)
        cancel = threading.Event()
        ctx.on_cancel(cancel.set)
        loop = asyncio.get_running_loop()

        def on_step(report: Any) -> None:
            loop.call_soon_threadsafe(
                ctx.progress, STAGE_TRAINING, report.step, report.total, round(report.remaining_seconds, 3)
            )

        # Messages name the caller's own file (`train.jsonl:2`), not the stored `inputs/1.jsonl` nor its path.
        names = {data: _upload_name(value["data"], data)}
        if eval_data is not None:
            names[eval_data] = _upload_name(value["eval"], eval_data)
        result = await asyncio.to_thread(
            _train, model, names, data, eval_data, ctx.dir, settings, backend, cancel, on_step, ctx.progress, loop
        )
        if result.cancelled or ctx.cancelled:
            raise ctx.stopped()
        return list(result.files)

    return lora_train


lora_train = lora_train_for()
"""`lora.train` on the job's own model (see `lora_train_for`)."""


def _check(value: Any, host: Servable) -> None:
    check_lora_train(value)  # the input alone: the trainable copy is loaded from the model's files when it runs


#: Exclusive: lora.train trains its own copy of the model with optimiser state (several times the model's memory), so
#: two at once could exhaust memory that the host's batch slots do not account for. Other jobs keep starting past a
#: waiting one; it starts, in its queue order, as soon as the running one ends.
LORA_TRAIN = Operation("lora.train", lora_train, _check, exclusive=True)


def _resolve(model: str) -> str:
    try:
        return catalogue.resolve(model)
    except ModelNotFoundError as exc:
        raise failed(protocol.WORKER_FAILED, f"lora.train cannot find the files of model {model!r}: {exc}") from exc


def _upload_name(value: Any, path: str) -> str:
    name = value[protocol.INPUT_FILE].get("name")
    return name if isinstance(name, str) and name else Path(path).name


def _train(
    model: str,
    names: dict[str, str],
    data: str,
    eval_data: str | None,
    out: Path,
    settings: Any,
    backend: str | None,
    cancel: threading.Event,
    on_step: Any,
    progress: Any,
    loop: asyncio.AbstractEventLoop,
) -> Any:
    from modelhost.inference import registry
    from modelhost.training.data import read_jsonl
    from modelhost.training.run import train

    try:
        records = read_jsonl(data)
        eval_records = read_jsonl(eval_data) if eval_data is not None else None
    except InvalidInputError as exc:
        message = str(exc)
        for path, name in names.items():
            message = message.replace(path, name)
        raise invalid(f"lora.train: {message}") from exc
    try:
        loaded = registry.load_trainable(model, backend)
    except ModelHostError as exc:  # a model that cannot be trained is the job's 400 (modelhost.errors' table)
        raise failure_of(exc, f"lora.train: {exc}") from exc
    try:
        loop.call_soon_threadsafe(progress, STAGE_TRAINING, 0, 0, 0.0)
        try:
            return train(loaded, records, settings, out, eval_records=eval_records, cancel=cancel, on_step=on_step)
        except (InvalidInputError, InvalidOptionError) as exc:
            raise invalid(f"lora.train: {exc}") from exc
    finally:
        loaded.close()

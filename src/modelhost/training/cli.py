"""`modelhost train`: fine-tune a LoRA adapter from a JSONL file, with a progress bar (step, loss, tokens/s, ETA).

Ctrl-C once stops after the current step and saves what was learned (a normal adapter; metrics.json says
"cancelled"); a second Ctrl-C stops at once without saving.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from modelhost import errors

Option = typer.Option


def train(
    data: Annotated[Path, Option("--data", "-d", help="Training records, JSONL.")],
    output: Annotated[Path, Option("--output", "-o", help="Folder for the adapter, metrics.json and loss.png.")],
    model: Annotated[str, Option("--model", "-m", help="A catalogue name, a .gguf file or a model folder.")] = (
        "default"
    ),
    eval_data: Annotated[Path | None, Option("--eval", help="Held-out records, JSONL.")] = None,
    steps: Annotated[int | None, Option("--steps", help="Optimiser steps (wins over --epochs).")] = None,
    epochs: Annotated[int, Option("--epochs", help="Passes over the data.")] = 1,
    rank: Annotated[int, Option("--rank", "-r", help="LoRA rank.")] = 8,
    alpha: Annotated[float | None, Option("--alpha", help="LoRA alpha [2 x rank].")] = None,
    lr: Annotated[float, Option("--lr", help="Learning rate (AdamW).")] = 2e-4,
    batch_size: Annotated[int, Option("--batch-size", help="Examples per micro-batch.")] = 1,
    accumulate: Annotated[int, Option("--accumulate", help="Micro-batches per optimiser step.")] = 1,
    dropout: Annotated[float, Option("--dropout", help="LoRA dropout.")] = 0.0,
    targets: Annotated[
        str | None, Option("--targets", help="Comma-separated projections [all linear layers of a block].")
    ] = None,
    max_length: Annotated[int | None, Option("--max-length", help="Tokens per example [the context].")] = None,
    eval_split: Annotated[float, Option("--eval-split", help="Fraction held out when no --eval is given.")] = 0.0,
    eval_every: Annotated[int, Option("--eval-every", help="Steps between evaluations [only at the end].")] = 0,
    seed: Annotated[int, Option("--seed", help="Seed of the adapter's init and the data order.")] = 0,
    backend: Annotated[str, Option("--backend", "-b", help="The engine that trains.")] = "transformers",
    threads: Annotated[int | None, Option("--threads", help="CPU threads for torch.")] = None,
) -> None:
    """Fine-tune a LoRA adapter on MODEL; the folder then serves with `chat --adapter OUTPUT` on either engine."""
    for flag, path in (("--data", data), ("--eval", eval_data)):
        # One line before anything loads (click's own check printed its four-line usage block).
        if path is not None and not path.is_file():
            why = "not a file" if path.exists() else "no such file"
            typer.secho(f"modelhost: {flag} {path}: {why}", err=True, fg=typer.colors.RED)
            raise typer.Exit(2)
    from modelhost.training.run import DEFAULT_TARGETS, TrainSettings, train_file

    settings = TrainSettings(
        steps=steps,
        epochs=epochs,
        batch_size=batch_size,
        gradient_accumulation=accumulate,
        learning_rate=lr,
        rank=rank,
        alpha=alpha,
        dropout=dropout,
        target_keys=tuple(t.strip() for t in targets.split(",") if t.strip()) if targets else DEFAULT_TARGETS,
        seed=seed,
        max_length=max_length,
        eval_fraction=eval_split,
        eval_every=eval_every,
    )
    cancel = threading.Event()
    progress, on_step = _progress_bar()

    def interrupt(signum: int, frame: Any) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()
        typer.secho("stopping after this step (Ctrl-C again to abandon it)", err=True, fg=typer.colors.YELLOW)

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        with progress:
            result = train_file(
                model,
                data,
                output,
                settings,
                eval_data=eval_data,
                backend=backend,
                cancel=cancel,
                on_step=on_step,
                load_options={"threads": threads} if threads else None,
            )
    except errors.ModelHostError as exc:
        typer.secho(f"modelhost: {exc} [{exc.code}]", err=True, fg=typer.colors.RED)
        raise typer.Exit(2) from exc
    finally:
        signal.signal(signal.SIGINT, previous)
    first = f"{result.losses[0]:.4f} -> " if result.losses else ""
    last = f"{result.losses[-1]:.4f}" if result.losses else "-"
    evals = f", eval {result.evals[-1][1]:.4f}" if result.evals else ""
    state = " (cancelled)" if result.cancelled else ""
    typer.secho(
        f"[{result.steps}/{result.total_steps} steps{state}, loss {first}{last}{evals}, "
        f"{result.tokens_per_second:.0f} tokens/s, {result.seconds:.1f} s] -> {result.output}",
        err=True,
        fg=typer.colors.BRIGHT_BLACK,
    )
    if result.steps == 0:
        raise typer.Exit(1)


def _progress_bar() -> tuple[Any, Any]:
    """A rich progress bar on stderr and the callback that advances it."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    progress = Progress(
        TextColumn("training"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}"),
        TextColumn("{task.fields[rate]} tok/s"),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )
    task = progress.add_task("train", total=None, loss="-", rate="-")

    def on_step(report: Any) -> None:
        loss = f"{report.loss:.4f}" + (f" (eval {report.eval_loss:.4f})" if report.eval_loss is not None else "")
        progress.update(
            task, completed=report.step, total=report.total, loss=loss, rate=f"{report.tokens_per_second:.0f}"
        )

    return progress, on_step

"""What the `modelhost` commands share: the options several take, and the one-line failures every command gives.

Every refusal is one line on stderr (`modelhost: <why> [<code>]` for an error of the library, `modelhost: <why>` for a
mistake in the command line) and an exit status, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from modelhost import errors

__all__ = [
    "BackendOpt",
    "MaxTokensOpt",
    "ModelOpt",
    "SchemaOpt",
    "SeedOpt",
    "TemperatureOpt",
    "existing_file",
    "fail",
    "usage",
]


ModelOpt = Annotated[
    str,
    typer.Option("--model", "-m", help="A catalogue name, a .gguf file, a model folder or a pulled org/repo[:QUANT]."),
]
BackendOpt = Annotated[
    str | None,
    typer.Option("--backend", "-b", help="Pin an engine (see `modelhost backends`) [the first that loads the file]."),
]
MaxTokensOpt = Annotated[int, typer.Option("--max-tokens", "-n", help="Bound on generated tokens.")]
TemperatureOpt = Annotated[
    float | None, typer.Option("--temperature", "-t", help="0 = greedy [the checkpoint's, else 0.7].")
]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Sampling seed, for repeatable output [random].")]
SchemaOpt = Annotated[
    str | None,
    typer.Option(
        "--json-schema",
        help="Answer JSON matching this JSON Schema (a file, or the schema itself); `{}`: any JSON object.",
    ),
]


def fail(exc: BaseException) -> typer.Exit:
    """One line on stderr, `modelhost: <what went wrong> [<code>]`, and the exit to raise (2: the request's fault)."""
    code = getattr(exc, "code", "error")
    message = str(exc).removeprefix("modelhost: ")  # some messages already say who is speaking
    typer.secho(f"modelhost: {message} [{code}]", err=True, fg=typer.colors.RED)
    return typer.Exit(2 if isinstance(exc, errors.ModelHostError) else 1)


def usage(message: str) -> typer.Exit:
    """A mistake in the command line itself (a missing file, a port in use): one line, exit 2, nothing loaded."""
    typer.secho(f"modelhost: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(2)


def existing_file(path: Path, flag: str) -> Path:
    """`path` when it is a readable file; else the one-line error of `usage`, before any model loads for nothing."""
    if not path.exists():
        raise usage(f"{flag} {path}: no such file")
    if not path.is_file():
        raise usage(f"{flag} {path}: not a file")
    return path

"""`modelhost pull`, `modelhost list` and `modelhost rm`: the hub cache from the command line.

Every refusal and failure is one line on stderr (`modelhost: <why> [<code>]`) and exit status 2, never a
traceback; the progress bar goes to stderr too, so stdout carries only the result (the pulled name and path, or the
listing) for scripts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from modelhost import errors

if TYPE_CHECKING:
    from modelhost.hub import fetch


def _fail(exc: errors.ModelHostError) -> typer.Exit:
    typer.secho(f"modelhost: {exc} [{exc.code}]", err=True, fg=typer.colors.RED)
    return typer.Exit(2)


def pull(
    name: Annotated[
        str, typer.Argument(help="org/repo (a model folder or its only GGUF), org/repo:FILE, or org/repo:QUANT.")
    ],
    max_size: Annotated[
        str, typer.Option("--max-size", help="Refuse a pull larger than this (500MB, 20GB, 2GiB).")
    ] = "200GB",
) -> None:
    """Download a GGUF or safetensors model from the Hugging Face hub (HF_ENDPOINT) into the local cache.

    `modelhost pull org/repo:Q4_K_M` then `modelhost chat --model org/repo:Q4_K_M` loads it. Downloads resume
    when the connection drops and every file is checked against the hub's checksum.
    """
    from modelhost.hub import fetch  # here, not at the top: every other command's start would pay for it

    try:
        limit = fetch.parse_size(max_size)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--max-size") from None
    try:
        plan = fetch.plan(name, max_bytes=limit)
        with _RichProgress(plan) as progress:
            pulled = fetch.download(plan, progress=progress)
    except errors.ModelHostError as exc:
        raise _fail(exc) from None
    typer.secho(f"pulled {pulled.name} ({fetch.human_size(pulled.bytes)}): {pulled.path}", err=True)
    typer.echo(pulled.name)


def list_models() -> None:
    """The models in the local hub cache: the name `--model` takes, the size on disk, the path it loads."""
    from modelhost.hub import cache, fetch

    models = cache.cached_models()
    if not models:
        typer.secho("no models in the cache; `modelhost pull org/repo` adds one", err=True)
        return
    # Plain aligned columns, the path last and never wrapped, so `modelhost list | awk` reads whole paths.
    rows = [("NAME", "SIZE", "PATH")] + [(m.name, fetch.human_size(m.bytes), m.path) for m in models]
    name_w = max(len(r[0]) for r in rows)
    size_w = max(len(r[1]) for r in rows)
    for name, size, path in rows:
        typer.echo(f"{name:<{name_w}}  {size:>{size_w}}  {path}")


def rm(
    name: Annotated[str, typer.Argument(help="A name `modelhost list` shows (org/repo removes every file).")],
) -> None:
    """Delete a model from the local hub cache."""
    from modelhost.hub import cache

    try:
        gone = cache.remove(name)
    except errors.ModelHostError as exc:
        raise _fail(exc) from None
    for removed in gone or [name]:
        typer.echo(f"removed {removed}")


class _RichProgress:
    """A rich progress bar on stderr: one line per file, with bytes, speed and time left."""

    def __init__(self, plan: fetch.PullPlan) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._tasks: dict[str, Any] = {}
        self._plan = plan

    def __enter__(self) -> _RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def file_started(self, file: fetch.RemoteFile) -> None:
        self._tasks[file.path] = self._progress.add_task(file.path, total=file.size)

    def advance(self, file: fetch.RemoteFile, nbytes: int) -> None:
        self._progress.advance(self._tasks[file.path], nbytes)

    def verifying(self, file: fetch.RemoteFile) -> None:
        self._progress.update(self._tasks[file.path], description=f"{file.path} (verifying)")

    def file_done(self, file: fetch.RemoteFile) -> None:
        task = self._tasks[file.path]
        self._progress.update(task, description=file.path, completed=file.size or 0, total=file.size)

"""`modelhost convert`: documents to Markdown, JSON, HTML or DocTags, in this process, over a socket, or on Ray."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from modelhost import errors
from modelhost.cli.common import BackendOpt, MaxTokensOpt, existing_file, fail, usage

if TYPE_CHECKING:
    from modelhost.documents.settings import ConvertSettings

__all__ = ["convert"]

#: The model that reads pages when none is named: built in (RapidOCR's models ship in its wheel), so never missing.
DEFAULT_MODEL = "ocr"


def convert(
    files: Annotated[list[Path], typer.Argument(help="PDFs or images (PNG, JPEG, TIFF).")],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="The file to write (a folder for several inputs) [stdout; beside each input]."
        ),
    ] = None,
    to: Annotated[
        str | None, typer.Option("--to", help="md, json, doctags or html [from -o's suffix, else md].")
    ] = None,
    model: Annotated[str, typer.Option("--model", "-m", help="`ocr`, or a DocTags VLM folder.")] = DEFAULT_MODEL,
    backend: BackendOpt = None,
    socket: Annotated[
        str | None, typer.Option("--socket", help="Read pages through a running `modelhost serve` (alone: default).")
    ] = None,
    dpi: Annotated[int, typer.Option("--dpi", help="Resolution PDF pages are rasterized at.")] = 150,
    pages: Annotated[str | None, typer.Option("--pages", help="Pages to convert, e.g. 1-3,5 [all].")] = None,
    max_tokens: MaxTokensOpt = 8192,
    text_layer: Annotated[
        bool,
        typer.Option(
            "--text-layer/--no-text-layer",
            help="Read PDF pages that have a usable text layer from it (exact, no model time), whatever the model; "
            "--no-text-layer sends every page's pixels to the model.",
        ),
    ] = True,
    pictures: Annotated[
        bool,
        typer.Option(
            "--pictures",
            help="Also read the text a text-layer page holds only in its pictures (a scanned paragraph, a screenshot "
            "of prose) with the model: each picture costs a page's OCR, so it is off unless asked.",
        ),
    ] = False,
    regions: Annotated[
        bool,
        typer.Option(
            "--regions/--no-regions",
            help="Read the tables of a text-layer page that shows one from the model's layout regions (the ocr "
            "model's layout model; loads the model for such a page); --no-regions keeps the text path's own tables.",
        ),
    ] = True,
    ray: Annotated[
        str | None,
        typer.Option("--ray", help="Spread the pages over actors on the Ray cluster at HOST:PORT (or auto)."),
    ] = None,
    actors: Annotated[int, typer.Option("--actors", min=1, help="--ray: actors, each one engine and model.")] = 2,
) -> None:
    """Convert documents: each PDF page from its text layer when usable, else read from its pixels by a model (in
    this process, or over --socket), assembled into one. The model loads only if a page needs it."""
    import asyncio

    from modelhost.documents import ConvertSettings, batch

    for file in files:
        existing_file(file, "convert")
    try:
        fmt = batch.choose_format(to, output)
        batch.targets(files, output, fmt)
    except ValueError as exc:
        raise usage(str(exc)) from exc
    if ray is not None and socket is not None:
        raise usage("--ray and --socket: choose one (with --ray, each actor loads the model itself)")
    settings = ConvertSettings(dpi, pages, max_tokens, text_layer, pictures=pictures, regions=regions)
    try:
        if ray is not None:
            from modelhost.ray.cluster import check_installed

            check_installed("--ray")
            outcomes = _convert_on_ray(ray, actors, files, output, fmt, model, backend, settings)
        else:
            outcomes = asyncio.run(_convert(files, output, fmt, model, backend, socket, settings))
    except errors.ModelHostError as exc:
        raise fail(exc) from exc
    failed = False
    for outcome in outcomes:
        if outcome.error:
            typer.secho(f"modelhost: {outcome.error}", err=True, fg=typer.colors.RED)
            failed = True
        elif outcome.conversion is not None:
            from modelhost.documents import summary

            where = f" -> {outcome.written}" if outcome.written else ""
            typer.secho(summary(outcome.conversion) + where, err=True, fg=typer.colors.BRIGHT_BLACK)
            if (nothing := _nothing_read(outcome.conversion, socket)) is not None:
                typer.secho(f"modelhost: {nothing}", err=True, fg=typer.colors.RED)
                failed = True
    if failed:
        raise typer.Exit(1)


def _nothing_read(conversion: Any, socket: str | None) -> str | None:
    """Why no page of `conversion` was read (every page failed with nothing kept); None when one was.

    An empty document written with exit status 0 is what a model that reads no pages (a text model on the socket)
    used to give: the run must say it failed, and why.
    """
    if any(not page.error or page.doctags.strip() for page in conversion.pages):
        return None
    reasons = [page.error for page in conversion.pages] or list(conversion.unread.values())
    why = f": {reasons[0]}" if reasons else ""
    message = f"{conversion.name}: no page was read{why}"
    if socket is not None and any("attachment_unsupported" in reason for reason in reasons):
        message += " (the socket's model reads no images: serve a page model there, e.g. `--socket-model ocr`)"
    return message


def _write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


async def _convert(
    files: list[Path],
    output: Path | None,
    fmt: str,
    model: str,
    backend: str | None,
    socket: str | None,
    settings: ConvertSettings,
) -> list[Any]:
    from modelhost.documents import WireReader, batch
    from modelhost.documents.readers import StartingReader

    named: str | None = None
    if socket is None and model != DEFAULT_MODEL:
        # A model named on the command line is found before any page: a typo is one line and exit 2 at once, also
        # for a document whose pages all have a text layer (which never loads the model, so would never find out).
        # The default is built in and cannot be missing, so the usual run skips the catalogue's import (0.17 s).
        from modelhost.inference import catalogue

        named = catalogue.resolve(model)

    def make_host() -> Any:
        # At the first page that needs the model: a document of text-layer pages imports no host nor contract.
        from modelhost.host import Host
        from modelhost.host.metrics import UnreadMetrics
        from modelhost.inference import catalogue, registry
        from modelhost.inference.catalogue import model_name

        path = named if named is not None else catalogue.resolve(model)
        name = model_name(model)
        # No door serves this host's /metrics: its figures are dropped, and prometheus_client is never imported.
        return Host(lambda: registry.load_model(path, backend), name=name, metrics=UnreadMetrics(name))

    # The built-in `ocr` model answers a page's layout regions (readers.StartingReader starts it for them); another
    # model (a VLM) is loaded only for pages read from their pixels.
    reader: Any = (
        WireReader(socket) if socket is not None else StartingReader(make=make_host, regions=model == DEFAULT_MODEL)
    )
    try:
        if isinstance(reader, WireReader):
            reader.check()  # no host, or one whose model reads no pages: one line now, not a failure per page
        with _page_bar() as (on_start, on_page):
            return await batch.convert_files(
                files,
                reader,
                output=output,
                fmt=fmt,
                settings=settings,
                write=_write_stdout,
                on_start=on_start,
                on_page=on_page,
            )
    finally:
        if isinstance(reader, WireReader):
            reader.close()
        elif reader.made is not None:
            await reader.made.aclose()


def _convert_on_ray(
    address: str,
    actors: int,
    files: list[Path],
    output: Path | None,
    fmt: str,
    model: str,
    backend: str | None,
    convert: ConvertSettings,
) -> list[Any]:
    from modelhost.inference.catalogue import model_name
    from modelhost.ray import documents

    settings = documents.ReadSettings(model, model_name(model), backend, convert, regions=model == DEFAULT_MODEL)
    by_node: dict[str, int] = {}

    def on_piece(path: Path, node: str, count: int) -> None:
        by_node[node] = by_node.get(node, 0) + count

    with _page_bar() as (on_start, on_page):
        outcomes = documents.convert_files(
            address,
            files,
            settings,
            actors=actors,
            output=output,
            fmt=fmt,
            write=_write_stdout,
            on_start=on_start,
            on_page=on_page,
            on_piece=on_piece,
        )
    if by_node:
        where = ", ".join(f"{count} on {node}" for node, count in sorted(by_node.items()))
        typer.secho(f"modelhost: pages read by node: {where}", err=True, fg=typer.colors.BRIGHT_BLACK)
    return outcomes


@contextlib.contextmanager
def _page_bar() -> Iterator[tuple[Callable[[Path, int], None], Callable[[Path, int, int, Any], None]]]:
    """A progress bar per document on stderr, and the (on_start, on_page) callbacks that move it."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("pages  {task.fields[rate]}"),
        TimeElapsedColumn(),
    )
    tasks: dict[Path, Any] = {}
    started: dict[Path, float] = {}
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:

        def on_start(path: Path, total: int) -> None:
            started[path] = time.perf_counter()
            tasks[path] = bar.add_task(path.name, total=total, rate="")

        def on_page(path: Path, done: int, total: int, result: Any) -> None:
            rate = done / max(time.perf_counter() - started[path], 1e-9)
            bar.update(tasks[path], completed=done, rate=f"{rate:.2f}/s")

        yield on_start, on_page

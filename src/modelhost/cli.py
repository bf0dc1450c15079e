"""The `modelhost` command: it composes the library and holds no logic a test cannot reach through it.

    modelhost generate PROMPT        raw completion, streamed
    modelhost chat [MESSAGE]         one-shot, or an interactive session that keeps its history
    modelhost embed TEXT...          pooled embedding vectors, one JSON line per text
    modelhost info [MODEL]           what a model is (architecture, sizes, quantisation)
    modelhost backends               which engines exist and can run here
    modelhost serve                  hold a model and serve it through the doors (socket, HTTP, jobs)
    modelhost convert FILE...        PDFs and images to Markdown, JSON, HTML or DocTags (the offline `ocr` model)
    modelhost train                  fine-tune a LoRA adapter from a JSONL file
    modelhost pull REPO[:QUANT]      download a model from the Hugging Face hub into the local cache
    modelhost list | rm NAME         the models in that cache

Tokens go to stdout as they stream; the summary line (tokens, tokens/s, time to first token) goes to stderr, so
`modelhost generate ... > out.txt` captures just the text.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from modelhost import errors
from modelhost.hub import cli as hub_cli
from modelhost.training.cli import train as train_command

if TYPE_CHECKING:
    from modelhost._access import LogFormat
    from modelhost._serving import ClientLimits
    from modelhost.inference.types import GenerateMetrics, Message, Token

# The inference contract (its registry, options and types) is imported in the commands that use it, never here:
# every command's start, `modelhost --version` among them, pays for what this module imports (issue 38).

app = typer.Typer(
    name="modelhost",
    help="Load a language model once; serve it to everything that needs it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: rich markup would read every "[...]" in a help text as a style tag and drop it ("The model the
    # inferd socket serves ."), and the defaults this help shows in brackets are exactly such text.
    rich_markup_mode=None,
)

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


def _fail(exc: BaseException) -> typer.Exit:
    """One line on stderr, `modelhost: <what went wrong> [<code>]`, and the exit to raise (2: the request's fault)."""
    code = getattr(exc, "code", "error")
    message = str(exc).removeprefix("modelhost: ")  # some messages already say who is speaking
    typer.secho(f"modelhost: {message} [{code}]", err=True, fg=typer.colors.RED)
    return typer.Exit(2 if isinstance(exc, errors.ModelHostError) else 1)


def _usage(message: str) -> typer.Exit:
    """A mistake in the command line itself (a missing file, a port in use): one line, exit 2, nothing loaded."""
    typer.secho(f"modelhost: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(2)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"modelhost {version('modelhost')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """Load a language model once; serve it to everything that needs it."""


def _existing_file(path: Path, flag: str) -> Path:
    """`path` when it is a readable file; else the one-line error of `_usage`, before any model loads for nothing."""
    if not path.exists():
        raise _usage(f"{flag} {path}: no such file")
    if not path.is_file():
        raise _usage(f"{flag} {path}: not a file")
    return path


def _load(model: str, backend: str | None, adapter: str | None = None) -> Any:
    from modelhost.inference import registry

    try:
        return registry.load_model(model, backend, adapter=adapter)
    except errors.ModelHostError as exc:
        raise _fail(exc) from exc


def _stream(tokens: Iterator[Token]) -> tuple[str, float | None]:
    """Print tokens as they come; return the text and the time to the first token."""
    start = time.perf_counter()
    first: float | None = None
    parts: list[str] = []
    for token in tokens:
        if first is None:
            first = time.perf_counter() - start
        if token.text:
            parts.append(token.text)
            sys.stdout.write(token.text)
            sys.stdout.flush()
    sys.stdout.write("\n")
    return "".join(parts), first


def _summary(metrics: GenerateMetrics, ttft: float | None) -> None:
    rate = metrics.decode_tokens_per_second
    ttft_text = f", first token {ttft:.2f} s" if ttft is not None else ""
    typer.secho(
        f"[{metrics.generated_tokens} tokens, {rate:.1f} tokens/s, prompt {metrics.prompt_tokens} tokens"
        f"{ttft_text}, {metrics.finish_reason}]",
        err=True,
        fg=typer.colors.BRIGHT_BLACK,
    )


def _options(
    max_tokens: int, temperature: float | None, seed: int | None, json_schema: str | None = None
) -> dict[str, Any]:
    if max_tokens < 1:  # 0 would generate nothing (or, on some engines, mean "no bound"): neither is what was meant
        raise _usage(f"--max-tokens takes 1 or more, got {max_tokens}")
    options: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed}
    if json_schema is not None:
        options["json_schema"] = _schema(json_schema)
    return options


def _schema(value: str) -> Any:
    """`--json-schema`: a file holding a JSON Schema, or the schema's JSON itself (`{}` is JSON mode: any object)."""
    import json

    text = value
    where = "--json-schema"
    if not value.lstrip().startswith("{"):  # not the schema itself: the name of a file holding it
        path = _existing_file(Path(value), "--json-schema")
        where = f"--json-schema {value}"
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _usage(f"{where}: cannot read it: {exc}") from None
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise _usage(f"{where}: not JSON: {exc}") from None
    schema = schema or {"type": "object"}
    from modelhost.inference.options import GenerateOptions

    try:  # the bounds every engine needs (inference/schema_limits.py), before a model is loaded for nothing
        GenerateOptions.parse(json_schema=schema)
    except errors.InvalidOptionError as exc:
        raise _usage(f"{where}: {exc.detail} [{exc.code}]") from None
    return schema


@app.command()
def generate(
    prompt: Annotated[str, typer.Argument(help="The raw prompt (no chat template).")],
    model: ModelOpt = "default",
    backend: BackendOpt = None,
    max_tokens: MaxTokensOpt = 256,
    temperature: TemperatureOpt = None,
    seed: SeedOpt = None,
    json_schema: SchemaOpt = None,
) -> None:
    """Continue a raw prompt, streaming the tokens."""
    options = _options(max_tokens, temperature, seed, json_schema)
    with _load(model, backend) as m:
        try:
            _, ttft = _stream(m.generate(prompt, **options))
        except errors.ModelHostError as exc:
            raise _fail(exc) from exc
        _summary(m.metrics(), ttft)


@app.command()
def chat(
    message: Annotated[str | None, typer.Argument(help="One message; without it, an interactive session.")] = None,
    model: ModelOpt = "default",
    backend: BackendOpt = None,
    system: Annotated[str | None, typer.Option("--system", help="A system prompt.")] = None,
    max_tokens: MaxTokensOpt = 512,
    temperature: TemperatureOpt = None,
    seed: SeedOpt = None,
    socket: Annotated[
        str | None, typer.Option("--socket", help="Talk to a running `modelhost serve` (alone: the default address).")
    ] = None,
    image: Annotated[
        list[Path] | None,
        typer.Option("--image", "-i", help="A PNG or JPEG for a vision model, attached to the first message."),
    ] = None,
    adapter: Annotated[
        str | None, typer.Option("--adapter", help="A LoRA adapter folder (`modelhost train` output) to apply.")
    ] = None,
    json_schema: SchemaOpt = None,
    think: Annotated[
        bool | None,
        typer.Option("--think/--no-think", help="A thinking model thinks first, or answers at once [its template's]."),
    ] = None,
) -> None:
    """Chat with a model: one answer to MESSAGE, or an interactive session keeping history (Ctrl-D to leave)."""
    from modelhost.inference.types import Message

    options = _options(max_tokens, temperature, seed, json_schema)
    if think is not None:
        options["enable_thinking"] = think
    history: list[Message] = [Message("system", system)] if system else []
    # Encoded bytes, as the contract allows: the backend that accepts images decodes (and bounds) them itself.
    images = tuple(_existing_file(path, "--image").read_bytes() for path in image or ())
    if socket is not None:
        if adapter is not None:
            raise _usage("--adapter applies to a model loaded here; a served model has its own")
        if json_schema is not None:
            raise _usage("--json-schema: inferd's wire carries no schema; use the HTTP door's response_format")
        _chat_over_socket(socket, history, message, max_tokens, temperature, images)
        return
    with _load(model, backend, adapter) as m:

        def answer(turns: list[Message]) -> str:
            try:
                text, ttft = _stream(m.chat(turns, **options))
            except errors.ModelHostError as exc:
                raise _fail(exc) from exc
            _summary(m.metrics(), ttft)
            return text

        _converse(answer, history, message, images)


def _converse(answer: Any, history: list[Message], message: str | None, images: tuple[bytes, ...] = ()) -> None:
    from modelhost.inference.types import Message

    if message is not None:
        answer([*history, Message("user", message, images)])
        return
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            typer.secho(">>> ", nl=False, fg=typer.colors.GREEN)
        line = sys.stdin.readline()
        if not line:
            break
        if not line.strip():
            continue
        first = not any(m.role == "user" for m in history)
        history.append(Message("user", line.rstrip("\n"), images if first else ()))
        history.append(Message("assistant", answer(history)))


def _chat_over_socket(
    socket: str,
    history: list[Message],
    message: str | None,
    max_tokens: int,
    temperature: float | None,
    images: tuple[bytes, ...] = (),
) -> None:
    from modelhost.wire.client import Client  # the socket door is optional at import time

    def answer(turns: list[Message]) -> str:
        start = time.perf_counter()
        parts: list[str] = []
        try:
            with Client(socket) as client:
                for delta in client.chat(turns, max_tokens=max_tokens, temperature=temperature):
                    parts.append(delta)
                    sys.stdout.write(delta)
                    sys.stdout.flush()
                done = client.last_done
        except errors.ModelHostError as exc:
            raise _fail(exc) from exc
        sys.stdout.write("\n")
        if done is not None:
            typer.secho(
                f"[{done.output_tokens} tokens in {time.perf_counter() - start:.2f} s, {done.stop_reason}]",
                err=True,
                fg=typer.colors.BRIGHT_BLACK,
            )
        return "".join(parts)

    _converse(answer, history, message, images)


#: Texts embedded per model call from a file: big enough that batching pays (transformers: ~2.5x per input), small
#: enough that a file of millions of lines streams its vectors out instead of holding them all.
EMBED_CHUNK = 64


@app.command()
def embed(
    texts: Annotated[list[str] | None, typer.Argument(help="Texts to embed (or use --file).")] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Embed each non-empty line of this file (`-`: stdin).")
    ] = None,
    model: ModelOpt = "default",
    backend: BackendOpt = None,
    raw: Annotated[bool, typer.Option("--raw", help="Keep the vectors' own length (no L2 normalisation).")] = False,
    truncate: Annotated[bool, typer.Option("--truncate", help="Cut a text too long for the context to fit.")] = False,
) -> None:
    """Print one JSON line per text: {"index": i, "embedding": [...]} (the model's pooled, unit-length vector)."""
    import json

    from modelhost.inference.capabilities import EmbeddingModel, as_capability

    if bool(texts) == (file is not None):
        raise _fail(errors.InvalidInputError("give the texts as arguments or with --file, not both and not neither"))
    if file is not None and str(file) != "-":
        _existing_file(file, "--file")
    with _load(model, backend) as m:
        embedder = as_capability(m, EmbeddingModel)
        if embedder is None:
            raise _fail(errors.EmbeddingUnsupportedError(f"model {model!r} cannot embed text"))
        source = _lines(file) if file is not None else iter(texts or [])
        index = tokens = 0
        start = time.perf_counter()
        while chunk := [t for _, t in zip(range(EMBED_CHUNK), source, strict=False)]:
            try:
                result = embedder.embed(chunk, normalize=not raw, truncate=truncate)
            except errors.ModelHostError as exc:
                raise _fail(_shifted(exc, index)) from exc
            for vector in result.vectors:
                sys.stdout.write(json.dumps({"index": index, "embedding": [round(float(v), 7) for v in vector]}))
                sys.stdout.write("\n")
                index += 1
            tokens += result.prompt_tokens
        sys.stdout.flush()
        seconds = time.perf_counter() - start
        typer.secho(
            f"[{index} texts, {embedder.embedding_size()} dimensions, {tokens} tokens, {seconds:.2f} s]",
            err=True,
            fg=typer.colors.BRIGHT_BLACK,
        )


def _lines(file: Path) -> Iterator[str]:
    """The non-empty lines of `file` (`-`: stdin), read as they are needed."""
    stream = sys.stdin if str(file) == "-" else file.open(encoding="utf-8", errors="replace")
    try:
        for line in stream:
            if text := line.rstrip("\r\n"):
                yield text
    finally:
        if stream is not sys.stdin:
            stream.close()


def _shifted(exc: errors.ModelHostError, offset: int) -> errors.ModelHostError:
    """A chunk's error naming `input[i]` renamed to the text's place in the whole input (`input[offset + i]`)."""
    import re

    message = re.sub(r"input\[(\d+)\]", lambda m: f"input[{offset + int(m.group(1))}]", str(exc))
    return type(exc)(message) if message != str(exc) else exc


@app.command()
def info(
    model: Annotated[str, typer.Argument(help="A catalogue name, a .gguf file or a model folder.")] = "default",
    backend: BackendOpt = None,
) -> None:
    """Show what a model is."""
    with _load(model, backend) as m:
        i = m.info()
        rows = {
            "model_type": m.model_type,
            "backend": type(m).__module__.removeprefix("modelhost.backends.").split(".")[0],
            "architecture": i.architecture,
            "vocab_size": i.vocab_size,
            "layers": i.num_layers,
            "hidden_size": i.hidden_size,
            "quant_bits": i.quant_bits or "-",
            "context_length": i.context_length,
        }
        from modelhost.inference import accepts_images

        rows["accepts_images"] = accepts_images(m)
        for key, value in rows.items():
            typer.echo(f"{key:16} {value}")


@app.command()
def backends() -> None:
    """List the engines: name, whether they can run here, and their device."""
    from modelhost.inference import backend_device_info, registry, unavailable_reason

    for backend in registry.default_registry().ordered():
        ok = backend.available()
        device = backend_device_info(backend.name) if ok else None
        where = f"{device.name} ({device.memory_size / 2**30:.1f} GiB)" if device and device.memory_size else "-"
        if not ok:
            where = unavailable_reason(backend.name)
        typer.echo(f"{backend.name:14} {'available' if ok else 'unavailable':12} {where}")


@app.command()
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
    model: Annotated[str, typer.Option("--model", "-m", help="`ocr`, or a DocTags VLM folder.")] = "ocr",
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
    ray: Annotated[
        str | None,
        typer.Option("--ray", help="Spread the pages over actors on the Ray cluster at HOST:PORT (or auto)."),
    ] = None,
    actors: Annotated[int, typer.Option("--actors", min=1, help="--ray: actors, each one engine and model.")] = 2,
) -> None:
    """Convert documents: each PDF page from its text layer when usable, else read from its pixels by a model (in
    this process, or over --socket), assembled into one. The model loads only if a page needs it."""
    import asyncio

    from modelhost.documents import batch

    for file in files:
        _existing_file(file, "convert")
    try:
        fmt = batch.choose_format(to, output)
        batch.targets(files, output, fmt)
    except ValueError as exc:
        raise _usage(str(exc)) from exc
    if ray is not None and socket is not None:
        raise _usage("--ray and --socket: choose one (with --ray, each actor loads the model itself)")
    try:
        if ray is not None:
            from modelhost.ray.cluster import check_installed

            check_installed("--ray")
            args = (files, output, fmt, model, backend, dpi, pages, max_tokens, text_layer, pictures)
            outcomes = _convert_on_ray(ray, actors, *args)
        else:
            outcomes = asyncio.run(
                _convert(files, output, fmt, model, backend, socket, dpi, pages, max_tokens, text_layer, pictures)
            )
    except errors.ModelHostError as exc:
        raise _fail(exc) from exc
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
    dpi: int,
    pages: str | None,
    max_tokens: int,
    text_layer: bool,
    pictures: bool,
) -> list[Any]:
    from modelhost.documents import WireReader, batch
    from modelhost.documents.readers import StartingReader
    from modelhost.host import Host
    from modelhost.inference import catalogue, registry
    from modelhost.serve import model_name

    host: Host | None = None
    reader: Any
    if socket is not None:
        reader = WireReader(socket)
    else:
        path = catalogue.resolve(model)
        host = Host(lambda: registry.load_model(path, backend), name=model_name(model))
        reader = StartingReader(host)  # loaded at the first page that needs it
    try:
        if isinstance(reader, WireReader):
            reader.check()  # no host, or one whose model reads no pages: one line now, not a failure per page
        with _page_bar() as (on_start, on_page):
            return await batch.convert_files(
                files,
                reader,
                output=output,
                fmt=fmt,
                dpi=dpi,
                pages=pages,
                max_tokens=max_tokens,
                text_layer=text_layer,
                pictures=pictures,
                write=_write_stdout,
                on_start=on_start,
                on_page=on_page,
            )
    finally:
        if host is not None:
            await host.aclose()
        else:
            reader.close()


def _convert_on_ray(
    address: str,
    actors: int,
    files: list[Path],
    output: Path | None,
    fmt: str,
    model: str,
    backend: str | None,
    dpi: int,
    pages: str | None,
    max_tokens: int,
    text_layer: bool,
    pictures: bool,
) -> list[Any]:
    from modelhost.ray import documents
    from modelhost.serve import model_name

    settings = documents.ReadSettings(model, model_name(model), backend, dpi, max_tokens, text_layer, pictures)
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
            pages=pages,
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


#: Options that may be given without a value, and the value they then take (click cannot express this itself).
OPTIONAL_VALUES: dict[str, Callable[[], str]] = {
    "--http": lambda: "127.0.0.1:8000",
    "--worker": lambda: "127.0.0.1:8001",
    "--docling": lambda: "ocr",
    "--socket": lambda: _default_socket(),
}


def _default_socket() -> str:
    from modelhost.wire.address import default_address

    return default_address()


@app.command()
def serve(
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            "-m",
            help="A catalogue name, a .gguf file or a model folder; NAME=... to choose its name. Repeat to serve "
            "several (requests name theirs) [default].",
        ),
    ] = None,
    socket_model: Annotated[
        str | None, typer.Option("--socket-model", help="The model the inferd socket serves [the first --model].")
    ] = None,
    model_socket: Annotated[
        list[str] | None,
        typer.Option("--model-socket", help="Another inferd socket for one model: NAME=PATH (repeatable)."),
    ] = None,
    lazy: Annotated[
        bool, typer.Option("--lazy", help="Load each model at its first request (the socket's model: at start).")
    ] = False,
    keep_alive: Annotated[
        float | None, typer.Option("--keep-alive", min=0, help="Unload a model idle this many seconds [never].")
    ] = None,
    max_memory: Annotated[
        str | None,
        typer.Option(
            "--max-memory", help="Bound on loaded models' total size, e.g. 8G; the LRU idle one unloads [none]."
        ),
    ] = None,
    backend: BackendOpt = None,
    socket: Annotated[
        str | None, typer.Option("--socket", help="Unix socket path (default: the inferd address).")
    ] = None,
    no_socket: Annotated[bool, typer.Option("--no-socket", help="Do not open the inferd socket door.")] = False,
    http: Annotated[
        str | None, typer.Option("--http", help="OpenAI/Ollama HTTP door on HOST:PORT (alone: 127.0.0.1:8000).")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option("--api-key", envvar="MODELHOST_API_KEY", help="Bearer token for /v1 and /api.")
    ] = None,
    no_ui: Annotated[
        bool, typer.Option("--no-ui", help="No page for people at / of the --http door (chat, documents, state).")
    ] = False,
    worker: Annotated[
        str | None, typer.Option("--worker", help="giz job worker on HOST:PORT (alone: 127.0.0.1:8001).")
    ] = None,
    docling: Annotated[
        str | None,
        typer.Option(
            "--docling",
            help="docling-serve's document API on the --http door, pages read by this served model (alone: ocr); "
            "its tasks in --state's docling/ [~/.local/state/modelhost/docling].",
        ),
    ] = None,
    allow_fetch: Annotated[
        bool, typer.Option("--allow-fetch", help="--docling: fetch URL sources (public addresses only).")
    ] = False,
    fetch_private: Annotated[
        bool, typer.Option("--fetch-private", help="--docling --allow-fetch: private and loopback addresses too.")
    ] = False,
    state: Annotated[
        str | None, typer.Option("--state", help="The job worker's state folder [~/.local/state/modelhost/worker].")
    ] = None,
    capacity: Annotated[int, typer.Option("--capacity", help="Jobs the worker holds at once.")] = 8,
    max_queue: Annotated[int, typer.Option("--max-queue", help="Requests that may wait for the model.")] = 64,
    parallel: Annotated[
        int | None,
        typer.Option(
            "--parallel",
            min=1,
            help="Requests decoded at once (continuous batching; llama_cpp default 4; 1: one at a time).",
        ),
    ] = None,
    mmproj: Annotated[
        str | None,
        typer.Option(
            "--mmproj", help="A GGUF vision model's projector (llama_cpp) [an mmproj-<name>.gguf beside the model]."
        ),
    ] = None,
    threads: Annotated[
        int | None, typer.Option("--threads", min=1, help="Compute threads per model [the cores this process may use].")
    ] = None,
    poll: Annotated[
        int | None,
        typer.Option(
            "--poll",
            min=0,
            max=100,  # inference/openmp.py's MAX_POLL, written out: this module imports no contract at the top
            help="How long compute threads spin before they sleep, 0-100 (0: sleep at once; 100: OpenMP's and "
            "llama-server's 3 ms) [measured at start: 100 on cores of its own, 0 on shared ones].",
        ),
    ] = None,
    tensor_parallel: Annotated[
        int | None, typer.Option("--tp", min=1, help="vllm: GPUs each model's layers are split across [1].")
    ] = None,
    pipeline_parallel: Annotated[
        int | None, typer.Option("--pp", min=1, help="vllm: pipeline stages each model is cut into [1].")
    ] = None,
    header_timeout: Annotated[
        float | None, typer.Option("--header-timeout", help="HTTP doors: seconds a request's headers may take [60].")
    ] = None,
    body_timeout: Annotated[
        float | None, typer.Option("--body-timeout", help="HTTP doors: seconds a request body may pause [60].")
    ] = None,
    max_connections: Annotated[
        int | None, typer.Option("--max-connections", help="HTTP doors: open connections each holds [256].")
    ] = None,
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format", help="HTTP doors' access log on stderr: text (for a person), json (a line each) or none."
        ),
    ] = "text",
    adapter: Annotated[
        list[str] | None,
        typer.Option(
            "--adapter",
            help="A LoRA adapter served by name beside its base: NAME=PATH (the base its config names, or the only "
            "model), or NAME=MODEL:PATH (repeatable). Requests name it in `model`.",
        ),
    ] = None,
    allow_adapter_loading: Annotated[
        bool,
        typer.Option(
            "--allow-adapter-loading",
            help="Let HTTP clients load and unload adapters at runtime (POST /v1/load_lora_adapter, "
            "/v1/unload_lora_adapter); the server then reads any path a client names.",
        ),
    ] = False,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help="Serve as replicas on the Ray cluster at HOST:PORT (or auto): HTTP only. With --worker: serve here "
            'as without --ray, and run the worker\'s jobs that ask "ray": true on that cluster.',
        ),
    ] = None,
    replicas: Annotated[
        int | None, typer.Option("--replicas", min=1, help="--ray: replicas, each a whole host [2].")
    ] = None,
    actors: Annotated[int, typer.Option("--actors", min=1, help='--ray --worker: actors of each "ray": true job.')] = 2,
    num_cpus: Annotated[
        float, typer.Option("--num-cpus", min=0, help="--ray: CPUs each replica (with --worker: each actor) reserves.")
    ] = 1.0,
    num_gpus: Annotated[
        float, typer.Option("--num-gpus", min=0, help="--ray: GPUs each replica (with --worker: each actor) reserves.")
    ] = 0.0,
) -> None:
    """Hold a model and serve it: the inferd socket (default), and optionally HTTP and the job worker."""
    from modelhost import serve as serving
    from modelhost.host.models import parse_size

    socket_path: str | None = None
    on_serve = ray is not None and worker is None  # replicas on Ray Serve; with --worker, Ray runs only its jobs
    if not no_socket and not (on_serve and socket is None):  # replicas: no default socket, HTTP only
        socket_path = socket if socket is not None else _default_socket()
    if ray is not None and not on_serve and replicas is not None:
        raise _usage("--replicas goes with serve --ray's replicas; with --worker, --actors sizes its jobs' pools")
    try:
        config = serving.ServeConfig(
            models=tuple(model or ("default",)),
            socket_model=socket_model,
            model_sockets=tuple(model_socket or ()),
            lazy=lazy,
            keep_alive=keep_alive,
            max_memory=parse_size(max_memory) if max_memory is not None else None,
            backend=backend,
            socket=socket_path,
            http=serving.parse_hostport(http) if http else None,
            api_key=api_key,
            ui=not no_ui,
            worker=serving.parse_hostport(worker) if worker else None,
            state_dir=Path(state) if state else None,
            capacity=capacity,
            max_queue=max_queue,
            parallel=parallel,
            threads=threads,
            poll=poll,
            mmproj=mmproj,
            tensor_parallel=tensor_parallel,
            pipeline_parallel=pipeline_parallel,
            client_limits=_client_limits(header_timeout, body_timeout, max_connections),
            access_log=_log_format(log_format),
            adapters=tuple(adapter or ()),
            allow_adapter_loading=allow_adapter_loading,
            docling=docling,
            allow_fetch=allow_fetch,
            fetch_private=fetch_private,
            ray=ray if not on_serve else None,
            ray_actors=actors,
            ray_actor_cpus=num_cpus,
            ray_actor_gpus=num_gpus,
        )
        if on_serve:
            assert ray is not None
            placement = serving.RayPlacement(ray, num_cpus=num_cpus, num_gpus=num_gpus)
            if replicas is not None:
                placement = dataclasses.replace(placement, replicas=replicas)
            serving.run_on_ray(config, placement)
        else:
            serving.run(config)
    except ValueError as exc:
        raise _usage(str(exc)) from exc
    except errors.ModelHostError as exc:
        raise _fail(exc) from exc
    except OSError as exc:  # what no check foresaw (a disk that fails): still one line, not a traceback
        raise _fail(exc) from exc


def _log_format(value: str) -> LogFormat | None:
    """`--log-format`: text, json or none; ValueError (one line) for anything else."""
    if value == "none":
        return None
    if value == "text":
        return "text"
    if value == "json":
        return "json"
    raise ValueError(f"--log-format takes text, json or none, got {value!r}")


def _client_limits(
    header_timeout: float | None, body_timeout: float | None, max_connections: int | None
) -> ClientLimits | None:
    """The doors' ClientLimits from the flags given (None: the doors' defaults); ValueError for a bad value."""
    if header_timeout is None and body_timeout is None and max_connections is None:
        return None
    from modelhost import _serving

    default = _serving.ClientLimits()
    return _serving.ClientLimits(
        header_timeout=default.header_timeout if header_timeout is None else header_timeout,
        body_timeout=default.body_timeout if body_timeout is None else body_timeout,
        max_connections=default.max_connections if max_connections is None else max_connections,
    )


app.command(name="train")(train_command)
app.command(name="pull")(hub_cli.pull)
app.command(name="list")(hub_cli.list_models)
app.command(name="rm")(hub_cli.rm)


def expand_optional_values(argv: list[str]) -> list[str]:
    """Give `--http`, `--worker` and `--socket` their default when they stand alone (last, or before an option)."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        out.append(arg)
        if arg in OPTIONAL_VALUES and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out.append(OPTIONAL_VALUES[arg]())
    return out


def main() -> None:
    """Console-script entry point."""
    if sys.argv[1:] == ["--version"]:
        # Answered before typer builds every command's options from their signatures: half of the command's time
        # (0.30 s to 0.15 s on a quiet 2-core machine), for a line a script may ask for on each run.
        from importlib.metadata import version

        typer.echo(f"modelhost {version('modelhost')}")
        return
    app(args=expand_optional_values(sys.argv[1:]), prog_name="modelhost")


if __name__ == "__main__":
    main()

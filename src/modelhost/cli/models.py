"""The model commands: `generate`, `chat`, `embed`, `info` and `backends`, each on a model loaded in this process
(`chat --socket`: on a running `modelhost serve`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from modelhost import errors
from modelhost.cli.common import (
    BackendOpt,
    MaxTokensOpt,
    ModelOpt,
    SchemaOpt,
    SeedOpt,
    TemperatureOpt,
    existing_file,
    fail,
    usage,
)

if TYPE_CHECKING:
    from modelhost.inference.types import GenerateMetrics, Message, Token

__all__ = ["EMBED_CHUNK", "backends", "chat", "embed", "generate", "info"]


def _load(model: str, backend: str | None, adapter: str | None = None) -> Any:
    from modelhost.inference import registry

    try:
        return registry.load_model(model, backend, adapter=adapter)
    except errors.ModelHostError as exc:
        raise fail(exc) from exc


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
        raise usage(f"--max-tokens takes 1 or more, got {max_tokens}")
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
        path = existing_file(Path(value), "--json-schema")
        where = f"--json-schema {value}"
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise usage(f"{where}: cannot read it: {exc}") from None
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise usage(f"{where}: not JSON: {exc}") from None
    schema = schema or {"type": "object"}
    from modelhost.inference.options import GenerateOptions

    try:  # the bounds every engine needs (inference/schema_limits.py), before a model is loaded for nothing
        GenerateOptions.parse(json_schema=schema)
    except errors.InvalidOptionError as exc:
        raise usage(f"{where}: {exc.detail} [{exc.code}]") from None
    return schema


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
            raise fail(exc) from exc
        _summary(m.metrics(), ttft)


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
    images = tuple(existing_file(path, "--image").read_bytes() for path in image or ())
    if socket is not None:
        if adapter is not None:
            raise usage("--adapter applies to a model loaded here; a served model has its own")
        if json_schema is not None:
            raise usage("--json-schema: inferd's wire carries no schema; use the HTTP door's response_format")
        _chat_over_socket(socket, history, message, max_tokens, temperature, images)
        return
    with _load(model, backend, adapter) as m:

        def answer(turns: list[Message]) -> str:
            try:
                text, ttft = _stream(m.chat(turns, **options))
            except errors.ModelHostError as exc:
                raise fail(exc) from exc
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
            raise fail(exc) from exc
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
        raise fail(errors.InvalidInputError("give the texts as arguments or with --file, not both and not neither"))
    if file is not None and str(file) != "-":
        existing_file(file, "--file")
    with _load(model, backend) as m:
        embedder = as_capability(m, EmbeddingModel)
        if embedder is None:
            raise fail(errors.EmbeddingUnsupportedError(f"model {model!r} cannot embed text"))
        source = _lines(file) if file is not None else iter(texts or [])
        index = tokens = 0
        start = time.perf_counter()
        while chunk := [t for _, t in zip(range(EMBED_CHUNK), source, strict=False)]:
            try:
                result = embedder.embed(chunk, normalize=not raw, truncate=truncate)
            except errors.ModelHostError as exc:
                raise fail(_shifted(exc, index)) from exc
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

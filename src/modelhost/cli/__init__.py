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

One module per group of commands, as `modelhost.hub.cli` is for the hub's: `models` (generate, chat, embed, info,
backends), `convert`, `serve` (its flags into one `modelhost.serve.ServeConfig`), `argv` (options that may stand
alone), `common` (the shared options and one-line failures). This module builds the `app` from them.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from modelhost.cli import convert, models, serve
from modelhost.cli.argv import expand_optional_values
from modelhost.hub import cli as hub_cli
from modelhost.training.cli import train as train_command

__all__ = ["app", "expand_optional_values", "main"]

# The inference contract (its registry, options and types) is imported in the commands that use it, never here nor in
# the command modules: every command's start, `modelhost --version` among them, pays for what this package imports
# (issue 38).

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


# In the order `modelhost --help` lists them.
app.command()(models.generate)
app.command()(models.chat)
app.command()(models.embed)
app.command()(models.info)
app.command()(models.backends)
app.command()(convert.convert)
app.command()(serve.serve)
app.command(name="train")(train_command)
app.command(name="pull")(hub_cli.pull)
app.command(name="list")(hub_cli.list_models)
app.command(name="rm")(hub_cli.rm)


def main() -> None:
    """Console-script entry point."""
    if sys.argv[1:] == ["--version"]:
        # Answered before typer builds every command's options from their signatures: half of the command's time
        # (0.30 s to 0.15 s on a quiet 2-core machine), for a line a script may ask for on each run.
        from importlib.metadata import version

        typer.echo(f"modelhost {version('modelhost')}")
        return
    app(args=expand_optional_values(sys.argv[1:]), prog_name="modelhost")

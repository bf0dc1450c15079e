"""Several documents, one reader: where each result goes, and the run that converts them one after another.

One bad file does not stop the others: its error is reported by name and the run goes on; the caller learns which
files failed from the returned outcomes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from modelhost.documents.assemble import DOCLING_FORMATS, FORMATS
from modelhost.documents.engine import PageResult
from modelhost.documents.pipeline import Conversion, convert
from modelhost.documents.readers import PageReader
from modelhost.documents.settings import DEFAULTS, ConvertSettings
from modelhost.errors import ModelHostError

_SUFFIXES = {"md": ".md", "json": ".json", "doctags": ".doctags", "html": ".html"}


def choose_format(fmt: str | None, output: Path | None) -> str:
    """`--to`, else the output's suffix (`.md`, `.json`, `.doctags`, `.html`), else Markdown."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise ValueError(f"--to must be one of {', '.join(FORMATS)}, got {fmt!r}")
        return fmt
    if output is not None:
        for name, suffix in _SUFFIXES.items():
            if output.suffix.lower() == suffix:
                return name
    return "md"


def targets(files: Sequence[Path], output: Path | None, fmt: str) -> list[Path | None]:
    """Where each file's result goes; None is standard output (one file and no `-o`).

    One file: `-o` is the file to write. Several: `-o` is a folder (created), each result named after its input;
    without `-o`, each result goes beside its input.
    """
    suffix = _SUFFIXES[fmt]
    if len(files) == 1 and (output is None or not output.is_dir()):
        if output is not None:
            _check_folder(output, output.parent)
        return [output]
    if output is not None and output.exists() and not output.is_dir():
        raise ValueError(f"-o {output}: several files need a folder to write into")
    if output is not None:
        _check_folder(output, output)
    folder = output
    return [(folder or f.parent) / (f.stem + suffix) for f in files]


def _check_folder(output: Path, folder: Path) -> None:
    """ValueError naming `-o` when nothing could be written into `folder`, asked before any page is read (a whole
    document converted, then lost at its write, is what a missing folder used to cost). A folder that does not exist
    yet is made only for several inputs (`-o` is then that folder), under a parent that exists."""
    if folder != output and not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise ValueError(f"-o {output}: the folder {folder} {why}")
    existing = next((p for p in (folder, *folder.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise ValueError(f"-o {output}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"-o {output}: cannot write into {existing}: permission denied")


@dataclass(slots=True)
class Outcome:
    """What happened to one file: its conversion and where it was written, or the error that stopped it."""

    path: Path
    conversion: Conversion | None = None
    written: Path | None = None
    error: str = ""


def deliver(conversion: Conversion, place: Path | None, fmt: str, write: Callable[[str], None] | None) -> None:
    """Write a converted document as `fmt` to `place`, or give it to `write` (standard output) when `place` is None
    (one of `targets`). OSError when the file cannot be written."""
    text = conversion.render(fmt)
    if place is None:
        if write is not None:
            write(text)
    else:
        place.write_text(text, encoding="utf-8")


async def convert_files(
    files: Sequence[Path],
    reader: PageReader,
    *,
    output: Path | None = None,
    fmt: str = "md",
    settings: ConvertSettings = DEFAULTS,
    write: Callable[[str], None] | None = None,
    on_start: Callable[[Path, int], None] | None = None,
    on_page: Callable[[Path, int, int, PageResult], None] | None = None,
) -> list[Outcome]:
    """Convert each file in turn as `settings` say, writing its result (`write` takes what goes to standard
    output)."""
    places = targets(files, output, fmt)
    if output is not None and len(files) > 1:
        output.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for path, place in zip(files, places, strict=True):
        outcome = Outcome(path)
        try:
            conversion = await convert(
                path,
                reader,
                settings,
                on_start=(lambda total, p=path: on_start(p, total)) if on_start else None,  # type: ignore[misc]
                on_page=(lambda d, t, r, p=path: on_page(p, d, t, r)) if on_page else None,  # type: ignore[misc]
                docling=fmt in DOCLING_FORMATS,
            )
            deliver(conversion, place, fmt, write)
            outcome.conversion, outcome.written = conversion, place
        except ModelHostError as exc:
            outcome.error = str(exc)
        except OSError as exc:
            outcome.error = f"{path.name}: {exc}"
        outcomes.append(outcome)
    return outcomes

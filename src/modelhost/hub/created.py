"""Models made here from others, as Ollama's `create` and `copy` make them: a new name, the model it is made FROM (a
served or pulled name, a catalogue name, a local GGUF file or model folder), and what it adds: a LoRA ADAPTER, a
SYSTEM prompt, a TEMPLATE, PARAMETERs (request defaults). Each is one JSON file in a folder beside the hub cache
(`modelhost-created/`), so the name survives a restart, as an Ollama model's manifest does.

`parse_modelfile` reads Ollama's Modelfile (`FROM`, `ADAPTER`, `SYSTEM`, `TEMPLATE`, `PARAMETER`; three double quotes
quote a value of several lines); the Ollama door turns a create request (its JSON fields, or a Modelfile) into a
`CreatedModel`, serves it and saves it here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelhost.errors import InvalidInputError
from modelhost.inference import hub_cache

log = logging.getLogger(__name__)

#: A Modelfile is a handful of lines and a prompt or two; one larger than this is not a Modelfile (and is refused
#: before it is split into lines).
MAX_MODELFILE_BYTES = 64 * 1024
#: Ollama's model names: `name`, `name:tag`, `namespace/name:tag`, letters, digits and `._-`; bounded as its own are.
_NAME_PART = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
NAME = re.compile(rf"^{_NAME_PART}(?:/{_NAME_PART})?(?::[A-Za-z0-9._-]{{1,128}})?$")
#: PARAMETERs a request takes as a default option, with the type each must have (Ollama's names).
PARAMETERS: dict[str, type] = {
    "temperature": float,
    "top_p": float,
    "top_k": int,
    "min_p": float,
    "seed": int,
    "num_predict": int,
    "num_ctx": int,
    "repeat_penalty": float,
    "presence_penalty": float,
    "frequency_penalty": float,
    "stop": str,  # repeatable: a list of them
}
#: Created models kept at most: each is a small file read at every start; more would only be a mistake's loop.
MAX_CREATED = 1000


@dataclass(frozen=True, slots=True)
class CreatedModel:
    """A model made from another: what `/api/create` or `/api/copy` was given."""

    name: str
    source: str
    adapter: str | None = None
    system: str | None = None
    template: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)


def check_name(name: Any, field_name: str = "model") -> str:
    """`name` when it is a model name Ollama would take; InvalidInputError naming `field_name` otherwise."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidInputError(f"{field_name}: not a model name (letters, digits, ._- and one / and :): {name!r}")
    return name


def check_parameters(parameters: Any) -> dict[str, Any]:
    """Ollama's PARAMETERs, checked: the known names only, each of its type (`stop`: a string or a list of them)."""
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise InvalidInputError("parameters: expected an object")
    checked: dict[str, Any] = {}
    for key, value in parameters.items():
        kind = PARAMETERS.get(key)
        if kind is None:
            raise InvalidInputError(f"parameters: unknown parameter {key!r}; known: {', '.join(PARAMETERS)}")
        if key == "stop":
            values = value if isinstance(value, list) else [value]
            if not all(isinstance(v, str) for v in values):
                raise InvalidInputError("parameters.stop: expected a string or a list of strings")
            checked[key] = values
        elif isinstance(value, bool) or not isinstance(value, int if kind is int else int | float):
            raise InvalidInputError(f"parameters.{key}: expected a {kind.__name__}, got {value!r}")
        else:
            checked[key] = kind(value)
    return checked


_INSTRUCTION = re.compile(r"^\s*([A-Za-z]+)\s+(.*)$", re.S)


def parse_modelfile(text: str) -> dict[str, Any]:
    """A Modelfile's instructions as create's fields: `from`, `adapter`, `system`, `template`, `parameters`.

    InvalidInputError for what is not one: no FROM, an instruction modelhost does not know (LICENSE and MESSAGE
    are refused rather than dropped), a PARAMETER that is not a known name and value, a quote left open."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_MODELFILE_BYTES:
        raise InvalidInputError(f"modelfile: more than {MAX_MODELFILE_BYTES} bytes")
    fields: dict[str, Any] = {}
    raw_parameters: dict[str, Any] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _INSTRUCTION.match(line)
        if match is None:
            raise InvalidInputError(f"modelfile line {i}: expected an instruction and its value: {line.strip()!r}")
        instruction, value = match.group(1).upper(), match.group(2).strip()
        if value.startswith('"""'):  # a value of several lines, up to the closing """
            value = value[3:]
            while '"""' not in value:
                if i >= len(lines):
                    raise InvalidInputError(f'modelfile: a """ opened by {instruction} is never closed')
                value += "\n" + lines[i]
                i += 1
            value = value[: value.index('"""')]
        elif len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if instruction == "PARAMETER":
            key, _, setting = value.partition(" ")
            setting = setting.strip().strip('"')
            if key == "stop":
                raw_parameters.setdefault("stop", []).append(setting)
            else:
                raw_parameters[key] = _number(key, setting)
        elif instruction in ("FROM", "ADAPTER", "SYSTEM", "TEMPLATE"):
            fields[instruction.lower()] = value
        else:
            raise InvalidInputError(f"modelfile line {i}: {instruction} is not supported here "
                                    "(FROM, ADAPTER, SYSTEM, TEMPLATE, PARAMETER)")  # fmt: skip
    if "from" not in fields:
        raise InvalidInputError("modelfile: no FROM line (the model this one is made from)")
    fields["parameters"] = check_parameters(raw_parameters)
    return fields


def _number(key: str, text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise InvalidInputError(f"modelfile: PARAMETER {key} {text!r} is not a number") from None


def folder() -> Path:
    """Where created models are kept: `modelhost-created/` beside the hub cache (HF_HUB_CACHE's parent)."""
    return hub_cache.cache_root().parent / "modelhost-created"


def _file(name: str) -> Path:
    # Named by a digest of the model's name: a name holds `/` and `:`, which a file name cannot carry everywhere.
    return folder() / (hashlib.sha256(name.encode()).hexdigest()[:32] + ".json")


def check_room(name: str) -> None:
    """InvalidInputError when `name` would be a new created model beyond MAX_CREATED (`load_all` reads no more at a
    start, so one more would be served now and gone after a restart); making one again is always room."""
    where = folder()
    if not where.is_dir() or _file(name).exists():
        return
    if sum(1 for _ in where.glob("*.json")) >= MAX_CREATED:
        raise InvalidInputError(f"model: {MAX_CREATED} created models are kept already; delete one first")


def save(model: CreatedModel) -> None:
    """Keep `model` (replacing one of its name), written whole or not at all."""
    where = folder()
    where.mkdir(parents=True, exist_ok=True)
    data = json.dumps(dataclasses.asdict(model), indent=1).encode()
    fd, partial = tempfile.mkstemp(prefix=".created.", dir=where)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(
                out.fileno()
            )  # on the disk before its name says so: a power loss leaves the old file, not a short one
        os.replace(partial, _file(model.name))
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def load_all() -> list[CreatedModel]:
    """Every kept model, by name; a file that does not read back (a half-edited one) is skipped with a warning."""
    where = folder()
    if not where.is_dir():
        return []
    found: list[CreatedModel] = []
    for path in sorted(where.glob("*.json"))[:MAX_CREATED]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            model = CreatedModel(
                check_name(data["name"]), str(data["source"]), data.get("adapter"), data.get("system"),
                data.get("template"), check_parameters(data.get("parameters")),
            )  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("skipping the created model in %s: %s", path, exc)
            continue
        found.append(model)
    return found


def remove(name: str) -> bool:
    """Forget the created model `name`, and the uploaded files only it used (`release`); False when there is none."""
    gone = next((model for model in load_all() if model.name == name), None)
    try:
        _file(name).unlink()
    except FileNotFoundError:
        return False
    if gone is not None:
        release(gone)
    return True


# -- blobs: the files a client uploads by digest (`ollama create` from another machine) --------------------------------

#: Bytes of one uploaded blob at most: more than any GGUF Ollama's library serves (its largest, a 671B model at 4
#: bits, is about 404 GB); the bound that usually applies first is the disk's free space, checked before a byte is
#: written when the client declares its length.
MAX_BLOB_BYTES = 1 << 40
#: An uploaded file's name in `files` or `adapters` (`model.gguf`, `config.json`): one path component, bounded.
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
#: Ollama's blob digests: `sha256:` and 64 lowercase hex digits (its API also takes `sha256-`).
DIGEST = re.compile(r"^sha256[:-]([0-9a-f]{64})$")


def check_digest(digest: str) -> str:
    """The hex of a `sha256:<hex>` digest; InvalidInputError otherwise (a digest names a file: nothing else may)."""
    found = DIGEST.fullmatch(digest)
    if found is None:
        raise InvalidInputError(f"not a sha256 digest: {digest[:80]!r} (expected sha256:<64 hex digits>)")
    return found.group(1)


def blob_path(digest: str) -> Path:
    """Where the blob of `digest` is kept (it may not exist): `blobs/sha256-<hex>` in the created models' folder."""
    return folder() / "blobs" / f"sha256-{check_digest(digest)}"


#: The folders of links (`files/<key>`) that creates in flight have staged, with how many hold each: a create holds
#: its folder from `staged_files` until it is kept or given up (`unhold`), and `release` leaves a held folder alone,
#: so a delete that runs while a create from the same upload is in flight cannot remove the links that create is
#: about to be served and kept with. `_staging` makes a folder's links and holds it, or releases it, as one step:
#: no release between a create's check of its blobs and its links. (One process's creates: two servers sharing one
#: store are not coordinated.)
_held: Counter[Path] = Counter()
_staging = threading.Lock()


def staged_files(files: dict[str, str]) -> Path:
    """A folder holding uploaded blobs under the names a create gave them (`{"model.gguf": "sha256:..."}`), as links
    to the blobs: a model folder (config, weights) or a single GGUF a backend can load by its name; held for the
    create (`unhold` it once the create is kept or given up). InvalidInputError for a name that is not one file's,
    or a digest never uploaded."""
    if not files:
        raise InvalidInputError("files: expected at least one {name: digest}")
    for name in files:
        if not FILE_NAME.fullmatch(name):
            raise InvalidInputError(f"files: {name[:80]!r} is not a file name (letters, digits, ._-)")
    key = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:32]
    where = folder() / "files" / key
    with _staging:
        links: dict[str, Path] = {}
        for name, digest in sorted(files.items()):
            blob = blob_path(digest)
            if not blob.is_file():
                raise InvalidInputError(
                    f"files: blob {digest} of {name!r} was never uploaded (POST /api/blobs/{digest})"
                )
            links[name] = blob
        where.mkdir(parents=True, exist_ok=True)
        for name, blob in links.items():
            # Two creates from the same files at once (a client's retry, two names for one upload) make the same
            # link: the other's is this one's, the same blob under the same name.
            with contextlib.suppress(FileExistsError):
                (where / name).symlink_to(blob)
        _held[Path(os.path.abspath(where))] += 1
    return where


def unhold(where: Path) -> None:
    """The create that staged `where` (`staged_files`) is kept or given up: `release` may remove the folder again
    when no kept created model uses it."""
    with _staging:
        key = Path(os.path.abspath(where))
        _held[key] -= 1
        if _held[key] <= 0:
            del _held[key]


#: The name of a create's folder of links in `files/` (staged_files): 32 hex digits of its files' digest.
_FILES_KEY = re.compile(r"^[0-9a-f]{32}$")
#: The name of a kept blob in `blobs/` (blob_path).
_BLOB_NAME = re.compile(r"^sha256-[0-9a-f]{64}$")


def _staged_folder(path: str | None) -> Path | None:
    """The `files/<key>` folder `path` (a created model's source or adapter) lies in, or None: read from the path's
    text alone, never by following a link."""
    if path is None:
        return None
    files = Path(os.path.abspath(folder() / "files"))
    given = Path(os.path.abspath(path))
    for candidate in (given, given.parent):
        if candidate.parent == files and _FILES_KEY.fullmatch(candidate.name):
            return candidate
    return None


def _linked_blobs(staged: Path) -> set[Path]:
    """The kept blobs the links of one `files/<key>` folder point to (a link to anything else is not one)."""
    blobs = Path(os.path.abspath(folder() / "blobs"))
    found: set[Path] = set()
    if staged.is_symlink() or not staged.is_dir():
        return found
    for entry in staged.iterdir():
        if entry.is_symlink():
            target = Path(os.path.abspath(staged / os.readlink(entry)))
            if target.parent == blobs and _BLOB_NAME.fullmatch(target.name):
                found.add(target)
    return found


def release(gone: CreatedModel) -> None:
    """Remove the uploaded files the created model `gone` used and no kept created model uses: its `files/<key>`
    folder of links, and the blobs those links name that no other folder of links names.

    A blob uploaded but named by no create stays (the `ollama` client uploads a blob, then creates from it: it is
    kept until a model made from it is deleted). Nothing outside the store is removed: the paths are read as text
    (a link is removed as a link, never followed), a blob goes only from the store's own `blobs/`, and a model still
    made from `gone` by name (a copy's source, a create FROM it) keeps its files, and so does a create in flight from
    the same upload (`staged_files` holds its folder until it is kept: read together with the kept models, under
    the same lock)."""
    with _staging:
        _release(gone)


def _release(gone: CreatedModel) -> None:
    kept = load_all()
    if any(gone.name in (model.source, model.adapter) for model in kept):
        return
    used = {_staged_folder(path) for model in kept for path in (model.source, model.adapter)}
    for path in (gone.source, gone.adapter):
        staged = _staged_folder(path)
        if staged is None or staged in used or staged in _held or not os.path.lexists(staged):
            continue
        blobs = _linked_blobs(staged)
        if staged.is_symlink():
            staged.unlink()
        else:
            shutil.rmtree(staged, ignore_errors=True)  # links in it are removed as links
        # A folder of links made meanwhile (a create in flight, named by no kept model yet) keeps its blobs too.
        for other in (folder() / "files").iterdir():
            blobs -= _linked_blobs(other)
        for blob in blobs:
            with contextlib.suppress(FileNotFoundError):
                blob.unlink()


# -- what /api/show says of a created model ------------------------------------------------------------------------

#: The width Ollama pads a parameter's name to in /api/show's `parameters` (its routes.go: `%-30s %#v`).
PARAMETER_NAME_WIDTH = 30


def _shown_value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value)


def parameters_text(model: CreatedModel) -> str:
    """`model`'s PARAMETERs as /api/show's `parameters` lists them: one `name value` line each (a string quoted, a
    repeated `stop` once per value), sorted by name."""
    lines = []
    for key, value in sorted(model.parameters.items()):
        for each in value if isinstance(value, list) else [value]:
            lines.append(f"{key:<{PARAMETER_NAME_WIDTH}} {_shown_value(each)}")
    return "\n".join(lines)


def modelfile(model: CreatedModel) -> str:
    """A Modelfile that makes `model` again, as /api/show's `modelfile` (and `ollama show --modelfile`) gives it."""
    lines = ['# Modelfile generated by "ollama show"', f"FROM {model.source}"]
    if model.adapter is not None:
        lines.append(f"ADAPTER {model.adapter}")
    if model.template is not None:
        lines.append(f'TEMPLATE """{model.template}"""')
    if model.system is not None:
        lines.append(f'SYSTEM """{model.system}"""')
    for key, value in sorted(model.parameters.items()):
        for each in value if isinstance(value, list) else [value]:
            lines.append(f"PARAMETER {key} {_shown_value(each)}")
    return "\n".join(lines) + "\n"

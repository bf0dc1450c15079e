"""docs/adding-a-backend.md is true: its two files, copied out of the page as they stand, make a backend that passes
both conformance kits, loads through the registry by its own file format, and is served by the host.

The files are read from the page (never kept twice), written to a package in a temporary folder and imported.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from modelhost.host import Delta, Done, GenerationRequest, Host
from modelhost.inference import conformance, engine_conformance
from modelhost.inference.engine import EngineRequest
from modelhost.inference.registry import Registry

PAGE = Path(__file__).resolve().parents[1] / "docs" / "adding-a-backend.md"
TEXT = b"The parrot says: hello, world. " * 4


@pytest.fixture(scope="module")
def parrot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The page's `parrot` package, imported from the files its code blocks hold."""
    files = re.findall(r"^`(parrot/\w+\.py)`:\n\n```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.M | re.S)
    assert sorted(name for name, _ in files) == ["parrot/backend.py", "parrot/engine.py"], "the page shows two files"
    root = tmp_path_factory.mktemp("page")
    (root / "parrot").mkdir()
    (root / "parrot" / "__init__.py").write_text("")
    for name, code in files:
        (root / name).write_text(code, encoding="utf-8")
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module("parrot.backend")
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m == "parrot" or m.startswith("parrot.")]:
            del sys.modules[name]


def test_the_pages_model_keeps_the_whole_model_contract(parrot: ModuleType) -> None:
    conformance.run_all(parrot.ParrotModel(TEXT, 4))


@pytest.mark.parametrize("check", engine_conformance.CHECKS, ids=lambda c: c.__name__)
def test_the_pages_engine_keeps_the_engine_contract(
    parrot: ModuleType, check: Callable[[engine_conformance.EngineKit], None]
) -> None:
    requests = [EngineRequest(prompt=p, options={"max_tokens": 6, "temperature": 0}) for p in ("a", "bb", "ccc")]
    kit = engine_conformance.EngineKit(
        parrot.ParrotModel(TEXT, 4).engine(), requests, single=parrot.ParrotModel(TEXT, 1).engine()
    )
    check(kit)


def test_the_registry_loads_its_own_format_and_the_host_serves_it(parrot: ModuleType, tmp_path: Path) -> None:
    model_file = tmp_path / "hello.parrot"
    model_file.write_bytes(TEXT)
    registry = Registry()
    registry.register(parrot.ParrotBackend())
    # Unpinned: the catalogue knows no .parrot files, the backend's FormatProbe does.
    model = registry.load_model(str(model_file), parallel=2)
    assert model.model_type == "parrot"

    async def served() -> tuple[str, str]:
        host = Host(lambda: model, name="parrot")
        await host.start()
        try:
            text, reason = "", ""
            async with host.submit(GenerationRequest(prompt="hi", options={"max_tokens": 12})) as stream:
                async for event in stream:
                    if isinstance(event, Delta):
                        text += event.text
                    elif isinstance(event, Done):
                        reason = event.finish_reason
            return text, reason
        finally:
            await host.aclose()

    assert asyncio.run(served()) == (TEXT[:12].decode(), "length")


def test_a_file_no_backend_accepts_keeps_the_catalogues_refusal(parrot: ModuleType, tmp_path: Path) -> None:
    from modelhost.errors import ModelNotFoundError

    notes = tmp_path / "notes.txt"
    notes.write_text("not a model")
    registry = Registry()
    registry.register(parrot.ParrotBackend())
    with pytest.raises(ModelNotFoundError, match="neither a GGUF file"):
        registry.load_model(str(notes))

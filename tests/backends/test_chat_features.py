"""ChatFeatures on both backends: whether a loaded model's template renders tools and whether it has a thought
channel, on the tiny Llamas (plain ChatML, the tools template, the thinking template) and on the tiny Idefics3 with
thought markers in its vocabulary (llama_cpp's vision model and transformers' vision path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modelhost.inference.capabilities import ChatFeatures, as_capability
from modelhost.testing import tinymodels

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tools_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tinymodels.build_tiny_tools_llama(tmp_path_factory.mktemp("features_tools"), seed=0)


@pytest.fixture(scope="module")
def vlm_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny Idefics3 (transformers folder, text GGUF beside its mmproj) with `<think>`/`</think>` tokens."""
    pytest.importorskip("transformers")
    from modelhost.testing.tinyvision import DOUBLE_NEWLINE, write_idefics3_gguf

    out = tmp_path_factory.mktemp("features_vlm")
    markers = (DOUBLE_NEWLINE, tinymodels.THINK_OPEN, tinymodels.THINK_CLOSE)  # "\n\n": llama.cpp's mmproj needs it
    folder = tinymodels.build_tiny_idefics3(out / "hf", 0, extra_tokens=markers)
    gguf, _ = write_idefics3_gguf(folder, out / "vlm.gguf", out / "mmproj-vlm.gguf")
    return folder, gguf


def facts(model: Any) -> tuple[bool, bool]:
    features = as_capability(model, ChatFeatures)
    assert features is not None, f"{type(model).__name__} does not offer ChatFeatures"
    return features.renders_tools(), features.thinks()


def test_llama_cpp_models_say_what_their_chat_can_do(
    tiny_llama_dir: Path, tools_dir: Path, tiny_thinking_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("llama_cpp")
    from modelhost.backends.llama_cpp import LlamaCppBackend
    from modelhost.backends.llama_cpp import chat as chat_template

    expected = {tiny_llama_dir: (False, False), tools_dir: (True, False), tiny_thinking_dir: (False, True)}
    for i, (folder, want) in enumerate(expected.items()):
        gguf = tinymodels.write_llama_gguf(folder, tmp_path / f"m{i}.gguf")
        with LlamaCppBackend().load_model(str(gguf), threads=1) as model:
            assert facts(model) == want, folder.name
            # The probe chat rendering makes, cached per template: asking again renders nothing.
            probed = chat_template.tool_support.cache_info().misses
            assert facts(model) == want and chat_template.tool_support.cache_info().misses == probed


def test_the_llama_cpp_vision_model_says_what_its_chat_can_do(vlm_pair: tuple[Path, Path]) -> None:
    pytest.importorskip("llama_cpp")
    from modelhost.backends.llama_cpp import LlamaCppBackend

    with LlamaCppBackend().load_model(str(vlm_pair[1]), threads=1) as model:  # the mmproj is found beside it
        assert model.accepts_images()
        assert facts(model) == (False, True)  # Idefics3's template knows no tools; the vocabulary has the markers


def test_transformers_models_say_what_their_chat_can_do(
    tiny_llama_dir: Path, tools_dir: Path, tiny_thinking_dir: Path, vlm_pair: tuple[Path, Path]
) -> None:
    pytest.importorskip("transformers")
    from modelhost.backends.transformers import TransformersBackend

    expected = {tiny_llama_dir: (False, False), tools_dir: (True, False), tiny_thinking_dir: (False, True),
                vlm_pair[0]: (False, True)}  # fmt: skip
    for folder, want in expected.items():
        with TransformersBackend().load_model(str(folder)) as model:
            assert facts(model) == want and facts(model) == want, folder.name

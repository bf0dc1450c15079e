"""Vision in the llama_cpp backend: the tiny Idefics3 as a GGUF + mmproj pair (modelhost.testing.tinyvision), run
through libmtmd, against the same weights in transformers.

The two runtimes must agree on the prompt token ids (text and image positions) and on the greedy tokens; a
text-only GGUF still refuses images; what would make mtmd abort the process is refused before mtmd sees it.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("transformers")

from PIL import Image

from modelhost.backends.llama_cpp import LlamaCppBackend
from modelhost.backends.llama_cpp.model import LlamaCppModel
from modelhost.backends.llama_cpp.vision import MAX_ASPECT_RATIO, VisionPrompt, find_mmproj
from modelhost.backends.transformers import TransformersBackend
from modelhost.errors import InvalidInputError, InvalidOptionError, ModelLoadError, UnsupportedAttachmentError
from modelhost.inference.capabilities import VisionModel, accepts_images, as_capability
from modelhost.inference.engine import EngineRequest
from modelhost.inference.engine_conformance import drive
from modelhost.inference.types import Message
from modelhost.testing.tinyvision import build_tiny_idefics3_gguf, write_idefics3_gguf

ASK = "What is in this picture?"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return build_tiny_idefics3_gguf(tmp_path_factory.mktemp("tiny_vlm_gguf"), seed=0)


@pytest.fixture(scope="module")
def vlm(pair: tuple[Path, Path, Path]) -> Iterator[LlamaCppModel]:
    model = LlamaCppBackend().load_model(str(pair[1]))  # the mmproj is found beside it
    assert isinstance(model, LlamaCppModel) and model.accepts_images()
    with model:
        yield model


@pytest.fixture(scope="module")
def hf(pair: tuple[Path, Path, Path]) -> Iterator[Any]:
    with TransformersBackend().load_model(str(pair[0])) as model:
        yield model


def picture(height: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)


def ask(*images: Any) -> list[Message]:
    return [Message("user", ASK, images=images)]


def greedy(model: Any, messages: list[Message], n: int = 20) -> list[int]:
    return [t.id for t in model.chat(messages, max_tokens=n, temperature=0)]


def llama_prompt_ids(model: LlamaCppModel, messages: list[Message], image_token: int) -> list[int]:
    prompter = model.engine().prompter
    prompt = prompter.vision_prompt(messages, prompter.options({}))
    assert isinstance(prompt, VisionPrompt)
    chunks = prompt.chunks
    ids: list[int] = []
    for kind, tokens, size in zip(chunks.kinds, chunks.tokens, chunks.sizes, strict=True):
        ids.extend(tokens if kind == 0 else [image_token] * size)
    chunks.free()
    return ids


def test_found_beside_the_model_and_accepts_images_is_a_live_probe(pair: tuple[Path, Path, Path]) -> None:
    assert find_mmproj(str(pair[1])) == str(pair[2])
    model = LlamaCppBackend().load_model(str(pair[1]), mmproj=str(pair[2]))
    assert as_capability(model, VisionModel) is model and accepts_images(model)
    assert model.batch_slots() == 4  # the llama_cpp default: image prompts are batch slots' prefill
    model.close()
    assert not model.accepts_images()


@pytest.mark.parametrize("shape", [(48, 80), (30, 20)], ids=["tiled", "one-tile"])
def test_prompt_ids_and_greedy_tokens_match_transformers(vlm: LlamaCppModel, hf: Any, shape: tuple[int, int]) -> None:
    messages = ask(picture(*shape))
    image_token = int(hf.checkpoint.model.config.image_token_id)
    hf_ids = hf.prompts.chat(messages, hf.runner.options({})).ids
    assert llama_prompt_ids(vlm, messages, image_token) == list(hf_ids)
    expected = greedy(hf, messages)
    assert greedy(vlm, messages) == expected
    assert vlm.metrics().prompt_tokens == len(hf_ids)


def test_pil_and_png_give_the_array_reply(vlm: LlamaCppModel) -> None:
    page = picture(48, 80, seed=1)
    png = io.BytesIO()
    Image.fromarray(page).save(png, format="PNG")
    expected = greedy(vlm, ask(page), 8)
    assert greedy(vlm, ask(Image.fromarray(page)), 8) == expected
    assert greedy(vlm, ask(png.getvalue()), 8) == expected


def test_prompt_reuse_stays_correct_around_images(vlm: LlamaCppModel) -> None:
    text_only = greedy(vlm, [Message("user", ASK)], 8)
    first = greedy(vlm, ask(picture(48, 80)), 12)
    again = greedy(vlm, ask(picture(48, 80)), 12)
    cached = vlm.metrics().cached_prompt_tokens
    assert again == first and 0 < cached < vlm.metrics().prompt_tokens
    other = greedy(vlm, ask(picture(48, 80, seed=5)), 12)  # same text, another image: the image is evaluated anew
    assert greedy(vlm, ask(picture(48, 80, seed=5)), 12) == other
    assert greedy(vlm, [Message("user", ASK)], 8) == text_only  # no image KV leaks into a text prompt


def test_text_only_gguf_still_refuses_images(tiny_llama_gguf: Path) -> None:
    with LlamaCppBackend().load_model(str(tiny_llama_gguf)) as model:
        assert not model.accepts_images()
        with pytest.raises(UnsupportedAttachmentError):
            model.chat(ask(picture(8, 8)))


def png_header_only(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))


@pytest.mark.parametrize(
    "image",
    [
        np.zeros((1, MAX_ASPECT_RATIO * 4, 3), np.uint8),  # a side scaled to zero pixels would abort mtmd
        np.zeros((0, 8, 3), np.uint8),
        np.zeros((8, 8), np.uint8),
        np.zeros((8, 8, 3), np.float32),
        png_header_only(100_000, 100_000),  # refused from its header, never decoded
        b"not an image",
    ],
    ids=["too-thin", "empty", "grey", "float", "huge-header", "garbage"],
)
def test_bad_images_are_refused_before_mtmd(vlm: LlamaCppModel, image: Any) -> None:
    with pytest.raises(InvalidInputError):
        vlm.chat(ask(image))
    assert greedy(vlm, ask(picture(16, 16)), 2)  # still serving


def test_a_vocabulary_without_the_templates_tokens_is_refused_at_load(tiny_idefics3_dir: Path, tmp_path: Path) -> None:
    # The plain tiny Idefics3 has no "\n\n" token: mtmd would GGML_ASSERT on the first image and kill the host.
    model, _ = write_idefics3_gguf(tiny_idefics3_dir, tmp_path / "m.gguf", tmp_path / "mmproj-m.gguf")
    with pytest.raises(ModelLoadError, match=r"\\n\\n"):
        LlamaCppBackend().load_model(str(model))


def test_load_options(pair: tuple[Path, Path, Path], tiny_llama_gguf: Path) -> None:
    with pytest.raises(ModelLoadError, match="not an mmproj"):
        LlamaCppBackend().load_model(str(pair[1]), mmproj=str(tiny_llama_gguf))
    with pytest.raises(ModelLoadError, match="does not exist"):
        LlamaCppBackend().load_model(str(pair[1]), mmproj=str(pair[1].parent / "missing.gguf"))
    with pytest.raises(InvalidOptionError):
        LlamaCppBackend().load_model(str(pair[1]), dtype="f16")


def test_image_prompts_are_batch_slots_prefill(vlm: LlamaCppModel) -> None:
    # Two image requests and a text one, admitted a step apart, decode together; each gets its one-at-a-time reply.
    requests = [ask(picture(48, 80)), [Message("user", "Hello there")], ask(picture(30, 20, seed=3))]
    expected = [greedy(vlm, m, 10) for m in requests]
    runs = drive(
        vlm.engine(),
        [EngineRequest(messages=tuple(m), options={"max_tokens": 10, "temperature": 0}) for m in requests],
        joins={1: 1, 2: 2},
    )
    assert all(run.error is None for run in runs), [run.error for run in runs]
    assert [run.ids for run in runs] == expected

"""The transformers backend on a tiny random Idefics3 (granite-docling / SmolVLM architecture).

Images go through the checkpoint's real Idefics3Processor (PIL backend, no torchvision): resizing, tiling, and the
expansion of each image into its row/column-tagged `<image>` tokens.
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

pytest.importorskip("torch")
pytest.importorskip("transformers")

from PIL import Image

from modelhost.backends.transformers import TransformersBackend
from modelhost.backends.transformers.model import TransformersModel
from modelhost.errors import InvalidInputError
from modelhost.inference import conformance, engine_conformance
from modelhost.inference.capabilities import VisionModel, accepts_images, as_capability
from modelhost.inference.engine import EngineRequest
from modelhost.inference.engine_conformance import EngineKit
from modelhost.inference.images import MAX_IMAGE_AXIS, to_rgb_image
from modelhost.inference.types import Message

ASK = "What is in this picture?"


@pytest.fixture(scope="module")
def vlm(tiny_idefics3_dir: Path) -> Iterator[TransformersModel]:
    model = TransformersBackend().load_model(str(tiny_idefics3_dir))
    assert isinstance(model, TransformersModel)
    with model:
        yield model


@pytest.fixture(scope="module")
def picture() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, size=(48, 80, 3), dtype=np.uint8)


def encoded(array: np.ndarray, fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format=fmt)
    return buffer.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height but which carries no pixel data at all."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))


def reply(model: TransformersModel, *images: Any, **opts: Any) -> list[int]:
    return [t.id for t in model.chat([Message("user", ASK, images=images)], max_tokens=6, temperature=0, **opts)]


@pytest.mark.parametrize("check", conformance.CHECKS, ids=lambda c: c.__name__)
def test_conformance(vlm: TransformersModel, check: Any) -> None:
    check(vlm)


@pytest.mark.parametrize("check", engine_conformance.CHECKS, ids=lambda c: c.__name__)
def test_engine_conformance_with_images(vlm: TransformersModel, picture: np.ndarray, check: Any) -> None:
    # Distinct pages per request, several at once: each row's pixel values go with its own prefill only.
    pages = [picture, picture[::-1].copy(), picture[:, ::-1].copy()]
    requests = [
        EngineRequest(messages=(Message("user", ASK, images=(page,)),), options={"max_tokens": 4, "temperature": 0})
        for page in pages
    ]
    check(EngineKit(vlm.engine(), requests))


def test_accepts_images_is_a_live_probe(vlm: TransformersModel) -> None:
    assert vlm.model_type == "idefics3"
    assert as_capability(vlm, VisionModel) is vlm and accepts_images(vlm)


def test_image_kinds_go_through_the_processor(vlm: TransformersModel, picture: np.ndarray) -> None:
    list(vlm.chat([Message("user", ASK)], max_tokens=2, temperature=0))
    text_only = vlm.metrics().prompt_tokens
    as_array = reply(vlm, picture)
    with_image = vlm.metrics().prompt_tokens
    # 80x48 resized to a 64-pixel longest edge, cut into 32-pixel tiles plus a global view, each tile tagged.
    assert with_image > text_only + 4, f"the image added only {with_image - text_only} prompt tokens"
    assert reply(vlm, Image.fromarray(picture)) == as_array
    assert reply(vlm, encoded(picture, "PNG")) == as_array  # lossless: the same pixels, the same tokens
    assert len(reply(vlm, encoded(picture, "JPEG"))) >= 1
    assert len(reply(vlm, Image.fromarray(picture).convert("L"))) >= 1  # converted to RGB on the way in


def test_several_images_across_turns(vlm: TransformersModel, picture: np.ndarray) -> None:
    conversation = [
        Message("user", "Compare these.", images=(picture, encoded(picture[::-1], "PNG"))),
        Message("assistant", "They differ."),
        Message("user", "And this one?", images=[Image.fromarray(picture[:, ::-1])]),
    ]
    tokens = list(vlm.chat(conversation, max_tokens=4, temperature=0))
    assert tokens and vlm.err() is None


def test_image_count_must_match_the_conversation(vlm: TransformersModel) -> None:
    with pytest.raises(InvalidInputError):
        vlm.chat([Message("user", "no image here <image>")])


def test_hostile_header_is_refused_before_decoding(vlm: TransformersModel) -> None:
    before = vlm.metrics()
    for width, height in ((8000, 8000), (MAX_IMAGE_AXIS + 1, 1), (100_000, 100_000)):
        with pytest.raises(InvalidInputError, match="image 0"):
            vlm.chat([Message("user", ASK, images=(png_header_only(width, height),))])
    assert vlm.metrics() is before


@pytest.mark.parametrize(
    "bad",
    [
        b"definitely not an image",
        b"GIF89a" + b"\x00" * 20,
        np.zeros((4, 4), dtype=np.uint8),
        np.zeros((4, 4, 4), dtype=np.uint8),
        np.zeros((4, 4, 3), dtype=np.float32),
        np.zeros((0, 4, 3), dtype=np.uint8),
        "a path is not an image",
    ],
    ids=["garbage", "gif", "gray-2d", "rgba-array", "float-array", "empty-array", "str"],
)
def test_bad_images_are_invalid_input(bad: Any) -> None:
    with pytest.raises(InvalidInputError):
        to_rgb_image(bad)


def test_truncated_png_is_invalid_input(picture: np.ndarray) -> None:
    with pytest.raises(InvalidInputError, match=r"damaged|readable"):
        to_rgb_image(encoded(picture, "PNG")[:-40])


def test_attention_on_the_text_decoder(vlm: TransformersModel) -> None:
    snap = vlm.inspect_attention("Hello there")
    assert (snap.num_layers, snap.num_heads, snap.num_query_heads, snap.head_dim) == (2, 2, 4, 16)
    assert snap.architecture == "idefics3"

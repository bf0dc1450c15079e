"""The OpenAI door with a GGUF vision model: a data-URI image (PNG bytes) reaches llama.cpp's mmproj."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import openai
import pytest
from http_support import LoopThread, serving

pytest.importorskip("llama_cpp")
pytest.importorskip("transformers")

from PIL import Image

import modelhost.inference
from modelhost.host import Host
from modelhost.testing.tinyvision import build_tiny_idefics3_gguf
from modelhost.testing.waiting import STATE_WAIT_SECONDS


def test_a_data_uri_image_reaches_the_mmproj(loop_thread: LoopThread, tmp_path: Path) -> None:
    _, model, _ = build_tiny_idefics3_gguf(tmp_path, seed=0)
    png = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (48, 80, 3), dtype=np.uint8)).save(png, format="PNG")
    image = {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()},
    }
    host = Host(lambda: modelhost.inference.load_model(str(model), backend="llama_cpp"), name="tiny-vlm")
    with serving(loop_thread, host) as server:
        assert host.accepts_images
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=STATE_WAIT_SECONDS)
        text_only = client.chat.completions.create(
            model="tiny-vlm", messages=[{"role": "user", "content": "Describe."}], max_tokens=2
        )
        out = client.chat.completions.create(
            model="tiny-vlm",
            messages=[{"role": "user", "content": [{"type": "text", "text": "Describe."}, image]}],
            max_tokens=4,
            temperature=0,
        )
        assert out.usage is not None and text_only.usage is not None
        # 2x2 tiles and the global view, each with its tags: far more prompt than the text alone.
        assert out.usage.prompt_tokens > text_only.usage.prompt_tokens + 15
        assert out.choices[0].finish_reason in ("stop", "length")

"""End to end: `modelhost serve --model vlm.gguf --mmproj PATH` reads a raw RGB page on the wire."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from modelhost.wire.errors import TruncatedError

from .test_e2e import ServeProcess, client

pytest.importorskip("llama_cpp")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_a_raw_rgb_page_through_llama_cpp_vision(tmp_path: Path) -> None:
    from modelhost.testing.tinyvision import build_tiny_idefics3_gguf

    _, model, mmproj = build_tiny_idefics3_gguf(tmp_path / "vlm", seed=0)
    elsewhere = tmp_path / "projectors" / "tiny.gguf"  # not beside the model: only --mmproj can find it
    elsewhere.parent.mkdir()
    mmproj.rename(elsewhere)
    process = ServeProcess(tmp_path / "v.sock", "--model", str(model), "--mmproj", str(elsewhere))
    try:
        process.wait_ready()
        page = np.random.default_rng(0).integers(0, 256, (40, 30, 3), dtype=np.uint8)
        with client(process) as c:
            text, error = c.recognize(page, max_tokens=6)
            done = c.last_done
            again, _ = c.recognize(page, max_tokens=6)
        # 40x30 is one 32 px tile row of two tiles plus the global view: far more than the text alone.
        assert done is not None and done.input_tokens > 20 and 1 <= done.output_tokens <= 6
        assert error is None or isinstance(error, TruncatedError), error
        assert text and again == text
    finally:
        assert process.stop() == 0


def test_mmproj_goes_with_one_model() -> None:
    from modelhost import serve as serving

    with pytest.raises(ValueError, match="--mmproj"):
        serving.model_specs(serving.ServeConfig(models=("a.gguf", "b.gguf"), mmproj="m.gguf"))

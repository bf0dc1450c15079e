"""What a text-layer page's layout regions cost (issue 34, point 7): the layout model runs on rapid_layout's own
pre- and post-processing in a session of its own, so asking a page's regions never imports the rapid_layout package
(its `__init__` imports omegaconf, requests, tqdm, PIL and every other model's handler), and it finds the regions
rapid_layout's public API finds, which is also what runs where those pieces are not in the wheel."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .test_region_tables import KEEPERS, STATIONS, _page

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("rapid_layout") is None or importlib.util.find_spec("onnxruntime") is None,
    reason="the documents extra (rapid-layout, onnxruntime) is not installed",
)

#: What rapid_layout's package import brings and a page's regions have no use for.
PACKAGE_ONLY = ("rapid_layout", "omegaconf", "requests", "tqdm")


def _bgr(path: Path, dpi: int = 150) -> Any:
    import numpy as np
    import pypdfium2

    doc = pypdfium2.PdfDocument(str(path))
    try:
        rgb = doc[0].render(scale=dpi / 72).to_numpy()[:, :, :3]  # pdfium's bitmap is BGR(x) already
    finally:
        doc.close()
    return np.ascontiguousarray(rgb)


def test_a_convert_that_asks_a_pages_regions_imports_none_of_rapid_layouts_package(tmp_path: Path) -> None:
    pdf = _page(tmp_path / "stations.pdf")
    out = tmp_path / "stations.md"
    probe = (
        "import sys\nfrom modelhost.cli import main\n"
        f"sys.argv = ['modelhost', 'convert', {str(pdf)!r}, '-o', {str(out)!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        f"import json\nprint(json.dumps(sorted(m for m in {PACKAGE_ONLY!r} + ('onnxruntime',) if m in sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == ["onnxruntime"]  # the model ran, and nothing else came
    rows = [line for line in out.read_text().splitlines() if line.startswith("|")]
    assert any(STATIONS[0] in row and KEEPERS[0] in row for row in rows)  # read from its table region


def test_rapid_layouts_pieces_find_what_its_public_api_finds(tmp_path: Path) -> None:
    from modelhost.backends.ocr import layoutmodel

    image = _bgr(_page(tmp_path / "stations.pdf"))
    pieces = layoutmodel.LayoutModel.load()
    public = layoutmodel.LayoutModel(layoutmodel._public(layoutmodel.model_path(), None))
    found = pieces(image, 72 / 150)
    assert found == public(image, 72 / 150)
    assert any(r.label == "table" for r in found) and any(r.label == "text" for r in found)


def test_a_wheel_without_the_pieces_is_read_through_its_public_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from modelhost.backends.ocr import layoutmodel

    image = _bgr(_page(tmp_path / "stations.pdf"))
    expected = layoutmodel.LayoutModel.load()(image, 1.0)
    moved = {"pre": ("model_handler/picodet/pre.py", "PPPreProcess"), "post": layoutmodel._PIECES["post"]}
    monkeypatch.setattr(layoutmodel, "_PIECES", moved)
    with caplog.at_level("INFO", logger=layoutmodel.__name__):
        model = layoutmodel.LayoutModel.load()
    assert "public API" in caplog.text
    assert model(image, 1.0) == expected

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
from types import SimpleNamespace
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


def _sessions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The model files onnxruntime sessions are made from, from now on."""
    import onnxruntime

    made: list[str] = []
    session = onnxruntime.InferenceSession

    def recorded(path: str, *args: Any, **kwargs: Any) -> Any:
        made.append(Path(path).name)
        return session(path, *args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", recorded)
    return made


def test_the_layout_graph_is_optimised_once_and_read_back_with_the_same_regions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelhost.backends.ocr import layoutmodel

    monkeypatch.setenv("MODELHOST_CACHE_DIR", str(tmp_path / "cache"))
    image = _bgr(_page(tmp_path / "stations.pdf"))
    made = _sessions(monkeypatch)
    first = layoutmodel.LayoutModel.load()(image, 72 / 150)
    cached = list((tmp_path / "cache" / "layout").iterdir())
    assert [p.suffix for p in cached] == [".onnx"] and not cached[0].name.startswith(".")  # no partial file left
    again = layoutmodel.LayoutModel.load()(image, 72 / 150)
    assert made == [layoutmodel.model_path().name, cached[0].name]  # optimised from the wheel's file, then read back
    assert again == first and any(r.label == "table" for r in first)

    cached[0].write_bytes(b"not a graph")  # a damaged file is set aside and written again, never fatal
    assert layoutmodel.LayoutModel.load()(image, 72 / 150) == first
    assert made[2:] == [cached[0].name, layoutmodel.model_path().name]
    assert layoutmodel.LayoutModel.load()(image, 72 / 150) == first and made[4:] == [cached[0].name]


def test_a_cached_layout_graph_is_named_by_what_it_was_optimised_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from modelhost.backends.ocr import layoutmodel

    monkeypatch.setenv("MODELHOST_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "layout.onnx"
    model.write_bytes(b"graph")
    name = layoutmodel._cached(model, "1.20.0")
    assert name is not None and name.parent == tmp_path / "cache" / "layout"
    assert layoutmodel._cached(model, "1.20.0") == name
    assert layoutmodel._cached(model, "1.21.0") != name  # another onnxruntime optimises otherwise
    model.write_bytes(b"another graph")  # the model file changed: its old optimised graph is stale
    assert layoutmodel._cached(model, "1.20.0") != name
    stale = layoutmodel._cached(model, "1.20.0")
    os.utime(model, ns=(1, 1))
    assert layoutmodel._cached(model, "1.20.0") != stale
    (tmp_path / "cache" / "layout").chmod(0o777)  # a folder others may write: a graph there could be anyone's
    assert layoutmodel._cached(model, "1.20.0") is None


class _FakeOrt:
    """onnxruntime as `_optimised_session` uses it: a session records the file it reads and, where asked, writes the
    optimised graph (`optimized_model_filepath`) as onnxruntime does."""

    __version__ = "1.21.0"
    GraphOptimizationLevel = SimpleNamespace(ORT_DISABLE_ALL=0, ORT_ENABLE_ALL=99)

    def __init__(self) -> None:
        self.read: list[str] = []

    def InferenceSession(self, path: str, sess_options: Any, providers: list[str]) -> str:
        self.read.append(Path(path).name)
        if sess_options.optimized_model_filepath:
            Path(sess_options.optimized_model_filepath).write_bytes(b"optimised")
        return path


def test_stale_files_of_the_layout_graph_cache_are_deleted_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import time

    from modelhost.backends.ocr import layoutmodel

    monkeypatch.setenv("MODELHOST_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "layout_cdla.onnx"
    model.write_bytes(b"graph")
    ort = _FakeOrt()
    current = layoutmodel._cached(model, ort.__version__)
    assert current is not None
    folder = current.parent
    long_ago = time.time() - 365 * 24 * 3600  # a year unread: stale (CACHE_STALE_S)

    def old(path: Path) -> Path:
        os.utime(path, (long_ago, long_ago), follow_symlinks=False)
        return path

    older_ort = layoutmodel._cached(model, "1.20.0")  # the graph the onnxruntime before this one wrote and read
    assert older_ort is not None and older_ort != current
    older_ort.write_bytes(b"optimised")
    old(older_ort)
    partial = folder / f".{older_ort.stem}.k3x_9q2a.onnx"  # a graph whose writer died before renaming it
    partial.write_bytes(b"half")
    old(partial)
    stuck = folder / f"layout_cdla-{'c' * 20}.onnx"  # stale, but its deletion fails: it stays, and the load goes on
    stuck.write_bytes(b"optimised")
    old(stuck)
    elsewhere = layoutmodel._cached(model, "1.19.0")  # another install's graph, read lately: kept
    assert elsewhere is not None
    elsewhere.write_bytes(b"optimised")
    outside = tmp_path / "precious.onnx"
    outside.write_bytes(b"not the cache's")
    old(outside)
    link = folder / f"linked-{'a' * 20}.onnx"  # a link named as the cache names its graphs: neither it nor its target
    link.symlink_to(outside)
    old(link)
    (folder / f"folder-{'b' * 20}.onnx").mkdir()
    foreign = [folder / "layout_cdla.onnx", folder / f"notes-{'d' * 20}.txt", folder / f"UPPER-{'E' * 20}.onnx"]
    for path in foreign:
        path.write_bytes(b"someone's")
        old(path)

    unlink = os.unlink

    def failing(path: Any, *args: Any, **kwargs: Any) -> None:
        if Path(path).name == stuck.name:
            raise PermissionError(path)
        unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", failing)
    options = SimpleNamespace(graph_optimization_level=99, optimized_model_filepath="")
    assert layoutmodel._optimised_session(ort, model, options) == str(model)  # optimised now, written to `current`
    assert current.read_bytes() == b"optimised" and ort.read == [model.name]
    assert not older_ort.exists() and not partial.exists()
    assert stuck.exists() and elsewhere.exists()
    assert link.is_symlink() and outside.read_bytes() == b"not the cache's"
    assert (folder / f"folder-{'b' * 20}.onnx").is_dir() and all(path.exists() for path in foreign)

    old(current)  # a graph read again is renewed, never pruned as its own load's stale file
    assert layoutmodel._optimised_session(ort, model, options) == str(current)
    assert current.exists() and time.time() - current.stat().st_mtime < 60

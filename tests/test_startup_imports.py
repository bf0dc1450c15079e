"""A command imports what it uses and nothing else (issue 38): each case runs in a fresh interpreter and reads its
`sys.modules`, the import graph rather than a time (the start-up times are bench/startup.py's to measure)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: Engines and clusters no command may import unless it runs them: each costs a second or more to import.
HEAVY = ("torch", "transformers", "ray", "llama_cpp", "onnxruntime", "docling_core", "pandas")


def imported_after(code: str, names: tuple[str, ...] = HEAVY) -> set[str]:
    """Which of `names` (and modelhost's contract) `code` leaves imported, run in a fresh interpreter."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted(m for m in {(*names, 'modelhost.inference')!r} if m in sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def run_cli(*args: str) -> str:
    """Code that runs `modelhost ARGS` in this interpreter, as the console script does, and carries on after it."""
    return (
        "import sys\nfrom modelhost.cli import main\n"
        f"sys.argv = ['modelhost', *{list(args)!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code"
    )


def test_version_imports_no_engine_and_not_even_the_contract() -> None:
    assert imported_after(run_cli("--version")) == set()


def test_importing_modelhost_leaves_its_names_reachable() -> None:
    code = "import modelhost; print(modelhost.Message('user', 'hi').content, modelhost.ModelHostError.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.split() == ["hi", "ModelHostError"], done.stderr


#: What a text-layer page has no use for beside HEAVY: the pixel path's array, image and OCR libraries.
PIXEL_PATH = ("numpy", "PIL", "cv2", "rapidocr")


@pytest.mark.parametrize("fmt", ["md", "doctags", "json"])
def test_a_text_layer_convert_imports_no_model_engine(tmp_path: Path, fmt: str) -> None:
    from modelhost.testing.hostile_pdfs import text_pdf

    pdf = tmp_path / "one.pdf"
    pdf.write_bytes(text_pdf("A page read from its text layer"))
    out = tmp_path / f"one.{fmt}"
    imported = imported_after(run_cli("convert", str(pdf), "-o", str(out)), (*HEAVY, *PIXEL_PATH))
    # Markdown and DocTags are written without docling-core (issue 36 item 5: its import, pandas with it, was 2.3 CPU s
    # of a page the engine reads in 0.07 s); JSON is docling's own format, written by docling-core, imported for it.
    if fmt == "json":
        assert "docling_core" in imported and imported & set(HEAVY) <= {"docling_core", "pandas"}
    else:
        assert imported <= {"modelhost.inference"}
    assert "A page read from its text layer" in out.read_text()


def test_a_blank_page_starts_no_model(tmp_path: Path) -> None:
    # A blank page (no text layer, nothing drawn) is rendered, found all one colour and written empty: the OCR model
    # and the host are not even imported (they cost 2-3 CPU s, most of a 10-document batch's, for an empty page).
    import pypdfium2

    from modelhost.testing.hostile_pdfs import text_pdf

    doc = pypdfium2.PdfDocument(text_pdf("A page before a blank one"))
    doc.new_page(612, 792)
    pdf = tmp_path / "two.pdf"
    doc.save(str(pdf))
    doc.close()
    out = tmp_path / "two.md"
    imported = imported_after(run_cli("convert", str(pdf), "-o", str(out)), (*HEAVY, "rapidocr", "modelhost.host"))
    assert imported == set()
    assert out.read_text().strip() == "A page before a blank one"


@pytest.mark.parametrize(("model", "allowed"), [("ocr", {"onnxruntime"}), ("default", {"llama_cpp"})])
def test_serving_a_model_imports_only_its_own_engine(model: str, allowed: set[str]) -> None:
    # What `serve --model X` does before its socket binds: resolve and estimate the model, then load it.
    code = (
        "from modelhost.serve import ServeConfig, model_specs\n"
        f"specs, _ = model_specs(ServeConfig(models=({model!r},)))\n"
        "specs[0].loader().close()"
    )
    assert imported_after(code) - {"modelhost.inference"} == allowed


#: A dev page that shows a table without rules, so the text path asks the `ocr` model for its layout regions
#: (bench/region_cost.py's one-page table).
TABLE_PAGE = Path(__file__).parent / "corpus" / "documents" / "tables_dev" / "aastex_sample631_p6.pdf"

#: What a text-layer page's layout regions have no use for (issue 34 point 7): the script models' tesserocr, PIL (the
#: page is rendered to an array and handed over as one), `serve` (its doors and model set: the host's name is the
#: catalogue's to give) and prometheus_client (no door serves the convert's host's /metrics: host/metrics.py's
#: UnreadMetrics).
REGIONS_UNUSED = ("tesserocr", "PIL", "modelhost.serve", "rapidocr", "prometheus_client")


def test_a_text_layer_page_asked_for_its_regions_imports_only_the_layout_model(tmp_path: Path) -> None:
    out = tmp_path / "table.md"
    imported = imported_after(run_cli("convert", str(TABLE_PAGE), "-o", str(out)), ("onnxruntime", *REGIONS_UNUSED))
    assert "onnxruntime" in imported  # the page was asked for its regions: the layout model ran
    assert imported & set(REGIONS_UNUSED) == set()
    assert "|" in out.read_text()

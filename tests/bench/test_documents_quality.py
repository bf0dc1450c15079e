"""bench/documents_quality.py end to end: a real baseline over real corpus files, its table and its JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from modelhost.testing.waiting import STATE_WAIT_SECONDS

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "documents_quality.py"


@pytest.mark.slow
def test_the_benchmark_scores_pymupdf4llm_on_pdfspec_pages(tmp_path: Path) -> None:
    pytest.importorskip("pymupdf4llm", reason="the bench extra is not installed")
    out, saved = tmp_path / "out.json", tmp_path / "saved"
    files = ["--tools", "pymupdf4llm", "--files", "pdfspec/headings", "pdfspec/table"]
    args = [*files, "--json", str(out), "--save", str(saved)]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "| pymupdf4llm" in done.stdout and "per file:" in done.stdout
    report = json.loads(out.read_text())
    group = report["groups"]["pymupdf4llm"]["pdfspec"]
    # the two gold files hold 4 headings and a 3x3 table; pymupdf4llm's Markdown finds them all (as measured)
    assert (group["headings"], group["cells"], group["pages"]) == (4, 9, 2)
    assert group["heading_recall"] == 1.0 and group["cell_recall"] == 1.0
    assert group["s_per_page"] > 0
    assert [f["file"] for f in report["files"]["pymupdf4llm"]] == ["pdfspec/headings", "pdfspec/table"]
    assert "|Header A|Header B|Header C|" in (saved / "pymupdf4llm" / "pdfspec__table.md").read_text()

    # --rescore converts nothing and gives the same figures from the saved outputs and times
    again = tmp_path / "again.json"
    args = [*files, "--json", str(again), "--rescore", str(saved)]
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads(again.read_text())["groups"] == report["groups"]


def test_an_unknown_file_filter_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--files", "no-such-file", "--tools", "pdftotext"],
        capture_output=True,
        text=True,
        timeout=STATE_WAIT_SECONDS,
    )
    assert done.returncode == 2 and "no corpus entry matches" in done.stderr


def test_a_held_out_files_own_row_is_listed_only_when_asked() -> None:
    # pdf-spec's paragraphs page is held out (doccorpus.HELD_OUT): its split's totals print, its own row does not
    if shutil.which("pdftotext") is None:
        pytest.skip("needs poppler's pdftotext")
    args = [sys.executable, str(SCRIPT), "--tools", "pdftotext", "--files", "pdfspec/paragraphs", "pdfspec/headings"]
    quiet = subprocess.run(args, capture_output=True, text=True, timeout=STATE_WAIT_SECONDS)
    shown = subprocess.run([*args, "--show-held-out"], capture_output=True, text=True, timeout=STATE_WAIT_SECONDS)
    assert quiet.returncode == 0 and shown.returncode == 0, quiet.stderr + shown.stderr
    assert "held-out, pdfspec" in quiet.stdout and "pdfspec/headings (dev) pdftotext" in quiet.stdout
    assert "pdfspec/paragraphs (held-out)" not in quiet.stdout
    # nor its name in the progress lines, printed as each file ends
    assert "pdfspec/paragraphs" not in quiet.stderr and "a held-out file done" in quiet.stderr
    assert "1 held-out files not listed" in quiet.stdout
    assert "pdfspec/paragraphs (held-out) pdftotext" in shown.stdout

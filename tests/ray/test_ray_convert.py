"""`modelhost convert --ray`: the same documents as `modelhost convert`, from corpus PDFs whose pages are spread
over two actors, and a document with unreadable pages reported by number while its readable page is kept.

The corpus files: redp5110_sampled.pdf (18 born-digital pages: headings whose levels come from the whole document's
style, page headers and footers found across pages; pieces of it read on different actors must join into the one
document a single engine makes) and ocr_test.pdf (an image-only page the `ocr` model reads, loaded in the actor).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from modelhost.testing import hostile_pdfs, raynodes

#: Per test, setup included: this module's first test also waits for a Ray start and two model loads, which took
#: minutes at load 12-20 on 2 cores (the suite's 300 s is for one test's own work).
pytestmark = pytest.mark.timeout(900)

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "documents"
FILES = [CORPUS / "pdf" / "redp5110_sampled.pdf", CORPUS / "ocr" / "ocr_test.pdf"]
#: A CLI conversion of these on 2 loaded cores: tens of seconds; minutes bound only a hang.
CONVERT_SECONDS = 900


def convert(*args: str) -> subprocess.CompletedProcess[str]:
    modelhost = str(Path(sys.executable).with_name("modelhost"))
    return subprocess.run([modelhost, "convert", *args], capture_output=True, text=True, timeout=CONVERT_SECONDS)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    # One real page in a tree that declares four: pages 2-4 cannot be loaded.
    folder = tmp_path_factory.mktemp("hostile")
    declared = hostile_pdfs.write(folder / "declared.pdf", hostile_pdfs.declared_pages(4, "The only real page"))
    return [*FILES, declared]


def test_convert_over_ray_writes_the_documents_convert_writes(
    ray_head: raynodes.RayNode, inputs: list[Path], tmp_path: Path
) -> None:
    plain = convert(*map(str, inputs), "-o", str(tmp_path / "plain"), "--to", "json")
    assert plain.returncode == 0, plain.stderr
    spread = convert(
        "--ray", ray_head.address, "--actors", "2", *map(str, inputs), "-o", str(tmp_path / "ray"), "--to", "json"
    )
    assert spread.returncode == 0, spread.stderr
    for path in inputs:
        name = path.stem + ".json"
        expected = (tmp_path / "plain" / name).read_text(encoding="utf-8")
        assert (tmp_path / "ray" / name).read_text(encoding="utf-8") == expected, name
    # Every readable page was read, and said where: 18 + 1 + the declared file's one, on this one node.
    assert f"pages read by node: 20 on {raynodes.HEAD_IP}" in spread.stderr, spread.stderr
    # The pages that cannot be loaded are named, as plain `convert` names them, and the readable one is kept.
    summary = next(line for line in spread.stderr.splitlines() if line.startswith("declared.pdf:"))
    assert "1 pages" in summary and "pages not read: 2-4" in summary, summary
    assert (
        summary.split(" in ")[0]
        == next(line for line in plain.stderr.splitlines() if line.startswith("declared.pdf:")).split(" in ")[0]
    )


def test_a_cluster_that_cannot_be_joined_is_one_line(needs_ray: None, inputs: list[Path], tmp_path: Path) -> None:
    # A port nothing listens on: the error names the address, and no document is written.
    port = raynodes.free_port(raynodes.HEAD_IP)
    failed = convert("--ray", f"{raynodes.HEAD_IP}:{port}", str(inputs[0]), "-o", str(tmp_path / "out.md"))
    assert failed.returncode != 0
    assert f"cannot join the Ray cluster at {raynodes.HEAD_IP}:{port}" in failed.stderr, failed.stderr
    assert not (tmp_path / "out.md").exists()

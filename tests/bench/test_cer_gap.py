"""bench/cer_gap.py: where a tool's character errors come from on dev pages, and never a held-out page's."""

from __future__ import annotations

from pathlib import Path

from rapidfuzz.distance import Levenshtein

from cer_gap import dev_outputs, report_lines, runs, spans_once
from doccorpus import HELD_OUT, HELD_OUT_GROUPS, Entry

SPANNED = """Counts by county.

| Registered voters | Registered voters | Registered voters |
|---|---|---|
| County | Men | Women |
| Adams | 12 | 14 |
"""


def test_the_runs_add_up_to_the_distance_and_a_moved_block_is_one_run() -> None:
    reference = "The title of the page. " + "A paragraph of running text that says a good deal. " * 3 + "A note."
    output = "A note. " + reference.removesuffix(" A note.")
    found = runs(output, reference)
    assert sum(r.cost for r in found) == Levenshtein.distance(output, reference)
    assert found[0].output == "A note. " and not found[0].reference


def test_spans_once_writes_a_rows_run_of_equal_cells_once_and_nothing_else_changes() -> None:
    assert spans_once(SPANNED) == "Counts by county. Registered voters County Men Women Adams 12 14"
    assert spans_once("| a | b |\n|---|---|\n| 1 | 2 |\n") == "a b 1 2"


def _entry(tmp_path: Path, name: str, group: str) -> Entry:
    truth = tmp_path / (name.replace("/", "__") + ".truth.md")
    truth.write_text("Counts by county.\n", encoding="utf-8")
    return Entry(name, group, tmp_path / "page.pdf", truth)


def test_a_held_out_page_is_never_read_named_nor_counted(tmp_path: Path) -> None:
    entries = [
        _entry(tmp_path, "tables_dev/spans", "tables-dev"),
        _entry(tmp_path, "held/page", sorted(HELD_OUT_GROUPS)[0]),
        _entry(tmp_path, sorted(HELD_OUT)[0], "born-digital"),
    ]
    save = tmp_path / "save"
    for entry in entries:
        for tool in ("modelhost", "pymupdf4llm"):
            path = save / tool / (entry.name.replace("/", "__") + ".md")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(SPANNED, encoding="utf-8")
    items = list(dev_outputs(save, ["modelhost", "pymupdf4llm"], entries))
    assert [entry.name for entry, _ in items] == ["tables_dev/spans"]
    lines = list(report_lines(iter(items), top=1, whole=True))
    assert lines[0] == "tables_dev/spans (17 chars): modelhost 83 (spans once 47); pymupdf4llm 83 (spans once 47)"
    assert not any("held" in line or sorted(HELD_OUT)[0] in line for line in lines)
    assert lines[-1].startswith("whole-page dev references, pymupdf4llm: CER 4.882, spans once 2.765")

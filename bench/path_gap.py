"""Where the pixel path reads a dev page better than the text path (issue 34 point 1: the text path must never read a
page worse than the pixel path does).

Reads a `bench/documents_quality.py --json` report of a run with both `modelhost` and `modelhost-pixels` and lists
the DEV files where the pixels beat the text layer by a clear margin on a measure, with both figures: cell recall,
tables found, false tables, sentences whole, and CER where the reference is of the whole page. Held-out files
(`doccorpus.HELD_OUT`, `HELD_OUT_GROUPS`) are never listed, counted or named: their split's totals are what
documents_quality.py prints, and a per-file row of theirs read while changing the engine leaks their content.

    .venv/bin/python bench/documents_quality.py --tools modelhost modelhost-pixels --groups born-digital tables-dev \
        --json both.json
    .venv/bin/python bench/path_gap.py both.json [more.json ...]   # several runs' rows are read together
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from doccorpus import HELD_OUT, HELD_OUT_GROUPS

TEXT, PIXELS = "modelhost", "modelhost-pixels"
#: Cells the pixels must find more of, as a share of the reference's cells, to count as a gap: a table's cells read
#: by OCR differ from the text layer's by a character here and there (a "1l" for "11", a dropped accent), which on
#: the dev tables moved a page's cell recall by up to 0.03 either way where both paths read the same grid
#: (acmart_sigconf_p3 13 vs 12 of 14 read as one table by both).
CELL_MARGIN = 0.05
#: Sentences whole the pixels must have more of: one sentence comes and goes with one OCR'd word.
SENTENCE_MARGIN = 2
#: CER points the pixels must be under the text layer's, on a whole-page reference only: OCR alone costs the pixel
#: path 0.00-0.04 CER on dev born-digital pages both paths order alike (code_and_formula 0.02 vs 0.02, office_dmca_p4
#: 0.04 vs 0.04). A reference of a page's tables only (most of tables-dev) makes every tool's CER its page's other
#: text, so CER is compared where the reference holds sentences.
CER_MARGIN = 0.05


def dev_rows(report: dict[str, Any], tool: str) -> dict[str, dict[str, Any]]:
    """A tool's per-file rows of the dev split, by file name."""
    return {
        row["file"]: row
        for row in report.get("files", {}).get(tool, [])
        if row["file"] not in HELD_OUT and row["group"] not in HELD_OUT_GROUPS
    }


def _cer(row: dict[str, Any]) -> float:
    return row["char_errors"] / row["chars"] if row["chars"] else 0.0


def gaps(text: dict[str, Any], pixels: dict[str, Any]) -> Iterator[str]:
    """What the pixels read clearly better on one file, each as `measure text -> pixels`."""
    if text.get("error") or pixels.get("error"):
        return
    cells = text["cells"]
    if cells and pixels["cells_found"] - text["cells_found"] >= CELL_MARGIN * cells:
        yield f"cells {text['cells_found']}/{cells} -> {pixels['cells_found']}/{cells}"
    if pixels["tables_found"] > text["tables_found"]:
        yield f"tables {text['tables_found']}/{text['tables']} -> {pixels['tables_found']}/{text['tables']}"
    if pixels["tables_false"] < text["tables_false"]:
        yield f"false tables {text['tables_false']} -> {pixels['tables_false']}"
    if text["sentences"] and pixels["sentences_whole"] - text["sentences_whole"] >= SENTENCE_MARGIN:
        yield f"sentences {text['sentences_whole']}/{text['sentences']} -> {pixels['sentences_whole']}"
    if text["sentences"] and _cer(text) - _cer(pixels) >= CER_MARGIN:
        yield f"CER {_cer(text):.2f} -> {_cer(pixels):.2f}"


def report_lines(report: dict[str, Any]) -> Iterable[str]:
    """One line per dev file where the pixels read better, then how many dev files both paths read."""
    text, pixels = dev_rows(report, TEXT), dev_rows(report, PIXELS)
    both = sorted(set(text) & set(pixels))
    found = 0
    for name in both:
        seen = list(gaps(text[name], pixels[name]))
        if seen:
            found += 1
            yield f"{name}: {'; '.join(seen)}"
    yield f"{found} of {len(both)} dev files read better by {PIXELS} than by {TEXT}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", type=Path, nargs="+", help="documents_quality.py --json reports (both paths' rows)")
    args = parser.parse_args(argv)
    merged: dict[str, list[dict[str, Any]]] = {}
    for path in args.reports:  # two runs, one per path, read as one
        for tool, rows in json.loads(path.read_text(encoding="utf-8")).get("files", {}).items():
            merged.setdefault(tool, []).extend(rows)
    for line in report_lines({"files": merged}):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

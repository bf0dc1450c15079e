"""bench/path_gap.py: the dev pages the pixel path reads better than the text path, and never a held-out one."""

from __future__ import annotations

from typing import Any

from doccorpus import HELD_OUT_GROUPS
from path_gap import PIXELS, TEXT, report_lines


def _row(file: str, group: str, **measures: int) -> dict[str, Any]:
    row = dict.fromkeys(("cells", "cells_found", "tables", "tables_found", "tables_false"), 0)
    row |= {"sentences": 10, "sentences_whole": 10, "char_errors": 10, "chars": 1000}
    return {"file": file, "group": group, "error": None, **row, **measures}


def test_a_dev_page_the_pixels_read_better_is_listed_with_both_figures() -> None:
    report = {
        "files": {
            TEXT: [
                _row("tables_dev/two_tables", "tables-dev", tables=2, tables_found=1, cells=40, cells_found=20),
                _row("same", "born-digital"),
                _row("order", "born-digital", sentences_whole=5, char_errors=300),
            ],
            PIXELS: [
                _row("tables_dev/two_tables", "tables-dev", tables=2, tables_found=2, cells=40, cells_found=40),
                _row("same", "born-digital", sentences_whole=9, char_errors=40),  # within the margins: OCR's noise
                _row("order", "born-digital", sentences_whole=9, char_errors=60),
            ],
        }
    }
    lines = list(report_lines(report))
    assert lines == [
        "order: sentences 5/10 -> 9; CER 0.30 -> 0.06",
        "tables_dev/two_tables: cells 20/40 -> 40/40; tables 1/2 -> 2/2",
        "2 of 3 dev files read better by modelhost-pixels than by modelhost",
    ]


def test_a_held_out_page_is_never_named_nor_counted() -> None:
    group = sorted(HELD_OUT_GROUPS)[0]
    worse = _row("held/page", group, tables=1, cells=10)
    better = _row("held/page", group, tables=1, tables_found=1, cells=10, cells_found=10)
    lines = list(report_lines({"files": {TEXT: [worse], PIXELS: [better]}}))
    assert lines == ["0 of 0 dev files read better by modelhost-pixels than by modelhost"]

"""Corpus acceptance: modelhost's document conversion over every file of tests/corpus/documents/, measured against
its ground truth with bench/docmetrics.py, must stay at or above the floors below.

The floors are what the code achieved when they were last set, rounded towards failing (ratios down to 0.01, CER
up to 0.01), so any regression of a measure on any file fails here, naming the file and the measure. They are NOT
targets (issue 19's targets are printed by bench/documents_quality.py): whoever improves a measure raises its floor
in the same commit, so the gain cannot be lost silently. A new corpus file needs its own row (a test checks that).

The engine is driven exactly as the benchmark drives it (bench/doctools.py): today `Docengine`, the stages of
modelhost.docengine on each page's text layer, a few hundredths of a CPU second per page, so the whole corpus takes
seconds. When the engine is behind `modelhost convert` (docengine/engine.py, with OCR for pages without text), switch
ENGINE to doctools.Modelhost and move the image-only files from NOT_YET to FLOORS.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import doccorpus
import docmetrics
import doctools


@dataclass(frozen=True, slots=True)
class Floor:
    """The least a file may score: CER at most `cer`; the rest at least. None: the file has nothing to measure."""

    cer: float
    word_recall: float
    heading_recall: float | None
    false_headings: int
    cell_recall: float | None
    false_tables: int
    order: float | None


#: The engine the floors hold to (see the module docstring).
ENGINE = doctools.Docengine

#: Measured at 983f165 (docengine with tables of contents and section numbering), printed by
#: `bench/documents_quality.py --tools docengine --floors docengine`. Columns: CER at most, then at least: word
#: recall, heading recall, false headings (at most), table cell recall, false tables (at most), sentences whole.
#: Raise them as the engine improves; never lower one without saying why in the commit.
FLOORS: dict[str, Floor] = {
    "2305.03393v1-pg9": Floor(0.07, 1.00, 1.00, 0, 0.92, 0, 1.00),
    "arxiv_2501.00089_p1-3": Floor(0.29, 0.83, 1.00, 0, None, 0, 0.50),
    "code_and_formula": Floor(0.02, 1.00, 1.00, 0, None, 0, 1.00),
    "multi_page": Floor(0.01, 0.99, 1.00, 0, None, 0, 0.98),
    "picture_classification": Floor(0.01, 1.00, 1.00, 0, None, 0, 1.00),
    "redp5110_sampled": Floor(0.13, 0.96, 0.81, 9, 0.92, 0, 0.88),
    "pdfspec/headings": Floor(0.01, 1.00, 1.00, 0, None, 0, None),
    "pdfspec/paragraphs": Floor(0.01, 1.00, None, 0, None, 0, 1.00),
    "pdfspec/table": Floor(0.01, 1.00, None, 0, 1.00, 0, None),
}

#: Files the engine above cannot read yet, and why (a floor of CER 1.0 and recall 0 could never fail, so none is set).
NOT_YET: dict[str, str] = {
    name: "image-only: no text layer, and the pixel path is not behind the engine yet"
    for name in (
        "pdfspec/scanned",
        "ocr/ocr_test",
        "ocr/ocr_test_rotated_90",
        "ocr/ocr_test_rotated_180",
        "ocr/ocr_test_rotated_270",
    )
}

ENTRIES = doccorpus.entries()


@pytest.fixture(scope="module")
def engine() -> Iterator[doctools.Tool]:
    tool = ENGINE()
    tool.start()
    try:
        yield tool
    finally:
        tool.close()


def test_every_corpus_file_has_floors_or_a_reason() -> None:
    assert not set(FLOORS) & set(NOT_YET)
    assert sorted([*FLOORS, *NOT_YET]) == sorted(e.name for e in ENTRIES)


def _shortfalls(got: docmetrics.Scores, floor: Floor) -> list[str]:
    """Each measure below its floor, as 'measure got X, floor Y'."""
    out: list[str] = []
    if got.cer > floor.cer:
        out.append(f"CER {got.cer:.3f} > {floor.cer}")
    if got.word_recall < floor.word_recall:
        out.append(f"word recall {got.word_recall:.3f} < {floor.word_recall}")
    heads, tabs, order = got.headings, got.tables, got.order
    if floor.heading_recall is not None and heads.found / heads.total < floor.heading_recall:
        out.append(f"heading recall {heads.found}/{heads.total} < {floor.heading_recall} (missed {heads.missed})")
    if heads.false > floor.false_headings:
        out.append(f"false headings {heads.false} > {floor.false_headings} ({heads.spurious})")
    if floor.cell_recall is not None and (tabs.cell_recall or 0.0) < floor.cell_recall:
        out.append(f"table cell recall {tabs.cells_found}/{tabs.cells_total} < {floor.cell_recall}")
    if tabs.false > floor.false_tables:
        out.append(f"false tables {tabs.false} > {floor.false_tables}")
    if floor.order is not None and (order.share or 0.0) < floor.order:
        out.append(f"sentences whole {order.whole}/{order.total} < {floor.order}")
    return out


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_corpus_file_stays_at_or_above_its_floors(engine: doctools.Tool, entry: doccorpus.Entry) -> None:
    if entry.name in NOT_YET:
        pytest.skip(f"{entry.name}: {NOT_YET[entry.name]}")
    floor = FLOORS.get(entry.name)
    if floor is None:
        pytest.fail(f"{entry.name}: no floors (add its row to FLOORS)")
    got = docmetrics.score(engine.convert(entry.pdf), entry.reference())
    shortfalls = _shortfalls(got, floor)
    assert not shortfalls, f"{entry.name}: " + "; ".join(shortfalls)

"""The corpus as the benchmark reads it: every file present, each ground truth loaded and cut as its README says."""

from __future__ import annotations

import doccorpus
import docmetrics


def test_every_corpus_pdf_is_scored_once_against_an_existing_ground_truth() -> None:
    entries = doccorpus.entries()
    pdfs = sorted(p for p in doccorpus.CORPUS.rglob("*.pdf"))
    assert sorted(e.pdf for e in entries) == pdfs
    assert len({e.name for e in entries}) == len(entries)
    for entry in entries:
        assert entry.truth.is_file(), entry
        assert entry.group in doccorpus.GROUPS


def test_docling_ground_truth_loads_with_its_headings_and_tables() -> None:
    redp = next(e for e in doccorpus.entries() if e.name == "redp5110_sampled").reference()
    assert len(redp.tables) == 6
    assert len(redp.headings) == 22
    assert "Row and Column Access Control Support in IBM DB2 for i" in [h.text for h in redp.headings]
    assert len(docmetrics.sentences(redp.paragraphs)) > 100


def test_the_arxiv_ground_truth_stops_where_page_three_does() -> None:
    arxiv = next(e for e in doccorpus.entries() if e.name.startswith("arxiv")).reference()
    titles = [h.text for h in arxiv.headings]
    assert titles[0] == "Insights on Galaxy Evolution from Interpretable Sparse Feature Networks"
    assert titles[-1] == "Physical laws from galaxy images"  # 4.1 starts on page 3
    assert "Performance versus interpretability" not in titles  # 4.2 is on page 4
    assert "These linear relations are so simple" not in arxiv.text


def test_pdfspec_gold_files_give_their_structure() -> None:
    by_name = {e.name: e.reference() for e in doccorpus.entries() if e.group == "pdfspec"}
    assert [(h.text, h.level) for h in by_name["pdfspec/headings"].headings] == [
        ("1 First Section", 1),
        ("1.1 A Subsection", 2),
        ("1.1.1 A Sub-subsection", 3),
        ("2 Second Section", 1),
    ]
    assert by_name["pdfspec/table"].tables == [
        [["Header A", "Header B", "Header C"], ["Cell A1", "Cell B1", "Cell C1"], ["Cell A2", "Cell B2", "Cell C2"]]
    ]
    assert len(by_name["pdfspec/paragraphs"].paragraphs) == 3

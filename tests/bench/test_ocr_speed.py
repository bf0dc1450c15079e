"""bench/ocr_speed.py: its pages exist, and a held-out page's own scores are kept out of its rows."""

from __future__ import annotations

from ocr_speed import CORPUS, PAGES, held_out


def test_every_page_is_a_corpus_file_and_the_held_out_ones_are_known_as_such() -> None:
    for name, _, reference in PAGES:
        assert (CORPUS / name).is_file()
        assert reference is None or (CORPUS / reference).is_file()
    # the bench's paths map onto doccorpus's names (pdf/ and .pdf dropped) before HELD_OUT is asked
    marked = {name for name, _, _ in PAGES if held_out(f"{name}#1")}
    assert marked == {
        "pdfspec/scanned.pdf",
        "ocr/ocr_test_rotated_180.pdf",
        "ocr/ocr_test_rotated_270.pdf",
        "pdf/2305.03393v1-pg9.pdf",
    }
    assert not held_out("pdf/redp5110_sampled.pdf#3") and not held_out("ocr/ocr_test.pdf#1")

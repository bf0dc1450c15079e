"""The corpus as the benchmark reads it: every file present, each ground truth loaded and cut as its README says."""

from __future__ import annotations

import re

import pytest

import doccorpus
import docmetrics


def test_every_corpus_pdf_is_scored_once_against_an_existing_ground_truth() -> None:
    entries = doccorpus.entries()
    # gnarly/ has no ground truth: its files are checked against pdftotext's words, not scored; probe/'s files are
    # scored by their rule checks (bench/documents_checks.py), not here
    pdfs = sorted(p for p in doccorpus.CORPUS.rglob("*.pdf") if p.parent.name not in ("gnarly", "probe"))
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


def _arxiv() -> doccorpus.Entry:
    return next(e for e in doccorpus.entries() if e.name.startswith("arxiv"))


def test_the_arxiv_reference_holds_no_latex_that_no_page_prints() -> None:
    """Each page-true rule on the paper itself: what goes, and the printed text beside it that stays."""
    text = _arxiv().reference().text
    assert "Image:" not in text and ".pdf" not in text  # \includegraphics file names
    assert "0000-0002-5077-881X" not in text and text.startswith("Insights on Galaxy")  # the ORCID iD
    # \cite keys and \ref labels, and a bibcode cited bare; the prose around them stays
    for key in ("1926ApJ", "superposition]", "sec:methodology", "fig:SFNet", "Doorenbos+2022", "2019MNRAS.487.1808M"):
        assert key not in text, key
    assert "the methodology described in Section . In Section , we show" in text
    assert "see, e.g., for more on the correlations" in text
    # forbidden lines as printed, and inline math as printed: Greek letters, sub- and superscripts as words
    assert "[N II] λ6584, Hα λ6564, [O III] λ5007, and Hβ λ4861" in text
    assert "pixel space ( n 10 5 pixels)" in docmetrics.normalise(text)
    assert "activation strengths as A SL 17 and A Z 256," in text
    assert not any(word in docmetrics.words(text) for word in ("tt", "rm", "sim", "times", "alpha", "n2", "o3"))


def test_the_arxiv_reference_leaves_out_the_floats_latex_set_after_page_three() -> None:
    """Figure 2 and Table 1 are cut by ARXIV_FLOATS because the PDF's own text layer (pypdfium2) shows neither on
    its pages 1-3; Figure 1, set on page 3, stays. Phrases from each float, checked against every page."""
    import pypdfium2

    entry = _arxiv()
    document = pypdfium2.PdfDocument(entry.pdf)
    try:
        printed = " ".join(docmetrics.words(" ".join(page.get_textpage().get_text_range() for page in document)))
    finally:
        document.close()
    text = " ".join(docmetrics.words(entry.reference().text))
    whole = " ".join(docmetrics.words(entry.truth.read_text(encoding="utf-8")))
    gone = (
        "examples of the top nine image activations",  # Figure 2's caption
        "image features learned by a sfnet to independently predict",  # Table 1's caption
        "very blue compact or merging extreme star formation",  # Table 1's first row
    )
    for phrase in gone:
        assert phrase in whole and phrase not in printed and phrase not in text, phrase
    kept = "each convolution layer is followed by batch normalization"  # Figure 1's caption, page 3
    assert kept in printed and kept in text


def test_a_changed_arxiv_ground_truth_is_refused_not_cut_blindly() -> None:
    whole = _arxiv().truth.read_text(encoding="utf-8")
    for marker in (doccorpus.ARXIV_CUT, doccorpus.ARXIV_FLOATS[1][1]):
        with pytest.raises(ValueError, match="gone"):
            doccorpus.arxiv_page_true(whole.replace(marker, "?"))


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


def test_both_splits_hold_every_group_and_every_held_out_name_is_a_corpus_file() -> None:
    """A held-out name that matches no file would silently move nothing; a group on one side only measures nothing
    about generalising there."""
    entries = doccorpus.entries()
    names = {e.name for e in entries}
    assert names >= doccorpus.HELD_OUT
    for group in doccorpus.GROUPS:
        # a group held out whole (a kind of page never tuned on) holds held-out files only
        # (and a group that is dev whole, the real tables one may develop on, dev files only)
        expected = {"held-out"} if group in doccorpus.HELD_OUT_GROUPS else set(doccorpus.SPLITS)
        expected = {"dev"} if group in doccorpus.DEV_GROUPS else expected
        assert {e.split for e in entries if e.group == group} == expected, group
    assert set(doccorpus.GROUPS) >= doccorpus.HELD_OUT_GROUPS | doccorpus.DEV_GROUPS
    assert not doccorpus.HELD_OUT_GROUPS & doccorpus.DEV_GROUPS
    # a two-column arXiv paper on each side
    assert {e.split for e in entries if e.name.startswith("arxiv")} == set(doccorpus.SPLITS)


def test_the_second_arxiv_reference_stops_where_its_page_three_does() -> None:
    entry = next(e for e in doccorpus.entries() if e.name.startswith("arxiv_2501.01300v2"))
    reference = entry.reference()
    assert "are largely cut-off independent" in reference.text  # page 3's last whole sentence
    assert "clear agreement of the QM-HRG predictions" not in reference.text  # page 4
    assert "Charm degrees of freedom in QGP" not in [h.text for h in reference.headings]


def test_the_dev_tables_group_holds_each_pages_tables_as_its_readme_counts() -> None:
    """tables_dev/README.md's counts: each reference is the page's tables (every row as wide as its header), all dev.
    The counts are read from the README's own table (its last column, "tables, non-empty cells"), so a page added
    there is checked without a second list to keep (twice a page was added without one, and the suite failed); a
    scan of a page (scan/scan_tablesdev_NAME) is held to its page's counts."""
    entries = [e for e in doccorpus.entries() if e.group == "tables-dev"]
    assert {e.split for e in entries} == {"dev"}
    readme = (doccorpus.CORPUS / "tables_dev" / "README.md").read_text(encoding="utf-8")
    stated = {
        name: (int(tables), int(cells))
        for name, tables, cells in re.findall(r"^\| `([\w.-]+)\.pdf` \| \d+ \| .* \| (\d+), (\d+) \|$", readme, re.M)
    }
    assert {p.stem for p in (doccorpus.CORPUS / "tables_dev").glob("*.pdf")} == set(stated)  # a row for each page
    counts = {
        e.name: (
            len(e.reference().tables),
            sum(1 for t in e.reference().tables for row in t for cell in row if cell.strip()),
        )
        for e in entries
    }
    page = {e.name: e.name.removeprefix("tables_dev/").removeprefix("scan/scan_tablesdev_") for e in entries}
    assert {name: stated.get(page[name]) for name in counts} == counts
    assert sum(name.startswith("scan/") for name in counts) == 25  # the scans the corpus README lists
    for entry in entries:
        assert all(len(row) == len(t[0]) for t in entry.reference().tables for row in t), entry.name


def test_the_tables_group_holds_each_files_tables_whole() -> None:
    """tables/README.md's counts: each reference is the page's tables, every row as wide as its header."""
    by_name = {e.name: e.reference() for e in doccorpus.entries() if e.group == "tables"}
    shapes = {name: [(len(t), len(t[0])) for t in ref.tables] for name, ref in by_name.items()}
    assert shapes == {
        "tables/census_12s0324": [(34, 10), (33, 6)],
        "tables/tabula_campaign_donors": [(56, 7)],
        "tables/tabula_data": [(33, 12), (7, 5), (7, 6), (16, 3)],
        "tables/tabula_multicolumn": [(44, 3)],
    }
    for ref in by_name.values():
        assert all(len(row) == len(table[0]) for table in ref.tables for row in table)
    donors = by_name["tables/tabula_campaign_donors"].tables[0]
    assert donors[18][:2] == ["VALSANGIACOMO BLANCO", "FERNANDO JORGE"]  # tabula's CSV splits it wrongly


def test_the_government_tables_group_holds_each_pages_text_and_table() -> None:
    """tables_gov/README.md's shapes: each reference is one page's table, every row as wide as its header, and
    the page's titles as text."""
    by_name = {e.name: e.reference() for e in doccorpus.entries() if e.group == "tables-gov"}
    shapes = {name: [(len(t), len(t[0])) for t in ref.tables] for name, ref in by_name.items()}
    assert shapes == {
        "tables_gov/az_voter_registration_2024": [(52, 10)],
        "tables_gov/census_class_codes": [(19, 3)],
        "tables_gov/ia_voter_registration_county": [(46, 12)],
        "tables_gov/ia_voter_registration_district": [(23, 12)],
        "tables_gov/mi_voter_registration_2023": [(35, 7)],
    }
    for ref in by_name.values():
        assert all(len(row) == len(table[0]) for table in ref.tables for row in table)
    arizona = by_name["tables_gov/az_voter_registration_2024"]
    assert "STATE OF ARIZONA REGISTRATION REPORT" in arizona.text
    assert arizona.tables[0][37][:3] == ["Santa Cruz", "24", "JUL 2023"]  # a label wrapped over two lines: one cell
    assert by_name["tables_gov/mi_voter_registration_2023"].tables[0][0][1:3] == ["April", "April"]  # a span, twice


def test_the_rivals_tables_group_holds_each_pages_text_tables_and_pictures() -> None:
    """tables_rival/README.md's shapes: every table of each page, rows as wide as the header, a header spanning
    columns repeated in each, and what the page says beside its tables (a title, notes, two charts' headings)."""
    by_name = {e.name: e.reference() for e in doccorpus.entries() if e.group == "tables-rival"}
    assert all(e.split == "held-out" for e in doccorpus.entries() if e.group == "tables-rival")
    shapes = {name: [(len(t), len(t[0])) for t in ref.tables] for name, ref in by_name.items()}
    assert shapes == {
        "tables_rival/chemrxiv_silyl_p2": [(9, 8)],
        "tables_rival/national_capitals": [(32, 5)],
        "tables_rival/sce_150_1": [(13, 2), (8, 5)],
        "tables_rival/tabulate_bug": [(9, 7), (2, 8)],
    }
    for ref in by_name.values():
        assert all(len(row) == len(table[0]) for table in ref.tables for row in table)
    remuneration = by_name["tables_rival/tabulate_bug"]
    assert remuneration.tables[0][0][1:] == ["2023-2025*"] * 6  # one header over six columns, in each
    assert "Financial targets 2023-2025" in remuneration.text
    assert by_name["tables_rival/sce_150_1"].tables[1][6] == ["RMAX_PREMIUM", "", "", "", "NA"]


def test_the_fresh_tables_group_holds_each_pages_text_tables_and_headings() -> None:
    """tables_fresh/README.md's shapes: every table of each page, rows as wide as the header, a header spanning
    columns repeated in each, a label set once over two header rows kept in the first, and what the page says
    around its tables (an invoice's fields, a caption, headings); held out whole."""
    entries = [e for e in doccorpus.entries() if e.group == "tables-fresh"]
    assert "tables-fresh" in doccorpus.HELD_OUT_GROUPS
    assert entries and all(e.split == "held-out" for e in entries)
    by_name = {e.name: e.reference() for e in entries}
    shapes = {name: [(len(t), len(t[0])) for t in ref.tables] for name, ref in by_name.items()}
    assert shapes == {
        "tables_fresh/facturx_invoice": [(4, 9), (8, 5), (5, 6), (2, 3)],
        "tables_fresh/megafake_report_p3": [(3, 6)],
        "tables_fresh/oferta_3eso": [(6, 3)],
        "tables_fresh/sample_table": [(6, 6)],
        "tables_fresh/tjms_footballers_p3": [(4, 5), (3, 6)],
    }
    for ref in by_name.values():
        assert all(len(row) == len(table[0]) for table in ref.tables for row in table)
    two_levels = by_name["tables_fresh/sample_table"].tables[0]
    assert two_levels[0][4:] == ["Results", "Results"]  # one header over two columns, in each
    assert two_levels[1] == ["", "", "", "", "Accuracy", "Time to complete"]  # names set once stay in the first row
    invoice = by_name["tables_fresh/facturx_invoice"]
    assert invoice.tables[0][3][6] == ""  # the third line has no discount
    assert "N° DE CLIENT : REFCLI0215" in invoice.paragraphs  # a box's field, a paragraph of its own
    assert not invoice.headings
    journal = by_name["tables_fresh/tjms_footballers_p3"]
    assert [(h.text, h.level) for h in journal.headings] == [
        ("Nitrate determination", 3),
        ("Statistical Analysis", 3),
        ("Results", 2),
    ]
    assert "Calibration curves" in journal.text  # the page's word, where the text layer breaks it


def test_the_fresh_documents_group_holds_whole_pages_with_headings_lists_and_sentences() -> None:
    """docs_fresh/README.md's pages: whole pages scored on every measure (headings and their levels, sentences whole,
    tables), held out whole; furniture and footnote marks are out of the text, a paragraph that runs from one column
    into the next is one, a line-end hyphen is gone, a row span is written in each row."""
    entries = [e for e in doccorpus.entries() if e.group == "docs-fresh"]
    assert "docs-fresh" in doccorpus.HELD_OUT_GROUPS
    assert entries and all(e.split == "held-out" for e in entries)
    by_name = {e.name.removeprefix("docs_fresh/"): e.reference() for e in entries}
    assert sorted(by_name) == [
        "devref_p20",
        "fhs_p8",
        "fhs_p9",
        "mom_essay_p10",
        "mom_letter",
        "mom_pdf_p8",
        "mom_slides_p6",
    ]
    levels = {name: [(h.text, h.level) for h in ref.headings] for name, ref in by_name.items()}
    assert levels["fhs_p8"] == [("Chapter 1. Introduction", 1), ("1.1. Purpose", 2), ("1.2. Conventions", 2)]
    assert levels["mom_essay_p10"][0] == ("CONTROL EQUALS CHAOS", 1)
    assert [level for _, level in levels["devref_p20"]] == [3, 3, 3]
    assert levels["mom_letter"] == []
    assert {name: [(len(t), len(t[0])) for t in ref.tables] for name, ref in by_name.items() if ref.tables} == {
        "fhs_p9": [(5, 3)]
    }
    assert [row[0] for row in by_name["fhs_p9"].tables[0][1:]] == ["static", "static", "variable", "variable"]
    for ref in by_name.values():
        assert len(docmetrics.sentences(ref.paragraphs)) >= 5  # each page judges reading order
    essay = by_name["mom_essay_p10"]
    assert any(
        p.startswith("Lorem ipsum dolor sit amet, consetetur sadipscing elitr, sed diam nonumy eirmod tempor")
        and p.endswith("Gubergren no sea takimata sanctus est.")
        for p in essay.paragraphs
    )  # across columns
    assert "dolore magna" in essay.text and "do-" not in essay.text and "†" not in essay.text
    devref = by_name["devref_p20"]
    assert "Release 12.18" not in devref.text and "Chapter 3" not in devref.text  # running head and foot
    assert "your message and state the period" in devref.text  # the footnote mark is out
    assert devref.paragraphs[-1].startswith("This is so that the message")  # the footnote, last, unmarked
    slides = by_name["mom_slides_p6"]
    assert (
        "Header left" not in slides.text and "both fit on A4 or US letter paper sizes when printed" in slides.paragraphs
    )
    assert "prohibit the use of open source software" in by_name["mom_letter"].text
    assert "PDF_TITLE" in by_name["mom_pdf_p8"].text and "<thus>" in by_name["fhs_p8"].text  # escapes read as printed


def test_the_new_tables_group_holds_whole_pages_with_their_tables_held_out() -> None:
    """tables_new/README.md's pages: whole pages with tables, held out whole (this test names their shapes, never their
    text): every table's rows as wide as its header, a cell spanning columns written in each, the form's boxes read as
    paragraphs (no table, no heading), headings at their documents' levels."""
    entries = [e for e in doccorpus.entries() if e.group == "tables-new"]
    assert "tables-new" in doccorpus.HELD_OUT_GROUPS
    assert entries and all(e.split == "held-out" for e in entries)
    by_name = {e.name.removeprefix("tables_new/"): e.reference() for e in entries}
    assert {name: len(ref.tables) for name, ref in by_name.items()} == {
        "icccm_p9": 2,
        "jags_user_p29": 1,
        "jags_user_p39": 1,
        "rml_fw2_p4": 0,
        "rml_shipment_p1": 1,
        "rml_shipment_p2": 1,
        "umfpack_guide_p10": 1,
        "xorg_relnotes_p6": 2,
    }
    for name, ref in by_name.items():
        assert all(len(row) == len(table[0]) >= 3 for table in ref.tables for row in table), name
        assert all(len(table) >= 3 for table in ref.tables), name  # a header and rows under it
    form = by_name["rml_fw2_p4"]
    assert not form.headings and len(form.paragraphs) > 30  # a paragraph per box
    rows = [row for name in ("rml_shipment_p1", "rml_shipment_p2") for row in by_name[name].tables[0][1:]]
    assert sum(row[0] != "" and len(set(row[:4])) == 1 for row in rows) == 2  # spans over four columns, in each
    assert [h.level for h in by_name["jags_user_p39"].headings] == [1, 2]
    assert [h.level for h in by_name["xorg_relnotes_p6"].headings] == [3, 3, 4]
    assert not by_name["rml_shipment_p2"].headings


def test_a_scan_of_one_page_is_scored_against_that_page_of_its_source() -> None:
    """scan/scan_NAME_pN.pdf is page N of NAME: its reference holds that page's tables and none of another page's;
    scan_pdfspec_NAME.pdf is scored against pdf-spec's gold Markdown."""
    by_name = {e.name: e for e in doccorpus.entries() if e.group == "scan"}
    page9 = by_name["scan/scan_redp5110_sampled_p9"]
    assert (page9.split, page9.pages) == ("dev", (9,))
    assert [(len(t), len(t[0])) for t in page9.reference().tables] == [(13, 6)]  # the authority table alone
    assert "Table 2-1" not in page9.reference().text  # page 8's table
    spec = by_name["scan/scan_pdfspec_table"]
    assert spec.reference().tables == [
        [["Header A", "Header B", "Header C"], ["Cell A1", "Cell B1", "Cell C1"], ["Cell A2", "Cell B2", "Cell C2"]]
    ]

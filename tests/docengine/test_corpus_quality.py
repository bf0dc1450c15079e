"""Corpus acceptance: modelhost's document conversion over every file of tests/corpus/documents/, measured against
its ground truth with bench/docmetrics.py, must stay at or above the floors below.

The floors are what the code achieved when they were last set, rounded towards failing (ratios down to 0.01, CER
up to 0.01), so any regression of a measure on any file fails here, naming the file and the measure. They are NOT
targets (issue 19's targets are printed by bench/documents_quality.py): whoever improves a measure raises its floor
in the same commit, so the gain cannot be lost silently. A new corpus file needs its own row (a test checks that).

Each file is read the way the benchmark reads it (bench/doctools.py `Modelhost`): `modelhost.documents.convert`,
the entry point of `modelhost convert`, with the `ocr` model: pages with a usable text layer come from it (the
docengine stages, hundredths of a CPU second a page), the others from their pixels (orientation, layout, PP-OCR;
about 2 CPU seconds a page), so the whole corpus takes well under a minute on an idle machine.
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
    level_agreement: float | None = None


#: The engines the floors hold to (see the module docstring).
TEXT_ENGINE = doctools.Modelhost
PIXEL_ENGINE = doctools.Modelhost

#: Measured at 3ed15d9+docq (the engine behind `modelhost convert`; headings ranked by the document's sizes), by
#: `bench/documents_quality.py --tools modelhost --floors modelhost`. Columns: CER at most, then at least: word
#: recall, heading recall, false headings (at most), table cell recall, false tables (at most), sentences whole,
#: heading level agreement (the step between consecutive headings, deeper/same/shallower, as the reference's).
#: Raise them as the engine improves; never lower one without saying why in the commit.
FLOORS: dict[str, Floor] = {
    "2305.03393v1-pg9": Floor(0.07, 1.00, 1.00, 0, 0.92, 0, 1.00, 1.00),
    # against the page-true reference (doccorpus.arxiv_page_true), which took out ~330 words no page prints
    "arxiv_2501.00089_p1-3": Floor(0.22, 0.98, 1.00, 0, None, 0, 0.70, 0.87),
    # added with issue 34 (measured at f29b025, before any change for them; the second arXiv paper against its
    # page-true reference, doccorpus.ARXIV2_CUT, whose LaTeX front matter every tool misses alike)
    # gutters found before lines are built (lines.gutters): the handbook's columns no longer read straight across
    "amt_handbook_sample": Floor(0.04, 1.00, 0.00, 0, None, 0, 1.00, None),
    "arxiv_2501.01300v2_p1-3": Floor(0.36, 0.88, 0.85, 2, None, 0, 0.48, 1.00),
    # headings from evidence, text over its backdrop kept (issue 34, measured at 244fa3b): headings 0.10 -> 0.68; the
    # false ones 1 -> 6 are mostly the section banners' true headings, whose number docling's reference puts after
    # the title ("들어가며 1" where the page prints "1 들어가며"). Its table's header cells are shaded, with no rule
    # under them: read as their own row since tables.fill_rules (cell recall 0.60 -> 1.00)
    "normal_4pages": Floor(0.05, 0.99, 0.68, 6, 1.00, 0, 0.90, 0.75),
    # right-to-left words in logical order (lam-alef ligatures, zero-width spaces), measured at 244fa3b
    "right_to_left_01": Floor(0.01, 1.00, 1.00, 0, None, 0, 1.00, None),
    # its reference corrected from the rendered page (the README says why): docling had copied the text layer's
    # garble (CER 0.60 on the text layer at 6e3e447); the layer's letters are no language's (a kashida glyph mapped
    # to waw), so the page is read from its pixels (textlayer._mismapped): an OCR page's slack (CER +0.01, recall
    # -0.01) on what it read at c2e5cba
    "right_to_left_02": Floor(0.05, 0.96, None, 0, None, 0, 0.66, None),
    "right_to_left_03": Floor(0.35, 0.98, 0.50, 0, None, 3, 1.00, 1.00),
    "table_mislabeled_as_picture": Floor(0.70, 0.98, None, 5, 0.00, 0, 0.80, None),
    "code_and_formula": Floor(0.02, 1.00, 1.00, 0, None, 0, 1.00, 1.00),
    "multi_page": Floor(0.01, 0.99, 1.00, 0, None, 0, 0.98, 1.00),
    "picture_classification": Floor(0.01, 1.00, 1.00, 0, None, 0, 1.00, None),
    # false headings 5 -> 3 since a heading must head something (analyse._heading_something: the front cover's
    # "Protect column" and "Redpaper" logo stand over nothing)
    # single pages of office documents (issue 34, headings on office pages; dev, HC session 14), measured with
    # classify.sections, keyed's lists of keys and centred_over; at the parent they read 5 false headings more
    "office_dmca_p1": Floor(0.03, 1.00, 1.00, 0, None, 0, 1.00, 1.00),
    "office_dmca_p4": Floor(0.04, 0.99, 1.00, 0, None, 0, 0.93, None),
    "office_geobase_p1": Floor(0.01, 1.00, 0.00, 1, None, 0, 1.00, None),
    "office_geobase_p2": Floor(0.01, 1.00, 1.00, 0, None, 0, 1.00, None),
    "office_geobase_p5": Floor(0.35, 1.00, 0.50, 0, None, 0, 1.00, None),
    "office_geobase_p6": Floor(0.04, 1.00, 1.00, 0, None, 0, 1.00, 1.00),
    "redp5110_sampled": Floor(0.09, 0.99, 0.95, 3, 0.92, 0, 0.91, 0.45),
    "pdfspec/headings": Floor(0.01, 1.00, 1.00, 0, None, 0, None, 1.00),
    "pdfspec/paragraphs": Floor(0.01, 1.00, None, 0, None, 0, 1.00, None),
    "pdfspec/table": Floor(0.01, 1.00, None, 0, 1.00, 0, None, None),
    # the dev tables group (issue 34), measured with tables._table's monospace rule for unruled columns only (HEAD
    # f5109da's engine otherwise): its references hold the tables alone, so CER counts the pages' prose and code as
    # insertions (read cell recall); p79 and p83, grids of monospaced cells, 0.00 -> 1.00 cells
    "tables_dev/reportlab_userguide_p61": Floor(0.23, 1.00, None, 2, 0.99, 0, None, None),
    "tables_dev/reportlab_userguide_p64": Floor(0.12, 1.00, None, 2, 1.00, 0, None, None),
    "tables_dev/reportlab_userguide_p79": Floor(0.84, 1.00, None, 1, 1.00, 0, None, None),
    "tables_dev/reportlab_userguide_p83": Floor(4.15, 1.00, None, 0, 1.00, 0, None, None),
    # CER at most 11.51, cells 0.66 (were 11.27, 0.68) since HA's merge_rules sorts each line's pieces along it: the
    # box's right side around the table ruled in parts (x = 286, drawn in pieces a hundred-thousandth of a point off
    # the grid's rule there) was dropped by the sort order before; with it the box and the grid read as one 4 x 4 grid
    # (one cell fewer right) where two overlapping tables were read, one of them false (false tables 1 -> 0)
    "tables_dev/reportlab_userguide_p87": Floor(11.51, 1.00, None, 6, 0.66, 0, None, None),
    # a row just outside a grid's rules, in its columns, is its row (tables._outer_lines): 0.81 -> 0.90
    "tables_dev/reportlab_userguide_p88": Floor(9.91, 1.00, None, 3, 0.90, 0, None, None),
    "tables_dev/reportlab_userguide_p89": Floor(4.83, 1.00, None, 2, 1.00, 0, None, None),
    # a loose ruled table's rows where its cells' borders break (tables.border_breaks): cells 0.17 -> 0.94
    "tables_dev/rice_seed_disinfection": Floor(0.15, 0.96, None, 3, 0.93, 0, None, None),
    # seven pages without a full grid (booktabs rules, rules between column groups, columns read from alignment),
    # added with their floors at 6e3e447's engine (issue 34, text-path tables)
    # verticals parting column groups only leave each band's columns to its words (tables._band_columns):
    # booktabs_p2 0.76 -> 0.92, pscl_countreg_p17 0.12 -> 1.00
    # a cmidrule's header spans the columns it underlines (tables._over): booktabs_p2 0.92 -> 1.00
    "tables_dev/booktabs_p2": Floor(4.21, 1.00, None, 0, 1.00, 0, None, None),
    "tables_dev/coin_maxtest_p3": Floor(13.07, 0.73, None, 2, 0.76, 0, None, None),
    # two tables under one stack of rules part at the centred title between them (tables._titled_parts), whose line
    # closes no column gap (tables._word_columns): 0.32 -> 1.00; that title is text now, a heading like the first's
    "tables_dev/coin_maxtest_p8": Floor(2.58, 1.00, None, 4, 1.00, 0, None, None),
    # a booktabs head and the far bottom rule bracket a long list (tables._bracketed), its wrapped descriptions
    # joined (tables.wraps_cells): 0.00 -> 0.86 (a hat accent's tall glyph still glues four lines into one row)
    # rows no longer joined by a math accent's tall glyph box (lines.TALL, issue 34): cells 0.86 -> 0.97
    "tables_dev/lme4_lmer_p30": Floor(0.06, 0.99, None, 0, 0.96, 0, None, None),
    # two pages of pdf2docx's test samples (issue 34, text-path tables), floors at 16cdb77's engine
    # a monospaced table whose header stands in another face on a band of its own (unruled._header_band): 0 -> 1.00
    "tables_dev/pdf2docx_table_stream": Floor(13.03, 1.00, None, 3, 1.00, 0, None, None),
    "tables_dev/usda_ag_energy_roundup": Floor(6.10, 1.00, None, 3, 0.01, 0, None, None),
    "tables_dev/pscl_countreg_p17": Floor(0.33, 1.00, None, 1, 1.00, 0, None, None),
    "tables_dev/sandwich_cl_p22": Floor(4.55, 1.00, None, 6, 1.00, 0, None, None),
    "tables_dev/xtable_gallery_p7": Floor(4.12, 1.00, None, 2, 1.00, 0, None, None),
    # fcolumn's manual (issue 34, text-path tables): financial statements, a balance sheet's two sides and a project's
    # expenses beside its income in one tabular, sum rules under the figures only; pymupdf4llm 0.55 and 0.23
    "tables_dev/fcolumn_p2": Floor(8.89, 1.00, None, 1, 1.00, 0, None, None),
    # "Project 1", the title set inside its tabular, is no header cell of the table since unruled._title (the README
    # says it is no cell): it reads as a heading, as coin_maxtest_p8's titles do, which this group's references,
    # holding tables alone, count false (1 -> 2)
    "tables_dev/fcolumn_p6": Floor(5.95, 1.00, None, 2, 1.00, 0, None, None),
    # texinfo tables with no rule at all (issue 34, text-path tables), floors at HX's engine: cells 0.00 -> 0.97-1.00
    # since a line runs on into the next only where its next word would not have fitted (unruled._wrapped), and a
    # header row in a text face names a table of monospaced identifiers (unruled._text_header)
    "tables_dev/octave_p916": Floor(0.56, 0.98, None, 1, 0.97, 0, None, None),
    "tables_dev/octave_p1033": Floor(0.74, 1.00, None, 1, 1.00, 0, None, None),
    "tables_dev/rintro_p42": Floor(2.84, 1.00, None, 2, 1.00, 0, None, None),
    "tables_dev/rexts_p199": Floor(2.32, 1.00, None, 0, 1.00, 0, None, None),
    # pgfplotstable's tables of figures with no rule (issue 34, text-path tables), floors at HA's engine (cells p5 0.00
    # -> 0.91 since figures set in a math font are figures and two tables sharing a key column part; the four cells
    # lost are `2.62 · 105` and `1.05 · 106`, whose exponents the text layer reads as words of their own)
    "tables_dev/pgfplotstable_p5": Floor(7.68, 0.96, None, 0, 0.90, 0, None, None),
    "tables_dev/pgfplotstable_p10": Floor(13.16, 0.95, None, 1, 0.95, 0, None, None),
    # the dev side of pdf-data-parser's government tables (issue 34; the other five are held out whole, tables-gov),
    # at e78aac3, the USGS's printed web page since its cells boxed apart make one grid (tables._facing: cells 0.00 ->
    # 1.00); the presidential results' grid reads whole
    "tables_dev/gnis_file_formats": Floor(0.11, 1.00, None, 0, 1.00, 0, None, None),
    "tables_dev/gov_presidential_results_2024": Floor(0.33, 1.00, None, 1, 1.00, 0, None, None),
    # texlive-publishers-doc's paper samples (issue 34, tables in one column and tables boxed as figures, read from
    # pixels), measured at 587948e with HC's pixel-path change (`--groups tables-dev --files acmart confproc pmlr
    # --tools modelhost --floors modelhost`); the text path is unchanged by it. acmart p3's two cells lost are `𝜋`
    # and `Ψ2 1`, set in a math font
    # CER at most 33.50 since a0601bd reads its math italic letters (beyond Unicode's BMP): more of the page's prose
    # read, against a reference that holds only its tables (cells 12 -> 13 of 14: the `π` cell)
    "tables_dev/acmart_sigconf_p3": Floor(33.50, 0.94, None, 6, 0.85, 0, None, None),
    "tables_dev/acmart_sigconf_p4": Floor(41.24, 1.00, None, 3, 1.00, 0, None, None),
    # false headings 9 -> 10 since classify.sections (HC, session 14) leaves a run of headings only where they are
    # set alike: this page's author block reads as paragraphs crossing both its columns, each of two faces, and the
    # old chunk rule's accident (it kept every other one of a run) no longer takes "Jøhn Joe" with its neighbour
    # its authors' block, three names side by side over their affiliations, is read by line since order._one_line
    # (the names' tops a hair apart; HE, session 17): one name stands alone as a heading (10 -> 11 false; its
    # reference holds the table only)
    "tables_dev/confproc_p009": Floor(62.79, 1.00, None, 11, 1.00, 0, None, None),
    "tables_dev/pmlr_sample_p4": Floor(10.13, 1.00, None, 1, 1.00, 0, None, None),
    # texlive-publishers-doc's REVTeX, OUP and AASTeX samples (issue 34, tables on scanned paper pages), the text path
    # at 29e1858 (`--groups tables-dev --files revtex_apssamp oup_template aastex_sample631 --tools modelhost --floors
    # modelhost`): oup loses its group names spanning three columns each (written once), revtex p5 Table II's `D1 4h`
    # names (`D` apart from `1 4h`) and two rows parted where a footnote mark stands raised
    "tables_dev/aastex_sample631_p6": Floor(4.94, 1.00, None, 3, 1.00, 0, None, None),
    # Table 2's group names each over three columns with a rule under them span those columns
    # (unruled._ruled_under, HB): cells 0.85 -> 1.00, word recall 0.83 -> 1.00, CER 14.80 -> 14.89
    # its algorithm's line numbers read before their formulas since order._one_line (HE, session 17): CER against a
    # reference of the table only 14.89 -> 14.91, false headings 4 -> 3
    "tables_dev/oup_template_p3": Floor(14.91, 1.00, None, 3, 1.00, 0, None, None),
    "tables_dev/revtex_apssamp_p4": Floor(47.34, 1.00, None, 3, 1.00, 0, None, None),
    "tables_dev/revtex_apssamp_p5": Floor(3.32, 0.97, None, 6, 0.96, 0, None, None),
    # long lists without rules (issue 34, text-path tables), floors at HA's engine, which reads all three whole (as
    # its parent did; pymupdf4llm 0.00, 0.99, 1.00): a list in two blocks side by side with no header, one table in two
    # halves under a repeated header, a two-column list of multi-word cells
    "tables_dev/phonenumbers_p95": Floor(0.64, 1.00, None, 0, 1.00, 0, None, None),
    "tables_dev/glpk_graphs_p33": Floor(1.00, 1.00, None, 4, 1.00, 0, None, None),
    "tables_dev/datatool_sort_p2": Floor(0.02, 1.00, None, 1, 1.00, 0, None, None),
    # the IRS's tax table (issue 34, statistical tables; pymupdf4llm 0.21): the vertical rules drawn as short wide
    # strokes and broken for 3 points between blocks of rows, the labels' box and its short rules read, the two
    # tables side by side parted (cells 0.01 -> 0.97)
    "tables_dev/irs_i1040nr_p45": Floor(0.15, 0.96, None, 2, 0.96, 0, None, None),
    # report and government grids from PyMuPDF 2.1's sdist (issue 34, the held-out tables-gov's kinds on the text
    # path), measured with HA's engine (`--groups tables-dev --files dotted_gridlines tdr_modifications
    # hydrogen_projects_a1 clo_deal_summary --tools modelhost --floors modelhost`): the grid ruled in dashes reads whole
    # (cells 0.12 -> 1.00: tables.dotted_rules, _blocks); the deal summary's panels of striped rows without rules
    # stay mostly unread (pymupdf4llm 0.84)
    "tables_dev/dotted_gridlines": Floor(0.01, 1.00, None, 0, 1.00, 0, None, None),
    # the statement's row rules broken at its column of rates are whole rules (tables._broken_rows): header and body
    # one table, no row spanning (cells 0.87 -> 0.93, false tables and headings 1 -> 0; CER 1.38 -> 1.39, the one
    # table's Markdown against a reference of its cells)
    "tables_dev/tdr_modifications": Floor(1.39, 1.00, None, 0, 0.93, 0, None, None),
    "tables_dev/hydrogen_projects_a1": Floor(0.07, 1.00, None, 3, 1.00, 0, None, None),
    # its panels' titles, each over a rule under its panel's columns, span those columns (unruled._ruled_under,
    # HB): CER 0.61 -> 0.71 (a span written in each column it covers), cells unchanged
    "tables_dev/clo_deal_summary": Floor(0.71, 1.00, None, 12, 0.44, 0, None, None),
    # an InDesign report's tables ruled across under every row, beside columns of prose (issue 34, the held-out
    # tables-gov's kind, text path; HA, measured with `--groups tables-dev --files amazon_sustainability --tools
    # modelhost --floors modelhost`): their references hold the whole page, so CER and headings count here
    "tables_dev/amazon_sustainability_p12": Floor(0.03, 0.99, 1.00, 1, 1.00, 0, 0.93, 0.00),
    "tables_dev/amazon_sustainability_p24": Floor(0.04, 1.00, 1.00, 1, 1.00, 0, 1.00, 0.00),
    "tables_dev/amazon_sustainability_p44": Floor(0.06, 0.98, 1.00, 1, 1.00, 0, 0.87, None),
    # paper pages with no table or one (issue 34, false tables and headings, text path): numbered equations, an
    # algorithm's small line numbers, a body face bold by its StemV alone; measured with `--groups tables-dev --files
    # revtex42 algorithm2e_p15 zoo_p3 --tools modelhost --floors modelhost`. A page with no table has no reference
    # text: its CER floor is 1.00 and its word recall 1.00 (the scores of any output against an empty reference)
    "tables_dev/algorithm2e_p15": Floor(1.00, 1.00, None, 0, None, 0, None, None),
    "tables_dev/revtex42_aapmsamp_p2": Floor(1.00, 1.00, None, 2, None, 0, None, None),
    "tables_dev/revtex42_apssamp_p4": Floor(46.48, 1.00, None, 2, 1.00, 0, None, None),
    "tables_dev/zoo_p3": Floor(1.00, 1.00, None, 0, None, 0, None, None),
    # an InDesign report's table under a header band spanning columns (issue 34, the held-out tables-rival's kind;
    # HB, measured with `--groups tables-dev --files who_hcv --tools modelhost --floors modelhost`): the band's two
    # header rows read as one (cells 0.60; pymupdf4llm 0.70)
    "tables_dev/who_hcv_guidelines_p44": Floor(3.12, 1.00, None, 2, 0.60, 0, None, None),
    # a form's boxes of fields and tables under their own titles (issue 34, the held-out tables-fresh's kinds; HE's
    # pages, re-added by HH with the form read from its rules on the text layer only, measured with `--groups
    # tables-dev --files img2table va_form dd_form --tools modelhost --floors modelhost`): whole-page references; the
    # img2table pages' two titled grids still read as one table (1/2, cells 0.50) and their false headings allow 2,
    # as 71091fb's `analyse._titled_apart` (two titled tables in one region kept two) reads their second title
    "tables_dev/dd_form_293_p1": Floor(0.19, 1.00, 0.50, 5, None, 0, 0.74, 1.00),
    "tables_dev/img2table_tables_p1": Floor(0.09, 0.92, None, 2, 0.50, 0, 0.00, None),
    "tables_dev/img2table_tables_p2": Floor(0.09, 0.93, None, 2, 0.50, 0, 0.00, None),
    "tables_dev/va_form_210966_p1": Floor(0.26, 1.00, 1.00, 1, None, 0, 0.89, 1.00),
    # documents written in LibreOffice Writer 7.4 (issue 34, the held-out groups' Word producers; HT, session 16,
    # measured at 66c2ef1 with `--groups tables-dev --files writer_ --tools modelhost --floors modelhost`):
    # whole-page references. writer_scripts_twocol's table in the right column of a two-column section is not found
    # (cells 0.33; pymupdf4llm 0.98). The invoice's borderless layout table of address blocks was a false table
    # (CER 0.18) and the memo's values came before their bold labels (CER 0.03) until analyse._keyed_beside and
    # order._one_line (HE, session 17): both 0.00
    "tables_dev/writer_builtins_landscape": Floor(0.01, 0.98, 1.00, 0, 0.96, 0, 1.00, None),
    "tables_dev/writer_country_codes": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/writer_currency_memo": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/writer_errno_tabs": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/writer_http_status": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, 1.00),
    "tables_dev/writer_invoice": Floor(0.01, 1.00, 1.00, 1, 1.00, 0, 1.00, 1.00),
    # its caption under the table stays after it since analyse._captioned takes a table's caption only from above
    # (CER 0.12 -> 0.00; HC, session 17)
    "tables_dev/writer_language_codes": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    # read column by column since order._bands tries the coverage's valleys (a title and footnotes cross the
    # section's gutter): CER 0.46 -> 0.00, measured at 86cd8e1 with its order.py
    # its `No.` column, flush right 4 points from `Script` flush left, is a column of its own since
    # tables.aligned_starts (cells 0.33 -> 0.98; HB, session 17)
    "tables_dev/writer_scripts_twocol": Floor(0.01, 0.98, 1.00, 0, 0.98, 0, 0.81, 1.00),
    # columns flush right or centred a word space from columns flush left (issue 34; HB, session 17, measured with
    # `--groups tables-dev --files writer_signals writer_exit writer_order writer_ascii --tools modelhost --floors
    # modelhost` with tables.aligned_starts; before it the three with such a gap read cells 0.33, 0.52 and 0.34)
    "tables_dev/writer_ascii_punctuation": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/writer_exit_status": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/writer_order_lines": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/writer_signals_norules": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, 1.00),
    # a word processor's layout tables and label/value lines (issue 34; HE, session 17, measured at 9e5cc2d with
    # `--groups tables-dev --files writer3_ --tools modelhost --floors modelhost`): whole-page references. Since
    # analyse._keyed_beside (a layout table read as text, block by block) and order._one_line (a label before
    # its value): CER 0.15/0.18/0.14 -> 0.06/0.00/0.00 (letter, order, sheet), false tables 3 -> 0; the letter's
    # signature block of two cells side by side, no table, is still read by line across both
    "tables_dev/writer3_letter": Floor(0.06, 1.00, 1.00, 1, None, 0, 1.00, None),
    "tables_dev/writer3_memo_closures": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/writer3_project_sheet": Floor(0.01, 1.00, 1.00, 0, None, 0, 1.00, 1.00),
    "tables_dev/writer3_purchase_order": Floor(0.01, 1.00, 1.00, 2, 1.00, 0, 1.00, None),
    # spreadsheets exported by LibreOffice Calc (issue 34, the held-out groups' office producers; HP, session 16,
    # measured with `--groups tables-dev --files calc_ --tools modelhost --floors modelhost`): whole-page references.
    # calc_fertility_wide's sheet prints Calc's cell gridlines, which box its title, units line and notes too: read
    # as the grid's spanning rows, each written in all nine columns, until tables._edge_rows (CER 1.22 -> 0.00)
    "tables_dev/calc_bls_employment": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/calc_fertility_wide": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/calc_grunfeld_1954": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/calc_grunfeld_investment": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/calc_iowa_electricity": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    # a header band of wrapped names read from its text lines (unruled._band; HA, session 17): calc_macro_quarterly
    # CER 0.11 -> 0.00, cells 0.87 -> 1.00; calc_state_crime CER 0.09 -> 0.00, cells 0.99 -> 1.00
    "tables_dev/calc_macro_quarterly": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/calc_state_crime": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    # more sheets of that class (HA, session 17; at 7af359f, before unruled._band: longley CER 0.01, seattle 0.07 and
    # cells 0.94, danish 0.06 with its header lost as a false heading and loose lines, crimea 0.02 and cells 0.97)
    "tables_dev/calc_crimea_deaths": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/calc_danish_money": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/calc_longley_employment": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/calc_seattle_weather": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    # office exports of a second round (issue 34; HC, session 17, measured at 7af359f with `--groups tables-dev
    # --files calc2_ writer2_ impress_ --tools modelhost --floors modelhost`): whole-page references.
    # writer2_unicode_report's caption, set under its table, was written above it (CER 0.11; pymupdf4llm 0.00) until
    # analyse._captioned took a table's caption only from above (0.00); impress_tz_briefing's slide title wrapped onto
    # two lines is read as two paragraphs (headings 3/4); the income statement's period and unit lines become one
    # false heading
    "tables_dev/calc2_elements": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/calc2_europe_merged": Floor(0.01, 1.00, 1.00, 0, 1.00, 0, 1.00, None),
    "tables_dev/calc2_tz_offsets": Floor(0.01, 1.00, 1.00, 0, 0.97, 0, 1.00, None),
    "tables_dev/impress_tz_briefing": Floor(0.01, 1.00, 0.75, 0, 1.00, 0, 1.00, 0.50),
    "tables_dev/writer2_income_statement": Floor(0.01, 1.00, 1.00, 1, 1.00, 0, 1.00, None),
    "tables_dev/writer2_unicode_report": Floor(0.01, 0.99, 1.00, 0, 1.00, 0, 0.88, None),
}

#: The image-only files, read by PIXEL_ENGINE. Measured at e1b22e6 (`--tools modelhost --floors modelhost`): CER 0.00
#: on the OCR sheet at every rotation. One character of slack over that (CER 0.02, word recall 0.98): onnxruntime's
#: sums may round differently with another thread count, and OCR turns that into a character now and then.
IMAGE_FLOORS: dict[str, Floor] = {
    "pdfspec/scanned": Floor(0.07, 0.98, None, 1, None, 0, 1.00),
    "ocr/ocr_test": Floor(0.02, 0.98, None, 0, None, 0, 1.00),
    "ocr/ocr_test_rotated_90": Floor(0.02, 0.98, None, 0, None, 0, 1.00),
    "ocr/ocr_test_rotated_180": Floor(0.02, 0.98, None, 0, None, 0, 1.00),
    "ocr/ocr_test_rotated_270": Floor(0.02, 0.98, None, 0, None, 0, 1.00),
    # added with issue 34: measured at c06f74d (`--files scan_ nemotron --tools modelhost --floors modelhost`), with
    # the OCR sheets' one character of slack (CER +0.01, word recall -0.01)
    "scan/scan_2305.03393v1-pg9": Floor(0.08, 0.98, 1.00, 0, 0.60, 0, 0.92, 1.00),
    "scan/scan_amt_handbook_sample": Floor(0.65, 0.98, 0.66, 0, None, 0, 0.88, 1.00),
    "scan/scan_table_mislabeled_as_picture": Floor(0.12, 0.95, None, 1, 0.00, 0, 0.90, None),
    "ocr/nemotron_multipage": Floor(0.31, 0.87, None, 0, None, 0, 0.00, None),
    # dev scans of dev pages with tables (78362e3), measured at ff0cf8b (`--files scan_redp scan_normal scan_pdfspec
    # --groups scan --tools modelhost --floors modelhost`), with the OCR sheets' one character of slack
    "scan/scan_normal_4pages_p2": Floor(0.13, 0.84, 0.75, 4, 0.20, 0, 0.21, 1.00),
    "scan/scan_pdfspec_table": Floor(0.02, 0.99, None, 0, 1.00, 0, None, None),
    "scan/scan_redp5110_sampled_p11": Floor(0.17, 0.97, 1.00, 0, 1.00, 0, 0.61, None),
    "scan/scan_redp5110_sampled_p12": Floor(0.06, 0.96, 1.00, 0, 1.00, 0, 0.94, None),
    # raised with the pixel path's regions boxed twice read as one and captions boxed as titles read as captions
    # (issue 34, pixels.TWICE_BOXED): sentences whole 8/10 -> 9/10, CER 0.17 -> 0.14
    "scan/scan_redp5110_sampled_p8": Floor(0.16, 0.96, 1.00, 0, 0.75, 0, 0.90, 0.50),
    "scan/scan_redp5110_sampled_p9": Floor(0.05, 0.97, None, 0, 0.89, 0, 1.00, None),
    # dev scans of four tables_dev pages (scored in tables-dev: their references hold only the tables, so CER counts
    # the prose), measured at 5b91c6b (`--files scan_tablesdev --tools modelhost --floors modelhost`), with the OCR
    # sheets' slack (CER +0.01, word and cell recall -0.01)
    "scan/scan_tablesdev_lme4_lmer_p30": Floor(0.08, 0.98, None, 0, 0.95, 0, None, None),
    "scan/scan_tablesdev_pscl_countreg_p17": Floor(0.34, 0.98, None, 0, 0.28, 0, None, None),
    "scan/scan_tablesdev_sandwich_cl_p22": Floor(4.61, 0.89, None, 9, 0.00, 0, None, None),
    "scan/scan_tablesdev_xtable_gallery_p7": Floor(3.53, 0.99, None, 3, 0.98, 3, None, None),
    # scans of the four texinfo tables with no rule at all (issue 34, tables read from pixels), measured at e763bbd
    # (`--files scan_tablesdev_octave scan_tablesdev_rintro scan_tablesdev_rexts --tools modelhost --floors
    # modelhost`), with the same slack; raised with the figure that draws nothing read as a table (issue 34,
    # scantable.unruled_figure: cells 0/63 -> 63/63 and 0/96 -> 94/96, `--tools modelhost-pixels --groups tables-dev`)
    "scan/scan_tablesdev_octave_p1033": Floor(0.74, 0.99, None, 1, 0.99, 0, None, None),
    "scan/scan_tablesdev_octave_p916": Floor(0.59, 0.98, None, 1, 0.96, 0, None, None),
    "scan/scan_tablesdev_rexts_p199": Floor(2.11, 0.99, None, 0, 0.99, 0, None, None),
    "scan/scan_tablesdev_rintro_p42": Floor(2.89, 0.99, None, 2, 0.95, 0, None, None),
    # dev scans added for issue 34 (tables and reading order read from pixels): the dev arXiv paper's two-column pages
    # and coin's captioned booktabs table, measured at 0c49bc2 (bench/documents_quality.py's scoring and `floors`,
    # `--tools modelhost`), with the same slack
    "scan/scan_arxiv_2501.00089_p1-3": Floor(0.24, 0.97, 0.77, 1, None, 0, 0.67, 0.50),
    "scan/scan_tablesdev_coin_maxtest_p3": Floor(12.66, 0.99, None, 1, 0.99, 0, None, None),
    # scans of the four paper pages above (issue 34), measured the same way, with the same slack: pmlr's table set
    # tight with no rule, boxed as a figure and as text, is a table (cells 10/20 -> 20/20); confproc's small grid, its
    # body rows unruled and its first column stacked fractions, still reads its body as one row
    "scan/scan_tablesdev_acmart_sigconf_p3": Floor(33.11, 0.96, None, 7, 0.84, 0, None, None),
    "scan/scan_tablesdev_acmart_sigconf_p4": Floor(41.18, 0.99, None, 3, 0.99, 0, None, None),
    "scan/scan_tablesdev_confproc_p009": Floor(57.54, 0.77, None, 7, 0.19, 1, None, None),
    "scan/scan_tablesdev_pmlr_sample_p4": Floor(10.09, 0.99, None, 1, 0.99, 0, None, None),
    # their scans (issue 34, tables on scanned paper pages), measured the same way with the pixel path's table frames
    # from the layout model's table regions (pixels._frames) and frames read whole (scantable.completed), with the
    # same slack: Table III's header row, read as headings before, and the AASTeX table's ten rows under its
    # three-line header, a table apart before, are rows of their tables
    "scan/scan_tablesdev_aastex_sample631_p6": Floor(4.96, 0.99, None, 1, 0.99, 0, None, None),
    "scan/scan_tablesdev_oup_template_p3": Floor(14.56, 0.99, None, 2, 0.99, 0, None, None),
    "scan/scan_tablesdev_revtex_apssamp_p4": Floor(45.62, 0.99, None, 3, 0.99, 0, None, None),
    "scan/scan_tablesdev_revtex_apssamp_p5": Floor(3.30, 0.95, None, 0, 0.95, 0, None, None),
    # scans of eight report and government grids of tables_dev (issue 34, the pixel path on tables-gov's kinds),
    # measured at 08ac13f with the same slack (`--groups tables-dev --files scan_tablesdev_... --tools modelhost
    # --floors modelhost`); hydrogen_projects_a1 re-measured at 4a0716a without f5abb34's frame joining, which was
    # taken back for a held-out regression (its cells 0.87 rested on it)
    # (clo_deal_summary re-measured at 57b42f4, after bfb7ed6's stacks of rules across, which HC's row predates: its
    # panels' rules now make more of its cells, 0.04 -> 0.07, and a panel's title is a third heading)
    "scan/scan_tablesdev_clo_deal_summary": Floor(0.77, 0.98, None, 3, 0.06, 0, None, None),
    "scan/scan_tablesdev_dotted_gridlines": Floor(0.48, 0.88, None, 2, 0.00, 0, None, None),
    "scan/scan_tablesdev_gnis_file_formats": Floor(0.14, 0.99, None, 0, 0.99, 0, None, None),
    "scan/scan_tablesdev_gov_presidential_results_2024": Floor(0.34, 0.99, None, 0, 0.99, 0, None, None),
    "scan/scan_tablesdev_hydrogen_projects_a1": Floor(0.36, 0.87, None, 1, 0.65, 0, None, None),
    "scan/scan_tablesdev_irs_i1040nr_p45": Floor(0.58, 0.91, None, 1, 0.00, 0, None, None),
    "scan/scan_tablesdev_tdr_modifications": Floor(1.42, 0.99, None, 0, 0.70, 0, None, None),
    "scan/scan_tablesdev_usda_ag_energy_roundup": Floor(0.90, 0.99, None, 0, 0.50, 0, None, None),
}

#: Every corpus file but those of a group held out whole (doccorpus.HELD_OUT_GROUPS): a per-file floor is set by
#: reading that file's scores, which such a group exists to keep unread; the benchmark measures it as a split.
ENTRIES = [e for e in doccorpus.entries() if e.group not in doccorpus.HELD_OUT_GROUPS]


class Engines:
    """Each engine started on first use and closed at the end of the module (the pixel path loads its models)."""

    def __init__(self) -> None:
        self.started: dict[type[doctools.Tool], doctools.Tool] = {}

    def get(self, kind: type[doctools.Tool]) -> doctools.Tool:
        if kind not in self.started:
            tool = kind()
            tool.start()
            self.started[kind] = tool
        return self.started[kind]

    def close(self) -> None:
        for tool in self.started.values():
            tool.close()


@pytest.fixture(scope="module")
def engines() -> Iterator[Engines]:
    pool = Engines()
    try:
        yield pool
    finally:
        pool.close()


def test_every_corpus_file_has_floors() -> None:
    assert not set(FLOORS) & set(IMAGE_FLOORS)
    assert sorted([*FLOORS, *IMAGE_FLOORS]) == sorted(e.name for e in ENTRIES)


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
    if floor.level_agreement is not None and (heads.level_agreement or 0.0) < floor.level_agreement:
        out.append(f"heading level agreement {heads.level_agreement} < {floor.level_agreement}")
    if floor.order is not None and (order.share or 0.0) < floor.order:
        out.append(f"sentences whole {order.whole}/{order.total} < {floor.order}")
    return out


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_corpus_file_stays_at_or_above_its_floors(engines: Engines, entry: doccorpus.Entry) -> None:
    if entry.name in IMAGE_FLOORS:
        floor, engine = IMAGE_FLOORS[entry.name], engines.get(PIXEL_ENGINE)
    elif entry.name in FLOORS:
        floor, engine = FLOORS[entry.name], engines.get(TEXT_ENGINE)
    else:
        pytest.fail(f"{entry.name}: no floors (add its row to FLOORS or IMAGE_FLOORS)")
    got = docmetrics.score(engine.convert(entry.pdf), entry.reference())
    shortfalls = _shortfalls(got, floor)
    assert not shortfalls, f"{entry.name}: " + "; ".join(shortfalls)

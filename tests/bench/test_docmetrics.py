"""The document measures (bench/docmetrics.py) on small hand-made cases whose right answer is known.

Three engineers tune the document engine against these numbers, so each measure is pinned where it is easy to get
wrong: Markdown syntax must not count as text, a two-column page read straight across must score low on order, a
dropped or merged cell must lower cell recall, a heading emitted as plain text must not be found.
"""

from __future__ import annotations

import pytest

import docmetrics
from docmetrics import Heading

# Two columns of three lines each. Read down each column, the sentences come out whole; read straight across
# (line 1 of the left column, then line 1 of the right one, ...), every sentence is cut by the other column.
LEFT = [
    "The bearing is clamped between two",
    "plates so that it cannot move while",
    "the load is applied to the shaft.",
]
RIGHT = [
    "The most common ranges in size are",
    "listed in the table below together",
    "with the tolerances of each class.",
]
REFERENCE_COLUMNS = " ".join(LEFT) + "\n\n" + " ".join(RIGHT)


def test_markdown_syntax_is_stripped_and_its_text_kept() -> None:
    markdown = (
        "# The *Title*\n\n"
        "Some **bold** and _slanted_ text with [a link](http://example.com/x) and `code`.\n\n"
        "<!-- image -->\n\n"
        "- item one\n- item two\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "Physics &amp; Astronomy, snake\\_case, ~~struck~~\n"
    )
    parsed = docmetrics.parse_markdown(markdown)
    assert parsed.text == (
        "The Title Some bold and slanted text with a link and code. item one item two a b 1 2 "
        "Physics & Astronomy, snake_case, struck"
    )
    assert parsed.headings == [Heading("The Title", 1)]
    assert parsed.tables == [[["a", "b"], ["1", "2"]]]
    assert "<!--" not in parsed.text and "http" not in parsed.text


def test_a_line_break_tag_separates_words_and_other_tags_vanish() -> None:
    parsed = docmetrics.parse_markdown("| top<br>bottom | x<sup>2</sup> |\n|---|---|\n| a | b |\n")
    assert parsed.tables[0][0] == ["top bottom", "x2"]


def test_plain_text_parses_as_paragraphs() -> None:
    parsed = docmetrics.parse_markdown("first line\nsecond line\n\nnext paragraph\n")
    assert parsed.paragraphs == ["first line second line", "next paragraph"]
    assert parsed.headings == [] and parsed.tables == []


def test_a_bare_hash_line_is_no_heading() -> None:
    assert docmetrics.parse_markdown("#\n\ntext\n").headings == []


def test_cer_counts_edits_per_reference_character() -> None:
    assert docmetrics.cer("abcdefghij", "abcdefghij") == 0.0
    assert docmetrics.cer("abcdefghiX", "abcdefghij") == pytest.approx(0.1)
    assert docmetrics.cer("", "abcde") == 1.0
    assert docmetrics.cer("", "") == 0.0
    # typography and white space are not errors: curly quotes, en dashes, line breaks, ligatures
    assert docmetrics.cer("\u201cit\u2019s\u201d 1\u20132\n\ufb01ne", '"it\'s" 1-2 fine') == 0.0


def test_word_recall_counts_multiplicity_and_ignores_order() -> None:
    assert docmetrics.word_recall("cat the the", "the the cat") == 1.0
    assert docmetrics.word_recall("the cat", "the the cat") == pytest.approx(2 / 3)
    # hyphenation left in breaks the word: "Ef- fects" does not contain "effects"
    assert docmetrics.word_recall("Ef- fects of depth", "Effects of depth") == pytest.approx(2 / 3)


def test_two_columns_read_straight_across_score_low_order() -> None:
    reference = docmetrics.parse_markdown(REFERENCE_COLUMNS)
    sentences = docmetrics.sentences(reference.paragraphs)
    assert len(sentences) == 2
    down = "\n".join(LEFT) + "\n\n" + "\n".join(RIGHT)
    across = "\n".join(f"{a} {b}" for a, b in zip(LEFT, RIGHT, strict=True))
    assert docmetrics.order(down, sentences).share == 1.0
    straight = docmetrics.order(across, sentences)
    assert straight.share == 0.0 and straight.broken == sentences
    # every word is still there, so only order (and CER) can tell the two readings apart
    assert docmetrics.word_recall(across, reference.text) == 1.0
    assert docmetrics.cer(across, reference.text) > 0.3 > docmetrics.cer(down, reference.text)


def test_order_needs_each_sentence_in_one_piece_and_skips_short_ones() -> None:
    sentences = docmetrics.sentences(["Short one. This sentence has quite a few words in it. Another short."])
    assert sentences == ["This sentence has quite a few words in it."]
    assert docmetrics.order("This sentence has quite a few words in it", sentences).whole == 1
    assert docmetrics.order("This sentence has quite a page 3 few words in it", sentences).whole == 0
    assert docmetrics.order("anything", []).share is None


REF_TABLE = [["Header A", "Header B", "Header C"], ["Cell A1", "Cell B1", "Cell C1"], ["Cell A2", "Cell B2", "Cell C2"]]


def test_a_table_with_every_cell_is_found_whole() -> None:
    score = docmetrics.tables([REF_TABLE], [REF_TABLE])
    assert (score.cells_found, score.cells_total, score.found, score.false) == (9, 9, 1, 0)
    assert score.cell_recall == 1.0


def test_a_dropped_cell_lowers_cell_recall() -> None:
    dropped = [row[:] for row in REF_TABLE]
    dropped[2][1] = ""
    score = docmetrics.tables([dropped], [REF_TABLE])
    assert score.cell_recall == pytest.approx(8 / 9)
    assert score.found == 1


def test_columns_merged_into_one_cell_are_not_found() -> None:
    merged = [[" ".join(row[:2]), row[2]] for row in REF_TABLE]
    score = docmetrics.tables([merged], [REF_TABLE])
    assert score.cell_recall == pytest.approx(3 / 9)
    assert score.found == 0  # under half of its cells: glimpsed, not found


def test_a_table_emitted_as_text_is_not_found_and_a_table_from_nothing_is_false() -> None:
    assert docmetrics.tables([], [REF_TABLE]).cell_recall == 0.0
    false_table = [["two columns", "read as a table"], ["of body", "text"]]
    score = docmetrics.tables([false_table, REF_TABLE], [REF_TABLE])
    assert (score.found, score.false, score.cell_recall) == (1, 1, 1.0)
    assert docmetrics.tables([false_table], []).cell_recall is None


def test_table_cells_match_by_words_not_dot_leaders_or_case() -> None:
    ref = [["Notices . . . . . . . .", ". vii"]]
    out = [["NOTICES ....", "vii"]]
    assert docmetrics.tables(out, ref).cell_recall == 1.0


def test_a_heading_emitted_as_plain_text_is_not_found() -> None:
    reference = docmetrics.parse_markdown("# Introduction\n\nBody text.\n").headings
    plain = docmetrics.parse_markdown("Introduction\n\nBody text.\n").headings
    score = docmetrics.headings(plain, reference)
    assert (score.found, score.total, score.false) == (0, 1, 0)
    assert score.missed == ["Introduction"]


def test_headings_match_despite_a_level_offset_and_count_false_ones() -> None:
    reference = [Heading("1 Introduction", 1), Heading("1.1 Scope", 2)]
    output = [Heading("1 Introduction", 2), Heading("Table 3 row", 2), Heading("1.1 Scope", 3)]
    score = docmetrics.headings(output, reference)
    assert (score.found, score.false, score.level_agreement) == (2, 1, 1.0)
    assert score.spurious == ["Table 3 row"]


def test_level_agreement_compares_steps_between_consecutive_headings() -> None:
    reference = [Heading("A", 1), Heading("B", 2), Heading("C", 2), Heading("D", 1)]
    flat = [Heading("A", 1), Heading("B", 1), Heading("C", 2), Heading("D", 1)]
    # reference steps: deeper, same, shallower; output's: same, deeper, shallower -> one of three agrees
    assert docmetrics.headings(flat, reference).level_agreement == pytest.approx(1 / 3)
    assert docmetrics.headings(flat[:1], reference).level_agreement is None


def test_a_heading_is_matched_at_most_once() -> None:
    reference = [Heading("Results", 2)]
    output = [Heading("Results", 2), Heading("Results", 2)]
    score = docmetrics.headings(output, reference)
    assert (score.found, score.false) == (1, 1)


def test_a_different_heading_is_not_a_near_match() -> None:
    score = docmetrics.headings([Heading("Related results", 1)], [Heading("Results", 1)])
    assert score.found == 0

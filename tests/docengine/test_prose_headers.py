"""A paragraph taken for a table's header rows goes back to the text (analyse._without_prose_header).

Found in a sweep of registry PDFs (a two-column security paper, a French wind-farm study): the table finder without
rules stacked a column's paragraph, ten lines and three, into a "header" over one or two rows that happened to line
up (a run-in heading level with the other column's line), and the paragraphs came out as cells. A column's label
wraps into a line or two of a few words; three lines of a sentence's stretch in one header cell are a paragraph.
Control: a table whose header labels wrap into two lines keeps them.
"""

from __future__ import annotations

from modelhost.docengine.analyse import _without_prose_header
from modelhost.docengine.tables import FoundTable
from modelhost.docengine.types import Cell, Table, Word

SENTENCE = ["the", "client", "and", "server", "have", "different", "transcripts", "at", "this", "stage"]


def _line(words: list[str], x: float, y: float, line: int) -> list[Word]:
    out, at = [], x
    for text in words:
        width = 5.0 * len(text)
        out.append(Word(text, (at, y, at + width, y + 9), font="Times-Roman", size=9.0, line=line))
        at += width + 3
    return out


def _table(header_lines: list[list[str]], rows: list[tuple[str, str]]) -> tuple[FoundTable, list[Word]]:
    """A two-column table: one header cell over the first column holding `header_lines`, a short label over the
    second, then `rows` (a name and a figure each)."""
    words: list[Word] = []
    y = 100.0
    for k, line in enumerate(header_lines):
        words += _line(line, 60, y, k)
        y += 11
    words += _line(["Share"], 400, 100, 50)
    head_box = (58.0, 98.0, 390.0, y)
    cells = [
        Cell(0, 0, " ".join(" ".join(line) for line in header_lines), header=True, bbox=head_box),
        Cell(0, 1, "Share", header=True, bbox=(390.0, 98.0, 450.0, y)),
    ]
    for r, (name, figure) in enumerate(rows, start=1):
        words += _line([name], 60, y + 2, 100 + r)
        words += _line([figure], 400, y + 2, 100 + r)
        cells += [Cell(r, 0, name, bbox=(58.0, y, 390.0, y + 12)), Cell(r, 1, figure, bbox=(390.0, y, 450.0, y + 12))]
        y += 12
    table = Table(rows=len(rows) + 1, cols=2, cells=tuple(cells))
    return FoundTable((58.0, 98.0, 450.0, y), table, frozenset(range(len(words)))), words


ROWS = [("Apache", "82%"), ("nginx", "10%"), ("others", "8%")]


def test_a_paragraph_over_a_table_goes_back_to_the_text() -> None:
    found, words = _table([SENTENCE, SENTENCE, SENTENCE], ROWS)
    kept = _without_prose_header(found, words)
    assert kept is not None and kept.table.rows == 3
    assert [c.text for c in kept.table.cells if c.col == 0] == ["Apache", "nginx", "others"]
    assert all(not words[i].text.startswith("transcripts") for i in kept.words)
    assert kept.bbox[1] > 98.0 + 3 * 11 - 1  # the box starts at the first row left


def test_a_paragraph_over_too_few_rows_is_no_table() -> None:
    found, words = _table([SENTENCE] * 10, ROWS[:1])
    assert _without_prose_header(found, words) is None


def test_a_label_wrapped_in_two_lines_stays_the_header() -> None:
    found, words = _table(
        [["Percent", "of", "total", "population", "aged"], ["eighteen", "years", "and", "over", "here"]], ROWS
    )
    assert _without_prose_header(found, words) is found

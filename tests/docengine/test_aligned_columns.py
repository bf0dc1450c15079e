"""Columns told apart by their alignment (issue 34, text-path tables): a column of numbers set flush right beside a
column of text set flush left stands as little as a word space from it (Writer's cell padding), so no gap width parts
the two; every row's number ends at one x and every row's text starts at one x, and that parts them
(`tables.aligned_starts`), in a table ruled across only and in one with no rule at all. What stays one cell: a
two-word cell whose first words are one word ("New York" over "New Haven"), a unit after right-aligned figures
("12 kg"), a list's numbers before their items, and justified prose."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost.docengine.types import Kind

from .conftest import corpus, drawn_layout, first_page_layout, table_blocks, table_rows
from .test_unruled_tables import _prose, _right, _text

SIGNALS = [
    ("1", "SIGHUP", "Hangup"),
    ("2", "SIGINT", "Interrupt"),
    ("3", "SIGQUIT", "Quit"),
    ("4", "SIGILL", "Illegal instruction"),
    ("6", "SIGABRT", "Aborted"),
    ("9", "SIGKILL", "Killed"),
    ("11", "SIGSEGV", "Segmentation fault"),
    ("13", "SIGPIPE", "Broken pipe"),
    ("15", "SIGTERM", "Terminated"),
    ("17", "SIGCHLD", "Child exited"),
]


def _numbered(c: object, *, ruled: bool, size: float = 9, top: float = 700) -> None:
    """A table of signals: numbers flush right at x 100, names flush left 3 points after (a word space at 9 pt),
    descriptions a column gap further; a rule under every row where `ruled`."""
    lead = size * 1.6
    _right(c, 100, top, "No.", "Helvetica-Bold", size)
    _text(c, 103, top, "Signal", "Helvetica-Bold", size)
    _text(c, 170, top, "Description", "Helvetica-Bold", size)
    for n, (number, name, text) in enumerate(SIGNALS, start=1):
        y = top - lead * n
        _right(c, 100, y, number, "Helvetica", size)
        _text(c, 103, y, name, "Helvetica", size)
        _text(c, 170, y, text, "Helvetica", size)
    if ruled:
        for n in range(len(SIGNALS) + 1):
            y = top - lead * n - size * 0.45
            c.line(72, y, 330, y)  # type: ignore[attr-defined]
        c.line(72, top + size * 1.1, 330, top + size * 1.1)  # type: ignore[attr-defined]


@pytest.mark.parametrize("ruled", [True, False], ids=["ruled-across", "no-rules"])
def test_flush_right_numbers_beside_flush_left_names_are_two_columns(tmp_path: Path, ruled: bool) -> None:
    layout = drawn_layout(tmp_path / "signals.pdf", lambda c: _numbered(c, ruled=ruled))
    tables = table_blocks(layout)
    assert len(tables) == 1
    rows = table_rows(tables[0])
    assert rows[0] == ["No.", "Signal", "Description"]
    assert rows[1:] == [list(row) for row in SIGNALS]


def test_writer_scripts_number_column_is_its_own() -> None:
    """The Writer page the class was found on: `No.` flush right 4 points from `Script` flush left, rules across."""
    layout = first_page_layout(corpus("tables_dev/writer_scripts_twocol.pdf"))
    (table,) = table_blocks(layout)
    rows = table_rows(table)
    assert rows[0] == ["Code", "No.", "Script"]
    assert rows[1] == ["Arab", "160", "Arabic"]
    assert ["Kana", "411", "Katakana"] in rows


def _cities(c: object) -> None:
    """A table of cities with no rule: a code column, then names of two words flush left whose first word repeats
    ("New York", "New Haven"), then populations flush right with their unit after them ("12 k")."""
    rows = [
        ("NYC", "New York", "8336 k"),
        ("NHV", "New Haven", "135 k"),
        ("NOL", "New Orleans", "383 k"),
        ("NBR", "New Britain", "74 k"),
        ("NRO", "New Rochelle", "79 k"),
    ]
    _text(c, 72, 700, "Code", "Helvetica-Bold", 10)
    _text(c, 130, 700, "City", "Helvetica-Bold", 10)
    _right(c, 300, 700, "Population", "Helvetica-Bold", 10)
    for n, (code, city, people) in enumerate(rows, start=1):
        y = 700 - 15 * n
        _text(c, 72, y, code)
        _text(c, 130, y, city)
        _right(c, 300, y, people)


def test_repeated_first_words_and_units_stay_in_their_cells(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "cities.pdf", _cities)
    (table,) = table_blocks(layout)
    rows = table_rows(table)
    assert rows[0] == ["Code", "City", "Population"]
    assert rows[1] == ["NYC", "New York", "8336 k"]
    assert rows[5] == ["NRO", "New Rochelle", "79 k"]


def _numbered_list(c: object) -> None:
    """A numbered list whose numbers stand flush right one space before their items (a LaTeX list's labels), prose
    around it."""
    y = _prose(c, 72, 760, 90, 4)
    items = [
        "Collect the receipts of the month from every office.",
        "Enter each receipt in the ledger under its account.",
        "Check the totals of the ledger against the bank statement.",
        "Report any difference to the treasurer within a week.",
        "File the receipts in the archive box of the year.",
    ]
    for n, item in enumerate(items, start=1):
        _right(c, 90, y - 14 * n, f"{n}.")
        _text(c, 93, y - 14 * n, item)
    _prose(c, 72, y - 14 * (len(items) + 2), 90, 4, start=60)


def test_numbered_list_stays_a_list(tmp_path: Path) -> None:
    layout = drawn_layout(tmp_path / "list.pdf", _numbered_list)
    assert not table_blocks(layout)
    text = " ".join(b.text for b in layout.blocks if b.kind is not Kind.TABLE)
    assert "Enter each receipt in the ledger under its account." in text

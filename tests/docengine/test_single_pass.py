"""Work a page's reading needs done once, not twice (issue 34, house): the frames a page's rules close and a form's
field boxes among them come from one grouping of the rules (tables.frames_and_fields), and a table read from word
positions joins its wrapped cells once, the join that decided it is a table handed to the block it becomes
(wordtable._read_table, _built). Counted on the helpers that do the work, and the results checked against the
separate calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modelhost.docengine import tables, wordtable
from modelhost.docengine.types import Word

from .conftest import drawn_page
from .test_form_boxes import _form

pytest.importorskip("reportlab")


def _counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Wraps `module.name` so that each call adds to the list returned."""
    calls: list[int] = []
    original = getattr(module, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_a_pages_frames_and_a_forms_fields_come_from_one_grouping_of_its_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    content = drawn_page(tmp_path / "form.pdf", _form)
    frames, fields = (
        tables.rule_frames(content.rulings),
        tables.form_fields(tables._closed_groups(content.rulings), content.words),
    )
    assert frames and fields  # the form's grid is a frame, and its labelled boxes are fields
    grouped = _counted(monkeypatch, tables, "_groups")
    assert tables.frames_and_fields(content.rulings, content.words) == (frames, fields)
    assert len(grouped) == 1


def _table_words() -> list[Word]:
    # Four rows of three cells, the second row's first cell wrapped onto a line set at the leading under it
    rows = [
        (0.0, [(10.0, "Name"), (200.0, "Count"), (300.0, "State")]),
        (20.0, [(10.0, "Alpha project"), (200.0, "12"), (300.0, "open")]),
        (32.0, [(10.0, "in the north")]),
        (52.0, [(10.0, "Beta"), (200.0, "7"), (300.0, "closed")]),
        (72.0, [(10.0, "Gamma"), (200.0, "31"), (300.0, "open")]),
        (92.0, [(10.0, "Delta"), (200.0, "4"), (300.0, "open")]),
    ]
    return [
        Word(text, (x, y, x + 6.0 * len(text), y + 10.0), size=10.0, line=100 * n + c)
        for n, (y, row) in enumerate(rows)
        for c, (x, text) in enumerate(row)
    ]


def test_a_table_read_from_word_positions_joins_its_rows_once(monkeypatch: pytest.MonkeyPatch) -> None:
    words = _table_words()
    joined = _counted(monkeypatch, wordtable, "_joined")
    block = wordtable.table_block(words)
    assert block is not None and block.table is not None
    assert block.table.rows == 5  # the wrapped line is its row's, not a row
    assert len(joined) == 1
    joined.clear()
    (again,) = wordtable.table_blocks(words)
    assert again.table == block.table
    assert len(joined) == 1

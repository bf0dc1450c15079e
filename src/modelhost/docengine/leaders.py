"""Tables of contents: lines that end in dot leaders and a page number, read as a two-column table.

"Notices . . . . . . . vii" is a row of two cells (the entry, its page), which is how docling and a reader see it;
read as text it is a wall of dots. `MIN_ROWS` such lines in a row make a table; fewer are text (one dotted line in a
form is no table of contents).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from modelhost.docengine.types import BBox, Cell, Table, Word

#: Consecutive leader lines that make a table of contents.
MIN_ROWS = 3
#: An entry, at least three leader dots (spaced or not), then a page number (arabic or roman).
_LEADER = re.compile(r"^(?P<entry>.*?\S)\s*(?:\.\s*){3,}(?P<page>\d{1,4}|[ivxlcdm]{1,8})$", re.I)


@dataclass(frozen=True, slots=True)
class Contents:
    """A table of contents found on the page: its box, its two-column table, and the words it took."""

    bbox: BBox
    table: Table
    words: frozenset[int]


def find_contents(lines: Sequence[Sequence[int]], words: Sequence[Word]) -> list[Contents]:
    """Runs of leader lines (each line given as indices into `words`, top to bottom) as tables."""
    found: list[Contents] = []
    run: list[tuple[Sequence[int], str, str]] = []

    def close() -> None:
        if len(run) >= MIN_ROWS:
            found.append(_contents(run, words))
        run.clear()

    for line in lines:
        match = _LEADER.match(" ".join(words[i].text for i in line))
        if match is None:
            close()
            continue
        # The leader dots stay in the entry cell, as printed (and as docling keeps them).
        entry = " ".join(words[i].text for i in line).rsplit(match["page"], 1)[0].strip()
        run.append((line, entry, match["page"]))
    close()
    return found


def _contents(run: list[tuple[Sequence[int], str, str]], words: Sequence[Word]) -> Contents:
    taken = frozenset(i for line, _, _ in run for i in line)
    boxes = [words[i].bbox for i in taken]
    bbox = (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))
    cells = tuple(cell for r, (_, entry, page) in enumerate(run) for cell in (Cell(r, 0, entry), Cell(r, 1, page)))
    return Contents(bbox, Table(len(run), 2, cells), taken)

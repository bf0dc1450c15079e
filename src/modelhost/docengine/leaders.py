"""Tables of contents: lines that end in dot leaders and a page number, read as a two-column table.

"Notices . . . . . . . vii" is a row of two cells (the entry, its page), which is how docling and a reader see it;
read as text it is a wall of dots. `MIN_ROWS` such lines in a row make a table; fewer are text (one dotted line in a
form is no table of contents).

LaTeX sets its contents' section entries without leaders ("1 Foo" then, a tab stop away, "2"), often among
subsection entries with them. A line whose only wide gap (`TAB_EM`) stands before a closing page number is such an
entry, when the run's page numbers end at one right edge (`ALIGN`) and never go down: otherwise each of those bold,
numbered lines read as a section heading of its own (pypdf's pdflatex-outline.pdf, issue 34's probe).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from modelhost.docengine.figures import box_union
from modelhost.docengine.types import BBox, Cell, Table, Word

#: Consecutive leader lines that make a table of contents.
MIN_ROWS = 3
#: An entry, at least three leader dots (spaced or not), then a page number (arabic or roman).
_LEADER = re.compile(r"^(?P<entry>.*?\S)\s*(?:\.\s*){3,}(?P<page>\d{1,4}|[ivxlcdm]{1,8})$", re.I)
#: A page number alone.
_PAGE = re.compile(r"^(?:\d{1,4}|[ivxlcdm]{1,8})$", re.I)
#: The gap (in the entry's font sizes) before a leaderless entry's page number: a tab stop to the right margin, far
#: wider than a justified word space (under 1 em) or a list marker's tab (2-3 em).
TAB_EM = 4.0
#: A leaderless entry stands at most this many font sizes below the row above it (LaTeX: 1.3 for sections).
ROW_GAP = 3.0
#: Right-aligned page numbers end within this many points of each other (glyph boxes round to a point or so).
ALIGN = 2.0


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
    tabbed = False  # some row of the run has no leaders: its page numbers must vouch for it

    def close() -> None:
        if len(run) >= MIN_ROWS and (not tabbed or _paged(run, words)):
            found.append(_contents(run, words))
        run.clear()

    for line in lines:
        text = " ".join(words[i].text for i in line)
        match = _LEADER.match(text)
        if match is not None:
            # The leader dots stay in the entry cell, as printed (and as docling keeps them).
            run.append((line, text.rsplit(match["page"], 1)[0].strip(), match["page"]))
            continue
        if _tabbed(line, words) and (not run or _follows(run[-1][0], line, words)):
            tabbed = True
            run.append((line, " ".join(words[i].text for i in line[:-1]), words[line[-1]].text))
            continue
        close()
        tabbed = False
    close()
    return found


def _tabbed(line: Sequence[int], words: Sequence[Word]) -> bool:
    """An entry without leaders: words with a letter, then a page number a tab stop (`TAB_EM`) away, and no other
    wide gap (a table's row has several)."""
    if len(line) < 2 or not _PAGE.match(words[line[-1]].text):
        return False
    if not any(c.isalpha() for i in line[:-1] for c in words[i].text):
        return False
    size = max(words[line[-2]].size or words[line[-2]].height, 1.0)
    gaps = [words[b].x0 - words[a].x1 for a, b in itertools.pairwise(line)]
    return gaps[-1] >= TAB_EM * size and all(g < TAB_EM * size for g in gaps[:-1])


def _follows(previous: Sequence[int], line: Sequence[int], words: Sequence[Word]) -> bool:
    """Whether a leaderless entry continues the run: its page number of the same kind as the row above's (arabic or
    roman: a running foot's "iv" under a contents list's "19" is no entry) and at most `ROW_GAP` of its font sizes
    below it (LaTeX spaces section entries 1.3 sizes apart; a page's foot stands far lower)."""
    if words[previous[-1]].text.isdigit() != words[line[-1]].text.isdigit():
        return False
    size = max(words[line[-1]].size or words[line[-1]].height, 1.0)
    top = min(words[i].y0 for i in line)
    return top - max(words[i].y1 for i in previous) <= ROW_GAP * size


def _paged(run: list[tuple[Sequence[int], str, str]], words: Sequence[Word]) -> bool:
    """Whether a run's page numbers end at one right edge and, arabic ones, never go down."""
    rights = [words[line[-1]].x1 for line, _, _ in run]
    numbers = [int(page) for _, _, page in run if page.isdigit()]
    return max(rights) - min(rights) <= ALIGN and all(a <= b for a, b in itertools.pairwise(numbers))


def _contents(run: list[tuple[Sequence[int], str, str]], words: Sequence[Word]) -> Contents:
    taken = frozenset(i for line, _, _ in run for i in line)
    bbox = box_union([words[i].bbox for i in taken])
    cells = tuple(cell for r, (_, entry, page) in enumerate(run) for cell in (Cell(r, 0, entry), Cell(r, 1, page)))
    return Contents(bbox, Table(len(run), 2, cells), taken)

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
#: An entry's first line, wrapped for want of room, reaches this share of the way from its start to the page
#: numbers' right edge at least (the sweep's manual: 0.9-0.95; a heading or an index's letter over entries, under 0.3).
FILLED = 0.75
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

    held: Sequence[int] = ()  # a line that may be an entry's first, wrapped before its leaders
    for line in lines:
        text = " ".join(words[i].text for i in line)
        match = _LEADER.match(text)
        if held:
            if match is not None and _wraps(held, line, words):
                entry = " ".join(words[i].text for i in held) + " " + text.rsplit(match["page"], 1)[0].strip()
                run.append(([*held, *line], entry, match["page"]))
                held = ()
                continue
            held = ()
            close()
            tabbed = False
        if match is not None:
            # The leader dots stay in the entry cell, as printed (and as docling keeps them).
            run.append((line, text.rsplit(match["page"], 1)[0].strip(), match["page"]))
            continue
        if _tabbed(line, words) and (not run or _follows(run[-1][0], line, words)):
            tabbed = True
            run.append((line, " ".join(words[i].text for i in line[:-1]), words[line[-1]].text))
            continue
        if run and _follows_below(run[-1][0], line, words):
            held = line  # read with the next line: an entry too long for one line goes on under its title
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


def _follows_below(previous: Sequence[int], line: Sequence[int], words: Sequence[Word]) -> bool:
    """Whether `line` stands within `ROW_GAP` of its font sizes under the run's last row, holding letters: it may be
    an entry's first line (`_wraps` tells, with the next)."""
    size = max(words[line[0]].size or words[line[0]].height, 1.0)
    top = min(words[i].y0 for i in line)
    letters = any(c.isalpha() for i in line for c in words[i].text)
    return letters and top - max(words[i].y1 for i in previous) <= ROW_GAP * size


def _wraps(first: Sequence[int], line: Sequence[int], words: Sequence[Word]) -> bool:
    """Whether leader `line` ends the entry `first` began (LaTeX wraps a long entry under its title, indented past
    its number: "1.4.3 glp read ccdata - read graph ... clique/coloring" over "format . . . . 12"): right under it
    (`ROW_GAP`), starting no further left than it does, its leaders reaching past its end to the page number."""
    size = max(words[line[0]].size or words[line[0]].height, 1.0)
    gap = min(words[i].y0 for i in line) - max(words[i].y1 for i in first)
    starts = words[line[0]].x0 >= words[first[0]].x0 - ALIGN
    left, right, end = words[first[0]].x0, max(words[i].x1 for i in first), words[line[-1]].x1
    # the first line filled, as a line broken for want of room is (`FILLED`): a heading over the contents, an
    # index's letter, stand short; and no leaders of its own (an index's entry of several pages, "9, 22", has them)
    dotted = sum(1 for i in first if words[i].text.strip(".") == "") >= 3 or "..." in "".join(
        words[i].text for i in first
    )
    return gap <= ROW_GAP * size and starts and end > right and right - left >= FILLED * (end - left) and not dotted


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

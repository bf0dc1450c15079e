"""From recognised text lines to DocTags: reading order, paragraphs, headings, list items and tables.

Pure functions over boxes and strings (no model, no image), so every rule here is tested on hand-made lines.

The rules, and why each is the one it is:
- Reading order is row by row, each row left to right. Lines are grouped into a row when they overlap vertically
  by half the smaller height; sorting by line centre alone misread a table row whose cells' boxes differ by a
  pixel or two in height (CER 6% against 0%).
- A row that breaks into several segments separated by wide gaps (more than ~2 line heights), with at least one
  more such row right after it, is a table: its columns are the union of the segments' horizontal extents, so
  right-aligned numbers of different widths still land in one column. The first row is the header (`ched`).
- Headings: a line much taller than the body text is a header, and bigger headers get lower levels (1-5). The body
  height is measured on body lines only, never on table rows, whose short cells would drag it around.
- Paragraphs: consecutive body lines of the same height form one paragraph unless the gap between them is clearly
  wider than the page's usual line gap (its median, plus 0.4 line heights, and never more than 0.9 line heights):
  detector boxes are padded, so a blank line between paragraphs is a gap of under one box height.
- DocTags locations are `<loc_x0><loc_y0><loc_x1><loc_y1>` on a 0-499 grid, top-down
  (`min(round(500*v/size), 499)`, docling's own `get_location_token`).
- `<` and `>` in recognised text are written `&lt;` and `&gt;`: docling strips anything tag-shaped from element
  text (`x<y and z>w` loses ` and z`), and pdf-spec reads an unknown `<...>` as text either way.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: A row segment is a new cell when the gap before it is wider than this many line heights. Word gaps are ~0.3 h;
#: the detector already splits at column gaps, so two boxes a bit apart in one row are one phrase.
CELL_GAP_HEIGHTS = 2.0
#: A line this much taller than the median body line is a heading.
HEADING_RATIO = 1.3
#: Header heights within this ratio of each other share a level.
LEVEL_TOLERANCE = 1.12
#: Two lines are one paragraph when the vertical gap between them is under this many body heights at most...
PARAGRAPH_GAP_HEIGHTS = 0.9
#: ...and under the page's median line gap plus this many body heights.
PARAGRAPH_EXTRA_HEIGHTS = 0.4
#: Deepest heading level both consumers accept (docling drops level 0; pdf-spec accepts 0-5).
MAX_LEVEL = 5
#: The location grid of DocTags.
GRID = 500

_BULLET = re.compile(r"^[•·▪◦‣●○■□\-–*]\s+")


@dataclass(frozen=True, slots=True)
class Line:
    """One recognised text line: its axis-aligned box in pixels, text and confidence."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    score: float = 1.0

    @property
    def height(self) -> float:
        return max(self.y1 - self.y0, 1.0)

    @classmethod
    def from_quad(cls, quad: Sequence[Sequence[float]], text: str, score: float = 1.0) -> Line:
        """From the detector's four corner points (any order)."""
        xs = [float(p[0]) for p in quad]
        ys = [float(p[1]) for p in quad]
        return cls(min(xs), min(ys), max(xs), max(ys), text, score)


@dataclass(frozen=True, slots=True)
class Element:
    """One DocTags element: `tag` is text, section_header_level_N, list_item or otsl; `cells` only for otsl."""

    tag: str
    box: tuple[float, float, float, float]
    text: str = ""
    cells: tuple[tuple[str, ...], ...] = ()


def rows(lines: Iterable[Line]) -> list[list[Line]]:
    """Lines grouped into rows (top to bottom), each row sorted left to right."""
    out: list[list[Line]] = []
    spans: list[tuple[float, float]] = []
    for line in sorted(lines, key=lambda ln: (ln.y0 + ln.y1) / 2):
        if out:
            top, bottom = spans[-1]
            overlap = min(bottom, line.y1) - max(top, line.y0)
            if overlap >= 0.5 * min(line.height, bottom - top):
                out[-1].append(line)
                spans[-1] = (min(top, line.y0), max(bottom, line.y1))
                continue
        out.append([line])
        spans.append((line.y0, line.y1))
    return [sorted(row, key=lambda ln: ln.x0) for row in out]


def segments(row: Sequence[Line]) -> list[Line]:
    """A row's lines merged where they are one phrase (a small gap); what is left apart are cells."""
    merged: list[Line] = []
    for line in row:
        if merged:
            last = merged[-1]
            gap = line.x0 - last.x1
            if gap < CELL_GAP_HEIGHTS * min(line.height, last.height):
                merged[-1] = _join([last, line])
                continue
        merged.append(line)
    return merged


def _join(lines: Sequence[Line], sep: str = " ") -> Line:
    return Line(
        min(ln.x0 for ln in lines),
        min(ln.y0 for ln in lines),
        max(ln.x1 for ln in lines),
        max(ln.y1 for ln in lines),
        sep.join(ln.text.strip() for ln in lines),
        min(ln.score for ln in lines),
    )


def _columns(table_rows: Sequence[Sequence[Line]]) -> list[tuple[float, float]]:
    # Union of overlapping horizontal extents: each merged interval is a column.
    spans = sorted((cell.x0, cell.x1) for row in table_rows for cell in row)
    columns: list[tuple[float, float]] = []
    for x0, x1 in spans:
        if columns and x0 <= columns[-1][1]:
            columns[-1] = (columns[-1][0], max(columns[-1][1], x1))
        else:
            columns.append((x0, x1))
    return columns


def table(table_rows: Sequence[Sequence[Line]]) -> Element:
    """An otsl element from rows of cells: cells placed in columns, empty where a row has none."""
    columns = _columns(table_rows)
    grid: list[tuple[str, ...]] = []
    for row in table_rows:
        texts = [""] * len(columns)
        for cell in row:
            centre = (cell.x0 + cell.x1) / 2
            index = min(
                range(len(columns)),
                key=lambda i: 0.0 if columns[i][0] <= centre <= columns[i][1] else abs(centre - sum(columns[i]) / 2),
            )
            texts[index] = f"{texts[index]} {cell.text.strip()}".strip()
        grid.append(tuple(texts))
    every = [cell for row in table_rows for cell in row]
    box = (min(c.x0 for c in every), min(c.y0 for c in every), max(c.x1 for c in every), max(c.y1 for c in every))
    return Element("otsl", box, cells=tuple(grid))


def _levels(heights: Iterable[float]) -> dict[float, int]:
    # Distinct heading sizes, largest first, each a level; sizes within LEVEL_TOLERANCE share one.
    levels: dict[float, int] = {}
    level = 0
    previous = 0.0
    for h in sorted(set(heights), reverse=True):
        if not previous or previous / h > LEVEL_TOLERANCE:
            level = min(level + 1, MAX_LEVEL)
            previous = h
        levels[h] = level
    return levels


def elements(lines: Iterable[Line]) -> list[Element]:
    """The page's elements in reading order."""
    blocks: list[Line | list[list[Line]]] = []  # a body line, or a table's rows
    pending: list[list[Line]] = []  # multi-cell rows that may become a table

    def flush() -> None:
        if len(pending) >= 2:
            blocks.append(list(pending))
        else:
            blocks.extend(_join(row) for row in pending)
        pending.clear()

    for row in rows(lines):
        cells = segments(row)
        if len(cells) >= 2:
            pending.append(cells)
            continue
        flush()
        blocks.append(cells[0])
    flush()

    body = [b for b in blocks if isinstance(b, Line)]
    if not body:
        return [table(b) for b in blocks if isinstance(b, list)]
    base = statistics.median(ln.height for ln in body)
    heads = [ln.height for ln in body if ln.height >= HEADING_RATIO * base]
    levels = _levels(heads)
    plain = [ln for ln in body if ln.height < HEADING_RATIO * base]
    gaps = [b.y0 - a.y1 for a, b in itertools.pairwise(plain) if b.y0 - a.y1 >= -0.5 * base]
    usual = statistics.median(gaps) if gaps else 0.0
    limit = min(usual + PARAGRAPH_EXTRA_HEIGHTS * base, PARAGRAPH_GAP_HEIGHTS * base)

    out: list[Element] = []
    paragraph: list[Line] = []
    tag = "text"

    def end_paragraph() -> None:
        if paragraph:
            merged = _join(paragraph)
            out.append(Element(tag, (merged.x0, merged.y0, merged.x1, merged.y1), merged.text))
            paragraph.clear()

    for block in blocks:
        if isinstance(block, list):
            end_paragraph()
            out.append(table(block))
            continue
        if block.height >= HEADING_RATIO * base:
            end_paragraph()
            level = levels[block.height]
            out.append(Element(f"section_header_level_{level}", (block.x0, block.y0, block.x1, block.y1), block.text))
            continue
        bullet = _BULLET.match(block.text)
        if bullet:
            end_paragraph()
            tag = "list_item"
            paragraph.append(Line(block.x0, block.y0, block.x1, block.y1, block.text[bullet.end() :], block.score))
            continue
        if paragraph and _continues(paragraph[-1], block, base, limit):
            paragraph.append(block)
            continue
        end_paragraph()
        tag = "text"
        paragraph.append(block)
    end_paragraph()
    return out


def _continues(previous: Line, line: Line, base: float, limit: float) -> bool:
    gap = line.y0 - previous.y1
    similar = max(previous.height, line.height) / min(previous.height, line.height) < 1.2
    return similar and -0.5 * base <= gap < limit


def escape(text: str) -> str:
    """Recognised text as element content: `<` and `>` written as entities (see the module doc)."""
    return text.replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """The inverse of `escape`, for readers (docling) that keep entities as they are."""
    return text.replace("&lt;", "<").replace("&gt;", ">")


def loc(value: float, size: float) -> int:
    """One coordinate on the DocTags grid: `min(round(500*v/size), 499)`, never negative."""
    return max(0, min(round(GRID * value / size), GRID - 1))


def locations(box: tuple[float, float, float, float], width: int, height: int) -> str:
    """The four location tokens of a box on a `width` x `height` page."""
    x0, y0, x1, y1 = box
    return "".join(f"<loc_{v}>" for v in (loc(x0, width), loc(y0, height), loc(x1, width), loc(y1, height)))


def doctags(element: Element, width: int, height: int) -> str:
    """One element as DocTags (no `<doctag>` wrapper)."""
    where = locations(element.box, width, height)
    if element.tag != "otsl":
        return f"<{element.tag}>{where}{escape(element.text)}</{element.tag}>"
    rows_out = []
    for r, row in enumerate(element.cells):
        cells = "".join(("<ched>" if r == 0 else "<fcel>") + escape(t) if t else "<ecel>" for t in row)
        rows_out.append(cells + "<nl>")
    return f"<otsl>{where}{''.join(rows_out)}</otsl>"

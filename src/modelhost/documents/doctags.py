"""A page's DocTags (what a page model answers: the `ocr` model, a DocTags VLM, a socket) read into a PageLayout, the
elements the document model holds, without docling-core (importing it costs 2.3 CPU s: its document module imports
pandas).

This reader reads what docling-core's own parser reads (`DoclingDocument.load_from_doctags`, after assemble.build's
`escape_text` and `repair`, then `_unescape` and `_numbers_as_markers`) for every token the `ocr` model writes, and
the same way: an element's text is its content with the tags taken out and its ends stripped; a `<picture>` without
a location is no picture; a `<caption>` inside a table or picture comes before it and is its caption; an ordered
list's printed numbers are its markers; table cells carry no header flag (docling's OTSL parser sets none); a tag
docling does not know (`<loc_500>`, "x <y> z") is text. A page holding a token it does not model (a chart, a key-value
region, an inline group, a checkbox, a picture class, `<rhed>`, a heading of level 6 or more, two lists of one kind in
a row) is left to docling's parser (`read` answers None): docling-core is imported for such pages only.
tests/documents/test_doctags_reader.py checks the two agree, on pages of every element kind and random ones, through
Markdown.

Why a reader of our own rather than docling's parser: the pixel path's pages would pay docling's import for a parse
that takes 26 ms, and the `ocr` model writes a small, fixed subset of DocTags (docengine/emit.py) that this module
reads in 200 lines.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Final

from modelhost.docengine.emit import GRID
from modelhost.docengine.types import Block, Cell, Kind, PageLayout, Table
from modelhost.documents.assemble import repair, unescape

#: The tags this reader models, each one of docling's own tokens (`DocumentToken.get_special_tokens()`, a test
#: checks): the elements, their containers, OTSL's cell tokens, and code's unknown language.
_ELEMENTS: Final = (
    "title",
    "text",
    "page_header",
    "page_footer",
    "formula",
    "caption",
    "picture",
    "footnote",
    "code",
    "section_header_level_1",
    "section_header_level_2",
    "section_header_level_3",
    "section_header_level_4",
    "section_header_level_5",
    "ordered_list",
    "unordered_list",
    "otsl",
)
_CONTAINERS: Final = ("doctag", "list_item", *_ELEMENTS)
_CELLS: Final = ("fcel", "ecel", "ched", "lcel", "ucel", "xcel", "nl")
#: docling's location tokens: `<loc_0>` to `<loc_499>` (GRID steps).
_LOCATIONS: Final = frozenset(f"<loc_{i}>" for i in range(GRID))
KNOWN: Final = frozenset(
    [
        *(f"<{t}>" for t in _CONTAINERS),
        *(f"</{t}>" for t in _CONTAINERS),
        *(f"<{t}>" for t in _CELLS),
        "<_unknown_>",
        *_LOCATIONS,
    ]
)

#: A tag-shaped run or a lone angle bracket (assemble._ANGLED).
_ANGLED = re.compile(r"<[^<>]*>|[<>]")
#: A run docling may take for one of its tokens (no space inside): one this reader does not know sends the page to
#: docling's parser.
_TOKENISH = re.compile(r"</?[^\s<>]+>")
#: The elements docling's parser reads at the top level (`load_from_doctags`' tag pattern, narrowed to _ELEMENTS).
_ELEMENT = re.compile(
    r"<(?P<tag>" + "|".join(_ELEMENTS) + r")>(?P<content>.*?)(?:(?P<closed></(?P=tag)>)|(?P<eof>$))", re.DOTALL
)
_LOC = re.compile(r"<loc_(\d+)>")
#: What docling takes out of an element's text: every tag but a `<_language_>` one.
_INNER_TAG = re.compile(r"<(?!_.*?_>)[a-zA-Z/][^>]*>")
_CAPTION = re.compile(r"<caption>(.*?)</caption>")
_LIST_ITEM = re.compile(r"<list_item>.*?</list_item>", re.DOTALL)
_LANGUAGE = re.compile(r"^<_([^>]+)_>")
#: An ordered item's printed number at the start of its text (assemble._NUMBER, which docling's markers follow).
_NUMBER = re.compile(r"^(\(?(?:\d{1,3}|[a-z]|[ivx]{1,5})[.)])\s+(?=\S)")
_OTSL_TOKEN = re.compile(r"(<[^>]+>)")
_KINDS: Final = {
    "title": Kind.TITLE,
    "text": Kind.TEXT,
    "page_header": Kind.PAGE_HEADER,
    "page_footer": Kind.PAGE_FOOTER,
    "formula": Kind.FORMULA,
    "caption": Kind.CAPTION,
    "footnote": Kind.FOOTNOTE,
    "code": Kind.CODE,
}


class _Unmodelled(Exception):
    """The page holds what this reader does not model: docling's parser reads it."""


def read(doctags: str, number: int, width: float, height: float) -> PageLayout | None:
    """The page's elements as docling's parser reads its DocTags, on a `width` x `height` page; None when the page
    holds a token this reader does not model (module docstring)."""
    try:
        text = repair(_escape(doctags))
        return PageLayout(number, width, height, tuple(_blocks(text, width, height)))
    except _Unmodelled:
        return None


def _escape(doctags: str) -> str:
    """assemble.escape_text with this reader's tokens: every tag-shaped run that is not one is written as entities;
    one that docling could take for a token of its own raises _Unmodelled."""
    tail = doctags.rfind("<")
    cut = tail if tail >= 0 and doctags.find(">", tail) < 0 else len(doctags)

    def one(match: re.Match[str]) -> str:
        run = match.group(0)
        if run in KNOWN:
            return run
        if _TOKENISH.fullmatch(run):
            raise _Unmodelled(run)
        return run.replace("<", "&lt;").replace(">", "&gt;")

    return _ANGLED.sub(one, doctags[:cut]) + doctags[cut:]


def _inner(chunk: str) -> str:
    return _INNER_TAG.sub("", chunk).strip()


def _box(chunk: str, width: float, height: float) -> tuple[float, float, float, float] | None:
    """The chunk's first four locations on the page, as docling scales them (None without four)."""
    locs = [float(v) for v in _LOC.findall(chunk)[:4]]
    if len(locs) < 4:
        return None
    x0, y0, x1, y1 = (v / GRID for v in locs)
    return (x0 * width, y0 * height, x1 * width, y1 * height)


_NO_BOX = (0.0, 0.0, 0.0, 0.0)


def _blocks(text: str, width: float, height: float) -> list[Block]:
    blocks: list[Block] = []
    after_list = ("", -1)  # the last list's tag, and the block index after its items
    for match in _ELEMENT.finditer(text):
        tag = match.group("tag")
        chunk = match.group(0) if match.group("closed") else f"<{tag}></{tag}>"
        box = _box(match.group(0), width, height)
        if tag in ("otsl", "picture"):
            caption = _CAPTION.search(chunk)
            at = -1
            if caption is not None:
                at = len(blocks)
                where = _box(caption.group(1), width, height) or _NO_BOX
                blocks.append(Block(Kind.CAPTION, where, _inner(caption.group(1))))
            if tag == "otsl":
                blocks.append(Block(Kind.TABLE, box or _NO_BOX, table=_table(chunk), caption=at))
            elif box is not None:
                linked = caption is not None and _box(caption.group(1), width, height) is not None
                blocks.append(Block(Kind.PICTURE, box, caption=at if linked else -1))
        elif tag in ("ordered_list", "unordered_list"):
            items = _LIST_ITEM.findall(chunk)
            if not items or after_list == (tag, len(blocks)):
                raise _Unmodelled("an empty list, or two of a kind in a row")  # docling's parser keeps them apart
            ordered = tag == "ordered_list"
            for n, item in enumerate(items, 1):
                content = unescape(_inner(item))
                marker = f"{n}." if ordered else ""
                if ordered and (number := _NUMBER.match(content)):
                    marker, content = number.group(1), content[number.end() :]
                blocks.append(
                    Block(Kind.LIST_ITEM, _box(item, width, height) or _NO_BOX, content, marker=marker, ordered=ordered)
                )
            after_list = (tag, len(blocks))
        elif tag.startswith("section_header_level_"):
            level = int(tag.rsplit("_", 1)[1])
            blocks.append(Block(Kind.SECTION_HEADER, box or _NO_BOX, _inner(chunk), level=level))
        else:
            content = _inner(chunk)
            if tag == "code" and (language := _LANGUAGE.match(content)):
                content = content[language.end() :]
            blocks.append(Block(_KINDS[tag], box or _NO_BOX, content))
    return [_unescaped(b) for b in blocks]


def _unescaped(block: Block) -> Block:
    if block.kind is Kind.LIST_ITEM:
        return block  # unescaped before its number was read, as docling does
    table = block.table
    if table is not None:
        cells = tuple(Cell(c.row, c.col, unescape(c.text), c.row_span, c.col_span) for c in table.cells)
        table = Table(table.rows, table.cols, cells)
    return dataclasses.replace(block, text=unescape(block.text), table=table)


def _table(chunk: str) -> Table:
    """An OTSL table as docling's parser reads it (`parse_otsl_table_content`): the structural tokens by row, each
    cell's text the run after its token, spans from the `lcel`/`ucel`/`xcel` beside and below it."""
    runs = _OTSL_TOKEN.split(chunk)
    outer = ("<otsl>", "</otsl>")
    tokens = [r for r in _OTSL_TOKEN.findall(chunk) if not r.startswith("<loc_") and r not in outer]
    texts = [r for r in runs if not r.startswith("<loc_") and r not in outer and r.strip()]
    structural = [t for t in tokens if t[1:-1] in _CELLS]
    rows: list[list[str]] = [[]]
    for token in structural:
        if token == "<nl>":
            rows.append([])
        else:
            rows[-1].append(token)
    rows = [row for row in rows if row]  # as docling groups them: no empty row between two <nl>
    cells: list[Cell] = []
    r = c = 0
    for i, text in enumerate(texts):
        if text in ("<fcel>", "<ecel>", "<ched>"):
            content, offset = "", 1
            if text != "<ecel>":
                if i + 1 >= len(texts):
                    raise _Unmodelled("a cell token ends the table")  # docling's parser fails on it
                content, offset = texts[i + 1], 2
            right = texts[i + offset] if i + offset < len(texts) else ""
            below = rows[r + 1][c] if r + 1 < len(rows) and c < len(rows[r + 1]) else ""
            col_span = 1 + (_run(rows, r, c + 1, across=True) if right in ("<lcel>", "<xcel>") else 0)
            row_span = 1 + (_run(rows, r + 1, c, across=False) if below in ("<ucel>", "<xcel>") else 0)
            cells.append(Cell(r, c, content.strip(), row_span, col_span))
        if text in ("<fcel>", "<ecel>", "<ched>", "<lcel>", "<ucel>", "<xcel>"):
            c += 1
        if text == "<nl>":
            r, c = r + 1, 0
    return Table(len(rows), max((len(row) for row in rows), default=0), tuple(cells))


def _run(rows: list[list[str]], r: int, c: int, *, across: bool) -> int:
    """How many span tokens follow in a row (`across`) or down a column from (r, c), as docling's count_right and
    count_down count them (an index past the grid fails, as it does there)."""
    spans = ("<lcel>", "<xcel>") if across else ("<ucel>", "<xcel>")
    count = 0
    try:
        while rows[r][c] in spans:
            count += 1
            r, c = (r, c + 1) if across else (r + 1, c)
            if (across and c >= len(rows[r])) or (not across and r >= len(rows)):
                return count
    except IndexError as exc:
        raise _Unmodelled("a span past the table") from exc
    return count

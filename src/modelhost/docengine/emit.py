"""Layouts out: DocTags one element at a time (for streaming), Markdown as docling-core writes it (without importing
docling-core), or a DoclingDocument (JSON, HTML).

DocTags as docling-core writes it (`DoclingDocument.export_to_doctags`), element by element:
- locations are `<loc_x0><loc_y0><loc_x1><loc_y1>` on docling's grid of 500 steps, top-down, `round(500 * v /
  size)` clamped to 0-499, as docling-core writes them (`DocumentToken.get_location_token`) and pdf-spec's parser
  reads them: `<loc_500>` is no token to either (pdf-spec keeps it as literal text, and the block loses its box);
- section headers are `section_header_level_N`; code carries its language tag (`<_unknown_>`) and its line breaks;
  tables are OTSL (`ched` header cells, `fcel` full, `ecel` empty, a header's too, `lcel`/`ucel`/`xcel` the spans,
  `nl` row ends);
- list items are wrapped in `<unordered_list>`/`<ordered_list>`: the wrapper opens with the list's first item and
  closes after its last, so each yielded string is still one complete item and a reader sees it at once; an ordered
  item's text starts with its number as printed ("23."), a bullet is not written;
- text is written as printed: `<` and `>` stay literal, which is what pdf-spec's parser expects and what docling-core
  itself writes. `escape=True` writes `&lt;`/`&gt;` for a reader that would take tag-shaped text for tags (docling's
  own DocTags parser drops anything tag-shaped from element text).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

from modelhost.docengine.types import BBox, Block, Cell, Kind, PageLayout, Table

#: DocTags' location grid: docling's models and docling-core both use 500 steps per page side, tokens 0 to 499.
GRID = 500


def loc(value: float, size: float) -> int:
    """One coordinate on the DocTags grid: 0 to `GRID - 1` (a box touching the right or bottom edge ends at 499)."""
    if size <= 0:
        return 0
    return max(0, min(round(GRID * value / size), GRID - 1))


def locations(bbox: BBox, width: float, height: float) -> str:
    """The four location tokens of a box on a `width` x `height` page."""
    x0, y0, x1, y1 = bbox
    return "".join(f"<loc_{v}>" for v in (loc(x0, width), loc(y0, height), loc(x1, width), loc(y1, height)))


def _text(text: str, escape: bool) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;") if escape else text


def tag(block: Block) -> str:
    """The DocTags tag of a block."""
    if block.kind is Kind.SECTION_HEADER:
        return f"section_header_level_{max(1, block.level)}"
    return block.kind.value


def otsl(table: Table, escape: bool = False) -> str:
    """A table's OTSL body: one token per grid slot, each row ended by `<nl>`."""
    out: list[str] = []
    for r, row in enumerate(table.grid()):
        for c, cell in enumerate(row):
            if cell is None:
                out.append("<ecel>")
            elif cell.row == r and cell.col == c:
                # an empty cell is `<ecel>` even in the header, as docling-core writes it: `<ched>` takes the next
                # run as its text, and docling's parser (and ours, `documents.doctags`) read the next cell's token,
                # "<ched>", as the empty header cell's text (a table whose header's first cell is blank)
                token = "<ecel>" if not cell.text else "<ched>" if cell.header else "<fcel>"
                out.append(token + _text(cell.text, escape))
            elif cell.row == r:
                out.append("<lcel>")
            elif cell.col == c:
                out.append("<ucel>")
            else:
                out.append("<xcel>")
        out.append("<nl>")
    return "".join(out)


def element(block: Block, width: float, height: float, *, escape: bool = False) -> str:
    """One block as one DocTags element (list wrappers are `doctags_elements`' business). An ordered list item
    keeps its number as printed ("23. If your country..."): a reader of DocTags numbers a list from 1 (pdf-spec
    writes "- " before each item), so a page's questions 23 to 28 would lose their numbers; a bullet is left out,
    as docling-core writes it."""
    name = tag(block)
    where = locations(block.bbox, width, height)
    if block.kind is Kind.TABLE and block.table is not None:
        return f"<{name}>{where}{otsl(block.table, escape)}</{name}>"
    if block.kind is Kind.CODE:
        return f"<{name}>{where}<_unknown_>{_text(block.text, escape)}</{name}>"
    text = (
        f"{block.marker} {block.text}"
        if block.kind is Kind.LIST_ITEM and block.ordered and block.marker
        else block.text
    )
    return f"<{name}>{where}{_text(text, escape)}</{name}>"


def doctags_elements(layout: PageLayout, *, escape: bool = False) -> Iterator[str]:
    """The page's DocTags, one element a string, in reading order (no `<doctag>` wrapper)."""
    blocks = layout.blocks
    for i, block in enumerate(blocks):
        text = element(block, layout.width, layout.height, escape=escape)
        if block.kind is Kind.LIST_ITEM:
            wrapper = "ordered_list" if block.ordered else "unordered_list"
            previous = blocks[i - 1] if i else None
            following = blocks[i + 1] if i + 1 < len(blocks) else None
            if previous is None or previous.kind is not Kind.LIST_ITEM or previous.ordered != block.ordered:
                text = f"<{wrapper}>{text}"
            if following is None or following.kind is not Kind.LIST_ITEM or following.ordered != block.ordered:
                text = f"{text}</{wrapper}>"
        yield text


def doctags_page(layout: PageLayout, *, escape: bool = False) -> str:
    """The whole page's DocTags, wrapped in `<doctag>` as a model answers a page."""
    return "<doctag>" + "\n".join(doctags_elements(layout, escape=escape)) + "\n</doctag>"


def to_docling(name: str, layouts: Sequence[PageLayout]) -> Any:
    """A DoclingDocument of the pages: body blocks in reading order, furniture in docling's furniture layer,
    captions attached to their picture or table, and paragraphs that a page break split joined again."""
    from docling_core.types.doc.base import Size
    from docling_core.types.doc.document import DoclingDocument  # type: ignore[attr-defined]

    from modelhost.docengine.analyse import join_pages

    doc = DoclingDocument(name=name)
    for layout in join_pages(layouts):
        doc.add_page(page_no=layout.number, size=Size(width=layout.width, height=layout.height))
        _Page(doc, layout).add()
    return doc


class _Page:
    """One layout's blocks added to a DoclingDocument, lists grouped, captions linked."""

    def __init__(self, doc: Any, layout: PageLayout) -> None:
        self.doc = doc
        self.layout = layout
        self.items: dict[int, Any] = {}  # block index -> its docling item
        self.group: Any = None
        self.group_ordered = False
        # caption index -> the picture/table that takes it
        self.owner = {b.caption: i for i, b in enumerate(layout.blocks) if b.caption >= 0}

    def add(self) -> None:
        for i, block in enumerate(self.layout.blocks):
            if block.kind is not Kind.LIST_ITEM:
                self.group = None
            self.items[i] = self._item(i, block)

    def _item(self, i: int, block: Block) -> Any:
        from docling_core.types.doc.document import ContentLayer  # type: ignore[attr-defined]
        from docling_core.types.doc.labels import DocItemLabel

        doc, prov, text = self.doc, _prov(block, self.layout), block.text
        if block.kind.furniture:
            label = DocItemLabel.PAGE_HEADER if block.kind is Kind.PAGE_HEADER else DocItemLabel.PAGE_FOOTER
            return doc.add_text(label, text, prov=prov, content_layer=ContentLayer.FURNITURE)
        if block.kind is Kind.TITLE:
            return doc.add_title(text, prov=prov)
        if block.kind is Kind.SECTION_HEADER:
            return doc.add_heading(text, level=max(1, block.level), prov=prov)
        if block.kind is Kind.LIST_ITEM:
            if self.group is None or self.group_ordered != block.ordered:
                self.group = doc.add_list_group()
                self.group_ordered = block.ordered
            return doc.add_list_item(text, enumerated=block.ordered, marker=block.marker, parent=self.group, prov=prov)
        if block.kind is Kind.CODE:
            return doc.add_code(text, prov=prov)
        caption = self.items.get(block.caption) if block.caption >= 0 else None
        if block.kind is Kind.TABLE and block.table is not None:
            return doc.add_table(data=_table_data(block.table), prov=prov, caption=caption)
        if block.kind is Kind.PICTURE:
            return doc.add_picture(prov=prov, caption=caption)
        if block.kind is Kind.CAPTION and self.owner.get(i, len(self.layout.blocks)) < i:
            # the caption of a picture or table already added: it becomes that item's caption
            holder = self.items[self.owner[i]]
            item = doc.add_text(DocItemLabel.CAPTION, text, prov=prov, parent=holder)
            holder.captions.append(item.get_ref())
            return item
        labels = {
            Kind.FORMULA: DocItemLabel.FORMULA,
            Kind.CAPTION: DocItemLabel.CAPTION,
            Kind.FOOTNOTE: DocItemLabel.FOOTNOTE,
        }
        return doc.add_text(labels.get(block.kind, DocItemLabel.TEXT), text, prov=prov)


def _prov(block: Block, layout: PageLayout) -> Any:
    from docling_core.types.doc.base import BoundingBox, CoordOrigin
    from docling_core.types.doc.document import ProvenanceItem  # type: ignore[attr-defined]

    # Held to the page: text drawn past its edge (a line set wider than the page) is still the page's, and docling
    # clamps such a box anyway, with a UserWarning per box on the terminal at every export (issue 38).
    x0, y0, x1, y1 = block.bbox
    x0, x1 = (min(max(x, 0.0), layout.width) for x in (x0, x1))
    y0, y1 = (min(max(y, 0.0), layout.height) for y in (y0, y1))
    box = BoundingBox(l=x0, t=y0, r=x1, b=y1, coord_origin=CoordOrigin.TOPLEFT)
    return ProvenanceItem(page_no=layout.number, bbox=box, charspan=(0, len(block.text)))


def _table_data(table: Table) -> Any:
    from docling_core.types.doc.document import TableCell, TableData  # type: ignore[attr-defined]

    cells = [
        TableCell(
            text=cell.text,
            start_row_offset_idx=cell.row,
            end_row_offset_idx=cell.row + cell.row_span,
            start_col_offset_idx=cell.col,
            end_col_offset_idx=cell.col + cell.col_span,
            row_span=cell.row_span,
            col_span=cell.col_span,
            column_header=cell.header,
        )
        for cell in table.cells
    ]
    return TableData(num_rows=table.rows, num_cols=table.cols, table_cells=cells)


# Markdown, as docling-core writes a DoclingDocument made by `to_docling` (`export_to_markdown()` with its defaults:
# MarkdownDocSerializer, docling-core 2.104), without building one: that import costs 2.3 CPU s (docling-core's
# document module imports pandas), twenty times what the engine takes to read a page. tests/documents/
# test_markdown_writer.py compares the two on pages of every kind, so a docling-core release that writes otherwise
# shows there.

#: Markdown's deepest heading: docling writes a section header of level N with N + 1 `#`, at most this many.
_MAX_HASHES = 6
#: What docling writes for a picture (its default `image_placeholder`).
IMAGE_PLACEHOLDER = "<!-- image -->"
#: An image link, whose destination docling leaves unescaped (`MarkdownDocSerializer._escape_underscores`).
_IMAGE_LINK = re.compile(r"!\[.*?\]\((.*?)\)")
_UNDERSCORE = re.compile(r"(?<!\\)_")
#: A list marker Markdown takes as it is: a bullet of its own or a number with a dot.
_VALID_MARKER = re.compile(r"\d+\.")


def markdown(layouts: Sequence[PageLayout]) -> str:
    """The pages' Markdown as `to_docling(name, layouts).export_to_markdown()` writes it: body blocks in reading
    order (furniture left out), each list one block, a caption before its picture or table, paragraphs split by a
    page break joined (`join_pages`), the parts one blank line apart."""
    from modelhost.docengine.analyse import join_pages

    return "\n\n".join(part for layout in join_pages(layouts) for part in _markdown_parts(layout))


def markdown_page(layout: PageLayout) -> str:
    """One page's Markdown, as `markdown([layout])` but without joining it to another page."""
    return "\n\n".join(_markdown_parts(layout))


def _markdown_parts(layout: PageLayout) -> Iterator[str]:
    """The page's Markdown blocks, none empty: each block's, a list's items joined by line breaks."""
    blocks = layout.blocks
    captions = _linked_captions(blocks)
    held = set(captions.values())
    items: list[str] = []  # the open list's items
    ordered = False
    for i, block in enumerate(blocks):
        if items and (block.kind is not Kind.LIST_ITEM or block.ordered != ordered):
            yield "\n".join(items)
            items = []
        if block.kind.furniture or i in held:
            continue
        if block.kind is Kind.LIST_ITEM:
            ordered = block.ordered
            items.append(_list_item(block, len(items) + 1, ordered))
            continue
        caption = blocks[captions[i]].text if i in captions else None
        part = _block_markdown(block, caption)
        if part:
            yield part
    if items:
        yield "\n".join(items)


def _linked_captions(blocks: Sequence[Block]) -> dict[int, int]:
    """Which block (a picture, table or code) takes which caption (a block index), as `_Page` links them: a caption
    before its owner is linked when the owner is added; one after it when the caption is added, to the last block
    that names it."""
    owner = {b.caption: i for i, b in enumerate(blocks) if b.caption >= 0}
    linked: dict[int, int] = {}
    for i, block in enumerate(blocks):
        c = block.caption
        if c < 0 or c >= len(blocks):
            continue
        before = c < i and (block.kind is Kind.PICTURE or (block.kind is Kind.TABLE and block.table is not None))
        after = c > i and owner[c] == i and blocks[c].kind is Kind.CAPTION
        if before or after:
            linked[i] = c
    return linked


def _block_markdown(block: Block, caption: str | None) -> str:
    """One block that is not a list item, with the caption it holds (before a picture or table, after code)."""
    kind = block.kind
    text = block.text
    cap = _escape(caption) if caption else ""
    if kind is Kind.TITLE:
        return "# " + _escape(text.replace("\n", " "))
    if kind is Kind.SECTION_HEADER:
        return "#" * min(max(1, block.level) + 1, _MAX_HASHES) + " " + _escape(text.replace("\n", " "))
    if kind is Kind.CODE:
        fence = "`" * max(3, _longest_backticks(text) + 1)
        return "\n\n".join(p for p in (f"{fence}\n{text}\n{fence}", cap) if p)
    if kind is Kind.FORMULA:
        return f"$${text}$$" if text else ""
    if kind is Kind.PICTURE:
        return "\n\n".join(p for p in (cap, IMAGE_PLACEHOLDER) if p)
    if kind is Kind.TABLE and block.table is not None:
        return "\n\n".join(p for p in (cap, _markdown_table(block.table)) if p)
    return _escape(_line_breaks(text))


def _list_item(block: Block, position: int, ordered: bool) -> str:
    """A list item as docling writes it: a marker Markdown takes ("-", "1.") as it is; a bullet glyph as "-"; a
    printed number or letter ("a)", "(2)") after a "-"; no marker at all as "-", or as its place in an ordered list."""
    marker = block.marker
    text = _escape(_line_breaks(block.text))
    valid = marker in ("-", "*", "+") or bool(_VALID_MARKER.fullmatch(marker))
    pieces = []
    if not valid:
        pieces.append(f"{position}." if ordered and not marker else "-")
    if marker and (valid or any(ch.isalnum() for ch in marker)):
        pieces.append(marker)
    pieces.append(text)
    return " ".join(pieces)


def _markdown_table(table: Table) -> str:
    """A table as docling writes it: GitHub's pipe table by `tabulate` (docling's own dependency), the leading
    rows of column headers flattened into its one header row, numeric columns right-aligned."""
    if table.rows <= 0:
        return ""
    from tabulate import tabulate

    grid = table.grid()
    rows = [[(cell.text if cell else "").replace("\n", " ").replace("|", "&#124;") for cell in row] for row in grid]
    headers = _header_rows(table, grid)
    header = [_HEADER_SEPARATOR.join(_deduplicated(row[c] for row in rows[:headers])) for c in range(table.cols)]
    body = rows[headers:]
    align = ["right" if numeric_column([row[c] for row in body]) else "left" for c in range(table.cols)]
    return str(
        tabulate(
            body, headers=header, tablefmt="github", disable_numparse=True, colalign=tuple(align) if body else None
        )
    )


#: A number as tabulate reads one with thousands separators ("1,000", "-1,000.25", ".5"); plain ones go to float().
_GROUPED_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})*(?:\.\d*)?|\.\d+)")


def numeric_column(cells: Sequence[str]) -> bool:
    """Whether a column is right-aligned as docling's tabulate aligns it: every non-empty cell is a number (an int, a
    float, "1e5", "1,000.5"; "inf" and "nan" as words; not "1e999", which only overflows to one), and one cell is.
    Written here rather than calling tabulate's private `_column_type`, which may change in any release."""
    filled = [cell.strip() for cell in cells if cell.strip()]
    return bool(filled) and all(_number(cell) for cell in filled)


def _number(text: str) -> bool:
    if _GROUPED_NUMBER.fullmatch(text):
        return True
    try:
        value = float(text)
    except ValueError:
        return False
    return not (math.isinf(value) or math.isnan(value)) or text.lower() in ("inf", "-inf", "nan")


#: How docling joins a column's stacked header cells into the one header row a pipe table has.
_HEADER_SEPARATOR = " - "


def _deduplicated(texts: Iterator[str]) -> list[str]:
    """Non-empty texts, each unlike the one before (a header cell spanning rows is repeated in each)."""
    out: list[str] = []
    for text in texts:
        if text and (not out or out[-1] != text):
            out.append(text)
    return out


def _header_rows(table: Table, grid: list[list[Cell | None]]) -> int:
    """The leading rows that are the table's column header, as docling counts them (`_count_header_rows`): the
    rows a header cell starts on, up to one that also starts body text outside the leading column; the first row
    when no header cell starts a row and none is below the first."""
    first_col = min((cell.col for cell in table.cells), default=0)
    below = any(
        cell is not None and cell.header and cell.col == first_col and cell.row == r
        for r, row in enumerate(grid)
        if r > 0
        for cell in row
    )
    count = 0
    for r, row in enumerate(grid):
        starting = [cell for cell in row if cell is not None and cell.row == r]
        body_text = (r > 0 or below) and any(
            not cell.header and cell.text.strip() and cell.col != first_col for cell in starting
        )
        if body_text or not any(cell.header for cell in starting):
            break
        count += 1
    if count == 0 and grid and not any(cell is not None and cell.header for row in grid[1:] for cell in row):
        return 1
    return count


def _escape(text: str) -> str:
    """docling's post-processing of text: `_` escaped (outside image links), then `&`, `<` and `>` as entities."""
    parts: list[str] = []
    end = 0
    for match in _IMAGE_LINK.finditer(text):
        parts.append(_UNDERSCORE.sub(r"\\_", text[end : match.start()]))
        parts.append(match.group(0))
        end = match.end()
    if end < len(text):
        parts.append(_UNDERSCORE.sub(r"\\_", text[end:]))
    return html.escape("".join(parts), quote=False)


def _line_breaks(text: str) -> str:
    """A single line break as Markdown's hard break (two spaces before it); a blank line stays a paragraph break."""
    return "\n\n".join(p.replace("\n", "  \n") for p in text.split("\n\n"))


def _longest_backticks(text: str) -> int:
    return max((len(m) for m in re.findall(r"`+", text)), default=0)

"""A scanned page's blocks in reading order, read region by region: the first block is out before the page is read.

`blocks(reader, detection)` is a generator. Detection (lines, orientation, layout regions) is already done; each
step recognises ONE group's lines (pixels.groups: a layout region, in XY-cut reading order), runs `analyse()` on
those words with the page's style, and yields the group's blocks. So a consumer that stops after the first block
(the `ocr` model with `max_tokens=2`) has paid for detection and one region's recognition, not the page's.

The page's style (body size, heading sizes) comes from the detected line heights, before any text is read, so a
heading is judged against the whole page even though its region is analysed alone.

The layout model's label decides what analysis cannot see in words alone, except furniture: a `header`/`footer`
label alone deletes no line (a one-page document's title, a form's corner labels: over pdf-spec's socket the model
sees one page, and its page header is left out of the Markdown). A line is furniture on one page only as a page
number (furniture.PAGE_NUMBER, body-sized) in a header/footer region, in the page's top or bottom zone
(furniture.ZONE), or as the page's first or last line in its top or bottom fifth (analyse.PAGE_NUMBER_ZONE, the
text path's rule); the rest of a header/footer region is text, never a heading unless set larger than the body, and
the document-level pass (furniture.mark_furniture, run by documents/pipeline over every page of a conversion) makes
it furniture where it repeats on other pages.

A `title` region is a section header (unless it holds a paragraph's worth of text: the model sometimes boxes a title
together with its first paragraph, or text no heading is: classify.never_heading; one that opens as a caption does,
classify.CAPTION's "Table 2.", is a caption: the model boxes a caption set under its table as a title), a `caption` a
caption, an `equation` a formula, a `figure` a picture (its text lines are still read and kept, after the picture, so no
line RapidOCR reads is lost, but never as headings: a screenshot's labels, a diagram's boxes and a listing's keywords
are set big or bold too. A "figure" that is most of the page, `PAGE_FIGURE`, is a page designed as one: the title
regions the model boxed inside it are its headings, and its own lines are read as text in blocks of their own,
`pixels.COVER`, never headings), a `table` a table built from its words' positions (scantable.py). Lines inside a ruled
frame found in the pixels (pixelrules.py) are a `ruled` group whatever region holds them, analysed with its rules as a
text-layer page is, so the ruled-table finder (tables.py) makes its grid.

A section number set as a block of its own beside its heading (a big digit in a box, left of the title on its line)
is joined to that heading (`_numbered`): alone it read as a heading of its own, as a chapter's big number alone on its
line is.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from modelhost.backends.ocr.pixels import (
    COVER,
    PAGE_FIGURE,
    Detection,
    Group,
    PixelReader,
    body_style_sizes,
    groups,
    ink_placed,
    without_turned_labels,
)
from modelhost.backends.ocr.scantable import (
    completed,
    in_table_region,
    refined,
    rows,
    table_block,
    table_blocks,
)
from modelhost.docengine.analyse import PAGE_NUMBER_SIZE, PAGE_NUMBER_ZONE, Style, analyse
from modelhost.docengine.classify import CAPTION, never_heading, unworded
from modelhost.docengine.figures import box_union
from modelhost.docengine.furniture import PAGE_NUMBER, ZONE
from modelhost.docengine.types import BBox, Block, Kind, PageContent, PageLayout, Segment, Word

#: A title region with more text than this is a heading run into its paragraph: analysis decides, not the label.
MAX_TITLE_CHARS = 160
#: A running header or footer is a line or two; a header/footer region of more rows is content the layout model
#: boxed at the page's edge (pdf-spec's table.pdf: its whole table), read as a text region, headings and all.
FURNITURE_ROWS = 2
#: A text block whose top lies within this share of a line's height of a caption's bottom, in one text region, is
#: the caption's next line (`_caption_ends`): the detector's boxes of consecutive lines touch or overlap by a few
#: points, where a paragraph after a caption stands a line or more below it.
CAPTION_LEADING = 0.5
#: Labels whose blocks change kind; a plain text region keeps what `analyse()` made of it (a header/footer region's
#: lines are furniture only as page numbers, `_page_number`).
KINDS = {"caption": Kind.CAPTION, "equation": Kind.FORMULA}
#: The side of the page each furniture label stands for.
SIDES = {"header": Kind.PAGE_HEADER, "footer": Kind.PAGE_FOOTER}


def page_style(detection: Detection) -> Style:
    """The page's style from its line heights alone (OCR sizes are detector heights, snapped: pixels.font_size)."""
    body, heads = body_style_sizes(detection)
    return Style(body_size=body or 10.0, heading_sizes=heads)


def blocks(reader: PixelReader, detection: Detection, style: Style | None = None) -> Iterator[Block]:
    """The page's blocks in reading order, each group recognised only when the consumer asks for its blocks."""
    return _numbered(_read(reader, detection, style or page_style(detection)))


def _numbered(found: Iterator[Block]) -> Iterator[Block]:
    """`found` with a heading's number joined to it: a section number set as a block of its own (big, in a box or a
    circle: normal_4pages' "2" beside "코로나-19 관련 보험 현황") on the line of the heading it numbers, read as a
    heading of its own (a chapter's big number alone on its line is one: classify.unworded). A lone number is held
    back until the next block shows whether a heading stands beside it."""
    held: Block | None = None
    for block in found:
        if held is not None:
            if _beside(held, block):
                x0, y0, x1, y1 = block.bbox
                bbox = (min(x0, held.bbox[0]), min(y0, held.bbox[1]), max(x1, held.bbox[2]), max(y1, held.bbox[3]))
                block = replace(block, text=f"{held.text.strip()} {block.text}", bbox=bbox)
            else:
                yield held
            held = None
        if block.kind is Kind.SECTION_HEADER and block.text.strip().rstrip(".").isdigit():
            held = block
        else:
            yield block
    if held is not None:
        yield held


def _beside(number: Block, heading: Block) -> bool:
    """Whether `heading` is a heading on `number`'s line (their boxes share half the shorter one's height), starting to
    its right within the heading's own line height (the gap of a number set beside its title, not a column's)."""
    if heading.kind is not Kind.SECTION_HEADER or not heading.text.strip():
        return False
    n, h = number.bbox, heading.bbox
    shared = min(n[3], h[3]) - max(n[1], h[1])
    height = h[3] - h[1]
    touch = 1.0  # points: two blocks' boxes read from one line may overlap by a pixel at 150 DPI
    return shared >= 0.5 * min(n[3] - n[1], height) and n[2] - touch <= h[0] <= n[2] + height


def _read(reader: PixelReader, detection: Detection, style: Style) -> Iterator[Block]:
    """Each group's blocks in reading order, as analysed and labelled."""
    boxes = [detection.box(i) for i in range(len(detection.quads))]
    # The bottom of the page's highest line and the top of its lowest: a block above the one (below the other) has
    # no line of the page wholly above (below) it, as a page's own number has.
    ends = (min((b[3] for b in boxes), default=0.0), max((b[1] for b in boxes), default=detection.height))
    for group in groups(detection):
        if group.label == "figure":
            yield Block(Kind.PICTURE, group.bbox)
        if not group.lines:
            continue
        words = reader.recognise(detection, group.lines)
        if _picture(group, detection.width, detection.height):
            words = without_turned_labels(words)
        if words and group.label in ("ruled", "table"):
            words = ink_placed(detection, words)  # columns are read from where the words stand
        if words:
            # A ruled group is analysed with its rules, as a text-layer page is: the ruled-table finder builds
            # the grid from them, and what is no table reads as text.
            inside = tuple(r for r in detection.rulings if _within(r, group.bbox))
            rules = inside if group.label == "ruled" else ()
            content = PageContent(1, detection.width, detection.height, words=tuple(words), rulings=rules)
            found = analyse(content, style).blocks
            if (
                rules
                and not any(b.kind is Kind.TABLE for b in found)
                and in_table_region(group.bbox, detection.regions)
            ):
                # rules the ruled-table finder makes no table of (booktabs' three rules and no vertical: it reads
                # columns as gaps no word covers, and a row whose OCR'd cells sit close covers one) where the layout
                # model boxed a table: read from the detector lines' positions, as a table region is (scantable)
                table = table_block(content.words, rules)
                found = (table,) if table is not None else found
            elif rules and in_table_region(group.bbox, detection.regions):
                found = refined(completed(found, content.words, rules), content.words, rules, group.bbox)
            if group.label == "text":
                found = _caption_ends(found, content.words)
            yield from _labelled(group, found, style, content, ends, inside)


def _caption_ends(found: tuple[Block, ...], words: tuple[Word, ...]) -> tuple[Block, ...]:
    """A caption's last lines joined to it: text that analysis parted from a caption in one text region, starting
    on the caption's next line (its top within `CAPTION_LEADING` of the median line's height under the caption's
    bottom) and not left of it. The layout model boxed them as one block, and no gap parts them: a photograph's
    caption whose last line is a link ("(https://goo.gl/VLCRBB).", acmart's sample) came out a paragraph of its own,
    and its sentence cut. A paragraph after a caption stands a gap below it, and the model boxes it apart."""
    heights = sorted(w.y1 - w.y0 for w in words)
    height = heights[len(heights) // 2] if heights else 0.0
    out: list[Block] = []
    for block in found:
        last = out[-1] if out else None
        if (
            last is not None
            and last.kind is Kind.CAPTION
            and block.kind is Kind.TEXT
            and block.text
            and abs(block.bbox[1] - last.bbox[3]) <= CAPTION_LEADING * height
            and block.bbox[0] >= last.bbox[0] - CAPTION_LEADING * height
        ):
            out[-1] = replace(last, text=f"{last.text} {block.text}", bbox=box_union([last.bbox, block.bbox]))
        else:
            out.append(block)
    return tuple(out)


def _labelled(
    group: Group,
    found: tuple[Block, ...],
    style: Style,
    content: PageContent,
    ends: tuple[float, float],
    rules: tuple[Segment, ...] = (),
) -> Iterator[Block]:
    label = group.label
    if label in ("header", "footer") and max(w.size for w in content.words) > style.body_size * 1.01:
        label = "title"  # CDLA calls a page's big first heading a header; furniture is small print
    elif label in ("header", "footer") and len(rows([(w.bbox, w) for w in content.words])) > FURNITURE_ROWS:
        label = "text"  # CDLA boxed content that tops (or ends) a page: pdf-spec's table.pdf lost its whole table
    if label == "table":
        # two tables of one header stacked in one region are two; the region's rules say which header cells span
        tables = table_blocks(content.words, rules)
        if tables:
            yield from tables
            return
    if _picture(group, content.width, content.height) or label == COVER:
        found = tuple(replace(b, kind=Kind.TEXT, level=0) if b.kind is Kind.SECTION_HEADER else b for b in found)
    if label == "title" and found and CAPTION.match(caption := " ".join(_printed(b) for b in found if b.text)):
        # A title region that opens as a caption does ("Table 2.", "Figure 3:") is the caption of what it sits by:
        # the layout model boxed a two-column page's table caption, set under its table, as a title (a heading).
        yield Block(Kind.CAPTION, box_union([b.bbox for b in found]), caption)
        return
    if label == "title" and found:
        larger = [_size(b, content) > style.body_size * 1.01 for b in found]
        if any(larger) and not all(larger):
            yield from _split_title(found, larger, style, content)
            return
        text = " ".join(_printed(b) for b in found if b.text)
        size = max(w.size for w in content.words)
        # The label does not make a heading of what no heading's words are: an ISSN line, a lone section number.
        if len(text) <= MAX_TITLE_CHARS and not never_heading(text) and not unworded(text, size, style.body_size):
            level = min((b.level for b in found if b.kind is Kind.SECTION_HEADER and b.level), default=0)
            if not level:
                level = 1 + sum(1 for s in style.heading_sizes if s > size * 1.01)
            bbox = (min(b.bbox[0] for b in found), min(b.bbox[1] for b in found),
                    max(b.bbox[2] for b in found), max(b.bbox[3] for b in found))  # fmt: skip
            yield Block(Kind.SECTION_HEADER, bbox, text, level=level)
            return
    kind = KINDS.get(label)
    for block in found:
        if (side := _page_number(block, label, style, content, ends)) is not None:
            yield replace(block, kind=side, level=0)
        elif label in SIDES and block.kind is Kind.SECTION_HEADER:
            # Small print the model boxed as a running head (its size is the body's, or it would be a title above):
            # text until repetition across pages says furniture, never a heading.
            yield replace(block, kind=Kind.TEXT, level=0)
        else:
            if kind is not None and block.kind is not Kind.TABLE:
                # a caption "1. Strip the cable" that analysis read as a list item keeps its number
                yield replace(block, kind=kind, level=0, text=_printed(block), marker="", ordered=False)
            else:
                yield block


def _picture(group: Group, width: float, height: float) -> bool:
    """Whether `group` is a figure region that is a picture on the page, not a page designed as one (`PAGE_FIGURE`)."""
    x0, y0, x1, y1 = group.bbox
    return group.label == "figure" and (x1 - x0) * (y1 - y0) < PAGE_FIGURE * width * height


def _printed(block: Block) -> str:
    # A block's text as printed: a list item's marker ("1.", "•") back in front of it, for a block that becomes a
    # kind without markers (a caption, a heading), which would otherwise lose its number.
    return f"{block.marker} {block.text}" if block.marker else block.text


def _page_number(
    block: Block, label: str, style: Style, content: PageContent, ends: tuple[float, float]
) -> Kind | None:
    """PAGE_HEADER or PAGE_FOOTER for a block that is a lone page number ("7", "Page 7 of 18": furniture.PAGE_NUMBER,
    set below `PAGE_NUMBER_SIZE` times the body, as the text path's `analyse` reads one) in a header/footer region,
    in the top or bottom `ZONE` of the page, or as the page's first or last line inside `PAGE_NUMBER_ZONE` (`ends`:
    the bottom of the page's highest line and the top of its lowest; the text path's rule, which a page whose foot
    sits an inch up needs: dmca_summary's "Page 2" at 0.89 of the page, beside its running foot): the one evidence a
    page alone gives. None for anything else (a figure's numbers are its labels: an axis's ticks)."""
    if label == "figure" or block.kind not in (Kind.TEXT, Kind.SECTION_HEADER):
        return None
    if PAGE_NUMBER.match(block.text.strip()) is None:
        return None
    if _size(block, content) >= PAGE_NUMBER_SIZE * style.body_size:
        return None  # a chapter's big number, not a page's
    if label in SIDES:
        return SIDES[label]
    if block.bbox[3] <= ZONE * content.height:
        return Kind.PAGE_HEADER
    if block.bbox[1] >= (1 - ZONE) * content.height:
        return Kind.PAGE_FOOTER
    first, last = ends
    if block.bbox[1] < first and block.bbox[3] <= PAGE_NUMBER_ZONE * content.height:
        return Kind.PAGE_HEADER
    if block.bbox[3] > last and block.bbox[1] >= (1 - PAGE_NUMBER_ZONE) * content.height:
        return Kind.PAGE_FOOTER
    return None


def _size(block: Block, content: PageContent) -> float:
    # The largest size of the words whose centres lie in the block.
    x0, y0, x1, y1 = block.bbox
    inside = [w.size for w in content.words if x0 <= (w.x0 + w.x1) / 2 <= x1 and y0 <= (w.y0 + w.y1) / 2 <= y1]
    return max(inside, default=0.0)


def _split_title(found: tuple[Block, ...], larger: list[bool], style: Style, content: PageContent) -> Iterator[Block]:
    """A title region that spans lines of body height (the layout model boxed examples/page.png's "Invoice 1042" with
    the three body lines under it): the lines set larger than the body are the heading, in one block where its first
    line was; the body lines stay what analysis made of them."""
    head = [b for b, big in zip(found, larger, strict=True) if big]
    text = " ".join(b.text for b in head if b.text)
    size = max(_size(b, content) for b in head)
    level = 1 + sum(1 for s in style.heading_sizes if s > size * 1.01)
    bbox = (min(b.bbox[0] for b in head), min(b.bbox[1] for b in head),
            max(b.bbox[2] for b in head), max(b.bbox[3] for b in head))  # fmt: skip
    heading = Block(Kind.SECTION_HEADER, bbox, text, level=level)
    placed = False
    for block, big in zip(found, larger, strict=True):
        if big:
            if not placed and not never_heading(text) and not unworded(text, size, style.body_size):
                yield heading
            elif not placed:
                yield from (replace(b, kind=Kind.TEXT, level=0) for b in head)
            placed = True
        else:
            yield block


def _within(rule: Segment, box: BBox) -> bool:
    slack = 2.0  # points: a frame's own rules lie on its edge
    return (
        box[0] - slack <= rule.x0
        and rule.x1 <= box[2] + slack
        and box[1] - slack <= rule.y0
        and rule.y1 <= box[3] + slack
    )


def read_layout(reader: PixelReader, image: object, dpi: float, number: int = 1) -> PageLayout:
    """The whole page's layout at once (for `convert` of a scanned page)."""
    detection = reader.detect(image, dpi)
    found = tuple(blocks(reader, detection))
    return PageLayout(number, detection.width, detection.height, found, detection.regions)

"""The document engine's data: what a page contains (`PageContent`) and what it means (`PageLayout`).

Every stage is a plain function from one of these to the next, so a stage can run anywhere: `read_text_layer` in a
sandboxed child process (its result crosses the process boundary by pickle), the pixel path's OCR in the `ocr`
backend, `analyse` and the emitters wherever the door is. So these are frozen, slotted dataclasses of plain values
(str, float, int, bool, tuples): picklable, hashable, comparable, no handles to pdfium or images.

Coordinates are PDF points (1/72 inch) with a TOP-LEFT origin (y grows downwards), as on a rendered page, so the
pixel path converts its pixel boxes by one scale factor (72 / dpi) and nothing flips y twice. A box is
`(x0, y0, x1, y1)` with x0 <= x1 and y0 <= y1.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: `(x0, y0, x1, y1)` in points, top-left origin.
BBox = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class Word:
    """One word of the page: its text, its box, and what its font says about it.

    From the text layer every font fact is read from the PDF; from OCR `font` is "" and `size` is the box height
    (the fonts' facts are unknown: `bold` is judged from stroke thickness (pixels.BOLD_STROKE), italic/monospace/
    math are False, and `score` is the recogniser's).
    `rotation` is the text's direction in degrees (0, 90, 180, 270), clockwise, as the page shows it: rotated table
    headers and sideways captions are words of their own direction, never run into horizontal lines.
    `line` numbers the words of one visual line in reading order (text-layer lines; -1 when unknown), so the
    analysis does not have to re-discover lines the producer already knew.
    """

    text: str
    bbox: BBox
    font: str = ""
    size: float = 0.0
    bold: bool = False
    italic: bool = False
    monospace: bool = False
    math: bool = False
    rotation: int = 0
    line: int = -1
    score: float = 1.0
    #: The letter gap (points) its letters were read across where its line is letter-spaced (a tracked title:
    #: `textlayer._letter_spaced`), else 0: the gap between two such words is wider by as much as twice this.
    tracking: float = 0.0

    @property
    def x0(self) -> float:
        return self.bbox[0]

    @property
    def y0(self) -> float:
        return self.bbox[1]

    @property
    def x1(self) -> float:
        return self.bbox[2]

    @property
    def y1(self) -> float:
        return self.bbox[3]

    @property
    def height(self) -> float:
        return self.bbox[3] - self.bbox[1]


@dataclass(frozen=True, slots=True)
class Segment:
    """A straight ruling line (a table rule, a box edge) from the page's vector paths, `width` its stroke width.

    Filled thin rectangles (how LaTeX and Word draw rules) come out as the segment along their long axis.
    """

    x0: float
    y0: float
    x1: float
    y1: float
    width: float = 1.0

    @property
    def horizontal(self) -> bool:
        return abs(self.y1 - self.y0) <= abs(self.x1 - self.x0)

    @property
    def length(self) -> float:
        return max(abs(self.x1 - self.x0), abs(self.y1 - self.y0))


#: Old name for a ruling line, kept while the pixel path's line detection moves over.
Ruling = Segment


@dataclass(frozen=True, slots=True)
class ImageRegion:
    """An image object drawn on the page: its box in points and its pixel size (0 when unknown)."""

    bbox: BBox
    pixel_width: int = 0
    pixel_height: int = 0


@dataclass(frozen=True, slots=True)
class Region:
    """One region the layout model found on a page image: its label, its box in points, and the model's score.

    Labels are the pixel path's names for CDLA's classes (layoutmodel.LABELS): "text", "title", "figure",
    "caption", "table", "header", "footer", "equation"."""

    label: str
    bbox: BBox
    score: float = 1.0


class Usability(enum.StrEnum):
    """The text layer's verdict for a page: `USABLE`, or why it is not (the page, or its regions, need OCR)."""

    USABLE = "usable"
    NO_TEXT = "no_text"  # no characters at all: a scan, or a page of pictures
    REPLACEMENT = "replacement_chars"  # U+FFFD where a glyph had no Unicode
    PRIVATE_USE = "private_use"  # glyphs mapped into the private-use area: the text is not the text
    NO_UNICODE = "no_unicode"  # fonts without a ToUnicode map: codes that are not characters
    INVISIBLE = "invisible"  # render mode 3 (an OCR layer) under a scan image: re-read, the layer may be poor
    MISMAPPED = "mismapped"  # letters no language writes (a ToUnicode map that lies): the text is not the page's


@dataclass(frozen=True, slots=True)
class PageContent:
    """Everything on one page before analysis: words, ruling lines, image regions, and the text layer's verdict.

    `number` is 1-based. `ocr_regions` are boxes (points) with no usable text that the pixel path should read: the
    whole page when the layer is unusable, or image regions big enough to hold text. `rotation` is the page's
    /Rotate (0, 90, 180, 270); boxes are already in the rotated (as displayed) frame. `regions` are the layout
    model's regions when the page was read from its pixels, or when a text-layer page that shows a table was asked
    for them (documents/engine.py, docengine.regions: its table regions are read from its words); else empty.
    `fills` are the boxes of filled rectangles drawn on the page (shaded cells, stripes, boxes behind text), at least
    a few points on each side (thinner ones are rules); they draw no text and are never pictures. `drawings` are the
    boxes of the other vector paths: curves, slanted lines, polygons and marks too small to be rules (a chart's
    lines, markers and ticks, a diagram's arrows and rounded boxes), the ink a figure drawn as vectors is made of.
    """

    number: int
    width: float
    height: float
    words: tuple[Word, ...] = ()
    rulings: tuple[Segment, ...] = ()
    images: tuple[ImageRegion, ...] = ()
    usability: Usability = Usability.USABLE
    ocr_regions: tuple[BBox, ...] = ()
    rotation: int = 0
    regions: tuple[Region, ...] = ()
    fills: tuple[BBox, ...] = ()
    drawings: tuple[BBox, ...] = ()

    @property
    def usable(self) -> bool:
        """True when the text layer can be trusted for the whole page."""
        return self.usability is Usability.USABLE


class Kind(enum.StrEnum):
    """What a block is. The values are DocTags' tag names (a section header adds its level: `..._level_N`)."""

    TITLE = "title"
    SECTION_HEADER = "section_header"
    TEXT = "text"
    LIST_ITEM = "list_item"
    CODE = "code"
    FORMULA = "formula"
    PICTURE = "picture"
    CAPTION = "caption"
    TABLE = "otsl"
    PAGE_HEADER = "page_header"
    PAGE_FOOTER = "page_footer"
    FOOTNOTE = "footnote"

    @property
    def furniture(self) -> bool:
        """Page headers and footers: repeated on every page, not part of the body text."""
        return self in (Kind.PAGE_HEADER, Kind.PAGE_FOOTER)


@dataclass(frozen=True, slots=True)
class Cell:
    """One table cell: its grid position and spans (0-based), its text, and whether it is a column header."""

    row: int
    col: int
    text: str
    row_span: int = 1
    col_span: int = 1
    header: bool = False
    bbox: BBox | None = None


@dataclass(frozen=True, slots=True)
class Table:
    """A table's grid: `rows` x `cols`, and every cell that starts a span (each grid slot belongs to one cell)."""

    rows: int
    cols: int
    cells: tuple[Cell, ...]

    def grid(self) -> list[list[Cell | None]]:
        """The rows x cols grid, each slot holding the cell that covers it (None where no cell does)."""
        out: list[list[Cell | None]] = [[None] * self.cols for _ in range(self.rows)]
        for cell in self.cells:
            for r in range(cell.row, min(cell.row + cell.row_span, self.rows)):
                for c in range(cell.col, min(cell.col + cell.col_span, self.cols)):
                    out[r][c] = cell
        return out


@dataclass(frozen=True, slots=True)
class Block:
    """One element of the page in reading order.

    `level` is a section header's level (1 = top; 0 for other kinds). `marker` is a list item's bullet or number as
    printed ("•", "1.", "a)"), stripped from `text`; `ordered` says whether it counts. `table` only for TABLE;
    `caption` is the index (in the page's blocks) of a picture's or table's caption, -1 when none. `code` keeps its
    line breaks in `text`.
    """

    kind: Kind
    bbox: BBox
    text: str = ""
    level: int = 0
    marker: str = ""
    ordered: bool = False
    table: Table | None = None
    caption: int = -1


@dataclass(frozen=True, slots=True)
class PageLayout:
    """One analysed page: its number (1-based), size in points, its blocks in reading order, and the layout model's
    regions it was read with (its PageContent's; empty for a text-layer page not asked for them), for callers that
    want the model's boxes and labels beside the blocks (a docling JSON's layout clusters)."""

    number: int
    width: float
    height: float
    blocks: tuple[Block, ...] = ()
    regions: tuple[Region, ...] = ()

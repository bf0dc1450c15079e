"""What a paragraph is: heading (and its level), title, list item, code, formula, caption, footnote or text.

The tests in order, and why each comes where it does:
- code first: monospace through and through (`CODE_SHARE` of its characters), its line breaks kept;
- formula: set in math fonts (`MATH_SHARE`), so an equation is never taken for a heading however big its symbols;
- caption: "Figure 3", "Table 2:", ... at the start;
- list item: a bullet or a number marker;
- heading: a short paragraph (at most `HEADING_WORDS` words, `HEADING_LINES` lines) set larger than the body
  (`HEADING_RATIO`), or bold at body size with a section number or few words, or a counted line standing alone set a
  little larger (`COUNTED_RATIO`: "(1) ..." in a Korean report), or a short label line in italics followed by text
  (`italic_label`); never a sentence, never mostly digits
  (chart ticks, table fragments), never small type. Its level: the depth of its section number when it has one
  ("1.1.1" is 3), else its size's rank among the document's heading sizes;
- title: the document's largest size, on the first page;
- footnote: small type in the bottom quarter of the page, starting with a marker;
- otherwise text.
Then, the whole page classified, `sections` takes back the headings that head nothing: a run of lines in one heading
style (a cover's title block), a heading closed at once by one of a higher rank, a subtitle centred under the title.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from modelhost.docengine.lines import Piece
from modelhost.docengine.paragraphs import code_text, join, marker
from modelhost.docengine.types import BBox, Block, Kind, PageContent, Word

#: A size this many times the body size, or more, is a heading's (LaTeX's \subsection is 1.2x, Word's 1.15x+).
HEADING_RATIO = 1.12
#: A counted line ("(1) ...", "1) ...", "2.1 ...") standing alone, not a sentence, set at least this much larger than
#: the body is a heading though under HEADING_RATIO: Korean reports number their sub-headings "(1)" at 12.5 pt over an
#: 11.5 pt body (1.08), in another face, not bold. 5% is well above the rounding of sizes (0.01 pt in 10).
COUNTED_RATIO = 1.05
#: Headings are short: longer paragraphs are text however they are set.
HEADING_WORDS = 20
HEADING_LINES = 3
#: A plain line (no bold, no number) of more than this many words that reads as a sentence (capitalised, ending in
#: ".", "?" or "!") is text at any size (`_plain_sentence`): the count the body-size sentence rule below has always
#: used. A page mostly of small-type table cells measures its body from the cells, and a note set at the ordinary
#: text size under the table stood "larger than the body" and came out as a `#` heading; a heading is a name, a
#: sentence that long is said, not named.
SENTENCE_WORDS = 6
#: An italic label line heading what follows it has at most this many words: as many as a line of capitals set apart
#: (below); a longer italic line standing alone is a quotation's or an emphasis's last line.
LABEL_WORDS = 8
#: Share of characters in monospace fonts that makes a paragraph code.
CODE_SHARE = 0.8
#: Share of characters in math fonts that makes a paragraph a formula.
MATH_SHARE = 0.4
#: The characters of dot leaders (`_leaders`).
LEADER_DOTS = ".·…"
#: Words of dots a paragraph holds at least for them to be leaders: a leader runs a dozen dots and more to its page
#: number; a sentence's period or an ellipsis set alone ("...", the period after a display equation) is one or two.
LEADER_RUN = 3
#: Type this much smaller than the body (or less) is small print: footnotes, affiliations.
SMALL_RATIO = 0.88
#: Small type starting below this share of the page height is a footnote, marker or not (an e-mail under a column).
FOOTNOTE_ZONE = 0.8
#: A plain line under a number three levels deep is a heading up to this many words (a subsection's name; a longer
#: line is a numbered clause of a contract or a standard, which runs on like a sentence).
DEEP_WORDS = 8
#: A line starting this many font sizes or more right of the text under it, centred over it, is set apart from the
#: text's edge (`centred_over`): a word processor's first-line indent is half an inch (3 ems at 12 pt, 3.6 at 10 pt),
#: LaTeX's 1.5 em; a centred running head over a 6-inch measure starts 8 ems in and more.
CENTRED_INDENT = 4.0
#: Deepest heading level (DocTags and Markdown both stop at 6).
MAX_LEVEL = 6

NUMBERED = re.compile(
    r"^(?:(?:chapter|section|appendix|part)\s+)?(\d{1,2}(?:\.\d{1,2}){0,4}|[A-Z](?:\.\d{1,2}){1,4})\.?\s+\S", re.I
)
#: A caption's opening: "Figure 3", "Table 2:", and chapter-numbered ones, "Figure 3-11", "Table 2.1" (the Redbook
#: numbers every figure so: "Figure 3-11 Selecting..." drawn inside its screenshot's box was taken for a label of
#: the picture and lost).
CAPTION = re.compile(
    r"^(?:figure|fig\.|table|tab\.|listing|algorithm|chart|scheme|plate)\s*[\dIVX]+(?:[-.]\d+)*[.:|]?(?:\s|$)", re.I
)
_ADDRESS = re.compile(r"\w[./]\w+/|@\w|www\.|\.(?:com|org|net)\b|^[A-Z]+-\d+(?:-\d+)*$")
#: A name joined by underscores or dots (`BANK_SCHEMA.CUSTOMERS`): code's, not prose's. A line of capitals holding
#: one is SQL or a constant (`ALTER TABLE BANK_SCHEMA.CUSTOMERS` read from a listing's pixels, where no monospace
#: font tells code apart), never a heading set in capitals like "ABSTRACT".
_IDENTIFIER = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|[A-Za-z]\.[A-Za-z]")
#: An equals sign between terms: an equation's, never a heading's.
_EQUATION = re.compile(r"\S\s*=\s*\S")
#: Two or more affiliation marks glued to a name ("JOHN F. WU1,2,3": read from pixels, the superscripts sit on the
#: line): an author line's, never a heading's. One mark alone is left be: "H2O", "COVID19" end so too.
_AFFILIATIONS = re.compile(r"[^\W\d_]\d{1,2}(?:,\d{1,2})+(?:\s|$)")
_FOOTNOTE_MARK = re.compile(r"^(?:\d{1,2}|[*†‡§¶])(?:\s|[A-Za-z])")
#: A counted line's opening: a section number (NUMBERED) or a number in parentheses or with one ("(1)", "1)").
_COUNTED = re.compile(r"^\(?\d{1,2}\)\s+\S")
#: A continuation note, the whole of its line ("Continued on next page" under a table that runs on, "(continued)",
#: "Cont'd"): set large or in italics at a table's foot or head, it names no section.
_CONTINUED = re.compile(
    r"^\(?(?:continued|cont['’]?d\.?)(?:\s+(?:on|from)\s+(?:the\s+)?(?:next|following|previous|preceding)\s+page"
    r"|\s+overleaf)?\)?[.…]*$",
    re.I,
)
#: Two lines stand on one row when their feet lie within this share of the font size of each other: the rounding of
#: loose glyph boxes (as analyse's LEADING_SLACK); the next row's line stands a whole line (1.0 and more) away.
ROW_SLACK = 0.1
#: A piece of this many words is prose, as `analyse.PROSE_WORDS` says (a sentence's stretch); a key's value is a name,
#: a date, a figure or an amount of 1 to 4 ("Onex Credit Partners, LLC", "04/23/2024 - 04/23/2029").
VALUE_WORDS = 5
#: A key whose value is longer is still a key when this many other rows of its list (or more) set a short key at its
#: x and a value at its value's x: a list of terms repeats its two columns (three rows and more with the key), where a
#: heading beside the other column of a two-column page has prose lines, not short keys, under it.
LIST_ROWS = 2


@dataclass(frozen=True, slots=True)
class Style:
    """What only the whole document knows: its body size, its heading sizes (largest first), its title's size.

    `title_size` is 0 when the document has no title-sized type of its own (its largest size is used beyond the
    first page's top, like every chapter heading of a book).
    """

    body_size: float
    heading_sizes: tuple[float, ...] = ()
    title_size: float = 0.0


def _leaders(pieces: Sequence[Piece]) -> set[int]:
    """The ids of a paragraph's dot leaders (an index's or a contents' dots to its page numbers): words of dots only,
    `LEADER_RUN` of them at least. TeX and texinfo set them in the math italic font, so they weigh for no face: a
    column of index entries is no formula. A lone period or an ellipsis is the text's own."""
    dots = {id(w) for p in pieces for w in p.words if not w.text.strip(LEADER_DOTS)}
    return dots if len(dots) >= LEADER_RUN else set()


def _share(pieces: Sequence[Piece], attr: str) -> float:
    total = 0
    hits = 0
    leaders = _leaders(pieces)
    for piece in pieces:
        for word in piece.words:
            if id(word) in leaders:
                continue
            total += len(word.text)
            hits += len(word.text) if getattr(word, attr) else 0
    return hits / total if total else 0.0


def classify(
    pieces: Sequence[Piece], style: Style, page_number: int, page_height: float, *, framed: bool = False
) -> Block:
    """The block a paragraph is. `framed` paragraphs (inside a ruled box that is no table: a figure drawn with
    rules, a sidebar) are never headings: bold lines of a syntax diagram are not the document's sections."""
    bbox = (min(p.x0 for p in pieces), min(p.y0 for p in pieces), max(p.x1 for p in pieces), max(p.y1 for p in pieces))
    text = join([p.text for p in pieces])
    size = max(p.size for p in pieces)
    if _share(pieces, "monospace") >= CODE_SHARE:
        return Block(Kind.CODE, bbox, code_text(pieces))
    if _share(pieces, "math") >= MATH_SHARE or _display_math(pieces, text):
        return Block(Kind.FORMULA, bbox, text)
    if CAPTION.match(text):
        return Block(Kind.CAPTION, bbox, text)
    mark = marker(pieces[0])
    # A numbered heading ("1. INTRODUCTION", "2.1 Roles" in bold) starts like an ordered list item: the heading test
    # comes first for numbers, a bullet is always a list item.
    level = heading_level(pieces, text, size, style) if (mark is None or mark[1]) and not framed else 0
    if level:
        if page_number == 1 and style.title_size and abs(size - style.title_size) < 0.3:
            return Block(Kind.TITLE, bbox, text)
        return Block(Kind.SECTION_HEADER, bbox, text, level=level)
    if mark is not None:
        sign, ordered = mark
        rest = text[len(sign) :].strip() if text.startswith(sign) else text
        return Block(Kind.LIST_ITEM, bbox, rest, marker=sign, ordered=ordered)
    body = style.body_size
    if size <= SMALL_RATIO * body and bbox[1] >= FOOTNOTE_ZONE * page_height:
        return Block(Kind.FOOTNOTE, bbox, text)
    if size <= SMALL_RATIO * body and bbox[1] >= 0.6 * page_height and _FOOTNOTE_MARK.match(text):
        return Block(Kind.FOOTNOTE, bbox, text)
    return Block(Kind.TEXT, bbox, text)


def margin_line(piece: Piece, style: Style, content: PageContent) -> Block:
    """A line in the page's top or bottom margin, apart from the body, as `classify` sees it, but a heading only
    when set larger than the body (`HEADING_RATIO`) and in the page's largest type: running heads are set at or
    under the body size, often bold or in capitals, which makes a body line a heading; a title set high on its page
    is its largest type, where a cover's "Front cover" label (24 pt over a 70 pt "Redpaper") is a label."""
    block = classify([piece], style, content.number, content.height)
    largest = max((w.size for w in content.words if not w.rotation), default=0.0)
    # 0.3 pt: one style's sizes, as the title's size is matched in `classify`
    heading = piece.size >= HEADING_RATIO * style.body_size and piece.size >= largest - 0.3
    if block.kind in (Kind.SECTION_HEADER, Kind.TITLE) and not heading:
        return Block(Kind.TEXT, block.bbox, block.text)
    return block


def _display_math(pieces: Sequence[Piece], text: str) -> bool:
    # A display equation: some of it in a math font, none of it prose (no word of four letters or more outside the
    # math fonts: TeX sets an equation's digits and operators in the roman font, its variables in math italic).
    leaders = _leaders(pieces)
    words = [w for p in pieces for w in p.words if id(w) not in leaders]
    if len(pieces) > 3 or len(text) > 300 or not any(w.math for w in words):
        return False
    return not any(not w.math and sum(c.isalpha() for c in w.text) >= 4 for w in words)


def never_heading(text: str) -> bool:
    """Text no heading is, whatever its size or the layout model's label: a web or mail address (set in bold on a
    cover), a clause that goes on (ending in `,` `;` `:`; `ENABLE ;` of an SQL listing), an equation (`a2 + 8 =
    12`, which the layout model boxed as a title on code_and_formula's page read from pixels), an author line
    with its affiliation marks (`_AFFILIATIONS`), or a continuation note (`_CONTINUED`)."""
    return (
        bool(_ADDRESS.search(text))
        or _CONTINUED.match(text) is not None
        or text.endswith((",", ";", ":"))
        or _EQUATION.search(text) is not None
        or _AFFILIATIONS.search(text) is not None
    )


def keyed(pieces: Sequence[Piece], column: Sequence[Piece]) -> bool:
    """Whether a one-line paragraph is a key: its row (`ROW_SLACK`) holds, beside it in its type, a value of fewer
    than `VALUE_WORDS` words ("Closing Date   04/23/2024" in a deal summary's panel of bold labels), or the first
    line of a text that runs on under it ("NOTE   Safety goals are..." in a standard, its next line starting under
    the label), or a value of any length in a list whose other rows set short keys and their values in the same two
    columns (`LIST_ROWS`: "NHNC1   National Hydro Network, Canada, Level 1" among a report's abbreviations). A
    heading stands alone on its line. The other column of a two-column page shares a heading's row in
    lines of prose that run on beside it, never under it; a line number in the margin is set in smaller type."""
    if len(pieces) != 1:
        return False
    line = pieces[0]
    slack = ROW_SLACK * line.size

    def runs_under(value: Piece) -> bool:
        return any(
            0 <= q.y0 - line.y1 + slack <= line.size and q.x0 <= line.x0 + slack and q.x1 > value.x0 for q in column
        )

    def listed(value: Piece) -> bool:
        # Other rows of the same two columns: a short key where this line starts, a value where this value starts
        # (a list of abbreviations, a form's fields), and no prose line starting there among them: a column of prose
        # beside the other column of a two-column page sets a paragraph's short last line there now and then, among
        # its full lines.
        starts = [q for q in column if abs(q.x0 - line.x0) <= slack]
        keys = [
            q
            for q in starts
            if q is not line
            and len(q.words) < VALUE_WORDS
            and any(r is not q and abs(r.x0 - value.x0) <= slack and abs(r.y1 - q.y1) <= slack for r in column)
        ]
        if len(keys) < LIST_ROWS:
            return False
        top, bottom = min(q.y0 for q in [*keys, line]), max(q.y1 for q in [*keys, line])
        return not any(len(q.words) >= VALUE_WORDS and top <= q.y0 and q.y1 <= bottom for q in starts)

    return any(
        p is not line
        and (p.x1 <= line.x0 or line.x1 <= p.x0)
        and abs(p.y1 - line.y1) <= slack
        and abs(p.size - line.size) <= slack
        and (len(p.words) < VALUE_WORDS or runs_under(p) or listed(p))
        for p in column
    )


def counts_on(pieces: Sequence[Piece], block: Block, neighbours: Sequence[Block]) -> Block:
    """A heading numbered as an ordered list item ("2. Pears" in bold) whose number follows or precedes a
    neighbouring item's of the same form ("1. Apples", "3. Plums") is an item of that list set in bold, not a
    section: the list item it is; any other block comes back as it is."""
    mark = marker(pieces[0])
    if block.kind is not Kind.SECTION_HEADER or mark is None or not mark[1]:
        return block
    sign = mark[0]
    number = _item_number(sign)
    for other in neighbours:
        theirs = _item_number(other.marker) if other.kind is Kind.LIST_ITEM and other.ordered else None
        same_form = other.marker.strip("0123456789") == sign.strip("0123456789")
        if number is not None and theirs is not None and same_form and abs(theirs - number) == 1:
            rest = block.text[len(sign) :].strip() if block.text.startswith(sign) else block.text
            return Block(Kind.LIST_ITEM, block.bbox, rest, marker=sign, ordered=True)
    return block


def sections(blocks: Sequence[Block], reach: float, words: Sequence[Word]) -> list[Block]:
    """A page's unnumbered section headings that close before they hold anything, made text. A section heading is
    followed by what it heads, so the block after it (in reading order, past pictures and furniture: a logo in a
    title block, a running foot), where that starts within `reach` of the heading's own heights below it, is
    - no heading set as it is (its level, its fonts and size, its case and alignment, `_set_alike`):
      unnumbered headings of one style one after another are emphasis (a cover's selling points, a title block's
      lines, a sidebar's bold lines), where a heading over a subheading of the same level in another face is a
      hierarchy ("Technical Amendments" in bold over "National Eligibility" in bold italics, in a memo);
    - no heading of a higher rank: a section that one above it in rank closes at once holds nothing (a cover's date
      over its "INTRODUCTION", a running head in bold over the page's first heading). Rank is the level, and the
      type size where both levels stand at `MAX_LEVEL` (a document of many sizes ranks its smaller headings all
      there: a Redbook's product name, tagline and first heading, each in a size of its own). The title is no rank
      above: a report's series name stands over its title as a heading of its own ("이슈와 논점" over a Korean
      report's title, in normal_4pages).
    And a heading set right under the title, centred on its axis (`_centred_under`), continues the title block: a
    subtitle, no section of it.
    A block further off is another part of the page (side headings in the margin, read one after another before the
    text beside them). Each block is judged by the kinds and levels all had before this pass, so every line of a run
    goes, not every other one; a numbered heading keeps its number's word, and a heading with no block after it is
    `analyse`'s to judge. `words` are the page's, whose fonts and sizes tell a heading's face."""
    body = [i for i, b in enumerate(blocks) if b.kind is not Kind.PICTURE and not b.kind.furniture]
    plain = {i for i in body if blocks[i].kind is Kind.SECTION_HEADER and not NUMBERED.match(blocks[i].text)}
    out = list(blocks)
    # The words by the heights of their centres, so a heading's own words are found by bisection: a hostile page of
    # thousands of headings costs n log n, not n squared.
    placed = sorted(((w.y0 + w.y1) / 2, n) for n, w in enumerate(words))
    heights = [y for y, _ in placed]

    def face(bbox: BBox) -> tuple[float, frozenset[str]]:
        x0, y0, x1, y1 = bbox
        span = placed[bisect.bisect_left(heights, y0) : bisect.bisect_right(heights, y1)]
        inside = [words[n] for _, n in span if x0 <= (words[n].x0 + words[n].x1) / 2 <= x1]
        return max((w.size for w in inside), default=0.0), frozenset(w.font for w in inside)

    for before, i in itertools.pairwise(body):
        if i in plain and blocks[before].kind is Kind.TITLE and _centred_under(blocks[i].bbox, blocks[before].bbox):
            out[i] = replace(blocks[i], kind=Kind.TEXT, level=0)
    for i, after in itertools.pairwise(body):
        block, following = blocks[i], blocks[after]
        bottom = block.bbox[3]
        if i not in plain or following.bbox[1] > bottom + reach * (bottom - block.bbox[1]):
            continue
        if following.kind is not Kind.SECTION_HEADER:
            continue
        (size, faces), (theirs, their_faces) = face(block.bbox), face(following.bbox)
        # 0.3 pt: one style's sizes, as the title's size is matched in `classify`
        alike = faces == their_faces and abs(size - theirs) < 0.3 and _set_alike(block, following)
        same = after in plain and following.level == block.level and alike
        capped = block.level == following.level == MAX_LEVEL
        higher = following.level < block.level or (capped and theirs > size + 0.3)
        if same or higher:
            out[i] = replace(block, kind=Kind.TEXT, level=0)
        if same:
            out[after] = replace(following, kind=Kind.TEXT, level=0)
    return out


def _plain_sentence(text: str, n_words: int) -> bool:
    """A sentence as a reader sees one, numbered like no section: a capital first, more than SENTENCE_WORDS words, a
    full stop, question or exclamation mark last ("The figures were revised after the audit.", not "2.1 Scope.")."""
    return (
        n_words > SENTENCE_WORDS and text[:1].isupper() and text.endswith((".", "?", "!")) and not NUMBERED.match(text)
    )


def _set_alike(one: Block, other: Block) -> bool:
    """Whether two lines are set alike beyond their face: both in capitals or neither, and on one left edge, one
    axis or one row (within the first's height: a left edge's or a centred line's rounding; authors' names side by
    side). "TITLE IV: MISCELLANEOUS PROVISIONS" at the margin over "Clarification of the Authority..." indented half
    an inch, in the same bold face, is a title over its first section."""
    height = one.bbox[3] - one.bbox[1]
    flush = abs(one.bbox[0] - other.bbox[0]) <= height
    centred = abs((one.bbox[0] + one.bbox[2]) / 2 - (other.bbox[0] + other.bbox[2]) / 2) <= height
    row = abs(one.bbox[1] - other.bbox[1]) <= height
    return (one.text.upper() == one.text) == (other.text.upper() == other.text) and (flush or centred or row)


def _centred_under(line: BBox, title: BBox) -> bool:
    """Whether a block stands right under the title (its top within one of its own heights of the title's foot) and
    centred on the title's axis (the midpoints within that height: a centred line's rounding, where a heading set
    flush left under a centred title is off its axis by half the difference of their widths)."""
    height = line[3] - line[1]
    near = line[1] - title[3] <= height
    return near and abs((line[0] + line[2]) / 2 - (title[0] + title[2]) / 2) <= height


def _item_number(sign: str) -> int | None:
    digits = sign.strip("().")
    return int(digits) if digits.isdigit() else None


def italic_label(pieces: Sequence[Piece], text: str) -> bool:
    """A label line: one line, all in italics, capitalised, a few words (`LABEL_WORDS`) on no sentence end. The
    paragraph splitter ends a paragraph after such a line standing alone; it heads what follows it ("Boots
    Self-Locking Nut" over its section in the AMT handbook), where an italic line with nothing after it is a
    figure's label or a by-line, which `analyse` leaves as text."""
    words = [w for p in pieces for w in p.words]
    return (
        len(pieces) == 1
        and all(w.italic and not w.bold for w in words)
        and len(words) <= LABEL_WORDS
        and text[:1].isupper()
        and not text.endswith((".", "!", "?"))
    )


def centred_over(line: BBox, block: BBox, size: float) -> bool:
    """Whether a line stands centred over a block wider than it, apart from its left edge: a running head or a
    by-line over the page's text, where a label line heading the text starts at its left edge or its paragraphs'
    indent ("No mandate" in bold, three ems in, over a memo's justified paragraph). Centred: the two midpoints within
    one font size (`size`) of each other, the line starting more than `CENTRED_INDENT` font sizes in."""
    inset = line[0] - block[0]
    return inset > CENTRED_INDENT * size and abs((line[0] + line[2]) / 2 - (block[0] + block[2]) / 2) <= size


def unworded(text: str, size: float, body: float) -> bool:
    """Text whose characters name no section, whatever its size or the layout model's label: under two letters (tick
    labels, page numbers, table fragments; a chapter's number set 1.5 times the body, `size` against `body`, is the
    exception), or more digits than letters unless numbered as a section (an issue number, "제1695호", "No. 1695"; an
    ISSN; a date; a figure)."""
    letters = sum(c.isalpha() for c in text)
    if letters < 2:
        return not (text.strip(".").isdigit() and size >= 1.5 * body)
    return sum(c.isdigit() for c in text) > letters and not NUMBERED.match(text)


def heading_level(pieces: Sequence[Piece], text: str, size: float, style: Style) -> int:
    """The heading level of a paragraph (1 = top), or 0 when it is no heading."""
    body = style.body_size
    n_words = len(text.split())
    if len(pieces) > HEADING_LINES or n_words > HEADING_WORDS or not text:
        return 0
    letters = sum(c.isalpha() for c in text)
    big = size >= HEADING_RATIO * body
    if unworded(text, size, body):
        return 0  # tick labels, page numbers, issue numbers, dates
    if never_heading(text) or (text.endswith(".") and n_words > SENTENCE_WORDS and not big):
        return 0  # a sentence, not a heading
    bold = all(w.bold for p in pieces for w in p.words)
    if big and not bold and _plain_sentence(text, n_words):
        return 0  # a sentence set larger than the small type around it, with no heading's mark but its size
    italic = all(w.italic for p in pieces for w in p.words[1:]) and len(pieces[0].words) > 1
    numbered = NUMBERED.match(text)
    # Numbered small capitals or capitals set apart ("1. INTRODUCTION", "ABSTRACT"): LaTeX classes mark headings so.
    # Only a cased script has capitals: Arabic, Hebrew, Korean or Chinese text equals its upper case without being
    # set in capitals (right_to_left_02's diagram labels, Tajawal at body size, were taken for headings so).
    cased = sum(c.isupper() for c in text) >= letters / 2
    capitals = text.upper() == text and cased and letters >= 4 and len(pieces) == 1 and n_words <= 8 and not big
    capitals = capitals and not _IDENTIFIER.search(text)
    # Counted and alone: one line, a number first, set a little larger than the body ("(1) 상위법에 반하는...").
    counted = (numbered or _COUNTED.match(text)) and len(pieces) == 1 and size >= COUNTED_RATIO * body
    if not big:
        # At body size a heading must be set apart: bold; numbered and in capitals or italics ("3.1. Emission line
        # fluxes" in AASTeX); one to three words in capitals on a line of their own ("ABSTRACT"); or a label line
        # in italics (`italic_label`: the analysis keeps it only when text follows it).
        marked = bold or (numbered and (capitals or italic)) or (capitals and n_words <= 3) or counted
        # A number three levels deep on a short line of its own ("3.1.4 Hydrographic", set plain in the GeoBase
        # report): a list counts with one number, a section so deep only in a document's own numbering.
        deep = numbered is not None and numbered.group(1).count(".") >= 2 and len(pieces) == 1
        marked = marked or (deep and n_words <= DEEP_WORDS)
        marked = marked or italic_label(pieces, text)
        if not marked or size < SMALL_RATIO * body:
            return 0
        if not numbered and n_words > 12:
            return 0
        if text.endswith("."):
            return 0
    if numbered:
        number = numbered.group(1)
        return min(number.count(".") + 1, MAX_LEVEL)
    sizes = [s for s in style.heading_sizes if not (style.title_size and abs(s - style.title_size) < 0.3)]
    larger = sum(1 for s in sizes if s > size + 0.3)
    if not big:
        larger = len(sizes)
    return min(larger + 1, MAX_LEVEL)

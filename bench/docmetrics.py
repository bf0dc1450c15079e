"""Measures of a document converter's output against ground truth, each computed on Markdown stripped of its syntax.

Both sides (the ground truth and a tool's output) are parsed by the same Markdown parser (markdown-it-py, CommonMark
plus GFM tables) into a `Parsed`: the plain text, the headings with their levels, the tables as rows of cells, and the
body paragraphs. Plain text (pdftotext, OCR lines) parses as paragraphs, so every tool is read the same way.

- `cer`: character error rate, Levenshtein distance / reference length, on normalised text (NFKC, one space for any
  run of white space, typographic quotes and dashes folded). Reading columns in the wrong order raises it too.
- `word_recall`: the share of the reference's words (a multiset) found in the output, in any order.
- `headings`: reference headings found among the output's headings (fuzzy text match, one to one); false headings
  are output headings that match none; level agreement is the share of consecutive found headings whose step (deeper,
  same, shallower) is the reference's, so a tool that starts at `##` where the reference starts at `#` is not blamed.
- `tables`: each reference table paired one to one with the output table that holds most of its cells; cell recall
  is the share of reference cells whose text is a cell of the paired table. A cell merged into its neighbour, dropped,
  or a table emitted as plain text, is not found. Output tables paired with nothing are false tables.
- `order`: the share of reference sentences (of `MIN_SENTENCE_WORDS` words or more) whose words come out whole, in
  one contiguous run of the output's words: what a two-column page read straight across destroys.

Pure functions of strings, no I/O: bench/documents_quality.py and the corpus acceptance test share them.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token
from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

#: A sentence shorter than this says nothing about reading order: a three-word line comes out whole from any tool,
#: column-crossing or not, and would dilute the measure towards 1.
MIN_SENTENCE_WORDS = 6

#: Fuzzy score (rapidfuzz ratio, 0-100) at which an output heading counts as a reference heading. High enough that
#: "Results" is not "Related results", low enough that one OCR slip or a dropped section number's dot still matches.
HEADING_MATCH = 85.0

_FOLD = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u00ad": None,  # soft hyphen: invisible in print, so never an error
        "\u00a0": " ",
    }
)
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")
#: A sentence ends at . ! or ? followed by white space and an upper-case letter, a digit or an opening quote/bracket.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")

#: CommonMark plus the two GFM extensions converters emit: pipe tables and ~~strikethrough~~ (pymupdf4llm marks
#: struck-out text so; its words still count as text).
_BR = re.compile(r"<br\s*/?>", re.I)
_PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])


@dataclass(slots=True)
class Heading:
    """A heading's text and its level (1 for `#`)."""

    text: str
    level: int


@dataclass(slots=True)
class Parsed:
    """A Markdown document reduced to what the measures read."""

    text: str
    headings: list[Heading] = field(default_factory=list)
    tables: list[list[list[str]]] = field(default_factory=list)
    paragraphs: list[str] = field(default_factory=list)


def normalise(text: str) -> str:
    """NFKC (ligatures, full-width forms), quotes and dashes folded, white space runs to one space, stripped."""
    text = unicodedata.normalize("NFKC", text).translate(_FOLD)
    return _SPACE.sub(" ", text).strip()


def words(text: str) -> list[str]:
    """The lower-cased word tokens (letters, digits, underscore runs) of `text`, in order."""
    return _WORD.findall(normalise(text).lower())


def _key(text: str) -> str:
    """Text reduced to its words, for matching headings and cells: case, punctuation and dot leaders do not count."""
    return " ".join(words(text))


def _inline_text(token: Token) -> str:
    """The visible text of an inline token: text, code spans and line breaks; no link targets, no HTML tags."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak") or (child.type == "html_inline" and _BR.match(child.content)):
            parts.append("\n")  # <br>: pymupdf4llm's line break inside a cell, which separates words
        elif child.type == "image":
            parts.append(_inline_text(child))
    return "".join(parts)


def parse_markdown(markdown: str) -> Parsed:
    """Parse Markdown (or plain text) into its plain text, headings, tables and paragraphs.

    HTML comments such as docling's `<!-- image -->` are dropped; code blocks keep their text.
    """
    tokens = _PARSER.parse(markdown)
    blocks: list[str] = []
    headings: list[Heading] = []
    tables: list[list[list[str]]] = []
    paragraphs: list[str] = []
    table: list[list[str]] | None = None
    row: list[str] | None = None
    level = 0
    in_cell = False
    for i, token in enumerate(tokens):
        kind = token.type
        if kind == "heading_open":
            level = int(token.tag[1:])
        elif kind == "table_open":
            table = []
        elif kind == "table_close" and table is not None:
            tables.append(table)
            blocks.append("\n".join(" ".join(r) for r in table))
            table = None
        elif kind == "tr_open":
            row = []
        elif kind == "tr_close" and table is not None and row is not None:
            table.append(row)
            row = None
        elif kind in ("th_open", "td_open"):
            in_cell = True
        elif kind in ("th_close", "td_close"):
            in_cell = False
        elif kind == "inline":
            text = _inline_text(token)
            if in_cell and row is not None:
                row.append(normalise(text))
            elif level:
                if words(text):  # a bare "#" line is no heading anyone reads
                    headings.append(Heading(normalise(text), level))
                blocks.append(text)
                level = 0
            else:
                blocks.append(text)
                if i > 0 and tokens[i - 1].type == "paragraph_open":
                    paragraphs.append(normalise(text))
        elif kind in ("fence", "code_block"):
            blocks.append(token.content)
    return Parsed(normalise("\n".join(blocks)), headings, tables, paragraphs)


def char_errors(output: str, reference: str) -> tuple[int, int]:
    """(Levenshtein distance, reference length) on normalised text: the counts a corpus-wide CER adds up."""
    out, ref = normalise(output), normalise(reference)
    return Levenshtein.distance(out, ref), len(ref)


def cer(output: str, reference: str) -> float:
    """Character error rate of `output` against `reference`; 0 for two empty texts, 1 for output of an empty one."""
    errors, length = char_errors(output, reference)
    if not length:
        return 1.0 if errors else 0.0
    return errors / length


def word_hits(output: str, reference: str) -> tuple[int, int]:
    """(reference words found in the output, reference words), counted with multiplicity, in any order."""
    ref = Counter(words(reference))
    out = Counter(words(output))
    return sum(min(n, out[w]) for w, n in ref.items()), sum(ref.values())


def word_recall(output: str, reference: str) -> float:
    """Share of the reference's words found in the output, counted with multiplicity, in any order."""
    found, total = word_hits(output, reference)
    return found / total if total else 1.0


@dataclass(slots=True)
class HeadingScore:
    """Reference headings found, the reference's count, false headings, and level agreement (None: under 2 found)."""

    found: int
    total: int
    false: int
    level_agreement: float | None
    missed: list[str] = field(default_factory=list)
    spurious: list[str] = field(default_factory=list)


def _pair(scores: dict[tuple[int, int], float], threshold: float) -> dict[int, int]:
    """One-to-one pairing, best score first: reference index -> output index, pairs at or above `threshold`."""
    pairs: dict[int, int] = {}
    taken: set[int] = set()
    for (r, o), score in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])):
        if score >= threshold and r not in pairs and o not in taken:
            pairs[r] = o
            taken.add(o)
    return pairs


def _step(a: int, b: int) -> int:
    return (b > a) - (b < a)


def headings(output: Sequence[Heading], reference: Sequence[Heading]) -> HeadingScore:
    """Score the output's headings against the reference's (see the module docstring)."""
    ref_keys = [_key(h.text) for h in reference]
    out_keys = [_key(h.text) for h in output]
    scores = {(r, o): fuzz.ratio(rk, ok) for r, rk in enumerate(ref_keys) for o, ok in enumerate(out_keys) if rk and ok}
    pairs = _pair(scores, HEADING_MATCH)
    found = sorted(pairs)
    agree = [
        _step(reference[a].level, reference[b].level) == _step(output[pairs[a]].level, output[pairs[b]].level)
        for a, b in itertools.pairwise(found)
    ]
    matched_out = set(pairs.values())
    return HeadingScore(
        found=len(pairs),
        total=len(reference),
        false=len(output) - len(pairs),
        level_agreement=sum(agree) / len(agree) if agree else None,
        missed=[reference[r].text for r in range(len(reference)) if r not in pairs],
        spurious=[output[o].text for o in range(len(output)) if o not in matched_out],
    )


@dataclass(slots=True)
class TableScore:
    """Reference cells found (in the paired tables), reference cells in all, tables found, and false tables."""

    cells_found: int
    cells_total: int
    found: int
    total: int
    false: int

    @property
    def cell_recall(self) -> float | None:
        """Share of reference cells found; None where the reference has no table."""
        return self.cells_found / self.cells_total if self.cells_total else None


#: A reference table counts as found when its paired output table holds at least this share of its cells: a table
#: that kept a header row and lost the rest was not found, it was glimpsed.
TABLE_FOUND = 0.5


def _cells(table: Sequence[Sequence[str]]) -> Counter[str]:
    return Counter(k for row in table for cell in row if (k := _key(cell)))


def tables(output: Sequence[Sequence[Sequence[str]]], reference: Sequence[Sequence[Sequence[str]]]) -> TableScore:
    """Score the output's tables against the reference's (see the module docstring)."""
    ref_cells = [_cells(t) for t in reference]
    out_cells = [_cells(t) for t in output]
    scores = {
        (r, o): float(sum((rc & oc).values())) for r, rc in enumerate(ref_cells) for o, oc in enumerate(out_cells)
    }
    pairs = _pair(scores, 1.0)
    total_cells = sum(sum(rc.values()) for rc in ref_cells)
    found_cells = sum(int(scores[r, o]) for r, o in pairs.items())
    found = sum(1 for r, o in pairs.items() if scores[r, o] >= TABLE_FOUND * sum(ref_cells[r].values()))
    return TableScore(found_cells, total_cells, found, len(reference), len(output) - len(pairs))


def sentences(paragraphs: Sequence[str]) -> list[str]:
    """The sentences of `MIN_SENTENCE_WORDS` words or more in the paragraphs, split at sentence ends."""
    out: list[str] = []
    for paragraph in paragraphs:
        for sentence in _SENTENCE_END.split(paragraph):
            if len(words(sentence)) >= MIN_SENTENCE_WORDS:
                out.append(sentence)
    return out


@dataclass(slots=True)
class OrderScore:
    """Reference sentences that came out whole, of how many."""

    whole: int
    total: int
    broken: list[str] = field(default_factory=list)

    @property
    def share(self) -> float | None:
        """Share kept whole; None where the reference has no sentence long enough to judge."""
        return self.whole / self.total if self.total else None


def order(output: str, reference_sentences: Sequence[str]) -> OrderScore:
    """How many reference sentences appear as one contiguous run of the output's words."""
    haystack = " " + " ".join(words(output)) + " "
    whole, broken = 0, []
    for sentence in reference_sentences:
        if " " + " ".join(words(sentence)) + " " in haystack:
            whole += 1
        else:
            broken.append(sentence)
    return OrderScore(whole, len(reference_sentences), broken)


@dataclass(slots=True)
class Scores:
    """Every measure of one output against one reference, as counts (so a corpus adds counts, not averages)."""

    char_errors: int
    chars: int
    words_found: int
    words: int
    headings: HeadingScore
    tables: TableScore
    order: OrderScore

    @property
    def cer(self) -> float:
        """Character error rate (1.0 for output where the reference is empty)."""
        return self.char_errors / self.chars if self.chars else float(bool(self.char_errors))

    @property
    def word_recall(self) -> float:
        """Share of the reference's words found (1.0 for an empty reference)."""
        return self.words_found / self.words if self.words else 1.0


def score(output: str, reference: Parsed) -> Scores:
    """Parse a tool's Markdown (or plain text) output and measure it against a parsed reference."""
    out = parse_markdown(output)
    errors, chars = char_errors(out.text, reference.text)
    found, total = word_hits(out.text, reference.text)
    return Scores(
        errors,
        chars,
        found,
        total,
        headings(out.headings, reference.headings),
        tables(out.tables, reference.tables),
        order(out.text, sentences(reference.paragraphs)),
    )

"""Where a tool's character errors come from on the dev pages (issue 34: the text path's CER on pages with tables).

Reads a `bench/documents_quality.py --save` folder and, for each DEV file every named tool finished, prints each
tool's edit distance to the reference (docmetrics' CER counts), what it would be with every span written once
(`spans once`: a row's run of equal adjacent cells kept in its first cell, the way pymupdf4llm writes a merged cell;
docling-core, and our Markdown after it, write a span's text in every column it covers, and the corpus's references
do too, so this measures a class, it is no fix), and its largest edit runs, output beside reference, to be sorted into
classes by eye. A reference that holds only the page's tables (most of tables-dev's) makes CER the page's other text:
such files are marked `tables-only` and left out of the totals. Held-out files (`doccorpus.HELD_OUT`,
`HELD_OUT_GROUPS`) are never read, listed, named or counted.

    .venv/bin/python bench/documents_quality.py --tools modelhost pymupdf4llm --groups born-digital tables-dev \
        --save out/
    .venv/bin/python bench/cer_gap.py out/ [--tools modelhost pymupdf4llm] [--files redp] [--top 5]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rapidfuzz.distance import Levenshtein

import doccorpus
import docmetrics

#: Equal characters under this many between two edits join them into one run: a moved sentence aligns a space or a
#: common word here and there, and one run per block moved is what a reader classifies.
JOIN = 12
#: A reference shorter than this share of the page's text layer holds the page's tables only (tables-dev's
#: `amazon_sustainability_*` hold 0.95-0.98 of it, leaving out running heads; its table-only pages 0.02-0.30).
WHOLE_PAGE = 0.75


@dataclass(frozen=True, slots=True)
class Run:
    """One run of edits: its cost and the output's and the reference's text over it."""

    cost: int
    output: str
    reference: str


def runs(output: str, reference: str, join: int = JOIN) -> list[Run]:
    """The edit runs of `output` against `reference` (both normalised text), costliest first; their costs add up to
    the Levenshtein distance."""
    found: list[list[int]] = []  # cost, output start, output end, reference start, reference end
    for op in Levenshtein.opcodes(output, reference):
        if op.tag == "equal":
            if found and op.src_end - op.src_start >= join:
                found[-1].append(0)  # closed
            continue
        cost = max(op.src_end - op.src_start, op.dest_end - op.dest_start)
        if found and len(found[-1]) == 5:
            found[-1][0] += cost
            found[-1][2], found[-1][4] = op.src_end, op.dest_end
        else:
            found.append([cost, op.src_start, op.src_end, op.dest_start, op.dest_end])
    out = [Run(r[0], output[r[1] : r[2]], reference[r[3] : r[4]]) for r in found]
    return sorted(out, key=lambda r: -r.cost)


def spans_once(markdown: str) -> str:
    """`markdown`'s text as docmetrics reads it, but each row's run of equal adjacent non-empty cells written once."""
    parsed = docmetrics.parse_markdown(markdown)
    text, done, at = parsed.text, [], 0
    for table in parsed.tables:  # docmetrics writes a row as its cells joined by spaces, rows in order
        for row in table:
            once = [cell if c == 0 or cell != row[c - 1] else "" for c, cell in enumerate(row)]
            whole, short = docmetrics.normalise(" ".join(row)), docmetrics.normalise(" ".join(once))
            found = text.find(whole, at) if whole else -1
            if found < 0:
                continue
            done.append(text[at:found] + short)
            at = found + len(whole)
    done.append(text[at:])
    text = "".join(done)
    return docmetrics.normalise(text)


def whole_page(entry: doccorpus.Entry) -> bool:
    """Whether the entry's reference holds the page's text, not its tables only (see WHOLE_PAGE)."""
    if entry.group != "tables-dev":
        return True  # docling's and the office pages' references are of whole pages
    import pypdfium2

    document = pypdfium2.PdfDocument(entry.pdf)
    try:
        layer = " ".join(page.get_textpage().get_text_range() for page in document)
    finally:
        document.close()
    return len(entry.reference().text) >= WHOLE_PAGE * len(docmetrics.normalise(layer))


def dev_outputs(
    save: Path, tools: Sequence[str], entries: Sequence[doccorpus.Entry]
) -> Iterator[tuple[doccorpus.Entry, dict[str, str]]]:
    """Each dev entry with every tool's saved Markdown, where every tool has one; held-out entries are skipped
    before their outputs are opened."""
    for entry in entries:
        if entry.split != "dev":
            continue
        paths = {tool: save / tool / (entry.name.replace("/", "__") + ".md") for tool in tools}
        if all(path.exists() for path in paths.values()):
            yield entry, {tool: path.read_text(encoding="utf-8") for tool, path in paths.items()}


def report_lines(
    items: Iterator[tuple[doccorpus.Entry, dict[str, str]]], top: int, whole: bool | None = None
) -> Iterator[str]:
    """Per file each tool's errors, spans-once errors and top runs; then the totals over whole-page references.
    `whole` forces every file's whole-page flag (tests); None reads it from the page."""
    totals: dict[str, list[int]] = {}
    for entry, outputs in items:
        reference = entry.reference().text
        is_whole = whole_page(entry) if whole is None else whole
        figures = []
        for tool, markdown in outputs.items():
            text = docmetrics.parse_markdown(markdown).text
            errors = Levenshtein.distance(text, reference)
            once = Levenshtein.distance(spans_once(markdown), reference)
            figures.append(f"{tool} {errors} (spans once {once})")
            if is_whole:
                total = totals.setdefault(tool, [0, 0, 0])
                total[0] += errors
                total[1] += once
                total[2] += len(reference)
        kind = "" if is_whole else ", tables-only"
        yield f"{entry.name} ({len(reference)} chars{kind}): " + "; ".join(figures)
        for tool, markdown in outputs.items():
            for run in runs(docmetrics.parse_markdown(markdown).text, reference)[:top]:
                yield f"  {tool} {run.cost}: {run.output[:100]!r} for {run.reference[:100]!r}"
    for tool, (errors, once, chars) in totals.items():
        chars = max(chars, 1)
        yield f"whole-page dev references, {tool}: CER {errors / chars:.3f}, spans once {once / chars:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("save", type=Path, help="a documents_quality.py --save folder")
    parser.add_argument("--tools", nargs="+", default=["modelhost", "pymupdf4llm"])
    parser.add_argument("--files", nargs="+", default=None, help="only entries whose name contains one of these")
    parser.add_argument("--top", type=int, default=5, help="edit runs listed per file and tool")
    args = parser.parse_args()
    entries = [e for e in doccorpus.entries() if not args.files or any(f in e.name for f in args.files)]
    for line in report_lines(dev_outputs(args.save, args.tools, entries), args.top):
        print(line)


if __name__ == "__main__":
    main()

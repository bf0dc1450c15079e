"""Rule checks on real documents: modelhost (text path and pixels), pymupdf4llm and pdftotext on the probe set.

tests/corpus/documents/probe/ holds real PDFs nobody here tuned on when they were added, and `checks.jsonl`, rule
checks in olmOCR-bench's style written from the rendered pages before any tool ran (its README says how). Each check
passes or fails on a tool's whole output for that file:

- `present` / `absent`: the text occurs / does not occur;
- `order`: `before` occurs ahead of `after`;
- `heading`: a Markdown heading reads the text (its section number aside);
- `table`: a table cell reads `cell` and its neighbour `up`/`down`/`left`/`right` reads the named text.

Text is compared after `_flat`: Markdown marks dropped (list numbers kept: a list that loses "23." fails), a hyphen
at a line's end joined, `docmetrics.normalise`d. `present`, `absent` and `order` allow one edit in `EDITS_PER` chars.
Headings and tables come from `docmetrics.parse_markdown`, as bench/documents_quality.py reads them.

    .venv/bin/python bench/documents_checks.py [--tools modelhost modelhost-pixels pymupdf4llm pdftotext]
        [--files dmca irs] [--save outputs/] [--rescore outputs/] [--verbose] [--json out.json]

The report prints each tool's passes by kind and by class (what a check probes: furniture, columns, headings, ...),
and with `--verbose` every failed check. The probe is a third split beside dev and held-out; its README says which
checks were written before measuring and whether the engine was since tuned on it.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

import doccorpus
import docmetrics
import doctools

#: The probe set and its checks (see its README).
PROBE = doccorpus.CORPUS / "probe"
CHECKS = PROBE / "checks.jsonl"

#: One edit allowed per this many characters of a checked text: an OCR layer's slip or a ligature read two ways
#: should not fail a sentence that is otherwise whole, while a dropped word (5+ characters) in a 40-character
#: sentence still fails. olmOCR-bench sets `max_diffs` per test; one rule for all keeps these checks hand-free.
EDITS_PER = 20

#: What the tools run without --tools: both modelhost paths and the two baselines the issue measures against.
DEFAULT_TOOLS = ("modelhost", "modelhost-pixels", "pymupdf4llm", "pdftotext")

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TAG = re.compile(r"<[^>]+>")
_HEADING_MARK = re.compile(r"^\s{0,3}#{1,6}\s+", re.M)
_RULE_ROW = re.compile(r"^\s*\|?[\s:|-]+\|[\s:|-]*$", re.M)  # a pipe table's |---|---| line
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>])")
_EMPHASIS = re.compile(r"\*+|(?<!\w)_+|_+(?!\w)")  # * anywhere, _ only at a word's edge (DT_UUID keeps its _)
_LINE_HYPHEN = re.compile(r"(?<=[a-z])-\s*\n\s*(?=[a-z])")
_NUMBERING = re.compile(r"^(?:\d+(?:\.\d+)*\.?\s+)+")


@dataclass(slots=True)
class Check:
    """One rule check of checks.jsonl."""

    id: str
    pdf: str
    page: int
    type: str
    kind: str  # the check's `class`: what it probes
    fields: dict[str, Any]

    @classmethod
    def load(cls, line: str) -> Check:
        data = json.loads(line)
        return cls(data["id"], data["pdf"], data["page"], data["type"], data["class"], data)


def load_checks(path: Path = CHECKS) -> list[Check]:
    """The checks of `path`, in file order."""
    return [Check.load(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _flat(markdown: str) -> str:
    """The output's text as a reader sees it: comments, tags, escapes and emphasis gone, table pipes as spaces, a
    word hyphenated at a line's end joined, then `docmetrics.normalise`d. List numbers and bullets' words stay."""
    text = _COMMENT.sub(" ", markdown)
    text = _RULE_ROW.sub(" ", text)
    text = _TAG.sub(" ", text)
    text = _HEADING_MARK.sub("", text)
    text = _ESCAPE.sub(r"\1", text)
    text = _EMPHASIS.sub("", html.unescape(text)).replace("|", " ")
    text = _LINE_HYPHEN.sub("", text.replace("\u00ad\n", "").replace("\ufffe", ""))
    return docmetrics.normalise(text)


def _find(needle: str, hay: str, last: bool = False) -> int:
    """Where `needle` occurs in `hay` (first, or last with `last`), within its edit allowance; -1 if nowhere."""
    needle = docmetrics.normalise(needle)
    at = hay.rfind(needle) if last else hay.find(needle)
    allowed = len(needle) // EDITS_PER
    if at >= 0 or allowed == 0 or not hay:
        return at
    found = fuzz.partial_ratio_alignment(needle, hay)
    if found is None:
        return -1
    if Levenshtein.distance(needle, hay[found.dest_start : found.dest_end]) <= allowed:
        return found.dest_start
    return -1


def _key(text: str) -> str:
    return " ".join(docmetrics.words(text))


def _table_hit(tables: list[list[list[str]]], check: Check) -> bool:
    want = _key(check.fields["cell"])
    steps = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
    for table in tables:
        for r, row in enumerate(table):
            for c, cell in enumerate(row):
                if _key(cell) != want:
                    continue
                good = True
                for side, (dr, dc) in steps.items():
                    if side not in check.fields:
                        continue
                    rr, cc = r + dr, c + dc
                    inside = 0 <= rr < len(table) and 0 <= cc < len(table[rr])
                    if not inside or _key(table[rr][cc]) != _key(check.fields[side]):
                        good = False
                if good:
                    return True
    return False


def passes(check: Check, flat: str, parsed: docmetrics.Parsed) -> bool:
    """Whether `check` holds for a tool's output, given as `flat` (its `_flat`) and `parsed` (its parse)."""
    f = check.fields
    if check.type == "present":
        return _find(f["text"], flat) >= 0
    if check.type == "absent":
        return _find(f["text"], flat) < 0
    if check.type == "order":
        first, last = _find(f["before"], flat), _find(f["after"], flat, last=True)
        return 0 <= first < last
    if check.type == "heading":
        want = _NUMBERING.sub("", _key(f["text"]))
        return any(_NUMBERING.sub("", _key(h.text)) == want for h in parsed.headings)
    if check.type == "table":
        return _table_hit(parsed.tables, check)
    raise ValueError(f"{check.id}: unknown check type {check.type!r}")


def score(checks: list[Check], outputs: dict[str, str]) -> dict[str, bool]:
    """Each check's result on the outputs of one tool (by PDF name); a PDF with no output fails its checks."""
    results: dict[str, bool] = {}
    prepared: dict[str, tuple[str, docmetrics.Parsed]] = {}
    for check in checks:
        output = outputs.get(check.pdf)
        if output is None:
            results[check.id] = False
            continue
        if check.pdf not in prepared:
            prepared[check.pdf] = (_flat(output), docmetrics.parse_markdown(output))
        flat, parsed = prepared[check.pdf]
        results[check.id] = passes(check, flat, parsed)
    return results


def report(checks: list[Check], results: dict[str, dict[str, bool]], verbose: bool) -> None:
    """Print passes per tool: in all, by kind, by class; with `verbose`, the failed checks."""
    tools = list(results)
    print(f"probe: {len(checks)} checks on {len({c.pdf for c in checks})} files\n")

    def table(label: str, groups: dict[str, list[Check]]) -> None:
        print(f"| {label} | checks | " + " | ".join(tools) + " |")
        print("|---|---|" + "---|" * len(tools))
        for name, members in sorted(groups.items()):
            cells = [str(sum(results[t][c.id] for c in members)) for t in tools]
            print(f"| {name} | {len(members)} | " + " | ".join(cells) + " |")
        print()

    table("all", {"all": checks})
    by_type: dict[str, list[Check]] = defaultdict(list)
    by_class: dict[str, list[Check]] = defaultdict(list)
    for check in checks:
        by_type[check.type].append(check)
        by_class[check.kind].append(check)
    table("kind", by_type)
    table("class", by_class)
    if verbose:
        for tool in tools:
            failed = [c for c in checks if not results[tool][c.id]]
            print(f"{tool}: {len(failed)} failed")
            for c in failed:
                what = {k: v for k, v in c.fields.items() if k not in ("id", "pdf", "page", "type", "class")}
                print(f"  {c.id} [{c.type}/{c.kind}] {json.dumps(what, ensure_ascii=False)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", nargs="+", default=list(DEFAULT_TOOLS), choices=sorted(doctools.TOOLS))
    parser.add_argument("--files", nargs="+", default=None, help="only PDFs whose name contains one of these")
    parser.add_argument("--save", type=Path, default=None, help="write each output to SAVE/TOOL/FILE.md")
    parser.add_argument("--rescore", type=Path, default=None, help="convert nothing: score a --save folder again")
    parser.add_argument("--verbose", action="store_true", help="list every failed check")
    parser.add_argument("--json", type=Path, default=None, help="write every check's result to this file")
    args = parser.parse_args()

    checks = load_checks()
    if args.files:
        checks = [c for c in checks if any(part in c.pdf for part in args.files)]
    pdfs = sorted({c.pdf for c in checks})
    results: dict[str, dict[str, bool]] = {}
    for name in args.tools:
        outputs: dict[str, str] = {}
        if args.rescore is not None:
            for pdf in pdfs:
                saved = args.rescore / name / (Path(pdf).stem + ".md")
                if saved.exists():
                    outputs[pdf] = saved.read_text(encoding="utf-8")
        else:
            tool = doctools.TOOLS[name]()
            try:
                tool.start()
            except doctools.Unavailable as exc:
                print(f"{name}: unavailable: {exc}", file=sys.stderr)
                continue
            try:
                for pdf in pdfs:
                    try:
                        outputs[pdf] = tool.convert(PROBE / pdf)
                    except Exception as exc:  # one file failing is that file's checks failing, not the run
                        print(f"  {name} failed on {pdf}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    if args.save is not None and pdf in outputs:
                        place = args.save / name / (Path(pdf).stem + ".md")
                        place.parent.mkdir(parents=True, exist_ok=True)
                        place.write_text(outputs[pdf], encoding="utf-8")
                    print(f"  {name}: {pdf} done", file=sys.stderr)
            finally:
                tool.close()
        results[name] = score(checks, outputs)
    report(checks, results, args.verbose)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
    counts = Counter({t: sum(r.values()) for t, r in results.items()})
    print("passed: " + ", ".join(f"{t} {n}/{len(checks)}" for t, n in counts.items()))


if __name__ == "__main__":
    main()

"""Document quality: modelhost against pymupdf4llm, pdftotext and RapidOCR on real PDFs with ground truth.

The corpus is tests/corpus/documents/ (see its README and bench/doccorpus.py), reported in two splits, each by group:
`dev`, the files one may look at while changing the engine, and `held-out`, the files only measured
(`doccorpus.HELD_OUT`, `doccorpus.HELD_OUT_GROUPS`). A change that improves dev and worsens held-out is a regression.
Held-out files' own rows (per file, and `--verbose`'s headings) are not printed unless `--show-held-out` asks: their
split's totals are what one reads while changing the engine. The measures are
bench/docmetrics.py:
CER and word recall after stripping Markdown, headings found (and level agreement, and false headings), tables found
and cell text recall (and false tables), reading order (ground-truth sentences that come out whole), seconds per page.

Every tool reads the same files in the same run; within each round the tools take turns file by file, in an order
that rotates, so load from a neighbour on a shared machine hits each tool alike. Times are medians over the rounds;
each tool converts one small file before timing, so a lazily loaded model is not billed to the first file. Speed is
only comparable within one run: compare the ratios, not the seconds, and read the load average printed with them.

    .venv/bin/python bench/documents_quality.py [--files redp arxiv] [--groups born-digital] [--tools modelhost ...]
        [--rounds 3] [--json out.json] [--save outputs/] [--verbose] [--floors TOOL]
    .venv/bin/python bench/documents_quality.py --rescore outputs/   # score a saved (even unfinished) run again

Targets (issue 19), printed beside modelhost's figures on the born-digital group: CER <= 0.15, word recall >= 0.97,
heading recall >= 0.9, table cell recall >= 0.7, sentences whole >= 0.9 of pymupdf4llm's, every measure at or above
pymupdf4llm's, pages/s >= 2x pymupdf4llm's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import doccorpus
import docmetrics
import doctools


@dataclass(slots=True)
class FileScore:
    """One tool on one file: the counts every measure is made of (so groups add counts, not averages)."""

    file: str
    group: str
    pages: int
    seconds: float
    cpu_seconds: float
    char_errors: int
    chars: int
    words_found: int
    words: int
    headings_found: int
    headings: int
    headings_false: int
    level_agreement: float | None
    tables_found: int
    tables: int
    tables_false: int
    cells_found: int
    cells: int
    sentences_whole: int
    sentences: int
    error: str = ""
    missed_headings: list[str] = field(default_factory=list)
    false_headings: list[str] = field(default_factory=list)


def score(entry: doccorpus.Entry, output: str, seconds: tuple[float, float], pages: int, error: str = "") -> FileScore:
    """Every measure of one output against its entry's ground truth; `seconds` is (wall, CPU)."""
    m = docmetrics.score(output, entry.reference())
    heads, tabs = m.headings, m.tables
    return FileScore(
        entry.name,
        entry.group,
        pages,
        *seconds,
        m.char_errors,
        m.chars,
        m.words_found,
        m.words,
        heads.found,
        heads.total,
        heads.false,
        heads.level_agreement,
        tabs.found,
        tabs.total,
        tabs.false,
        tabs.cells_found,
        tabs.cells_total,
        m.order.whole,
        m.order.total,
        error,
        heads.missed,
        heads.spurious,
    )


@dataclass(slots=True)
class Summary:
    """A tool's scores added up over a set of files."""

    pages: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    char_errors: int = 0
    chars: int = 0
    words_found: int = 0
    words: int = 0
    headings_found: int = 0
    headings: int = 0
    headings_false: int = 0
    levels: list[float] = field(default_factory=list)
    tables_found: int = 0
    tables: int = 0
    tables_false: int = 0
    cells_found: int = 0
    cells: int = 0
    sentences_whole: int = 0
    sentences: int = 0
    errors: int = 0

    def add(self, s: FileScore) -> None:
        for name in (
            "pages",
            "seconds",
            "cpu_seconds",
            "char_errors",
            "chars",
            "words_found",
            "words",
            "headings_found",
            "headings",
            "headings_false",
            "tables_found",
            "tables",
            "tables_false",
            "cells_found",
            "cells",
            "sentences_whole",
            "sentences",
        ):
            setattr(self, name, getattr(self, name) + getattr(s, name))
        if s.level_agreement is not None:
            self.levels.append(s.level_agreement)
        self.errors += bool(s.error)

    def measures(self) -> dict[str, float | None]:
        """The table's figures: ratios of the summed counts (None where there is nothing to measure)."""

        def ratio(a: float, b: float) -> float | None:
            return a / b if b else None

        return {
            "cer": ratio(self.char_errors, self.chars),
            "word_recall": ratio(self.words_found, self.words),
            "heading_recall": ratio(self.headings_found, self.headings),
            "level_agreement": statistics.mean(self.levels) if self.levels else None,
            "cell_recall": ratio(self.cells_found, self.cells),
            "order": ratio(self.sentences_whole, self.sentences),
            "s_per_page": ratio(self.seconds, self.pages),
            "cpu_s_per_page": ratio(self.cpu_seconds, self.pages),
        }


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def row(name: str, s: Summary, reference: Summary | None) -> list[str]:
    m = s.measures()
    speed = "-"
    if reference is not None and s.seconds > 0 and reference.seconds > 0 and s.pages and reference.pages:
        speed = f"{(s.pages / s.seconds) / (reference.pages / reference.seconds):.2f}x"
    return [
        name + (f" ({s.errors} failed)" if s.errors else ""),
        fmt(m["cer"]),
        fmt(m["word_recall"]),
        f"{s.headings_found}/{s.headings} ({s.headings_false} false)",
        fmt(m["level_agreement"]),
        f"{s.tables_found}/{s.tables} ({s.tables_false} false)",
        fmt(m["cell_recall"]),
        f"{s.sentences_whole}/{s.sentences}",
        fmt(m["s_per_page"], 3),
        fmt(m["cpu_s_per_page"], 3),
        speed,
    ]


HEADER = [
    "tool",
    "CER",
    "word recall",
    "headings found",
    "level agr.",
    "tables found",
    "cell recall",
    "sentences whole",
    "s/page",
    "CPU s/page",
    "pages/s vs pymupdf4llm",
]


def print_table(rows: list[list[str]], header: list[str] = HEADER) -> None:
    """A Markdown table, so it pastes into an issue as it is."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")


def targets(mine: Summary, base: Summary | None) -> list[str]:
    """Each issue-19 target for modelhost on the born-digital group: met, or the distance to it."""
    m = mine.measures()
    b = base.measures() if base is not None else {}
    lines: list[str] = []

    def check(label: str, value: float | None, goal: float | None, higher: bool) -> None:
        if value is None or goal is None:
            lines.append(f"  {label}: not measured")
            return
        ok = value >= goal if higher else value <= goal
        sign = ">=" if higher else "<="
        verdict = "met" if ok else f"off by {abs(value - goal):.3f}"
        lines.append(f"  {label}: {value:.3f} (target {sign} {goal:.3f}) {verdict}")

    check("CER", m["cer"], 0.15, higher=False)
    check("word recall", m["word_recall"], 0.97, higher=True)
    check("heading recall", m["heading_recall"], 0.9, higher=True)
    check("table cell recall", m["cell_recall"], 0.7, higher=True)
    if base is not None:
        bo = b.get("order")
        check("sentences whole vs 0.9 x pymupdf4llm's", m["order"], None if bo is None else 0.9 * bo, higher=True)
        for key, higher in (("cer", False), ("word_recall", True), ("heading_recall", True), ("cell_recall", True)):
            check(f"{key} vs pymupdf4llm", m[key], b.get(key), higher=higher)
        check("false headings vs pymupdf4llm", mine.headings_false, base.headings_false, higher=False)
        check("false tables vs pymupdf4llm", mine.tables_false, base.tables_false, higher=False)
        for label, spent, base_spent in (
            ("pages/s (wall)", mine.seconds, base.seconds),
            ("pages/s (CPU)", mine.cpu_seconds, base.cpu_seconds),
        ):
            if spent > 0 and base_spent > 0:
                check(f"{label} vs 2 x pymupdf4llm's", mine.pages / spent, 2 * base.pages / base_spent, higher=True)
    return lines


def commit() -> str:
    """The commit measured, with "+dirty" when the tree differs from it."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "src"], cwd=root, capture_output=True, text=True)
    except OSError:
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def cpu_seconds() -> float:
    """CPU time of this process (every thread: in-process tools run here) and of its finished children (pdftotext)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


#: In a --save folder: one JSON line per conversion (tool, file, round, wall and CPU seconds, error), appended as
#: each ends, so a run stopped part-way (a 2-core machine shared by seven can take an hour over the OCR tools) can
#: still be scored with --rescore, on the files every tool finished.
TIMES = "times.jsonl"


def _output_path(save: Path, tool: str, entry: str) -> Path:
    return save / tool / (entry.replace("/", "__") + ".md")


def run(
    tools: list[Any],
    entries: list[doccorpus.Entry],
    rounds: int,
    save: Path | None = None,
    show_held_out: bool = False,
) -> dict[str, list[FileScore]]:
    """Convert every entry with every tool, `rounds` times, tools alternating; score the first round's outputs.

    The progress lines on stderr name a held-out file only with `show_held_out`: a line per file with its name,
    printed as each ends, tells how long each held-out file took, and which one a tool failed on.

    Wall time is what a user waits; CPU time is what a shared machine's load distorts least (a neighbour's burst
    stretches the wall time of whichever tool is running, not its CPU time). Both are medians over the rounds.
    """
    pages = {e.name: doccorpus.page_count(e.pdf) for e in entries}
    outputs: dict[tuple[str, str], tuple[str, str]] = {}
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    warm = min(entries, key=lambda e: (pages[e.name], e.pdf.stat().st_size))
    for tool in tools:
        try:
            tool.convert(warm.pdf)
        except Exception as exc:  # a tool that fails on one file is scored as failing there, not fatal
            name = warm.name if show_held_out or warm.split != "held-out" else "a held-out file"
            print(f"  warm-up: {tool.name} failed on {name}: {exc}", file=sys.stderr)
    for r in range(rounds):
        for i, entry in enumerate(entries):
            turn = (r + i) % len(tools)
            for tool in tools[turn:] + tools[:turn]:
                key = (tool.name, entry.name)
                wall, cpu = time.perf_counter(), cpu_seconds()
                try:
                    text, error = tool.convert(entry.pdf), ""
                except Exception as exc:
                    text, error = "", f"{type(exc).__name__}: {exc}"
                spent = (time.perf_counter() - wall, cpu_seconds() - cpu)
                times.setdefault(key, []).append(spent)
                if key not in outputs:
                    outputs[key] = (text, error)
                if save is not None:
                    if r == 0:
                        place = _output_path(save, tool.name, entry.name)
                        place.parent.mkdir(parents=True, exist_ok=True)
                        place.write_text(text, encoding="utf-8")
                    line = {"tool": tool.name, "file": entry.name, "round": r, "wall": spent[0], "cpu": spent[1]}
                    with (save / TIMES).open("a", encoding="utf-8") as log:
                        log.write(json.dumps({**line, "error": error}) + "\n")
            shown = entry.name if show_held_out or entry.split != "held-out" else "a held-out file"
            print(f"  round {r + 1}/{rounds}: {shown} done ({i + 1}/{len(entries)})", file=sys.stderr)
    return _scores([t.name for t in tools], entries, outputs, times, pages)


def rescore(
    save: Path, names: list[str], entries: list[doccorpus.Entry]
) -> tuple[dict[str, list[FileScore]], list[str]]:
    """Score a --save folder's outputs and times again, on the entries that every tool named there finished."""
    outputs: dict[tuple[str, str], tuple[str, str]] = {}
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for raw in (save / TIMES).read_text(encoding="utf-8").splitlines():
        line = json.loads(raw)
        key = (line["tool"], line["file"])
        times.setdefault(key, []).append((line["wall"], line["cpu"]))
        if line["round"] == 0:
            text = _output_path(save, *key).read_text(encoding="utf-8") if not line["error"] else ""
            outputs[key] = (text, line["error"])
    tools = [n for n in names if any(k[0] == n for k in outputs)]
    done = [e for e in entries if all((n, e.name) in outputs for n in tools)]
    pages = {e.name: doccorpus.page_count(e.pdf) for e in done}
    return _scores(tools, done, outputs, times, pages), tools


def _scores(
    tools: list[str],
    entries: list[doccorpus.Entry],
    outputs: dict[tuple[str, str], tuple[str, str]],
    times: dict[tuple[str, str], list[tuple[float, float]]],
    pages: dict[str, int],
) -> dict[str, list[FileScore]]:
    scores: dict[str, list[FileScore]] = {}
    for name in tools:
        for entry in entries:
            key = (name, entry.name)
            text, error = outputs[key]
            seconds = (statistics.median(t[0] for t in times[key]), statistics.median(t[1] for t in times[key]))
            scores.setdefault(name, []).append(score(entry, text, seconds, pages[entry.name], error))
    return scores


def floors(files: list[FileScore]) -> str:
    """FLOORS rows for tests/docengine/test_corpus_quality.py from one tool's scores, rounded towards failing."""

    def down(found: int, total: int) -> str:
        return "None" if not total else f"{math.floor(100 * found / total) / 100:.2f}"

    def level(agreement: float | None) -> str:
        return "None" if agreement is None else f"{math.floor(100 * agreement + 1e-9) / 100:.2f}"

    rows = []
    for s in files:
        cer = math.ceil(100 * s.char_errors / s.chars) / 100 if s.chars else 1.0
        rows.append(
            f'    "{s.file}": Floor({max(cer, 0.01):.2f}, {down(s.words_found, s.words)}, '
            f"{down(s.headings_found, s.headings)}, {s.headings_false}, {down(s.cells_found, s.cells)}, "
            f"{s.tables_false}, {down(s.sentences_whole, s.sentences)}, {level(s.level_agreement)}),"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="+", default=None, help="only entries whose name contains one of these")
    parser.add_argument("--groups", nargs="+", default=None, choices=doccorpus.GROUPS, help="only these groups")
    parser.add_argument("--tools", nargs="+", default=list(doctools.DEFAULT_TOOLS), choices=sorted(doctools.TOOLS))
    parser.add_argument("--rounds", type=int, default=1, help="conversions per tool and file; times are medians")
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this file")
    parser.add_argument("--verbose", action="store_true", help="list missed and false headings per file")
    parser.add_argument("--floors", default=None, help="print this tool's FLOORS rows for the corpus acceptance test")
    parser.add_argument("--save", type=Path, default=None, help="write each output to SAVE/TOOL/FILE.md as it is made")
    parser.add_argument("--rescore", type=Path, default=None, help="convert nothing: score a --save folder again")
    parser.add_argument(
        "--show-held-out", action="store_true", help="also print held-out files' own rows (never while tuning)"
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    entries = [
        e
        for e in doccorpus.entries()
        if (not args.files or any(f in e.name for f in args.files)) and (not args.groups or e.group in args.groups)
    ]
    if not entries:
        parser.error(f"--files {args.files}: no corpus entry matches")
    startup: dict[str, float] = {}
    unavailable: dict[str, str] = {}
    if args.rescore is not None:
        meta = json.loads((args.rescore / "meta.json").read_text(encoding="utf-8"))
        scores, names = rescore(args.rescore, args.tools, entries)
        finished = {s.file for files in scores.values() for s in files}
        entries = [e for e in entries if e.name in finished]
        measured, startup, unavailable = meta["commit"], meta["startup_s"], meta["unavailable"]
        load_before, load_after = meta["load_average"], None
        print(f"rescored {args.rescore}: {', '.join(names)} on the {len(entries)} files all of them finished")
    else:
        load_before = os.getloadavg()
        tools: list[Any] = []
        for name in args.tools:
            tool = doctools.TOOLS[name]()
            start = time.perf_counter()
            try:
                tool.start()
            except doctools.Unavailable as exc:
                unavailable[name] = str(exc)
                continue
            startup[name] = time.perf_counter() - start
            tools.append(tool)
        measured = commit()
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            meta = {"commit": measured, "startup_s": startup, "unavailable": unavailable, "load_average": load_before}
            (args.save / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        try:
            scores = run(tools, entries, args.rounds, args.save, args.show_held_out)
        finally:
            for tool in tools:
                tool.close()
        load_after = os.getloadavg()
    print(
        f"\ndocuments_quality at {measured}: {len(entries)} files, {args.rounds} round(s), {os.cpu_count()} cores, "
        f"load average {load_before[0]:.2f} before / " + (f"{load_after[0]:.2f} after" if load_after else "? after")
    )
    for name, why in unavailable.items():
        print(f"  {name}: unavailable: {why}")
    print("  start-up (not in s/page): " + ", ".join(f"{n} {s:.1f} s" for n, s in startup.items()))
    split_of = {e.name: e.split for e in entries}
    summaries: dict[str, dict[str, Summary]] = {}
    by_split: dict[str, dict[str, dict[str, Summary]]] = {}
    for name, files in scores.items():
        for s in files:
            summaries.setdefault(name, {}).setdefault(s.group, Summary()).add(s)
            by_split.setdefault(name, {}).setdefault(split_of[s.file], {}).setdefault(s.group, Summary()).add(s)
    for split in doccorpus.SPLITS:
        print(f"\n## {split} split" + (" (only measured: never tune on it)" if split == "held-out" else ""))
        for group in doccorpus.GROUPS:
            present = {n: sp[split][group] for n, sp in by_split.items() if group in sp.get(split, {})}
            if not present:
                continue
            base = present.get("pymupdf4llm")
            first = next(iter(present.values()))
            print(f"\n{split}, {group}: {first.pages} pages")
            print_table([row(n, s, base) for n, s in present.items()])
            if group == "born-digital" and "modelhost" in present:
                print(f"modelhost against issue 19's targets ({split}):")
                print("\n".join(targets(present["modelhost"], base)))
    print("\nper file:")
    per_file = []
    shown = {e.name for e in entries if args.show_held_out or e.split != "held-out"}
    for entry in entries:
        if entry.name not in shown:
            continue
        for name, files in scores.items():
            s = next(f for f in files if f.file == entry.name)
            one = Summary()
            one.add(s)
            per_file.append([f"{entry.name} ({entry.split}) {name}", *row(name, one, None)[1:]])
    print_table(per_file, ["file / tool", *HEADER[1:]])
    if len(shown) < len(entries):
        print(
            f"({len(entries) - len(shown)} held-out files not listed: their split's totals are above; --show-held-out)"
        )
    if args.verbose:
        for name, files in scores.items():
            for s in files:
                if s.file not in shown:
                    continue
                if s.error:
                    print(f"{name} {s.file}: failed: {s.error}")
                if s.missed_headings or s.false_headings:
                    print(f"{name} {s.file}: missed {s.missed_headings}; false {s.false_headings}")
    if args.floors is not None and args.floors in scores:
        print(f"\nFLOORS rows for tests/docengine/test_corpus_quality.py ({args.floors} at {measured}):")
        print(floors(scores[args.floors]))
    if args.json is not None:
        report = {
            "commit": measured,
            "rounds": args.rounds,
            "cores": os.cpu_count(),
            "load_average": {"before": load_before, "after": load_after},
            "startup_s": startup,
            "unavailable": unavailable,
            "groups": {n: {g: {**asdict(s), **s.measures()} for g, s in gs.items()} for n, gs in summaries.items()},
            "splits": {
                n: {sp: {g: {**asdict(s), **s.measures()} for g, s in gs.items()} for sp, gs in splits.items()}
                for n, splits in by_split.items()
            },
            "files": {n: [asdict(s) for s in files] for n, files in scores.items()},
        }
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()

"""The cost of a text-layer page's layout regions (issue 34, point 7: a one-page `convert` in under 1 CPU s).

A text-layer page that shows a table is rendered and asked for its layout regions (documents/engine.py
`find_regions`, the `ocr` model's layout model alone). Three things to measure, each in fresh processes:

- `cost`: CPU and wall seconds of `modelhost convert` of a one-page table (tables_dev/aastex_sample631_p6, asked for
  its regions), the same with `--no-regions`, and a one-page prose page (never asked); `--rounds` runs each,
  alternating with `--baseline SRC` (another checkout's src folder, PYTHONPATH=SRC) when given, so a neighbour's
  burst on a shared machine hits both sides alike (`--src SRC`: this side's, default the installed one). Medians.
- `batch`: one `modelhost convert` of every tables_dev PDF (dev), the host held across them: pages/s and CPU s a page.
- `dump`: the layout model's regions of every page of the dev split of `--groups` (JSON lines), each page rendered
  as the page loop renders it and asked as the `ocr` model answers REGIONS_PROMPT (`PixelReader.regions`): run it
  on two checkouts and compare the files to check that a change to how the model runs leaves every region as it was.
  Held-out files are never rendered (bench/doccorpus.py's split).

`--bytecode` runs the processes with a bytecode cache (a temporary PYTHONPYCACHEPREFIX, filled by a first run that
is not counted), as an installed package has: with PYTHONDONTWRITEBYTECODE set, as in this project's shells, every
import compiles its module's source again, which is most of an import's cost.

    .venv/bin/python bench/region_cost.py cost [--rounds 3] [--src SRC] [--baseline /tmp/base/src] [--bytecode]
    .venv/bin/python bench/region_cost.py batch [--src SRC] [--baseline /tmp/base/src] [--bytecode]
    .venv/bin/python bench/region_cost.py dump --groups tables-dev born-digital -o regions.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import doccorpus

#: The one-page table of issue 34 point 7's figures: a table the text path finds without rules, so it is asked.
TABLE_PAGE = doccorpus.CORPUS / "tables_dev" / "aastex_sample631_p6.pdf"
#: A one-page document of prose (page 1 of a dev office document: no table evidence, never asked).
PROSE_PAGE = "office_dmca_p1"


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _env(src: str | None, cache: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src  # before site-packages, so it wins over the editable install's path
    if cache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = cache
    return env


def command(src: str | None, cache: str | None, *args: str) -> tuple[float, float]:
    """Run `modelhost ARGS` to its end: (wall seconds, CPU seconds, its children's included)."""
    cpu = _cpu_of_children()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "modelhost.cli", *args], env=_env(src, cache), capture_output=True, text=True,
        timeout=1800,
    )  # fmt: skip
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"modelhost {' '.join(args)} failed: {done.stderr[-2000:]}")
    return wall, _cpu_of_children() - cpu


def _sides(src: str | None, baseline: str | None) -> dict[str, str | None]:
    return {src or "this checkout": src, **({f"baseline {baseline}": baseline} if baseline else {})}


def cost(rounds: int, src: str | None, baseline: str | None, cache: str | None, out: Path) -> None:
    prose = doccorpus.CORPUS / "pdf" / f"{PROSE_PAGE}.pdf"
    runs = {
        "one-page table": [str(TABLE_PAGE)],
        "one-page table --no-regions": [str(TABLE_PAGE), "--no-regions"],
        "one-page prose": [str(prose)],
    }
    sides = _sides(src, baseline)
    if cache is not None:  # fill the cache: a first run compiles every module it imports
        for where in sides.values():
            command(where, cache, "convert", str(TABLE_PAGE), "-o", str(out / "warm.md"))
    seen: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(rounds):
        for name, args in runs.items():
            for side, where in sides.items():
                done = command(where, cache, "convert", *args, "-o", str(out / "o.md"))
                seen.setdefault((name, side), []).append(done)
    print("| convert | side | CPU s (median) | wall s (median) | CPU s, each run |")
    print("|---|---|---|---|---|")
    for (name, side), values in seen.items():
        cpus = [c for _, c in values]
        print(
            f"| {name} | {side} | {statistics.median(cpus):.2f} | {statistics.median(w for w, _ in values):.2f} | "
            + ", ".join(f"{c:.2f}" for c in cpus) + " |"
        )  # fmt: skip


def batch(src: str | None, baseline: str | None, cache: str | None, out: Path) -> None:
    pdfs = sorted(str(p) for p in (doccorpus.CORPUS / "tables_dev").glob("*.pdf"))
    pages = sum(doccorpus.page_count(Path(p)) for p in pdfs)
    print("| tables_dev, one convert | side | pages | CPU s a page | pages/s |")
    print("|---|---|---|---|---|")
    for side, where in _sides(src, baseline).items():
        if cache is not None:
            command(where, cache, "convert", str(TABLE_PAGE), "-o", str(out / "warm.md"))
        wall, cpu = command(where, cache, "convert", *pdfs, "-o", str(out / "batch"))
        print(f"| {len(pdfs)} files | {side} | {pages} | {cpu / pages:.3f} | {pages / wall:.2f} |")


def dump(groups: list[str], output: Path) -> None:
    from modelhost.backends.ocr.pixels import PixelReader
    from modelhost.documents.engine import DocumentEngine
    from modelhost.documents.settings import DEFAULT_DPI

    reader = PixelReader.load(scripts=False)
    engine = DocumentEngine()
    count = 0
    with output.open("w", encoding="utf-8") as sink:
        for entry in doccorpus.entries():
            if entry.group not in groups or entry.split != "dev":
                continue  # never a held-out file
            source = engine.open(entry.pdf)
            try:
                for number in range(1, source.count + 1):
                    image = source.render(number, DEFAULT_DPI).image
                    # each float as it is (JSON writes its shortest exact repr): equal files, equal bits
                    regions = [(r.label, list(r.bbox), r.score) for r in reader.regions(image)]
                    sink.write(json.dumps({"file": entry.name, "page": number, "regions": regions}) + "\n")
                    count += 1
            finally:
                source.close()
    reader.close()
    print(f"{count} dev pages' regions -> {output}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("cost", "batch", "dump"))
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per convert and side (cost)")
    parser.add_argument("--src", help="the src folder measured (default: the installed modelhost's)")
    parser.add_argument("--baseline", help="another checkout's src folder, measured alternately")
    parser.add_argument("--bytecode", action="store_true", help="with a bytecode cache, as an installed package")
    parser.add_argument("--groups", nargs="+", default=["tables-dev", "born-digital"], help="dump: groups (dev)")
    parser.add_argument("-o", "--output", type=Path, default=Path("regions.jsonl"), help="dump: the JSON lines")
    args = parser.parse_args(argv)
    if args.what == "dump":
        dump(args.groups, args.output)
        return 0
    with tempfile.TemporaryDirectory(prefix="region-cost-") as folder:
        out = Path(folder)
        cache = str(out / "pycache") if args.bytecode else None
        if args.what == "cost":
            cost(args.rounds, args.src, args.baseline, cache, out)
        else:
            batch(args.src, args.baseline, cache, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

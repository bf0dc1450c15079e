"""The engine's sandbox pool: born-digital pages (text layer + analysis) and rendered pages per second with 1 and 2
children, run alternately in the same process, and the cost of moving a rendered page back to the parent.

    python bench/sandbox_pool.py [PDF ...] [--rounds 3]

Default PDFs: the corpus's born-digital files (tests/corpus/documents/pdf). Speed is a ratio within one run: the
machine's load moves both columns alike.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from modelhost.docengine.sandbox import Sandbox
from modelhost.documents.engine import DocumentEngine, PageResult
from modelhost.documents.settings import ConvertSettings

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus" / "documents" / "pdf"


async def pages_per_second(engine: DocumentEngine, files: list[Path], *, text_layer: bool) -> float:
    pages, started = 0, time.perf_counter()
    for path in files:
        source = engine.open(path)
        try:
            numbers = list(range(1, source.count + 1))
            settings = ConvertSettings(dpi=150, max_tokens=1, text_layer=text_layer)
            async for page in engine.pages(source, numbers, reader=None, settings=settings):
                pages += isinstance(page, PageResult) or not text_layer
        finally:
            source.close()
    return pages / (time.perf_counter() - started)


def render_transfer(box: Sandbox, path: Path) -> tuple[float, float]:
    """(seconds a 300 DPI render takes end to end, MB moved): the render in the child plus the copy back."""
    best = float("inf")
    size = 0
    for _ in range(5):
        t0 = time.perf_counter()
        pixels = box.render(path, 0, 300)
        best = min(best, time.perf_counter() - t0)
        size = len(pixels.data)
    return best, size / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pdfs", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    files = args.pdfs or sorted(CORPUS.glob("*.pdf"))
    engines = {n: DocumentEngine(Sandbox(n)) for n in (1, 2)}
    for engine in engines.values():
        engine.sandbox.start()
    results: dict[tuple[int, str], list[float]] = {}
    for _ in range(args.rounds):
        for n, engine in engines.items():
            for mode, layer in (("text layer", True), ("render 150 dpi", False)):
                rate = asyncio.run(pages_per_second(engine, files, text_layer=layer))
                results.setdefault((n, mode), []).append(rate)
    print(f"{len(files)} PDFs, {args.rounds} rounds, median pages/s")
    print(f"{'children':>8} | {'text layer':>10} | {'render 150 dpi':>14}")
    for n in engines:
        row = [statistics.median(results[(n, mode)]) for mode in ("text layer", "render 150 dpi")]
        print(f"{n:>8} | {row[0]:>10.1f} | {row[1]:>14.1f}")
    seconds, megabytes = render_transfer(engines[1].sandbox, files[0])
    print(f"one page at 300 dpi, rendered in a child and moved back: {seconds * 1000:.0f} ms for {megabytes:.1f} MB")
    for engine in engines.values():
        engine.sandbox.close()


if __name__ == "__main__":
    main()

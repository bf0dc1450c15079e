"""The page at / (issue 39): how fast it paints, and how long a 10-page document takes to show its last page there
against `modelhost convert` on the same file, in the same run.

1. First paint: a fresh tab on `/` of one `modelhost serve --http --docling` (the embedded default model and `ocr`),
   ROUNDS times: the browser's first contentful paint, and the time until the page shows the host's state (its
   first server-sent event: the page is usable).
2. A 10-page document: built from the corpus's 5-page born-digital `multi_page.pdf` twice (`--scanned`: the
   one-page scan ten times, every page read by the `ocr` model), dropped on the Documents view; the time from the
   drop until the last page's image and regions are shown, against `modelhost convert FILE -o out.md` (a process
   of its own, start-up included, as a person runs it) and the ratio of the two.

    .venv/bin/python bench/ui_page.py [--rounds 5] [--scanned]

Debian's chromium drives the page (Playwright for Python); the numbers are the browser's own clock
(performance.now) and this process's for the command.
"""

from __future__ import annotations

import argparse
import base64
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from modelhost.testing.serving import start_serving

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus" / "documents"
#: Born digital, five pages: twice over is the 10-page document (read from the text layer).
BORN_DIGITAL = CORPUS / "pdf" / "multi_page.pdf"
#: One image-only page: ten times over is the scanned 10-page document (read by the `ocr` model).
SCANNED = CORPUS / "pdfspec" / "scanned.pdf"
PAGES = 10
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
#: The longest wait for any one thing in the browser: a scanned 10-page document on a loaded 2-core machine.
WAIT_MS = 600_000


def ten_pages(source: Path, out: Path) -> Path:
    """A PDF of PAGES pages: `source`'s pages repeated in order (pypdfium2, in this benchmark's process)."""
    import pypdfium2 as pdfium

    src = pdfium.PdfDocument(str(source))
    doc = pdfium.PdfDocument.new()
    while len(doc) < PAGES:
        doc.import_pages(src, list(range(min(len(src), PAGES - len(doc)))))
    doc.save(str(out))
    return out


def first_paint(context: Any, url: str) -> tuple[float, float]:
    """(first contentful paint, first state shown), in ms from navigation start, of a fresh tab."""
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{url}/#state")
    page.wait_for_function("document.querySelector('#connection').textContent.startsWith('connected')")
    page.wait_for_function("document.querySelectorAll('#models tbody tr').length > 0")
    shown = page.evaluate("performance.now()")
    paint = page.evaluate(
        "performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint')?.startTime ?? null"
    )
    page.close()
    return float(paint), float(shown)


def document_shown(context: Any, url: str, pdf: Path) -> float:
    """Seconds from dropping `pdf` on the Documents view to its last page shown (image loaded, regions drawn)."""
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{url}/#documents")
    page.wait_for_function("document.querySelector('#connection').textContent.startsWith('connected')")
    started = page.evaluate(
        """([name, data]) => {
            const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], name, { type: "application/pdf" }));
            const at = performance.now();
            document.getElementById("drop").dispatchEvent(new DragEvent("drop", { dataTransfer: transfer }));
            return at;
        }""",
        [pdf.name, base64.b64encode(pdf.read_bytes()).decode()],
    )
    page.wait_for_function(
        f"""(() => {{
            const pages = document.querySelectorAll('.document[data-state=shown] section.page');
            const last = pages[pages.length - 1];
            return pages.length === {PAGES} && last.querySelector('.page-image').naturalWidth > 0
                && (window.shownAt ??= performance.now());
        }})()"""
    )
    shown = page.evaluate("window.shownAt")
    page.close()
    return (float(shown) - float(started)) / 1000


def convert_seconds(pdf: Path, out: Path) -> float:
    """Wall seconds of `modelhost convert PDF -o out.md` in a process of its own."""
    began = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "modelhost.cli", "convert", str(pdf), "-o", str(out / "out.md")],
        check=True, capture_output=True,
    )  # fmt: skip
    return time.perf_counter() - began


def runs(seconds: list[float]) -> str:
    return ", ".join(f"{s:.2f}" for s in seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="fresh tabs for the first paint, documents dropped")
    parser.add_argument("--scanned", action="store_true", help="the 10 pages are scans, read by the ocr model")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        pdf = ten_pages(SCANNED if args.scanned else BORN_DIGITAL, work / "ten.pdf")
        server = start_serving([
            "--model", "default", "--model", "ocr", "--no-socket", "--http", "127.0.0.1:0", "--docling", "ocr",
            "--state", str(work / "state"),
        ])  # fmt: skip
        try:
            url = server.url("http")
            with sync_playwright() as playwright:
                context = playwright.chromium.launch_persistent_context(
                    str(work / "profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
                )
                paints = [first_paint(context, url) for _ in range(args.rounds)]
                page_runs = [document_shown(context, url, pdf) for _ in range(args.rounds)]
                context.close()
        finally:
            server.kill()
        convert_runs = [convert_seconds(pdf, work) for _ in range(args.rounds)]

    kind = "scanned (ocr model)" if args.scanned else "born-digital (text layer)"
    fcp = statistics.median(p for p, _ in paints)
    usable = statistics.median(s for _, s in paints)
    page_s = statistics.median(page_runs)
    convert_s = statistics.median(convert_runs)
    print(f"first contentful paint: {fcp:.0f} ms; state shown: {usable:.0f} ms (median of {args.rounds} fresh tabs)")
    print(f"{PAGES}-page {kind} document, median of {args.rounds}:")
    print(f"  the page, drop to last page shown: {page_s:.2f} s  (runs: {runs(page_runs)})")
    print(f"  modelhost convert -o out.md:       {convert_s:.2f} s  (runs: {runs(convert_runs)})")
    print(f"  ratio page / convert: {page_s / convert_s:.2f}")


if __name__ == "__main__":
    main()

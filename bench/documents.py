"""`modelhost convert`'s cost, one table per command, each against its peer measured in the same run, alternating:

- `text`: pages/s of converting a batch of born-digital PDFs (the corpus's first 10, every page from its text layer)
  to Markdown, modelhost against pymupdf4llm: each in a fresh process converting the whole batch (start-up
  included: `modelhost convert FILES -o DIR` against a Python process calling `pymupdf4llm.to_markdown` on each),
  and warm (the batch again in this process, modelhost's engine already started). Target: 5x pymupdf4llm's pages/s.
  pymupdf4llm 2.x OCRs the pages it judges worth it (with RapidOCR installed, as here), which modelhost does only
  with --pictures: the fresh batch is also timed with its OCR off (`use_ocr=OCRMode.NEVER`), the like-for-like peer.
- `cli`: CPU seconds of one page from a fresh process, `modelhost convert page.pdf -o page.md` against pymupdf4llm's
  `to_markdown` in a fresh Python (process and reaped children). Target: under 1 CPU s.
- `pixels`: pages/s of the pixel path against the OCR library alone. A PDF of N generated image-only pages (half a
  US Letter page each: heading, two paragraphs, a table) is written at each DPI and read three ways:
  - direct: the floor. The pages rasterized by pypdfium2 beforehand (not timed), then RapidOCR called on each
    page's pixels with the same models and settings as the `ocr` backend, detection then recognition of every line.
    No layout, no DocTags, no document.
  - in-process: `modelhost.documents.convert` through a Host in this process (rasterize with the next page
    overlapped, OCR, layout, DocTags streamed through the scheduler, the document assembled at the end).
  - socket: the same pipeline with a WireReader against a `modelhost serve --model ocr` process.
  Targets: in-process/direct >= 0.95, socket/in-process >= 0.95.

Rounds alternate their order, so load from a neighbour on a shared machine hits each side alike; figures are medians
of the rounds. With no command, all three run.

    .venv/bin/python bench/documents.py text [--docs 10] [--rounds 3]
    .venv/bin/python bench/documents.py cli [--rounds 5]
    .venv/bin/python bench/documents.py pixels [--pages 10] [--dpi 150 300] [--rounds 3] [--threads N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import doccorpus
from modelhost.docengine.source import Source
from modelhost.documents import ConvertSettings, HostReader, WireReader, convert
from modelhost.host import Host
from modelhost.inference import registry
from modelhost.testing.pages import render_page, write_pdf


def direct(model: Any, images: list[Any]) -> float:
    """Seconds for the OCR library alone on already rasterized pages: detection + recognition, as the backend does."""
    import numpy as np

    engine = model.reader.engine()  # the RapidOCR object whose sessions the pixel path uses
    start = time.perf_counter()
    for image in images:
        bgr = np.asarray(image)[:, :, ::-1]
        det = engine(bgr, use_det=True, use_cls=False, use_rec=False)
        engine.recognize_txt(engine.crop_text_regions(bgr, det.boxes))
    return time.perf_counter() - start


async def pipeline(reader: Any, pdf: Path, dpi: int) -> float:
    start = time.perf_counter()
    conversion = await convert(pdf, reader, ConvertSettings(dpi=dpi))
    assert not conversion.partial_pages, conversion.pages
    return time.perf_counter() - start


def serve(model: str, sock: str, threads: int | None) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "modelhost.cli", "serve", "--model", model, "--socket", sock]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    while True:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError(f"serve exited ({proc.wait()})")
        if "ready: serving" in line:
            return proc


async def pixels(args: argparse.Namespace) -> None:
    """The pixel path against RapidOCR called directly (module doc)."""
    folder = Path(tempfile.mkdtemp(prefix="bench-documents-"))
    sock = str(folder / "inferd.sock")
    model = registry.load_model("ocr", threads=args.threads)
    host = Host.from_model(model, name="ocr")
    await host.start()
    server = serve("ocr", sock, args.threads)
    wire = WireReader(sock)
    print(f"{args.pages} pages per PDF, half-letter, {os.cpu_count()} cores; medians of {args.rounds} rounds")
    try:
        # Untimed, as a served host's are: the engine's sandbox started (the first conversion in this process starts
        # its children, whichever reader it uses) and each model's first page read (ONNX sessions allocate then).
        warm = write_pdf([render_page(1, args.dpi[0])], folder / "warm.pdf", args.dpi[0])
        for reader in (HostReader(host), wire):
            await pipeline(reader, warm, args.dpi[0])
        for dpi in args.dpi:
            pdf = write_pdf([render_page(n, dpi) for n in range(1, args.pages + 1)], folder / f"doc-{dpi}.pdf", dpi)
            with Source(pdf) as source:
                images = [source.render(n, dpi).image for n in range(1, source.count + 1)]
            times: dict[str, list[float]] = {"direct": [], "in-process": [], "socket": []}
            for r in range(args.rounds):
                order = ["direct", "in-process", "socket"]
                order = order[r % 3 :] + order[: r % 3]
                for way in order:
                    if way == "direct":
                        seconds = await asyncio.to_thread(direct, model, images)
                    elif way == "in-process":
                        seconds = await pipeline(HostReader(host), pdf, dpi)
                    else:
                        seconds = await pipeline(wire, pdf, dpi)
                    times[way].append(seconds)
            rate = {way: args.pages / statistics.median(ts) for way, ts in times.items()}
            size = f"{images[0].shape[1]}x{images[0].shape[0]}"
            for way in ("direct", "in-process", "socket"):
                print(f"  {dpi:>3} DPI ({size}) {way:<10} {rate[way]:6.3f} pages/s")
            print(
                f"  {dpi:>3} DPI ratios: in-process/direct {rate['in-process'] / rate['direct']:.3f} (target >= 0.95), "
                f"socket/in-process {rate['socket'] / rate['in-process']:.3f} (target >= 0.95)"
            )
    finally:
        wire.close()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        await host.aclose()


#: pymupdf4llm converting files in a fresh Python, as `modelhost convert` converts them in a fresh process.
_PYMUPDF4LLM = "import sys, pymupdf4llm\nfor f in sys.argv[1:]:\n    pymupdf4llm.to_markdown(f, show_progress=False)\n"
_PYMUPDF4LLM_NO_OCR = (
    "import sys, pymupdf4llm\nfrom pymupdf4llm.ocr import OCRMode\nfor f in sys.argv[1:]:\n"
    "    pymupdf4llm.to_markdown(f, show_progress=False, use_ocr=OCRMode.NEVER)\n"
)


def fresh(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of a command in a fresh process: its own CPU and its reaped children's (modelhost's sandbox
    children are reaped when its pool closes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def modelhost_cli(files: list[Path], out: Path) -> list[str]:
    return [sys.executable, "-m", "modelhost", "convert", *map(str, files), "-o", str(out)]


def pymupdf4llm_cli(files: list[Path], *, ocr: bool = True) -> list[str]:
    return [sys.executable, "-c", _PYMUPDF4LLM if ocr else _PYMUPDF4LLM_NO_OCR, *map(str, files)]


def born_digital(count: int) -> list[Path]:
    """The corpus's first `count` born-digital PDFs (every page has a usable text layer)."""
    return [e.pdf for e in doccorpus.entries() if e.group == "born-digital"][:count]


async def text(args: argparse.Namespace) -> None:
    """pages/s of a batch of born-digital PDFs, modelhost against pymupdf4llm (module doc)."""
    import pymupdf4llm

    files = born_digital(args.docs)
    pages = sum(doccorpus.page_count(f) for f in files)
    out = Path(tempfile.mkdtemp(prefix="bench-documents-text-"))
    print(f"{len(files)} born-digital PDFs, {pages} pages, {os.cpu_count()} cores; medians of {args.rounds} rounds")
    times: dict[str, list[float]] = {
        k: [] for k in ("modelhost fresh", "pymupdf4llm fresh", "no-OCR fresh", "modelhost", "pymupdf4llm")
    }
    cpu: dict[str, list[float]] = {k: [] for k in ("modelhost fresh", "pymupdf4llm fresh", "no-OCR fresh")}
    await convert_all(files)  # the engine's sandbox started, as a served host's is
    for r in range(args.rounds):
        ways = ["modelhost", "pymupdf4llm"] if r % 2 == 0 else ["pymupdf4llm", "modelhost"]
        argvs = {
            "modelhost": modelhost_cli(files, out),
            "pymupdf4llm": pymupdf4llm_cli(files),
            "no-OCR": pymupdf4llm_cli(files, ocr=False),
        }
        for way in [*ways, "no-OCR"] if r % 2 == 0 else ["no-OCR", *ways]:
            wall, spent = fresh(argvs[way])
            times[f"{way} fresh"].append(wall)
            cpu[f"{way} fresh"].append(spent)
        for way in ways:
            start = time.perf_counter()
            if way == "modelhost":
                await convert_all(files)
            else:
                for f in files:
                    pymupdf4llm.to_markdown(str(f), show_progress=False)
            times[way].append(time.perf_counter() - start)
    rate = {k: pages / statistics.median(v) for k, v in times.items()}
    for way in ("fresh", "warm"):
        mine, theirs = ("modelhost fresh", "pymupdf4llm fresh") if way == "fresh" else ("modelhost", "pymupdf4llm")
        extra = ""
        if way == "fresh":
            extra = f", CPU s {statistics.median(cpu[mine]):.2f} vs {statistics.median(cpu[theirs]):.2f}"
        print(
            f"  {way:<5} modelhost {rate[mine]:6.2f} pages/s, pymupdf4llm {rate[theirs]:6.2f} pages/s: "
            f"{rate[mine] / rate[theirs]:.2f}x (target >= 5){extra}"
        )
    mine, theirs = "modelhost fresh", "no-OCR fresh"
    print(
        f"  fresh modelhost {rate[mine]:6.2f} pages/s, pymupdf4llm with OCR off {rate[theirs]:6.2f} pages/s: "
        f"{rate[mine] / rate[theirs]:.2f}x, CPU s {statistics.median(cpu[mine]):.2f} vs "
        f"{statistics.median(cpu[theirs]):.2f}"
    )


async def convert_all(files: list[Path]) -> None:
    """Each file converted to Markdown in this process, as `modelhost convert` does (no model: text layers)."""
    from modelhost.documents import convert

    for f in files:
        (await convert(f, None, docling=False)).render("md")


def cli(args: argparse.Namespace) -> None:
    """One page from a fresh process, modelhost's command against pymupdf4llm (module doc)."""
    page = next(f for f in born_digital(20) if doccorpus.page_count(f) == 1)
    out = Path(tempfile.mkdtemp(prefix="bench-documents-cli-")) / "page.md"
    walls: dict[str, list[float]] = {"modelhost": [], "pymupdf4llm": []}
    cpus: dict[str, list[float]] = {"modelhost": [], "pymupdf4llm": []}
    for r in range(args.rounds):
        ways = ["modelhost", "pymupdf4llm"] if r % 2 == 0 else ["pymupdf4llm", "modelhost"]
        for way in ways:
            argv = modelhost_cli([page], out) if way == "modelhost" else pymupdf4llm_cli([page])
            wall, spent = fresh(argv)
            walls[way].append(wall)
            cpus[way].append(spent)
    print(f"one page ({page.name}) from a fresh process, {os.cpu_count()} cores; medians of {args.rounds} rounds")
    for way in ("modelhost", "pymupdf4llm"):
        print(f"  {way:<12} {statistics.median(cpus[way]):5.2f} CPU s, {statistics.median(walls[way]):5.2f} s wall")
    mine = statistics.median(cpus["modelhost"])
    ratio = statistics.median(cpus["pymupdf4llm"]) / mine
    print(f"  modelhost's CPU s {mine:.2f} (target < 1), {ratio:.2f}x less than pymupdf4llm's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", nargs="?", choices=("text", "cli", "pixels"), help="one table [all three]")
    parser.add_argument("--docs", type=int, default=10, help="text: born-digital PDFs in the batch")
    parser.add_argument("--pages", type=int, default=10, help="pixels: generated pages per PDF")
    parser.add_argument("--dpi", type=int, nargs="+", default=[150, 300], help="pixels: DPIs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="pixels: onnxruntime intra-op threads [all cores]")
    args = parser.parse_args()
    if args.table in (None, "text"):
        asyncio.run(text(args))
    if args.table in (None, "cli"):
        cli(args)
    if args.table in (None, "pixels"):
        asyncio.run(pixels(args))


if __name__ == "__main__":
    main()

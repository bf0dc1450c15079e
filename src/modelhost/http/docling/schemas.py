"""docling-serve's v1 JSON shapes, as its own client (`docling.service_client`, PyPI `docling-client`) reads them.

Every name and value here is docling-serve's (docling-serve 1.38, docling 2.143: `docling.datamodel.service`), so a
correction from a real docling client is a change in this one module. Requests are pydantic models, because
docling-serve validates with pydantic and a bad field must be answered as it answers it: 422 with
`{"detail": [{"loc", "msg", "type"}]}` (`validation_detail`). Answers are built as plain dicts by `answer_*`, since
`json_content` is the DoclingDocument JSON that docling-core wrote, passed through untouched.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class InputFormat(StrEnum):
    """docling's input formats (`from_formats`). This door reads two of them: `pdf` and `image`."""

    DOCX = "docx"
    DOC = "doc"
    RTF = "rtf"
    PPTX = "pptx"
    PPT = "ppt"
    HTML = "html"
    MHTML = "mhtml"
    IMAGE = "image"
    PDF = "pdf"
    ASCIIDOC = "asciidoc"
    MD = "md"
    CSV = "csv"
    XLSX = "xlsx"
    XLS = "xls"
    ODT = "odt"
    ODS = "ods"
    ODP = "odp"
    XML_USPTO = "xml_uspto"
    XML_JATS = "xml_jats"
    XML_XBRL = "xml_xbrl"
    XML_DOCLANG = "xml_doclang"
    DCLX = "dclx"
    METS_GBS = "mets_gbs"
    JSON_DOCLING = "json_docling"
    AUDIO = "audio"
    VIDEO = "video"
    VTT = "vtt"
    LATEX = "latex"


class OutputFormat(StrEnum):
    """docling's output formats (`to_formats`). This door writes md, json, html, text and doctags."""

    MARKDOWN = "md"
    JSON = "json"
    YAML = "yaml"
    HTML = "html"
    HTML_SPLIT_PAGE = "html_split_page"
    TEXT = "text"
    DOCTAGS = "doctags"
    VTT = "vtt"
    DOCLANG = "doclang"
    DCLX = "dclx"
    CHUNKS = "chunks"
    LATEX = "latex"


class ImageRefMode(StrEnum):
    """How pictures appear in Markdown, HTML and JSON (docling-core's ImageRefMode)."""

    PLACEHOLDER = "placeholder"
    EMBEDDED = "embedded"
    REFERENCED = "referenced"


class TableMode(StrEnum):
    """docling's TableFormer modes."""

    FAST = "fast"
    ACCURATE = "accurate"


class PdfBackend(StrEnum):
    """docling's PDF parsers."""

    PYPDFIUM2 = "pypdfium2"
    DOCLING_PARSE = "docling_parse"
    OLD_DOCLING_PARSE = "_docling_parse"
    DLPARSE_V1 = "dlparse_v1"
    DLPARSE_V2 = "dlparse_v2"
    DLPARSE_V4 = "dlparse_v4"


class Pipeline(StrEnum):
    """docling's processing pipelines."""

    LEGACY = "legacy"
    STANDARD = "standard"
    NATIVE = "native"
    VLM = "vlm"
    ASR = "asr"


#: docling's "every page" (settings.DEFAULT_PAGE_RANGE): the client sends it on every request.
ALL_PAGES: Final = (1, sys.maxsize)


class ConvertOptions(BaseModel):
    """docling-serve's ConvertDocumentsOptions: the fields this door reads, typed as docling types them (a bad value
    is a 422, as there), and every other field kept in `model_extra` so `options.plan` can say what it did with it."""

    model_config = ConfigDict(extra="allow")

    from_formats: list[InputFormat] = Field(default_factory=lambda: list(InputFormat))
    to_formats: list[OutputFormat] = Field(default_factory=lambda: [OutputFormat.MARKDOWN])
    image_export_mode: ImageRefMode = ImageRefMode.PLACEHOLDER
    do_ocr: bool = True
    force_ocr: bool = False
    ocr_lang: list[str] | None = None
    pdf_backend: PdfBackend = PdfBackend.DOCLING_PARSE
    table_mode: TableMode = TableMode.ACCURATE
    pipeline: Pipeline = Pipeline.STANDARD
    page_range: tuple[int, int] = ALL_PAGES
    abort_on_error: bool = False
    md_page_break_placeholder: str = ""
    md_compact_tables: bool = False


class ChunkingOptions(BaseModel):
    """docling's chunker options (HierarchicalChunkerOptions; the hybrid chunker's own fields are kept as extras)."""

    model_config = ConfigDict(extra="allow")

    chunker: Literal["hierarchical", "hybrid"] = "hierarchical"
    use_markdown_tables: bool = False
    use_markdown_images: bool = False
    image_placeholder: str = "![IMAGE]"
    include_raw_text: bool = False


class FileSource(BaseModel):
    """A document sent inline: `{"kind": "file", "base64_string", "filename"}`."""

    kind: Literal["file"] = "file"
    base64_string: str
    filename: str


class HttpSource(BaseModel):
    """A document to fetch: `{"kind": "http", "url", "headers"}` (only with `serve --allow-fetch`)."""

    kind: Literal["http"] = "http"
    url: str
    headers: dict[str, Any] = Field(default_factory=dict)


class Target(BaseModel):
    """Where the result goes: only `inbody` here (see `routes.check_target`)."""

    model_config = ConfigDict(extra="allow")

    kind: str = "inbody"


class ConvertSourcesRequest(BaseModel):
    """The body of POST /v1/convert/source[/async]. Extra fields (`callbacks`) are kept to be reported."""

    model_config = ConfigDict(extra="allow")

    options: ConvertOptions = Field(default_factory=ConvertOptions)
    sources: list[FileSource | HttpSource] = Field(min_length=1)
    target: Target = Field(default_factory=Target)


class ChunkSourcesRequest(BaseModel):
    """The body of POST /v1/chunk/{chunker}/source[/async]."""

    model_config = ConfigDict(extra="allow")

    convert_options: ConvertOptions = Field(default_factory=ConvertOptions)
    chunking_options: ChunkingOptions = Field(default_factory=ChunkingOptions)
    sources: list[FileSource | HttpSource] = Field(min_length=1)
    include_converted_doc: bool = False
    target: Target = Field(default_factory=Target)


# -- task statuses (docling's ConversionStatus, which its TaskStatusResponse.task_status also uses) ---------------
PENDING: Final = "pending"
STARTED: Final = "started"
SUCCESS: Final = "success"
PARTIAL_SUCCESS: Final = "partial_success"
FAILURE: Final = "failure"
SKIPPED: Final = "skipped"

# -- error items (docling's ErrorItem: component_type, module_name, error_message, category, page_no) -------------
USER_INPUT: Final = "user_input"
DOCUMENT_BACKEND: Final = "document_backend"
MODEL: Final = "model"
#: The module_name of the door's own notes, so a caller can tell them from docling's.
MODULE: Final = "modelhost"
POLICY: Final = "policy"
BACKEND_FAILURE: Final = "backend_failure"
INFERENCE_FAILURE: Final = "inference_failure"
SOURCE_UNAVAILABLE: Final = "source_unavailable"
INTERNAL: Final = "internal"
CAPACITY: Final = "capacity"
UNKNOWN: Final = "unknown"

#: The detail docling-serve answers a `presigned_url` target with when it has no artifact storage: the client sends
#: that target first and falls back to `inbody` on exactly this text (client._should_fallback_from_presigned_target).
NO_ARTIFACT_STORAGE: Final = (
    "Presigned URL target requires artifact storage to be configured and enabled on the server."
)
#: docling-serve's details for a task it does not know, and for one whose result is not there (yet).
TASK_NOT_FOUND: Final = "Task not found."
RESULT_NOT_FOUND: Final = "Task result not found. Please wait for a completion status."


def error_item(
    message: str, *, component: str = USER_INPUT, category: str = UNKNOWN, page_no: int | None = None
) -> dict[str, Any]:
    """One of docling's ErrorItems."""
    return {
        "component_type": component,
        "module_name": MODULE,
        "error_message": message,
        "category": category,
        "page_no": page_no,
    }


def answer_document(
    filename: str,
    status: str,
    *,
    contents: dict[str, Any] | None = None,
    errors: list[dict[str, Any]] | None = None,
    processing_time: float = 0.0,
) -> dict[str, Any]:
    """A ConvertDocumentResponse: the document's contents (a field per format, null when not asked for), its
    conversion status and errors. docling-serve answers a document that failed or was skipped this way too, 200."""
    document: dict[str, Any] = {
        "filename": filename,
        "md_content": None,
        "json_content": None,
        "html_content": None,
        "text_content": None,
        "doctags_content": None,
        "doclang_content": None,
    }
    document.update(contents or {})
    return {
        "document": document,
        "status": status,
        "errors": errors or [],
        "processing_time": processing_time,
        "timings": {},
        "confidence": None,
    }


def answer_chunks(chunks: list[dict[str, Any]], document: dict[str, Any], processing_time: float) -> dict[str, Any]:
    """A ChunkDocumentResponse: the chunks, and the document they came from as an ExportResult (its contents only
    when `include_converted_doc` asked for them)."""
    export = {"kind": "ExportResult", "content": document["document"], **{k: document[k] for k in _EXPORT_KEYS}}
    return {"chunks": chunks, "documents": [export], "processing_time": processing_time}


_EXPORT_KEYS: Final = ("status", "errors", "timings", "confidence")


def failure_info(message: str, *, category: str, retryable: bool) -> dict[str, Any]:
    """docling's PublicFailureInfo of a task that failed (not its document: the task itself)."""
    return {"category": category, "message": message, "retryable": retryable, "phase": "execution", "details": {}}


def answer_task(
    task_id: str,
    status: str,
    *,
    task_type: str = "convert",
    position: int | None = None,
    meta: dict[str, int] | None = None,
    error: str | None = None,
    failure: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A TaskStatusResponse."""
    return {
        "task_id": task_id,
        "task_type": task_type,
        "task_status": status,
        "task_position": position,
        "task_meta": meta,
        "error_message": error,
        "failure": failure,
    }


def answer_task_failure(failure: dict[str, Any]) -> dict[str, Any]:
    """The result of a task that failed: a TaskFailureResult (the client raises TaskExecutionError on it)."""
    return {"kind": "TaskFailureResult", "failure": failure}


def ws_message(
    kind: Literal["connection", "update", "error"], task: dict[str, Any] | None, error: str | None = None
) -> dict[str, Any]:
    """A WebsocketMessage of /v1/status/ws/{task_id}."""
    return {"message": kind, "task": task, "error": error}


def validation_detail(exc: ValidationError, where: str) -> list[dict[str, Any]]:
    """A pydantic error as docling-serve's 422 body lists it (FastAPI's shape: loc, msg, type), `where` first in
    each loc ("body" for a JSON body; "body" too for a form field, as FastAPI says)."""
    return [{"loc": [where, *error["loc"]], "msg": error["msg"], "type": error["type"]} for error in exc.errors()]

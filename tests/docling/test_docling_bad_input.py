"""Bad documents and bad options, answered as docling-serve answers them: a document that cannot be read is a
task that succeeded with a document that failed (HTTP 200, `status: failure` or `skipped`, the reason in
`errors`); options it cannot honour are refused (422) or named in `errors`; unknown tasks are 404."""

from __future__ import annotations

import json
from io import BytesIO
from pathlib import Path

import httpx
import pytest
import websockets.sync.client
from docling.datamodel.base_models import ConversionStatus, InputFormat, OutputFormat
from docling.datamodel.service.options import ConvertDocumentsOptions
from docling.datamodel.service.responses import TaskStatusResponse
from docling.service_client import (
    ConversionError,
    DoclingServiceClient,
    ServiceError,
    TaskExecutionError,
)
from docling_core.types.io import DocumentStream
from docling_support import HEADINGS, REDBOOK, SCANNED, Served, wait_task

from modelhost.testing.waiting import STATE_WAIT_SECONDS

BROKEN = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage"


def stream(name: str, data: bytes) -> DocumentStream:
    return DocumentStream(name=name, stream=BytesIO(data))


@pytest.fixture(scope="module")
def encrypted(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    from reportlab.pdfgen import canvas

    path = tmp_path_factory.mktemp("encrypted") / "locked.pdf"
    pdf = canvas.Canvas(str(path), encrypt="secret")
    pdf.drawString(100, 700, "Hidden text")
    pdf.save()
    return path.read_bytes()


@pytest.fixture
def docling(served: Served) -> DoclingServiceClient:
    return DoclingServiceClient(served.url, job_timeout=STATE_WAIT_SECONDS)


def test_a_broken_pdf_is_a_failed_document_named_by_its_upload(docling: DoclingServiceClient) -> None:
    result = docling.convert(stream("broken.pdf", BROKEN), raises_on_error=False)
    assert result.status == ConversionStatus.FAILURE
    [error] = result.errors
    assert error.error_message.startswith("broken.pdf:"), error
    assert "/" not in error.error_message.split(":", 1)[0]  # never the state folder's path
    with pytest.raises(ConversionError, match=r"broken\.pdf"):
        docling.convert(stream("broken.pdf", BROKEN))


def test_an_encrypted_pdf_says_it_needs_a_password(served: Served, encrypted: bytes) -> None:
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        answer = http.post("/v1/convert/file", files={"files": ("locked.pdf", encrypted, "application/pdf")})
    assert answer.status_code == 200, answer.text  # docling-serve: the request was fine, the document was not
    body = answer.json()
    assert body["status"] == "failure" and body["document"]["md_content"] is None
    assert "encrypted" in body["errors"][0]["error_message"]


def test_a_file_of_another_format_is_skipped_as_docling_skips_it(docling: DoclingServiceClient) -> None:
    result = docling.convert(stream("notes.txt", b"plain text, not a document"), raises_on_error=False)
    assert result.status == ConversionStatus.SKIPPED
    assert [e.error_message for e in result.errors] == ["File format not allowed: notes.txt"]
    # a PDF when only docx is allowed: docling's answer for a format outside from_formats
    only_docx = ConvertDocumentsOptions(from_formats=[InputFormat.DOCX])
    result = docling.convert(HEADINGS, options=only_docx, raises_on_error=False)
    assert result.status == ConversionStatus.SKIPPED
    assert result.errors[0].error_message == "File format not allowed: headings.pdf"


def test_options_it_cannot_honour_are_refused_and_others_are_named(
    served: Served, docling: DoclingServiceClient
) -> None:
    with pytest.raises(ServiceError) as refused:
        docling.convert(HEADINGS, options=ConvertDocumentsOptions(to_formats=[OutputFormat.YAML]))
    assert refused.value.status_code == 422 and "yaml" in str(refused.value.detail)
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        files = {"files": (HEADINGS.name, HEADINGS.read_bytes(), "application/pdf")}
        bad = http.post("/v1/convert/file", files=files, data={"table_mode": "bogus"})
        assert bad.status_code == 422, bad.text
        assert [d["loc"] for d in bad.json()["detail"]] == [["body", "table_mode"]]
        referenced = http.post("/v1/convert/file", files=files, data={"image_export_mode": "referenced"})
        assert referenced.status_code == 422 and "referenced" in referenced.json()["detail"]
        page_range = http.post("/v1/convert/file", files=files, data={"page_range": ["3", "2"]})
        assert page_range.status_code == 422, page_range.text
    noted = ConvertDocumentsOptions(table_mode="fast", ocr_lang=["de"], do_formula_enrichment=True)
    result = docling.convert(HEADINGS, options=noted)
    assert result.status == ConversionStatus.SUCCESS
    notes = " ".join(e.error_message for e in result.errors)
    for name in ("table_mode", "ocr_lang", "do_formula_enrichment"):
        assert name in notes, notes


def test_do_ocr_false_reads_no_pixels(docling: DoclingServiceClient) -> None:
    result = docling.convert(SCANNED, options=ConvertDocumentsOptions(do_ocr=False), raises_on_error=False)
    assert result.status == ConversionStatus.FAILURE
    assert "no usable text layer" in result.errors[0].error_message


def test_do_ocr_sent_reads_the_prose_in_a_pictures_pixels(docling: DoclingServiceClient) -> None:
    """docling OCRs bitmaps when `do_ocr` is on; here only when the request sends it (options.picture_text): page 3
    of the corpus Redbook holds a list of highlights only as a picture."""
    highlight = "Enhance the performance of your database operations"
    asked = ConvertDocumentsOptions(do_ocr=True, page_range=(3, 3))
    assert highlight in docling.convert(REDBOOK, options=asked).document.export_to_markdown()
    assert highlight not in docling.convert(REDBOOK, page_range=(3, 3)).document.export_to_markdown()


def test_a_page_in_a_script_no_model_reads_is_a_partial_success_naming_it(
    served: Served, docling: DoclingServiceClient, tmp_path: Path
) -> None:
    """Issue 34 item 5: the page is read (its glyph soup kept), and the answer says which page not to trust, as a
    docling ErrorItem of the model, where docling's client reads it, never a plain success."""
    from tests.documents.test_convert import DEJAVU
    from tests.documents.test_script_warnings import georgian_pdf

    if not DEJAVU.exists():
        pytest.skip("needs Debian's fonts-dejavu-core")
    pdf = georgian_pdf(tmp_path / "minutes.pdf")
    result = docling.convert(stream("minutes.pdf", pdf.read_bytes()), raises_on_error=False)
    assert result.status == ConversionStatus.PARTIAL_SUCCESS
    [error] = result.errors
    assert error.component_type == "model" and error.category == "inference_failure", error
    assert error.error_message.startswith("pages 1: "), error
    # The page's view (the UI's document view) lists it among its warnings too.
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        files = {"files": ("minutes.pdf", pdf.read_bytes(), "application/pdf")}
        task = http.post("/v1/convert/file/async", files=files).json()["task_id"]
        assert wait_task(http, task)["task_status"] == "success"
        assert http.get(f"/ui/api/documents/{task}").json()["warnings"] == [error.error_message]


def test_abort_on_error_fails_the_task_itself(served: Served, docling: DoclingServiceClient) -> None:
    with pytest.raises(TaskExecutionError, match=r"broken\.pdf"):
        docling.convert(stream("broken.pdf", BROKEN), options=ConvertDocumentsOptions(abort_on_error=True))
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        files = {"files": ("broken.pdf", BROKEN, "application/pdf")}
        task = http.post("/v1/convert/file/async", files=files, data={"abort_on_error": "true"}).json()
        status = TaskStatusResponse.model_validate(wait_task(http, task["task_id"]))
        assert status.task_status == "failure" and status.error_message and "broken.pdf" in status.error_message
        assert http.get(f"/v1/result/{task['task_id']}").json()["kind"] == "TaskFailureResult"


def test_an_unknown_task_is_not_found_on_every_route(served: Served) -> None:
    # docling's client raises TaskNotFoundError on exactly this answer (404, detail "Task not found."); its public
    # API polls only the tasks it submitted itself, so the answer is checked here as the client reads it.
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        for path in ("/v1/status/poll/nosuchtask", "/v1/result/nosuchtask"):
            answer = http.get(path)
            assert (answer.status_code, answer.json()) == (404, {"detail": "Task not found."})
    ws_url = served.url.replace("http://", "ws://") + "/v1/status/ws/nosuchtask"
    with websockets.sync.client.connect(ws_url) as ws:
        message = json.loads(ws.recv(timeout=STATE_WAIT_SECONDS))
    assert message == {"message": "error", "task": None, "error": "Task not found."}


def test_a_result_before_its_end_is_not_ready(served: Served, tmp_path: Path) -> None:
    with httpx.Client(base_url=served.url, timeout=STATE_WAIT_SECONDS) as http:
        files = {"files": (SCANNED.name, SCANNED.read_bytes(), "application/pdf")}
        task = http.post("/v1/convert/file/async", files=files).json()
        assert task["task_status"] in ("pending", "started") and task["task_type"] == "convert"
        early = http.get(f"/v1/result/{task['task_id']}")  # an OCR page takes seconds: not done yet
        assert early.status_code == 404 and early.json()["detail"].startswith("Task result not found"), early.text
        assert wait_task(http, task["task_id"])["task_status"] == "success"
        assert http.get(f"/v1/result/{task['task_id']}").json()["status"] == "success"

"""Tasks survive kill -9: a real `serve --http --docling` process is killed with SIGKILL while it holds tasks, and
restarted on the same state folder. A finished task's result is served again, a queued one runs and succeeds,
the one being converted at the kill fails (`the worker stopped`), as a giz job does, and none is lost."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from docling.datamodel.base_models import ConversionStatus
from docling.datamodel.service.responses import ConvertDocumentResponse, TaskStatusResponse
from docling.service_client import DoclingServiceClient
from docling_support import HEADINGS, SCANNED, Served, modelhost_convert, serve_docling, wait_task

from modelhost.testing.waiting import STATE_WAIT_SECONDS

#: Image-only pages queued behind each other: each costs the ocr model about a second or more, so the last ones
#: are still queued when the process is killed a moment after submitting them.
QUEUED = 4


def submit(http: httpx.Client, path: Path) -> str:
    files = {"files": (path.name, path.read_bytes(), "application/pdf")}
    answer = http.post("/v1/convert/file/async", files=files, data={"to_formats": ["md", "json"]})
    assert answer.status_code == 200, answer.text
    return str(TaskStatusResponse.model_validate_json(answer.text).task_id)


def test_tasks_accepted_before_kill_9_are_answered_after_a_restart(tmp_path: Path, converted: Path) -> None:
    state = tmp_path / "state"
    first = serve_docling(state)
    try:
        with httpx.Client(base_url=first.url, timeout=STATE_WAIT_SECONDS) as http:
            finished = submit(http, HEADINGS)
            assert wait_task(http, finished)["task_status"] == "success"
            pending = [submit(http, SCANNED) for _ in range(QUEUED)]
            last = http.get(f"/v1/status/poll/{pending[-1]}").json()
            assert last["task_status"] == "pending" and last["task_position"] >= 1, last
    finally:
        first.kill()

    second = serve_docling(state)
    try:
        with httpx.Client(base_url=second.url, timeout=STATE_WAIT_SECONDS) as http:
            kept = ConvertDocumentResponse.model_validate_json(http.get(f"/v1/result/{finished}").text)
            assert kept.status == ConversionStatus.SUCCESS
            assert kept.document.md_content == modelhost_convert(HEADINGS, "md", tmp=converted)
            scanned_md = modelhost_convert(SCANNED, "md", tmp=converted)
            outcomes = {}
            for task_id in pending:
                status = wait_task(http, task_id)
                if status["task_status"] == "success":
                    answer = ConvertDocumentResponse.model_validate_json(http.get(f"/v1/result/{task_id}").text)
                    assert answer.document.md_content == scanned_md
                else:
                    assert "stopped" in status["error_message"], status  # the one converting at the kill
                    assert http.get(f"/v1/result/{task_id}").json()["kind"] == "TaskFailureResult"
                outcomes[task_id] = status["task_status"]
            assert outcomes[pending[-1]] == "success", outcomes  # queued at the kill: it ran after the restart
            assert list(outcomes.values()).count("failure") <= 1, outcomes
        # and the restarted server converts as before, through the client
        with DoclingServiceClient(second.url, job_timeout=STATE_WAIT_SECONDS) as docling:
            again = docling.convert(HEADINGS)
        assert again.document.export_to_markdown() + "\n" == modelhost_convert(HEADINGS, "md", tmp=converted)
    finally:
        second.stop()


def test_a_second_serve_on_the_same_state_says_the_folder_is_taken(served: Served) -> None:
    args = ["serve", "--model", "ocr", "--no-socket", "--http", "127.0.0.1:0", "--docling"]
    args += ["--state", str(served.state)]
    done = subprocess.run(
        [sys.executable, "-m", "modelhost.cli", *args], capture_output=True, text=True, timeout=STATE_WAIT_SECONDS
    )
    assert done.returncode == 2, done.stderr
    assert "in use by another worker" in done.stderr and "--state" in done.stderr
    assert "Traceback" not in done.stderr

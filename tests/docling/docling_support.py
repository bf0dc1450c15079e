"""Helpers of the docling door's tests: a real `modelhost serve --http --docling` process on loopback, and what
`modelhost convert` writes for the same file (the answer the door must equal)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from modelhost.testing.waiting import STATE_WAIT_SECONDS

#: The repository's document corpus (its README says where each file comes from).
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "documents"

#: Small corpus PDFs: two with a text layer (one page, five pages) and one image-only page the ocr model reads.
HEADINGS = CORPUS / "pdfspec" / "headings.pdf"
MULTI_PAGE = CORPUS / "pdf" / "multi_page.pdf"
SCANNED = CORPUS / "pdfspec" / "scanned.pdf"
#: Born digital, with pictures: page 3's list of highlights is prose held only as pixels.
REDBOOK = CORPUS / "pdf" / "redp5110_sampled.pdf"


@dataclass
class Served:
    """A running `modelhost serve`: its process, its stderr lines so far (drained by a thread, so a full pipe
    never stalls it), and its HTTP door's URL."""

    proc: subprocess.Popen[str]
    state: Path
    lines: list[str] = field(default_factory=list)
    url: str = ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not end within the wait bound."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STATE_WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        """kill -9, and wait for it to be gone."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def serve_docling(state: Path, *flags: str, env: dict[str, str] | None = None) -> Served:
    """`modelhost serve --model ocr --no-socket --http 127.0.0.1:0 --docling --state STATE FLAGS`, once ready."""
    args = ["--model", "ocr", "--no-socket", "--http", "127.0.0.1:0", "--docling", "--state", str(state), *flags]
    proc = subprocess.Popen(
        [sys.executable, "-m", "modelhost.cli", "serve", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )
    served = Served(proc, state)
    ready = threading.Event()

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            served.lines.append(line.rstrip())
            found = re.search(r"modelhost: http on (http://\S+)", line)
            if found:
                served.url = found.group(1)
            if "ready: serving" in line:
                ready.set()
        ready.set()

    threading.Thread(target=drain, daemon=True).start()
    if not ready.wait(STATE_WAIT_SECONDS) or proc.poll() is not None or not served.url:
        served.stop()
        raise AssertionError(f"serve did not become ready: {served.lines}")
    return served


_converted: dict[tuple[str, str, str], str] = {}


def modelhost_convert(path: Path, fmt: str = "md", *, pages: str | None = None, tmp: Path) -> str:
    """What `modelhost convert PATH --to FMT [--pages P]` writes (run once per session for each)."""
    key = (str(path), fmt, pages or "")
    if key not in _converted:
        out = tmp / f"{path.stem}-{pages or 'all'}.{fmt}"
        args = [sys.executable, "-m", "modelhost.cli", "convert", str(path), "--to", fmt, "-o", str(out)]
        if pages:
            args += ["--pages", pages]
        done = subprocess.run(args, capture_output=True, text=True, timeout=STATE_WAIT_SECONDS)
        assert done.returncode == 0, done.stderr
        _converted[key] = out.read_text(encoding="utf-8")
    return _converted[key]


def wait_task(client: httpx.Client, task_id: str) -> dict[str, Any]:
    """Poll a task (its long poll) until it is success or failure."""
    deadline = time.monotonic() + STATE_WAIT_SECONDS
    while True:
        status: dict[str, Any] = client.get(f"/v1/status/poll/{task_id}", params={"wait": 5}).json()
        if status.get("task_status") in ("success", "failure"):
            return status
        assert time.monotonic() < deadline, status

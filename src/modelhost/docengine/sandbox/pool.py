"""The sandbox's parent side: a pool of bounded children (child.py) that parse untrusted documents, each job's
wall-time bound, and what a job's answer or a child's death becomes (a value, `Pixels`, a `PageError`, or a
`DocumentError` naming the file and the bound it hit). The package's doc says why the children exist."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from modelhost.docengine.errors import DocumentError
from modelhost.docengine.sandbox.child import MEMORY_EXIT

#: Largest DPI accepted: a letter page at 600 DPI is 5100x6600 (34 MP, ~100 MB RGB), already past what OCR needs.
MAX_DPI = 600

#: How long (seconds) a child that hung up is given to finish exiting before it is killed: its exit status is what
#: says which bound it hit (killing it at once reported a MemoryError's exit as SIGKILL).
EXIT_GRACE = 2.0

#: How long a fresh child may take to start (Python, then pdfium imported): ~0.2 s idle, seconds on a loaded
#: machine; a child that has not started in 2 minutes is on a machine that cannot run it.
START_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class Limits:
    """What one child may spend. The defaults fit the largest legitimate job with room to spare.

    `memory_bytes` (RLIMIT_AS, address space, not RSS): Python and pdfium take ~300 MB of address space idle, a page
    at MAX_PAGE_PIXELS is 128 MiB of RGB plus pdfium's own bitmap and the parsed document; 2 GiB is several times
    that, while two children stay far from what the 8 GB hosts this runs on have. `cpu_seconds` per job: the
    slowest real page measured renders in ~2 s at 300 DPI; 60 s is a page no reader should wait for.
    `wall_seconds`: CPU plus the time a loaded machine takes to schedule it.
    """

    memory_bytes: int = 2 << 30
    cpu_seconds: int = 60
    wall_seconds: float = 180.0


class PageError(DocumentError):
    """One page could not be read (it does not load, or it killed its sandbox); the document's other pages may.

    `killed` is True when the page exhausted a bound (its child died or was stopped): such a page is expensive to
    try, and a document of them is given up after a few."""

    def __init__(self, message: str, *, page: int, killed: bool = False) -> None:
        super().__init__(message)
        self.page = page
        self.killed = killed


@dataclass(frozen=True, slots=True)
class Pixels:
    """A rendered page: `width` x `height` RGB rows of `stride` bytes in `data`."""

    width: int
    height: int
    stride: int
    data: bytes

    def image(self) -> Any:
        """The pixels as a PIL RGB image: a copy (PIL keeps RGB as 4 bytes a pixel); `array()` is not."""
        from PIL import Image

        return Image.frombuffer("RGB", (self.width, self.height), self.data, "raw", "RGB", self.stride, 1)

    def array(self) -> Any:
        """The pixels as a read-only HxWx3 uint8 array sharing `data` (pdfium renders packed rows: no copy), which
        is what a model reads; `np.asarray(image())` would copy them again, twice over at its peak."""
        import numpy as np

        rows = np.frombuffer(self.data, np.uint8, self.stride * self.height).reshape(self.height, self.stride)
        return rows[:, : self.width * 3].reshape(self.height, self.width, 3)


class Sandbox:
    """A pool of `workers` pdfium children under `limits`; thread-safe, blocking (call it from worker threads).

    Children start on first use (or `start()`) and are reused until `close()`. `name` in each call is how the file
    is named in errors (an upload's own name): the path is never shown.
    """

    def __init__(self, workers: int | None = None, limits: Limits | None = None) -> None:
        self.workers = workers or max(1, min(2, os.cpu_count() or 1))
        self.limits = limits or Limits()
        # Last in, first out: a job takes the child that finished last, so jobs one after the other (a page count,
        # then a page's text layer) stay on one started child that still holds the document open, and a second
        # child starts only when two jobs run at once. First in, first out started both children for a one-page
        # file: 0.3 CPU s more of Python start-up, a third of `modelhost convert`'s whole cost on such a file.
        self._idle: queue.LifoQueue[_Child] = queue.LifoQueue()
        self._children = [_Child(self.limits) for _ in range(self.workers)]
        for child in reversed(self._children):
            self._idle.put(child)
        self._closed = False

    def start(self) -> None:
        """Start every child now (each costs ~0.2 s of Python start-up), so the first pages do not wait for it."""
        for child in self._children:
            with child.lock:
                child.ensure_started()

    def page_count(self, path: Path | str, name: str | None = None) -> int:
        """The number of pages the document declares. DocumentError (naming the file) when it cannot be opened."""
        count: int = self._run(("count", str(path), 0, 0), _name(path, name), 0)
        return count

    def text_layer(self, path: Path | str, index: int, name: str | None = None) -> Any:
        """docengine's `read_text_layer` of page `index` (0-based), as a PageContent. PageError when it fails."""
        return self._run(("text", str(path), index, 0), _name(path, name), index + 1)

    def render(self, path: Path | str, index: int, dpi: int, name: str | None = None) -> Pixels:
        """Page `index` (0-based) rendered at `dpi`, within MAX_PAGE_PIXELS. PageError when it fails."""
        pixels: Pixels = self._run(("render", str(path), index, check_dpi(dpi)), _name(path, name), index + 1)
        return pixels

    def frame_count(self, path: Path | str, name: str | None = None) -> int:
        """The frames of a PNG, JPEG or TIFF image, each checked against MAX_PAGE_PIXELS from its header before any
        is decoded. DocumentError (naming the file) when it is no such image or a frame is too big."""
        count: int = self._run(("frames", str(path), 0, 0), _name(path, name), 0)
        return count

    def decode(self, path: Path | str, index: int, name: str | None = None) -> Pixels:
        """Frame `index` (0-based) of an image decoded to RGB. PageError when it fails."""
        pixels: Pixels = self._run(("decode", str(path), index, 0), _name(path, name), index + 1)
        return pixels

    def close(self) -> None:
        """Stop every child (idempotent)."""
        self._closed = True
        for child in self._children:
            child.stop()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pids(self) -> list[int]:
        """The running children's process ids (for tests and metrics)."""
        return [c.proc.pid for c in self._children if c.proc is not None and c.proc.poll() is None]

    def _run(self, job: tuple[str, str, int, int], name: str, page: int) -> Any:
        if self._closed:
            raise RuntimeError("the sandbox is closed")
        child = self._idle.get()
        try:
            with child.lock:
                return child.run(job, name, page)
        finally:
            self._idle.put(child)


_shared: Sandbox | None = None
_shared_lock = threading.Lock()


def shared_sandbox() -> Sandbox:
    """This process's sandbox, made on first use and stopped at exit: its children are started once, reused by
    every document of every door."""
    global _shared
    with _shared_lock:
        if _shared is None:
            import atexit

            _shared = Sandbox()
            atexit.register(_shared.close)
        return _shared


def _name(path: Path | str, name: str | None) -> str:
    return name if name is not None else Path(path).name


def check_dpi(dpi: int) -> int:
    """A DPI in 36..MAX_DPI, else InvalidInputError."""
    from modelhost.errors import InvalidInputError

    if isinstance(dpi, bool) or not isinstance(dpi, int) or not 36 <= dpi <= MAX_DPI:
        raise InvalidInputError(f"dpi must be an integer from 36 to {MAX_DPI}, got {dpi!r}")
    return dpi


class _Child:
    """One child process and the parent's end of its socket; used under `lock`, one job at a time."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.conn: Connection | None = None
        self.ready = False

    def ensure_started(self) -> Connection:
        if self.proc is not None and self.conn is not None and self.proc.poll() is None:
            return self.conn
        self.stop()
        parent, child = socket.socketpair()
        try:
            serve = f"serve({child.fileno()}, {self.limits.memory_bytes})"
            code = f"from modelhost.docengine.sandbox.child import serve; {serve}"
            spawn = _spawner().submit(
                subprocess.Popen,
                [sys.executable, "-c", code],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,  # pdfium's abort message on a bomb says nothing the PageError does not
                close_fds=True,
            )
            self.proc = spawn.result()
        finally:
            child.close()
        self.conn = Connection(parent.detach())
        self.ready = False
        return self.conn

    def _await_ready(self, conn: Connection, name: str, page: int) -> None:
        # A fresh child answers "ready" once Python and pdfium are imported: a job's wall bound then times the job,
        # not a start-up that takes seconds on a loaded machine (a 1 s bound once failed a good page that way).
        if not conn.poll(START_SECONDS):
            raise self._stopped(name, page, f"did not start within {START_SECONDS:g} s")
        if conn.recv() != "ready":
            raise self._stopped(name, page, "started wrongly")
        self.ready = True

    def run(self, job: tuple[str, str, int, int], name: str, page: int) -> Any:
        conn = self.ensure_started()
        try:
            if not self.ready:
                self._await_ready(conn, name, page)
            conn.send((*job, self.limits.cpu_seconds))
            reply = self._receive(conn, name, page)
            if reply[0] == "pixels":
                _, width, height, stride = reply
                if not conn.poll(self.limits.wall_seconds):
                    raise self._stopped(name, page, "took longer than its wall-time bound")
                data = conn.recv_bytes(stride * height + 1)
                return Pixels(width, height, stride, data)
        except (EOFError, OSError):
            raise self._stopped(name, page, "stopped its reader") from None
        if reply[0] == "ok":
            return reply[1]
        _, message, retire, page_level = reply
        if retire:
            self.stop()
        if page_level:
            raise PageError(f"{name}: {message}", page=page)
        raise DocumentError(f"{name}: {message}")

    def _receive(self, conn: Connection, name: str, page: int) -> Any:
        if not conn.poll(self.limits.wall_seconds):
            raise self._stopped(name, page, f"took longer than {self.limits.wall_seconds:g} s")
        return conn.recv()

    def _stopped(self, name: str, page: int, what: str) -> DocumentError:
        """The child is gone or stopped: it is killed, and the error says which bound it hit as far as is known."""
        assert self.proc is not None
        if self.proc.poll() is None:
            try:
                # A child that hung up is usually exiting; one that did not answer in time is not.
                self.proc.wait(timeout=EXIT_GRACE if "longer" not in what else 0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        returncode = self.proc.wait()
        self.stop()
        if returncode == -signal.SIGXCPU:
            why = f"used more than {self.limits.cpu_seconds} s of CPU"
        elif returncode in (-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS):
            bound = self.limits.memory_bytes >> 20
            why = f"exhausted its {bound} MiB memory bound (pdfium stopped with {_signame(returncode)})"
        elif returncode == MEMORY_EXIT:
            why = f"exhausted its {self.limits.memory_bytes >> 20} MiB memory bound (an allocation failed)"
        elif "longer" in what:
            why = what
        else:
            why = f"{what} ({_signame(returncode)})"
        where = f"page {page}" if page else "opening it"
        message = f"{name}: {where} {why}"
        return PageError(message, page=page, killed=True) if page else DocumentError(message)

    def stop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.proc is not None:
            if self.proc.poll() is None:
                # EOF on its socket ends an idle child at once; one inside a job is killed.
                try:
                    self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None


_spawn_pool: ThreadPoolExecutor | None = None
_spawn_lock = threading.Lock()


def _spawner() -> ThreadPoolExecutor:
    """The one thread children are started from, alive as long as the process.

    PR_SET_PDEATHSIG fires when the THREAD that started the child exits, not its process: children started from an
    `asyncio.to_thread` worker were SIGKILLed when that thread went (at the end of each `asyncio.run`, seen as
    "opening it stopped its reader (SIGKILL)" on the next document of the same process). A thread that never exits
    before the process does keeps the death signal meaning "the host is gone"."""
    global _spawn_pool
    with _spawn_lock:
        if _spawn_pool is None:
            _spawn_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pdfium-sandbox-spawner")
        return _spawn_pool


def _signame(returncode: int) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-returncode).name
    return f"exit status {returncode}"


def page_ranges(numbers: Iterable[int]) -> str:
    """`2-5, 9` from page numbers in any order: how a report names many failed pages in one line."""
    ordered = sorted(set(numbers))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(parts)

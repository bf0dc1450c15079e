"""pdfium and the image decoders on untrusted files, in child processes bounded in memory, CPU time and wall time.

pdfium runs in this process's address space, and one 700-byte PDF (a Form XObject that draws itself twice) sends
it into unbounded memory: 8 GB in a minute, the worker and every door dead with it. Image decoders (libpng,
libjpeg, libtiff under Pillow) are C too, with their own history of crashes and overflows on crafted files. So every
call that parses a document (a PDF's open, page count, text layer and rendering; an image's frame count and
decoding) runs in a small pool of children, each one:

- bounded in memory by RLIMIT_AS (set by the child on itself before it imports pdfium): an allocation past it
  fails, and pdfium aborts, which kills that child only;
- bounded in CPU time per job: the soft RLIMIT_CPU is raised before each job to the CPU used so far plus the
  job's allowance (the child is reused, and RLIMIT_CPU counts a process's whole life), so a job past it gets
  SIGXCPU;
- bounded in wall time by the parent, which kills a child that has not answered in time (a child blocked on
  something that costs no CPU still ends);
- killed with its parent (PR_SET_PDEATHSIG, armed from a spawner thread that lives as long as the process), so a
  SIGKILLed worker leaves no pdfium behind.

A child that dies is replaced on its next job; the job's caller gets a `PageError` (or `DocumentError` when the
document could not even be opened) naming the file and what stopped it, and the other pages and documents go on.

pdfium keeps a process-wide "last error" that only failures set: a document that fails to open without setting it
(a PDF of no pages) reports the previous failure ("incorrect password" after an encrypted PDF, seen in the worker).
A child whose open failed therefore exits after answering, and the next job gets a fresh process.

Results cross the process boundary cheaply: the text layer's PageContent by pickle (plain values), a rendered page
as its raw RGB rows through the socket (`send_bytes`, one copy; measured in this module's test), which the parent
wraps as a numpy array without another copy.

Pages of one document run in parallel on the pool's children (each child keeps the document it last opened, so
page after page costs one open per child).
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import queue
import resource
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

#: Largest rendered page, in pixels: the inferd wire's per-request budget (128 MiB of RGB). A page that declares a
#: bigger size at the asked DPI is rendered at the largest resolution within the bound, not refused.
MAX_PAGE_PIXELS = (128 << 20) // 3
#: Largest DPI accepted: a letter page at 600 DPI is 5100x6600 (34 MP, ~100 MB RGB), already past what OCR needs.
MAX_DPI = 600


#: Image formats a child decodes; anything else that is not a PDF is refused by name.
IMAGE_FORMATS = ("PNG", "JPEG", "TIFF")
#: Most frames an image document may have: a multi-page TIFF scan is tens of pages; counting frames walks every
#: IFD, so a file claiming millions is refused before that walk costs minutes.
MAX_FRAMES = 10_000

#: A child's exit status when an allocation failed against its memory bound (Python's MemoryError), so the parent
#: names the bound as it does for pdfium's abort.
MEMORY_EXIT = 86
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
        self._idle: queue.SimpleQueue[_Child] = queue.SimpleQueue()
        self._children = [_Child(self.limits) for _ in range(self.workers)]
        for child in self._children:
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
            code = (
                f"from modelhost.docengine.sandbox import _serve; _serve({child.fileno()}, {self.limits.memory_bytes})"
            )
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


# ---- the child ------------------------------------------------------------------------------------------------


def _serve(fd: int, memory_bytes: int) -> None:
    """The child's loop: bound itself, then answer jobs until its socket closes."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    _die_with_parent()
    conn = Connection(fd)
    import PIL.Image  # noqa: F401  (imported before "ready": no job's wall time pays for it)
    import pypdfium2  # noqa: F401

    import modelhost.docengine.textlayer  # noqa: F401

    conn.send("ready")
    state = _Open()
    images = _OpenImage()
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        op, path, index, dpi, cpu_seconds = job
        used = resource.getrusage(resource.RUSAGE_SELF)
        limit = math.ceil(used.ru_utime + used.ru_stime + cpu_seconds)
        resource.setrlimit(resource.RLIMIT_CPU, (limit, resource.RLIM_INFINITY))
        try:
            if op in ("frames", "decode"):
                reply = _image_job(images, op, path, index)
            else:
                reply = _job(state, op, path, index, dpi)
        except _Refusal as refusal:
            conn.send(("error", refusal.message, refusal.retire, refusal.page_level))
            if refusal.retire:
                return  # pdfium's last-error state is now stale: the next job gets a fresh process
            continue
        except MemoryError:
            # An allocation (Python's, or a decoder's through Python) hit the bound: exit with a status that says
            # so, and the parent reports the page as one that exhausted its memory bound.
            os._exit(MEMORY_EXIT)
        except Exception as exc:  # a defect of the reader, not of the document: say so, and start afresh
            opening = op in ("count", "frames")
            where = "opening it" if opening else f"page {index + 1}"
            conn.send(("error", f"{where} could not be read ({type(exc).__name__}: {exc})", True, not opening))
            return
        if isinstance(reply, _Rendered):
            conn.send(("pixels", reply.width, reply.height, reply.stride))
            conn.send_bytes(reply.buffer)
        else:
            conn.send(("ok", reply))


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(1)


class _Refusal(Exception):
    def __init__(self, message: str, *, retire: bool = False, page_level: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retire = retire
        self.page_level = page_level


@dataclass(slots=True)
class _Rendered:
    width: int
    height: int
    stride: int
    buffer: Any


def _identity(path: str) -> tuple[str, int, int]:
    """What names one version of a source file (its path, modification time and size): a child keeps a file open while
    this stays the same, and reopens it once the file at that path has been replaced or rewritten."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise _Refusal(f"cannot read it ({exc.strerror or exc})") from exc
    return (path, st.st_mtime_ns, st.st_size)


class _Open:
    """The document a child has open: reopened only when another path (or the same path changed) is asked for."""

    def __init__(self) -> None:
        self.key: tuple[str, int, int] | None = None
        self.pdf: Any = None

    def get(self, path: str) -> Any:
        import pypdfium2 as pdfium

        key = _identity(path)
        if key == self.key:
            return self.pdf
        self.close()
        try:
            pdf = pdfium.PdfDocument(path)
        except pdfium.PdfiumError as exc:
            text = str(exc)
            if "password" in text.lower():
                raise _Refusal("the PDF is encrypted (a password is needed to read it)", retire=True) from exc
            if text.endswith("(PDFium: Success)."):  # a failure pdfium gives no reason for (no page tree, say)
                text = "pdfium gives no reason"
            raise _Refusal(f"not a readable PDF ({text})", retire=True) from exc
        if len(pdf) == 0:
            pdf.close()
            raise _Refusal("the document has no pages")
        self.key, self.pdf = key, pdf
        return pdf

    def close(self) -> None:
        if self.pdf is not None:
            self.pdf.close()
        self.key = self.pdf = None


class _OpenImage:
    """The image a child has open (PIL reads frames lazily: the file stays open between a count and its frames)."""

    def __init__(self) -> None:
        self.key: tuple[str, int, int] | None = None
        self.image: Any = None
        self.count = 0

    def get(self, path: str) -> tuple[Any, int]:
        from PIL import Image

        key = _identity(path)
        if key == self.key:
            return self.image, self.count
        self.close()
        try:
            image = Image.open(path, formats=IMAGE_FORMATS)
        except Exception as exc:
            raise _Refusal(f"neither a PDF nor a PNG, JPEG or TIFF image ({exc})") from exc
        try:
            count = count_frames(image)
        except ValueError as exc:
            image.close()
            raise _Refusal(str(exc)) from exc
        self.key, self.image, self.count = key, image, count
        return image, count

    def close(self) -> None:
        if self.image is not None:
            self.image.close()
        self.key, self.image, self.count = None, None, 0


def count_frames(image: Any) -> int:
    """The number of frames of an opened PIL image, every one checked against MAX_PAGE_PIXELS before any is
    decoded; ValueError saying which frame is too big (or unreadable).

    Checking the first frame only let a TIFF whose first frame is 1x1 carry 12000x12000 frames after it (432 MB of
    RGB each). Seeking reads a frame's header, not its pixels."""
    count = 0
    while True:
        if image.width * image.height > MAX_PAGE_PIXELS:
            where = f" (frame {count + 1})" if count else ""
            raise ValueError(f"a {image.width}x{image.height} image{where} is over {MAX_PAGE_PIXELS} pixels")
        count += 1
        if count > MAX_FRAMES:
            raise ValueError(f"more than {MAX_FRAMES} frames")
        try:
            image.seek(count)
        except EOFError:
            break
        except Exception as exc:
            raise ValueError(f"frame {count + 1} cannot be read ({exc})") from exc
    image.seek(0)
    return count


def _image_job(state: _OpenImage, op: str, path: str, index: int) -> Any:
    image, count = state.get(path)
    if op == "frames":
        return count
    if not 0 <= index < count:
        raise _Refusal(f"no page {index + 1} (it has {count})", page_level=True)
    try:
        image.seek(index)
        rgb = image.convert("RGB")
    except MemoryError:
        raise  # the child's bound: it exits, and the parent reports the page as one that exhausted it
    except Exception as exc:  # a truncated or corrupt frame: Pillow's own errors, whatever their class
        raise _Refusal(f"page {index + 1} cannot be decoded ({exc})", page_level=True) from exc
    data = rgb.tobytes()  # packed RGB rows: what the parent wraps as an array without another copy
    rgb.close()
    return _Rendered(image.width, image.height, image.width * 3, data)


def _job(state: _Open, op: str, path: str, index: int, dpi: int) -> Any:
    pdf = state.get(path)
    if op == "count":
        return len(pdf)
    if not 0 <= index < len(pdf):
        raise _Refusal(f"no page {index + 1} (it has {len(pdf)})", page_level=True)
    import pypdfium2 as pdfium

    try:
        page = pdf[index]
    except pdfium.PdfiumError as exc:
        raise _Refusal(f"page {index + 1} cannot be loaded ({exc})", page_level=True) from exc
    try:
        if op == "text":
            from modelhost.docengine.textlayer import read_text_layer

            return pickle.loads(pickle.dumps(read_text_layer(pdf, index)))  # fail here, not in send, if it cannot
        width, height = page.get_size()
        scale = bounded_scale(index + 1, width, height, dpi)
        bitmap = page.render(scale=scale, rev_byteorder=True, may_draw_forms=True)
        return _Rendered(bitmap.width, bitmap.height, bitmap.stride, bitmap.buffer)
    except pdfium.PdfiumError as exc:
        raise _Refusal(f"page {index + 1} cannot be read ({exc})", page_level=True) from exc
    finally:
        page.close()


def bounded_scale(number: int, width: float, height: float, dpi: int) -> float:
    """pdfium's render scale for `dpi`, lowered so the page stays within MAX_PAGE_PIXELS.

    A PDF declares its page size, and a hostile or odd one (a 200-inch poster, a huge UserUnit) at 300 DPI would be
    tens of gigabytes of pixels: bounded before pdfium allocates anything. Such a page is still read, at the largest
    resolution the bound allows, rather than refused."""
    if not (math.isfinite(width) and math.isfinite(height) and width > 0 and height > 0):
        raise _Refusal(f"page {number} declares no usable size ({width} x {height} points)", page_level=True)
    scale = dpi / 72.0
    if width * height * scale * scale > MAX_PAGE_PIXELS:
        scale = math.sqrt(MAX_PAGE_PIXELS / (width * height)) * 0.999  # rounding up must not cross the bound
    return scale


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

"""The sandbox's child: a process that bounds itself, then opens, counts, reads and renders untrusted documents one
job at a time for the pool (pool.py) until its socket closes.

Started as `python -c "from modelhost.docengine.sandbox.child import serve; serve(fd, memory_bytes)"`: it sets
RLIMIT_AS on itself before it imports pdfium, raises its soft RLIMIT_CPU before each job to the CPU used so far plus
the job's allowance, and asks the kernel to kill it with its parent. A job is `(op, path, index, dpi, cpu_seconds)`
with `op` one of "count", "text", "render" (a PDF) or "frames", "decode" (an image); the answer is `("ok", value)`,
`("pixels", width, height, stride)` followed by the raw rows, or `("error", message, retire, page_level)`. A refusal
that leaves pdfium's process-wide last-error stale (a failed open) retires the child after its answer.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import resource
import signal
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

#: Largest rendered page, in pixels: the inferd wire's per-request budget (128 MiB of RGB). A page that declares a
#: bigger size at the asked DPI is rendered at the largest resolution within the bound, not refused.
MAX_PAGE_PIXELS = (128 << 20) // 3
#: Image formats a child decodes; anything else that is not a PDF is refused by name.
IMAGE_FORMATS = ("PNG", "JPEG", "TIFF")
#: Most frames an image document may have: a multi-page TIFF scan is tens of pages; counting frames walks every
#: IFD, so a file claiming millions is refused before that walk costs minutes.
MAX_FRAMES = 10_000

#: A child's exit status when an allocation failed against its memory bound (Python's MemoryError), so the parent
#: names the bound as it does for pdfium's abort.
MEMORY_EXIT = 86


def serve(fd: int, memory_bytes: int) -> None:
    """The child's loop: bound itself, then answer jobs until its socket closes."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    _die_with_parent()
    conn = Connection(fd)
    import PIL.Image  # noqa: F401  (imported before "ready": no job's wall time pays for it)
    import pypdfium2  # noqa: F401

    import modelhost.docengine.textlayer  # noqa: F401

    conn.send("ready")
    state = _OpenPdf()
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
                reply = _pdf_job(state, op, path, index, dpi)
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


class _OpenPdf:
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


def _pdf_job(state: _OpenPdf, op: str, path: str, index: int, dpi: int) -> Any:
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

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

Modules: `pool` (the parent: `Sandbox`, its children's starts, bounds and deaths, `PageError`, `Pixels`) and `child`
(the child's loop and its jobs: open, count, text layer, render, decode). The names below are the package's.
"""

from modelhost.docengine.sandbox.child import (
    IMAGE_FORMATS,
    MAX_FRAMES,
    MAX_PAGE_PIXELS,
    MEMORY_EXIT,
    bounded_scale,
    count_frames,
)
from modelhost.docengine.sandbox.pool import (
    EXIT_GRACE,
    MAX_DPI,
    START_SECONDS,
    Limits,
    PageError,
    Pixels,
    Sandbox,
    check_dpi,
    page_ranges,
    shared_sandbox,
)

__all__ = [
    "EXIT_GRACE",
    "IMAGE_FORMATS",
    "MAX_DPI",
    "MAX_FRAMES",
    "MAX_PAGE_PIXELS",
    "MEMORY_EXIT",
    "START_SECONDS",
    "Limits",
    "PageError",
    "Pixels",
    "Sandbox",
    "bounded_scale",
    "check_dpi",
    "count_frames",
    "page_ranges",
    "shared_sandbox",
]

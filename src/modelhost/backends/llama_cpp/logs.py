"""llama.cpp's own log lines, through Python's logging instead of straight onto stderr.

llama.cpp logs from C through one process-wide callback. Left to llama-cpp-python's, a line it wrote at its error
level reached the terminal raw, in the middle of `modelhost embed`'s output ("llama_init_from_model: model default
pooling_type is [-1], but [1] was specified": modelhost chose that pooling, and the line says it was applied).
Here each line goes to the `modelhost.llama_cpp` logger: llama.cpp's errors as warnings (what a user may need),
its warnings and everything else at debug, and the lines listed in EXPECTED at debug whatever their level, so a
user sees only what means something and `logging.getLogger("modelhost.llama_cpp").setLevel(logging.DEBUG)` (with
a handler) shows all of it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

log = logging.getLogger("modelhost.llama_cpp")

#: Lines llama.cpp logs as problems that are modelhost's own choices, applied as asked: said at debug only.
EXPECTED = (
    # The embedding context asks for the pooling modelhost picks for the architecture (embedding.pooling_type) where
    # the GGUF names none (-1): llama.cpp says it used what was asked.
    "pooling_type is [-1]",
)

#: ggml_log_level: 2 warn, 3 error; 1 info, 4 debug and 5 (the continuation of the last line) stay at debug.
GGML_LOG_LEVEL_ERROR = 3

_lock = threading.Lock()
#: One Llama is built at a time in the process (see `opening`): the stderr swap below is safe only when no other
#: build swaps it meanwhile, and llama.cpp's own loads gain nothing from running side by side.
_opening = threading.Lock()
_callback: Any = None  # the ctypes callback must outlive every call llama.cpp makes to it: held here for good


def _level(level: int, line: str) -> int:
    """The Python logging level of one llama.cpp line."""
    if level == GGML_LOG_LEVEL_ERROR and not any(expected in line for expected in EXPECTED):
        return logging.WARNING
    return logging.DEBUG


def install() -> None:
    """Route llama.cpp's log through `log` from now on (idempotent; imports llama_cpp)."""
    global _callback
    import llama_cpp

    with _lock:
        if _callback is not None:
            return

        @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
        def callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
            line = text.decode("utf-8", "replace").rstrip("\n")
            if line:
                log.log(_level(level, line), "llama.cpp: %s", line)

        llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
        _callback = callback


class _LoaderStderr:
    """sys.stderr while a Llama is built: what the building thread prints (llama-cpp-python's verbose lines: the
    model's metadata, its chat format) goes to the debug log; every other thread's writes reach the real stderr."""

    def __init__(self, real: TextIO, thread: int) -> None:
        self._real = real
        self._thread = thread

    def write(self, text: str) -> int:
        if threading.get_ident() != self._thread:
            return self._real.write(text)
        for line in text.splitlines():
            if line.strip():
                log.debug("llama-cpp-python: %s", line)
        return len(text)

    def flush(self) -> None:
        self._real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@contextlib.contextmanager
def opening() -> Iterator[None]:
    """Around building a `llama_cpp.Llama`, which the caller asks for with `verbose=True` (and turns quiet after).

    With `verbose=False` llama-cpp-python silences a load by dup2()ing the process's fds 1 and 2 onto /dev/null and
    back: for the whole load every thread's output is lost (another model's "ready" line, the access log), and two
    loads at once restore each other's copies, leaving the process's stderr on /dev/null for good (a three-model
    serve went silent). Its C log already comes here (`install`), so only its own Python prints are left to quiet:
    they are taken from the building thread alone, and one build runs at a time, so no swap undoes another's."""
    with _opening:
        real = sys.stderr
        sys.stderr = _LoaderStderr(real, threading.get_ident())  # type: ignore[assignment]
        try:
            yield
        finally:
            sys.stderr = real

"""`modelhost serve` in a subprocess, for requests that must not be able to kill it: a test in-process would die
with the server it probes. The process's stderr is read on a thread, so the log stays readable and never fills
the pipe."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import httpx

from modelhost.testing.serving import door_url

#: How long a served model may take to load, and any one request to answer, on a busy 2-core machine: generous,
#: because these are bounds on a hang, never measurements.
LOAD_SECONDS = 300
REQUEST_SECONDS = 120


class ServeProcess:
    """A running `modelhost serve --http :0 --worker :0`; `http` and `worker` are clients of its two doors."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.model = ""  # the served model's name, for request bodies (set by whoever knows it)
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(LOAD_SECONDS) or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"serve did not get ready: {self.log()}")
        self.http = httpx.Client(base_url=self._url("http"), timeout=REQUEST_SECONDS)
        self.worker = httpx.Client(base_url=self._url("worker"), timeout=REQUEST_SECONDS)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip())
            if "ready: serving" in line:
                self._ready.set()
        self._ready.set()  # exited: the waiter looks at poll()

    def _url(self, door: str) -> str:
        return door_url(self.lines, door)

    def log(self) -> str:
        return "\n".join(self.lines[-40:])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_exit(self, seconds: float) -> int | None:
        try:
            return self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            return None

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.proc.pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def close(self) -> None:
        self.http.close()
        self.worker.close()
        if self.alive():
            self.proc.kill()
        self.proc.wait()


@contextmanager
def serve(args: Sequence[str], state: str, *, nofile: int | None = None) -> Iterator[ServeProcess]:
    """Serve `args` (after `modelhost serve`) on ephemeral loopback ports, the worker's jobs under `state`, until the
    block ends (then SIGKILL). `nofile`: the process's soft and hard limit of open files."""
    doors = ["--http", "127.0.0.1:0", "--worker", "127.0.0.1:0", "--state", state]

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen(
        [sys.executable, "-m", "modelhost.cli", "serve", *doors, *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "GIZ_WORKER_AUTHORIZATION": ""},
        preexec_fn=limit,
    )
    served = ServeProcess(proc)
    try:
        yield served
    finally:
        served.close()


#: How often a wait on the served process checks (modelhost.testing.waiting.wait_until's `poll`): a check is often
#: a request the server answers, or a listing of its descriptors, and the server under test shares 2 cores with it
#: (at 20 /metrics checks a second over a 60 s wait, 1,300 renders took a fifth of the server's CPU).
POLL_SECONDS = 0.25

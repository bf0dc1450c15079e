"""`modelhost serve` in a child process for end-to-end tests: started, waited for until it says it is ready, and
the addresses its doors said they serve on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from modelhost.testing.waiting import STATE_WAIT_SECONDS


class Served:
    """A `modelhost serve` process started by `start_serving`, and what it said on stderr until it was ready."""

    def __init__(self, proc: subprocess.Popen[str], lines: list[str]) -> None:
        self.proc = proc
        self.lines = lines

    def url(self, door: str) -> str:
        """The address the door (`http`, `worker`) said it serves on."""
        return door_url(self.lines, door)

    def kill(self) -> None:
        """Kill the process if it still runs, and reap it (a test's teardown)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def door_url(lines: list[str], door: str) -> str:
    """The address a door (`http`, `worker`) of `modelhost serve` said it serves on, from serve's stderr lines."""
    for line in lines:
        found = re.search(rf"modelhost: {door} on (http://\S+)", line)
        if found:
            return found.group(1)
    raise AssertionError(f"no {door} line in {lines}")


def start_serving(args: list[str], timeout: float = STATE_WAIT_SECONDS, env: dict[str, str] | None = None) -> Served:
    """`modelhost serve ARGS` once it says it is ready; AssertionError with what it said if it exits or takes
    longer than `timeout` seconds (a model's load counts: give a slow backend more)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "modelhost.cli", "serve", *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "GIZ_WORKER_AUTHORIZATION": "", **(env or {})},
    )
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"serve exited early ({proc.wait()}): {lines}")
        lines.append(line.strip())
        if "ready: serving" in line:
            return Served(proc, lines)
    proc.kill()
    raise AssertionError(f"serve not ready in {timeout} s: {lines}")

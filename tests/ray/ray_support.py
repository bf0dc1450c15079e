"""Helpers of the Ray tests: the `modelhost` CLI as a child process whose stderr lines are kept as they come."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from modelhost.testing.waiting import wait_until

#: How long a `serve --ray` may take to say it is ready: Serve's controller and proxy start, then two replicas
#: load their model, on 2 cores shared with other work (about 15-30 s quiet). Minutes bound only a hang.
READY_SECONDS = 420.0


class Cli:
    """`modelhost ARGS` running in its own session; `lines` are its stderr lines so far."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [str(Path(sys.executable).with_name("modelhost")), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = READY_SECONDS) -> None:
        """Return once a stderr line holds `text`; AssertionError (with the output) if the process ends first."""

        def seen() -> bool:
            if any(text in line for line in self.lines):
                return True
            if self.process.poll() is not None:
                self._reader.join(timeout=5)
                if any(text in line for line in self.lines):
                    return True
                raise AssertionError(f"modelhost exited {self.process.returncode} before {text!r}:\n{self.output}")
            return False

        wait_until(seen, timeout=timeout, what=f"modelhost saying {text!r}")

    def stop(self, timeout: float = 120.0) -> int:
        """SIGTERM, then the exit status (SIGKILL and AssertionError if it does not exit within `timeout`)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"modelhost did not stop {timeout:.0f} s after SIGTERM:\n{self.output}") from None

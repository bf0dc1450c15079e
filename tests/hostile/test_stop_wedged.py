"""A stop signal always stops the process, even while its model thread is wedged (issue 25: neither SIGTERM nor a
second one stopped a server whose model thread was stuck in a grammar step; only kill -9 did)."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

from .serving import LOAD_SECONDS, POLL_SECONDS

#: How long the stop may take at most: grace (1 s) + serve.HARD_EXIT_SECONDS (10 s), with a wide margin for a busy
#: machine. A bound on a hang, not a measurement.
STOP_BOUND_SECONDS = 120


def test_sigterm_stops_a_server_whose_model_thread_is_wedged() -> None:
    script = Path(__file__).with_name("serve_wedged.py")
    proc = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip())
            if "ready: serving" in line:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(LOAD_SECONDS), lines
        url = next(m.group(1) for line in lines if (m := re.search(r"http on (http://\S+)", line)))
        with httpx.Client(base_url=url, timeout=STOP_BOUND_SECONDS) as http:
            # A request the model thread starts and never finishes (the stand-in's gate is never released).
            threading.Thread(
                target=lambda: _swallow(http, {"model": "wedged", "prompt": "x", "max_tokens": 4}), daemon=True
            ).start()
            running = 'modelhost_num_requests_running{model_name="wedged"} 1.0'
            wait_until(lambda: running in http.get("/metrics").text, STATE_WAIT_SECONDS, running, poll=POLL_SECONDS)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(STOP_BOUND_SECONDS)
        assert code == 1, (code, lines)
        assert any("stuck in a native call): exiting now" in line for line in lines), lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _swallow(http: httpx.Client, body: dict[str, object]) -> None:
    with contextlib.suppress(httpx.HTTPError):  # the server goes away under it: that is the point
        http.post("/v1/completions", json=body)

"""Waiting for a state in a test: poll until it holds, bounded only against a hang.

A test on a busy machine (load 8-17 on 2 cores) must wait for the event or state it needs, not for a deadline of
seconds: waits of 10-30 s ran out while the code under test was right, only slow. The bound here ends a test that
would hang, with a message naming what it waited for.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: The bound on one wait: minutes, far past anything a loaded machine stretches a wait to, and under the suite's
#: per-test timeout (300 s, pyproject.toml) so that the failure names the condition rather than a stack dump.
STATE_WAIT_SECONDS = 240.0

#: How often a condition is checked: often enough to add nothing to a test's time, rare enough to cost no CPU.
POLL_SECONDS = 0.01


def wait_until(
    predicate: Callable[[], bool],
    timeout: float = STATE_WAIT_SECONDS,
    what: str = "condition",
    *,
    poll: float = POLL_SECONDS,
) -> None:
    """Return once `predicate()` holds; AssertionError naming `what` after `timeout` seconds. `poll` is the pause
    between checks: longer where a check costs the server under test work (a /metrics render)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met in {timeout:.0f} s")
        time.sleep(poll)

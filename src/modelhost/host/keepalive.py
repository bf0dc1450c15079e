"""The keep-alive sweep's timing: how often a model set looks for models idle past their keep-alive (Ollama's
expiry timers), and the loop that looks. What a pass does is the set's (`Models.sweep`): unload the idle models,
load the ones waiting for memory that has freed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

#: How often the keep-alive sweep looks for idle models, at most: idle times are seconds to minutes, so a second of
#: lateness is noise; a short keep-alive (tests) is checked four times per period.
MAX_SWEEP_SECONDS = 1.0

#: The shortest period of a sweep chosen from a keep-alive: a keep-alive of 0 (unload once idle) is looked at this
#: often, which costs a few microseconds a pass; a request's keep_alive wakes the sweep at once anyway.
MIN_SWEEP_SECONDS = 0.02


def sweep_interval(keep_alive: float | None, chosen: float | None = None) -> float:
    """Seconds between passes: `chosen` when given (0: every turn of the event loop), else a quarter of
    `keep_alive` within MIN_SWEEP_SECONDS and MAX_SWEEP_SECONDS (None: models stay for good, MAX_SWEEP_SECONDS)."""
    if chosen is not None:
        return chosen
    if keep_alive is None:
        return MAX_SWEEP_SECONDS
    return max(MIN_SWEEP_SECONDS, min(MAX_SWEEP_SECONDS, keep_alive / 4))


async def sweep_every(interval: float, wake: asyncio.Event, sweep: Callable[[], None]) -> None:
    """Run `sweep` every `interval` seconds, and at once when `wake` is set, until cancelled."""
    while True:
        if interval > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), interval)
        else:
            await asyncio.sleep(0)
        wake.clear()
        sweep()

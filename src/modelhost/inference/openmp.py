"""How the compute threads wait: the `poll` load option, applied to OpenMP (libgomp) before a backend loads it.

llama.cpp (as llama-cpp-python builds it on Linux) and torch compute on OpenMP thread groups. A thread that reaches a
barrier before the others, or that has finished its share of one token, waits; libgomp spins `GOMP_SPINCOUNT` times
(300000, about 3 ms, when nothing is set: what llama-server runs with) and then sleeps on a futex. A decode step of a
small model crosses hundreds of barriers a few microseconds apart, so sleeping at once (OMP_WAIT_POLICY=PASSIVE)
pays a futex wake at each and decodes SmolLM2-135M 2.5x slower on idle cores; spinning for milliseconds beside busy
processes burns the time slice the awaited thread needs, and decoding collapses (issue 36; bench/wait_policy.py).
A short spin keeps both: the barriers of one step are crossed spinning, and a thread whose partner was descheduled
stops wasting its core after DEFAULT_POLL's spins.

`poll` is llama-server's `--poll` scale, 0 to 100: 0 sleeps at once (as PASSIVE), 100 spins as long as libgomp's
default (as llama-server), and the levels between scale the spin linearly. libgomp reads its settings once, when
the library is loaded (the first `import llama_cpp` or `import torch` of the process), so `configure` sets
`GOMP_SPINCOUNT` just before a backend's first import and is then fixed for the process: a later load that asks for
another poll is refused rather than silently run with the first one. A wait the user set (OMP_WAIT_POLICY or
GOMP_SPINCOUNT in the environment) is left alone unless a load names a poll. Only libgomp is governed: a build of
llama.cpp without OpenMP (its own thread pool, as on macOS) or with Intel's runtime ignores the variable.
"""

from __future__ import annotations

import os
import threading

from modelhost.errors import InvalidOptionError

#: The top of the scale (llama-server's `--poll` range is 0-100 too).
MAX_POLL = 100

#: libgomp's own spin count when neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set (its env.c: "3 msec blocking",
#: at its estimate of 100000 spins per millisecond): what llama-server's threads do, and poll 100 here.
LIBGOMP_DEFAULT_SPINS = 300_000

#: The poll used when neither the load nor the environment chooses: 3000 spins, tens of microseconds. Measured on
#: SmolLM2-135M (bench/wait_policy.py, 2 cores; figures in the README): it covers the gaps between one step's
#: barriers, so idle cores decode as fast as with libgomp's default, and it is short enough that a thread whose
#: partner lost its core beside busy processes gives the core up almost at once, as PASSIVE does.
DEFAULT_POLL = 1

#: The variables through which libgomp is told how to wait; a user who set either has chosen.
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")

_lock = threading.Lock()
#: The poll this module put in force (None: it has set nothing), so a later load can be checked against it.
_in_force: int | None = None


def spins(poll: int) -> int:
    """libgomp's spin count for a poll level (0 to MAX_POLL)."""
    return poll * LIBGOMP_DEFAULT_SPINS // MAX_POLL


def loaded() -> bool:
    """Whether a libgomp is mapped into this process already (its settings then are fixed). Read from
    /proc/self/maps; where that does not exist, only a runtime this module prepared is known to be loaded."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any("libgomp" in line for line in maps)
    except OSError:
        return _in_force is not None


def in_force() -> int | None:
    """The poll this process's OpenMP threads wait with, when modelhost set it; None when it set nothing (the
    user's environment, or a runtime loaded before modelhost was asked, decides)."""
    return _in_force


def configure(poll: int | None) -> None:
    """Make `poll` (None: DEFAULT_POLL, unless the environment chose) how OpenMP threads wait in this process.

    Call it just before importing a library that loads libgomp. Before libgomp is loaded it sets GOMP_SPINCOUNT (and
    nothing else); afterwards it only checks: an explicit poll other than the one in force raises
    InvalidOptionError, because libgomp would silently keep the first.
    """
    global _in_force
    with _lock:
        if not loaded():
            if poll is None and any(name in os.environ for name in WAIT_VARIABLES):
                return  # the user's own wait
            chosen = DEFAULT_POLL if poll is None else poll
            os.environ["GOMP_SPINCOUNT"] = str(spins(chosen))
            _in_force = chosen
            return
        if poll is None or poll == _in_force:
            return
        if _in_force is None:
            why = "OpenMP was loaded before modelhost could set how its threads wait (torch or llama_cpp was imported)"
        else:
            why = f"this process's OpenMP threads already wait with poll {_in_force}, fixed when OpenMP was loaded"
        raise InvalidOptionError(
            "poll", f"{why}; pass the same poll to every load, or set GOMP_SPINCOUNT before the process starts"
        )

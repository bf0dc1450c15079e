"""How the compute threads wait: the `poll` load option, applied to OpenMP (libgomp) before a backend loads it.

llama.cpp (as llama-cpp-python builds it on Linux) and torch compute on OpenMP thread groups. A thread that reaches a
barrier before the others, or that has finished its share of one token, waits; libgomp spins `GOMP_SPINCOUNT` times
(300000, about 3 ms, when nothing is set: what llama-server runs with) and then sleeps on a futex. A decode step of a
small model crosses hundreds of barriers a few microseconds apart, so sleeping at once (OMP_WAIT_POLICY=PASSIVE)
pays a futex wake at each and decodes SmolLM2-135M 2.5x slower on idle cores; spinning for milliseconds beside busy
processes burns the time slice the awaited thread needs, and decoding collapses (issue 36; bench/wait_policy.py).
No one wait is right on both, so the default is chosen by measuring, once, as OpenMP is loaded (`measured_poll`):
for a tenth of a second this process runs one busy thread per core it may use and asks the kernel how long they
waited for a CPU (their run delay, /proc/thread-self/schedstat). Threads that each had a core spin as llama-server's do
(QUIET_POLL); threads that queued behind other processes sleep at once (BUSY_POLL). The choice holds for the
process: a server started on idle cores that later shares them with a build keeps spinning and slows as
llama-server does; `poll=0` (or OMP_WAIT_POLICY=PASSIVE) is the setting for a machine that is rarely idle.

`poll` is llama-server's `--poll` scale, 0 to 100: 0 sleeps at once (as PASSIVE), 100 spins as long as libgomp's
default (as llama-server), and the levels between scale the spin linearly. libgomp reads its settings once, when
the library is loaded (the first `import llama_cpp` or `import torch` of the process), so `configure` sets
`GOMP_SPINCOUNT` just before a backend's first import and is then fixed for the process: a later load that asks for
another poll is refused rather than silently run with the first one. A backend imports its engine library through
`import_engine` (configure, then the import), the one way in, so no engine loads OpenMP before its wait is set;
`configure` alone is called only where a poll is stated before another step imports (`serve` before its models load,
the registry before it asks each backend whether it is available). A wait the user set (OMP_WAIT_POLICY or
GOMP_SPINCOUNT in the environment) is left alone unless a load names a poll. Only libgomp is governed: a build of
llama.cpp without OpenMP (its own thread pool, as on macOS) or with Intel's runtime ignores the variable.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import threading
import time
from types import ModuleType

from modelhost.errors import InvalidOptionError

#: The top of the scale (llama-server's `--poll` range is 0-100 too).
MAX_POLL = 100

#: libgomp's own spin count when neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set (its env.c: "3 msec blocking",
#: at its estimate of 100000 spins per millisecond): what llama-server's threads do, and poll 100 here.
LIBGOMP_DEFAULT_SPINS = 300_000

#: The poll of a process whose threads each had a core when it loaded OpenMP: libgomp's own spin, what llama-server
#: runs with, so on idle cores modelhost decodes as fast as llama-server by construction. Measured on SmolLM2-135M
#: (bench/wait_policy.py, 2 cores, figures in the README): shorter spins of 1000-10000 were within the noise of it
#: (0.88x-1.10x, rounds alternated) but none was reliably at or above it, 100-300 spins lost up to half, and beside
#: busy processes every spin of 1000 or more collapsed alike, so a shorter one buys no safety either.
QUIET_POLL = MAX_POLL

#: The poll of a process that measured its threads queueing for CPUs: sleep at once (PASSIVE). Beside busy processes
#: every spin tried (1000 to 300000) decoded slower than sleeping at once, the longest ones 10 to 100 times slower.
BUSY_POLL = 0

#: How long the probe's threads run: long enough to span a few of the scheduler's time slices (a few ms each), short
#: enough to be lost in a model's load.
PROBE_SECONDS = 0.1

#: The share of the probe's time its threads may spend waiting for a CPU and still count as having cores of their
#: own. Measured on 2 cores: 0.03-0.15 with the cores to itself, 0.79-0.91 beside the test suite's processes; a
#: process that waits a third of its time already loses more to spinning than it gains.
BUSY_SHARE = 0.3

#: Bytes each probe thread hashes per call: hashlib releases the GIL for the call, so the threads run in parallel.
PROBE_CHUNK = 1 << 20

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


def waiting_share(threads: int, seconds: float = PROBE_SECONDS) -> float | None:
    """The mean share of `seconds` that `threads` busy threads of this process spent waiting for a CPU, from the
    kernel's per-thread run delay; None where /proc/thread-self/schedstat does not exist (not Linux, or a kernel
    without scheduler statistics)."""
    if not os.path.exists("/proc/thread-self/schedstat"):
        return None
    data = bytes(PROBE_CHUNK)
    shares: list[float] = []
    start = threading.Barrier(threads)

    def run() -> None:
        start.wait()
        before, began = _run_delay(), time.monotonic()
        while time.monotonic() - began < seconds:
            hashlib.sha256(data).digest()
        shares.append((_run_delay() - before) / 1e9 / max(time.monotonic() - began, 1e-9))

    probes = [threading.Thread(target=run, name="modelhost-openmp-probe") for _ in range(threads)]
    for probe in probes:
        probe.start()
    for probe in probes:
        probe.join()
    return sum(shares) / len(shares) if shares else None


def measured_poll() -> int:
    """QUIET_POLL when this process's threads, one per core it may use, each get a core now; BUSY_POLL when they
    queue behind other processes. Without the kernel's statistics, the load average stands in for the probe."""
    cores = _cores()
    return poll_for(waiting_share(cores), os.getloadavg()[0], cores)


def poll_for(share: float | None, load: float, cores: int) -> int:
    """The poll for a measured waiting share (None: not measured, then the load average against the cores)."""
    if share is None:
        return BUSY_POLL if load >= cores else QUIET_POLL
    return BUSY_POLL if share >= BUSY_SHARE else QUIET_POLL


def configure(poll: int | None) -> None:
    """Make `poll` (None: `measured_poll()`, unless the environment chose) how OpenMP threads wait in this process.

    Call it just before importing a library that loads libgomp. Before libgomp is loaded it sets GOMP_SPINCOUNT (and
    nothing else); afterwards it only checks: an explicit poll other than the one in force raises
    InvalidOptionError, because libgomp would silently keep the first.
    """
    global _in_force
    with _lock:
        if not loaded():
            if poll is None and any(name in os.environ for name in WAIT_VARIABLES):
                return  # the user's own wait
            chosen = measured_poll() if poll is None else poll
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


def import_engine(name: str, poll: int | None = None) -> ModuleType:
    """Import the engine library `name` (llama_cpp, torch, vllm: each loads OpenMP) with `poll` put in force first
    (`configure`): how every backend reaches its engine. Raises InvalidOptionError for a poll this process's OpenMP
    can no longer take, and the import's own error for a library that does not import."""
    configure(poll)
    return importlib.import_module(name)


def _run_delay() -> int:
    """Nanoseconds the calling thread has spent runnable but waiting for a CPU."""
    with open("/proc/thread-self/schedstat", encoding="ascii") as stat:
        return int(stat.read().split()[1])


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)

"""A CPU burner for checking the suite on a busy machine: `--load N` processes that each spin on a core for
`--seconds`, then stop by themselves (also on Ctrl-C or SIGTERM). Run it beside `make test` or a fresh clone's
`.ci/run` to reproduce a shared CI machine (load 7-17 on 2 cores was where the suite's short waits failed):

    .venv/bin/python bench/burn.py --load 8 --seconds 2700 &
    bash .ci/run

It measures nothing itself; it prints the load average when it starts and stops, so a timing taken beside it can
say what load it ran under. Bounded in time on purpose: a forgotten burner must not slow the machine for good.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

#: The longest burn allowed: CI's whole budget (90 minutes); anything longer is a burner left behind by mistake.
MAX_SECONDS = 90 * 60

#: The most burning processes: a load far past the cores only measures the scheduler, and each costs some memory.
MAX_LOAD = 64


def _spin(until: float) -> None:
    """Keep one core busy until the monotonic clock passes `until` (checked every few million additions)."""
    for signum in (signal.SIGINT, signal.SIGTERM):  # the parent's handlers are its own: a worker just dies
        signal.signal(signum, signal.SIG_DFL)
    total = 0
    while time.monotonic() < until:
        for i in range(1_000_000):
            total += i


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


@contextlib.contextmanager
def burning(load: int, seconds: float) -> Iterator[None]:
    """Run this script with `--load load` beside the `with` block (nothing when `load` is 0), stopped as it ends:
    how a benchmark measures the same thing quiet and beside busy processes."""
    if load <= 0:
        yield
        return
    burner = subprocess.Popen(
        [sys.executable, __file__, "--load", str(load), "--seconds", str(seconds)], stdout=subprocess.DEVNULL
    )
    try:
        time.sleep(2)  # let the burners reach their cores before the measuring starts
        yield
    finally:
        burner.terminate()
        burner.wait(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--load", type=int, default=8, help=f"processes that spin (1-{MAX_LOAD}; default 8)")
    parser.add_argument("--seconds", type=float, required=True, help=f"how long to burn (at most {MAX_SECONDS})")
    args = parser.parse_args(argv)
    if not 1 <= args.load <= MAX_LOAD:
        parser.error(f"--load must be 1 to {MAX_LOAD}, got {args.load}")
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must be more than 0 and at most {MAX_SECONDS}, got {args.seconds}")
    until = time.monotonic() + args.seconds
    workers = [multiprocessing.Process(target=_spin, args=(until,), daemon=True) for _ in range(args.load)]
    print(f"burn: {args.load} processes for {args.seconds:.0f} s; {_load()}", flush=True)

    def stop(signum: int, _frame: object) -> None:
        for worker in workers:
            worker.terminate()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print(f"burn: done; {_load()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

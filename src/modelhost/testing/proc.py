"""What a process holds, read from /proc: resident memory and open file descriptors (Linux only).

The hostile-input tests check that a refused request gave back what it took; both figures are read the same way
an operator would (`ps`, `ls /proc/PID/fd`), so a leak the tests miss is one an operator would miss too.
"""

from __future__ import annotations

import os


def rss_bytes(pid: int | None = None) -> int:
    """Resident set size of `pid` (this process when None), in bytes."""
    with open(f"/proc/{pid or os.getpid()}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS line in /proc/PID/status")


def open_fds(pid: int | None = None) -> int:
    """How many file descriptors `pid` (this process when None) has open."""
    return len(os.listdir(f"/proc/{pid or os.getpid()}/fd"))

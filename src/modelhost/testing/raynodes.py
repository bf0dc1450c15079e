"""Local Ray nodes for the tests and benchmarks: a head and joining raylets on loopback addresses of one machine.

Each node is `ray start --block` in a session of its own, so it is stopped by its process group (every process it
started is in it: GCS, raylet, agents, workers), never by `ray stop`, which stops every Ray process on the machine,
another user's included. Traps this works around (issue 23):
- `--node-ip-address=127.0.0.1` is rewritten by Ray to the routable address: nodes use 127.0.0.x with x >= 2;
- a local head turns token auth on and would write ~/.ray/auth_token: `token_env` gives the token a file of the
  caller's (RAY_AUTH_TOKEN_PATH), and every node and client gets the same environment;
- two raylets on one machine collide on the fixed default ports (Ray client server 10001, dashboard agent 52365):
  each node gets free ports of its own;
- Unix socket paths are bounded (108 bytes) and Ray puts its sockets under the temp folder's session folder: the
  caller passes a short temp folder.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

#: The head's address: loopback, but not 127.0.0.1 (see the module doc).
HEAD_IP = "127.0.0.2"
#: A joining node's address on the same machine.
SECOND_IP = "127.0.0.3"

#: How long a node may take to start: 15-33 s measured at load 4-17 on 2 cores; minutes bound only a hang.
START_SECONDS = 300.0
#: Starts of one node tried before giving up (see RayNode.start).
START_TRIES = 3
#: How long a stopped node's processes get to end after SIGTERM before they are killed. An idle head ends in 2.5 s
#: (load 15, 2 cores); once a driver's job has run on it, its GCS, autoscaler and runtime-env agent were still there
#: 30 s after SIGTERM every time tried (3 of 3), and went only with the SIGKILL: a longer wait is only time lost
#: (30 s of it was each test session's last teardown). 10 s is four times the clean stop.
STOP_SECONDS = 10.0
#: Each node's object store: small, the machine's memory is shared (Ray's default is 30% of it), and pages travel
#: as paths, results as kilobytes of DocTags and layouts.
OBJECT_STORE_BYTES = 150 * 2**20

_STARTED = "Ray runtime started"


def token_env(folder: Path) -> dict[str, str]:
    """The environment every node and client of a test cluster shares: token auth on, its token in a file in
    `folder` (never ~/.ray/auth_token), usage statistics off (nothing leaves the machine)."""
    folder.mkdir(parents=True, exist_ok=True)
    token = folder / "auth_token"
    if not token.exists():
        token.write_text(secrets.token_hex(32), encoding="ascii")
        token.chmod(0o600)
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token), "RAY_USAGE_STATS_ENABLED": "0"}


def free_port(host: str) -> int:
    """A port free on `host` now (the system's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class RayNode:
    """One `ray start --block` process and its group. `address` is the cluster's (the head's GCS)."""

    ip: str
    address: str
    temp_dir: Path
    process: subprocess.Popen[bytes]
    log: Path
    stopped: bool = field(default=False)

    @classmethod
    def start(
        cls,
        ip: str,
        temp_dir: Path,
        env: dict[str, str],
        *,
        head: str | None = None,
        num_cpus: int = 2,
    ) -> RayNode:
        """Start a head on `ip` (when `head` is None) or a node joining the cluster at `head`; returns once Ray
        says it started. A start that fails is tried again, up to START_TRIES in all (AssertionError with the last
        log's tail then): Ray gives its raylet a fixed 30 s to register with the GCS, which a machine at load 12 on
        2 cores overran ("The current node timed out during startup")."""
        for attempt in range(1, START_TRIES + 1):
            try:
                return cls._start_once(ip, temp_dir / f"t{attempt}", env, head=head, num_cpus=num_cpus)
            except AssertionError:
                if attempt == START_TRIES:
                    raise
        raise AssertionError("unreachable")

    @classmethod
    def _start_once(cls, ip: str, temp_dir: Path, env: dict[str, str], *, head: str | None, num_cpus: int) -> RayNode:
        temp_dir.mkdir(parents=True, exist_ok=True)
        ray = Path(sys.executable).with_name("ray")
        address = head or f"{ip}:{free_port(ip)}"
        args = [
            str(ray), "start", "--block", "--disable-usage-stats",
            f"--node-ip-address={ip}", f"--num-cpus={num_cpus}", f"--temp-dir={temp_dir}",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            f"--dashboard-agent-listen-port={free_port(ip)}",
        ]  # fmt: skip
        if head is None:
            port = address.rpartition(":")[2]
            args += [
                "--head", f"--port={port}", "--include-dashboard=false",
                f"--ray-client-server-port={free_port(ip)}",
            ]  # fmt: skip
        else:
            args.append(f"--address={head}")
        log = temp_dir / "ray-start.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True
            )
        node = cls(ip, address, temp_dir, process, log)
        node._wait_started()
        return node

    def _wait_started(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while _STARTED not in self.log.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:]
                self.stop()
                raise AssertionError(f"ray node on {self.ip} did not start:\n{tail}")
            time.sleep(0.2)

    def stop(self) -> None:
        """End every process of the node: SIGTERM to each, SIGKILL to what is left after STOP_SECONDS."""
        if not self.stopped:
            self.stopped = True
            _end(process_tree(self.process.pid), STOP_SECONDS)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=STOP_SECONDS)

    def kill(self) -> None:
        """Lose the node at once (SIGKILL to every process of it), as a machine that dies."""
        self.stopped = True
        _end(process_tree(self.process.pid), 0.0)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=STOP_SECONDS)


def process_tree(root: int) -> list[int]:
    """`root` and every process descended from it, read from /proc. Ray's workers are not in the node's process
    group (the raylet gives each its own), so the group alone would leave them running."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rpartition(")")[2].split()[1])  # the name in parentheses may hold spaces
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _end(pids: list[int], grace: float) -> None:
    """SIGTERM each of `pids` (none when `grace` is 0), wait up to `grace` seconds, then SIGKILL the living."""
    if grace > 0:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie, ended and waiting to be reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"

"""Benchmark of the job worker's durable intake and restart.

1. Durable JSON submissions per second: a WorkerServer in a subprocess (so the client's CPU is not the server's),
   8 concurrent keep-alive clients on loopback, each POSTing jobs back to back; every 202 is sent only after the job
   is on disk. Modes: `paused` (jobs stored, none run: the intake alone) and `noop` (an operation that returns at
   once, so each job also costs its processing and completed writes).
2. Restart: 10,000 finished jobs in a state folder; time from nothing to a serving worker (restore + bind).

    .venv/bin/python bench/worker.py                 # both, syncfs group commit (the default on Linux)
    .venv/bin/python bench/worker.py --sync fsync    # the textbook per-file fsyncs, for comparison
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from modelhost.host import Host
from modelhost.inference.types import GenerateMetrics, Message, ModelInfo, Token
from modelhost.worker import JobContext, WorkerServer, protocol


class IdleModel:
    """A model that is never asked for anything: the benchmark measures the worker, not generation."""

    model_type = "idle"

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        return iter(())

    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        return iter(())

    def info(self) -> ModelInfo:
        return ModelInfo("idle")

    def metrics(self) -> GenerateMetrics:
        return GenerateMetrics()

    def err(self) -> BaseException | None:
        return None

    def close(self) -> None:
        pass


async def noop(ctx: JobContext) -> list[str]:
    """bench.noop: returns at once, no outputs."""
    return []


async def serve(state: Path, mode: str, sync: str) -> None:
    host = Host.from_model(IdleModel(), name="bench")  # type: ignore[arg-type]
    await host.start()
    server = WorkerServer(
        host,
        state_dir=state,
        capacity=10_000_000,
        operations={"bench.noop": noop},
        execute=mode == "noop",
        sync=sync,  # type: ignore[arg-type]
        journal=lambda line: None,
    )
    await server.start()
    began = resource.getrusage(resource.RUSAGE_SELF)
    print(server.url, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes stdin
    usage = resource.getrusage(resource.RUSAGE_SELF)
    await server.aclose()
    await host.aclose()
    stats = {"commits": server.store.commits, "ops": server.store.committed_ops, "jobs": len(server.board.records)}
    cpu = usage.ru_utime + usage.ru_stime - began.ru_utime - began.ru_stime
    print(json.dumps({**stats, "cpu_seconds": cpu}), flush=True)


async def client(host: str, port: int, deadline: float, counts: dict[str, int], latencies: list[float]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    n = 0
    while time.perf_counter() < deadline:
        body = json.dumps({"operation": "bench.noop", "model": "bench", "input": {"n": n, "text": "x" * 64}}).encode()
        request = (
            b"POST /v1/jobs HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        began = time.perf_counter()
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status = head[9:12].decode()
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await reader.readexactly(length)
        latencies.append(time.perf_counter() - began)
        counts[status] = counts.get(status, 0) + 1
        n += 1
    writer.close()


def submissions(mode: str, sync: str, clients: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", tmp + "/state", "--mode", mode, "--sync", sync],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdin is not None
        url = proc.stdout.readline().strip()
        host, port = url.removeprefix("http://").rsplit(":", 1)
        counts: dict[str, int] = {}
        latencies: list[float] = []

        async def run() -> float:
            # One short warm-up so connection set-up and first-import costs are not measured.
            await asyncio.gather(*(client(host, int(port), time.perf_counter() + 0.5, {}, []) for _ in range(clients)))
            began = time.perf_counter()
            deadline = began + seconds
            await asyncio.gather(*(client(host, int(port), deadline, counts, latencies) for _ in range(clients)))
            return time.perf_counter() - began

        elapsed = asyncio.run(run())
        proc.stdin.close()
        tail = proc.stdout.read().strip().splitlines()
        proc.wait(timeout=60)
        store = json.loads(tail[-1]) if tail else {}
        latencies.sort()
        accepted = counts.get("202", 0)
        return {
            "mode": mode,
            "sync": sync,
            "clients": clients,
            "seconds": round(elapsed, 2),
            "accepted": accepted,
            "jobs_per_second": round(accepted / elapsed, 1),
            "statuses": counts,
            "p50_ms": round(latencies[len(latencies) // 2] * 1000, 2),
            "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 2),
            "ops_per_commit": round(store.get("ops", 0) / max(1, store.get("commits", 1)), 1),
            # Server CPU per stored job (warm-up and run, after start-up): the bound on the rate on a core of its
            # own, whatever else the machine is doing.
            "server_cpu_ms_per_job": round(1000 * store.get("cpu_seconds", 0) / max(1, store.get("jobs", 1)), 3),
        }


def make_finished_jobs(state: Path, count: int) -> None:
    """`count` completed jobs, written as the store writes them (folder, job.json, outputs/)."""
    state.mkdir(parents=True)
    now = protocol.now_ms()
    for i in range(count):
        record = protocol.new_record(protocol.job_id("", "", ""), "text.chat", "bench", '{"prompt":"hi"}', now + i)
        record.status, record.started, record.completed = protocol.COMPLETED, now + i, now + i + 5
        record.output = ["output.txt", "result.json"]
        folder = state / record.id
        (folder / "outputs").mkdir(parents=True)
        (folder / "job.json").write_bytes(protocol.encode_record(record))
    os.sync()


async def restart(state: Path) -> dict[str, Any]:
    host = Host.from_model(IdleModel(), name="bench")  # type: ignore[arg-type]
    await host.start()
    began = time.perf_counter()
    server = WorkerServer(host, state_dir=state, capacity=64, journal=lambda line: None)
    await server.start()
    seconds = time.perf_counter() - began
    restored = server.restored
    await server.aclose()
    await host.aclose()
    return {"finished_jobs": restored, "restart_seconds": round(seconds, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="both", choices=["paused", "noop", "both"])
    parser.add_argument("--sync", default="syncfs", choices=["syncfs", "fsync"])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--jobs", type=int, default=10_000, help="finished jobs for the restart measurement")
    parser.add_argument("--skip-restart", action="store_true")
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(Path(args.serve), args.mode, args.sync))
        return
    modes = ["paused", "noop"] if args.mode == "both" else [args.mode]
    for mode in modes:
        print(json.dumps(submissions(mode, args.sync, args.clients, args.seconds)), flush=True)
    if not args.skip_restart:
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
            state = Path(tmp) / "state"
            make_finished_jobs(state, args.jobs)
            print(json.dumps(asyncio.run(restart(state))), flush=True)


if __name__ == "__main__":
    main()

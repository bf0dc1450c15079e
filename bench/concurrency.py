"""Concurrent streaming clients through the HTTP door: continuous batching (`--parallel 4`) vs one at a time.

Two modelhost servers run as separate processes (as deployed) on the embedded model (SmolLM2-135M-Instruct Q4_1),
with the same n_ctx, threads and settings except `parallel`: 4 (continuous batching, the default) and 1 (the
one-request-at-a-time path). For each of 1, 4 and 8 simultaneous clients, every client sends one greedy streamed
chat request through the OpenAI API with a distinct prompt (a new word per request, so no answer comes from a
cached prompt beyond the chat template's shared preamble) and exactly `--tokens` tokens (`min_tokens` =
`max_tokens`), and we measure:

- aggregate tokens/s: all content chunks over the wall time from the first send to the last byte;
- TTFT mean and max: from each client's send to its first content chunk;
- inter-token latency p50 and p95: the gaps between consecutive content chunks of each stream, pooled.

Rounds alternate which server goes first, so a burst of load from a neighbour on a shared machine hits both
alike; each figure is the median over rounds, and each ratio the median of the per-round ratios (parallel 4 over
parallel 1; for TTFT lower is better). Targets (issue 10, on 2 cores): 4 streams aggregate >= 1.3x and mean TTFT
<= 0.7 s; 8 streams no worse than 4; one stream alone >= 0.95x.

    .venv/bin/python bench/concurrency.py [--rounds 5] [--tokens 64] [--clients 1,4,8] [--threads N]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from _http import chat_body, default_threads, free_port, serve_default, stop, stream_chat, wait_ready

N_CTX = 4096
WORDS = ("Amber", "Birch", "Cedar", "Delta", "Ember", "Fjord", "Garnet", "Harbor", "Indigo", "Juniper", "Kestrel",
         "Lumen", "Meadow", "Nectar", "Onyx", "Pebble", "Quartz", "Raven", "Sable", "Thistle", "Umber")  # fmt: skip
TASK = "write a long, detailed story about a lighthouse keeper and the sea."
SIDES = ("parallel 4", "parallel 1")


def start(threads: int) -> tuple[dict[str, str], list[subprocess.Popen[bytes]]]:
    urls: dict[str, str] = {}
    procs: list[subprocess.Popen[bytes]] = []
    for side in SIDES:
        port = free_port()
        parallel = side.split()[1]
        cmd = [sys.executable, __file__, "--serve", str(port), "--threads", str(threads), "--parallel", parallel]
        procs.append(subprocess.Popen(cmd))
        urls[side] = f"http://127.0.0.1:{port}"
    for side, url in urls.items():
        wait_ready(side, url, "/ready", chat_body("Hi", 4))
    return urls, procs


@dataclass
class Round:
    aggregate: float
    ttft_mean: float
    ttft_max: float
    itl_p50: float
    itl_p95: float
    tokens: int


async def clients(url: str, prompts: Sequence[str], tokens: int) -> Round:
    limits = httpx.Limits(max_connections=len(prompts) + 1)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        began = time.perf_counter()
        streams = await asyncio.gather(
            *(stream_chat(client, url, chat_body(p, tokens, stream=True, exact=True)) for p in prompts)
        )
    total = sum(len(s.chunks) for s in streams)
    gaps = sorted(b - a for s in streams for a, b in itertools.pairwise(s.chunks)) or [0.0]
    ttfts = [s.ttft for s in streams]
    return Round(
        aggregate=total / (max(s.end for s in streams) - began),
        ttft_mean=statistics.fmean(ttfts),
        ttft_max=max(ttfts),
        itl_p50=gaps[len(gaps) // 2],
        itl_p95=gaps[min(len(gaps) - 1, int(len(gaps) * 0.95))],
        tokens=total,
    )


def run(rounds: int, tokens: int, counts: Sequence[int], threads: int) -> None:
    urls, procs = start(threads)
    serial = 0

    def prompts(n: int) -> list[str]:
        nonlocal serial
        out = []
        for _ in range(n):
            serial += 1
            out.append(f"{WORDS[serial % len(WORDS)]} {serial}: {TASK}")
        return out

    results: dict[tuple[int, str], list[Round]] = {(n, side): [] for n in counts for side in SIDES}
    try:
        for i in range(rounds):
            for n in counts:
                batch = prompts(n)  # the same prompts for both sides, new to each
                for side in SIDES if i % 2 == 0 else SIDES[::-1]:
                    results[(n, side)].append(asyncio.run(clients(urls[side], batch, tokens)))
    finally:
        stop(procs)

    med = statistics.median
    print(
        f"SmolLM2-135M-Instruct Q4_1 through the HTTP door, n_ctx {N_CTX}, {threads} threads, greedy, "
        f"{tokens} tokens per stream, distinct prompts, median of {rounds} alternating rounds"
    )
    print(f"  {'clients':>7} {'server':>10} {'agg tok/s':>10} {'TTFT mean':>10} {'TTFT max':>9} {'ITL p50':>8} "
          f"{'ITL p95':>8}")  # fmt: skip
    for n in counts:
        for side in SIDES:
            rs = results[(n, side)]
            print(
                f"  {n:>7} {side:>10} {med(r.aggregate for r in rs):>10.1f} {med(r.ttft_mean for r in rs):>9.2f}s "
                f"{med(r.ttft_max for r in rs):>8.2f}s {med(r.itl_p50 for r in rs) * 1e3:>6.0f}ms "
                f"{med(r.itl_p95 for r in rs) * 1e3:>6.0f}ms"
            )
    print("  paired ratios, parallel 4 / parallel 1 (median of per-round ratios):")
    for n in counts:
        a, b = results[(n, SIDES[0])], results[(n, SIDES[1])]
        agg = med(x.aggregate / y.aggregate for x, y in zip(a, b, strict=True))
        ttft = med(x.ttft_mean / y.ttft_mean for x, y in zip(a, b, strict=True))
        print(f"  {n:>7} clients: aggregate {agg:.2f}x, TTFT mean {ttft:.2f}x (lower is better)")
    if 4 in counts and 8 in counts:
        four, eight = results[(4, SIDES[0])], results[(8, SIDES[0])]
        ratio = med(e.aggregate / f.aggregate for e, f in zip(eight, four, strict=True))
        print(f"  parallel 4, 8 clients / 4 clients aggregate: {ratio:.2f}x (target: no worse than 1.0)")
    print("  targets: 4 clients aggregate >= 1.3x, TTFT mean <= 0.7 s; 1 client >= 0.95x")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--clients", default="1,4,8", help="comma-separated numbers of simultaneous clients")
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--parallel", type=int, default=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve_default(args.serve, threads=args.threads, context_length=N_CTX, parallel=args.parallel)
        return 0
    run(args.rounds, args.tokens, [int(c) for c in args.clients.split(",")], args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())

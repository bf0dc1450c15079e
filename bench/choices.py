"""OpenAI's `n`: one request for n choices vs n requests one after another, through the HTTP door.

One modelhost server (a child process, as deployed) serves the embedded SmolLM2 with continuous batching
(`--parallel 4`). Per round, the same sampled chat request (temperature 0.8, a seed, exactly `--tokens` tokens via
min_tokens) is answered two ways: one request with `n` = `--n` (the choices decode side by side in the batch slots),
and `--n` requests sent one after another (what a client without `n` does). Rounds alternate which side goes first;
the headline is the median per-round ratio of wall time (sequential / n), so above 1 means `n` is faster. Each
choice i of the `n` request samples with seed + i, so both sides generate the same texts: the comparison is of
scheduling, not of different work.

    .venv/bin/python bench/choices.py [--rounds 5] [--n 4] [--tokens 48] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

import httpx

from _http import chat_body, default_threads, free_port, serve_default, stop, wait_ready

N_CTX = 4096
PROMPT = "Write a short poem about the sea."


def body(tokens: int, seed: int, n: int = 1) -> dict[str, object]:
    request = chat_body(PROMPT, tokens, exact=True)
    request.update({"temperature": 0.8, "seed": seed, "n": n})
    return request


def with_n(url: str, tokens: int, n: int, seed: int) -> tuple[float, list[str]]:
    start = time.perf_counter()
    r = httpx.post(f"{url}/v1/chat/completions", json=body(tokens, seed, n), timeout=600)
    r.raise_for_status()
    return time.perf_counter() - start, [c["message"]["content"] for c in r.json()["choices"]]


def one_by_one(url: str, tokens: int, n: int, seed: int) -> tuple[float, list[str]]:
    start = time.perf_counter()
    texts = []
    for i in range(n):
        r = httpx.post(f"{url}/v1/chat/completions", json=body(tokens, seed + i), timeout=600)
        r.raise_for_status()
        texts.append(r.json()["choices"][0]["message"]["content"])
    return time.perf_counter() - start, texts


def run(rounds: int, n: int, tokens: int, threads: int) -> None:
    port = free_port()
    cmd = [sys.executable, __file__, "--serve", str(port), "--threads", str(threads)]
    procs = [subprocess.Popen(cmd)]
    url = f"http://127.0.0.1:{port}"
    together: list[float] = []
    apart: list[float] = []
    same = 0
    try:
        wait_ready("modelhost", url, "/ready", chat_body("Hi", 4))
        for i in range(rounds):
            seed = 1000 + i * n
            sides = [("n", with_n), ("sequential", one_by_one)]
            results = {}
            for name, fn in sides if i % 2 == 0 else sides[::-1]:
                results[name] = fn(url, tokens, n, seed)
            together.append(results["n"][0])
            apart.append(results["sequential"][0])
            same += results["n"][1] == results["sequential"][1]
    finally:
        stop(procs)
    med = statistics.median
    print(f"SmolLM2-135M-Instruct Q4_1, parallel 4, {threads} threads, {tokens} tokens per choice, n={n}, "
          f"median of {rounds} alternating rounds")  # fmt: skip
    print(f"  one request with n={n}: {med(together):.2f} s   {n} requests in turn: {med(apart):.2f} s")
    ratio = med(a / t for a, t in zip(apart, together, strict=True))
    print(f"  ratio sequential / n: {ratio:.2f}x (above 1: n is faster); identical texts in {same} of {rounds} rounds")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve_default(args.serve, threads=args.threads, context_length=N_CTX, parallel=4)
        return 0
    run(args.rounds, args.n, args.tokens, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())

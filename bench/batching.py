"""Batched decoding vs one prompt at a time, in the transformers backend, on the embedded SmolLM2-135M-Instruct.

The model is the catalogue's default GGUF (Q4_1) loaded with `backend="transformers"`: the first run dequantises it
into modelhost's safetensors cache (tens of seconds, reported as the load time), later runs read the cache.

Per round, the same 4 prompts are generated two ways, in the same process and with the same options:
- sequential: 4 `generate()` calls, one after the other;
- batched: one `batch_generate()` call (one forward per step for all 4 rows).
Greedy decoding with `min_tokens == max_tokens`, so every prompt generates exactly `--max-tokens` tokens on both
sides and the work is identical. Aggregate tokens/s = all generated tokens / wall seconds of the whole operation
(prefill included). Rounds alternate which side goes first, so a neighbour's burst of load on a shared machine hits
both alike. The headline is the median of the per-round speed-ups: the two sides of one round run back to back,
so their ratio survives load that comes and goes between rounds better than a ratio of medians would.
Target: batched >= 1.8x sequential.

    .venv/bin/python bench/batching.py [--rounds 3] [--max-tokens 64] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

PROMPTS = (
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "The three most important things to know about the water cycle are",
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "Dear hiring manager, I am writing to apply for the position of",
)

TARGET = 1.8


def sequential(model: Any, opts: dict[str, Any]) -> tuple[float, int]:
    """Wall seconds and generated tokens for the prompts one after the other."""
    start = time.perf_counter()
    tokens = sum(len(list(model.generate(p, **opts))) for p in PROMPTS)
    return time.perf_counter() - start, tokens


def batched(model: Any, opts: dict[str, Any]) -> tuple[float, int]:
    """Wall seconds and generated tokens for the prompts in one batch_generate call."""
    start = time.perf_counter()
    results = model.batch_generate(list(PROMPTS), **opts)
    elapsed = time.perf_counter() - start
    for r in results:
        if r.error is not None:
            raise r.error
    return elapsed, sum(len(r.tokens) for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    args = parser.parse_args()

    from modelhost.inference import load_model

    start = time.perf_counter()
    model = load_model("default", backend="transformers", threads=args.threads)
    load_seconds = time.perf_counter() - start
    opts = {"max_tokens": args.max_tokens, "min_tokens": args.max_tokens, "temperature": 0}
    with model:
        # Warm-up: first calls pay for lazy initialisation (kernels, allocator) that is not decoding.
        sequential(model, {**opts, "max_tokens": 4, "min_tokens": 4})
        batched(model, {**opts, "max_tokens": 4, "min_tokens": 4})
        seq_tps: list[float] = []
        bat_tps: list[float] = []
        ratios: list[float] = []
        for round_ in range(args.rounds):
            sides = [("sequential", sequential, seq_tps), ("batched", batched, bat_tps)]
            if round_ % 2:
                sides.reverse()
            for name, run, into in sides:
                seconds, tokens = run(model, opts)
                into.append(tokens / seconds)
                rate = tokens / seconds
                print(f"round {round_ + 1} {name:>10}: {tokens} tokens in {seconds:6.2f} s = {rate:6.1f} tok/s")
            ratios.append(bat_tps[-1] / seq_tps[-1])
    seq, bat = statistics.median(seq_tps), statistics.median(bat_tps)
    ratio = statistics.median(ratios)
    print(f"load: {load_seconds:.1f} s ({model.info().architecture}, {args.threads or 'default'} threads)")
    print(f"sequential (4 x generate): {seq:6.1f} tok/s aggregate (median of {args.rounds})")
    print(f"batched (batch_generate):  {bat:6.1f} tok/s aggregate (median of {args.rounds})")
    print(f"per-round speed-ups: {', '.join(f'{r:.2f}x' for r in ratios)}")
    print(f"speed-up (median per round): {ratio:.2f}x (target >= {TARGET}x): {'PASS' if ratio >= TARGET else 'FAIL'}")


if __name__ == "__main__":
    main()

"""Embedding throughput: inputs batched into one `embed` call vs one call per input, on the embedded SmolLM2 (GGUF
through llama.cpp) and, with `--transformers`, on the same weights through transformers.

Per round the same inputs are embedded both ways in the same process: one-by-one (one `embed([text])` per input)
and batched (one `embed(texts)`: llama.cpp packs them into one decode, transformers into one padded forward).
Rounds alternate which side goes first, so a neighbour's burst of load on a shared machine hits both alike; the
headline is the median per-round ratio of inputs/s (batched / one-by-one). The first call (which makes llama.cpp's
embedding context) is a warm-up and not counted. Also printed: what the embedding context adds to the process's
resident memory, and how close the batched vectors are to the one-by-one ones (minimum cosine).

    .venv/bin/python bench/embeddings.py [--rounds 5] [--inputs 32] [--threads 2] [--transformers]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

SENTENCES = (
    "The quick brown fox jumps over the lazy dog near the riverbank at dawn.",
    "Quarterly revenue rose by four percent, driven by strong demand in Europe.",
    "To reset the router, hold the button on the back for ten seconds.",
    "She planted tomatoes, basil and peppers in the small garden behind the house.",
)


def resident_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def one_by_one(model: Any, texts: list[str]) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    vectors = np.stack([model.embed([t]).vectors[0] for t in texts])
    return time.perf_counter() - start, vectors


def batched(model: Any, texts: list[str]) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    vectors = model.embed(texts).vectors
    return time.perf_counter() - start, vectors


def run(name: str, model: Any, texts: list[str], rounds: int) -> None:
    before = resident_mb()
    model.embed(texts[:1])  # warm-up: llama.cpp makes its embedding context here
    print(f"{name}: first embed call added {resident_mb() - before:.0f} MB resident")
    ratios: list[float] = []
    cosine = 1.0
    for r in range(rounds):
        sides = [("one", one_by_one), ("batched", batched)]
        if r % 2:
            sides.reverse()
        seconds: dict[str, float] = {}
        vectors: dict[str, np.ndarray] = {}
        for side, fn in sides:
            seconds[side], vectors[side] = fn(model, texts)
        cosine = min(cosine, float((vectors["one"] * vectors["batched"]).sum(axis=1).min()))
        ratios.append(seconds["one"] / seconds["batched"])
        print(
            f"  round {r + 1}: one-by-one {len(texts) / seconds['one']:7.1f} inputs/s, "
            f"batched {len(texts) / seconds['batched']:7.1f} inputs/s, ratio {ratios[-1]:.2f}"
        )
    print(f"{name}: batched / one-by-one = {statistics.median(ratios):.2f}x (median of {rounds} rounds); "
          f"min cosine batched vs one-by-one {cosine:.5f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inputs", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--transformers", action="store_true", help="also the transformers backend (slow 1st load)")
    args = parser.parse_args()

    from modelhost.inference import load_model

    texts = [f"{SENTENCES[i % len(SENTENCES)]} (#{i})" for i in range(args.inputs)]
    with load_model("default", threads=args.threads) as model:
        run("llama_cpp", model, texts, args.rounds)
    if args.transformers:
        import torch

        torch.set_num_threads(args.threads)
        with load_model("default", backend="transformers") as model:
            run("transformers", model, texts, args.rounds)


if __name__ == "__main__":
    main()

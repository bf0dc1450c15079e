"""The transformers backend's own overhead on the tiny random Llama: single stream, batch_generate and classify.

The tiny Llama of `modelhost.testing.tinymodels` (built into a temporary folder, seed 0) computes almost nothing
per token, so these figures measure what the backend adds around the model: the engine's steps, sampling, the
decoder. One torch thread; greedy; `min_tokens == max_tokens`, so every run does the same work. Rates are also
given per second of this process's CPU time, which a busy shared machine disturbs far less than wall time.

To compare two trees (old commit vs new), run this file alternately with each tree's `src` first on PYTHONPATH,
old/new then new/old, and take the median of the per-pair ratios:

    PYTHONPATH=/path/to/old/src .venv/bin/python bench/transformers_tiny.py
    PYTHONPATH=/path/to/new/src .venv/bin/python bench/transformers_tiny.py

    .venv/bin/python bench/transformers_tiny.py [--repeats 5] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

PROMPTS = ("Hello", "The quick brown fox jumps over the lazy dog.", "1 2 3", "What is the answer?")


def timed(run: Callable[[], int]) -> tuple[float, float]:
    """(units per wall second, units per CPU second) of one call of `run`, which returns its units."""
    cpu, wall = time.process_time(), time.perf_counter()
    units = run()
    return units / (time.perf_counter() - wall), units / (time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    import torch

    from modelhost.inference import load_model
    from modelhost.testing.tinymodels import build_tiny_llama

    torch.set_num_threads(1)  # one thread: CPU time then measures the work done
    n = args.max_tokens
    opts = {"max_tokens": n, "min_tokens": n, "temperature": 0}
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_tiny_llama(Path(tmp) / "tiny", seed=0)
        with load_model(str(folder), backend="transformers", threads=1) as model:
            list(model.generate("warm", max_tokens=4, min_tokens=4, temperature=0))  # lazy set-up is not decoding
            model.batch_generate(list(PROMPTS), max_tokens=4, min_tokens=4, temperature=0)
            model.classify(list(PROMPTS), temperature=0)
            figures: dict[str, list[float]] = {}
            for _ in range(args.repeats):
                runs = {
                    "single": lambda: len(list(model.generate(PROMPTS[1], **opts))),
                    "batch4": lambda: sum(len(r.tokens) for r in model.batch_generate(list(PROMPTS), **opts)),
                    "classify4": lambda: sum(len(model.classify(list(PROMPTS), temperature=0)) for _ in range(10)),
                }
                for name, run in runs.items():
                    wall, cpu = timed(run)
                    figures.setdefault(f"{name}_wall", []).append(wall)
                    figures.setdefault(f"{name}_cpu", []).append(cpu)
    unit = {"single": "tokens", "batch4": "tokens", "classify4": "prompts"}
    for key, values in figures.items():
        name, clock = key.rsplit("_", 1)
        print(f"{name:>9} {unit[name]:>7}/s ({clock:>4}): {statistics.median(values):8.1f}  (median of {len(values)})")


if __name__ == "__main__":
    main()

"""Prompts arriving together: the llama.cpp engine prefilling as many as a step's budget holds vs one a step.

The engine (src/modelhost/backends/llama_cpp/engine.py) prefills, in each step, the waiting prompts oldest first up
to the step's prompt-token budget; before issue 36 it took one prompt a step, so the 16th of 16 prompts arriving
together waited for 15 steps, each with a decode of the streams already running. This loads the embedded default
model (SmolLM2-135M-Instruct Q4_1) once with `parallel` = `--streams`, drives its engine directly (no HTTP, no host
thread: only the engine's own scheduling differs) and, for each side, admits `--streams` distinct chat prompts at
once and steps until all have `--tokens` tokens: time to first token (mean and p95, from admission) and aggregate
tokens/s. Rounds alternate which side goes first; figures are medians over rounds. Greedy outputs are the same on
both sides (tests/backends/test_llama_cpp_batch.py holds that).

    .venv/bin/python bench/step_prefill.py [--streams 16] [--tokens 32] [--rounds 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import modelhost
from modelhost.inference.capabilities import as_capability
from modelhost.inference.engine import EngineModel, EngineRequest

#: Tokens each slot holds: a chat prompt of a few dozen tokens plus `--tokens` fits; small, so 16 slots load fast.
CONTEXT = 1024


def run(engine: Any, streams: int, tokens: int, tag: str) -> dict[str, float]:
    """Admit `streams` prompts together, step until all are done: TTFT mean and p95 (s), aggregate tokens/s."""
    options = {"max_tokens": tokens, "min_tokens": tokens, "temperature": 0}
    requests = [
        EngineRequest(messages=(modelhost.Message("user", f"{tag} story {i}: the lighthouse keeper and the sea."),),
                      options=options)
        for i in range(streams)
    ]  # fmt: skip
    start = time.perf_counter()
    for request in requests:
        engine.admit(request)
    first: dict[Any, float] = {}
    done = produced = 0
    while done < streams:
        outputs = engine.step().outputs
        now = time.perf_counter() - start
        for handle, out in outputs.items():
            if out.tokens and handle not in first:
                first[handle] = now
            produced += len(out.tokens)
            done += 1 if out.finish_reason else 0
    wall = time.perf_counter() - start
    ttft = sorted(first.values())
    return {"p95": ttft[round(0.95 * (len(ttft) - 1))], "mean": statistics.mean(ttft), "tok/s": produced / wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    sides = {"budget": None, "one a step": 1}
    results: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    with modelhost.load_model("default", parallel=args.streams, context_length=CONTEXT) as model:
        capable = as_capability(model, EngineModel)
        assert capable is not None, "the default model is a llama.cpp one, whose engine this drives"
        engine: Any = capable.engine()
        for i in range(args.rounds):
            for side in list(sides)[:: 1 if i % 2 == 0 else -1]:
                engine._step_prompts = sides[side] or engine.slots  # the engine's one knob for this comparison
                results[side].append(run(engine, args.streams, args.tokens, f"round {i} {side}"))
    print(f"{args.streams} prompts together, {args.tokens} tokens each, medians of {args.rounds} rounds:")
    for side, rounds in results.items():
        figures = {k: statistics.median(r[k] for r in rounds) for k in ("mean", "p95", "tok/s")}
        print(
            f"  {side:<11} TTFT mean {figures['mean']:.2f} s  p95 {figures['p95']:.2f} s  {figures['tok/s']:.1f} tok/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

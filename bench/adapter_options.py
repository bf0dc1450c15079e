"""Where a LoRA adapter's cost comes from on llama.cpp, and what each way of serving two adapters costs a step.

Below the engine: llama-cpp-python's C calls on the embedded SmolLM2-135M-Instruct Q4_1, with the engine's own
context settings (one buffer per sequence, flash attention, `--slots` sequences of 512 cells). Each way decodes
`--steps` steps of one token for each of `--slots` sequences from an empty cache; the figure is milliseconds a step,
wall and this process's CPU (the second is what a shared machine's other work disturbs least), medians over rounds
that alternate the order, and each way's ratio of the base's step time to its own (tokens/s as a share of the base).

- base: every row in one llama_decode, no adapter.
- base, two calls: the rows in two calls (sequences 0-3, then 4-7): what any one-call-per-adapter scheme pays at least.
- one adapter: adapter A applied once, every row in one call (the LoRA's own matmuls).
- one adapter, set each step: A cleared and applied again before each call (what a switch costs).
- two adapters, neighbours: A for sequences 0-3, B for 4-7, switched in one context (the engine since issue 36).
- two adapters, alternating: A for the even sequences, B for the odd ones (the engine before: llama.cpp evaluates a
  call's rows in one pass only while their sequence ids follow each other, so each row became a pass of its own).
- two adapters, unified KV: alternating, in a context whose sequences share one KV buffer (then llama.cpp takes any
  rows in one pass, but every call attends over every sequence's cells).
- two contexts: a context per adapter (each keeps its adapter; no switch), one call each, one after the other.
- two contexts, concurrent: the same two calls at once from two threads, each context with half the threads.

Per-sequence adapters: the bundled llama.cpp has none (its adapter calls are listed at the start: they set a
context's adapters, never a sequence's).

    .venv/bin/python bench/adapter_options.py [--rounds 5] [--steps 30] [--slots 8] [--threads 2]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import llama_cpp as lib

from modelhost.backends.llama_cpp import lowlevel
from modelhost.inference import load_model

#: Cells per sequence: `--steps` tokens fit with room; the engine's slots are sized the same way by context_length.
CELLS = 512


class Bench:
    """The model's weights, two adapters on them, and the contexts the ways decode in."""

    def __init__(self, llm: Any, adapters: list[Path], slots: int, threads: int) -> None:
        self.llm, self.slots, self.threads = llm, slots, threads
        self.adapters = [lib.llama_adapter_lora_init(llm.model, str(p).encode()) for p in adapters]
        self.split = self.context(unified=False)  # one buffer per sequence, as the engine's
        self.unified = self.context(unified=True)
        self.own = [self.context(unified=False) for _ in adapters]  # a context per adapter
        for ctx, adapter in zip(self.own, range(len(adapters)), strict=True):
            self.use(ctx, [adapter])
        self.batches = [lib.llama_batch_init(slots, 0, 1) for _ in range(2)]  # one per thread

    def context(self, *, unified: bool) -> Any:
        params = lib.llama_context_params.from_buffer_copy(self.llm.context_params)
        params.n_seq_max, params.kv_unified, params.n_ctx = self.slots, unified, CELLS * self.slots
        params.n_batch = params.n_ubatch = CELLS
        return lowlevel.new_context(self.llm, params)

    def use(self, ctx: Any, which: Sequence[int]) -> None:
        chosen = (lib.llama_adapter_lora_p_ctypes * max(1, len(which)))(*(self.adapters[i] for i in which))
        scales = (ctypes.c_float * max(1, len(which)))(*([1.0] * len(which)))
        if lib.llama_set_adapters_lora(ctx.ctx, chosen, len(which), scales) != 0:
            raise RuntimeError("llama.cpp refused the adapters")

    def decode(self, ctx: Any, seqs: Sequence[int], pos: int, batch: int = 0) -> None:
        b = self.batches[batch]
        for i, seq in enumerate(seqs):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = 100 + seq, pos, 1, True
            b.seq_id[i][0] = seq
        b.n_tokens = len(seqs)
        if lib.llama_decode(ctx.ctx, b) != 0:
            raise RuntimeError("llama_decode failed")

    def clear(self) -> None:
        for ctx in (self.split, self.unified, *self.own):
            lib.llama_memory_clear(lib.llama_get_memory(ctx.ctx), True)
            lib.llama_set_n_threads(ctx.ctx, self.threads, self.threads)

    def ways(self) -> dict[str, Callable[[int], None]]:
        n, split, unified, (own_a, own_b) = self.slots, self.split, self.unified, self.own
        rows, low, high = range(n), range(n // 2), range(n // 2, n)
        even, odd = range(0, n, 2), range(1, n, 2)

        def base(p: int) -> None:
            self.use(split, [])
            self.decode(split, rows, p)

        def base_two_calls(p: int) -> None:
            self.use(split, [])
            self.decode(split, low, p)
            self.decode(split, high, p)

        def one(p: int) -> None:
            self.use(split, [0])
            self.decode(split, rows, p)

        def one_set_each_step(p: int) -> None:
            self.use(split, [])
            self.use(split, [0])
            self.decode(split, rows, p)

        def two(seqs: tuple[range, range], ctx: Any) -> Callable[[int], None]:
            def step(p: int) -> None:
                for adapter, part in enumerate(seqs):
                    self.use(ctx, [adapter])
                    self.decode(ctx, part, p)

            return step

        def two_contexts(p: int) -> None:
            self.decode(own_a, low, p)
            self.decode(own_b, high, p)

        def two_contexts_concurrent(p: int) -> None:
            half = max(1, self.threads // 2)
            for ctx in self.own:
                lib.llama_set_n_threads(ctx.ctx, half, half)
            other = threading.Thread(target=self.decode, args=(own_b, high, p, 1))
            other.start()  # ctypes lets go of the GIL inside llama_decode, so the two calls overlap
            self.decode(own_a, low, p)
            other.join()

        return {
            "base": base,
            "base, two calls": base_two_calls,
            "one adapter": one,
            "one adapter, set each step": one_set_each_step,
            "two adapters, neighbours": two((low, high), split),
            "two adapters, alternating": two((even, odd), split),
            "two adapters, unified KV": two((even, odd), unified),
            "two contexts": two_contexts,
            "two contexts, concurrent": two_contexts_concurrent,
        }


def timed(step: Callable[[int], None], steps: int) -> tuple[float, float]:
    """(wall ms, CPU ms) a step."""
    wall, cpu = time.perf_counter(), time.process_time()
    for p in range(steps):
        step(p)
    return (time.perf_counter() - wall) * 1000 / steps, (time.process_time() - cpu) * 1000 / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.slots < 2 or args.steps >= CELLS:
        parser.error("--slots must be at least 2 and --steps below 512")
    calls = sorted(name for name in dir(lib) if "adapter" in name and name.startswith("llama_") and "lora" in name)
    print("the bundled llama.cpp's LoRA calls:", ", ".join(calls))
    from adapters import make_adapters  # bench/adapters.py's two random adapters (bench/ is this script's path)

    with tempfile.TemporaryDirectory() as tmp:
        folders = make_adapters(Path(tmp))
        opts = {"parallel": args.slots, "threads": args.threads, "context_length": CELLS}
        with load_model("default", backend="llama_cpp", **opts) as model:
            llm = model._llm  # type: ignore[attr-defined]  # the llama_cpp.Llama under the model: its weights
            bench = Bench(llm, [f / "adapter.gguf" for f in folders], args.slots, args.threads)
            ways = bench.ways()
            for step in ways.values():  # each way's graphs built once before timing
                bench.clear()
                timed(step, 2)
            got: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
            for r in range(args.rounds):
                for name in list(ways)[:: 1 if r % 2 == 0 else -1]:
                    bench.clear()
                    got[name].append(timed(ways[name], args.steps))
    base_wall = statistics.median(w for w, _ in got["base"])
    base_cpu = statistics.median(c for _, c in got["base"])
    print(f"{args.slots} sequences, {args.threads} threads, ms a step (medians of {args.rounds} rounds of "
          f"{args.steps} steps); share of the base's tokens/s:")  # fmt: skip
    for name, figures in got.items():
        wall, cpu = statistics.median(w for w, _ in figures), statistics.median(c for _, c in figures)
        print(f"  {name:28s} wall {wall:6.1f} ({base_wall / wall:.2f}x)   CPU {cpu:6.1f} ({base_cpu / cpu:.2f}x)")


if __name__ == "__main__":
    main()

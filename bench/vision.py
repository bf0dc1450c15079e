"""A page through llama.cpp (GGUF + mmproj, libmtmd) vs transformers, on the same tiny Idefics3 weights.

The tiny Idefics3 of `modelhost.testing.tinyvision` (random weights, fp32 on both sides) is built in a temporary
folder and loaded twice: as `vlm.gguf` + `mmproj-vlm.gguf` by the llama_cpp backend and as the safetensors folder by
the transformers backend. Each round reads the same random RGB page on both sides (greedy, `--max-tokens` tokens,
the raw HxWx3 array as the wire delivers it); rounds alternate which side goes first, so load that comes and goes on
a shared machine hits both alike. Reported: median seconds per page on each side, the median per-round ratio
(transformers / llama.cpp), and prefill tokens/s (prompt tokens, image positions included, over prefill seconds:
the vision tower and the prompt's forward pass; resizing and tiling happen before either clock starts, while the
request is checked). `--longest-edge` scales the page the processor keeps (64: 2x2 tiles + a
global view; 256: 8x8) and so the work per page. The model is tiny, so the figures measure per-page overhead
(preprocessing, tiling, the engine's calls) more than arithmetic.

    .venv/bin/python bench/vision.py [--rounds 5] [--max-tokens 16] [--longest-edge 64] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import numpy as np


def read_page(model: Any, page: np.ndarray, max_tokens: int) -> tuple[float, Any, list[int]]:
    from modelhost.inference.types import Message

    start = time.perf_counter()
    ids = [
        t.id
        for t in model.chat(
            [Message("user", "Convert this page to docling.", images=(page,))], max_tokens=max_tokens, temperature=0
        )
    ]
    return time.perf_counter() - start, model.metrics(), ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--longest-edge", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()

    import torch

    from modelhost.backends.llama_cpp import LlamaCppBackend
    from modelhost.backends.transformers import TransformersBackend
    from modelhost.testing.tinyvision import build_tiny_idefics3_gguf

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="bench-vision-") as tmp:
        folder, gguf, mmproj = build_tiny_idefics3_gguf(tmp, seed=0, longest_edge=args.longest_edge)
        llama = LlamaCppBackend().load_model(str(gguf), mmproj=str(mmproj), threads=args.threads)
        hf = TransformersBackend().load_model(str(folder))
        page = np.random.default_rng(0).integers(0, 256, size=(1100, 850, 3), dtype=np.uint8)  # a letter page
        sides = {"llama.cpp": llama, "transformers": hf}
        for model in sides.values():  # warm-up: first-call allocations and graph builds
            read_page(model, page, 2)
        seconds: dict[str, list[float]] = {name: [] for name in sides}
        prefill: dict[str, list[float]] = {name: [] for name in sides}
        ratios, agree, prompt_tokens = [], 0, 0
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            ids: dict[str, list[int]] = {}
            for name in order:
                elapsed, metrics, ids[name] = read_page(sides[name], page, args.max_tokens)
                seconds[name].append(elapsed)
                prefill[name].append(metrics.prefill_tokens_per_second)
                prompt_tokens = metrics.prompt_tokens
            ratios.append(seconds["transformers"][-1] / seconds["llama.cpp"][-1])
            agree += ids["llama.cpp"] == ids["transformers"]
        llama.close()
        hf.close()

    print(
        f"page 850x1100 RGB, longest edge {args.longest_edge}, {prompt_tokens} prompt tokens, "
        f"{args.max_tokens} greedy tokens, {args.rounds} rounds; same tokens in {agree}/{args.rounds} rounds"
    )
    for name in sides:
        print(
            f"  {name:>12}: {statistics.median(seconds[name]) * 1000:8.1f} ms/page   "
            f"prefill {statistics.median(prefill[name]):8.0f} tokens/s"
        )
    print(f"  transformers / llama.cpp time per page: {statistics.median(ratios):.2f}x (median of per-round ratios)")


if __name__ == "__main__":
    main()

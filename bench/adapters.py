"""What serving LoRA adapters by name costs a step, on the embedded SmolLM2-135M-Instruct, in both engines.

Two random rank-8 LoRA adapters (q_proj and v_proj, B non-zero so they change every answer) are made once on the
model's transformers twin with peft and written both ways: peft folders, and llama.cpp LoRA GGUFs
(backends/transformers/gguf_lora.py). Then, per engine, in the same process and with the same options, the same
8 (llama.cpp) or 4 (transformers) streams are decoded three ways:

- base: every stream on the base model (no adapter loaded at all, for llama.cpp a fresh engine);
- one adapter: every stream on adapter A;
- two adapters: half the streams on A, half on B, all in one engine's slots.

Greedy with `min_tokens == max_tokens`, so every stream decodes exactly `--max-tokens` tokens. Aggregate decode
tokens/s = all generated tokens / wall seconds of the whole drive (prefill included). Rounds alternate the order.
The headline is each way's median ratio to the base of the same round: llama.cpp applies adapters per context, so
two adapters cost one llama_decode per adapter per step (lora.py); peft's mixed batch costs one LoRA matmul pair
per adapter per layer.

    .venv/bin/python bench/adapters.py [--rounds 3] [--max-tokens 32] [--threads 2] [--engine llama_cpp|transformers]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

PROMPTS = (
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "The three most important things to know about the water cycle are",
    "Dear hiring manager, I am writing to apply for the position of",
    "The recipe for a good loaf of bread starts with",
)


def make_adapters(out: Path) -> list[Path]:
    """Two random LoRA adapters of SmolLM2 (peft folder + adapter.gguf each), made on one load of its twin."""
    import torch
    from peft import LoraConfig, get_peft_model

    from modelhost.backends.transformers.gguf_lora import GGUF_NAME, write_gguf_lora
    from modelhost.inference import load_model

    folders = []
    with load_model("default", backend="transformers") as twin:
        module = twin.checkpoint.model  # type: ignore[attr-defined]
        for seed in (1, 2):
            torch.manual_seed(seed)
            peft_model = get_peft_model(module, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
            with torch.no_grad():
                for name, p in peft_model.named_parameters():
                    if "lora_B" in name:
                        p.normal_(0, 0.02)
            folder = out / f"adapter{seed}"
            peft_model.save_pretrained(str(folder))
            write_gguf_lora(folder, module.config.to_dict(), folder / GGUF_NAME)
            folders.append(folder)
            module = peft_model.unload()  # the plain module again, for the next adapter
    return folders


def requests(streams: int, adapters: list[str | None], max_tokens: int) -> list[Any]:
    from modelhost.inference.engine import EngineRequest

    opts = {"max_tokens": max_tokens, "min_tokens": max_tokens, "temperature": 0}
    return [
        EngineRequest(prompt=PROMPTS[i % len(PROMPTS)], options=opts, adapter=adapters[i % len(adapters)])
        for i in range(streams)
    ]


def timed(engine: Any, batch: list[Any]) -> float:
    """Aggregate generated tokens/s of driving `batch` through `engine` to its end."""
    from modelhost.inference.engine_conformance import drive

    start = time.perf_counter()
    runs = drive(engine, batch)
    seconds = time.perf_counter() - start
    return sum(len(r.tokens) for r in runs) / seconds


def measure(backend: str, folders: list[Path], args: argparse.Namespace) -> dict[str, list[float]]:
    from modelhost.inference import load_model

    streams = 8 if backend == "llama_cpp" else 4
    # A short context: the streams need ~80 cells each, and 8 slots of SmolLM2's 8192 would allocate 1.4 GB of KV.
    opts: dict[str, Any] = {"parallel": streams, "threads": args.threads, "context_length": 512}
    ratios: dict[str, list[float]] = {"one adapter": [], "two adapters": []}
    speeds: dict[str, list[float]] = {"base": [], "one adapter": [], "two adapters": []}
    with load_model("default", backend=backend, **opts) as plain, load_model("default", backend=backend, **opts) as m:
        engine = m.engine()  # type: ignore[attr-defined]
        engine.load_adapter("a", str(folders[0]))
        engine.load_adapter("b", str(folders[1]))
        ways = {
            "base": (plain.engine(), [None]),  # type: ignore[attr-defined]
            "one adapter": (engine, ["a"]),
            "two adapters": (engine, ["a", "b"]),
        }
        timed(ways["two adapters"][0], requests(streams, ["a", "b"], 4))  # warm both engines once
        timed(ways["base"][0], requests(streams, [None], 4))
        for r in range(args.rounds):
            order = list(ways) if r % 2 == 0 else list(reversed(ways))
            got = {way: timed(ways[way][0], requests(streams, ways[way][1], args.max_tokens)) for way in order}
            for way, speed in got.items():
                speeds[way].append(speed)
            for way in ratios:
                ratios[way].append(got[way] / got["base"])
            shown = ", ".join(f"{way} {speed:.1f}" for way, speed in got.items())
            print(f"{backend}: round {r + 1}: tokens/s {shown}", flush=True)
    for way, values in speeds.items():
        print(f"{backend}: {way:13s} {streams} streams: {statistics.median(values):6.1f} tokens/s (median of "
              f"{args.rounds})", flush=True)  # fmt: skip
    for way, values in ratios.items():
        print(
            f"{backend}: {way:13s} vs base: {statistics.median(values):.2f}x (median of per-round ratios)", flush=True
        )
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--engine", choices=("llama_cpp", "transformers", "both"), default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folders = make_adapters(Path(tmp))
        for backend in ("llama_cpp", "transformers"):
            if args.engine in (backend, "both"):
                measure(backend, folders, args)


if __name__ == "__main__":
    main()

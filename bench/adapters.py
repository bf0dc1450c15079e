"""What serving LoRA adapters by name costs, through the host, on the embedded SmolLM2-135M-Instruct.

Two random rank-8 LoRA adapters (q_proj and v_proj, B non-zero so they change every answer) are made once on the
model's transformers twin with peft and written both ways: peft folders, and llama.cpp LoRA GGUFs
(backends/transformers/gguf_lora.py). Then, per engine, in the same process and with the same options, `--streams`
requests are submitted together to a `Host` (the model thread, its queue and its batching, as every door uses it)
three ways:

- base: every stream on the base model (a host whose model has no adapter loaded at all);
- one adapter: every stream on adapter A (a second host of the same model, both adapters loaded);
- two adapters: half the streams on A, half on B, all in that host's slots.

Greedy with `min_tokens == max_tokens`, so every stream decodes exactly `--max-tokens` tokens. Each prompt starts
with its round and way, so no way finds a prompt already in a slot's cache (the first version of this script gave
the base its cached prompts and the adapters none, which alone made one adapter look 0.57x). Aggregate tokens/s =
all generated tokens / seconds from the first submit to the last answer (prefill included), in wall time and in
this process's CPU time (the second is what a shared machine's other work disturbs least). Rounds alternate the
order; the headline is each way's median ratio to the base of the same round. Where the cost comes from on
llama.cpp: bench/adapter_options.py.

    .venv/bin/python bench/adapters.py [--rounds 3] [--max-tokens 32] [--streams 8] [--threads 2] \
        [--engine llama_cpp|transformers|both]
"""

from __future__ import annotations

import argparse
import asyncio
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

#: Tokens each slot holds: a prompt of ~25 tokens plus the answer fits; 8 slots of SmolLM2's 8192 would allocate
#: 1.4 GB of KV cache for nothing.
CONTEXT = 512


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


async def serve(host: Any, adapters: list[str | None], streams: int, max_tokens: int, tag: str) -> tuple[float, float]:
    """Submit `streams` requests together (adapters in turn) and wait for every answer: (wall s, CPU s)."""
    from modelhost.host import Done, Failed, GenerationRequest

    options = {"max_tokens": max_tokens, "min_tokens": max_tokens, "temperature": 0}
    requests = [
        GenerationRequest(prompt=f"[{tag} {i}] {PROMPTS[i % len(PROMPTS)]}", options=options,
                          adapter=adapters[i % len(adapters)])
        for i in range(streams)
    ]  # fmt: skip

    async def answer(request: Any) -> None:
        async with host.submit(request) as stream:
            async for event in stream:
                if isinstance(event, Failed):
                    raise RuntimeError(f"the request failed: {event}")
                if isinstance(event, Done) and event.completion_tokens != max_tokens:
                    raise RuntimeError(f"{event.completion_tokens} tokens, not {max_tokens}")

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(answer(r) for r in requests))
    return time.perf_counter() - wall, time.process_time() - cpu


async def measure(backend: str, folders: list[Path], args: argparse.Namespace) -> None:
    from modelhost.host import Host
    from modelhost.inference import load_model

    opts: dict[str, Any] = {"parallel": args.streams, "threads": args.threads, "context_length": CONTEXT}
    plain = Host(lambda: load_model("default", backend=backend, **opts), name="base")
    served = Host(lambda: load_model("default", backend=backend, **opts), name="adapters")
    await plain.start()
    await served.start()
    try:
        await served.load_adapter("a", str(folders[0]))
        await served.load_adapter("b", str(folders[1]))
        ways: dict[str, tuple[Any, list[str | None]]] = {
            "base": (plain, [None]),
            "one adapter": (served, ["a"]),
            "two adapters": (served, ["a", "b"]),
        }
        for way, (host, adapters) in ways.items():  # warm each way once
            await serve(host, adapters, args.streams, 4, f"warm {way}")
        tokens = args.streams * args.max_tokens
        speeds: dict[str, dict[str, list[float]]] = {way: {"wall": [], "cpu": []} for way in ways}
        ratios: dict[str, dict[str, list[float]]] = {way: {"wall": [], "cpu": []} for way in ways}
        for r in range(args.rounds):
            order = list(ways) if r % 2 == 0 else list(reversed(ways))
            got = {way: await serve(*ways[way], args.streams, args.max_tokens, f"r{r} {way}") for way in order}
            for way, (wall, cpu) in got.items():
                speeds[way]["wall"].append(tokens / wall)
                speeds[way]["cpu"].append(tokens / cpu)
                ratios[way]["wall"].append(got["base"][0] / wall)
                ratios[way]["cpu"].append(got["base"][1] / cpu)
            shown = ", ".join(
                f"{way} {tokens / wall:.1f} ({tokens / cpu:.1f} per CPU s)" for way, (wall, cpu) in got.items()
            )
            print(f"{backend}: round {r + 1}: tokens/s {shown}", flush=True)
    finally:
        await plain.aclose()
        await served.aclose()
    print(f"{backend}, {args.streams} streams, {args.max_tokens} tokens each, {args.threads} threads, "
          f"medians of {args.rounds} rounds:")  # fmt: skip
    for way in ways:
        wall, cpu = (statistics.median(speeds[way][k]) for k in ("wall", "cpu"))
        rw, rc = (statistics.median(ratios[way][k]) for k in ("wall", "cpu"))
        print(f"  {way:13s} {wall:6.1f} tokens/s ({cpu:6.1f} per CPU s)   vs base: {rw:.2f}x wall, {rc:.2f}x CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--engine", choices=("llama_cpp", "transformers", "both"), default="llama_cpp")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folders = make_adapters(Path(tmp))
        for backend in ("llama_cpp", "transformers"):
            if args.engine in (backend, "both"):
                asyncio.run(measure(backend, folders, args))


if __name__ == "__main__":
    main()

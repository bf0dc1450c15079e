"""vLLM through modelhost (`serve --backend vllm`) against vLLM's own OpenAI server, on the same model, same run.

Runs in `make test-vllm`'s venv (vLLM is not in .venv):

    .venv-vllm/bin/python bench/vllm_serve.py [--clients 1,8] [--tokens 64] [--rounds 1]

The model is the embedded SmolLM2-135M-Instruct, dequantised to an fp32 safetensors folder (cached; vLLM loads
folders, not this GGUF). Each server runs alone, in its own process (one vLLM engine at a time: each holds its KV
cache), with the same settings: vLLM's server gets the engine arguments modelhost's vllm backend gives this load
(`loading.engine_arguments`: on a CPU fp32 and eager, on a GPU vLLM's own dtype and CUDA graphs), 8 sequences at
once, and on a CPU VLLM_CPU_KVCACHE_SPACE GiB of KV cache (on a GPU both take vLLM's default share of its memory).
So the same command runs on a GPU machine in a venv with `vllm` (`VLLM_PACKAGE=vllm make test-vllm`). Both run
vLLM's engine core in a process of its own (modelhost's since issue 36 item 4). For each client count, every client
sends one greedy streamed chat with a distinct prompt and exactly `--tokens` tokens (`min_tokens` = `max_tokens`,
which both servers take), and we report aggregate tokens/s (all tokens over the wall time from the first send to the
last byte) and mean TTFT, then modelhost's figure over vLLM's. The servers run one after the other, not interleaved,
so a neighbour's load can fall on one side only: `--rounds 2` or more alternates which goes first and reports
medians.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
from pathlib import Path

import httpx

from _http import chat_body, free_port, stop, stream_chat, wait_ready

WORDS = ("Amber", "Birch", "Cedar", "Delta", "Ember", "Fjord", "Garnet", "Harbor", "Indigo", "Juniper", "Kestrel",
         "Lumen", "Meadow", "Nectar", "Onyx", "Pebble")  # fmt: skip
TASK = "write a long, detailed story about a lighthouse keeper and the sea."
SIDES = ("modelhost", "vllm")
#: Sequences decoded at once on both sides (the most clients a run sends).
SEQUENCES = 8
#: A vLLM start imports vLLM, loads and warms up: 50-90 s on 2 busy cores.
READY_SECONDS = 900


def smollm2_folder() -> Path:
    """The embedded model as a dequantised fp32 safetensors folder (the transformers backend's cache)."""
    from modelhost.backends.transformers.loading import dequantised_gguf_folder
    from modelhost.inference import catalogue

    return Path(dequantised_gguf_folder(Path(catalogue.resolve("default"))))


def vllm_flags(folder: Path) -> list[str]:
    """vLLM server flags for the engine arguments modelhost's vllm backend gives this load on this machine, so both
    sides run the same dtype, eager mode and sequences, on a CPU or a GPU (imports vLLM: seconds, once)."""
    from vllm.platforms import current_platform

    from modelhost.backends.vllm.loading import engine_arguments
    from modelhost.inference.options import LoadOptions

    on_cpu = bool(current_platform.is_cpu())
    args = engine_arguments(str(folder), LoadOptions.parse(parallel=SEQUENCES), on_cpu=on_cpu)
    flags = ["--dtype", str(args["dtype"]), "--max-num-seqs", str(args["max_num_seqs"])]
    return [*flags, "--enforce-eager"] if args["enforce_eager"] else flags


def command(side: str, folder: Path, port: int, flags: list[str]) -> list[str]:
    """The server of one side, on loopback `port`, serving `folder` as the model named "default"."""
    if side == "modelhost":
        return [sys.executable, "-m", "modelhost.cli", "serve", "--model", f"default={folder}", "--backend", "vllm",
                "--parallel", str(SEQUENCES), "--no-socket", "--http", f"127.0.0.1:{port}"]  # fmt: skip
    # vLLM's `vllm` console script fails in vllm-cpu 0.32 (PackageNotFoundError); the module runs.
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
            "--served-model-name", "default", *flags, "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip


async def run_clients(url: str, clients: int, tokens: int, offset: int) -> tuple[float, float]:
    """`clients` simultaneous streamed chats of exactly `tokens` tokens: (aggregate tokens/s, mean TTFT s)."""
    bodies = [chat_body(f"{WORDS[(offset + i) % len(WORDS)]}: {TASK}", tokens, stream=True, exact=True)
              for i in range(clients)]  # fmt: skip
    async with httpx.AsyncClient(timeout=600) as client:
        runs = await asyncio.gather(*(stream_chat(client, url, body) for body in bodies))
    wall = max(r.end for r in runs) - min(r.began for r in runs)
    return clients * tokens / wall, statistics.fmean(r.ttft for r in runs)


def measure(
    side: str, folder: Path, flags: list[str], counts: list[int], tokens: int, log: Path
) -> dict[int, tuple[float, float]]:
    """Start one side's server, time each client count, stop it."""
    port = free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    with log.open("w") as out:
        proc = subprocess.Popen(command(side, folder, port, flags), stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(side, url, "/v1/models", chat_body("Hi", 4), timeout=READY_SECONDS)
        return {n: asyncio.run(run_clients(url, n, tokens, offset=n)) for n in counts}
    finally:
        stop([proc])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="1,8", help="client counts, comma-separated (at most 8)")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    if any(not 1 <= c <= SEQUENCES for c in counts):
        parser.error(f"client counts are 1 to {SEQUENCES}")
    folder = smollm2_folder()
    flags = vllm_flags(folder)
    figures: dict[str, dict[int, list[tuple[float, float]]]] = {s: {n: [] for n in counts} for s in SIDES}
    for r in range(args.rounds):
        for side in SIDES if r % 2 == 0 else SIDES[::-1]:
            log = Path(f"/tmp/bench-vllm-{side}.log")
            for n, result in measure(side, folder, flags, counts, args.tokens, log).items():
                figures[side][n].append(result)
                print(f"round {r + 1} {side:9} {n} clients: {result[0]:6.1f} tok/s, TTFT {result[1]:.2f} s", flush=True)
    print(f"\nSmolLM2-135M ({' '.join(flags)}), {args.tokens} tokens a stream, median of {args.rounds} round(s):")
    for n in counts:
        ours = statistics.median(t for t, _ in figures["modelhost"][n])
        theirs = statistics.median(t for t, _ in figures["vllm"][n])
        ttft_ours = statistics.median(f for _, f in figures["modelhost"][n])
        ttft_theirs = statistics.median(f for _, f in figures["vllm"][n])
        # Each round's own ratio too: its two servers ran minutes apart, the rounds may be an hour's load apart.
        rounds = sorted(o / t for (o, _), (t, _) in zip(figures["modelhost"][n], figures["vllm"][n], strict=True))
        print(f"{n} clients: modelhost {ours:.1f} tok/s (TTFT {ttft_ours:.2f} s), vLLM's server {theirs:.1f} tok/s "
              f"(TTFT {ttft_theirs:.2f} s): {ours / theirs:.2f}x; per round "
              f"{', '.join(f'{x:.2f}x' for x in rounds)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

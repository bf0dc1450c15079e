"""The HTTP door against llama-cpp-python's own OpenAI server, on the same GGUF and settings, in one run.

Both servers run as separate processes (as deployed) with the embedded model (SmolLM2-135M-Instruct Q4_1), the
same n_ctx, n_batch and thread count, and are driven by the same client code over loopback with greedy streamed
chat requests of the same prompts and max_tokens:

1. One stream: time to the first content token (TTFT) and decode tokens/s (tokens after the first, over the time
   from the first to the last).
2. Four concurrent streams: aggregate tokens/s (all completion tokens over the wall time of the batch).

Every request's prompt starts with a different word, so neither server answers from a cached prompt (both reuse
the longest common prefix of the KV cache: the chat template's preamble is shared alike). Rounds alternate which
server goes first, so a burst of load from a neighbour hits both alike; reports are medians.

    .venv/bin/python bench/http_door.py [--rounds 5] [--max-tokens 64] [--concurrency 4] [--threads N]

llama_cpp.server needs llama-cpp-python's `server` extras (fastapi, sse-starlette, pydantic-settings,
starlette-context); without them only our side is measured and the missing packages are named.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

import httpx

from _http import chat_body, default_threads, free_port, serve_default, stop, stream_chat, wait_ready

#: The llama.cpp settings both servers get (ours: modelhost.backends.llama_cpp's defaults, made explicit here).
N_CTX = 4096
N_BATCH = 512

SERVER_EXTRAS = ("fastapi", "sse_starlette", "pydantic_settings", "starlette_context")
WORDS = "Amber Birch Cedar Delta Ember Fjord Garnet Harbor Indigo Juniper Kestrel Lumen Meadow Nectar Onyx Pebble"
TASK = "write a long, detailed story about a lighthouse keeper and the sea."


def gguf_path() -> str:
    from modelhost.inference.catalogue import resolve

    return str(resolve("default"))


def start_servers(threads: int) -> tuple[dict[str, str], list[subprocess.Popen[bytes]], list[str]]:
    """Start both servers; return their base URLs, the processes, and any missing llama_cpp.server extras."""
    urls: dict[str, str] = {}
    procs: list[subprocess.Popen[bytes]] = []
    port = free_port()
    procs.append(
        subprocess.Popen([sys.executable, __file__, "--serve-modelhost", str(port), "--threads", str(threads)])
    )
    urls["modelhost"] = f"http://127.0.0.1:{port}"
    missing = [m for m in SERVER_EXTRAS if importlib.util.find_spec(m) is None]
    if not missing:
        port = free_port()
        cmd = [
            sys.executable, "-m", "llama_cpp.server", "--model", gguf_path(), "--host", "127.0.0.1", "--port",
            str(port), "--n_ctx", str(N_CTX), "--n_batch", str(N_BATCH), "--n_threads", str(threads),
            "--n_threads_batch", str(threads), "--verbose", "False",
            # Its default interrupts a running stream when a new request arrives (it serves one at a time and
            # drops the older client); queue instead, as modelhost does, or 4 concurrent streams cannot finish.
            "--interrupt_requests", "False",
        ]  # fmt: skip
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        urls["llama_cpp.server"] = f"http://127.0.0.1:{port}"
    for name, url in urls.items():
        # /v1/models answers while our model loads; the warm-up request proves both can generate.
        wait_ready(name, url, "/v1/models", chat_body("Hi", 1))
    return urls, procs, missing


async def one_stream(url: str, prompt: str, max_tokens: int) -> tuple[float, float, int]:
    """(TTFT seconds, decode tokens/s, tokens) of one stream."""
    async with httpx.AsyncClient(timeout=600) as client:
        r = await stream_chat(client, url, chat_body(prompt, max_tokens, stream=True))
    decode = r.chunks[-1] - r.chunks[0] if r.chunks else 0.0  # from the first content token to the last
    return r.ttft, (len(r.chunks) - 1) / decode if decode > 0 else 0.0, len(r.chunks)


async def concurrent_streams(url: str, prompts: Sequence[str], max_tokens: int) -> tuple[float, int]:
    """(aggregate tokens/s, tokens) of len(prompts) streams sent at once."""
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=len(prompts))) as client:
        began = time.perf_counter()
        results = await asyncio.gather(
            *(stream_chat(client, url, chat_body(p, max_tokens, stream=True)) for p in prompts)
        )
    tokens = sum(len(r.chunks) for r in results)
    return tokens / (max(r.end for r in results) - began), tokens


def run(rounds: int, max_tokens: int, concurrency: int, threads: int) -> None:
    urls, procs, missing = start_servers(threads)
    words = WORDS.split()
    prompt_no = 0

    def next_prompt() -> str:
        nonlocal prompt_no
        prompt_no += 1
        return f"{words[prompt_no % len(words)]} {prompt_no}: {TASK}"

    single: dict[str, list[tuple[float, float, int]]] = {name: [] for name in urls}
    multi: dict[str, list[tuple[float, int]]] = {name: [] for name in urls}
    try:
        names = list(urls)
        for i in range(rounds):
            order = names if i % 2 == 0 else names[::-1]
            prompt = next_prompt()  # the same prompts for both servers, new to each
            batch = [next_prompt() for _ in range(concurrency)]
            for name in order:
                single[name].append(asyncio.run(one_stream(urls[name], prompt, max_tokens)))
            for name in order:
                multi[name].append(asyncio.run(concurrent_streams(urls[name], batch, max_tokens)))
    finally:
        stop(procs)

    print(f"SmolLM2-135M-Instruct Q4_1, n_ctx {N_CTX}, n_batch {N_BATCH}, {threads} threads, greedy, "
          f"max_tokens {max_tokens}, median of {rounds} rounds")  # fmt: skip
    for name in urls:
        ttft = statistics.median(r[0] for r in single[name])
        tps = statistics.median(r[1] for r in single[name])
        toks = statistics.median(r[2] for r in single[name])
        agg = statistics.median(r[0] for r in multi[name])
        agg_toks = statistics.median(r[1] for r in multi[name])
        print(f"  {name:17} 1 stream: TTFT {ttft * 1e3:6.0f} ms, decode {tps:5.1f} tokens/s ({toks:.0f} tokens)   "
              f"{concurrency} streams: {agg:5.1f} tokens/s aggregate ({agg_toks:.0f} tokens)")  # fmt: skip
    if len(urls) == 2:
        ours, theirs = single["modelhost"], single["llama_cpp.server"]
        ttft_ratio = statistics.median(a[0] / b[0] for a, b in zip(ours, theirs, strict=True))
        tps_ratio = statistics.median(a[1] / b[1] for a, b in zip(ours, theirs, strict=True))
        agg_ratio = statistics.median(
            a[0] / b[0] for a, b in zip(multi["modelhost"], multi["llama_cpp.server"], strict=True)
        )
        print(f"  paired ratios modelhost / llama_cpp.server: TTFT {ttft_ratio:.2f} (lower is better), "
              f"decode {tps_ratio:.2f}, {concurrency}-stream aggregate {agg_ratio:.2f} (target >= 1.0)")  # fmt: skip
    else:
        print(
            f"  llama_cpp.server not measured: missing {', '.join(m.replace('_', '-') for m in missing)} "
            "(llama-cpp-python's server extras)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--serve-modelhost", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_modelhost:
        serve_default(args.serve_modelhost, threads=args.threads, context_length=N_CTX)
        return 0
    run(args.rounds, args.max_tokens, args.concurrency, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())

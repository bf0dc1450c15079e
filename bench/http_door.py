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
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

#: The llama.cpp settings both servers get (ours: modelhost.backends.llama_cpp's defaults, made explicit here).
N_CTX = 4096
N_BATCH = 512

SERVER_EXTRAS = ("fastapi", "sse_starlette", "pydantic_settings", "starlette_context")
WORDS = "Amber Birch Cedar Delta Ember Fjord Garnet Harbor Indigo Juniper Kestrel Lumen Meadow Nectar Onyx Pebble"
TASK = "write a long, detailed story about a lighthouse keeper and the sea."


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the servers ------------------------------------------------------------------------------------------------


def serve_modelhost(port: int, threads: int) -> None:
    """Run our HTTP door over the embedded model until SIGTERM (the benchmark's child process)."""
    from modelhost.host import Host
    from modelhost.http import HttpServer
    from modelhost.inference import load_model

    async def main() -> None:
        host = Host(lambda: load_model("default", threads=threads, context_length=N_CTX), name="default")
        server = HttpServer(host, port=port)
        await server.start()
        await host.start()
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await server.aclose()
        await host.aclose(grace=1)

    asyncio.run(main())


def gguf_path() -> str:
    from modelhost.inference.catalogue import resolve

    return resolve("default")


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
        wait_ready(name, url)
    return urls, procs, missing


def wait_ready(name: str, url: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                # /v1/models answers while our model loads; one real request proves both can generate.
                r = httpx.post(f"{url}/v1/chat/completions", json=body("Hi", 1), timeout=120)
                if r.status_code == 200:
                    return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{name} at {url} did not become ready")


# -- the client -------------------------------------------------------------------------------------------------


def body(prompt: str, max_tokens: int, stream: bool = False) -> dict[str, object]:
    return {
        "model": "default",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
    }


@dataclass
class StreamResult:
    ttft: float  # seconds from sending to the first content token
    tokens: int  # content chunks received (one per token on both servers without stop strings)
    decode: float  # seconds from the first content token to the last
    end: float  # perf_counter at the last byte


async def stream_chat(client: httpx.AsyncClient, url: str, prompt: str, max_tokens: int) -> StreamResult:
    began = time.perf_counter()
    first = last = 0.0
    tokens = 0
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body(prompt, max_tokens, True)) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: {"):
                continue
            choices = json.loads(line[6:]).get("choices") or []
            if choices and choices[0].get("delta", {}).get("content"):
                last = time.perf_counter()
                if tokens == 0:
                    first = last
                tokens += 1
    return StreamResult(first - began, tokens, last - first, time.perf_counter())


async def one_stream(url: str, prompt: str, max_tokens: int) -> tuple[float, float, int]:
    """(TTFT seconds, decode tokens/s, tokens) of one stream."""
    async with httpx.AsyncClient(timeout=600) as client:
        r = await stream_chat(client, url, prompt, max_tokens)
    return r.ttft, (r.tokens - 1) / r.decode if r.decode > 0 else 0.0, r.tokens


async def concurrent_streams(url: str, prompts: Sequence[str], max_tokens: int) -> tuple[float, int]:
    """(aggregate tokens/s, tokens) of len(prompts) streams sent at once."""
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=len(prompts))) as client:
        began = time.perf_counter()
        results = await asyncio.gather(*(stream_chat(client, url, p, max_tokens) for p in prompts))
    tokens = sum(r.tokens for r in results)
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
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()

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
        serve_modelhost(args.serve_modelhost, args.threads)
        return 0
    run(args.rounds, args.max_tokens, args.concurrency, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())

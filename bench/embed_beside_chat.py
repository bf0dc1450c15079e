"""A chat beside a long embedding (issue 35): how long a 4-token Ollama `/api/chat` takes while a 10 MB `/api/embed`
with `truncate` (cut to the context: 4,096 tokens of SmolLM2) runs on the same model, against the same chat alone.

The server is `modelhost serve` in a child process on loopback, run from `--src` (a checkout's folder: its `src/`
goes first on PYTHONPATH), so an older commit can be measured with the same script: with `--baseline DIR` the same
rounds run against DIR's code in the same run, one server after the other. Per server: the chat alone (after a
warm-up), then the embedding is sent and, once the server has had `--head-start` seconds to read and cut it, the
chat; printed are both chat latencies, their ratio (beside / alone: what the embedding costs a chat), the
embedding's own time, whether the chat finished first, and the load average.

    .venv/bin/python bench/embed_beside_chat.py [--src .] [--baseline DIR] [--threads 2] [--head-start 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

#: The reported case: 10 MB of English (Ollama's /api/embed truncates by default; it is asked for anyway).
EMBED_BYTES = 10_000_000

#: The chat: a 4-token answer, greedy, as in the issue's report.
CHAT = {
    "model": "default",
    "messages": [{"role": "user", "content": "Hi"}],
    "stream": False,
    "options": {"num_predict": 4, "temperature": 0},
}

#: A safety net for one request (the embedding took 250-280 s at load 18-25 before it was chunked); no figure
#: depends on it.
REQUEST_TIMEOUT = 1200.0


def serve(src: Path, port: int, threads: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(src.resolve() / "src"))
    argv = [sys.executable, "-m", "modelhost", "serve", "-m", "default", "--no-socket", "--no-ui"]
    argv += ["--http", f"127.0.0.1:{port}", "--threads", str(threads)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def measure(src: Path, port: int, threads: int, head_start: float) -> dict[str, Any]:
    proc = serve(src, port, threads)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=REQUEST_TIMEOUT) as client:
            deadline = time.monotonic() + 300
            while True:
                try:
                    if client.get("/ready", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"the server from {src} did not become ready")
                time.sleep(0.5)
            client.post("/api/chat", json=CHAT).raise_for_status()  # warm-up
            start = time.perf_counter()
            client.post("/api/chat", json=CHAT).raise_for_status()
            alone = time.perf_counter() - start
            text = ("The quick brown fox jumps over the lazy dog. " * (EMBED_BYTES // 45 + 1))[:EMBED_BYTES]
            embedded: dict[str, float] = {}

            def embed() -> None:
                began = time.perf_counter()
                with httpx.Client(base_url=base, timeout=REQUEST_TIMEOUT) as other:
                    body = {"model": "default", "input": text, "truncate": True}
                    other.post("/api/embed", json=body).raise_for_status()
                embedded["seconds"] = time.perf_counter() - began

            worker = threading.Thread(target=embed)
            worker.start()
            time.sleep(head_start)
            start = time.perf_counter()
            client.post("/api/chat", json=CHAT).raise_for_status()
            beside = time.perf_counter() - start
            first = "seconds" not in embedded
            worker.join()
        return {
            "src": str(src),
            "chat_alone_s": round(alone, 3),
            "chat_beside_s": round(beside, 3),
            "ratio": round(beside / alone, 1),
            "embed_s": round(embedded["seconds"], 1),
            "chat_finished_first": first,
            "load": [round(x, 1) for x in os.getloadavg()],
        }
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--baseline", type=Path, help="another checkout to measure in the same run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--head-start", type=float, default=3.0, help="seconds between the embedding and the chat")
    parser.add_argument("--port", type=int, default=18761)
    args = parser.parse_args()
    for offset, src in enumerate([args.src] + ([args.baseline] if args.baseline else [])):
        print(json.dumps(measure(src, args.port + offset, args.threads, args.head_start)), flush=True)


if __name__ == "__main__":
    main()

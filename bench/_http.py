"""What the HTTP benchmarks share: a modelhost server in a child process, readiness, and a timed streaming client.

Each benchmark runs its servers as separate processes (as deployed), so a server's own threads never compete with
the client's event loop for the interpreter; the client measures from the outside, over loopback, the way a user's
client sees it. Scripts import this as `_http` (bench/ is on sys.path when a script in it runs).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx


def default_threads() -> int:
    """The cores this process may use (its affinity, not the machine's count: a container may see fewer)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def free_port() -> int:
    """A loopback port free right now (the child binds it a moment later; collisions are rare enough here)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_default(port: int, **load_options: Any) -> None:
    """Run modelhost's HTTP door over the embedded model until SIGTERM (a benchmark's child process)."""
    from modelhost.host import Host
    from modelhost.http import HttpServer
    from modelhost.inference import load_model

    async def main() -> None:
        host = Host(lambda: load_model("default", **load_options), name="default")
        server = HttpServer(host, port=port)
        await server.start()
        await host.start()
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await server.aclose()
        await host.aclose(grace=1)

    asyncio.run(main())


def wait_ready(name: str, url: str, probe: str, warm_up: dict[str, object], timeout: float = 300) -> None:
    """Wait until GET `probe` answers 200 and one real chat request (`warm_up`) succeeds: a server can answer its
    probe while the model still loads, and the first request also pays one-off costs nobody should time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}{probe}", timeout=2).status_code == 200:
                r = httpx.post(f"{url}/v1/chat/completions", json=warm_up, timeout=120)
                if r.status_code == 200:
                    return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{name} at {url} did not become ready")


def stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every server, then kill what has not exited within 30 s."""
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def chat_body(prompt: str, max_tokens: int, *, stream: bool = False, exact: bool = False) -> dict[str, object]:
    """A greedy chat request; `exact` also sets min_tokens, so every answer is exactly `max_tokens` long (modelhost
    only: llama_cpp.server has no min_tokens)."""
    body: dict[str, object] = {
        "model": "default",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
    }
    if exact:
        body["min_tokens"] = max_tokens
    return body


@dataclass
class Streamed:
    """When one streamed chat answer's content chunks arrived (perf_counter seconds)."""

    began: float  # the request was sent
    chunks: list[float]  # one per content chunk (one per token on both servers without stop strings)
    end: float  # the last byte arrived

    @property
    def ttft(self) -> float:
        """Seconds from sending to the first content chunk (NaN when none came)."""
        return self.chunks[0] - self.began if self.chunks else float("nan")


async def stream_chat(client: httpx.AsyncClient, url: str, body: dict[str, object]) -> Streamed:
    """Send one streamed chat request and time its content chunks."""
    began = time.perf_counter()
    chunks: list[float] = []
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: {"):
                continue
            choices = json.loads(line[6:]).get("choices") or []
            if choices and choices[0].get("delta", {}).get("content"):
                chunks.append(time.perf_counter())
    return Streamed(began, chunks, time.perf_counter())

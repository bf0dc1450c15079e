"""The socket door's cost: a page's receive path vs a raw socket, and generation through the socket vs in-process.

1. Page receive. One 2550x3300 RGB page (300 DPI US Letter, 25,245,000 bytes) per request, sent as a pdf-spec page
   request (request frame, descriptor, BLOB). "wire" is the whole round trip through our server: receive into the
   request's own buffer, decode, validate, hand the pixels (uncopied) to a host whose stand-in model answers one
   token at once, and read the done frame. "raw" is the floor: the same bytes from the same sender into a
   preallocated buffer with blocking ``recv_into`` on a plain socket, then a one-byte ack. Target: wire >= 0.7 of
   raw throughput.
2. Generation. The embedded default model (SmolLM2-135M Q4_1 via llama.cpp): the same chat request through a
   socket ``Client`` to a ``modelhost serve`` process, and through ``Local`` (the same handler, in-process) on a
   Host in this process; greedy, the prompt cached after the first round. Time to first delta and decode tokens/s.
   Targets: tokens/s ratio >= 0.98, TTFT overhead < 2 ms.

Rounds alternate which side goes first, so a burst of load from a neighbour hits both alike; reports are medians.

    .venv/bin/python bench/wire.py [--page-rounds 15] [--rounds 9] [--max-tokens 64] [--skip-model]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from modelhost.host import Host
from modelhost.inference.types import Message
from modelhost.testing.standins import ScriptedModel
from modelhost.wire import codec
from modelhost.wire import server as wire_server
from modelhost.wire.client import Client, Local
from modelhost.wire.server import WireServer

T = TypeVar("T")
PAGE_SHAPE = (3300, 2550, 3)


class LoopThread:
    """An event loop on its own thread: the server side, while the benchmark's clients block on the main thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(600)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def send_all(sock: socket.socket, buffers: Sequence[codec.Buffer]) -> None:
    for buffer in buffers:
        sock.sendall(buffer)


def bench_pages(rounds: int, folder: Path) -> dict[str, float]:
    """Median MB/s of each side: wire round trip, wire receive (to a decoded request), raw, raw with fresh buffers.

    "wire receive" ends when the server hands the complete, decoded request (pixels attached) to the handler:
    the receive path alone, without the host's thread hop and the answer. The raw receiver stamps the same moment:
    its last byte in memory.
    """
    page = np.random.default_rng(0).integers(0, 256, PAGE_SHAPE, dtype=np.uint8)
    buffers = codec.encode_request(codec.page_request("page-1", page, max_tokens=1))
    total = sum(len(b) for b in buffers)

    loops = LoopThread()
    # A vision stand-in that answers "ok" at once without touching the pixels: only the door's cost remains.
    host = Host.from_model(ScriptedModel(["ok"], name="one-token", vision=True), name="one-token")
    server = WireServer(host, folder / "wire.sock")

    async def start() -> None:
        await host.start()
        await server.start()

    loops.run(start())
    received: list[float] = []  # when the server finished receiving each request (its handler was called)
    handler = wire_server.respond

    def stamped(host: Host, request: codec.Request) -> Any:
        received.append(time.perf_counter())
        return handler(host, request)

    wire_server.respond = stamped  # type: ignore[assignment]
    wire = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    wire.connect(server.path)
    decoder = codec.FrameDecoder(expect=codec.FrameType.JSON)

    def wire_round() -> float:
        began = time.perf_counter()
        send_all(wire, buffers)
        while True:
            frames = decoder.feed(wire.recv(65536))
            if any(isinstance(codec.decode_response(f.payload), codec.Done | codec.Error) for f in frames):
                break
        times["wire_receive"].append(received[-1] - began)
        return time.perf_counter() - began

    raw_path = str(folder / "raw.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(raw_path)
    listener.listen(1)
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(raw_path)
    peer, _ = listener.accept()
    fresh = threading.Event()
    go = threading.Semaphore(0)
    reused = bytearray(total)

    def raw_receiver() -> None:
        while True:
            go.acquire()
            buffer = bytearray(total) if fresh.is_set() else reused
            view, got = memoryview(buffer), 0
            while got < total:
                got += peer.recv_into(view[got:])
            received.append(time.perf_counter())
            peer.sendall(b"k")

    threading.Thread(target=raw_receiver, daemon=True).start()

    def raw_round(new_buffer: bool) -> float:
        if new_buffer:
            fresh.set()
        else:
            fresh.clear()
        began = time.perf_counter()
        go.release()
        send_all(raw, buffers)
        raw.recv(1)
        return received[-1] - began  # the receive itself; the ack's round trip is not the receiver's work

    times: dict[str, list[float]] = {"wire": [], "wire_receive": [], "raw": [], "raw_fresh": []}
    sides: list[tuple[str, Callable[[], float]]] = [
        ("wire", wire_round),
        ("raw", lambda: raw_round(False)),
        ("raw_fresh", lambda: raw_round(True)),
    ]
    for side in sides:  # warm-up: page faults of first use, allocator growth
        side[1]()
    for ts in times.values():
        ts.clear()
    for i in range(rounds):
        order = sides if i % 2 == 0 else sides[::-1]
        for name, fn in order:
            times[name].append(fn())
    wire.close()
    raw.close()
    loops.run(server.aclose())
    loops.run(host.aclose())
    loops.stop()
    return {name: total / statistics.median(ts) / 1e6 for name, ts in times.items()}


def timed(deltas: Iterator[str]) -> tuple[float, int, float]:
    """(seconds to the first delta, deltas, seconds from the first delta to the last)."""
    began = time.perf_counter()
    first = last = 0.0
    n = 0
    for _ in deltas:
        last = time.perf_counter()
        if n == 0:
            first = last
        n += 1
    return first - began, n, last - first


def bench_generation(rounds: int, max_tokens: int, folder: Path) -> dict[str, tuple[float, float]]:
    """Median (TTFT seconds, decode tokens/s) per side: a `modelhost serve` process through the socket, and the
    same model file in this process through Local (the same handler without a socket).

    The socket side runs as it is deployed, a separate process, so its event loop never shares this process's
    interpreter lock with the client; each side has its own copy of the model and its own prompt cache.
    """
    from modelhost.inference import load_model

    path = folder / "gen.sock"
    serve = subprocess.Popen(
        [sys.executable, "-c", "from modelhost.cli import main; main()", "serve", "--socket", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    loops = LoopThread()
    host = Host(lambda: load_model("default"), name="smollm2-135m-instruct")
    loops.run(host.start())
    try:
        client = Client(path, connect_timeout=300.0)  # connect retries while the server loads its model
        client.connect()
        local = Local(host)
        messages = [Message("user", "Write a long story about a lighthouse keeper and the sea.")]
        results: dict[str, list[tuple[float, float]]] = {"socket": [], "local": []}

        def run(name: str, session: Client | Local) -> None:
            ttft, _deltas, decode = timed(session.chat(messages, max_tokens=max_tokens, temperature=0))
            done = session.last_done
            assert done is not None
            # Decode rate over the tokens after the first: the span the model's own metrics call "decode".
            results[name].append((ttft, (done.output_tokens - 1) / decode if decode > 0 else 0.0))

        pair: list[tuple[str, Client | Local]] = [("socket", client), ("local", local)]
        for name, session in pair:  # warm-up: from here on the prompt is cached, as in a steady stream of requests
            run(name, session)
        results = {"socket": [], "local": []}
        for i in range(rounds):
            for name, session in pair if i % 2 == 0 else pair[::-1]:
                run(name, session)
        client.close()
        local.close()
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(60)
        loops.run(host.aclose())
        loops.stop()
    medians = {
        name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)) for name, rs in results.items()
    }
    # Paired per round (the two sides ran back to back): steadier than a ratio of medians when the machine's load
    # drifts during the run.
    pairs = list(zip(results["socket"], results["local"], strict=True))
    medians["paired"] = (
        statistics.median(s[0] - loc[0] for s, loc in pairs),
        statistics.median(s[1] / loc[1] for s, loc in pairs),
    )
    return medians


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page-rounds", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--skip-model", action="store_true", help="only the page receive benchmark")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-wire-") as tmp:
        folder = Path(tmp)
        mbps = bench_pages(args.page_rounds, folder)
        raw = mbps["raw"]
        print(f"page 2550x3300 RGB ({np.prod(PAGE_SHAPE) / 1e6:.1f} MB), median of {args.page_rounds} rounds:")
        print(f"  raw recv_into, reused buffer      {raw:7.0f} MB/s")
        print(f"  raw recv_into, fresh buffer       {mbps['raw_fresh']:7.0f} MB/s")
        for name, label in (("wire_receive", "wire receive path"), ("wire", "wire round trip (+host, done)")):
            print(f"  {label:33} {mbps[name]:7.0f} MB/s   {mbps[name] / raw:.2f} of raw (target >= 0.70)")
        if not args.skip_model:
            gen = bench_generation(args.rounds, args.max_tokens, folder)
            (s_ttft, s_tps), (l_ttft, l_tps) = gen["socket"], gen["local"]
            print(f"generation, SmolLM2-135M Q4_1, {args.max_tokens} tokens, median of {args.rounds} rounds:")
            print(f"  socket  TTFT {s_ttft * 1e3:7.2f} ms   decode {s_tps:6.1f} tokens/s")
            print(f"  local   TTFT {l_ttft * 1e3:7.2f} ms   decode {l_tps:6.1f} tokens/s")
            d_ttft, r_tps = gen["paired"]
            print(
                f"  tokens/s ratio {s_tps / l_tps:.3f} (target >= 0.98)   "
                f"TTFT overhead {(s_ttft - l_ttft) * 1e3:+.2f} ms (target < 2 ms)"
            )
            print(f"  paired per round: tokens/s ratio {r_tps:.3f}   TTFT overhead {d_ttft * 1e3:+.2f} ms")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

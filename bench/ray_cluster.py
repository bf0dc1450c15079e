"""What Ray costs, against one host in the same run (issue 23).

1. Serving: CPU seconds per 1,000 completion tokens and tokens/s, for the same load (CONCURRENCY clients, each
   REQUESTS greedy chat requests of MAX_TOKENS tokens with ignore_eos, distinct prompts) sent to
   a. one `modelhost serve --http` (the direct host), and
   b. Ray Serve with 2 replicas of the same model through Serve's HTTP proxy, once per `max_ongoing_requests`
      setting in ONGOING (x the replicas' batch slots), which is how serving.MAX_ONGOING_PER_SLOT was chosen.
   CPU is summed over every process of each side (the serve process; the Ray node's whole process tree: GCS,
   raylet, controller, proxy, replicas), read from /proc before and after the load, so Ray's own processes count
   (for the documents, sampled through the run: Ray Data's actors come and go, see CpuMeter).
2. Documents: pages/s and CPU seconds of converting PAGES of the corpus's Redbook from their pixels (the `ocr`
   model, --no-text-layer) with plain `convert` (in this process), and over Ray Data with 1 and 2 actors.

    .venv/bin/python bench/ray_cluster.py [--model default] [--parallel 2] [--skip-serve] [--skip-documents]

The model is the embedded SmolLM2 GGUF by default. On 2 cores the two replicas share the cores the direct host has
alone, so tokens/s compare what Ray adds at equal hardware, not what a second machine would give.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from modelhost.documents.settings import ConvertSettings
from modelhost.testing import raynodes

CONCURRENCY = 8
REQUESTS = 4
MAX_TOKENS = 48
#: max_ongoing_requests per batch slot tried for Serve.
ONGOING = (1, 2, 4)
DOCUMENT = Path(__file__).resolve().parent.parent / "tests" / "corpus" / "documents" / "pdf" / "redp5110_sampled.pdf"
PAGES = "1-4"
#: Those pages, every one read from its pixels (the text layer left aside), as pdf-spec's pages arrive.
ONLY_PIXELS = ConvertSettings(pages=PAGES, text_layer=False)
WORDS = "Amber Birch Cedar Delta Ember Fjord Garnet Harbor Indigo Juniper Kestrel Lumen Meadow Nectar Onyx Pebble"


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of `pids` (and the children they waited for), in seconds."""
    return sum(_cpu(pid) for pid in pids)


def _cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


class CpuMeter:
    """CPU seconds used by a changing set of processes (Ray Data starts and ends its actors during a run): each
    process's CPU is sampled every SAMPLE_SECONDS while it lives, and the meter adds what each gained while seen. A
    process that ends loses at most its last interval's CPU (a before/after difference lost whole actors' CPU)."""

    SAMPLE_SECONDS = 0.25

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self.pids = pids
        self.first: dict[int, float] = {pid: _cpu(pid) for pid in pids()}
        self.last = dict(self.first)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(self.SAMPLE_SECONDS):
            for pid in self.pids():
                used = _cpu(pid)
                self.first.setdefault(pid, 0.0)  # born during the run: all its CPU counts
                if used > 0:
                    self.last[pid] = used

    def stop(self) -> float:
        """Stop sampling; the CPU seconds used since the meter started."""
        self._stop.set()
        self._thread.join()
        for pid in self.pids():
            self.last[pid] = max(self.last.get(pid, 0.0), _cpu(pid))
        return sum(self.last.get(pid, 0.0) - start for pid, start in self.first.items())


async def load(base: str, model: str) -> tuple[int, float]:
    """The load; (completion tokens, wall seconds)."""
    words = WORDS.split()

    async def client(i: int, http: httpx.AsyncClient) -> int:
        tokens = 0
        for j in range(REQUESTS):
            body = {
                "model": model,
                "messages": [{"role": "user", "content": f"{words[(i * REQUESTS + j) % len(words)]}: tell a story."}],
                "max_tokens": MAX_TOKENS,
                "temperature": 0,
                "ignore_eos": True,
            }
            answer = await http.post(f"{base}/v1/chat/completions", json=body)
            answer.raise_for_status()
            tokens += int(answer.json()["usage"]["completion_tokens"])
        return tokens

    async with httpx.AsyncClient(timeout=600) as http:
        t0 = time.perf_counter()
        counts = await asyncio.gather(*(client(i, http) for i in range(CONCURRENCY)))
        return sum(counts), time.perf_counter() - t0


def measure(base: str, model: str, pids: list[int]) -> tuple[float, float]:
    """(CPU seconds per 1,000 tokens, tokens/s) of one load; `pids` are re-read after it (replicas come and go)."""
    asyncio.run(load(base, model))  # warm: prompt caches, first-request paths, Serve's routers
    before = cpu_seconds(pids)
    tokens, wall = asyncio.run(load(base, model))
    used = cpu_seconds(pids) - before
    return 1000 * used / tokens, tokens / wall


def wait_ready(base: str, seconds: float = 600) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/ready", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{base} never became ready")


def bench_serving(head: raynodes.RayNode, model: str, parallel: int) -> list[tuple[str, float, float]]:
    from ray import serve

    from modelhost import serve as serving_cli
    from modelhost.http.mounted import MountedDoor
    from modelhost.ray import serving
    from modelhost.ray.replica import ReplicaConfig

    rows: list[tuple[str, float, float]] = []
    port = raynodes.free_port(raynodes.HEAD_IP)
    modelhost = str(Path(sys.executable).with_name("modelhost"))
    direct = subprocess.Popen(
        [modelhost, "serve", "--model", f"m={model}", "--parallel", str(parallel), "--no-socket",
         "--http", f"{raynodes.HEAD_IP}:{port}", "--log-format", "none"],
    )  # fmt: skip
    try:
        base = f"http://{raynodes.HEAD_IP}:{port}"
        wait_ready(base)
        rows.append(("one host (serve --http)", *measure(base, "m", [direct.pid])))
    finally:
        direct.send_signal(signal.SIGINT)
        direct.wait(timeout=120)
    specs, _ = serving_cli.model_specs(serving_cli.ServeConfig(models=(f"m={model}",), parallel=parallel))
    config = ReplicaConfig(tuple(specs), door=MountedDoor, access_log=False)
    port = raynodes.free_port(raynodes.HEAD_IP)
    serve.start(http_options={"host": raynodes.HEAD_IP, "port": port, "location": "HeadOnly"})
    base = f"http://{raynodes.HEAD_IP}:{port}"
    try:
        for per_slot in ONGOING:
            app = serving.application(
                config, replicas=2, num_cpus=1, slots=parallel, max_ongoing_requests=per_slot * parallel
            )
            serve.run(app, name="bench", route_prefix="/", blocking=False)
            wait_ready(base)
            label = f"Ray Serve, 2 replicas, max_ongoing {per_slot}x slots"
            rows.append((label, *measure(base, "m", raynodes.process_tree(head.process.pid))))
            serve.delete("bench")
    finally:
        serve.shutdown()
    return rows


def bench_documents(head: raynodes.RayNode) -> list[tuple[str, float, float]]:
    from modelhost.documents import batch
    from modelhost.documents.readers import StartingReader
    from modelhost.host import Host
    from modelhost.inference import catalogue, registry
    from modelhost.ray import documents

    rows: list[tuple[str, float, float]] = []
    out = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    path = catalogue.resolve("ocr")

    async def plain() -> None:
        host = Host(lambda: registry.load_model(path, None), name="ocr")
        try:
            await batch.convert_files([DOCUMENT], StartingReader(host), output=out / "plain.md", settings=ONLY_PIXELS)
        finally:
            await host.aclose()

    pages = 4

    def mine() -> list[int]:
        return list(raynodes.process_tree(os.getpid()))

    meter, t0 = CpuMeter(mine), time.perf_counter()
    asyncio.run(plain())
    wall = time.perf_counter() - t0
    rows.append(("plain convert", pages / wall, meter.stop()))
    for actors in (1, 2):

        def both() -> list[int]:
            return list(raynodes.process_tree(head.process.pid)) + mine()

        meter, t0 = CpuMeter(both), time.perf_counter()
        settings = documents.ReadSettings("ocr", "ocr", convert=ONLY_PIXELS)
        documents.convert_files(head.address, [DOCUMENT], settings, actors=actors, output=out / f"ray{actors}.md")
        wall = time.perf_counter() - t0
        rows.append((f"convert --ray, {actors} actor(s)", pages / wall, meter.stop()))
        same = (out / f"ray{actors}.md").read_text() == (out / "plain.md").read_text()
        print(f"  {actors} actor(s): same document as plain convert: {same}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--skip-serve", action="store_true")
    parser.add_argument("--skip-documents", action="store_true")
    args = parser.parse_args()
    from modelhost.inference import catalogue

    model = catalogue.resolve(args.model)
    folder = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))
    env = raynodes.token_env(folder / "auth")
    os.environ.update(env)
    t0 = time.perf_counter()
    head = raynodes.RayNode.start(raynodes.HEAD_IP, folder / "h", env, num_cpus=2)
    print(f"ray head started in {time.perf_counter() - t0:.1f} s", flush=True)
    from modelhost.ray.cluster import connect

    connect(head.address)
    try:
        if not args.skip_serve:
            rows = bench_serving(head, model, args.parallel)
            direct = rows[0][1]
            print(f"\nserving {Path(model).name}, parallel {args.parallel}: {CONCURRENCY} clients x {REQUESTS} "
                  f"requests x {MAX_TOKENS} tokens")  # fmt: skip
            print(f"{'':52} {'CPU s/1k tok':>12} {'x direct':>9} {'tok/s':>7}")
            for label, per_k, rate in rows:
                print(f"{label:52} {per_k:12.2f} {per_k / direct:9.2f} {rate:7.1f}")
        if not args.skip_documents:
            rows = bench_documents(head)
            print(f"\ndocuments: {DOCUMENT.name} pages {PAGES} read by `ocr` from their pixels")
            print(f"{'':32} {'pages/s':>8} {'x plain':>8} {'CPU s':>7}")
            for label, rate, cpu in rows:
                print(f"{label:32} {rate:8.3f} {rate / rows[0][1]:8.2f} {cpu:7.1f}")
    finally:
        import ray

        ray.shutdown()
        head.stop()
        shutil.rmtree(folder, ignore_errors=True)  # the head's temp folder and the token


if __name__ == "__main__":
    main()

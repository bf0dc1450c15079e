"""Start-up: how long until each command is useful, from a fresh process (issue 38).

pdf-spec's `ipc.Dial` retries a socket for 10 s, so a host started beside it must bind within that on a busy
machine; a person waits on `--version` and a one-page `convert`. Six measures, each a fresh interpreter per round
(medians over `--rounds`):

- `modelhost --version`: wall seconds to exit, and its CPU seconds;
- `serve --model ocr --socket S`: wall seconds from the process start to the socket accepting a connection (on the
  inferd wire a bound socket is the readiness signal), and the CPU seconds the server had used by then;
- `serve --socket S` (the default model, SmolLM2's GGUF): the same;
- `serve --model default --model ocr`, each on a socket of its own: wall seconds to the second model's (ocr's)
  socket accepting, and to both accepting (models loaded one after the other, ocr's socket waited for the GGUF's
  whole load; side by side, each binds when its own load ends);
- `convert one.pdf -o one.md` on a one-page born-digital PDF (the text-layer path, no model): wall and CPU seconds.

`--load N` runs `bench/burn.py` (N spinning processes) beside it, as a shared CI machine is; `--baseline SRC` also
measures another checkout's `src` folder (PYTHONPATH=SRC, e.g. one unpacked with `git archive`), alternating with
this one in each round so a neighbour's burst hits both alike.

    .venv/bin/python bench/startup.py [--rounds 5] [--load 0] [--baseline /tmp/before/src] [--only two]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: A serve that has not bound its socket in this long is reported as failed, not waited for: ten times the slowest
#: start seen beside a load-8 burner.
BIND_TIMEOUT = 180.0

#: How often the socket is tried while a serve starts: fine enough that the poll adds little to a 1 s figure.
POLL_SECONDS = 0.01


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _env(src: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src  # before site-packages, so it wins over the editable install's path
    return env


def command(src: str | None, *args: str) -> tuple[float, float]:
    """Run `modelhost ARGS` to its end: (wall seconds, CPU seconds)."""
    cpu = _cpu_of_children()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "modelhost.cli", *args], env=_env(src), capture_output=True, text=True, timeout=600
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"modelhost {' '.join(args)} failed: {done.stderr[-2000:]}")
    return wall, _cpu_of_children() - cpu


def _cpu_of(pid: int) -> float:
    """CPU seconds process `pid` has used so far, all its threads (Linux's /proc/PID/stat: utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
            return True
        except OSError:
            return False


def bound(src: str | None, folder: Path, *args: str, also: tuple[str, ...] = ()) -> tuple[float, float]:
    """Start `modelhost serve ARGS --socket S` and time it to S accepting a connection: (wall seconds, CPU seconds
    the server had used by then, which a busy machine's waits do not inflate). `also`: models given sockets of their
    own (`--model-socket`), each waited for as well."""
    path = folder / f"s{time.monotonic_ns()}.sock"
    own = {name: folder / f"{name}-{time.monotonic_ns()}.sock" for name in also}
    extra = [arg for name, where in own.items() for arg in ("--model-socket", f"{name}={where}")]
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "modelhost.cli", "serve", *args, *extra, "--socket", str(path)],
        env=_env(src), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    waiting = [path, *own.values()]
    try:
        while True:
            waiting = [p for p in waiting if not _accepts(p)]
            if not waiting:
                return time.perf_counter() - start, _cpu_of(proc.pid)
            if proc.poll() is not None:
                raise RuntimeError(f"serve {' '.join(args)} exited: {proc.stderr.read() if proc.stderr else ''}")
            if time.perf_counter() - start > BIND_TIMEOUT:
                raise RuntimeError(f"serve {' '.join(args)} did not bind in {BIND_TIMEOUT:g} s")
            time.sleep(POLL_SECONDS)
    finally:
        proc.terminate()
        proc.wait(60)


def measures(folder: Path) -> dict[str, Callable[[str | None], tuple[float, float]]]:
    pdf = folder / "one.pdf"
    from modelhost.testing.hostile_pdfs import text_pdf

    pdf.write_bytes(text_pdf("A one-page born-digital document, read from its text layer."))
    return {
        "modelhost --version": lambda src: command(src, "--version"),
        "serve --model ocr: socket bound": lambda src: bound(src, folder, "--model", "ocr"),
        "serve (default model): socket bound": lambda src: bound(src, folder),
        "serve two models (default, ocr): ocr's socket bound": lambda src: bound(
            src, folder, "--model", "default", "--model", "ocr", "--socket-model", "ocr"
        ),
        "serve two models (default, ocr): both sockets bound": lambda src: bound(
            src, folder, "--model", "default", "--model", "ocr", "--socket-model", "ocr", also=("default",)
        ),
        "convert one text page": lambda src: command(src, "convert", str(pdf), "-o", str(folder / "one.md")),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per measure and side")
    parser.add_argument("--load", type=int, default=0, help="burner processes beside it (0: none)")
    parser.add_argument("--baseline", help="another checkout's src folder, measured alternately")
    parser.add_argument("--only", help="only the measures whose name contains this (e.g. `two` or `ocr`)")
    args = parser.parse_args(argv)
    sides: list[tuple[str, str | None]] = [("this", None)]
    if args.baseline:
        sides.append(("baseline", args.baseline))
    burner = None
    if args.load:
        burner = subprocess.Popen(
            [sys.executable, str(HERE / "burn.py"), "--load", str(args.load), "--seconds", "3600"]
        )
        time.sleep(2)  # the burners reach their cores before the first measure
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="startup-") as tmp:
            for name, measure in measures(Path(tmp)).items():
                if args.only and args.only not in name:
                    continue
                for _ in range(args.rounds):
                    for side, src in sides:
                        results.setdefault((name, side), []).append(measure(src))
    finally:
        if burner is not None:
            burner.terminate()
            burner.wait(30)
    load = os.getloadavg()[0]
    print(f"start-up, median of {args.rounds} fresh processes, --load {args.load} (load average now {load:.1f})")
    print("| measure | side | wall s | CPU s |")
    print("|---|---|---|---|")
    for (name, side), runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"| {name} | {side} | {wall:.2f} | {cpu:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How llama.cpp's threads wait for work: modelhost's default vs llama-server's, quiet and beside a burner.

llama.cpp (as llama-cpp-python builds it) computes on an OpenMP thread group, and libgomp decides how a thread that
reaches a barrier waits for the others: it spins `GOMP_SPINCOUNT` times (300000, about 3 ms, when nothing is set:
what llama-server runs with), then sleeps on a futex. Spinning is fast on idle cores and ruinous on shared ones,
where the spinner burns the time slice the thread it waits for needs; sleeping at once (OMP_WAIT_POLICY=PASSIVE) is
the reverse. This runs each side as a fresh process (libgomp reads its settings once, when it is loaded), loads the
embedded default model (SmolLM2-135M-Instruct Q4_1) with `parallel` = the most streams, and times greedy batches of
1, 4 and 16 prompts (`--tokens` each, min_tokens = max_tokens) through `batch_generate`: aggregate tokens/s over the
batch's wall time, prefill included. `bench/burn.py` keeps `--load` processes spinning meanwhile (0: none).

A side is `default` (modelhost's own choice: no environment, no options), `poll=N` (the load option), or
environment assignments (`GOMP_SPINCOUNT=300000` is libgomp's default spelled out, so it holds even where the
caller's environment says otherwise); `@T` after any side sets its threads (default: the cores this process may use).
The first side is the peer every ratio is taken against. Rounds rotate which side goes first, so a neighbour's burst
hits all alike; a figure is the median over rounds, a ratio the median of the per-round ratios. The load average at
each load's start is printed beside it: on a shared machine it says how quiet "quiet" was.

    .venv/bin/python bench/wait_policy.py [--loads 0 8] [--rounds 3] [--tokens 32] [--streams 1,4,16]
        [--sides GOMP_SPINCOUNT=300000 default OMP_WAIT_POLICY=PASSIVE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import burn

#: One side's work: load (not timed), warm with two tokens, then one timed greedy batch per stream count.
CHILD = """
import json, sys, time
import modelhost
streams, tokens, options = [int(n) for n in sys.argv[1].split(",")], int(sys.argv[2]), json.loads(sys.argv[3])
with modelhost.load_model("default", parallel=max(streams), context_length=CONTEXT, **options) as model:
    list(model.generate("Hi", max_tokens=2, temperature=0))
    rates = {}
    for n in streams:
        prompts = [f"Story {i}: the lighthouse keeper and the sea." for i in range(n)]
        start = time.perf_counter()
        done = model.batch_generate(prompts, max_tokens=tokens, min_tokens=tokens, temperature=0)
        rates[n] = sum(len(r.tokens) for r in done) / (time.perf_counter() - start)
    from modelhost.inference import openmp
    print(json.dumps({"rates": rates, "poll": openmp.in_force()}))
"""

#: Tokens each slot holds: a short prompt plus `--tokens` fits with room; a small context keeps 16 slots' KV cache
#: (and its clearing at load) out of what is measured.
CONTEXT = 512

#: A side that has not answered in this long counts as 0 tokens/s rather than being waited for: llama-server's
#: spinning wait beside 8 burners did not finish 16 streams of 32 tokens in 9 minutes (issue 36).
SIDE_TIMEOUT = 900

#: The variables a side's environment starts without, so that only what the side names is in force.
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def side(spec: str, streams: list[int], tokens: int, timeout: float) -> dict[int, float]:
    """Aggregate tokens/s per stream count of one fresh process run as `spec` says; 0 for every count when it has
    not finished in `timeout` seconds (a spinning wait beside burners can take many minutes: reported, not waited)."""
    spec, _, threads = spec.partition("@")
    env = {k: v for k, v in os.environ.items() if k not in WAIT_VARIABLES}
    options: dict[str, int] = {"threads": int(threads)} if threads else {}
    for part in spec.split(","):
        name, _, value = part.partition("=")
        if name == "poll":
            options["poll"] = int(value)
        elif name != "default":
            env[name] = value
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD.replace("CONTEXT", str(CONTEXT)), ",".join(map(str, streams)), str(tokens),
             json.dumps(options)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        print(f"  side {spec!r} did not finish in {timeout:.0f} s: counted as 0 tokens/s", flush=True)
        return dict.fromkeys(streams, 0.0)
    if out.returncode != 0:
        raise SystemExit(f"side {spec!r} failed:\n{out.stderr[-2000:]}")
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    if answer["poll"] is not None:  # the poll modelhost put in force (the measured one, for `default`)
        print(f"  side {spec!r}: poll {answer['poll']}", flush=True)
    return {int(n): float(v) for n, v in answer["rates"].items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loads", type=int, nargs="+", default=[0, 8], help="burner processes per run (0: none)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--streams", default="1,4,16")
    parser.add_argument("--sides", nargs="+", default=["GOMP_SPINCOUNT=300000", "default", "OMP_WAIT_POLICY=PASSIVE"])
    parser.add_argument("--side-timeout", type=float, default=SIDE_TIMEOUT, help="seconds before a side counts as 0")
    args = parser.parse_args(argv)
    streams = [int(n) for n in args.streams.split(",")]
    peer = args.sides[0]
    for load in args.loads:
        rounds: list[dict[str, dict[int, float]]] = []
        with burn.burning(load, SIDE_TIMEOUT * 4):
            started = os.getloadavg()[0]
            for i in range(args.rounds):
                order = args.sides[i % len(args.sides) :] + args.sides[: i % len(args.sides)]
                rounds.append({spec: side(spec, streams, args.tokens, args.side_timeout) for spec in order})
                print(f"  load {load} round {i + 1}: " + "; ".join(
                    f"{s} " + "/".join(f"{rounds[-1][s][n]:.0f}" for n in streams) for s in args.sides
                ), flush=True)  # fmt: skip
        print(f"burner load {load} (load average {started:.1f} at start, {os.getloadavg()[0]:.1f} at end); "
              f"tokens/s at {', '.join(map(str, streams))} streams; x {peer}; x the round's best side:")  # fmt: skip
        for spec in args.sides:
            rates = "  ".join(f"{statistics.median(r[spec][n] for r in rounds):7.1f}" for n in streams)
            ratios = "  ".join(_ratio([r[spec][n] for r in rounds], [r[peer][n] for r in rounds]) for n in streams)
            tops = {n: [max(r[s][n] for s in args.sides) for r in rounds] for n in streams}
            best = "  ".join(_ratio([r[spec][n] for r in rounds], tops[n]) for n in streams)
            print(f"  {spec:<28} {rates}   {ratios}   {best}", flush=True)
    return 0


def _ratio(mine: list[float], theirs: list[float]) -> str:
    """The median of the per-round ratios; "inf" where the other side did not finish (0 tokens/s) in some round."""
    if any(t <= 0 for t in theirs):
        return "  inf"
    return f"{statistics.median(m / t for m, t in zip(mine, theirs, strict=True)):5.2f}x"


if __name__ == "__main__":
    sys.exit(main())

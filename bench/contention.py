"""Decoding on shared cores: SmolLM2's decode tokens/s with OpenMP's spinning waits vs passive ones, under a burner.

The two ends of the threads' wait (inference/openmp.py; bench/wait_policy.py measures modelhost's default between
them): each side is a fresh process (libgomp reads the policy once, at load) that loads the embedded default model
through modelhost, decodes `--max-tokens` greedy tokens and prints its rate; `bench/burn.py` keeps `--load`
processes spinning meanwhile (0: a quiet machine). Rounds alternate which policy goes first, so a neighbour's burst
hits both alike; the report is medians and the PASSIVE/ACTIVE ratio, per load.

    .venv/bin/python bench/contention.py [--loads 0 8] [--rounds 3] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import burn

#: One side's work: load the model (not timed), warm it with one token, then time a greedy decode.
CHILD = """
import json, sys, time
import modelhost
from modelhost import Message
with modelhost.load_model("default") as model:
    list(model.generate("Hi", max_tokens=1, temperature=0))
    start = time.perf_counter()
    tokens = sum(1 for _ in model.generate("The sea is", max_tokens=int(sys.argv[1]), temperature=0))
    print(json.dumps({"tokens": tokens, "seconds": time.perf_counter() - start}))
"""

#: A side that has not answered in this long is reported as hung rather than waited for forever.
SIDE_TIMEOUT = 900


def side(policy: str, max_tokens: int) -> float:
    """Decode tokens/s of one fresh process under `policy`."""
    env = {**os.environ, "OMP_WAIT_POLICY": policy}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(max_tokens)],
        env=env,
        capture_output=True,
        text=True,
        timeout=SIDE_TIMEOUT,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return float(result["tokens"]) / max(float(result["seconds"]), 1e-9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loads", type=int, nargs="+", default=[0, 8], help="burner processes per run (0: none)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args(argv)
    print(f"{'load':>5} {'ACTIVE tok/s':>13} {'PASSIVE tok/s':>14} {'PASSIVE/ACTIVE':>15}  (load average at start)")
    for load in args.loads:
        rates: dict[str, list[float]] = {"ACTIVE": [], "PASSIVE": []}
        with burn.burning(load, SIDE_TIMEOUT * 4):
            started = os.getloadavg()[0]
            for i in range(args.rounds):
                order = ("ACTIVE", "PASSIVE") if i % 2 == 0 else ("PASSIVE", "ACTIVE")
                for policy in order:
                    rates[policy].append(side(policy, args.max_tokens))
        active, passive = (statistics.median(rates[p]) for p in ("ACTIVE", "PASSIVE"))
        print(f"{load:>5} {active:>13.1f} {passive:>14.1f} {passive / active:>14.2f}x  ({started:.1f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What `modelhost pull` costs over huggingface_hub's own download: the listing, the checks and the hash.

A loopback hub (modelhost.testing.hubserver) serves one GGUF-named file of random bytes, redirected to its "CDN"
as the hub does. "pull" is `modelhost.hub.pull` (list, choose, size checks, hf_hub_download, sha256 of the blob);
"hf" is the floor: `hf_hub_download` of the same file at the same commit into its own empty cache, nothing else.
Each round starts from empty caches; rounds alternate which side goes first, so a burst of load from a neighbour
hits both alike; reports are medians. A third figure is a pull whose connection is cut at half the file: the
resume's cost (huggingface_hub sleeps 1 s before it resumes, which dominates small files).

    .venv/bin/python bench/pull.py [--mb 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from modelhost import hub
from modelhost.testing import hubserver

REPO = "bench/random-gguf"
FILE = "random-Q8_0.gguf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=200, help="file size in MB")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    data = os.urandom(args.mb * 10**6)
    work = Path(tempfile.mkdtemp(prefix="modelhost-bench-pull-"))
    from huggingface_hub import hf_hub_download

    timings: dict[str, list[float]] = {"pull": [], "hf": [], "pull, cut at half": []}
    try:
        with hubserver.HubServer({REPO: {FILE: data}}) as server:
            commit = server.commit(REPO)

            def pull_once(cut: bool = False) -> float:
                cache = work / "pull"
                shutil.rmtree(cache, ignore_errors=True)
                os.environ["HF_HUB_CACHE"] = str(cache)
                if cut:
                    server.drop_after[(REPO, FILE)] = len(data) // 2
                began = time.perf_counter()
                pulled = hub.pull(REPO, endpoint=server.url)
                took = time.perf_counter() - began
                assert Path(pulled.path).stat().st_size == len(data)
                return took

            def hf_once() -> float:
                cache = work / "hf"
                shutil.rmtree(cache, ignore_errors=True)
                began = time.perf_counter()
                hf_hub_download(REPO, FILE, revision=commit, cache_dir=cache, endpoint=server.url)
                return time.perf_counter() - began

            for i in range(args.rounds):
                order = [("pull", pull_once), ("hf", hf_once)]
                for name, run in order if i % 2 == 0 else order[::-1]:
                    timings[name].append(run())
                timings["pull, cut at half"].append(pull_once(cut=True))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mb = len(data) / 1e6
    floor = statistics.median(timings["hf"])
    print(f"{mb:.0f} MB file, {args.rounds} rounds, medians:")
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"  {name:18s} {median:6.2f} s  {mb / median:7.1f} MB/s  ({median / floor:.2f} x hf_hub_download)")


if __name__ == "__main__":
    main()

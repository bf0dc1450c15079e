"""llama.cpp loads leave the process's output alone: other threads' lines reach stderr and stdout during and after
loads that run at once (a multi-model serve loads its models side by side).

llama-cpp-python's quiet load dup2()s fds 1 and 2 onto /dev/null and back around each load: every other thread's
output was lost meanwhile, and two loads at once restored each other's copies, so a three-model serve's stderr stayed
on /dev/null for good. The check runs in a child process whose stderr is a pipe the test reads, as serve's is."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

#: Loads at once and rounds of them: three models side by side, twice, so that loads overlap in every order.
LOADERS, ROUNDS = 3, 2

#: A bound on the child's run: three tiny loads take well under a second quiet; this is for a loaded machine.
CHILD_SECONDS = 300

CHILD = textwrap.dedent(
    """
    import os, sys, threading, time
    from modelhost.backends.llama_cpp import LlamaCppBackend

    path, loaders, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    stop = threading.Event()
    written = []

    def writer():  # another thread's output while the loads run: the raw fd and Python's sys.stderr and stdout
        i = 0
        while not stop.is_set():
            os.write(2, f"fd-{i}\\n".encode())
            print(f"py-{i}", file=sys.stderr, flush=True)
            print(f"out-{i}", flush=True)
            i += 1
            time.sleep(0.001)
        written.append(i)

    def load():
        LlamaCppBackend().load_model(path, threads=1).close()

    chatter = threading.Thread(target=writer)
    chatter.start()
    for _ in range(rounds):
        loads = [threading.Thread(target=load) for _ in range(loaders)]
        for t in loads:
            t.start()
        for t in loads:
            t.join()
    stop.set()
    chatter.join()
    print(f"after the loads, {written[0]} lines each", file=sys.stderr, flush=True)
    print(f"written {written[0]}", flush=True)
    """
)


def test_loads_side_by_side_keep_every_threads_output(tiny_llama_gguf: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tiny_llama_gguf), str(LOADERS), str(ROUNDS)],
        capture_output=True,
        text=True,
        timeout=CHILD_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    count = int(done.stdout.rsplit("written ", 1)[1])
    assert count > 0
    assert f"after the loads, {count} lines each" in done.stderr, "stderr ended on /dev/null after the loads"
    err, out = set(done.stderr.splitlines()), set(done.stdout.splitlines())
    lost = [i for i in range(count) if f"fd-{i}" not in err or f"py-{i}" not in err or f"out-{i}" not in out]
    assert not lost, f"{len(lost)} of {count} lines written during the loads never arrived (first: {lost[:5]})"
    # Quiet still: llama-cpp-python's verbose prints (the model's metadata) go to the debug log, not the terminal.
    assert "Model metadata" not in done.stderr and "llama_model_load" not in done.stderr

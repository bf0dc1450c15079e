"""Names and helpers the pull tests share (fixtures are in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys

GGUF_REPO = "tiny/llama-gguf"
FOLDER_REPO = "tiny/llama"
BIG_REPO = "tiny/big-gguf"
#: huggingface_hub reads a response body in 10 MiB chunks and can resume only from a chunk boundary, so the model
#: whose download is cut off must be larger than one chunk for a resume (rather than a restart) to be possible.
BIG_HIDDEN = 256


def run_cli(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`modelhost ARGS` in a subprocess with `env` added, as a user types it."""
    full = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"} | env
    return subprocess.run(
        [sys.executable, "-m", "modelhost.cli", *args], env=full, capture_output=True, text=True, timeout=timeout
    )

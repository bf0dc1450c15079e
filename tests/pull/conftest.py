"""Fixtures for the pull tests: tiny models served by a loopback hub (modelhost.testing.hubserver), an empty hub
cache per test, and `modelhost` run as a user runs it (a subprocess with HF_ENDPOINT and HF_HUB_CACHE set)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pull_support import BIG_HIDDEN, BIG_REPO, FOLDER_REPO, GGUF_REPO

from modelhost.testing import hubserver, tinymodels


@pytest.fixture(scope="session")
def tiny_llama_f16(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama as an f16 GGUF: a second quantisation in the same repository."""
    out = tmp_path_factory.mktemp("tiny_llama_f16") / "tiny-llama-F16.gguf"
    return tinymodels.write_llama_gguf(tiny_llama_dir, out, dtype="f16")


@pytest.fixture(scope="session")
def big_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~20 MB random Llama GGUF (two of huggingface_hub's download chunks)."""
    folder = tinymodels.build_tiny_llama(
        tmp_path_factory.mktemp("big_llama"), seed=1, hidden_size=BIG_HIDDEN, intermediate_size=768, num_hidden_layers=6
    )
    return tinymodels.write_llama_gguf(folder, tmp_path_factory.mktemp("big_gguf") / "big-F32.gguf")


@pytest.fixture(scope="session")
def hub_repos(
    tiny_llama_dir: Path, tiny_llama_gguf: Path, tiny_llama_f16: Path, big_gguf: Path
) -> dict[str, dict[str, bytes]]:
    """What the loopback hub serves: a GGUF repository with two quantisations, a safetensors folder, a big GGUF,
    and a repository of pickled weights only."""
    return {
        GGUF_REPO: {
            "tiny-llama-F32.gguf": tiny_llama_gguf.read_bytes(),
            "tiny-llama-F16.gguf": tiny_llama_f16.read_bytes(),
            "README.md": b"# tiny llama\n",
        },
        FOLDER_REPO: {**hubserver.repo_files(tiny_llama_dir), "README.md": b"# tiny llama\n"},
        BIG_REPO: {"big-F32.gguf": big_gguf.read_bytes()},
        "tiny/pickled": {"config.json": b"{}", "pytorch_model.bin": b"\x80\x04pickle"},
    }


@pytest.fixture
def hub_server(hub_repos: dict[str, dict[str, bytes]]) -> Iterator[hubserver.HubServer]:
    """A fresh loopback hub (its own fault settings and request log) for one test."""
    with hubserver.HubServer(hub_repos) as server:
        yield server


@pytest.fixture
def hub_env(hub_server: hubserver.HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """HF_ENDPOINT at the loopback hub and an empty HF_HUB_CACHE, in this process and for subprocesses."""
    env = {"HF_ENDPOINT": hub_server.url, "HF_HUB_CACHE": str(tmp_path / "hub-cache"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return env

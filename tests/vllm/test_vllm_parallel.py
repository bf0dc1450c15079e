"""Tensor parallelism through the vllm backend on vLLM's CPU build: `tensor_parallel=2` over vLLM's multiprocessing
executor (two worker processes, one core each) gives the greedy tokens one worker gives (`make test-vllm`).

Its EngineCore runs in a child process as every load's does (loading.py), here over two workers of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm_support import build_tiny_llama, require_vllm

require_vllm()

from modelhost.inference import registry  # noqa: E402

PROMPTS = ("The quick brown fox", "Hello", "1 2 3")


def _greedy(folder: Path, **load: object) -> list[list[int]]:
    model = registry.load_model(str(folder), backend="vllm", parallel=4, **load)
    try:
        results = model.batch_generate(PROMPTS, max_tokens=8, temperature=0)
        assert all(r.error is None for r in results), [r.error for r in results]
        return [[t.id for t in r.tokens] for r in results]
    finally:
        model.close()


def test_two_tensor_parallel_workers_give_the_greedy_tokens_of_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = build_tiny_llama(tmp_path / "tiny")  # 4 query and 2 KV heads: both split in two
    alone = _greedy(folder)
    # One core for each worker: vLLM's CPU workers bind their OpenMP threads to the cores this lists.
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0|1")
    split = _greedy(folder, tensor_parallel=2, distributed_executor="mp")
    assert split == alone and all(alone), f"tensor parallel 2 gave {split}, one worker {alone}"

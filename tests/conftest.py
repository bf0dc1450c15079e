"""Session fixtures: tiny random models built once per test session, offline (see modelhost.testing.tinymodels)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from modelhost.inference import openmp
from modelhost.testing import tinymodels

# The tiny models are built with torch, whose import loads OpenMP before any modelhost load could set how its threads
# wait: put modelhost's default in force first, so the suite's processes wait as a user's do (issue 36).
openmp.configure(None)

#: Hypothesis profiles. Fuzz tests (marked `fuzz`) take their example count from the profile, never from their own
#: decorator, so the suite runs each briefly ("ci", the default: bounded so a 2-core CI stays in budget) and
#: `make fuzz` runs them long (HYPOTHESIS_PROFILE=fuzz). No deadline: a busy machine makes any per-example time
#: limit flaky, and a hang is caught by pytest-timeout instead.
settings.register_profile(
    "ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=False
)
settings.register_profile(
    "fuzz", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: bench/'s document measures (docmetrics, doccorpus, doctools) are tested and reused by the corpus acceptance test.
#: Appended, not prepended, so a bench script's module name never shadows an installed package.
sys.path.append(str(Path(__file__).resolve().parent.parent / "bench"))


#: The suite's longest files, longest first, dispatched before all others. `make test` runs xdist's `--dist loadfile`,
#: which hands whole files to workers in collection order: tests/test_cli.py (11 of the suite's 80 worker-minutes)
#: was collected 97th of 129 and kept one worker busy for minutes after the others had finished (the suite took 32
#: minutes where its three workers' share was 26.5). Started first, the long files run while the short ones fill in
#: around them. Measured from build/test-logs/suite.xml of a fresh clone's .ci/run beside bench/burn.py --load 8. A
#: file not named here keeps its place after these, so the list needs upkeep only to stay fast, never to be correct.
LONGEST_FILES = (
    "tests/test_cli.py",
    "tests/documents/test_hostile_documents.py",
    "tests/docling/test_docling_client.py",
    "tests/hostile/test_schemas_e2e.py",
    "tests/adapters/test_serve_adapters.py",
    "tests/http/test_structured_output_e2e.py",
    "tests/docengine/test_pixels.py",
    "tests/pull/test_pull.py",
    "tests/wire/test_e2e.py",
    "tests/docling/test_docling_durability.py",
    "tests/backends/test_smollm2.py",
    "tests/hostile/test_stalled_reader.py",
    "tests/docling/test_docling_chunks.py",
    "tests/hostile/test_schema_fuzz.py",
    "tests/docengine/test_sandbox.py",
    "tests/documents/test_doors.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put LONGEST_FILES' tests first, in that order; every other test keeps its order (the sort is stable)."""
    rank = {path: place for place, path in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture(scope="session", autouse=True)
def _own_state_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Folders of the session's own where the product reads or writes the machine's state, for this process and the
    `serve` processes it starts:
    - an empty Hugging Face hub cache: `/api/tags` and `modelhost list` list the hub cache, so models in this
      machine's ~/.cache/huggingface must not change what a test sees (nor may a test write there);
    - a runtime folder, so a `serve` without `--socket` binds the default inferd address inside it: two suites on
      one machine (two checkouts, CI beside a developer) both bound ~/.inferd/run/inferd.sock and one failed with
      "another model host is already serving", nor may a test take a real host's socket."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_HUB_CACHE", str(tmp_path_factory.mktemp("hf-hub-cache")))
        env.setenv("XDG_RUNTIME_DIR", str(tmp_path_factory.mktemp("xdg")))
        yield


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs, unmounted afterwards; skipped where this process may not mount one."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder of a tiny random LlamaForCausalLM (safetensors, ChatML tokenizer, generation_config.json)."""
    return tinymodels.build_tiny_llama(tmp_path_factory.mktemp("tiny_llama"), seed=0)


@pytest.fixture(scope="session")
def tiny_llama_gguf(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same weights and tokenizer as `tiny_llama_dir`, as an fp32 GGUF file for llama.cpp."""
    return tinymodels.write_llama_gguf(tiny_llama_dir, tmp_path_factory.mktemp("tiny_llama_gguf") / "tiny-llama.gguf")


@pytest.fixture(scope="session")
def tiny_idefics3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder of a tiny random Idefics3ForConditionalGeneration with its (PIL-based) Idefics3Processor."""
    return tinymodels.build_tiny_idefics3(tmp_path_factory.mktemp("tiny_idefics3"), seed=0)


@pytest.fixture(scope="session")
def tiny_thinking_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder of a tiny random Llama whose chat template has a <think>...</think> channel (enable_thinking)."""
    return tinymodels.build_tiny_thinking_llama(tmp_path_factory.mktemp("tiny_thinking"), seed=0)

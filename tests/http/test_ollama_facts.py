"""What Ollama's listings say of a served model's file, through the official `ollama` client against a real server
on loopback over the embedded SmolLM2 GGUF: /api/tags' size is the bytes on disk and its digest the file's sha256,
/api/ps' size the memory estimate the budget counts, and both say the format and the quantisation."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import ollama
import pytest
from http_support import LoopThread, embedded_gguf_or_skip, serving

import modelhost.inference
from modelhost.host.models import Models, ModelSpec
from modelhost.http import HttpServer
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

pytestmark = pytest.mark.slow

ESTIMATE = 123_456_789  # what the memory budget counts (a backend's estimate: weights and KV cache)


@pytest.fixture(scope="module")
def gguf() -> Path:
    return embedded_gguf_or_skip()


@pytest.fixture(scope="module")
def server(loop_thread: LoopThread, gguf: Path) -> Iterator[HttpServer]:
    spec = ModelSpec("smol", lambda: modelhost.inference.load_model(str(gguf)), path=str(gguf), size=ESTIMATE)
    with serving(loop_thread, Models([spec])) as served:  # type: ignore[arg-type]
        yield served


def test_tags_and_ps_tell_the_files_truth(server: HttpServer, gguf: Path) -> None:
    client = ollama.Client(host=server.url, timeout=STATE_WAIT_SECONDS)
    sha256 = hashlib.sha256(gguf.read_bytes()).hexdigest()
    # The first listing starts the hash; a later one carries it.
    wait_until(lambda: client.list().models[0].digest == sha256)
    (tag,) = client.list().models
    assert tag.size == gguf.stat().st_size != ESTIMATE
    assert tag.details is not None and tag.details.format == "gguf" and tag.details.family == "llama"
    assert tag.details.quantization_level == "Q4_1"  # SmolLM2-135M-Instruct.Q4_1.gguf
    (running,) = client.ps().models
    assert running.size == ESTIMATE and running.digest == sha256
    assert running.details is not None and running.details.quantization_level == "Q4_1"
    shown = client.show("smol")
    assert shown.details is not None and shown.details.format == "gguf"
    assert shown.modelinfo is not None and shown.modelinfo["llama.context_length"] == 8192  # trained
    assert running.context_length is not None and running.context_length <= 8192  # what it runs with

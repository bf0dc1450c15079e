"""Ollama's /api/pull, /api/tags and /api/delete as its users meet them: the official `ollama` client against a real
`modelhost serve --http` process whose HF_ENDPOINT is a loopback hub (modelhost.testing.hubserver), so
huggingface_hub's real download code runs inside the server."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pull_support import GGUF_REPO

from modelhost import hub
from modelhost.errors import ModelNotFoundError
from modelhost.inference import catalogue
from modelhost.testing import hubserver
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

ollama = pytest.importorskip("ollama")
pytest.importorskip("llama_cpp")

SERVED = f"{GGUF_REPO}:F32"
PULLED = f"{GGUF_REPO}:F16"


@pytest.fixture(scope="module")
def ollama_hub(hub_repos: dict[str, dict[str, bytes]]) -> Iterator[hubserver.HubServer]:
    with hubserver.HubServer(hub_repos) as server:
        yield server


@pytest.fixture(scope="module")
def served(
    ollama_hub: hubserver.HubServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, dict[str, str]]]:
    """`modelhost serve --model tiny/llama-gguf:F32 --http` (the model pulled first), its URL and environment."""
    env = {
        "HF_ENDPOINT": ollama_hub.url,
        "HF_HUB_CACHE": str(tmp_path_factory.mktemp("ollama-hub-cache")),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # this process reads the same cache (catalogue.resolve, hub.cached_models)
    hub.pull(SERVED)
    proc = subprocess.Popen(
        [sys.executable, "-m", "modelhost.cli", "serve", "--model", SERVED, "--no-socket", "--http", "127.0.0.1:0"],
        env={k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    url = ""
    seen = []
    while True:  # bounded by the process: it prints "ready" or exits (readline then returns "")
        line = proc.stderr.readline()
        seen.append(line)
        if not line:
            pytest.fail("serve exited before it was ready:\n" + "".join(seen))
        if "http on " in line:
            url = line.split("http on ", 1)[1].split()[0]
        if "ready: serving" in line:
            break
    try:
        yield url, env
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=STATE_WAIT_SECONDS)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _tags(client: object) -> dict[str, object]:
    return {m.model: m for m in client.list().models}  # type: ignore[attr-defined]


def test_pull_streams_progress_then_tags_lists_it_and_delete_removes_it(
    served: tuple[str, dict[str, str]], tiny_llama_f16: Path
) -> None:
    url, _ = served
    client = ollama.Client(host=url)
    parts = list(client.pull(f"hf.co/{PULLED}", stream=True))  # Ollama's spelling of a hub model
    statuses = [p.status for p in parts]
    assert statuses[0] == "pulling manifest" and statuses[-1] == "success", statuses
    assert "verifying sha256 digest" in statuses
    progress = [p for p in parts if p.total]
    data = tiny_llama_f16.read_bytes()
    assert progress and progress[-1].completed == progress[-1].total == len(data)
    assert {p.digest for p in progress} == {f"sha256:{hashlib.sha256(data).hexdigest()}"}
    assert Path(catalogue.resolve(PULLED)).read_bytes() == data

    tags = _tags(client)
    assert SERVED in tags and PULLED in tags, list(tags)
    pulled = tags[PULLED]
    assert pulled.size == len(data) and pulled.digest == hashlib.sha256(data).hexdigest()  # type: ignore[attr-defined]
    assert pulled.details.format == "gguf" and pulled.details.quantization_level == "F16"  # type: ignore[attr-defined]

    answer = client.chat(model=SERVED, messages=[{"role": "user", "content": "hi"}], options={"num_predict": 4})
    assert answer.done and answer.model == SERVED, "a hub model given to serve is served under its hub name"

    # `ollama pull` then `ollama run`: the pulled model is served now, loaded at its first request, under its hub
    # name and the name the client pulled it by.
    for asked in (PULLED, f"hf.co/{PULLED}"):
        answer = client.chat(model=asked, messages=[{"role": "user", "content": "hi"}], options={"num_predict": 4})
        assert answer.done and answer.model == PULLED
    assert PULLED in [m.model for m in client.ps().models]
    with pytest.raises(ollama.ResponseError) as loaded:
        client.delete(PULLED)
    assert loaded.value.status_code == 400 and "unload it first" in loaded.value.error
    client.generate(model=PULLED, keep_alive=0)  # Ollama's "unload now"
    wait_until(lambda: PULLED not in [m.model for m in client.ps().models], what="the pulled model to unload")

    assert client.delete(PULLED).status == "success"
    assert PULLED not in _tags(client)
    with pytest.raises(ModelNotFoundError):
        catalogue.resolve(PULLED)
    with pytest.raises(ollama.ResponseError) as refused:
        client.delete(SERVED)
    assert refused.value.status_code == 400 and "served by this process" in refused.value.error
    with pytest.raises(ollama.ResponseError) as missing:
        client.delete(PULLED)
    assert missing.value.status_code == 404


def test_pull_refusals_come_before_the_stream(served: tuple[str, dict[str, str]]) -> None:
    client = ollama.Client(host=served[0])
    with pytest.raises(ollama.ResponseError) as ambiguous:
        next(iter(client.pull(GGUF_REPO, stream=True)))
    assert ambiguous.value.status_code == 400 and f"{GGUF_REPO}:F16, {GGUF_REPO}:F32" in ambiguous.value.error
    with pytest.raises(ollama.ResponseError) as bad:
        client.pull("../../etc/passwd")
    assert bad.value.status_code == 400 and "not a hub model name" in bad.value.error
    with pytest.raises(ollama.ResponseError) as unknown:
        client.pull("tiny/missing")
    assert unknown.value.status_code == 404


def test_a_corrupt_pull_ends_the_stream_with_an_error_and_keeps_nothing(
    served: tuple[str, dict[str, str]], ollama_hub: hubserver.HubServer
) -> None:
    client = ollama.Client(host=served[0])
    ollama_hub.corrupt.add((GGUF_REPO, "tiny-llama-F16.gguf"))
    try:
        with pytest.raises(ollama.ResponseError, match="checksum"):
            list(client.pull(PULLED, stream=True))
    finally:
        ollama_hub.corrupt.clear()
    assert PULLED not in _tags(client)


def test_offline_the_pull_says_why(served: tuple[str, dict[str, str]], ollama_hub: hubserver.HubServer) -> None:
    client = ollama.Client(host=served[0])
    ollama_hub.stop()  # the hub goes away: its port refuses connections
    with pytest.raises(ollama.ResponseError) as offline:
        client.pull(PULLED)
    assert offline.value.status_code == 502 and "cannot reach the model hub" in offline.value.error

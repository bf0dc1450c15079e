"""`modelhost serve` with two models: every door answers each by name (the socket serves the one it was given), an
unknown name gets each door's error, the listings and metrics name both; `--lazy` loads the second at its first
request. The same tiny GGUF under two names keeps it fast; the names alone decide where a request goes."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelhost.inference.types import Message
from modelhost.serve import ServeConfig, model_specs, split_model
from modelhost.testing.waiting import STATE_WAIT_SECONDS
from modelhost.wire.client import Client
from test_serve import Served, start_serving

pytest.importorskip("llama_cpp")


@pytest.fixture
def two(tiny_llama_gguf: Path, tmp_path: Path) -> Iterator[tuple[Served, Path]]:
    sock = tmp_path / "m.sock"
    args = ["--model", f"alpha={tiny_llama_gguf}", "--model", f"beta={tiny_llama_gguf}", "--socket-model", "beta"]
    args += ["--model", f"delta={tiny_llama_gguf}", "--model-socket", f"delta={tmp_path / 'delta.sock'}"]
    args += ["--socket", str(sock), "--http", ":0", "--worker", ":0", "--state", str(tmp_path / "jobs"), "--lazy"]
    serving = start_serving(args)
    try:
        yield serving, sock
    finally:
        if serving.proc.poll() is None:
            serving.proc.kill()
            serving.proc.wait()


def job(worker: httpx.Client, model: str) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4, "temperature": 0}
    return worker.post("/v1/jobs", json={"operation": "text.chat", "model": model, "input": body})


def test_two_models_answer_by_name_through_every_door(two: tuple[Served, Path]) -> None:
    serving, sock = two
    http_url, worker_url = serving.url("http"), serving.url("worker")
    assert any("loading alpha from" in line and "(at its first request)" in line for line in serving.lines)
    assert any("loading beta from" in line and "(now)" in line for line in serving.lines), "the socket's: at start"

    health = httpx.get(f"{worker_url}/v1/health").json()
    assert health["status"] == "ok", "the worker's first model is lazy and unloaded: a job would load it"

    with Client(str(sock)) as client:  # the socket serves beta, loaded at start though --lazy
        socket_text = "".join(client.chat([Message("user", "Hello")], max_tokens=4, temperature=0))
        assert client.last_done is not None and client.last_done.backend == "modelhost/beta"
    with Client(str(sock.parent / "delta.sock")) as client:  # a socket of its own for delta
        assert "".join(client.chat([Message("user", "Hello")], max_tokens=4, temperature=0)) == socket_text
        assert client.last_done is not None and client.last_done.backend == "modelhost/delta"

    with httpx.Client(base_url=http_url, timeout=STATE_WAIT_SECONDS) as http:
        assert http.get("/ready").json()["models"] == {"alpha": "unloaded", "beta": "ready", "delta": "ready"}
        body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4, "temperature": 0}
        first = http.post("/v1/chat/completions", json={**body, "model": "alpha"})
        assert first.status_code == 503 and first.json()["error"]["code"] == "model_loading", "lazy: loading now"
        deadline = time.monotonic() + STATE_WAIT_SECONDS
        while (answer := http.post("/v1/chat/completions", json={**body, "model": "alpha"})).status_code == 503:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert answer.json()["model"] == "alpha" and answer.json()["choices"][0]["message"]["content"] == socket_text
        ollama_body = {"messages": body["messages"], "options": {"num_predict": 4, "temperature": 0}, "stream": False}
        ollama = http.post("/api/chat", json={**ollama_body, "model": "beta"}).json()
        assert ollama["model"] == "beta" and ollama["message"]["content"] == socket_text
        missing = http.post("/v1/chat/completions", json={**body, "model": "gamma"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
        assert "alpha, beta" in missing.json()["error"]["message"]
        assert [m["id"] for m in http.get("/v1/models").json()["data"]] == ["alpha", "beta", "delta"]
        assert [m["name"] for m in http.get("/api/tags").json()["models"]] == ["alpha", "beta", "delta"]

    with httpx.Client(base_url=worker_url, timeout=STATE_WAIT_SECONDS) as worker:
        listed = worker.get("/v1/models").json()["models"]
        assert {m["id"] for m in listed} == {"alpha", "beta", "delta"}, listed
        unknown = job(worker, "gamma")
        assert unknown.status_code == 400 and unknown.json()["code"] == "WORKER_INVALID_INPUT"
        assert "alpha/text.chat" in unknown.json()["message"] and "beta/text.chat" in unknown.json()["message"]
        bad = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": -1}
        refused = worker.post("/v1/jobs", json={"operation": "text.chat", "model": "beta", "input": bad})
        assert refused.status_code == 400 and "max_tokens" in refused.json()["message"], "checked at submission"
        created = job(worker, "alpha")
        assert created.status_code == 202, created.text
        job_id = created.json()["id"]
        deadline = time.monotonic() + STATE_WAIT_SECONDS
        while (record := worker.get(f"/v1/jobs/{job_id}").json())["status"] not in ("completed", "failed"):
            assert time.monotonic() < deadline, record
            time.sleep(0.05)
        assert record["status"] == "completed", record
        assert worker.get(f"/files/{job_id}/output.txt").text == socket_text

    with httpx.Client(base_url=http_url, timeout=STATE_WAIT_SECONDS) as http:
        metrics = http.get("/metrics").text
    finished = {
        m.group(1): float(m.group(2))
        for m in re.finditer(r'^modelhost_generation_tokens_total\{model_name="(\w+)"\} (\S+)$', metrics, re.M)
    }
    assert finished == {"alpha": 8.0, "beta": 8.0, "delta": 4.0}, "HTTP + job on alpha, socket + Ollama on beta"

    serving.proc.send_signal(signal.SIGTERM)
    assert serving.proc.wait(timeout=STATE_WAIT_SECONDS) == 0


def test_model_arguments_name_and_socket_model(tiny_llama_gguf: Path) -> None:
    assert split_model("a=/x/y.gguf") == ("a", "/x/y.gguf")
    assert split_model("/x/a=b.gguf") == (None, "/x/a=b.gguf")
    assert split_model("default") == (None, "default")
    config = ServeConfig(models=(str(tiny_llama_gguf), f"two={tiny_llama_gguf}"), socket="/tmp/x.sock")
    specs, sockets = model_specs(config)
    assert [(s.name, s.pinned, s.path) for s in specs] == [
        ("tiny-llama", True, str(tiny_llama_gguf)),
        ("two", False, str(tiny_llama_gguf)),
    ]
    assert sockets == [("tiny-llama", "/tmp/x.sock")]
    # The budget counts the loaded model: the file and the KV cache of its slots (tests/backends/test_llama_cpp_memory).
    assert specs[0].size > tiny_llama_gguf.stat().st_size
    with pytest.raises(ValueError, match="--socket-model 'three' is not served; served: tiny-llama, two"):
        model_specs(ServeConfig(models=config.models, socket="/tmp/x.sock", socket_model="three"))
    specs, sockets = model_specs(ServeConfig(models=config.models, model_sockets=("two=/tmp/two.sock",)))
    assert sockets == [("two", "/tmp/two.sock")] and [s.pinned for s in specs] == [False, True]
    with pytest.raises(ValueError, match="--model-socket takes NAME=PATH"):
        model_specs(ServeConfig(models=config.models, model_sockets=("two",)))

"""`modelhost serve` with every door open on one model: the socket, OpenAI HTTP and the giz job worker.

One process, one host, one scheduler: a request through any door is served by the same model, shows in the same
metrics, and a stop signal drains them all.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelhost.cli import expand_optional_values
from modelhost.inference.types import Message
from modelhost.serve import model_name, parse_hostport
from modelhost.testing.serving import Served, start_serving
from modelhost.testing.waiting import STATE_WAIT_SECONDS
from modelhost.wire.client import Client

pytest.importorskip("llama_cpp")


def test_optional_values_and_hostports() -> None:
    assert expand_optional_values(["serve", "--http"]) == ["serve", "--http", "127.0.0.1:8000"]
    assert expand_optional_values(["serve", "--http", "--worker", ":9"]) == [
        "serve",
        "--http",
        "127.0.0.1:8000",
        "--worker",
        ":9",
    ]
    assert expand_optional_values(["serve", "--http", "0.0.0.0:1"]) == ["serve", "--http", "0.0.0.0:1"]
    assert expand_optional_values(["chat", "hi", "--socket"])[-1].endswith("inferd.sock")
    assert parse_hostport(":0") == ("127.0.0.1", 0)
    assert parse_hostport("[::1]:80") == ("::1", 80)
    assert parse_hostport("8080") == ("127.0.0.1", 8080)
    for bad in ("host:port", "1:99999"):
        with pytest.raises(ValueError, match=re.escape(bad)):
            parse_hostport(bad)
    assert model_name("default") == "smollm2-135m-instruct"
    assert model_name("/models/tiny.gguf") == "tiny"
    assert model_name("/models/folder/") == "folder"


@pytest.fixture
def served(tiny_llama_gguf: Path, tmp_path: Path) -> Iterator[tuple[Served, Path]]:
    sock = tmp_path / "run" / "m.sock"
    sock.parent.mkdir()  # an explicit --socket's folder must exist
    args = ["--model", str(tiny_llama_gguf), "--socket", str(sock), "--http", ":0", "--worker", ":0"]
    serving = start_serving([*args, "--state", str(tmp_path / "jobs")])
    try:
        yield serving, sock
    finally:
        if serving.proc.poll() is None:
            serving.proc.kill()
            serving.proc.wait()


def test_every_door_serves_the_same_model_and_a_stop_drains_them(served: tuple[Served, Path]) -> None:
    serving, sock = served
    http_url, worker_url = serving.url("http"), serving.url("worker")

    with Client(str(sock)) as client:
        socket_text = "".join(client.chat([Message("user", "Hello")], max_tokens=6, temperature=0))
        assert client.last_done is not None and client.last_done.output_tokens == 6

    with httpx.Client(base_url=http_url, timeout=STATE_WAIT_SECONDS) as http:
        body = {"model": "tiny", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 6, "temperature": 0}
        answer = http.post("/v1/chat/completions", json=body).json()
        assert answer["usage"]["completion_tokens"] == 6
        # Same model, same greedy settings, same prompt: the same text through both doors.
        assert answer["choices"][0]["message"]["content"] == socket_text

    with httpx.Client(base_url=worker_url, timeout=STATE_WAIT_SECONDS) as worker:
        models = worker.get("/v1/models").json()
        job = {
            "operation": "text.chat",
            "model": models["models"][0]["id"],
            "input": {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 6, "temperature": 0},
        }
        created = worker.post("/v1/jobs", json=job)
        assert created.status_code in (200, 201, 202), (models, created.text)
        job_id = created.json()["id"]
        deadline = time.monotonic() + STATE_WAIT_SECONDS  # a 6-token job; minutes only on a loaded machine
        while (record := worker.get(f"/v1/jobs/{job_id}").json())["status"] not in ("completed", "failed"):
            assert time.monotonic() < deadline, record
            time.sleep(0.05)
        assert record["status"] == "completed", record
        assert worker.get(f"/files/{job_id}/output.txt").text == socket_text

    with httpx.Client(base_url=http_url, timeout=STATE_WAIT_SECONDS) as http:
        metrics = http.get("/metrics").text
    finished = sum(
        float(m.group(1)) for m in re.finditer(r"^modelhost_request_success_total\{[^}]*\} (\S+)$", metrics, re.M)
    )
    assert finished >= 3, "the three doors share one scheduler, so its metrics count all three requests"
    with httpx.Client(base_url=worker_url, timeout=STATE_WAIT_SECONDS) as worker:
        worker_metrics = worker.get("/metrics").text
    for page in (metrics, worker_metrics):
        # Both doors show the host's registry, which carries the process_* series: once on each page, not per door
        # or per model (a duplicated sample makes Prometheus reject the whole scrape).
        assert len(re.findall(r"^process_resident_memory_bytes \S+$", page, re.M)) == 1, page

    serving.proc.send_signal(signal.SIGTERM)
    assert serving.proc.wait(timeout=STATE_WAIT_SECONDS) == 0
    assert not sock.exists(), "a stopped host removes its socket"


def test_a_second_stop_signal_cancels_what_is_still_running(tmp_path: Path) -> None:
    sock = tmp_path / "m.sock"
    serving = start_serving(["--model", "default", "--socket", str(sock)])
    try:
        with Client(str(sock)) as client:
            stream = client.chat([Message("user", "Write a very long story.")], max_tokens=4000, temperature=0)
            next(stream)  # generation is under way
            serving.proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            serving.proc.send_signal(signal.SIGTERM)
            started = time.monotonic()
            # The default grace is 30 s; the second signal must not wait for it, nor for 4000 tokens.
            assert serving.proc.wait(timeout=STATE_WAIT_SECONDS) == 0
            assert time.monotonic() - started < 25
            rest = "".join(stream)
            assert client.last_done is not None and client.last_done.stop_reason == "cancelled", rest
    finally:
        if serving.proc.poll() is None:
            serving.proc.kill()
            serving.proc.wait()


def test_the_readme_flow_serve_and_chat_on_the_default_address(tiny_llama_gguf: Path, tmp_path: Path) -> None:
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    serving = start_serving(["--model", str(tiny_llama_gguf), "--socket"], env=env)
    try:
        expected = tmp_path / "inferd" / "inferd.sock"
        assert any(f"unix:{expected}" in line for line in serving.lines), serving.lines
        chat = subprocess.run(
            [sys.executable, "-m", "modelhost.cli", "chat", "Hello", "-n", "4", "--socket"],
            capture_output=True,
            text=True,
            timeout=STATE_WAIT_SECONDS,
            env={**os.environ, **env},
        )
        assert chat.returncode == 0, chat.stderr
        assert "[4 tokens" in chat.stderr and "max_tokens]" in chat.stderr, chat.stderr
    finally:
        serving.proc.send_signal(signal.SIGTERM)
        assert serving.proc.wait(timeout=STATE_WAIT_SECONDS) == 0


def test_a_stop_signal_while_the_model_loads_opens_no_door(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A load cannot be interrupted, so the stop waits for it; but binding the socket afterwards would tell inferd
    # clients "ready" (a bound socket is the readiness signal) from a host that is already on its way out.
    import asyncio
    import threading

    from modelhost import serve as serving
    from modelhost.testing.standins import ScriptedModel

    loading, release = threading.Event(), threading.Event()

    def load(path: str, backend: str | None) -> ScriptedModel:
        loading.set()
        release.wait(STATE_WAIT_SECONDS)
        return ScriptedModel()

    monkeypatch.setattr(serving.catalogue, "resolve", lambda model: model)
    monkeypatch.setattr(serving.registry, "load_model", load)
    lines: list[str] = []
    sock = tmp_path / "m.sock"

    async def said(start: str) -> None:
        while not any(line.startswith(start) for line in lines):
            await asyncio.sleep(0.01)

    async def main() -> None:
        config = serving.ServeConfig(model="x", socket=str(sock), grace_seconds=1.0)
        task = asyncio.create_task(serving.serve(config, say=lines.append))
        assert await asyncio.get_running_loop().run_in_executor(None, loading.wait, STATE_WAIT_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)
        # The load ends only once serve has taken the signal (it says so), not after a pause that guesses it did.
        await asyncio.wait_for(said("modelhost: stopping"), STATE_WAIT_SECONDS)
        release.set()
        await asyncio.wait_for(task, STATE_WAIT_SECONDS)

    asyncio.run(main())
    assert not any("ready" in line for line in lines), lines
    assert lines[-1] == "modelhost: stopped"
    assert not sock.exists()


def test_client_limits_reach_both_http_doors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A silent connection is refused after --header-timeout by the OpenAI door and the worker alike.
    import asyncio

    from typer.testing import CliRunner

    from modelhost import serve as serving
    from modelhost._serving import ClientLimits
    from modelhost.cli import app
    from modelhost.testing.rawhttp import Connection, parse_answers
    from modelhost.testing.standins import ScriptedModel

    refused = CliRunner().invoke(app, ["serve", "--no-socket", "--header-timeout", "0"])
    assert refused.exit_code == 2 and "positive" in refused.output, refused.output

    monkeypatch.setattr(serving.catalogue, "resolve", lambda model: model)
    monkeypatch.setattr(serving.registry, "load_model", lambda path, backend: ScriptedModel())
    lines: list[str] = []

    async def main() -> None:
        config = serving.ServeConfig(
            model="x", http=("127.0.0.1", 0), worker=("127.0.0.1", 0), state_dir=tmp_path / "state",
            client_limits=ClientLimits(header_timeout=0.3), grace_seconds=1.0,
        )  # fmt: skip
        task = asyncio.create_task(serving.serve(config, say=lines.append))
        for _ in range(500):
            urls = [m.group(1) for line in lines if (m := re.search(r" on (http://\S+)", line))]
            if len(urls) == 2:
                break
            await asyncio.sleep(0.01)
        assert len(urls) == 2, lines
        for url in urls:
            conn = await Connection.open(url)
            (answer,) = parse_answers(await conn.read_all(timeout=STATE_WAIT_SECONDS))
            await conn.close()
            assert answer.status == 408, (url, answer)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(task, 10)

    asyncio.run(main())


def test_each_models_socket_binds_as_soon_as_that_model_is_ready(
    tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pdf-spec's Dial retries for 10 s: the first model's socket must answer while the second is still loading, not
    # wait for it. The second model's load is held on purpose until the first socket has served a request.
    import asyncio
    import threading

    from modelhost import serve as serving
    from modelhost.inference import registry

    real_load = registry.load_model
    second_loading, release = threading.Event(), threading.Event()

    def load(path: str, backend: str | None, **kwargs: object) -> object:
        if path == "slow":
            second_loading.set()
            assert release.wait(300), "the test never released the slow model"
            path = str(tiny_llama_gguf)
        return real_load(path, backend, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(serving.catalogue, "resolve", lambda model: model)
    monkeypatch.setattr(serving.registry, "load_model", load)
    monkeypatch.setattr(serving, "_estimated_size", lambda path, backend, opts: 0)
    first, second = tmp_path / "first.sock", tmp_path / "second.sock"
    lines: list[str] = []

    def ask(sock: Path) -> str:
        with Client(str(sock)) as client:
            return "".join(client.chat([Message("user", "Hello")], max_tokens=3))

    async def main() -> None:
        config = serving.ServeConfig(
            models=(f"fast={tiny_llama_gguf}", "late=slow"),
            socket=str(first),
            model_sockets=(f"late={second}",),
            grace_seconds=1.0,
        )
        task = asyncio.create_task(serving.serve(config, say=lines.append))
        loop = asyncio.get_running_loop()
        try:
            assert await loop.run_in_executor(None, second_loading.wait, 300)
            # The models load side by side: the first one's socket binds when its own load ends, while the second
            # is still loading (and will until released), and it serves.
            deadline = time.monotonic() + STATE_WAIT_SECONDS
            while not first.exists():
                assert time.monotonic() < deadline and not task.done(), lines
                await asyncio.sleep(0.05)
            assert not second.exists(), lines
            assert await loop.run_in_executor(None, ask, first)
            assert not any("ready: serving" in line for line in lines), lines
        finally:
            release.set()  # a failed check must not leave the held load (and so the whole serve) waiting
        while not any("ready: serving" in line for line in lines):
            assert not task.done(), lines
            await asyncio.sleep(0.05)
        assert await loop.run_in_executor(None, ask, second)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(task, 120)

    try:
        asyncio.run(main())
    finally:
        release.set()
    socket_lines = [line for line in lines if "socket ready" in line]
    assert [line.split(": ")[2].split()[0] for line in socket_lines] == ["fast", "late"], lines
    assert not first.exists() and not second.exists()


def test_serve_config_refuses_contradicting_settings_for_the_python_api_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from modelhost import serve as serving
    from modelhost.ray.cluster import ClusterError

    with pytest.raises(ValueError, match="--docling serves its API on the HTTP door: add --http"):
        serving.ServeConfig(docling="ocr")
    with pytest.raises(ValueError, match="--fetch-private widens --allow-fetch"):
        serving.ServeConfig(http=("127.0.0.1", 0), docling="ocr", fetch_private=True)
    with pytest.raises(ValueError, match="here it goes with --worker"):
        serving.ServeConfig(ray="auto")
    # Without Ray (None in sys.modules is what find_spec reads as "not installed"), one line saying how to get it.
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ClusterError, match=r"pip install 'modelhost\[ray\]'"):
        serving.ServeConfig(ray="auto", worker=("127.0.0.1", 0))


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"max_queue": 0}, "--max-queue takes 1 or more, got 0"),
        ({"capacity": 0, "worker": ("127.0.0.1", 0)}, "--capacity takes 1 or more, got 0"),
        ({"keep_alive": -1.0}, "--keep-alive takes 0 or more, got -1.0"),
        ({"parallel": 0}, "--parallel takes 1 or more, got 0"),
        ({"threads": 0}, "--threads takes 1 or more, got 0"),
        ({"poll": 101}, "--poll takes 0 to 100, got 101"),
        ({"tensor_parallel": 0}, "--tp takes 1 or more, got 0"),
        ({"ray_actors": 0}, "--actors takes 1 or more, got 0"),
        ({"ray_actor_gpus": -1.0}, "--num-gpus takes 0 or more, got -1.0"),
        ({"access_log": "xml"}, "--log-format takes text, json or none, got 'xml'"),
    ],
)
def test_the_python_api_refuses_a_number_out_of_its_flags_range_before_any_model_resolves(
    setting: dict[str, object], expected: str
) -> None:
    from modelhost import serve as serving

    # A model that does not exist: were the number not refused first, the run would fail on the model instead.
    config = {"model": "no-such-model", "socket": None, **setting}
    with pytest.raises(ValueError, match=re.escape(expected)):
        serving.run(serving.ServeConfig(**config))  # type: ignore[arg-type]
    # The edges of each range are accepted.
    serving.ServeConfig(max_queue=1, capacity=1, keep_alive=0.0, parallel=1, threads=1, poll=0, ray_actor_gpus=0.0)
    serving.ServeConfig(poll=100)


def test_the_python_api_refuses_a_docling_door_without_the_http_door_it_serves_on() -> None:
    from modelhost import serve as serving

    # It once started no docling door and said nothing.
    with pytest.raises(ValueError, match="--docling serves its API on the HTTP door: add --http"):
        serving.run(serving.ServeConfig(model="ocr", socket=None, docling="ocr"))

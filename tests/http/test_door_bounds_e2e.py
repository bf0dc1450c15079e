"""Issue 35, items 4-6, on the HTTP door as a client meets it (real models, uvicorn on loopback, httpx): every door's
input bytes bounded before the tokenizer runs, the hub's network waits off the event loop, and the smaller wrong
answers (the context /tokenize reports, a disk path in /v1/models, a tool output answering no call, a 503 where
Ollama waits). Asserted by answers and counts, never by how fast."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from http_support import LoopThread, serving
from test_models import door, spec

import modelhost.inference
from modelhost.host import Host
from modelhost.host.models import Models, ModelSpec
from modelhost.http import HttpServer
from modelhost.hub import fetch
from modelhost.testing.standins import ScriptedModel
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

MB = 2**20
#: Far past the tiny models' context in bytes (512 tokens x their longest token), within the 32 MiB body bound.
TEN_MB = 10 * 1000 * 1000
#: The context the tiny GGUF is loaded with here: under its trained 512, so the two can be told apart.
RUNNING_CONTEXT = 256


@pytest.fixture(scope="module")
def gguf_door(loop_thread: LoopThread, tiny_llama_gguf: Path) -> Iterator[HttpServer]:
    """The tiny GGUF on llama.cpp, run with a context under its trained one."""
    pytest.importorskip("llama_cpp")
    host = Host(
        lambda: modelhost.inference.load_model(
            str(tiny_llama_gguf), backend="llama_cpp", threads=1, context_length=RUNNING_CONTEXT
        ),
        name="tiny",
    )
    with serving(loop_thread, host) as server:
        yield server


def _chat(url: str, content: str = "Hello") -> httpx.Response:
    body = {"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 4, "temperature": 0}
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=STATE_WAIT_SECONDS)


def test_tokenize_refuses_text_past_the_context_before_tokenizing(gguf_door: HttpServer) -> None:
    url = gguf_door.url
    # 25 MB with `with_pieces` took 3.4 GB and answered 200 MB of pieces; now the prompt bound refuses it first.
    big = httpx.post(f"{url}/tokenize", json={"content": "ab " * (25 * 1000 * 1000 // 3), "with_pieces": True},
                     timeout=STATE_WAIT_SECONDS)  # fmt: skip
    assert big.status_code == 400, big.text[:300]
    error = big.json()["error"]
    assert error["param"] == "content" and "context" in error["message"], error
    vllm = httpx.post(f"{url}/tokenize", json={"prompt": "x" * TEN_MB}, timeout=STATE_WAIT_SECONDS)
    assert vllm.status_code == 400 and vllm.json()["error"]["param"] == "prompt", vllm.text[:300]
    assert _chat(url).status_code == 200  # the door serves on


def test_tokenize_reports_the_context_prompts_are_held_to(gguf_door: HttpServer) -> None:
    url = gguf_door.url
    answer = httpx.post(f"{url}/tokenize", json={"prompt": "hello"}, timeout=STATE_WAIT_SECONDS).json()
    # The trained length (512) was reported while prompts past the running context were refused.
    assert answer["max_model_len"] == RUNNING_CONTEXT, answer
    too_long = _chat(url, "hello " * (2 * RUNNING_CONTEXT))
    assert too_long.status_code == 400, too_long.text[:300]


def test_a_function_call_output_must_answer_a_call_of_the_same_input(gguf_door: HttpServer) -> None:
    url = gguf_door.url
    stray = [{"type": "message", "role": "user", "content": "weather?"},
             {"type": "function_call_output", "call_id": "call_nobody_made", "output": "Sunny"}]  # fmt: skip
    r = httpx.post(f"{url}/v1/responses", json={"model": "tiny", "input": stray}, timeout=STATE_WAIT_SECONDS)
    assert r.status_code == 400, r.text[:300]
    assert r.json()["error"]["param"] == "input[1].call_id" and "call_nobody_made" in r.text
    answered = [
        {"type": "message", "role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "Sunny"},
    ]
    body = {"model": "tiny", "input": answered, "max_output_tokens": 4}
    ok = httpx.post(f"{url}/v1/responses", json=body, timeout=STATE_WAIT_SECONDS)
    assert ok.status_code == 200, ok.text[:300]


def test_embeddings_past_the_context_bytes_are_refused_or_cut_before_the_tokenizer(
    loop_thread: LoopThread, tiny_llama_dir: Path
) -> None:
    # The transformers backend tokenised a 10 MB input whole on the model thread (minutes, 1.7 GB kept) to keep
    # its first 512 tokens; the host now refuses it, or cuts it with `truncate`, by its bytes, for every backend.
    host = Host(lambda: modelhost.inference.load_model(str(tiny_llama_dir), backend="transformers"), name="tiny")
    text = "the quick brown fox jumps over the lazy dog " * (TEN_MB // 44)
    with serving(loop_thread, host) as server, httpx.Client(base_url=server.url, timeout=STATE_WAIT_SECONDS) as http:
        refused = http.post("/v1/embeddings", json={"model": "tiny", "input": ["short", text]})
        assert refused.status_code == 400, refused.text[:300]
        assert "input[1]" in refused.json()["error"]["message"], refused.text[:300]
        legacy = http.post("/api/embeddings", json={"model": "tiny", "prompt": text})  # Ollama's: truncated
        assert legacy.status_code == 200 and len(legacy.json()["embedding"]) > 0, legacy.text[:300]
        cut = http.post("/api/embed", json={"model": "tiny", "input": text, "truncate": True})
        assert cut.status_code == 200, cut.text[:300]
        assert 0 < cut.json()["prompt_eval_count"] <= 512, cut.json()["prompt_eval_count"]


def test_models_name_their_hub_repository_or_id_never_a_path(
    loop_thread: LoopThread, tiny_llama_gguf: Path, tmp_path: Path
) -> None:
    snapshot = tmp_path / "hub" / "models--tiny--llama-gguf" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    cached = snapshot / "tiny-llama-F32.gguf"
    cached.symlink_to(tiny_llama_gguf)
    models = Models([ModelSpec("from-hub", lambda: ScriptedModel(["a"]), path=str(cached)),
                     ModelSpec("local", lambda: ScriptedModel(["b"]), path=str(tiny_llama_gguf))])  # fmt: skip
    with door(loop_thread, models) as url:
        listed = {m["id"]: m for m in httpx.get(f"{url}/v1/models").json()["data"]}
        assert listed["from-hub"]["root"] == "tiny/llama-gguf"
        assert listed["local"]["root"] == "local"
        one = httpx.get(f"{url}/v1/models/local").json()
        assert one["root"] == "local" and str(tmp_path) not in str(one) and str(tiny_llama_gguf) not in str(one)


class _SlowToClose(ScriptedModel):
    """A stand-in whose close waits for the test: an unload's memory is given back when the test says."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__(["yes "])
        self._gate = gate

    def close(self) -> None:
        self._gate.wait(STATE_WAIT_SECONDS)
        super().close()


def test_ollama_chats_with_keep_alive_0_wait_for_memory_still_being_given_back(loop_thread: LoopThread) -> None:
    gate = threading.Event()
    models = Models([ModelSpec("solo", lambda: _SlowToClose(gate), size=60 * MB)], max_memory=100 * MB)
    body = {"model": "solo", "messages": [{"role": "user", "content": "hi"}], "stream": False, "keep_alive": 0}
    with door(loop_thread, models) as url:
        first = httpx.post(f"{url}/api/chat", json=body, timeout=STATE_WAIT_SECONDS)
        assert first.status_code == 200, first.text
        # keep_alive 0: unloaded once idle, its close held open, so its 60 MB are still counted.
        wait_until(lambda: models.states()["solo"] == "unloaded")
        answers: list[httpx.Response] = []
        second = threading.Thread(
            target=lambda: answers.append(httpx.post(f"{url}/api/chat", json=body, timeout=STATE_WAIT_SECONDS))
        )
        second.start()
        # Until the close ends the room is not there: the request waits for it (it was a 503 "waits for unloaded
        # models to give their memory back", which Ollama's clients never retry).
        wait_until(lambda: models.get("solo").busy or bool(answers))
        gate.set()
        second.join(STATE_WAIT_SECONDS)
        assert answers and answers[0].status_code == 200, answers[0].text if answers else "no answer"


class _SilentHub:
    """A hub that accepts connections and never answers (the listener the probe pointed HF_ENDPOINT at)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(), which a close() alone may not
        self._thread.join(STATE_WAIT_SECONDS)
        self.sock.close()
        for conn in self.held:
            conn.close()  # every waiting listing fails at once (hub_unreachable)


def test_pulls_to_a_silent_hub_leave_the_doors_threads_free(
    loop_thread: LoopThread, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hub = _SilentHub()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # The listings hang until the test closes the hub, not for a timeout that could end them before the chat.
    monkeypatch.setattr(fetch, "LISTING_TIMEOUT_S", STATE_WAIT_SECONDS)
    models = Models([spec("solo", "one two three four")])
    pulls: list[httpx.Response] = []
    with door(loop_thread, models) as url:

        def pull() -> None:
            body = {"model": "tiny/silent-gguf:F32", "stream": False}
            pulls.append(httpx.post(f"{url}/api/pull", json=body, timeout=STATE_WAIT_SECONDS))

        pullers = [threading.Thread(target=pull) for _ in range(12)]
        for t in pullers:
            t.start()
        try:
            wait_until(lambda: len(hub.held) >= 2)  # listings are under way, each holding a thread
            # The chat's own off-loop work (its checks on a worker thread) is not queued behind the pulls: it was,
            # on the event loop's default executor, whose 6 threads six pulls held for the listing timeout.
            body = {"model": "solo", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
            chat = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=STATE_WAIT_SECONDS)
            assert chat.status_code == 200, chat.text
            assert not pulls, "every pull still waits on the silent hub while the chat is answered"
        finally:
            hub.close()
            for t in pullers:
                t.join(STATE_WAIT_SECONDS)
    assert len(pulls) == 12 and {p.status_code for p in pulls} == {502}, [p.text for p in pulls]

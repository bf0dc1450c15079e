"""Clients that ask for a stream and then stop reading it, against a real `modelhost serve` (the tiny GGUF on
llama.cpp): the model finishes their work and serves everyone else, and the door gives their connections back
instead of holding them (with the answer's bytes) until the client's process exits.

Without a write bound, a stopped reader's connection and its unsent bytes stay for as long as its TCP peer is
alive: 256 of them fill the HTTP door's connection cap and nobody else gets in.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelhost.testing.proc import open_fds
from modelhost.testing.waiting import wait_until

from .serving import POLL_SECONDS, ServeProcess, serve

#: Past the suite's 300 s: the write timeout alone is 60 s, and the stalled requests' tokens take minutes at load 10.
pytestmark = pytest.mark.timeout(900)

#: Streams that stop being read: more than one, so a door that serialises writes would show it (and no more: each
#: is 16 choices of work for the model, minutes on a loaded machine).
STALLED = 2
#: Tokens each stalled stream asks for: 300 tokens of 16 choices with 20 alternatives each are 6.9 MB of SSE
#: (measured), past what the kernel takes from the door before its writes pause (2.9 MB measured on loopback; the
#: send buffer grows to tcp_wmem's maximum, 4 MB by default, at most). Until the tiny model's context ended them
#: (10.3 MB), each stream cost the model 2.5 times the CPU for bytes past that point: the later positions are dearer.
STALLED_TOKENS = 300
#: A receive buffer small enough that the server's writes block after a few kilobytes.
SMALL_BUFFER = 4096
#: A generous bound on states on a busy machine, never a measurement.
PATIENCE = 300.0


@pytest.fixture
def served(tiny_llama_gguf: Path, tmp_path: Path) -> Iterator[ServeProcess]:
    with serve(["--model", str(tiny_llama_gguf)], str(tmp_path / "jobs")) as process:
        yield process


def _stalled_stream(served: ServeProcess) -> socket.socket:
    """A streaming chat request whose answer is never read."""
    host, port = str(served.http.base_url).removeprefix("http://").rstrip("/").rsplit(":", 1)
    conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    conn.connect((host, int(port)))
    body = json.dumps(
        {
            "messages": [{"role": "user", "content": "Tell me everything."}],
            "max_tokens": STALLED_TOKENS,
            "temperature": 1.0,
            "seed": 1,
            "stream": True,
            # Every token's 20 alternatives in 16 choices: about 7 MB of SSE per stream, past what the kernel's
            # socket buffers on both ends hold for a reader that stopped.
            "logprobs": True,
            "top_logprobs": 20,
            "n": 16,
        }
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    conn.sendall(head + body)
    return conn


def _gauge(served: ServeProcess, name: str) -> float:
    found = re.search(rf"^{name}{{[^}}]*}} (\S+)$", served.http.get("/metrics").text, re.M)
    assert found, name
    return float(found.group(1))


def _refusals(served: ServeProcess, reason: str) -> float:
    metrics = served.http.get("/metrics").text
    found = re.search(rf'^modelhost_http_client_refusals_total\{{reason="{reason}"\}} (\S+)$', metrics, re.M)
    assert found, reason
    return float(found.group(1))


def test_streams_nobody_reads_neither_block_the_model_nor_keep_their_connections(served: ServeProcess) -> None:
    pid = served.proc.pid
    baseline = open_fds(pid)
    stalled = [_stalled_stream(served) for _ in range(STALLED)]
    try:
        # Everyone else is served while the stalled streams wait for a reader.
        body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 3, "temperature": 0}
        answer = served.http.post("/v1/chat/completions", json=body)
        assert answer.status_code == 200 and answer.json()["usage"]["completion_tokens"] == 3, answer.text
        # The model finishes (or drops) the stalled requests: nothing stays running or waiting for them.
        wait_until(
            lambda: (
                _gauge(served, "modelhost_num_requests_running") == 0
                and _gauge(served, "modelhost_num_requests_waiting") == 0
            ),
            PATIENCE,
            "nothing running or waiting",
            poll=POLL_SECONDS,
        )
        # And the door lets their connections go (after its write timeout, 60 s) although the clients are alive,
        # counting each: all but the one keep-alive connection of our own client above.
        wait_until(lambda: _refusals(served, "write_timeout") == STALLED, PATIENCE, "every stall", poll=POLL_SECONDS)
        wait_until(lambda: open_fds(pid) <= baseline + 1, PATIENCE, "their connections closed", poll=POLL_SECONDS)
        assert served.alive(), served.log()
    finally:
        for conn in stalled:
            conn.close()
    answer = served.http.post("/v1/chat/completions", json=body)
    assert answer.status_code == 200, answer.text

"""A real `modelhost serve` (every door, the tiny GGUF model on llama.cpp) flooded with connections: the process
keeps answering through every door, holds a bounded number of descriptors, and gives them all back.

The server runs with a soft and hard limit of 1024 open files, the common default: before the socket door had a
connection cap, 4,212 connections that each sent one byte took every descriptor, and the HTTP doors and the worker
could accept nothing until they closed. Now each door holds at most its cap, refuses the rest at once (the socket:
a queue_full frame; HTTP: a 503) and counts them in /metrics.
"""

from __future__ import annotations

import contextlib
import re
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelhost.inference.types import Message
from modelhost.testing.proc import open_fds
from modelhost.testing.waiting import wait_until
from modelhost.wire import codec
from modelhost.wire.client import Client

from .serving import POLL_SECONDS, ServeProcess, serve

#: The descriptor limit the server runs under (soft and hard): the common default, which the flood must not exhaust.
SERVER_NOFILE = 1024
#: The flood of the issue: connections that each send one byte and then wait.
FLOOD = 4212
#: How long a test waits for a state (a generous bound for a busy machine, never a measurement).
PATIENCE = 180.0


@pytest.fixture
def serving(tiny_llama_gguf: Path, tmp_path: Path) -> Iterator[tuple[ServeProcess, Path]]:
    sock = tmp_path / "run" / "m.sock"
    sock.parent.mkdir()  # an explicit --socket's folder must exist
    args = ["--model", str(tiny_llama_gguf), "--socket", str(sock)]
    with serve(args, str(tmp_path / "jobs"), nofile=SERVER_NOFILE) as served:
        yield served, sock


def _client_fds(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed and hard >= needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < needed:
        pytest.skip(f"this test opens {needed} sockets; the hard limit here is {hard}")


def _probe(client: httpx.Client, path: str) -> None:
    """A health probe on a connection of its own, as an orchestrator's is (the client's kept-alive connection from
    before a flood would get through the door's limit without being counted against it). A 503 is retried after
    the Retry-After it names, as an orchestrator retries: past the limit, the flood's silent connections hold the
    probe headroom only until its short header deadline, and the probe behind them is answered."""
    deadline = time.monotonic() + PATIENCE
    while True:
        answer = httpx.get(f"{client.base_url}{path}", timeout=PATIENCE)
        if answer.status_code != 503:
            break
        assert time.monotonic() < deadline, answer.text
        time.sleep(int(answer.headers["retry-after"]))
    assert answer.status_code == 200, answer.text


def _every_door_answers(served: ServeProcess, sock: Path, *, flooded: str = "") -> None:
    """A real answer from every door but `flooded` (which still answers its health probe, within its headroom)."""
    _probe(served.http, "/health")
    _probe(served.worker, "/v1/health")
    if flooded != "http":
        body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 3, "temperature": 0}
        answer = served.http.post("/v1/chat/completions", json=body)
        assert answer.status_code == 200 and answer.json()["usage"]["completion_tokens"] == 3, answer.text
    if flooded != "worker":
        assert served.worker.get("/v1/models").status_code == 200
    if flooded != "socket":
        with Client(str(sock), timeout=PATIENCE) as client:
            assert "".join(client.chat([Message("user", "Hello")], max_tokens=3, temperature=0))
            assert client.last_done is not None and client.last_done.output_tokens == 3


def _dial(sock: Path) -> socket.socket:
    """A connection to the socket door; a full accept backlog (EAGAIN on a Unix socket) is waited out, as the
    wire client does."""
    deadline = time.monotonic() + PATIENCE
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(sock))
        except BlockingIOError:
            conn.close()
            assert time.monotonic() < deadline, "the socket door stopped accepting"
            time.sleep(0.001)
            continue
        conn.settimeout(PATIENCE)
        return conn


def _refused_on_the_socket(served: ServeProcess) -> float:
    metrics = served.http.get("/metrics").text
    found = re.search(r'^modelhost_wire_client_refusals_total\{reason="connection_limit"\} (\S+)$', metrics, re.M)
    assert found, "the socket door's refusals are in /metrics"
    return float(found.group(1))


def test_a_connection_flood_on_the_socket_leaves_every_door_answering(serving: tuple[ServeProcess, Path]) -> None:
    served, sock = serving
    _client_fds(FLOOD + 512)
    pid = served.proc.pid
    _every_door_answers(served, sock)
    baseline = open_fds(pid)
    flood: list[socket.socket] = []
    refused = 0
    try:
        for _ in range(FLOOD):
            conn = _dial(sock)
            try:
                conn.send(b"\x05")  # one byte of a frame header, then silence
            except (BrokenPipeError, ConnectionResetError):
                refused += 1  # already refused and closed by the server
            flood.append(conn)
        assert served.proc.poll() is None, served.log()
        # The server holds its cap of them, not the flood: far below its 1024 descriptors.
        assert open_fds(pid) < baseline + 256 + 64, (baseline, open_fds(pid))
        _every_door_answers(served, sock, flooded="socket")
        # A refused client was told why: one queue_full frame, then the close.
        last = flood[-1]
        data = b""
        while chunk := last.recv(4096):
            data += chunk
        decoder = codec.FrameDecoder(expect=codec.FrameType.JSON)
        (frame,) = decoder.feed(data)
        error = codec.decode_response(frame.payload)
        assert isinstance(error, codec.Error) and error.code == codec.ErrorCode.QUEUE_FULL, error
        # Counted only now: a connect() returns once the kernel has queued the connection in the listen backlog,
        # before the door accepts it, so up to a backlog of the flood's last connections may still be waiting when
        # the dialling ends. The door accepts in order and counts before it answers, so the last client's answer
        # means every earlier one is counted (read before it, the count came up 5 short on a quiet machine).
        assert _refused_on_the_socket(served) >= FLOOD - 256 - 8
    finally:
        for conn in flood:
            conn.close()
    wait_until(lambda: open_fds(pid) <= baseline + 8, PATIENCE, "the flood's descriptors closed", poll=POLL_SECONDS)
    _every_door_answers(served, sock)


def test_a_connection_flood_on_an_http_door_leaves_the_others_answering(serving: tuple[ServeProcess, Path]) -> None:
    served, sock = serving
    _client_fds(2 * 1200 + 512)
    pid = served.proc.pid
    _every_door_answers(served, sock)
    baseline = open_fds(pid)
    for door in ("http", "worker"):
        host, port = str(getattr(served, door).base_url).removeprefix("http://").rstrip("/").rsplit(":", 1)
        flood: list[socket.socket] = []
        try:
            for _ in range(1200):  # past the door's 256 and its probe headroom, and past the process's 1024
                conn = socket.create_connection((host, int(port)), timeout=PATIENCE)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    conn.send(b"G")  # one byte of a request line, then silence
                flood.append(conn)
            assert served.proc.poll() is None, served.log()
            # Past the door's limit and its probe headroom, a connection is refused at once: a 503 that says when
            # to retry, then the close. Held until its headers came instead (a minute for a one-byte client), the
            # flood took all 1024 descriptors, and asyncio logged every failed accept() with its traceback.
            answer = b""
            while chunk := flood[-1].recv(4096):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 503") and b"\r\nretry-after: 1\r\n" in answer, (door, answer)
            _every_door_answers(served, sock, flooded=door)
            assert open_fds(pid) < baseline + 256 + 64, (door, baseline, open_fds(pid))
        finally:
            for conn in flood:
                conn.close()
        wait_until(lambda: open_fds(pid) <= baseline + 8, PATIENCE, "the flood's descriptors closed", poll=POLL_SECONDS)
    _every_door_answers(served, sock)

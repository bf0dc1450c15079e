"""The socket door's limits, through a real WireServer on a real Unix socket: a connection cap, a bound on bytes
buffered across connections, an idle timeout, a whole-request deadline, bounded ids, and each refusal counted.

A client past a limit gets a typed error frame (queue_full: retry later; invalid_request: the request is wrong)
and a closed connection, never a hang; the clients within the limits keep being answered, and what the refused
ones held (buffer bytes, descriptors) comes back.
"""

from __future__ import annotations

import contextlib
import gc
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelhost.testing.proc import open_fds, rss_bytes
from modelhost.testing.waiting import wait_until
from modelhost.wire import codec
from modelhost.wire.server import WireLimits

from ._support import EchoModel, Served, read_response, read_until_close, responses, send_request, text_request

#: How long a test waits for a state it expects (a generous bound for a busy 2-core machine, never a measurement).
PATIENCE = 120.0


def refusals(served: Served, reason: str) -> float:
    value = served.host.metrics.registry.get_sample_value("modelhost_wire_client_refusals_total", {"reason": reason})
    return value or 0.0


def dial(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(PATIENCE)
    sock.connect(path)
    return sock


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[object]:
    started: list[Served] = []

    def start(limits: WireLimits) -> Served:
        served = Served(EchoModel(), tmp_path / "w.sock", limits=limits)
        started.append(served)
        return served

    yield start
    for served in started:
        served.close()


def _only_error(data: bytes) -> codec.Error:
    events = responses(data)
    assert len(events) == 1 and isinstance(events[0], codec.Error), events
    return events[0]


def test_connections_past_the_cap_get_queue_full_and_the_others_are_served(serve: object) -> None:
    assert callable(serve)
    served: Served = serve(WireLimits(max_connections=4))
    held = [dial(served.path) for _ in range(4)]
    wait_until(lambda: served.server.connections == 4, PATIENCE, "four connections")
    fds = open_fds()
    for _ in range(50):
        extra = dial(served.path)
        error = _only_error(read_until_close(extra))
        assert error.code == codec.ErrorCode.QUEUE_FULL and "too many connections" in error.message, error
        extra.close()
    assert refusals(served, "connection_limit") == 50
    assert open_fds() <= fds + 2  # the refused ones were closed at once (the test's own side included)
    send_request(held[0], text_request("still here"))
    assert isinstance(read_response(held[0])[-1], codec.Done)
    held.pop().close()
    wait_until(lambda: served.server.connections == 3, PATIENCE, "a freed place")
    again = dial(served.path)
    send_request(again, text_request("my turn"))
    assert isinstance(read_response(again)[-1], codec.Done)
    for sock in [*held, again]:
        sock.close()


def _frame_of(size: int, request_id: str) -> bytes:
    """A whole request JSON frame of exactly `size` payload bytes (the text pads it)."""
    base = json.loads(codec.request_to_json(text_request("", request_id)))
    pad = size - len(json.dumps(base, separators=(",", ":")))
    base["messages"][0]["content"][0]["text"] = "x" * pad
    payload = json.dumps(base, separators=(",", ":")).encode()
    assert len(payload) == size
    return codec.encode_frame(codec.FrameType.JSON, payload)


def test_bytes_buffered_across_connections_are_bounded(serve: object) -> None:
    assert callable(serve)
    mib = 1 << 20
    served: Served = serve(WireLimits(max_buffered_bytes=3 * mib))
    first = dial(served.path)
    frame = _frame_of(2 * mib, "big")
    first.sendall(frame[:-1])  # a frame short by one byte: its 2 MiB are held
    wait_until(lambda: served.server.buffered_bytes == 2 * mib, PATIENCE, "the first frame's bytes reserved")
    second = dial(served.path)
    second.sendall(_frame_of(2 * mib, "over")[:16])  # only its header: the reservation is refused before a byte more
    error = _only_error(read_until_close(second))
    assert error.code == codec.ErrorCode.QUEUE_FULL and "bound" in error.message, error
    assert refusals(served, "buffer_limit") == 1
    first.sendall(frame[-1:])
    answer = read_response(first)
    assert isinstance(answer[-1], codec.Done) and answer[0].id == "big", answer[:1]
    wait_until(lambda: served.server.buffered_bytes == 0, PATIENCE, "every byte given back")
    third = dial(served.path)
    third.sendall(_frame_of(2 * mib, "now"))
    assert isinstance(read_response(third)[-1], codec.Done)
    for sock in (first, second, third):
        sock.close()


def test_twenty_frames_short_by_one_byte_cost_at_most_the_budget(serve: object) -> None:
    assert callable(serve)
    served: Served = serve(WireLimits())
    gc.collect()
    before = rss_bytes()
    header = codec.frame_header(codec.FrameType.JSON, codec.MAX_FRAME)
    socks: list[socket.socket] = []
    refused = 0
    chunk = b"x" * (1 << 20)
    for _ in range(20):
        sock = dial(served.path)
        socks.append(sock)
        sock.sendall(header)
        try:
            for _ in range(63):
                sock.sendall(chunk)
            sock.sendall(chunk[:-1])
        except (BrokenPipeError, ConnectionResetError):
            refused += 1  # refused at its header: the server closed before taking the payload
    budget = served.server.limits.max_buffered_bytes
    assert served.server.buffered_bytes <= budget
    assert refused >= 20 - budget // codec.MAX_FRAME, refused
    grew = rss_bytes() - before
    assert grew < budget + (128 << 20), grew  # 20 x 64 MiB would be 1.3 GB
    for sock in socks:
        sock.close()
    wait_until(
        lambda: served.server.connections == 0 and served.server.buffered_bytes == 0, PATIENCE, "everything given back"
    )
    gc.collect()
    assert rss_bytes() - before < 128 << 20  # numpy's large buffers are unmapped when freed


def test_a_silent_connection_is_closed_after_the_idle_timeout(serve: object) -> None:
    assert callable(serve)
    served: Served = serve(WireLimits(idle_timeout=0.5))
    silent = dial(served.path)
    assert read_until_close(silent) == b""  # closed quietly: nothing was asked, nothing is owed
    assert refusals(served, "idle_timeout") == 1
    talker = dial(served.path)
    send_request(talker, text_request("one"))
    assert isinstance(read_response(talker)[-1], codec.Done)
    assert read_until_close(talker) == b""  # then idle again: closed too
    wait_until(lambda: served.server.connections == 0, PATIENCE, "both closed")


def test_a_trickled_request_is_cut_at_its_deadline_and_its_bytes_given_back(serve: object) -> None:
    assert callable(serve)
    served: Served = serve(WireLimits(request_timeout=1.0, idle_timeout=600))
    sock = dial(served.path)
    frame = _frame_of(4096, "slow")
    sock.sendall(frame[:10])
    wait_until(lambda: served.server.buffered_bytes == 4096, PATIENCE, "the frame's bytes reserved")
    received = b""
    try:
        for byte in frame[10:]:
            sock.sendall(bytes([byte]))  # a byte at a time, as long as the server takes them
            sock.settimeout(0.05)
            try:
                received = sock.recv(65536)
            except TimeoutError:
                continue
            break
    except (BrokenPipeError, ConnectionResetError):
        pass
    sock.settimeout(PATIENCE)
    received += read_until_close(sock)
    error = _only_error(received)
    assert error.code == codec.ErrorCode.INVALID_REQUEST and "did not arrive whole" in error.message, error
    assert refusals(served, "request_timeout") == 1
    wait_until(
        lambda: served.server.buffered_bytes == 0 and served.server.connections == 0, PATIENCE, "the bytes given back"
    )


def send_refused(sock: socket.socket, request: codec.Request) -> None:
    """Send a request the server refuses from its first frame: it may answer and close while the rest is still being
    sent (a broken pipe here, seen once on a fresh clone's CI), and its error frame is then still there to read."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        send_request(sock, request)


def test_ids_are_bounded_and_a_long_one_is_never_echoed(serve: object) -> None:
    assert callable(serve)
    served: Served = serve(WireLimits())
    longest = "i" * codec.MAX_ID_CHARS
    sock = dial(served.path)
    send_request(sock, text_request("fine", longest))
    events = read_response(sock)
    assert isinstance(events[-1], codec.Done) and all(e.id == longest for e in events)
    for request_id in ("j" * (codec.MAX_ID_CHARS + 1), "k" * (1 << 20)):
        sock = dial(served.path)
        send_refused(sock, text_request("a short answer", request_id))
        error = _only_error(read_until_close(sock, limit=1 << 22))
        assert error.code == codec.ErrorCode.INVALID_REQUEST and error.id == "", error.id[:20]
        assert f"at most {codec.MAX_ID_CHARS}" in error.message and len(error.message) < 300, error.message[:300]
    # An attachment id is bounded the same way (blobs are matched by it).
    image = codec.Attachment(kind="image", id="a" * 5000, width=1, height=1, data=b"\x00\x00\x00")
    request = codec.Request(
        id="att", messages=(codec.Message(codec.Role.USER, (codec.TextBlock("see"),)),), attachments=(image,)
    )
    sock = dial(served.path)
    send_refused(sock, request)
    error = _only_error(read_until_close(sock))
    assert error.code == codec.ErrorCode.INVALID_REQUEST and "at most" in error.message, error

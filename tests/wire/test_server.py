"""The socket server against real sockets: binding, the malformed corpus, connection fate, cancellation, shutdown.

Every byte sequence here goes through a real Unix socket into a real WireServer on a real Host (around a stand-in
model, see _support.EchoModel), and every wait is bounded: a test that would hang fails instead.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelhost.host import Host
from modelhost.wire import codec, server
from modelhost.wire.codec import MAX_FRAME, ErrorCode, StopReason
from modelhost.wire.errors import SocketPathError
from modelhost.wire.server import WireServer

from ._support import (
    TIMEOUT,
    EchoModel,
    LoopThread,
    Served,
    connect,
    image_reply,
    read_response,
    read_until_close,
    responses,
    send_request,
    text_request,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)

FATAL_CODES = {ErrorCode.INVALID_REQUEST, ErrorCode.FRAME_TOO_LARGE, ErrorCode.WIRE_VERSION_UNSUPPORTED}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    s = Served(EchoModel(), tmp_path / "run" / "inferd.sock")
    yield s
    s.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One text-only server for the tests that leave no state behind (corpus, fuzzing)."""
    s = Served(EchoModel(), tmp_path_factory.mktemp("wire") / "inferd.sock")
    yield s
    s.close()


def frame(frame_type: int, payload: bytes) -> bytes:
    return codec.encode_uvarint(len(payload)) + bytes([frame_type]) + payload


def request_json(**fields: object) -> bytes:
    obj: dict[str, object] = {"wire_version": 1, "id": "bad", "messages": [{"role": "user", "content": []}]}
    obj.update(fields)
    return codec.go_json(obj)


def exchange(path: str, data: bytes, *, half_close: bool = True) -> tuple[list[codec.ResponseEvent], float]:
    """Send `data`, optionally half-close, and read until the server closes: (its responses, seconds it took)."""
    start = time.monotonic()
    with connect(path) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        raw = read_until_close(sock)
    return responses(raw), time.monotonic() - start


def assert_served_ok(path: str) -> None:
    """The server is still alive and answering after whatever the test did to it."""
    with connect(path) as sock:
        send_request(sock, text_request("ok", max_tokens=3))
        events = read_response(sock)
    assert isinstance(events[-1], codec.Done), events


# -- binding ------------------------------------------------------------------------------------------------------


def test_bind_leaves_an_existing_folder_alone_makes_the_socket_0600_and_aclose_removes_it(tmp_path: Path) -> None:
    # A socket in a folder of the user's (their /tmp/x.sock, ~/x.sock) must not chmod that folder to 0700, as it
    # did (pdf-spec's rule): only a folder the server makes is made 0700 (test_created_directories_are_0700).
    existing = tmp_path / "lax"
    existing.mkdir()
    existing.chmod(0o755)
    s = Served(EchoModel(), existing / "x.sock")
    try:
        assert stat.S_IMODE(existing.stat().st_mode) == 0o755
        st_sock = os.lstat(s.path)
        assert stat.S_ISSOCK(st_sock.st_mode) and stat.S_IMODE(st_sock.st_mode) == 0o600
        assert s.server.path == s.path
    finally:
        s.close()
    assert not os.path.exists(s.path)


def test_created_directories_are_0700(served: Served) -> None:
    assert stat.S_IMODE(os.stat(os.path.dirname(served.path)).st_mode) == 0o700


def _server_on(path: Path) -> tuple[LoopThread, Host, WireServer]:
    loop = LoopThread()
    host = Host.from_model(EchoModel(), name="echo")  # type: ignore[arg-type]
    loop.run(host.start())
    return loop, host, WireServer(host, path)


def test_refuses_symlink_regular_file_and_live_socket_and_removes_stale(tmp_path: Path, served: Served) -> None:
    loop, host, _ = _server_on(tmp_path / "unused")
    try:
        link = tmp_path / "link.sock"
        link.symlink_to(tmp_path / "elsewhere")
        with pytest.raises(SocketPathError, match="symbolic link"):
            loop.run(WireServer(host, link).start())
        assert link.is_symlink()

        plain = tmp_path / "plain.sock"
        plain.write_text("not a socket")
        with pytest.raises(SocketPathError, match="not a socket"):
            loop.run(WireServer(host, plain).start())
        assert plain.read_text() == "not a socket"

        with pytest.raises(SocketPathError, match="already serving"):
            loop.run(WireServer(host, served.path).start())
        assert_served_ok(served.path)

        stale_path = tmp_path / "stale.sock"
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(str(stale_path))  # bound, never listening: what a host that died leaves behind
        stale.close()
        fresh = WireServer(host, stale_path)
        loop.run(fresh.start())
        assert_served_ok(str(stale_path))
        loop.run(fresh.aclose())
        assert not stale_path.exists()
    finally:
        loop.run(host.aclose())
        loop.stop()


def test_start_before_the_host_is_ready_is_refused(tmp_path: Path) -> None:
    loop = LoopThread()
    try:
        host = Host.from_model(EchoModel(), name="echo")  # type: ignore[arg-type]
        with pytest.raises(RuntimeError, match="host"):
            loop.run(WireServer(host, tmp_path / "x.sock").start())
        assert not (tmp_path / "x.sock").exists()
    finally:
        loop.stop()


# -- the malformed corpus (spec §8 TestMalformedFrames, V6) ---------------------------------------------------------

CORPUS: list[tuple[str, bytes, str | None]] = [
    ("empty", b"", None),
    ("length only", b"\x05", ErrorCode.INVALID_REQUEST),
    ("no payload", b"\x05\x01", ErrorCode.INVALID_REQUEST),
    ("short payload", b"\x05\x01ab", ErrorCode.INVALID_REQUEST),
    ("unknown type 0x7f", b"\x01\x7fx", ErrorCode.INVALID_REQUEST),
    ("zero-length json", b"\x00\x01", ErrorCode.INVALID_REQUEST),
    ("http request", b"GET / HTTP/1.1\r\n\r\n", ErrorCode.INVALID_REQUEST),
    ("twelve continuation bytes", b"\x80" * 12, ErrorCode.INVALID_REQUEST),
    ("six-byte varint", b"\x80\x80\x80\x80\x80\x01", ErrorCode.INVALID_REQUEST),
    ("64 MiB + 1", b"\x81\x80\x80\x20\x01", ErrorCode.FRAME_TOO_LARGE),
    ("2^40 length", codec.encode_uvarint(1 << 40)[:5] + b"\x01", ErrorCode.INVALID_REQUEST),
    ("blob first", b"\x00\x02", ErrorCode.INVALID_REQUEST),
    ("not json", frame(1, b"{nope"), ErrorCode.INVALID_REQUEST),
    ("json array", frame(1, b"[1]"), ErrorCode.INVALID_REQUEST),
    ("messages null is empty: semantic", b"", None),  # replaced below
    ("bad role", frame(1, request_json(messages=[{"role": "User", "content": []}])), ErrorCode.INVALID_REQUEST),
    ("wire version 2", frame(1, request_json(wire_version=2)), ErrorCode.WIRE_VERSION_UNSUPPORTED),
    ("wire version missing", frame(1, codec.go_json({"id": "x", "messages": []})), ErrorCode.WIRE_VERSION_UNSUPPORTED),
    ("NaN", frame(1, b'{"wire_version":1,"messages":[],"temperature":NaN}'), ErrorCode.INVALID_REQUEST),
    ("float version", frame(1, b'{"wire_version":1.0,"messages":[]}'), ErrorCode.INVALID_REQUEST),
]
CORPUS = [c for c in CORPUS if not c[0].startswith("messages null")]


def _image_request(attachments: int = 1, request_id: str = "p") -> bytes:
    atts = [{"kind": "image", "id": f"a{i}", "width": 1, "height": 1} for i in range(attachments)]
    content = [{"type": "image", "attachment_id": "a0"}, {"type": "text", "text": "read"}]
    return frame(1, request_json(id=request_id, messages=[{"role": "user", "content": content}], attachments=atts))


def _descriptor(attachment_id: str, length: int, kind: str = "attachment_blob") -> bytes:
    return frame(1, codec.go_json({"type": kind, "attachment_id": attachment_id, "len": length}))


BLOB_CORPUS: list[tuple[str, bytes, str]] = [
    ("descriptor len 99, blob 3", _image_request() + _descriptor("a0", 99) + frame(2, b"abc"), "invalid_request"),
    ("descriptor for an unknown id", _image_request() + _descriptor("other", 3), "invalid_request"),
    ("descriptor type wrong", _image_request() + _descriptor("a0", 3, "blob"), "invalid_request"),
    ("json where the blob belongs", _image_request() + _descriptor("a0", 3) + frame(1, b"{}"), "invalid_request"),
    ("blob where a descriptor belongs", _image_request() + frame(2, b"abc"), "invalid_request"),
    (
        "second blob for one id",
        _image_request(2) + _descriptor("a0", 3) + frame(2, b"abc") + _descriptor("a0", 3),
        "invalid_request",
    ),
    ("33 attachments, refused before any blob", _image_request(33), "invalid_request"),
    ("descriptor over the frame cap", _image_request() + _descriptor("a0", MAX_FRAME + 1), "frame_too_large"),
    ("eof inside the blob", _image_request() + _descriptor("a0", 3) + b"\x03\x02a", "invalid_request"),
]


@pytest.mark.parametrize(("name", "data", "code"), CORPUS + BLOB_CORPUS, ids=[c[0] for c in CORPUS + BLOB_CORPUS])
def test_malformed_input_gets_its_code_then_a_close(shared: Served, name: str, data: bytes, code: str | None) -> None:
    events, took = exchange(shared.path, data)
    if code is None:
        assert events == []
    else:
        assert len(events) == 1, events
        error = events[0]
        assert isinstance(error, codec.Error) and error.code == code, error
        assert error.message
        if name.startswith(("wire version", "descriptor", "second", "33", "json where", "blob where", "eof inside")):
            assert error.id in ("bad", "p", "x"), "errors after the request was parsed echo its id"
    assert took < TIMEOUT / 2


def test_wire_version_2_is_refused_without_reading_its_blobs(shared: Served) -> None:
    # The server answers and closes straight after the request frame; the 1 MB blob it never reads is simply lost.
    data = frame(1, request_json(wire_version=2, attachments=[{"kind": "image", "id": "a", "width": 1, "height": 1}]))
    with connect(shared.path) as sock:
        sock.sendall(data)
        events = responses(read_until_close(sock))
    assert [(type(e), getattr(e, "code", None), e.id) for e in events] == [
        (codec.Error, "wire_version_unsupported", "bad")
    ]


def test_oversize_declaration_allocates_nothing(shared: Served) -> None:
    tracemalloc.start()
    try:
        for data in (b"\x81\x80\x80\x20\x01", _image_request() + _descriptor("a0", MAX_FRAME + 1)):
            tracemalloc.reset_peak()
            events, _ = exchange(shared.path, data)
            assert isinstance(events[0], codec.Error) and events[0].code == "frame_too_large"
            assert tracemalloc.get_traced_memory()[1] < 4 << 20
    finally:
        tracemalloc.stop()


# -- semantic errors keep the connection --------------------------------------------------------------------------

SEMANTIC: list[tuple[str, codec.Request, str]] = [
    ("no messages", codec.Request(id="s", messages=()), "invalid_request"),
    ("empty content", codec.Request(id="s", messages=(codec.Message(codec.Role.USER, ()),)), "invalid_request"),
    (
        "unknown block type",
        codec.Request(id="s", messages=(codec.Message(codec.Role.USER, (codec.OtherBlock("hologram"),)),)),
        "invalid_request",
    ),
    (
        "tool block",
        codec.Request(id="s", messages=(codec.Message(codec.Role.USER, (codec.OtherBlock("tool_use"),)),)),
        "invalid_request",
    ),
    ("temperature out of range", text_request(request_id="s", temperature=-1.0), "invalid_request"),
    ("top_p out of range", text_request(request_id="s", top_p=1.5), "invalid_request"),
    (
        "image for a text-only model",
        codec.page_request("s", np.zeros((2, 3, 3), np.uint8)),
        "attachment_unsupported",
    ),
]


@pytest.mark.parametrize(("name", "request_", "code"), SEMANTIC, ids=[s[0] for s in SEMANTIC])
def test_semantic_error_keeps_the_connection(shared: Served, name: str, request_: codec.Request, code: str) -> None:
    with connect(shared.path) as sock:
        for _ in range(2):
            send_request(sock, request_)
            events = read_response(sock)
            assert len(events) == 1 and isinstance(events[0], codec.Error), events
            assert (events[0].code, events[0].id) == (code, "s")
        send_request(sock, text_request("again", request_id="next", max_tokens=4))
        events = read_response(sock)
    assert "".join(e.text for e in events if isinstance(e, codec.FrameDelta)) == "echo"
    assert isinstance(events[-1], codec.Done) and events[-1].id == "next"


def test_image_with_bad_size_is_semantic_and_keeps_the_connection(tmp_path: Path) -> None:
    # A 0-wide image, or a blob that is not width*height*3: well framed, so every byte was consumed, but nonsense.
    s = Served(EchoModel(vision=True), tmp_path / "v.sock")
    content = [{"type": "image", "attachment_id": "a0"}]
    try:
        with connect(s.path) as sock:
            for width, blob in ((0, b"x"), (2, b"abc")):
                att = {"kind": "image", "id": "a0", "width": width, "height": 1}
                msgs = [{"role": "user", "content": content}]
                sock.sendall(frame(1, request_json(id="z", messages=msgs, attachments=[att])))
                sock.sendall(_descriptor("a0", len(blob)) + frame(2, blob))
                events = read_response(sock)
                assert isinstance(events[0], codec.Error) and (events[0].code, events[0].id) == ("invalid_request", "z")
            send_request(sock, text_request(max_tokens=2))
            assert isinstance(read_response(sock)[-1], codec.Done)
    finally:
        s.close()


# -- answers ------------------------------------------------------------------------------------------------------


def test_streams_deltas_then_done_with_real_counts_and_stop_reasons(shared: Served) -> None:
    with connect(shared.path) as sock:
        send_request(sock, text_request("hello", request_id="a"))
        events = read_response(sock)
        send_request(sock, text_request("hello", request_id="b", max_tokens=3))
        bounded = read_response(sock)
    deltas = [e for e in events if isinstance(e, codec.FrameDelta)]
    assert "".join(d.text for d in deltas) == "echo: hello" and all(d.id == "a" for d in deltas)
    done = events[-1]
    assert isinstance(done, codec.Done)
    assert (done.input_tokens, done.output_tokens, done.stop_reason) == (5, 11, StopReason.END_TURN)
    assert done.backend == "modelhost/echo"
    assert "".join(e.text for e in bounded if isinstance(e, codec.FrameDelta)) == "ech"
    assert isinstance(bounded[-1], codec.Done) and bounded[-1].stop_reason == StopReason.MAX_TOKENS
    assert bounded[-1].output_tokens == 3


def test_image_request_reaches_the_model_intact(tmp_path: Path) -> None:
    s = Served(EchoModel(vision=True), tmp_path / "v.sock")
    try:
        page = np.random.default_rng(1).integers(0, 256, (331, 255, 3), dtype=np.uint8)
        with connect(s.path) as sock:
            send_request(sock, codec.page_request("page-1", page))
            events = read_response(sock)
        assert "".join(e.text for e in events if isinstance(e, codec.FrameDelta)) == image_reply(page)
        (messages,) = s.model.calls
        (image,) = messages[-1].images
        assert isinstance(image, np.ndarray) and image.shape == (331, 255, 3) and image.dtype == np.uint8
        assert messages[-1].content == codec.DEFAULT_PROMPT
    finally:
        s.close()


def test_two_connections_are_served_at_once(tmp_path: Path) -> None:
    s = Served(EchoModel(delay=0.01), tmp_path / "x.sock")
    try:
        with connect(s.path) as a, connect(s.path) as b:
            send_request(a, text_request("first", request_id="a"))
            send_request(b, text_request("second", request_id="b"))
            events_a, events_b = read_response(a), read_response(b)
        assert "".join(e.text for e in events_a if isinstance(e, codec.FrameDelta)) == "echo: first"
        assert "".join(e.text for e in events_b if isinstance(e, codec.FrameDelta)) == "echo: second"
    finally:
        s.close()


def test_queue_full_is_reported_and_keeps_the_connection(tmp_path: Path) -> None:
    s = Served(EchoModel(delay=0.02, repeat=20), tmp_path / "x.sock", max_queue=1)
    try:
        with connect(s.path) as running, connect(s.path) as waiting, connect(s.path) as third:
            send_request(running, text_request("long", request_id="run"))
            wait_until(lambda: s.host.running == 1)
            send_request(waiting, text_request("w", request_id="wait"))
            wait_until(lambda: s.host.waiting == 1)
            send_request(third, text_request("x", request_id="full"))
            events = read_response(third)
            assert isinstance(events[0], codec.Error) and (events[0].code, events[0].id) == ("queue_full", "full")
            running.close()  # cancels the long one; the waiter runs, then the third may try again
            assert isinstance(read_response(waiting)[-1], codec.Done)
            send_request(third, text_request("x", request_id="again", max_tokens=2))
            assert isinstance(read_response(third)[-1], codec.Done)
    finally:
        s.close()


# -- cancellation and shutdown ------------------------------------------------------------------------------------


def test_disconnect_is_seen_without_a_write_and_frees_the_model(tmp_path: Path) -> None:
    # A silent model writes nothing while it works (a long prefill, a thinking channel), so only reading the
    # connection can tell that the client left: the generation must stop long before its 10 s would end.
    model = EchoModel(delay=0.05, repeat=40, silent=True)
    s = Served(model, tmp_path / "x.sock")
    try:
        sock = connect(s.path)
        send_request(sock, text_request("hello", max_tokens=1000))
        assert model.started.wait(TIMEOUT)
        gone = time.monotonic()
        sock.close()
        wait_until(lambda: s.host.running == 0, timeout=3.0)
        assert time.monotonic() - gone < 3.0
        finished = s.host.metrics.requests_finished.labels("echo", "cancelled")._value.get()
        assert finished == 1
        assert_served_ok(s.path)
    finally:
        s.close()


def test_aclose_finishes_in_flight_and_removes_the_socket_at_once(tmp_path: Path) -> None:
    s = Served(EchoModel(delay=0.01), tmp_path / "x.sock")
    sock = connect(s.path)
    send_request(sock, text_request("in flight", max_tokens=50))
    assert s.model.started.wait(TIMEOUT)
    idle = connect(s.path)
    closer = threading.Thread(target=s.close, kwargs={"grace": 5.0})
    closer.start()
    wait_until(lambda: not os.path.exists(s.path))
    with pytest.raises(OSError) as info:
        connect(s.path)
    assert info.value.errno in (errno.ENOENT, errno.ECONNREFUSED)
    events = read_response(sock)
    assert "".join(e.text for e in events if isinstance(e, codec.FrameDelta)) == "echo: in flight"
    assert read_until_close(sock) == b"" and read_until_close(idle) == b""
    closer.join(TIMEOUT)
    assert not closer.is_alive()
    sock.close()
    idle.close()


def test_a_reader_that_stops_reading_is_dropped_after_the_write_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "WRITE_TIMEOUT", 0.3)
    # 1 KB a token, a token every 5 ms: the unread answer fills every buffer within two seconds; generating all of
    # it would take 20 s, so only the write timeout can end this request in time.
    model = EchoModel(repeat=800_000, token_chars=1000, delay=0.005)
    s = Served(model, tmp_path / "x.sock")
    try:
        sock = connect(s.path)
        send_request(sock, text_request("hello", max_tokens=100000))
        assert model.started.wait(TIMEOUT)
        wait_until(lambda: s.host.running == 0, timeout=5.0)  # cancelled: nobody is reading the answer
        assert s.host.metrics.requests_finished.labels("echo", "cancelled")._value.get() == 1
        wait_until(lambda: s.server.connections == 0)
        sock.close()
        assert_served_ok(s.path)
    finally:
        s.close()


# -- hypothesis: arbitrary byte streams -----------------------------------------------------------------------------

_json_payloads = st.sampled_from(
    [
        request_json(),
        codec.request_to_json(text_request(max_tokens=2)),
        _image_request()[2:],
        codec.go_json({"type": "attachment_blob", "attachment_id": "a0", "len": 3}),
        b"{}",
        b"",
        b"null",
    ]
)


@st.composite
def _frames(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.binary(max_size=64))
    payload = draw(st.one_of(_json_payloads, st.binary(max_size=32)))
    frame_type = draw(st.sampled_from([1, 1, 2, draw(st.integers(0, 255))]))
    length = len(payload) if kind != 3 else draw(st.integers(0, MAX_FRAME + 2))
    return codec.encode_uvarint(length) + bytes([frame_type]) + payload


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=st.lists(_frames(), max_size=5), half_close=st.booleans())
def test_arbitrary_streams_are_answered_or_closed_and_never_hang(
    shared: Served, chunks: list[bytes], half_close: bool
) -> None:
    data = b"".join(chunks)
    tracemalloc.start()
    try:
        with connect(shared.path) as sock:
            sock.sendall(data)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
            else:
                sock.settimeout(0.5)  # a valid request is answered; then the server waits for more, which is fine
            raw = bytearray()
            try:
                while chunk := sock.recv(65536):
                    raw += chunk
            except (TimeoutError, ConnectionResetError):
                pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    decoder = codec.FrameDecoder(expect=codec.FrameType.JSON)
    for f in decoder.feed(bytes(raw)):
        event = codec.decode_response(f.payload)
        assert event is not None
        if isinstance(event, codec.Error):
            assert event.code in {c.value for c in ErrorCode}
    assert decoder.at_boundary, "the server never leaves a frame half-written"
    # Preallocating a declared payload is bounded by the cap: never more than one frame's worth at a time.
    assert peak < MAX_FRAME + (8 << 20)


def test_a_client_that_connects_as_the_server_closes_is_closed_not_left_waiting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The close cancels the accept loop in the same loop turn that finds the listener readable: asyncio 3.11's
    # sock_accept then accepts the connection into a future that is already cancelled and drops the socket, which
    # stays open (nobody reading it) until the garbage collector finds it.
    import asyncio

    path = str(tmp_path / "x.sock")

    async def main() -> bytes:
        host = Host.from_model(EchoModel(), name="echo")
        await host.start()
        wire = WireServer(host, path)
        await wire.start()
        await asyncio.sleep(0.05)  # the accept loop is waiting for a connection
        closing = asyncio.create_task(wire.aclose(grace=1.0))
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(path)  # into the backlog, before the close's first step and the listener's readiness run
        await closing
        await host.aclose()
        client.settimeout(2.0)
        try:
            return await asyncio.get_running_loop().run_in_executor(None, client.recv, 1)
        except ConnectionResetError:
            return b""
        finally:
            client.close()

    assert asyncio.run(main()) == b""
    assert "InvalidStateError" not in caplog.text

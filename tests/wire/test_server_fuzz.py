"""Hostile frames into a real socket door: whatever the bytes, the server answers with well-formed response frames
(a typed error, or a valid answer) and closes or keeps the connection as spec §6 says; it lives, and every
connection and buffered byte is given back afterwards.

The codec's own fuzzers (test_codec_fuzz.py) feed bytes to the decoder in memory; this one goes through the real
server's receive path (scratch buffer, payload buffers, deadlines, budget). The example count comes from the
hypothesis profile (tests/conftest.py): short in the suite, long in `make fuzz`.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelhost.testing.proc import open_fds
from modelhost.wire import codec
from modelhost.wire.server import WireLimits

from ._support import EchoModel, Served, read_response, read_until_close, responses, send_request, text_request

#: The server's deadlines, short so that an incomplete frame is cut (and the connection closed) soon after the
#: fuzzer stops sending: each example then ends with the server's close, never a test-side timeout.
LIMITS = WireLimits(idle_timeout=0.3, request_timeout=0.5, max_buffered_bytes=8 << 20)
PATIENCE = 120.0

hostile_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    st.just("x" * 5000),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
REQUEST_FIELDS = ("id", "wire_version", "messages", "attachments", "max_tokens", "temperature", "top_p", "top_k",
                  "stream", "thinking")  # fmt: skip


@st.composite
def request_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A request JSON object: a valid one with some fields replaced by hostile values."""
    base: dict[str, Any] = json.loads(codec.request_to_json(text_request(draw(st.text(max_size=8)), "f")))
    for key in draw(st.lists(st.sampled_from(REQUEST_FIELDS), max_size=4, unique=True)):
        base[key] = draw(hostile_values)
    return base


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["request", "raw", "header_only", "bad_type", "lying_length"]))
    if kind == "request":
        payload = json.dumps(draw(request_objects())).encode()
        return codec.encode_frame(codec.FrameType.JSON, payload)
    if kind == "raw":
        return draw(st.binary(max_size=64))
    if kind == "header_only":
        return codec.encode_uvarint(draw(st.integers(0, codec.MAX_FRAME * 2))) + bytes([draw(st.integers(0, 255))])
    if kind == "bad_type":
        payload = draw(st.binary(max_size=16))
        return codec.encode_uvarint(len(payload)) + bytes([draw(st.integers(3, 255))]) + payload
    payload = json.dumps(draw(request_objects())).encode()
    declared = draw(st.integers(0, len(payload) * 2 + 8))
    return codec.encode_uvarint(declared) + bytes([codec.FrameType.JSON]) + payload


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = Served(EchoModel(), tmp_path_factory.mktemp("fuzz") / "f.sock", limits=LIMITS)
    yield s
    s.close()


def _settled(served: Served) -> bool:
    return served.server.connections == 0 and served.server.buffered_bytes == 0


def _wait(predicate: Any) -> None:
    deadline = time.monotonic() + PATIENCE
    while not predicate():
        assert time.monotonic() < deadline, "the server did not settle"
        time.sleep(0.01)


@pytest.mark.fuzz
def test_hostile_frames_into_a_real_socket_get_typed_answers(served: Served) -> None:
    fds = open_fds()

    @given(st.lists(frames(), min_size=1, max_size=4))
    def run(stream: list[bytes]) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(PATIENCE)
        sock.connect(served.path)
        try:
            for chunk in stream:
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server already refused the stream and closed
        data = read_until_close(sock, limit=1 << 24)
        sock.close()
        events = responses(data)  # every byte the server wrote is a well-formed response frame
        for event in events:
            if isinstance(event, codec.Error):
                assert event.code in set(codec.ErrorCode), event
        if events:
            assert codec.is_terminal(events[-1]), events[-1]
        _wait(lambda: _settled(served))

    run()
    # The server lives and answers a normal request; nothing it held is left over.
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(PATIENCE)
    sock.connect(served.path)
    send_request(sock, text_request("alive?"))
    assert isinstance(read_response(sock)[-1], codec.Done)
    sock.close()
    _wait(lambda: _settled(served))
    assert open_fds() <= fds + 2

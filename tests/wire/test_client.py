"""The client and the in-process door: dialing, streaming, errors by code, recognize's partial pages, Local == Client.

Servers here are real sockets on a Host around the stand-in EchoModel (see _support); the end-to-end tests with the
real embedded model are in test_e2e.py.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from modelhost.errors import InvalidInputError, ModelHostError
from modelhost.inference.types import Message
from modelhost.wire import codec
from modelhost.wire.client import Client, Local, dial
from modelhost.wire.errors import ConnectError, RemoteError, TruncatedError

from ._support import TIMEOUT, EchoModel, Served, image_reply, wait_until

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def vision(tmp_path: Path) -> Iterator[Served]:
    s = Served(EchoModel(vision=True), tmp_path / "run" / "v.sock")
    yield s
    s.close()


@pytest.fixture
def text_only(tmp_path: Path) -> Iterator[Served]:
    s = Served(EchoModel(), tmp_path / "t.sock")
    yield s
    s.close()


def user(text: str, *images: object) -> list[Message]:
    return [Message("user", text, images=images)]


# -- dialing --------------------------------------------------------------------------------------------------------


def test_dial_waits_for_a_host_that_binds_later(tmp_path: Path) -> None:
    path = tmp_path / "late.sock"
    holder: list[Served] = []
    starter = threading.Timer(0.4, lambda: holder.append(Served(EchoModel(), path)))
    starter.start()
    try:
        began = time.monotonic()
        with Client(path, timeout=TIMEOUT) as client:  # ENOENT until the timer fires: retried, not failed
            assert "".join(client.chat(user("late"))) == "echo: late"
        assert time.monotonic() - began >= 0.3
    finally:
        starter.join()
        for s in holder:
            s.close()


def test_dial_retries_connection_refused(tmp_path: Path) -> None:
    path = tmp_path / "refused.sock"
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    squatter.bind(str(path))  # bound but not listening: ECONNREFUSED, as a host that died leaves it

    def replace() -> Served:
        squatter.close()
        return Served(EchoModel(), path)  # removes the stale socket and binds for real

    holder: list[Served] = []
    starter = threading.Timer(0.3, lambda: holder.append(replace()))
    starter.start()
    try:
        sock = dial(str(path), timeout=TIMEOUT)
        sock.close()
    finally:
        starter.join()
        for s in holder:
            s.close()


def test_dial_waits_its_whole_timeout_before_giving_up(tmp_path: Path) -> None:
    """A timeout that is not a whole number of retry intervals is still waited in full: dial gave up at the last
    interval's start (0.1 s into a 0.15 s timeout; 0.26 s into the 0.35 s below, which failed CI under load)."""
    began = time.monotonic()
    with pytest.raises(ConnectError):
        dial(str(tmp_path / "nobody.sock"), timeout=0.15)
    assert time.monotonic() - began >= 0.15


def test_dial_gives_up_after_its_timeout_with_a_hint(tmp_path: Path) -> None:
    began = time.monotonic()
    with pytest.raises(ConnectError, match=r"\(is a model host running\?\)$") as info:
        dial(str(tmp_path / "nobody.sock"), timeout=0.35)
    took = time.monotonic() - began
    assert 0.3 <= took < 3.0
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == errno.ENOENT
    assert info.value.code == "connect_failed" and isinstance(info.value, ModelHostError)


@pytest.mark.skipif(os.geteuid() == 0, reason="root is never refused by file permissions")
def test_dial_does_not_retry_permission_denied(text_only: Served) -> None:
    os.chmod(text_only.path, 0o000)
    try:
        began = time.monotonic()
        with pytest.raises(ConnectError, match="running"):
            dial(text_only.path, timeout=TIMEOUT)
        assert time.monotonic() - began < 1.0
    finally:
        os.chmod(text_only.path, 0o600)


def test_permission_denied_is_not_retried_even_as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[str] = []

    def refuse(self: socket.socket, address: str) -> None:
        attempts.append(address)
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    with pytest.raises(ConnectError, match=r"Permission denied \(is a model host running\?\)$"):
        dial("/nowhere.sock", timeout=TIMEOUT)
    assert attempts == ["/nowhere.sock"]


def test_client_defaults_to_the_inferd_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/7")
    assert Client().path == "/run/user/7/inferd/inferd.sock"


# -- chat -----------------------------------------------------------------------------------------------------------


def test_chat_streams_and_records_done(text_only: Served) -> None:
    with Client(text_only.path, timeout=TIMEOUT) as client:
        deltas = list(client.chat(user("hello")))
        assert "".join(deltas) == "echo: hello" and len(deltas) == len("echo: hello")
        done = client.last_done
        assert done is not None and (done.input_tokens, done.output_tokens, done.stop_reason) == (5, 11, "end_turn")
        assert "".join(client.chat(user("hello"), max_tokens=4)) == "echo"
        assert client.last_done is not None and client.last_done.stop_reason == "max_tokens"


def test_chat_error_carries_the_remote_code_and_the_connection_survives(text_only: Served) -> None:
    with Client(text_only.path, timeout=TIMEOUT) as client:
        with pytest.raises(RemoteError) as info:
            list(client.chat(user("x"), temperature=-1.0))
        assert info.value.code == "invalid_request" and "temperature" in str(info.value)
        assert info.value.request_id.startswith("chat-")
        sock = client._sock
        assert "".join(client.chat(user("fine"))) == "echo: fine"
        assert client._sock is sock, "a semantic error keeps the connection"
        with pytest.raises(RemoteError) as info:
            list(client.chat(user("look", np.zeros((2, 2, 3), np.uint8))))
        assert info.value.code == "attachment_unsupported"


def test_roles_the_wire_cannot_carry_are_refused_before_sending(text_only: Served) -> None:
    with Client(text_only.path, timeout=TIMEOUT) as client, pytest.raises(InvalidInputError, match="tool"):
        list(client.chat([Message("tool", "result")]))


def test_abandoning_a_chat_cancels_it_and_the_next_call_reconnects(tmp_path: Path) -> None:
    s = Served(EchoModel(delay=0.02, repeat=200), tmp_path / "x.sock")
    try:
        with Client(s.path, timeout=TIMEOUT) as client:
            stream = client.chat(user("long"))
            assert next(stream) == "e"
            stream.close()  # leaving the loop early: the connection is closed, which is the protocol's cancel
            wait_until(lambda: s.host.running == 0, timeout=3.0)
            assert s.host.metrics.requests_finished.labels("echo", "cancelled")._value.get() == 1
            assert "".join(client.chat(user("short"), max_tokens=3)) == "ech"
    finally:
        s.close()


# -- recognize ------------------------------------------------------------------------------------------------------


def test_recognize_returns_the_page_text(vision: Served) -> None:
    page = np.random.default_rng(3).integers(0, 256, (64, 48, 3), dtype=np.uint8)
    with Client(vision.path, timeout=TIMEOUT) as client:
        assert client.recognize(page) == (image_reply(page), None)
        as_pil = Image.fromarray(page)
        png = io.BytesIO()
        as_pil.save(png, format="PNG")
        assert client.recognize(png.getvalue()) == (image_reply(page), None)
        assert client.recognize(as_pil.convert("RGBA")) == (image_reply(page), None)
    (messages,) = vision.model.calls[:1]
    assert messages[-1].content == codec.DEFAULT_PROMPT


def test_recognize_keeps_a_truncated_page_and_reports_it(vision: Served) -> None:
    page = np.zeros((8, 8, 3), np.uint8)
    with Client(vision.path, timeout=TIMEOUT) as client:
        text, error = client.recognize(page, max_tokens=5)
    assert text == image_reply(page)[:5]
    assert isinstance(error, TruncatedError) and error.code == "max_tokens"


def test_recognize_returns_a_remote_failure_beside_the_text_so_far(text_only: Served) -> None:
    with Client(text_only.path, timeout=TIMEOUT) as client:
        text, error = client.recognize(np.zeros((4, 4, 3), np.uint8))
    assert text == ""
    assert isinstance(error, RemoteError) and error.code == "attachment_unsupported"


def test_recognize_refuses_an_image_the_wire_cannot_carry(vision: Served) -> None:
    with Client(vision.path, timeout=TIMEOUT) as client, pytest.raises(InvalidInputError):
        client.recognize(np.zeros((0, 4, 3), np.uint8))


# -- Local: the same handler without a socket ------------------------------------------------------------------------


def test_local_gives_identical_results(vision: Served) -> None:
    page = np.random.default_rng(5).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    with Client(vision.path, timeout=TIMEOUT) as remote, Local(vision.host) as local:
        results = []
        for session in (remote, local):
            chat = list(session.chat(user("same"), max_tokens=7))
            chat_done = session.last_done
            page_result = session.recognize(page)
            truncated = session.recognize(page, max_tokens=3)
            with pytest.raises(RemoteError) as info:
                list(session.chat(user("x"), top_p=2.0))
            results.append(
                (chat, chat_done, page_result, truncated[0], type(truncated[1]), info.value.code, str(info.value))
            )
    assert results[0] == results[1]
    assert results[0][1] == codec.Done("chat-1", 4, 7, "max_tokens", "modelhost/echo")


def test_local_events_are_the_handlers_events(vision: Served) -> None:
    request = codec.Request(id="q", messages=(codec.Message(codec.Role.USER, (codec.TextBlock("hi"),)),))
    with Client(vision.path, timeout=TIMEOUT) as remote, Local(vision.host) as local:
        assert list(remote.request(request)) == list(local.request(request))


def test_a_long_lived_client_survives_a_host_restart(tmp_path: Path) -> None:
    path = tmp_path / "x.sock"
    first = Served(EchoModel(), path)
    with Client(path, timeout=TIMEOUT) as client:
        assert "".join(client.chat(user("one"))) == "echo: one"
        first.close()
        second = Served(EchoModel(), path)
        try:
            assert "".join(client.chat(user("two"))) == "echo: two"  # the closed connection is replaced
        finally:
            second.close()


def test_a_fatal_error_frame_closes_the_connection_even_if_the_host_has_not_yet(tmp_path: Path) -> None:
    # The host closes its end after a fatal error (spec §6), but its FIN may trail the error frame: a client that
    # kept the socket would send its next request into a connection nobody reads any more. This stand-in host
    # answers every request with a fatal backend_unavailable and never closes, so only the client's own close helps.
    path = str(tmp_path / "fatal.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn)
            decoder = codec.FrameDecoder(expect=codec.FrameType.JSON)
            frames: list[codec.Frame] = []
            while not frames:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                frames = decoder.feed(chunk)
            if frames:
                request = codec.decode_request_json(frames[0].payload)
                error = codec.Error(request.id, codec.ErrorCode.BACKEND_UNAVAILABLE, "host is closing")
                conn.sendall(codec.encode_response(error))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with Client(path, timeout=2.0) as client:
            for _ in range(2):
                with pytest.raises(RemoteError) as info:
                    list(client.chat(user("hi")))
                assert info.value.code == "backend_unavailable"
        assert len(accepted) == 2, "the second request must go over a fresh connection"
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        listener.close()
        thread.join(TIMEOUT)
        for conn in accepted:
            conn.close()

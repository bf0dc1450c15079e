"""Shared pieces of the wire's server, client and end-to-end tests: a stand-in model and a host on a loop thread.

The stand-in model answers at a pace the test sets, so these tests pin the door's own behaviour (framing, codes,
connection fate, cancellation) without a real model's speed blurring it. Its chat echoes what it was given: the
last turn's text, or each image's size and a checksum of its pixels, which proves the bytes arrived intact and in
order without a vision model.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import zlib
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from modelhost.host import Host
from modelhost.inference.types import Message, Token
from modelhost.testing import waiting
from modelhost.testing.standins import EOS, ScriptedModel
from modelhost.testing.waiting import STATE_WAIT_SECONDS
from modelhost.wire import codec
from modelhost.wire.server import WireLimits, WireServer

T = TypeVar("T")

#: Every test's wait is bounded by this: nothing in these tests may hang, a failure must be a failure. Minutes, not
#: seconds: a socket read of 10 s ran out on a busy machine while the server was right (modelhost.testing.waiting).
TIMEOUT = STATE_WAIT_SECONDS


def image_reply(image: Any) -> str:
    """What EchoModel answers for an image: its size and a CRC of its RGB bytes."""
    array = np.asarray(image)
    return f"{array.shape[1]}x{array.shape[0]} crc={zlib.crc32(np.ascontiguousarray(array).data):08x}"


class EchoModel(ScriptedModel):
    """A model whose answer is "echo: <last text>" (or one image_reply per image), `token_chars` characters a token.

    `delay` seconds per token paces it; `started` is set when a generation begins (prefill is over); `calls` holds
    the messages of every chat.
    """

    def __init__(
        self, *, vision: bool = False, delay: float = 0.0, repeat: int = 1, silent: bool = False, token_chars: int = 1
    ) -> None:
        super().__init__(name="echo", max_tokens=512, delay=delay, vision=vision)
        self.token_chars = token_chars
        self.silent = silent  # every token's text is empty: nothing is written until done (a long "thinking")
        self.repeat = repeat
        self.calls: list[Sequence[Message]] = []

    def _reply(self, messages: Sequence[Message]) -> str:
        last = messages[-1]
        if last.images:
            return " ".join(image_reply(image) for image in last.images)
        return "echo: " + last.content * self.repeat

    def _pieces(self, reply: str) -> list[bytes | None]:
        k = self.token_chars
        return [b"" if self.silent else reply[i : i + k].encode() for i in range(0, len(reply), k)] + [EOS]

    def script(self, prompt: str) -> list[bytes | None]:
        return self._pieces("echo: " + prompt)

    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        self.calls.append(messages)
        return self.run(self._pieces(self._reply(messages)), sum(len(m.content) for m in messages), opts)


class LoopThread:
    """An event loop on a thread of its own, so synchronous clients can talk to a server in the same process."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="wire-test-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = TIMEOUT) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    def call(self, fn: Callable[[], T]) -> T:
        async def wrapper() -> T:
            return fn()

        return self.run(wrapper())

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(TIMEOUT)
        self.loop.close()


class Served:
    """A Host around `model` and a WireServer on `path`, running on a LoopThread."""

    def __init__(self, model: Any, path: Path, *, max_queue: int = 8, limits: WireLimits | None = None) -> None:
        self.model = model
        self.path = str(path)
        self.loop = LoopThread()
        self.host = Host.from_model(model, name="echo", max_queue=max_queue)
        self.server = WireServer(self.host, self.path, limits=limits)

        async def start() -> None:
            await self.host.start()
            await self.server.start()

        self.loop.run(start())

    def close(self, grace: float = 2.0) -> None:
        async def stop() -> None:
            await self.server.aclose(grace)
            await self.host.aclose(grace)

        try:
            self.loop.run(stop(), timeout=TIMEOUT + grace)
        finally:
            self.loop.stop()


def connect(path: str | Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT)
    sock.connect(str(path))
    return sock


def read_until_close(sock: socket.socket, limit: int = 1 << 20) -> bytes:
    """Everything the server sends until it closes (a reset after its last frame counts as a close)."""
    out = bytearray()
    while len(out) < limit:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        out += chunk
    return bytes(out)


def responses(data: bytes) -> list[codec.ResponseEvent]:
    """Decode a whole response byte stream (every frame must be a JSON response frame)."""
    decoder = codec.FrameDecoder(expect=codec.FrameType.JSON)
    frames = decoder.feed(data)
    decoder.eof()
    out = []
    for frame in frames:
        event = codec.decode_response(frame.payload)
        assert event is not None
        out.append(event)
    return out


def read_response(sock: socket.socket) -> list[codec.ResponseEvent]:
    """Read one request's response events, up to and including the terminal one."""
    decoder = codec.FrameDecoder(expect=codec.FrameType.JSON)
    out: list[codec.ResponseEvent] = []
    while True:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a terminal frame; got {out}"
        for frame in decoder.feed(chunk):
            event = codec.decode_response(frame.payload)
            assert event is not None
            out.append(event)
            if codec.is_terminal(event):
                assert decoder.at_boundary
                return out


def send_request(sock: socket.socket, request: codec.Request) -> None:
    for buffer in codec.encode_request(request):
        sock.sendall(buffer)


def text_request(text: str = "hi", request_id: str = "r1", **fields: Any) -> codec.Request:
    return codec.Request(id=request_id, messages=(codec.Message(codec.Role.USER, (codec.TextBlock(text),)),), **fields)


def wait_until(predicate: Callable[[], bool], timeout: float = STATE_WAIT_SECONDS) -> None:
    """Poll a state (modelhost.testing.waiting: bounded against a hang, not by a deadline of seconds)."""
    waiting.wait_until(predicate, timeout)

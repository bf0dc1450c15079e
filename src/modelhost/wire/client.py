"""Clients of the local wire: :class:`Client` over the socket, :class:`Local` in-process, with one interface.

Both build the same :class:`~modelhost.wire.codec.Request` from the same arguments and read the same response
events; :class:`Local` hands the request straight to the handler the socket server uses
(:func:`modelhost.wire.handler.respond`), so the two give identical results and differ only in the bytes they move.
``Local`` is the right choice when the model lives in the calling process anyway (one CLI run over one document):
a socket would add framing and a copy of every page to move pixels between two halves of one process.

There is no ping: a successful connect is the readiness signal, because a host binds only once its model is loaded.
Connect therefore retries ENOENT (not bound yet) and ECONNREFUSED (bound, not listening, or gone) every 100 ms for
up to 10 s, and nothing else: EACCES is a permission problem that waiting does not fix.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import os
import select
import socket
import time
from collections.abc import AsyncGenerator, Iterator, Sequence
from types import TracebackType
from typing import Any, Final

from modelhost.errors import InvalidInputError, ModelHostError
from modelhost.host import Host
from modelhost.inference.types import Message as ChatMessage
from modelhost.wire.address import default_address
from modelhost.wire.codec.constants import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_PROMPT,
    AttachmentKind,
    Buffer,
    ErrorCode,
    FrameType,
    Role,
    StopReason,
)
from modelhost.wire.codec.decode import decode_response
from modelhost.wire.codec.encode import encode_request
from modelhost.wire.codec.errors import WireError
from modelhost.wire.codec.frames import Frame, FrameDecoder
from modelhost.wire.codec.messages import (
    Attachment,
    ContentBlock,
    Done,
    Error,
    FrameDelta,
    ImageBlock,
    Message,
    Request,
    ResponseEvent,
    TextBlock,
    is_terminal,
)
from modelhost.wire.codec.pages import image_attachment
from modelhost.wire.errors import ConnectError, RemoteError, TruncatedError, WireProtocolError
from modelhost.wire.handler import events as handler_events

__all__ = [
    "CONNECT_RETRY_INTERVAL",
    "CONNECT_TIMEOUT",
    "DEFAULT_READ_TIMEOUT",
    "Client",
    "Local",
    "chat_request",
    "dial",
]

#: How long connect keeps retrying ENOENT/ECONNREFUSED (pdf-spec's dial): long enough to cover a host that is
#: still loading a small model, short enough that a host that is not coming fails the command in seconds.
CONNECT_TIMEOUT: Final = 10.0
#: Interval between connect attempts (pdf-spec's dial): a loading host binds within one interval of being ready.
CONNECT_RETRY_INTERVAL: Final = 0.1
#: Longest wait for any one response frame. Streaming sends a frame per token, so silence this long means a hung
#: host (or a queue ten minutes deep), and a caller is better told than kept waiting forever.
DEFAULT_READ_TIMEOUT: Final = 600.0

_RECV_CHUNK: Final = 64 * 1024  # response frames are small JSON; one recv usually holds several
_RETRY_ERRNOS: Final = frozenset({errno.ENOENT, errno.ECONNREFUSED})


def dial(path: str, *, timeout: float = CONNECT_TIMEOUT) -> socket.socket:
    """Connect to the host's socket, retrying ENOENT/ECONNREFUSED every 100 ms for up to ``timeout`` seconds.

    Raises :class:`ConnectError` ending "(is a model host running?)" when it gives up or on any other error
    (EACCES at once: the permission will not change by waiting).
    """
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        remaining = deadline - time.monotonic()
        sock.settimeout(max(remaining, CONNECT_RETRY_INTERVAL))  # a full backlog blocks connect; keep the bound
        try:
            sock.connect(path)
        except OSError as exc:
            sock.close()
            if exc.errno in _RETRY_ERRNOS and remaining > 0:
                # The last wait is cut to the deadline and one more attempt made there: a host that binds in the
                # final interval is met, and the caller waits its whole timeout, not up to an interval less.
                time.sleep(min(CONNECT_RETRY_INTERVAL, remaining))
                continue
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise ConnectError(f"modelhost: dial {path}: {reason} (is a model host running?)") from exc
        sock.settimeout(None)
        return sock


def _role(role: str) -> Role:
    try:
        return Role(role)
    except ValueError:
        raise InvalidInputError(f"role {role!r} cannot travel on the wire (system, user, assistant)") from None


def chat_request(
    messages: Sequence[ChatMessage],
    *,
    request_id: str,
    max_tokens: int | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
) -> Request:
    """The wire request for a chat: each turn's images (attachments ``<id>-<n>``) before its text, as pdf-spec orders
    a page's blocks. Raises InvalidInputError for what the wire cannot carry (a ``tool`` role, an unusable image)."""
    wire_messages: list[Message] = []
    attachments: list[Attachment] = []
    for message in messages:
        blocks: list[ContentBlock] = []
        for image in message.images:
            attachment_id = f"{request_id}-{len(attachments) + 1}"
            attachments.append(_image_attachment(attachment_id, image))
            blocks.append(ImageBlock(attachment_id))
        blocks.append(TextBlock(message.content))
        wire_messages.append(Message(_role(message.role), tuple(blocks)))
    if max_tokens is not None and max_tokens < 0:
        raise InvalidInputError(f"max_tokens must be at least 0, got {max_tokens}")
    return Request(
        id=request_id,
        messages=tuple(wire_messages),
        attachments=tuple(attachments),
        max_tokens=max_tokens or None,  # 0 means "no bound" on this wire, spelled by omission as pdf-spec does
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
    )


def _image_attachment(attachment_id: str, image: Any) -> Attachment:
    if isinstance(image, bytes | bytearray | memoryview):
        # Encoded PNG/JPEG (the contract allows it): the wire carries decoded RGB only (inferd ADR 0016).
        import io

        from PIL import Image

        try:
            image = Image.open(io.BytesIO(bytes(image)))
            image.load()
        except Exception as exc:
            raise InvalidInputError(f"image {attachment_id}: cannot decode it: {exc}") from exc
    try:
        return image_attachment(attachment_id, image)
    except (WireError, ValueError, AttributeError) as exc:
        raise InvalidInputError(f"image {attachment_id}: {exc}") from exc


class _Session:
    """What Client and Local share: building requests and turning response events into results."""

    def __init__(self) -> None:
        self.last_done: Done | None = None
        self._ids = itertools.count(1)

    def _exchange(self, request: Request) -> Iterator[ResponseEvent]:
        raise NotImplementedError

    def _events(self, request: Request) -> Iterator[ResponseEvent]:
        """The request's response events, ending with its one terminal event (raises if the stream breaks)."""
        for event in self._exchange(request):
            yield event
            if is_terminal(event):
                return
        raise WireProtocolError(f"request {request.id!r}: the response stream ended without done or error")

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
    ) -> Iterator[str]:
        """Stream the answer's text deltas; afterwards :attr:`last_done` holds the ``done`` (usage, stop reason).

        An ``error`` answer raises :class:`RemoteError` (with the host's code) after the deltas that preceded it.
        Stopping the iteration early cancels the request (the connection is closed; the next call reconnects).
        """
        request = chat_request(
            messages,
            request_id=f"chat-{next(self._ids)}",
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
        )
        return self._texts(request)

    def _texts(self, request: Request) -> Iterator[str]:
        self.last_done = None
        for event in self._events(request):
            if isinstance(event, FrameDelta):
                if event.text:
                    yield event.text
            elif isinstance(event, Done):
                self.last_done = event
            else:
                raise RemoteError(event.code, event.message, request_id=event.id)

    def recognize(
        self,
        image: Any,
        prompt: str = DEFAULT_PROMPT,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        *,
        temperature: float | None = 0.0,
    ) -> tuple[str, ModelHostError | None]:
        """Send one page (an HxWx3 uint8 array, a PIL image or encoded bytes) and collect the text it yields.

        Returns ``(text, None)`` on success, and ``(text so far, error)`` when generation fails, the connection
        breaks, or the answer stopped at ``max_tokens`` (:class:`TruncatedError`): the dominant failure on a dense
        page is running into the bound mid-table, and a partial page is worth more than an empty one. An image the
        wire cannot carry raises InvalidInputError: that is the caller's mistake, not the host's.
        """
        request_id = f"page-{next(self._ids)}"
        attachment = _image_attachment(request_id, image)
        request = Request(
            id=request_id,
            messages=(Message(Role.USER, (ImageBlock(request_id), TextBlock(prompt))),),
            attachments=(attachment,),
            max_tokens=max_tokens if max_tokens > 0 else None,
            temperature=temperature,
        )
        parts: list[str] = []
        try:
            for text in self._texts(request):
                parts.append(text)
        except ModelHostError as exc:
            return "".join(parts), exc
        text = "".join(parts)
        done = self.last_done
        if done is not None and done.stop_reason == StopReason.MAX_TOKENS:
            return text, TruncatedError(
                f"page {request_id}: generation hit the {max_tokens}-token limit; the page is truncated"
            )
        return text, None


class Client(_Session):
    """A connection to a model host over the inferd socket. Use as a context manager; one request at a time.

    ``path`` defaults to :func:`~modelhost.wire.address.default_address`. ``timeout`` bounds the wait for any one
    response frame; ``connect_timeout`` how long connect retries a host that is not up yet.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        timeout: float | None = DEFAULT_READ_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        super().__init__()
        self.path = default_address() if path is None else os.fspath(path)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._sock: socket.socket | None = None
        self._decoder = FrameDecoder(expect=FrameType.JSON)
        self._pending: list[Frame] = []
        self._buf = bytearray(_RECV_CHUNK)

    def connect(self) -> None:
        """Connect now (otherwise the first request connects). A connection the host has closed since its last
        answer (a restart, a fatal error) is replaced, so a long-lived client survives a host restart."""
        if self._sock is not None and self._peer_closed(self._sock):
            self.close()
        if self._sock is None:
            self._sock = dial(self.path, timeout=self.connect_timeout)
            self._sock.settimeout(self.timeout)
            self._decoder = FrameDecoder(expect=FrameType.JSON)
            self._pending = []

    @staticmethod
    def _peer_closed(sock: socket.socket) -> bool:
        # Between requests the host sends nothing, so a readable socket now means its EOF (or a reset). poll()
        # rather than MSG_DONTWAIT: on a socket with a timeout Python would wait that long for the peek; and not
        # select(), which refuses a descriptor numbered past 1023 (a client process with many files open).
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        if not poller.poll(0):
            return False
        try:
            return sock.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def close(self) -> None:
        """Close the connection; a request in flight is cancelled (closing is the protocol's cancel)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> Client:
        self.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def request(self, request: Request) -> Iterator[ResponseEvent]:
        """Send a prepared request and yield its response events up to and including the terminal one."""
        return self._events(request)

    def reads_images(self) -> bool:
        """Whether the host's model takes image attachments, asked without running it (connecting first, with the
        retries of :func:`dial`: ConnectError when no host comes).

        The wire has no capability frame; its semantic checks answer instead (docs/wire.md, §4.3): a host refuses an
        image to a text model (``attachment_unsupported``) before it looks at the messages, so a one-pixel image
        beside an empty message is refused either way, and which refusal comes says what the model takes, in a
        frame or two and no model time. A host that answers anything else (one that generates for it) is taken to
        read images, and the page requests will say otherwise if it does not."""
        probe = Request(
            id="probe-images",
            messages=(Message(Role.USER, ()),),
            attachments=(Attachment(AttachmentKind.IMAGE, "probe-images", 1, 1, b"\xff\xff\xff"),),
            max_tokens=1,  # a host that generates anyway stops after a token
        )
        last = None
        for event in self._events(probe):
            last = event
        return not (isinstance(last, Error) and last.code == ErrorCode.ATTACHMENT_UNSUPPORTED)

    def _exchange(self, request: Request) -> Iterator[ResponseEvent]:
        try:
            frames = encode_request(request)
        except WireError as exc:
            raise InvalidInputError(exc.message) from exc
        self.connect()
        sock = self._sock
        assert sock is not None
        finished = False
        try:
            try:
                self._send(sock, frames)
            except OSError as exc:
                # The host may have refused the request and closed before reading all of it (a wrong version, an
                # oversize blob): its error frame is then waiting to be read, and says more than EPIPE.
                refusal = self._read_refusal()
                if refusal is None:
                    raise WireProtocolError(f"sending to {self.path}: {exc}") from exc
                finished = True
                self.close()
                yield refusal
                return
            while True:
                event = self._read_event()
                finished = is_terminal(event)
                if finished and isinstance(event, Error) and not self._keeps_connection(event):
                    # Close before yielding: _events stops at the terminal event and never resumes this generator,
                    # so code after the yield would not run, and the next request would go into a connection the
                    # host is closing (its FIN may trail the error frame).
                    self.close()
                yield event
                if finished:
                    return
        finally:
            if not finished:
                self.close()  # an abandoned or broken request: closing the connection is what cancels it

    @staticmethod
    def _keeps_connection(event: Error) -> bool:
        # After a fatal error the host closes its end; reconnecting on the next request is cheaper than guessing.
        return (
            event.code
            in (
                ErrorCode.INVALID_REQUEST,
                ErrorCode.QUEUE_FULL,
                ErrorCode.ATTACHMENT_UNSUPPORTED,
            )
            and event.id != ""
        )

    @staticmethod
    def _send(sock: socket.socket, frames: list[Buffer]) -> None:
        small = bytearray()
        for frame in frames:
            if len(frame) < _RECV_CHUNK:
                small += frame
                continue
            if small:
                sock.sendall(small)
                small.clear()
            sock.sendall(frame)  # a page's blob goes out from the caller's buffer, uncopied
        if small:
            sock.sendall(small)

    def _read_event(self) -> ResponseEvent:
        sock = self._sock
        assert sock is not None
        while True:
            while self._pending:
                frame = self._pending.pop(0)
                try:
                    event = decode_response(frame.payload, frame.frame_type)
                except WireError as exc:
                    raise WireProtocolError(f"from {self.path}: {exc.message}") from exc
                if event is not None:
                    return event
            try:
                n = sock.recv_into(self._buf)
            except TimeoutError as exc:
                raise WireProtocolError(f"no response from {self.path} for {self.timeout} s") from exc
            except OSError as exc:
                raise WireProtocolError(f"connection to {self.path} broken: {exc}") from exc
            if n == 0:
                raise WireProtocolError(f"{self.path} closed the connection before the request was answered")
            try:
                self._pending.extend(self._decoder.feed(memoryview(self._buf)[:n]))
            except WireError as exc:
                raise WireProtocolError(f"from {self.path}: {exc.message}") from exc

    def _read_refusal(self) -> Error | None:
        try:
            event = self._read_event()
        except ModelHostError:
            return None
        return event if isinstance(event, Error) else None


class Local(_Session):
    """The socket server's handler reached in-process: same requests, same answers, no socket and no framing.

    ``host`` must be started. The synchronous methods (``chat``, ``recognize``, ``request``) drive the handler on a
    private event loop and must not be called from a running loop; async code uses :meth:`events`.
    """

    def __init__(self, host: Host) -> None:
        super().__init__()
        self.host = host
        self._loop: asyncio.AbstractEventLoop | None = None

    def events(self, request: Request) -> AsyncGenerator[ResponseEvent, None]:
        """The response events of ``request``, ending with exactly one ``Done`` or ``Error``."""
        return handler_events(self.host, request)

    def request(self, request: Request) -> Iterator[ResponseEvent]:
        """Answer a prepared request and yield its response events up to and including the terminal one."""
        return self._events(request)

    def _exchange(self, request: Request) -> Iterator[ResponseEvent]:
        try:
            encode_request(request)  # the same sender-side refusals as the socket path, without sending
        except WireError as exc:
            raise InvalidInputError(exc.message) from exc
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        loop = self._loop
        answers = handler_events(self.host, request)
        try:
            while True:
                try:
                    event = loop.run_until_complete(anext(answers))
                except StopAsyncIteration:
                    return
                yield event
        finally:
            loop.run_until_complete(answers.aclose())  # an abandoned request is cancelled, as a closed socket is

    def close(self) -> None:
        """Close the private event loop (the host is the caller's to close)."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    def __enter__(self) -> Local:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

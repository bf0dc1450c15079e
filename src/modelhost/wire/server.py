"""The socket door: inferd generation protocol v2 over a Unix socket, served from one Host.

Bind late (inferd's THREAT_MODEL.md, F-13): :meth:`WireServer.start` refuses to run before the host's model is
loaded, because a bound socket is this protocol's only readiness signal; a client that connects earlier gets
ENOENT/ECONNREFUSED and retries. One request at a time per connection (the protocol has no multiplexing);
concurrency is several connections, all feeding the host's one scheduler.

Receiving. Each connection is an :class:`asyncio.BufferedProtocol`: between frames the kernel copies into a small
scratch buffer, and once a frame header is parsed and bounded (codec: cap checked before allocation), the payload
is received straight into a buffer of exactly its declared length, the one the request then carries to the model.
A 25 MB page is therefore copied once, by the kernel, and never again in Python (no ``StreamReader`` chunk list,
no ``readexactly`` join).

Cancellation. Closing the connection is the protocol's only cancel. The protocol keeps reading while a request is
answered, so an EOF or a reset is seen the moment it arrives, not when the next delta write fails: the answering
task is cancelled, which closes the request's host stream, which frees the model within one token.

Limits (what the HTTP doors have in _serving.ClientGuard, for the socket). At most `max_connections` clients at
once: the next one is answered a queue_full error frame and closed, so a flood of connections cannot take the
process's file descriptors (4,212 one-byte connections once left the HTTP doors and the worker unable to accept).
At most `max_buffered_bytes` of requests being received or waiting to be answered, across all connections: a
frame header that would pass it is answered queue_full and the connection closed (20 connections each holding a
64 MiB frame short by one byte added 1.3 GB). A connection that sends nothing for `idle_timeout` is closed; a
request must arrive whole within `request_timeout` of its first byte (a trickle cannot hold a connection and its
buffer forever). Every refusal is counted in `modelhost_wire_client_refusals_total{reason}` in the host's registry,
beside the HTTP doors' own counters.

Connection fate follows spec §6 (inferd's stricter side): a framing or decoding error, a wire version mismatch, a
descriptor/blob problem, and a closing host answer one error frame and close; a semantic refusal (validation,
queue_full, an image for a text-only model) and a generation failure answer one error frame and keep the
connection.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import functools
import logging
import os
import socket
import stat
import weakref
from dataclasses import dataclass
from typing import Final

import numpy as np
from prometheus_client import CollectorRegistry, Counter

from modelhost.host.models import Servable
from modelhost.wire.codec.constants import MAX_ATTACHMENT_BYTES, MAX_FRAME, Buffer, ErrorCode
from modelhost.wire.codec.encode import encode_response
from modelhost.wire.codec.errors import WireError
from modelhost.wire.codec.frames import FrameHeader, parse_frame_header
from modelhost.wire.codec.messages import Error, Request, ResponseEvent
from modelhost.wire.codec.reader import RequestReader
from modelhost.wire.errors import SocketPathError
from modelhost.wire.handler import respond

__all__ = [
    "LISTEN_BACKLOG",
    "MAX_SOCKET_PATH_BYTES",
    "REFUSALS",
    "WRITE_TIMEOUT",
    "WireLimits",
    "WireServer",
    "check_path",
]

log = logging.getLogger(__name__)

#: Bound on one response write, including waiting for the peer to drain what we queued (inferd's F-17). Without
#: it a client that stops reading pins its connection, its request and the memory of every queued delta forever.
#: Ten seconds is far beyond any live reader's stall, and short next to a page's generation time.
WRITE_TIMEOUT: Final = 10.0

#: Queued response bytes past which a write waits for the peer (asyncio's write-buffer high-water mark). Deltas
#: are tens of bytes: 64 KiB is thousands of them, so only a reader that has stopped reading ever hits it.
WRITE_HIGH_WATER: Final = 64 * 1024

#: Pending connections the kernel queues before refusing more; clients retry ECONNREFUSED for 10 s anyway.
LISTEN_BACKLOG: Final = 128

#: Clients one socket door holds at once. Each costs a file descriptor: with the two HTTP doors' 256 each, the
#: process stays under the common soft limit of 1024 (and `serve` raises the soft limit to the hard one). The model
#: answers one request at a time behind a bounded queue, so more connections than this only wait.
DEFAULT_MAX_CONNECTIONS: Final = 256
#: Bytes of requests being received or waiting to be answered, over all connections: twice the largest request (a
#: 64 MiB JSON frame and 128 MiB of attachments), so two of the largest fit and twenty half-sent ones do not.
DEFAULT_MAX_BUFFERED_BYTES: Final = 2 * (MAX_FRAME + MAX_ATTACHMENT_BYTES)
#: A connection that sends nothing between requests for this long is closed (nginx's keepalive_timeout is 75 s).
#: A client that renders its next page for longer simply reconnects, which costs a millisecond on a local socket.
DEFAULT_IDLE_TIMEOUT: Final = 120.0
#: A request's frames must all arrive within this long of its first byte: 64 MiB crosses a local socket in tens of
#: milliseconds, so this only ever cuts a client that trickles (or stopped mid-frame) and gives its buffer back.
DEFAULT_REQUEST_TIMEOUT: Final = 60.0

#: Why the door refused a client: the label values of `modelhost_wire_client_refusals_total`.
REFUSALS: Final = ("connection_limit", "buffer_limit", "idle_timeout", "request_timeout")


@dataclass(frozen=True, slots=True)
class WireLimits:
    """How many clients the socket door holds, how many request bytes, and how long it waits (defaults above)."""

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    def __post_init__(self) -> None:
        if self.max_connections < 1 or self.max_buffered_bytes < 1:
            raise ValueError("max_connections and max_buffered_bytes must be at least 1")
        if not (self.idle_timeout > 0 and self.request_timeout > 0):
            raise ValueError("the idle and request timeouts must be positive")


# One counter per registry: several socket doors over one host (a test, two sockets of one model) share it, since a
# registry refuses the same name twice.
_COUNTERS: weakref.WeakKeyDictionary[CollectorRegistry, Counter] = weakref.WeakKeyDictionary()


def _refusal_counter(registry: CollectorRegistry) -> Counter:
    counter = _COUNTERS.get(registry)
    if counter is None:
        counter = Counter(
            "modelhost_wire_client_refusals",
            "Clients refused by the socket door: too many connections or buffered bytes, idle or too slow.",
            ["reason"],
            registry=registry,
        )
        for reason in REFUSALS:
            counter.labels(reason)
        _COUNTERS[registry] = counter
    return counter


# Between frames the kernel copies into this scratch buffer: frame headers, small JSON frames and the first bytes
# of a payload. Bytes of a payload found there are copied once into the payload's own buffer; 64 KiB keeps that
# copy negligible next to a page, and the rest of a large payload is received into its buffer directly.
_SCRATCH: Final = 64 * 1024

# Payloads at least this large are allocated with numpy.empty rather than bytearray: bytearray(n) zero-fills, a
# whole extra pass over a 25 MB page, and makes every declared byte resident at once; numpy.empty leaves the pages
# untouched until the kernel writes them, so a peer that declares 64 MiB and sends two bytes costs two pages.
_LAZY_ALLOC: Final = 1 << 20


def _allocate(size: int) -> Buffer:
    if size >= _LAZY_ALLOC:
        return np.empty(size, dtype=np.uint8).data  # a writable memoryview of the array
    return bytearray(size)


class _Eof:
    """The peer closed cleanly between requests."""


_EOF: Final = _Eof()
_Item = Request | WireError | _Eof


class _Connection(asyncio.BufferedProtocol):
    """One client connection: a frame reader feeding complete requests to one answering task, one at a time."""

    def __init__(self, server: WireServer, sock: socket.socket) -> None:
        self._server = server
        self._sock = sock  # the accepted socket itself, for reading a payload's rest directly (buffer_updated)
        self._transport: asyncio.Transport | None = None
        self._scratch = memoryview(bytearray(_SCRATCH))
        # Reading state (sans-IO reader from the codec; this class only moves bytes).
        self._reader = RequestReader()
        self._head = bytearray()  # header bytes so far (at most MAX_HEADER_LEN)
        self._payload: memoryview | None = None  # the frame payload being received, exactly its declared length
        self._payload_buffer: Buffer | None = None
        self._filled = 0
        # Handing requests to the answering task. At most one complete request waits beyond the one being answered;
        # past that, reading pauses (a client that pipelines gets no more than that read ahead of it).
        self._items: collections.deque[_Item] = collections.deque()
        self._leftover = b""  # scratch bytes not yet parsed when reading paused
        self._waiter: asyncio.Future[None] | None = None
        self._stopped = False  # a fatal error or EOF was queued: nothing more is read
        self._peer_gone = False
        self._busy = False  # a request is being answered
        self._task: asyncio.Task[None] | None = None
        # Writing.
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None
        self._lost = False
        # Limits: bytes this connection holds of the server's budget (the request being read, then each request
        # delivered and not yet answered), and the clock of its idle and request deadlines (one timer, re-armed
        # only when it fires: a payload's thousands of reads never touch it).
        self._reading_bytes = 0
        self._item_bytes: collections.deque[int] = collections.deque()
        self._idle_since = 0.0
        self._request_since: float | None = None
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio callbacks -----------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run())
        self._server._connections.add(self)
        self._idle_since = loop.time()
        self._arm()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._payload is not None:
            # Exactly the rest of this frame: the kernel writes the payload where the request will keep it, and
            # never past it, so no byte of the next frame lands here.
            return self._payload[self._filled :]
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        if self._request_since is None and not self._stopped:
            self._request_since = asyncio.get_running_loop().time()
            self._arm(sooner=True)  # once a request: its deadline may come before the idle one that is armed
        if self._payload is not None:
            self._filled += nbytes
            self._drain_payload()
            if self._filled == len(self._payload):
                self._guarded(self._frame_done)
        else:
            self._guarded(lambda: self._consume(self._scratch[:nbytes]))

    def eof_received(self) -> bool:
        self._on_peer_gone()
        return True  # keep our side open: a truncated-frame error may still be written to a half-closed peer

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._on_peer_gone()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._server._connections.discard(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # -- reading -----------------------------------------------------------------------------------------------------
    def _guarded(self, step: object) -> None:
        assert callable(step)
        try:
            step()
        except WireError as exc:
            self._fail(exc)

    def _drain_payload(self) -> None:
        """Keep receiving this frame's payload straight from the socket while the kernel has bytes for it.

        The transport reads once per event-loop turn; a 25 MB page arrives in ~100 socket-buffer-sized pieces,
        and a loop turn apiece cost a third of the page's throughput (measured: 0.6 -> 0.9 of a raw recv_into).
        Reads stop at the frame's end, at EAGAIN (the loop then waits for more, as usual), and at EOF or an error,
        which the transport's own next read then reports. The loop is held for at most one frame (64 MiB, ~30 ms
        at local-socket speed), and only while the sender keeps up.
        """
        payload = self._payload
        assert payload is not None
        while self._filled < len(payload):
            try:
                n = self._sock.recv_into(payload[self._filled :])
            except OSError:  # BlockingIOError: nothing more yet; anything else: the transport will see it
                return
            if n == 0:
                return
            self._filled += n

    def _consume(self, data: memoryview) -> None:
        """Parse scratch bytes: headers byte by byte, payload bytes copied into the frame's own buffer."""
        pos, end = 0, len(data)
        while pos < end:
            if self._stopped or self._items:
                # A request already waits for the answering task (or the stream is dead): hold the rest back.
                self._leftover = bytes(data[pos:])
                self._pause_reading()
                return
            if self._payload is None:
                self._head.append(data[pos])
                pos += 1
                header = parse_frame_header(self._head)
                if header is not None:
                    self._head.clear()
                    self._start_payload(header)
            else:
                take = min(len(self._payload) - self._filled, end - pos)
                self._payload[self._filled : self._filled + take] = data[pos : pos + take]
                self._filled += take
                pos += take
                if self._filled == len(self._payload):
                    self._frame_done()

    def _start_payload(self, header: FrameHeader) -> None:
        size = self._reader.accept_header(header)  # type, blob length and cap checked before this allocation
        self._server._reserve(size)  # and the door's budget over every connection, before it too
        self._reading_bytes += size
        self._payload_buffer = _allocate(size)
        self._payload = memoryview(self._payload_buffer).cast("B")
        self._filled = 0
        if size == 0:
            self._frame_done()

    def _frame_done(self) -> None:
        payload = self._payload_buffer
        assert payload is not None
        self._payload = self._payload_buffer = None
        self._reader.accept_payload(payload)
        if self._reader.complete:
            request = self._reader.request
            self._reader = RequestReader()
            self._item_bytes.append(self._reading_bytes)
            self._reading_bytes = 0
            self._request_since = None
            self._deliver(request)
            if self._items:
                self._pause_reading()

    def _fail(self, exc: WireError) -> None:
        self._payload = self._payload_buffer = None
        self._deliver(exc)
        self._stopped = True
        self._pause_reading()

    def _on_peer_gone(self) -> None:
        if self._peer_gone:
            return
        self._peer_gone = True
        if self._busy and self._task is not None:
            # The client closed (or reset) while its request is being answered: that is the protocol's cancel.
            self._task.cancel()
        if self._stopped:
            return
        try:
            # Quiet between requests (the client is done); a truncation error inside one, with its id.
            self._reader.eof(mid_frame=bool(self._head) or self._payload is not None)
        except WireError as exc:
            self._deliver(exc)
        else:
            self._deliver(_EOF)
        self._stopped = True

    def _deliver(self, item: _Item) -> None:
        self._items.append(item)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _pause_reading(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    async def _next_item(self) -> _Item:
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
            self._waiter = None
        item = self._items.popleft()
        if not self._stopped and self._leftover:
            leftover, self._leftover = self._leftover, b""
            self._guarded(lambda: self._consume(memoryview(leftover)))
        if not self._stopped and not self._items and self._transport is not None and not self._lost:
            self._transport.resume_reading()
        return item

    # -- deadlines -----------------------------------------------------------------------------------------------
    def _deadline(self) -> float | None:
        """When this connection times out as things stand; None while a request is queued or answered (a slow
        answer is the model's time, not the client's; writes have WRITE_TIMEOUT)."""
        if self._busy or self._items or self._stopped:
            return None
        limits = self._server.limits
        if self._request_since is not None:
            return self._request_since + limits.request_timeout
        return self._idle_since + limits.idle_timeout

    def _arm(self, *, sooner: bool = False) -> None:
        """Set the timer for the current deadline if none is set (`sooner`: also if the set one is later)."""
        if self._lost:
            return
        if self._timer is not None:
            deadline = self._deadline()
            if not sooner or deadline is None or deadline >= self._timer.when():
                return
            self._timer.cancel()
            self._timer = None
        deadline = self._deadline()
        if deadline is not None:
            self._timer = asyncio.get_running_loop().call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        deadline = self._deadline()
        if deadline is None or self._lost:
            return  # busy: re-armed when the answer ends
        if asyncio.get_running_loop().time() < deadline:
            self._arm()  # activity moved the deadline since this timer was set
            return
        limits = self._server.limits
        if self._request_since is not None:
            self._server._refused("request_timeout")
            log.warning("wire: dropping a client whose request was not whole after %.0f s", limits.request_timeout)
            self._fail(
                WireError(
                    ErrorCode.INVALID_REQUEST,
                    f"the request did not arrive whole within {limits.request_timeout:g} s of its first byte",
                    fatal=True,
                )
            )
        else:
            self._server._refused("idle_timeout")
            self._deliver(_EOF)
            self._stopped = True
            self._pause_reading()

    def _answered(self) -> None:
        """The request at the head of the queue is done: its bytes go back to the budget, and the idle clock (or a
        pipelined request's clock, which ran while this one was answered) starts now."""
        if self._item_bytes:
            self._server._release(self._item_bytes.popleft())
        now = asyncio.get_running_loop().time()
        self._idle_since = now
        if self._request_since is not None:
            self._request_since = now
        self._arm()

    def _release_all(self) -> None:
        self._server._release(self._reading_bytes + sum(self._item_bytes))
        self._reading_bytes = 0
        self._item_bytes.clear()

    # -- writing -----------------------------------------------------------------------------------------------------
    async def _send(self, event: ResponseEvent) -> None:
        """Write one response frame; flushed at once, bounded by WRITE_TIMEOUT in all (F-17)."""
        transport = self._transport
        if transport is None or self._lost or transport.is_closing():
            raise ConnectionResetError("the peer is gone")
        transport.write(encode_response(event))
        if self._write_paused:
            self._drained = asyncio.get_running_loop().create_future()
            try:
                await asyncio.wait_for(asyncio.shield(self._drained), WRITE_TIMEOUT)
            except TimeoutError:
                log.warning("wire: dropping a client that read nothing for %.0f s", WRITE_TIMEOUT)
                transport.abort()
                raise
            if self._lost:
                raise ConnectionResetError("the peer is gone")

    # -- answering ---------------------------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            while not self._server._closing:
                item = await self._next_item()
                if isinstance(item, _Eof):
                    break
                if isinstance(item, WireError):
                    # A protocol violation: the stream position is lost, so report it and close (spec §6).
                    with contextlib.suppress(ConnectionError, TimeoutError):
                        await self._send(item.to_event())
                    break
                if self._peer_gone:
                    break  # the client sent a request and left: closing is the cancel, so there is nothing to run
                self._busy = True
                try:
                    keep = await self._answer(item)
                finally:
                    self._busy = False
                    self._answered()
                if not keep:
                    break
        except (ConnectionError, TimeoutError):
            pass
        finally:
            self._release_all()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._transport is not None:
                self._transport.close()

    async def _answer(self, request: Request) -> bool:
        """Answer one request; return whether the connection may carry another."""
        async with contextlib.aclosing(respond(self._server.host, request)) as answers:
            try:
                async for event in answers:
                    await self._send(event)
            except WireError as exc:
                await self._send(exc.to_event())
                return not exc.fatal
            except (ConnectionError, TimeoutError):
                raise
            except Exception as exc:
                # A bug of ours, not the client's: say so on the wire rather than vanish, and drop the connection,
                # whose state we no longer vouch for. The host keeps serving everyone else.
                log.exception("wire: answering request %r failed", request.id)
                await self._send(Error(request.id, ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}"))
                return False
        return True

    def close(self) -> None:
        """Close now if idle; an answering connection closes after its current request (the server is closing)."""
        if not self._busy:
            # Close the transport here, not only in the task's finally: a task cancelled before its first step
            # never runs its body, and the socket would stay open with nobody reading it.
            if self._transport is not None:
                self._transport.close()
            if self._task is not None:
                self._task.cancel()


class WireServer:
    """The inferd socket door on one host. ``await start()`` after ``host.start()``; ``await aclose()`` to stop.

    ``path`` is the socket's filesystem path. Its directory is created 0700 (and made 0700 if it exists, as
    pdf-spec does: removing a stale socket is safe only because no one else can write there), the socket is 0600,
    a symlink at the path is refused, a stale socket (one nobody answers on) is removed, and a live one is refused.
    """

    def __init__(self, host: Servable, path: str | os.PathLike[str], *, limits: WireLimits | None = None) -> None:
        self.host = host
        self.path = os.fspath(path)
        self.limits = limits or WireLimits()
        self.refusals = _refusal_counter(host.metrics.registry)
        self._buffered = 0  # bytes reserved by every connection's requests (see WireLimits.max_buffered_bytes)
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._connections: set[_Connection] = set()
        self._closing = False
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the socket file we bound

    async def start(self) -> None:
        """Bind and listen. The bound socket is the readiness signal, so the host must be ready already."""
        if not self.host.ready:
            raise RuntimeError("start the host before the socket door: a bound socket tells clients it is ready")
        if self._listener is not None:
            raise RuntimeError("WireServer already started")
        self._listener = _bind(self.path)
        st = os.stat(self.path)
        self._identity = (st.st_dev, st.st_ino)
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop(self._listener))

    async def _accept_loop(self, listener: socket.socket) -> None:
        # Our own accept loop rather than loop.create_unix_server: asyncio 3.11's Server drops (without closing) a
        # connection it accepted a moment before close(), leaving that client waiting forever; here every accepted
        # socket is either served or closed.
        #
        # Not loop.sock_accept either: on 3.11 a cancel that lands in the loop turn where the listener became
        # readable lets sock_accept's callback accept a connection into an already cancelled future, which drops
        # the socket unclosed (InvalidStateError in the log). So wait for readiness only, and accept here, in this
        # task's own step, where a cancel cannot come between accept() and the hand-off below.
        loop = asyncio.get_running_loop()
        while True:
            await _readable(loop, listener)
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                continue  # another wake-up took it, or the peer gave up before we accepted
            except OSError as exc:
                # EMFILE and the like: this client is lost, the listener is not; pause so a persistent error
                # does not spin the loop.
                log.warning("wire: accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            conn.setblocking(False)
            if len(self._connections) >= self.limits.max_connections:
                self._refuse_connection(conn)
                continue
            try:
                await loop.connect_accepted_socket(functools.partial(_Connection, self, conn), conn)
            except BaseException as exc:
                conn.close()
                if isinstance(exc, asyncio.CancelledError):
                    raise
                log.warning("wire: could not set up a connection: %s", exc)

    def _refuse_connection(self, conn: socket.socket) -> None:
        """Answer a client past the connection limit with one queue_full frame (a retry-later code: the client
        knows it is load, not a fault) and close it, without giving it a transport, a task or a buffer."""
        self._refused("connection_limit")
        frame = encode_response(
            Error("", ErrorCode.QUEUE_FULL, f"too many connections (at most {self.limits.max_connections})")
        )
        with contextlib.suppress(OSError):
            conn.send(frame)  # a hundred bytes into an empty socket buffer: never blocks
            # Closing with the client's first bytes unread would reset the connection, and a reset can reach the
            # client before the frame does: take what has already arrived (non-blocking, one read) first.
            conn.recv(_SCRATCH)
        conn.close()

    def _reserve(self, size: int) -> None:
        if self._buffered + size > self.limits.max_buffered_bytes:
            self._refused("buffer_limit")
            raise WireError(
                ErrorCode.QUEUE_FULL,
                f"the socket door holds {self._buffered} bytes of requests; a frame of {size} more would pass its "
                f"bound of {self.limits.max_buffered_bytes}: retry when they are answered",
                fatal=True,  # the payload is not read, so the stream position is lost
            )
        self._buffered += size

    def _release(self, size: int) -> None:
        self._buffered -= size

    def _refused(self, reason: str) -> None:
        self.refusals.labels(reason).inc()

    @property
    def connections(self) -> int:
        """Open client connections (for tests and operators)."""
        return len(self._connections)

    @property
    def buffered_bytes(self) -> int:
        """Bytes of requests the door holds now, being received or waiting to be answered (see WireLimits)."""
        return self._buffered

    async def aclose(self, grace: float = 10.0) -> None:
        """Stop accepting and remove the socket, let in-flight requests finish for up to ``grace`` seconds, then
        cancel what is left and close every connection."""
        if self._closing:
            return
        self._closing = True
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
        if self._listener is not None:
            self._listener.close()  # clients still in the backlog get ECONNRESET: nothing of theirs was read
        self._unlink()
        conns = list(self._connections)
        for conn in conns:
            conn.close()
        tasks = [c._task for c in conns if c._task is not None and not c._task.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()  # cancels the generation through its host stream, then closes the connection
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        for conn in list(self._connections):
            if conn._transport is not None:
                conn._transport.abort()

    def _unlink(self) -> None:
        # Remove only the socket we bound: a successor that already bound the same path keeps its socket.
        with contextlib.suppress(OSError):
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self._identity:
                os.unlink(self.path)


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    """Wait until ``sock`` is readable (for a listener: a connection waits to be accepted). Accepts nothing."""
    ready = loop.create_future()
    fd = sock.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


def _prepare_directory(directory: str) -> None:
    """Make the socket's folder, 0700, when it does not exist. A folder that exists is the user's and keeps its mode
    (pdf-spec chmods it to 0700 even then, but a socket at ~/x.sock or /srv/x.sock must not close the user's folder
    to everyone else); the socket itself is 0600 whatever its folder (`_bind`)."""
    created = False
    if not os.path.isdir(directory):
        try:
            os.makedirs(directory, mode=0o700)
            created = True
        except FileExistsError:
            if not os.path.isdir(directory):  # else made meanwhile by another process: theirs, left as it is
                raise SocketPathError(
                    f"cannot make the socket's folder {directory}: it exists and is not a folder"
                ) from None
        except OSError as exc:
            raise SocketPathError(f"cannot make the socket's folder {directory}: {exc.strerror or exc}") from exc
    if not os.access(directory, os.W_OK | os.X_OK):
        raise SocketPathError(f"cannot create a socket in {directory}: permission denied")
    if created and stat.S_IMODE(os.stat(directory).st_mode) != 0o700:
        os.chmod(directory, 0o700)  # a umask can only narrow makedirs' mode: made exactly 0700, as pdf-spec makes it


#: Longest socket path Linux's sockaddr_un holds (108 bytes with the terminating NUL); bind() refuses a longer one
#: with an error that does not say why ("AF_UNIX path too long").
MAX_SOCKET_PATH_BYTES: Final = 107


def check_path(path: str, *, make_folder: bool = True) -> None:
    """Raise SocketPathError for what binding `path` would refuse (a path too long, a folder that cannot be made, a
    symbolic link, a file that is not a socket, a live socket, a folder that takes no sockets such as /proc): `serve`
    asks before loading a model for nothing. With `make_folder` False a missing folder is refused rather than made
    (`serve` makes only the default address's folder, as inferd does: a mistyped `--socket` must not create folders
    as whoever runs it)."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise SocketPathError(f"socket path {path} is too long ({len(os.fsencode(path))} bytes; at most 107)")
    directory = os.path.dirname(path) or "."
    if make_folder:
        _prepare_directory(directory)
    elif not os.path.isdir(directory):
        why = "is not a folder" if os.path.exists(directory) else "does not exist"
        raise SocketPathError(
            f"cannot serve on {path}: its folder {directory} {why} (only the default socket's folder is made)"
        )
    elif not os.access(directory, os.W_OK | os.X_OK):
        raise SocketPathError(f"cannot create a socket in {directory}: permission denied")
    if not _stale(path):
        _try_bind(path)


def _try_bind(path: str) -> None:
    """Bind `path` and remove it at once: some folders pass every check above and still take no socket (/proc and
    /sys answer ENOENT, a read-only mount EROFS), which only a bind finds out."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.bind(path)
    except OSError as exc:
        folder = os.path.dirname(path) or "."
        raise SocketPathError(f"cannot serve on {path}: {folder} takes no sockets ({exc.strerror or exc})") from exc
    finally:
        probe.close()
    with contextlib.suppress(OSError):
        os.unlink(path)


def _stale(path: str) -> bool:
    """True for a socket nobody answers on (a host that died left it); False when nothing is there. Raises
    SocketPathError for anything that must not be removed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        # A symlink here could point our unlink or bind anywhere (inferd refuses it too: its THREAT_MODEL.md, F-2).
        raise SocketPathError(f"refusing to serve on {path}: it is a symbolic link")
    if not stat.S_ISSOCK(st.st_mode):
        raise SocketPathError(f"refusing to serve on {path}: it exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError as exc:
        if exc.errno != errno.ECONNREFUSED:
            raise SocketPathError(f"cannot check the existing socket {path}: {exc.strerror}") from exc
    else:
        raise SocketPathError(f"another model host is already serving on {path}")
    finally:
        probe.close()
    return True


def _remove_stale(path: str) -> None:
    if _stale(path):
        os.unlink(path)  # nobody listens: a socket left by a host that died


def _bind(path: str) -> socket.socket:
    """Bind and listen on ``path`` with the permissions above; the socket is 0600 before anyone can connect."""
    _prepare_directory(os.path.dirname(path) or ".")
    _remove_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.bind(path)
        except OSError as exc:
            raise SocketPathError(f"cannot bind {path}: {exc}") from exc
        # chmod before listen(): until listen() every connect is refused, so no client ever sees a wider mode.
        os.chmod(path, 0o600)
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock

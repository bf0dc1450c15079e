"""uvicorn embedded in a process that owns its signals, on a socket bound before it runs, guarded against slow and
excess clients: shared by the HTTP doors.

Both HTTP-speaking doors (the OpenAI/Ollama door and the job worker) bind their listening socket themselves, before
uvicorn starts, so that `start()` can report the real URL even for port 0 (tests use ephemeral ports), and so the
port answers while the model may still be loading. Each door keeps its own uvicorn settings and shutdown order.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
import math
import socket
import typing
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import uvicorn
from prometheus_client import CollectorRegistry, Counter
from starlette import types as asgi
from uvicorn._types import ASGIReceiveCallable, ASGISendCallable, Scope
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_log = logging.getLogger(__name__)

#: Connections the kernel queues before uvicorn accepts them (uvicorn re-listens with its own backlog once serving).
LISTEN_BACKLOG = 128


class EmbeddedUvicorn(uvicorn.Server):
    """A uvicorn server that takes no signals.

    uvicorn installs SIGINT/SIGTERM handlers and re-raises the signal after shutdown; the process that embeds us (the
    CLI, with several doors) owns signals, so we take none.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host` (a name or an IPv4/IPv6 address) and `port` (0: the system picks one)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        # A restarted server must rebind a port whose old connections sit in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def url_of(sock: socket.socket) -> str:
    """The base URL a bound socket answers on, e.g. http://127.0.0.1:8000 or http://[::1]:8000."""
    address, port = sock.getsockname()[:2]
    shown = f"[{address}]" if sock.family == socket.AF_INET6 else address
    return f"http://{shown}:{port}"


async def serve(server: uvicorn.Server, sock: socket.socket, *, name: str) -> asyncio.Task[None]:
    """Run `server` on `sock` as a task named `name`; return it once uvicorn accepts connections.

    If uvicorn stops before it has started (a bad setting, a failed bind of its own), the socket is closed and its
    startup error raised here, in the caller of `start()`, rather than lost in a background task.
    """
    task = asyncio.create_task(server.serve(sockets=[sock]), name=name)
    while not server.started:
        if task.done():
            sock.close()
            task.result()  # raises uvicorn's startup error
            raise RuntimeError(f"{name} stopped during startup")
        await asyncio.sleep(0.005)
    return task


# -- slow and excess clients ----------------------------------------------------------------------------------------
#
# uvicorn bounds only the idle time *between* requests (timeout_keep_alive); a connection that never finishes its
# headers, or trickles a body a byte at a time, holds its socket and its request's memory for as long as the client
# likes, and uvicorn's own connection bound (limit_concurrency) is checked only once headers are complete, so it
# cannot stop the trickle. The protocol below adds what nginx has (client_header_timeout, client_body_timeout, and a
# connection bound like limit_conn), shared by both HTTP doors; each door supplies its own error body and counter.

#: nginx's client_header_timeout: a request line and headers must be complete this long after the connection opens
#: (or after the first byte of a later request). A whole-header deadline, not an idle one: a client sending a byte
#: a second never goes idle. 60 s is generous for any real client (headers are a few hundred bytes).
DEFAULT_HEADER_TIMEOUT = 60.0
#: nginx's client_body_timeout: the longest silence between two reads of a body. 60 s lets a busy client or network
#: pause; a client that stopped sending is refused with 408 and its request's resources (a worker's capacity slot,
#: a half-written upload) are given back.
DEFAULT_BODY_TIMEOUT = 60.0
#: Apache mod_reqtimeout's MinRate (500 bytes/s): a body must also arrive on average at least this fast after a
#: first body_timeout of grace, so a byte-every-minute trickle cannot keep a request open for days. 500 B/s is 4
#: kbit/s: any real link, even a poor phone connection, does far better.
DEFAULT_BODY_MIN_RATE = 500.0
#: nginx's send_timeout: the longest a response write may wait for the client to take bytes (the socket's buffers
#: full and uvicorn's writes paused). A client that asked for a stream and stopped reading otherwise holds its
#: connection, and the unsent answer in memory, for as long as its process lives; 256 of them fill the door. A
#: live reader drains a buffer in milliseconds, so 60 s only ever cuts one that has stopped.
DEFAULT_WRITE_TIMEOUT = 60.0
#: Open connections one door holds at once; the next ones get 503 with Retry-After and are closed. Each costs a file
#: descriptor: two doors at 256 stay well under the common soft limit of 1024 descriptors, with room for the model,
#: the wire socket's clients and the worker's job files. Real load is far lower: the model serves one request at a
#: time and the queue behind it is bounded anyway.
DEFAULT_MAX_CONNECTIONS = 256
#: Connections past `max_connections` a door still takes for its probes (a GET of its health, readiness or metrics
#: path): an orchestrator that cannot see the process while clients flood it would restart a healthy host, and an
#: operator's dashboard would go blank exactly when it matters. Each such connection closes after its answer, and
#: the headroom is small, so a flood of fake probes costs at most this many more descriptors.
PROBE_HEADROOM = 8
#: How long a connection in the probe headroom may take to send its headers (a real probe sends its request line
#: at once; curl, kubelet and Prometheus all do): a flood's silent connections would otherwise fill the headroom for
#: the whole header timeout, and the probes it exists for would be refused exactly while the door is flooded.
PROBE_HEADER_SECONDS = 2.0
#: How long a connection refused at accept (past the limit and the headroom) stays open for its first bytes: it is
#: closed once they arrive, so the close never finds them unread (a close with unread bytes resets the connection,
#: and the reset can overtake the 503 on its way to the client), or after this long without any.
REFUSED_LINGER_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """How long a door waits for a client's request, and how many clients it holds (see the defaults above)."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    body_min_rate: float = DEFAULT_BODY_MIN_RATE
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    write_timeout: float = DEFAULT_WRITE_TIMEOUT

    def __post_init__(self) -> None:
        timeouts = (self.header_timeout, self.body_timeout, self.write_timeout)
        if not (all(t > 0 for t in timeouts) and self.body_min_rate > 0):
            raise ValueError("client timeouts and the minimum body rate must be positive")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")


#: The reasons a door refuses a client, the label values of its `..._client_refusals_total` counter.
Refusal = Literal["header_timeout", "body_timeout", "write_timeout", "connection_limit", "malformed"]
REFUSALS: tuple[Refusal, ...] = typing.get_args(Refusal)


def refusal_counter(registry: CollectorRegistry, prefix: str) -> Counter:
    """The door's `{prefix}_client_refusals_total{reason}` counter, every reason present from the start (at 0)."""
    counter = Counter(
        f"{prefix}_client_refusals",
        "Clients refused by the HTTP layer: headers or body too slow, an answer not read, too many connections, "
        "malformed HTTP.",
        ["reason"],
        registry=registry,
    )
    for reason in REFUSALS:
        counter.labels(reason)
    return counter


@dataclass(frozen=True, slots=True)
class ClientGuard:
    """One door's limits, its error body (`error_body(status, message)` -> the door's JSON) and its counter."""

    limits: ClientLimits
    error_body: Callable[[int, str], bytes]
    refusals: Counter
    #: GET paths answered even past the connection limit (within PROBE_HEADROOM): health, readiness, metrics.
    probe_paths: frozenset[str] = frozenset()

    def protocol_class(self) -> type[GuardedHttpProtocol]:
        """The uvicorn protocol class (`uvicorn.Config(http=...)`) that enforces this guard."""
        return type("GuardedHttpProtocol", (GuardedHttpProtocol,), {"guard": self})

    def answer(self, status: int, message: str, *, retry_after: int | None = None) -> bytes:
        """A whole HTTP/1.1 answer that closes the connection, for the HTTP layer itself (no ASGI app involved)."""
        body = self.error_body(status, message)
        head = [
            f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}",
            "content-type: application/json",
            f"content-length: {len(body)}",
            "connection: close",
        ]
        if retry_after is not None:
            head.append(f"retry-after: {retry_after}")
        return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline, a body idle timeout and minimum rate, a connection
    bound, and a JSON 400 for malformed HTTP (uvicorn's own is text/plain). One timer per connection, re-armed only
    when it fires or a phase starts, so the hot path pays a clock read per parser callback and nothing more."""

    guard: ClassVar[ClientGuard]

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        now = self.loop.time()
        # A fresh connection waits for its first request's headers, as nginx's client_header_timeout does: uvicorn
        # arms its keep-alive timer only after a first answer, so a silent connection would otherwise stay forever.
        self._header_since: float | None = now
        self._body_since = self._last_read = now
        self._body_bytes = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        #: Since when the client has not taken the bytes we wrote (the transport paused our writes), or None.
        self._write_paused_since: float | None = None
        #: The message of a malformed request that arrived while the one before it is still being answered.
        self._malformed: str | None = None
        #: How long this connection's headers may take: the door's header timeout, shorter in the probe headroom.
        self._header_limit = self.guard.limits.header_timeout
        #: Refused at accept: answered already, closed at its first bytes (data_received) or after a short linger.
        self._refused_at_accept = False
        held = len(self.connections)
        limit = self.guard.limits.max_connections
        if held > limit + PROBE_HEADROOM or (held > limit and not self.guard.probe_paths):
            # Past the limit and its headroom: answered now, without waiting for headers. Held until its headers
            # came (a minute for a client that sends one byte), a flood of such connections took every descriptor
            # the process had (1,200 one-byte connections: the 1,024 of a common limit), and asyncio then logged
            # each failed accept() with its traceback, thousands a second, until the header timeouts freed some.
            self._refuse_at_accept()
            return
        if held > limit:
            # Within the headroom: answered once its headers are in if it is a probe (an orchestrator must see the
            # process), with the door's 503 otherwise. Decided here, at accept time, unlike uvicorn's
            # limit_concurrency, which also counts running tasks and answers text.
            self._app_within_limit = self.app
            self.app = self._probes_only
            self._header_limit = min(self._header_limit, PROBE_HEADER_SECONDS)
        self._arm(now + self._header_limit)

    def _refuse_at_accept(self) -> None:
        self.transport.write(self.guard.answer(503, self._connection_limit_refusal(), retry_after=1))
        self._refused_at_accept = True
        self.loop.call_later(REFUSED_LINGER_SECONDS, self.transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_paused_since is None:
            self._write_paused_since = self.loop.time()
            self._arm(self._write_paused_since + self.guard.limits.write_timeout)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._write_paused_since = None  # the client reads again: its clock restarts at the next pause

    def eof_received(self) -> bool:  # type: ignore[override]
        """The client sent its last byte (a FIN: a close, or a half-close after which it still reads). A request
        whose body has not all come never will: 400 now, then close (it was closed without an answer). Anything
        else closes as before (False lets asyncio close): a FIN cannot tell a half-close from a hang-up, and the
        close is how the app learns that a client waiting for its answer hung up (its generation is cancelled)."""
        cycle = self.cycle
        if cycle is None or not cycle.more_body or cycle.response_complete or self._refused_at_accept:
            return False
        self.guard.refusals.labels("malformed").inc()
        self._refuse(400, "the request body ended before its Content-Length (the client closed its side)")
        return True  # _refuse closed the transport once its answer is flushed

    def data_received(self, data: bytes) -> None:
        if self._refused_at_accept:
            self.transport.close()  # answered already; its bytes are read, so the close sends no reset
            return
        if self._malformed is not None:
            return  # the parser is broken; the rest is answered with 400 once the request before it is
        super().data_received(data)

    # -- httptools callbacks: the phases of a request --------------------------------------------------------------
    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_since is None:
            self._header_since = self.loop.time()
            self._arm(self._header_since + self._header_limit)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        now = self.loop.time()
        self._header_since = None
        self._body_since = self._last_read = now
        self._body_bytes = 0
        self._arm(now + self.guard.limits.body_timeout)

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._body_bytes += len(body)
        self._last_read = self.loop.time()

    # -- the watchdog ------------------------------------------------------------------------------------------------
    def _arm(self, when: float) -> None:
        if when >= self._timer_at:
            return  # the timer fires earlier anyway and re-arms itself to the real deadline
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self.loop.call_at(when, self._check)

    def _deadline(self) -> tuple[float, Refusal] | None:
        limits = self.guard.limits
        if self._write_paused_since is not None:
            # First: an answer the client does not read blocks everything after it on this connection anyway.
            return self._write_paused_since + limits.write_timeout, "write_timeout"
        if self._header_since is not None:
            return self._header_since + self._header_limit, "header_timeout"
        cycle = self.cycle
        if cycle is not None and cycle.more_body:
            idle = self._last_read + limits.body_timeout
            slow = self._body_since + limits.body_timeout + self._body_bytes / limits.body_min_rate
            return min(idle, slow), "body_timeout"
        return None  # answering, or idle between requests (uvicorn's keep-alive timeout bounds that)

    def _check(self) -> None:
        self._timer, self._timer_at = None, math.inf
        if self.transport.is_closing():
            return
        now = self.loop.time()
        if self._header_since is None and self.flow.read_paused:
            # The app is not reading the body it was sent (uvicorn paused the socket): the wait is ours, not the
            # client's, so its clocks restart when the app catches up.
            self._body_since = self._last_read = now
            self._body_bytes = 0
        due = self._deadline()
        if due is None:
            return
        deadline, reason = due
        if now < deadline:
            self._arm(deadline)
            return
        self.guard.refusals.labels(reason).inc()
        limits = self.guard.limits
        if reason == "write_timeout":
            # abort, not close: close() would wait to flush the very buffer the client does not read. The app sees
            # a disconnect (uvicorn's connection_lost), so a stream it is generating is cancelled.
            _log.warning("dropping a client that took no bytes of its answer for %.0f s", limits.write_timeout)
            self.transport.abort()
        elif reason == "header_timeout":
            self._refuse(408, f"the request headers did not arrive within {self._header_limit:g} s")
        else:
            self._refuse(
                408,
                f"the request body was too slow: no bytes for {limits.body_timeout:g} s, or under "
                f"{limits.body_min_rate:g} bytes/s on average",
            )

    def _refuse(self, status: int, message: str) -> None:
        """Answer `status` and close, unless an answer is already on the wire (then only close: bytes of ours in
        the middle of it would corrupt it). The app's request, if any, sees a disconnect and writes nothing."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            if cycle.response_started:
                self.transport.close()
                return
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.write(self.guard.answer(status, message))
        self.transport.close()

    # -- malformed HTTP ------------------------------------------------------------------------------------------------
    def send_400_response(self, msg: str) -> None:
        """httptools could not parse the bytes. If they follow a complete request still being answered, they are
        the next request (RFC 9112 §6.3: bytes past Content-Length start a new message, so a "body longer than its
        Content-Length" is a malformed second request): the first is answered, then this one gets its 400. Bytes
        that broke inside a request's own body make that request the malformed one: it is dropped, never run."""
        self.guard.refusals.labels("malformed").inc()
        message = "malformed HTTP request (bytes past the declared Content-Length are read as a next request)"
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.more_body:
            self._malformed = message
            self.flow.pause_reading()
            return
        self._refuse(400, message)

    def on_response_complete(self) -> None:
        if self._malformed is None or self.pipeline:
            super().on_response_complete()
            return
        self.server_state.total_requests += 1
        if not self.transport.is_closing():
            self.transport.write(self.guard.answer(400, self._malformed))
            self.transport.close()

    async def _probes_only(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        """Past the connection limit: a probe is answered (and its connection closed after), anything else is 503."""
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] not in self.guard.probe_paths:
            await self._too_many_connections(scope, receive, send)
            return

        async def send_and_close(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await self._app_within_limit(scope, receive, send_and_close)

    def _connection_limit_refusal(self) -> str:
        """Count a connection refused for the connection limit (at accept or, in the headroom, at its headers) and
        say why, the same words either way."""
        self.guard.refusals.labels("connection_limit").inc()
        return f"too many open connections (at most {self.guard.limits.max_connections})"

    async def _too_many_connections(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        body = self.guard.error_body(503, self._connection_limit_refusal())
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"retry-after", b"1"),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


class AnswerServerErrors:
    """Pure ASGI: an exception no route answered becomes the door's own JSON 500, `answer(scope)`, logged once here,
    instead of Starlette's or uvicorn's text/plain "Internal Server Error". If the answer had already started (a
    stream, a file), the exception goes on to the server, which closes the connection mid-answer, as it must."""

    def __init__(self, app: asgi.ASGIApp, answer: Callable[[asgi.Scope], asgi.ASGIApp]) -> None:
        self.app = app
        self.answer = answer

    async def __call__(self, scope: asgi.Scope, receive: asgi.Receive, send: asgi.Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watching_send(message: asgi.Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watching_send)
        except Exception:
            if started:
                raise
            _log.exception("%s %s failed", scope["method"], scope["path"])
            await self.answer(scope)(scope, receive, send)

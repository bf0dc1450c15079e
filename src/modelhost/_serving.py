"""uvicorn embedded in a process that owns its signals, on a socket bound before it runs: shared by the HTTP doors.

Both HTTP-speaking doors (the OpenAI/Ollama door and the job worker) bind their listening socket themselves, before
uvicorn starts, so that `start()` can report the real URL even for port 0 (tests use ephemeral ports), and so the
port answers while the model may still be loading. Each door keeps its own uvicorn settings and shutdown order.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Generator

import uvicorn

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

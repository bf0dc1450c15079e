"""`modelhost serve`: one host, one model, and the doors around it, with an orderly start and stop.

Start order matters. The HTTP door binds first, so `/health` answers and `/ready` says 503 while the model loads
(llama.cpp's operations view: health that tells the truth). The socket door binds only after the model is loaded,
because on the inferd wire a bound socket IS the readiness signal (no health frame exists; a client that connects
early must get ECONNREFUSED and retry). Stop order is the reverse: stop accepting, let in-flight requests finish
for a bounded grace period, then close the model and remove the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from modelhost.host import DEFAULT_MAX_QUEUE, Host
from modelhost.inference import catalogue, registry

if TYPE_CHECKING:
    from modelhost._serving import ClientLimits

#: How long a stop signal waits for in-flight requests before cancelling them. Long enough for a typical answer
#: on a small model, short enough that a service manager's own kill timeout (systemd: 90 s) never fires first.
DEFAULT_GRACE_SECONDS = 30.0


class Door(Protocol):
    """A server on the host: binds in `start()`, stops accepting and closes in `aclose()`."""

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """What to serve and through which doors. A door whose setting is None is off."""

    model: str = "default"
    backend: str | None = None
    socket: str | None = None
    http: tuple[str, int] | None = None
    api_key: str | None = None
    worker: tuple[str, int] | None = None
    state_dir: Path | None = None
    capacity: int = 8
    max_queue: int = DEFAULT_MAX_QUEUE
    #: Requests the model decodes at once (continuous batching); None: the backend's default (llama_cpp: 4).
    parallel: int | None = None
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    #: Slow and excess clients of the HTTP doors (header/body timeouts, connections); None: each door's default.
    client_limits: ClientLimits | None = None


def model_name(model: str) -> str:
    """The name a model is served under: the catalogue name, or the file/folder name without `.gguf`."""
    entry = catalogue.ENTRIES.get(model)
    if entry is not None:
        return entry.name
    name = Path(model.rstrip("/")).name
    return name[: -len(".gguf")] if name.endswith(".gguf") else name


def parse_hostport(value: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` or `PORT` into (host, port); raises ValueError with the bad value."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"expected HOST:PORT, got {value!r}") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"port out of range in {value!r}")
    return (host.strip("[]") or default_host), number


async def serve(config: ServeConfig, *, say: Callable[[str], None] | None = None) -> None:
    """Run until SIGTERM or SIGINT, then stop in order. `say` prints the ready and stop lines."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    path = catalogue.resolve(config.model)  # fail fast, before binding anything, on a model that is not there
    name = model_name(config.model)
    load_opts = {"parallel": config.parallel} if config.parallel is not None else {}
    host = Host(lambda: registry.load_model(path, config.backend, **load_opts), name=name, max_queue=config.max_queue)
    closers: list[Callable[[], Awaitable[None]]] = []  # socket and job doors: closed before the host drains
    http: Door | None = None  # closed last, so /health and /ready stay truthful while the host drains
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        # The first signal starts an orderly stop; a second one means "now": cancel what is still running.
        if stop.is_set():
            say("modelhost: second stop signal: cancelling in-flight requests")
            host.cancel_all()
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    try:
        if config.http is not None:
            from modelhost.http import HttpServer

            http_server = HttpServer(
                host, bind_host=config.http[0], port=config.http[1], api_key=config.api_key, limits=config.client_limits
            )
            await http_server.start()
            http = http_server
            say(f"modelhost: http on {http_server.url} (ready once {name} is loaded)")
        say(f"modelhost: loading {name} from {path}")
        await host.start()
        if stop.is_set():
            # A stop signal came while the model loaded (a load cannot be interrupted, so it was waited for). Open
            # no door now: a bound socket would tell inferd clients "ready" from a host already on its way out.
            return
        if config.worker is not None:
            from modelhost.worker import WorkerServer

            state = config.state_dir or Path(os.path.expanduser("~/.local/state/modelhost/worker"))
            worker = WorkerServer(
                host,
                state_dir=state,
                capacity=config.capacity,
                bind_host=config.worker[0],
                port=config.worker[1],
                authorization=os.environ.get("GIZ_WORKER_AUTHORIZATION") or None,
                drain_seconds=config.grace_seconds,
                limits=config.client_limits,
            )
            await worker.start()
            closers.append(worker.aclose)
            say(f"modelhost: worker on {worker.url} (state {state})")
        if config.socket is not None:
            from modelhost.wire.server import WireServer

            wire = WireServer(host, config.socket)
            await wire.start()
            closers.append(functools.partial(wire.aclose, grace=config.grace_seconds))
            say(f"modelhost: ready: serving {name} on unix:{wire.path}")
        else:
            say(f"modelhost: ready: serving {name}")
        await stop.wait()
        say("modelhost: stopping: finishing in-flight requests")
    finally:
        # The doors drain concurrently (each waits for its own in-flight requests), then the host closes the model.
        await asyncio.gather(*(close() for close in reversed(closers)), return_exceptions=True)
        await host.aclose(grace=config.grace_seconds)
        if http is not None:
            with contextlib.suppress(Exception):
                await http.aclose()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        say("modelhost: stopped")


def run(config: ServeConfig, **kwargs: Any) -> None:
    """Blocking entry point for the CLI."""
    asyncio.run(serve(config, **kwargs))

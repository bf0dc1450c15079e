"""HttpServer: the HTTP door as an object the CLI (or a test) starts and stops on its own event loop.

We bind the listening socket ourselves, before uvicorn runs (modelhost._serving), for two reasons: `start()` can
return the real URL even for port 0 (tests use ephemeral ports), and the port answers at once, while the model may
still be loading, so /health and /ready tell the truth from the first second.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import uvicorn

from modelhost import _access, _serving
from modelhost.host import Host
from modelhost.host.models import Models, as_models
from modelhost.http.app import build_app
from modelhost.http.door import Door
from modelhost.http.errors import layer_error_body
from modelhost.http.metrics import HttpMetrics
from modelhost.http.ui import WebUi

if TYPE_CHECKING:
    from modelhost.http.docling import DoclingDoor

#: Seconds to let open responses finish on shutdown before their tasks are cancelled (which cancels their host
#: requests). Streams of a closing host end by themselves; this bounds a client that reads slowly.
SHUTDOWN_GRACE_SECONDS = 5
#: What an orchestrator and a scraper probe: answered even while clients hold every connection (see _serving).
PROBE_PATHS = frozenset({"/health", "/ready", "/metrics"})


class HttpServer:
    """The OpenAI/Ollama-compatible HTTP door over one host, or a model set (requests routed by their `model`).

    `await start()` binds and returns at once (the host may still be loading); `url` is then the real address.
    `await aclose()` stops accepting, lets open responses finish briefly, and returns. It does not close the host.
    """

    def __init__(
        self,
        host: Host | Models,
        bind_host: str = "127.0.0.1",
        port: int = 8000,
        api_key: str | None = None,
        model_name: str | None = None,
        limits: _serving.ClientLimits | None = None,
        access_log: _access.Emit = _access.to_logger,
        docling: DoclingDoor | None = None,
        ui: bool = True,
    ) -> None:
        """`limits` bounds slow and excess clients (modelhost._serving; default: nginx-like timeouts); `access_log`
        gets one record per request (modelhost._access: the `modelhost.access` logger by default); `docling` adds
        docling-serve's document routes, whose tasks start and stop with the server; `ui` the page for people at /
        (modelhost.http.ui), which `serve --no-ui` turns off."""
        self.docling = docling
        self.models = as_models(host, name=model_name)
        self.bind_host = bind_host
        self.port = port
        self.metrics = HttpMetrics(self.models)
        self.app = build_app(
            self.models, api_key=api_key, metrics=self.metrics, access_log=access_log, docling=docling, ui=ui
        )
        self.ui: WebUi | None = self.app.state.ui
        self.guard = _serving.ClientGuard(
            limits or _serving.ClientLimits(), layer_error_body, self.metrics.refusals, PROBE_PATHS
        )
        self._server: _serving.EmbeddedUvicorn | None = None
        self._task: asyncio.Task[None] | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        """The server's base URL, e.g. http://127.0.0.1:8000 (the bound port when 0 was asked for)."""
        if self._url is None:
            raise RuntimeError("HttpServer.url is known once start() has returned")
        return self._url

    async def start(self) -> None:
        """Bind the socket and start serving; returns once uvicorn accepts connections."""
        if self._task is not None:
            raise RuntimeError("HttpServer already started")
        sock = _serving.bind(self.bind_host, self.port)
        self._url = _serving.url_of(sock)
        if self.docling is not None:
            try:
                await self.docling.start()  # its tasks restored before a route can ask for one
            except BaseException:
                sock.close()
                raise
        config = uvicorn.Config(
            self.app,
            http=self.guard.protocol_class(),
            lifespan="off",
            log_config=None,  # leave the embedding process's logging alone
            access_log=False,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        )
        if self.ui is not None:
            await self.ui.start()
        self._server = _serving.EmbeddedUvicorn(config)
        self._task = await _serving.serve(self._server, sock, name=f"modelhost-http {self._url}")

    def stop_intake(self) -> None:
        """Refuse new generations and embeddings (503) while what runs finishes; the probes keep answering, /ready
        with 503 "stopping". The first stop signal of `serve` calls this; `aclose` later stops the server."""
        door: Door = self.app.state.door
        door.stop_intake()
        if self.docling is not None:
            self.docling.tasks.close_intake()  # new tasks: 429 "stopping"; queued ones stay for the next start

    async def aclose(self) -> None:
        """Stop serving. Idempotent."""
        if self.ui is not None:
            await self.ui.aclose()  # its event streams end now rather than hold the shutdown for its grace
        if self.docling is not None:
            await self.docling.aclose()
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        try:
            await self._task
        finally:
            self._server = None

    async def __aenter__(self) -> HttpServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

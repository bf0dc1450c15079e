"""The HTTP door's app: the probes (/health, /ready, /metrics), the OpenAI routes (`openai.handlers`) and the Ollama
routes (`ollama.handlers`) over one shared `Door`, behind pure-ASGI middleware (answers to surprises, request
counting, the API key).

Every generation route does the same four things: read a bounded body, parse it (its protocol's `schema`),
`host.submit` it through the Door (which refuses bad options, images for a text model and a full queue *before* any
compute), then relay the host's events (`relay`). JSON shapes live in each protocol's modules; this one only
composes them.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelhost import _access, _serving
from modelhost.host import Host
from modelhost.host.models import Models, ServedModel, as_models
from modelhost.http.door import Door
from modelhost.http.errors import ApiError, answer_internal_error, error_response, flavour_of, http_error
from modelhost.http.metrics import HttpMetrics, exposition
from modelhost.http.ollama.handlers import OllamaRoutes
from modelhost.http.openai.handlers import OpenAIRoutes
from modelhost.http.ui import API_PREFIX, WebUi

if TYPE_CHECKING:  # imported by whoever makes one (serve): the door's pydantic and task store cost nothing here
    from modelhost.http.docling import DoclingDoor

#: The routes that carry work or reach the model (and so need the API key). /health, /ready and /metrics stay open: an
#: orchestrator or a Prometheus scraper must see the process without holding the key, and they reveal no model output.
#: So do the page at / and its static files (modelhost.http.ui): they hold no data, and the page asks for the key.
_PROTECTED_PREFIXES = ("/v1/", "/api/", "/tokenize", "/detokenize", API_PREFIX)


# -- middleware (pure ASGI: BaseHTTPMiddleware would buffer streams and hide disconnects) -------------------------


class _CountRequests:
    def __init__(self, app: ASGIApp, metrics: HttpMetrics, routes: frozenset[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            # Unknown paths are one label value: a scanner must not create a time series per URL it tries.
            route = scope["path"] if scope["path"] in self.routes else "other"
            self.metrics.requests.labels(route, scope["method"], str(status)).inc()


class _RequireApiKey:
    def __init__(self, app: ASGIApp, api_key: str, own_check: tuple[str, ...] = ()) -> None:
        self.app = app
        self.expected = api_key.encode()
        self.own_check = own_check  # paths whose routes check the key themselves, in their protocol's header

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"] if scope["type"] == "http" else ""
        if path.startswith(_PROTECTED_PREFIXES) and not (self.own_check and path.startswith(self.own_check)):
            scheme, _, given = dict(scope["headers"]).get(b"authorization", b"").partition(b" ")
            # The scheme is case-insensitive (RFC 9110 §11.1): "bearer" from some clients is as good as "Bearer".
            # compare_digest: the comparison time must not tell an attacker how much of the key they have right.
            if not (hmac.compare_digest(given.strip(), self.expected) and scheme.lower() == b"bearer"):
                err = ApiError(
                    401, "missing or invalid API key (send Authorization: Bearer <key>)",
                    type="authentication_error", code="invalid_api_key",
                )  # fmt: skip
                await error_response(err, flavour_of(scope["path"]))(scope, receive, send)
                return
        await self.app(scope, receive, send)


# -- probes ---------------------------------------------------------------------------------------------------------


def _blocks_readiness(model: ServedModel, models: Models) -> bool:
    """A model loaded at start that is not ready, or any model that failed or closed."""
    if model.state in ("failed", "closing", "closed"):
        return True
    if model.pinned:
        return not model.ready
    # Once started, a model unloaded by keep-alive or for room is fine: its next request loads it again.
    return not models.started and not models.lazy and not model.ready


class _Probes:
    """What an orchestrator and a scraper ask: answered from the event loop, never waiting on a model."""

    def __init__(self, door: Door) -> None:
        self.door = door
        self.model_set = door.model_set
        self.metrics = door.metrics

    def routes(self) -> list[Route]:
        return [
            Route("/health", self.health, methods=["GET"]),
            Route("/ready", self.ready, methods=["GET"]),
            Route("/metrics", self.prometheus, methods=["GET"]),
        ]

    async def health(self, request: Request) -> Response:
        """Liveness: answers from the event loop, never waits on a model. 503 only when a model can never serve
        again (its load failed, or it closed): restarting the process is then the fix."""
        states = self.model_set.states()
        status = 503 if any(s in ("failed", "closed") for s in states.values()) else 200
        body = {"status": "ok" if status == 200 else "error", "state": states[self.model_set.default], "models": states}
        return JSONResponse(body, status_code=status)

    async def ready(self, request: Request) -> Response:
        """Readiness: 200 when requests are admitted: every model loaded at start is ready (a lazy one may be
        unloaded: its first request loads it). Else 503 with the first state in the way. Each model's state too."""
        states = self.model_set.states()
        blocking: str | None = next((m.state for m in self.model_set if _blocks_readiness(m, self.model_set)), None)
        if self.door.stopping:
            blocking = "stopping"  # a load balancer must stop sending here before the door refuses what it sends
        body: dict[str, Any] = {"status": blocking or "ready", "model": self.model_set.default, "models": states}
        if blocking is None:
            return JSONResponse(body)
        headers = {"retry-after": "1"} if blocking in ("new", "loading", "unloaded") else None
        return JSONResponse(body, status_code=503, headers=headers)

    async def prometheus(self, request: Request) -> Response:
        """The models' metrics (latencies, queue, tokens, finish reasons, by model) and the door's own."""
        return Response(exposition(self.model_set, self.metrics), media_type=CONTENT_TYPE_LATEST)


def build_app(
    host: Host | Models,
    *,
    api_key: str | None = None,
    model_name: str | None = None,
    metrics: HttpMetrics | None = None,
    access_log: _access.Emit = _access.to_logger,
    docling: DoclingDoor | None = None,
    ui: bool = True,
) -> Starlette:
    """The Starlette app of the HTTP door over a host, or a model set (requests routed by their `model`). `api_key`
    guards /v1/* and /api/*; `model_name` is the name clients see of a lone host (default: the host's name). A model
    may still be loading: /health answers, /ready says 503. `access_log` gets one record per request (method, path,
    status, model, tokens, duration: modelhost._access). `docling` adds docling-serve's document routes
    (modelhost.http.docling), which take the key as docling's X-Api-Key. `ui` serves the page for people at /
    (modelhost.http.ui; `app.state.ui`, None without it)."""
    models = as_models(host, name=model_name)
    door = Door(models, metrics or HttpMetrics(models))
    routes: list[BaseRoute] = [
        *_Probes(door).routes(), *OpenAIRoutes(door).routes(), *OllamaRoutes(door).routes()
    ]  # fmt: skip
    if docling is not None:
        routes += docling.route_list()
    web_ui = WebUi(models, docling=docling) if ui else None
    if web_ui is not None:
        routes += web_ui.route_list()
    middleware = [
        # Outermost: every request is logged with the status it got, whichever layer answered it.
        Middleware(_access.AccessLog, door="http", emit=access_log),
        # Outermost of the rest, so it also covers the other middleware.
        Middleware(_serving.AnswerServerErrors, answer=answer_internal_error),
        Middleware(_CountRequests, metrics=door.metrics, routes=frozenset(getattr(r, "path", "") for r in routes)),
    ]
    if api_key:
        own = docling.prefixes if docling is not None else ()
        middleware.append(Middleware(_RequireApiKey, api_key=api_key, own_check=own))
    app = Starlette(routes=routes, middleware=middleware, exception_handlers={HTTPException: http_error})
    app.state.door = door  # HttpServer.stop_intake reaches it here
    app.state.ui = web_ui  # HttpServer starts and stops it
    return app


__all__ = ["HttpMetrics", "build_app"]

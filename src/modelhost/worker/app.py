"""The worker's HTTP API (giz worker protocol v1) as a Starlette app built from its dependencies.

Every route turns the request into a call on the JobBoard and the answer into the protocol's JSON (protocol.py);
no route touches a model or a file of the store directly, except `/files/`, which only streams an output out.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from modelhost import _access, _serving
from modelhost.jobs.board import JobBoard
from modelhost.worker import protocol
from modelhost.worker.protocol import ApiError
from modelhost.worker.submission import read_json_body, submit_json, submit_multipart

JSON = "application/json"
#: Routes the Authorization header guards when the variable is set (the seed: every /v1/ request; the spec adds
#: the outputs and the metrics, which show what jobs exist).
GUARDED_PREFIXES = ("/v1/", "/files/", "/metrics")
#: The challenge of a 401. The header value is compared whole, so the scheme is whatever giz sends; Bearer is
#: what HTTP clients expect to see named.
WWW_AUTHENTICATE = 'Bearer realm="modelhost-worker"'


def json_response(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON answer from already encoded bytes."""
    return Response(body, status_code=status, media_type=JSON, headers=headers)


def error_response(error: ApiError) -> Response:
    """The protocol's error body, with Retry-After on 429."""
    headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else None
    return json_response(protocol.error_body(error.code, error.message, error.status), error.status, headers)


class Authorization:
    """Pure ASGI middleware: with a value set, a guarded route needs exactly it as its Authorization header.

    Compared in constant time (hmac.compare_digest), so the answer's timing does not leak how much of a guess
    matched.
    """

    def __init__(self, app: ASGIApp, value: str) -> None:
        self.app = app
        self.value = value.encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(GUARDED_PREFIXES):
            given = b""
            for name, value in scope["headers"]:
                if name == b"authorization":
                    given = value
                    break
            if not hmac.compare_digest(given, self.value):
                error = ApiError(401, protocol.WORKER_UNAUTHORIZED, "missing or wrong Authorization header")
                response = error_response(error)
                response.headers["WWW-Authenticate"] = WWW_AUTHENTICATE
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def layer_error_body(status: int, message: str) -> bytes:
    """The protocol's error body for an answer of the HTTP layer itself (modelhost._serving): a slow or malformed
    request is the client's (WORKER_INVALID_INPUT, 400/408); too many connections is WORKER_BUSY (503)."""
    code = protocol.WORKER_BUSY if status == 503 else protocol.WORKER_INVALID_INPUT
    return protocol.error_body(code, message, status)


def _answer_internal_error(scope: Scope) -> Response:
    return error_response(ApiError(500, protocol.WORKER_FAILED, "internal error of the worker (see its log)"))


#: `POST /v1/jobs` reads any Content-Type other than these as JSON (decision: a JSON body sent as text/plain, or with
#: none, is what it is; insisting on application/json would refuse working clients for no safety gain, and a body
#: that is not JSON fails to parse with a 400 that says so). multipart/form-data is an upload; any other multipart
#: type can never be either and is refused with 415 rather than a confusing JSON syntax error.
FORM_DATA = b"multipart/form-data"
NOT_JSON = b"multipart/"


def _created(record: protocol.Record, new: bool) -> Response:
    body = protocol.encode_record(record)
    if new:
        return json_response(body, 202, {"Location": f"/v1/jobs/{record.id}"})
    return json_response(body)


class JsonSubmissions:
    """Pure ASGI fast path for the hot route, `POST /v1/jobs` with a JSON body: it skips Starlette's routing,
    Request and exception layers, about a fifth of the CPU of a submission (measured with cProfile), which is what
    bounds durable submissions per second on a small machine. Everything else goes to the Starlette app."""

    def __init__(self, app: ASGIApp, board: JobBoard, max_upload_bytes: int) -> None:
        self.app = app
        self.board = board
        self.max_upload_bytes = max_upload_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/jobs" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        for name, value in headers:
            if name == b"content-type":
                media_type = value.partition(b";")[0].strip().lower()
                if media_type == FORM_DATA:
                    await self.app(scope, receive, send)
                    return
                if media_type.startswith(NOT_JSON):
                    shown = media_type.decode("latin-1")[:100]
                    await error_response(ApiError(415, protocol.WORKER_INVALID_INPUT, f"{shown} is neither JSON nor "
                                                  "multipart/form-data"))(scope, receive, send)  # fmt: skip
                    return
        try:
            body = await read_json_body(receive, headers, self.max_upload_bytes)
            record, new = await submit_json(body, self.board)
            _access.note(scope, model=record.model)
            response = _created(record, new)
        except ApiError as exc:
            response = error_response(exc)
        await response(scope, receive, send)


def build_app(
    board: JobBoard,
    *,
    health: Callable[[], str],
    registries: tuple[CollectorRegistry, ...],
    authorization: str | None = None,
    max_upload_bytes: int,
    access_log: _access.Emit = _access.to_logger,
) -> ASGIApp:
    """The worker's ASGI app. `health()` gives "ok", "loading" or "draining"; `registries` are scraped in order;
    `access_log` gets one record per request (modelhost._access)."""

    async def create(request: Request) -> Response:
        # Only multipart arrives here: a JSON submission takes the fast path below.
        record, new = await submit_multipart(request, board, max_upload_bytes)
        _access.note(request.scope, model=record.model)
        return _created(record, new)

    async def read(request: Request) -> Response:
        return json_response(protocol.encode_record(board.get(request.path_params["id"])))

    async def cancel(request: Request) -> Response:
        return json_response(protocol.encode_record(await board.cancel(request.path_params["id"])))

    async def ack(request: Request) -> Response:
        return json_response(protocol.encode_record(await board.ack(request.path_params["id"])))

    async def files(request: Request) -> Response:
        job_id, name = request.path_params["id"], request.path_params["name"]
        record = board.get(job_id)
        if not protocol.safe_file_name(name) or name not in record.output:
            raise protocol.not_found(f"output {protocol.shown(name)} of job {protocol.shown(job_id)}")
        path: Path = board.store.outputs_dir(job_id) / name
        return FileResponse(path, media_type=protocol.content_type(name))

    async def queue(request: Request) -> Response:
        body = protocol.queue_body(board.intake_open, board.capacity, board.queued, board.processing, board.run_order())
        return json_response(protocol.encode(body))

    async def healthz(request: Request) -> Response:
        body = protocol.health_body(
            health(),
            board.intake_open,
            board.capacity,
            board.queued,
            board.processing,
            board.storage_error,
        )
        return json_response(protocol.encode(body))

    async def models(request: Request) -> Response:
        return json_response(protocol.encode(protocol.models_body(board.models)))

    async def metrics(request: Request) -> Response:
        return Response(b"".join(generate_latest(r) for r in registries), media_type=CONTENT_TYPE_LATEST)

    async def intake_close(request: Request) -> Response:
        board.set_intake(False)
        return json_response(protocol.encode({"intake": "closed"}))

    async def intake_open(request: Request) -> Response:
        board.set_intake(True)
        return json_response(protocol.encode({"intake": "open"}))

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = protocol.WORKER_NOT_FOUND if exc.status_code == 404 else protocol.WORKER_INVALID_INPUT
        return error_response(ApiError(exc.status_code, code, str(exc.detail)))

    routes = [
        Route("/v1/jobs", create, methods=["POST"]),
        Route("/v1/jobs/{id}", read, methods=["GET"]),
        Route("/v1/jobs/{id}", cancel, methods=["DELETE"]),
        Route("/v1/jobs/{id}/ack", ack, methods=["POST"]),
        Route("/files/{id}/{name:path}", files, methods=["GET"]),
        Route("/v1/queue", queue, methods=["GET"]),
        Route("/v1/health", healthz, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v1/intake/close", intake_close, methods=["POST"]),
        Route("/v1/intake/open", intake_open, methods=["POST"]),
    ]
    starlette = Starlette(
        routes=routes,
        # Inside Starlette too: its own outermost layer would otherwise answer a route's exception in text/plain.
        middleware=[Middleware(_serving.AnswerServerErrors, answer=_answer_internal_error)],
        exception_handlers={ApiError: api_error, HTTPException: http_error},
    )
    # No 307 to a slash-suffixed path: `/files/x/` would match the files route with an empty name; a client gets
    # a plain 404 for a path that names nothing.
    starlette.router.redirect_slashes = False
    app: ASGIApp = starlette
    app = JsonSubmissions(app, board, max_upload_bytes)
    if authorization:
        app = Authorization(app, authorization)
    # Outermost: a request answered by any layer (a 401, a 500 from a surprise) is logged with its status.
    return _access.AccessLog(_serving.AnswerServerErrors(app, _answer_internal_error), "worker", access_log)

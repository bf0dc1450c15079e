"""The HTTP door's errors, in one place for both protocols: `ApiError`, a modelhost error as one (its status and
OpenAI error type are its kind's, declared beside its class in modelhost.errors, the table every door reads), the
two error bodies (OpenAI's object, Ollama's string), and how a handler's error becomes a response of its route family.

Everything that refuses a request raises ApiError and one decorator (`answers_errors`) turns it into bytes.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Literal, TypeVar

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from modelhost import _access
from modelhost.errors import (
    HttpErrorType,
    InvalidOptionError,
    ModelHostError,
    SchemaError,
    kind_of,
    kind_of_code,
    pointer,
)
from modelhost.host.events import Failed

log = logging.getLogger("modelhost.http")

Flavour = Literal["openai", "ollama"]
ErrorType = HttpErrorType


class ApiError(Exception):
    """A request the door refuses or cannot finish, with everything both wire formats need to say why."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: ErrorType = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = dict(headers or {})


class _ErrorDetail(msgspec.Struct):
    message: str
    type: str
    param: str | None
    code: str | None


class _ErrorBody(msgspec.Struct):
    error: _ErrorDetail


def openai_error_body(err: ApiError) -> bytes:
    """OpenAI's error body: {"error": {"message", "type", "param", "code"}}."""
    return msgspec.json.encode(_ErrorBody(_ErrorDetail(err.message, err.type, err.param, err.code)))


def ollama_error_body(err: ApiError) -> bytes:
    """Ollama's error body: {"error": "message"}."""
    return msgspec.json.encode({"error": err.message})


def flavour_of(path: str) -> Flavour:
    """The route family of a path: Ollama's under /api/, OpenAI's (and the probes') elsewhere."""
    return "ollama" if path.startswith("/api/") else "openai"


def error_response(err: ApiError, flavour: Flavour) -> Response:
    """`err` as a response in the route family's JSON."""
    body = ollama_error_body(err) if flavour == "ollama" else openai_error_body(err)
    return Response(body, status_code=err.status, media_type="application/json", headers=err.headers)


def from_host_error(code: str, message: str, *, param: str | None = None) -> ApiError:
    """The wire error for a modelhost error code (a Failed event's): the status and type its kind declares."""
    kind = kind_of_code(code)
    return ApiError(kind.http_status, message, type=kind.http_type, param=param, code=code)


def from_exception(exc: ModelHostError, *, param: str | None = None, message: str | None = None) -> ApiError:
    """The wire error for a modelhost exception: the status and type its kind declares (`kind_of`), its code, and
    its message unless another is given."""
    kind = kind_of(exc)
    text = str(exc) if message is None else message
    return ApiError(kind.http_status, text, type=kind.http_type, param=param, code=exc.code)


def from_host_exception(exc: ModelHostError, wire_names: Mapping[str, str]) -> ApiError:
    """The wire error for an exception `Host.submit` raised; an option error names the parameter the client sent."""
    param = None
    message = str(exc)
    if isinstance(exc, SchemaError):
        param, message = _schema_refusal(exc, wire_names)
    elif isinstance(exc, InvalidOptionError):
        param = wire_names.get(exc.option, exc.option)
        if param != exc.option:
            # The message names it too: Ollama's error body is the message alone, and `option 'max_tokens'` names
            # nothing an Ollama client sent (it sent options.num_predict).
            message = f"{param}: {exc.detail}"
    return from_exception(exc, param=param, message=message)


def from_failure(failed: Failed, wire_names: Mapping[str, str]) -> ApiError:
    """The wire error of a request that failed mid-answer; one naming an option (a grammar with no token left to
    allow) names the parameter the client sent, as `from_host_exception` does at submit."""
    if failed.option is None:
        return from_host_error(failed.code, failed.message)
    param = wire_names.get(failed.option, failed.option)
    detail = failed.message.removeprefix(f"option {failed.option!r}: ")
    return from_host_error(failed.code, f"{param}: {detail}" if param != failed.option else failed.message, param=param)


def _schema_refusal(exc: SchemaError, wire_names: Mapping[str, str]) -> tuple[str, str]:
    """(param, message) of a refused schema: the parameter holding the deepest part of the schema the refusal is
    in (a tool's parameters inside a call schema), and where inside that parameter."""
    for cut in range(len(exc.at), -1, -1):
        param = wire_names.get(exc.option + (pointer(exc.at[:cut]) if cut else ""))
        if param is not None:
            return param, f"{param}: {exc.reason} (at {pointer(exc.at[cut:])})"
    return exc.option, str(exc)


def internal_error() -> ApiError:
    """What a surprise in a handler answers (the traceback goes to the log, not to the client)."""
    return ApiError(500, "internal server error (see the server log)", type="server_error", code="internal")


def cancelled_by_host() -> ApiError:
    """A request cancelled while its client still listens: only the host's shutdown does that."""
    return from_host_error("cancelled", "the request was cancelled: the host is shutting down")


def client_gone() -> ApiError:
    """A client that hung up: nobody reads this; 499 (nginx's "client closed request") keeps the request counter
    truthful."""
    return ApiError(499, "client closed the request", code="cancelled")


#: Codes of the answers the HTTP layer gives before any route runs (modelhost._serving), by status.
_LAYER_CODES = {400: "malformed_http", 408: "request_timeout", 503: "too_many_connections"}


def layer_error_body(status: int, message: str) -> bytes:
    """The door's JSON body for an answer of the HTTP layer itself (a slow client, too many connections, bytes that
    are not HTTP). The path may not be known yet, so it is OpenAI's shape, which Ollama clients also read."""
    kind: ErrorType = "server_error" if status >= 500 else "invalid_request_error"
    return openai_error_body(ApiError(status, message, type=kind, code=_LAYER_CODES.get(status)))


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (no such route) and 405 (wrong method), in the route family's JSON."""
    assert isinstance(exc, HTTPException)
    err = ApiError(exc.status_code, str(exc.detail), type="not_found_error" if exc.status_code == 404 else
                   "invalid_request_error", headers=exc.headers)  # fmt: skip
    return error_response(err, flavour_of(request.url.path))


def answer_internal_error(scope: Scope) -> Response:
    """The answer of `_serving.AnswerServerErrors` to an exception that escaped every handler."""
    return error_response(internal_error(), flavour_of(scope["path"]))


S = TypeVar("S")
Handler = Callable[[S, Request], Awaitable[Response]]


def answers_errors(flavour: Flavour) -> Callable[[Handler[S]], Handler[S]]:
    """Turn ApiError (and any surprise) raised by a handler method into the route family's error body."""

    def wrap(handler: Handler[S]) -> Handler[S]:
        @functools.wraps(handler)
        async def run(self: S, request: Request) -> Response:
            try:
                return await handler(self, request)
            except ApiError as err:
                # The access log's error code: Ollama's body carries none, so the door says it (modelhost._access).
                _access.note(request.scope, error=err.code or err.type)
                return error_response(err, flavour)
            except Exception:
                log.exception("%s %s failed", request.method, request.url.path)
                return error_response(internal_error(), flavour)

        return run

    return wrap


__all__ = [
    "ApiError",
    "ErrorType",
    "Flavour",
    "answers_errors",
    "error_response",
    "from_exception",
    "from_failure",
    "from_host_error",
    "from_host_exception",
    "layer_error_body",
    "ollama_error_body",
    "openai_error_body",
]

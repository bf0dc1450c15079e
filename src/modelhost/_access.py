"""One access-log line per HTTP request, for both HTTP doors (the OpenAI/Ollama door and the job worker): method,
path, status, model, tokens and duration, as text for a person or as one JSON object for a log shipper.

A pure-ASGI middleware (`AccessLog`) times each request from its first byte in to its last byte out (a stream's
whole length), and catches the status; it stamps the request's start (UTC), gives it a request id (the client's
`X-Request-Id` when it sent a usable one, else a new one, echoed in the answer's `x-request-id` header so a client
can quote it), and reads the error code of a refusal from its JSON body (OpenAI's `error.code` or `error.type`, the
worker's `code`) unless the route noted one. What only a route knows (the model it routed to, the tokens the answer
cost) the route writes with `note(scope, ...)` into the request's scope, where the middleware reads it when the
answer is over. A request whose client hung up is logged with status 499, as nginx does.

By default the lines go to the `modelhost.access` logger at INFO (silent unless the embedding process configures
logging); `modelhost serve` passes its own `emit` that prints them.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("modelhost.access")

#: Where a route writes what it knows of its request, in the ASGI scope (a dict every layer shares).
SCOPE_KEY = "modelhost.access"

LogFormat = Literal["text", "json"]


@dataclass(frozen=True, slots=True)
class AccessRecord:
    """One answered request."""

    door: str  # "http" or "worker"
    method: str
    path: str
    status: int
    seconds: float
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: When the request began: ISO 8601 in UTC, to the millisecond ("2026-12-06T02:40:01.123Z").
    time: str = ""
    #: The client's X-Request-Id, else one made for it (the answer's x-request-id header says which).
    request_id: str = ""
    #: A refused or failed request's error code (`queue_full`, `model_not_found`, ...); "" for an answer.
    error: str = ""

    def text(self) -> str:
        """`http POST /v1/chat/completions 200 model=default tokens=12+8 0.532s` (model and tokens when known; a
        refusal's `error=CODE` after its status)."""
        parts = [self.door, self.method, self.path, str(self.status)]
        if self.error:
            parts.append(f"error={self.error}")
        if self.model:
            parts.append(f"model={self.model}")
        if self.prompt_tokens or self.completion_tokens:
            parts.append(f"tokens={self.prompt_tokens}+{self.completion_tokens}")
        parts.append(f"{self.seconds:.3f}s")
        return " ".join(parts)

    def json(self) -> str:
        """The record as one JSON object on one line."""
        return json.dumps(asdict(self), separators=(",", ":"))

    def line(self, form: LogFormat) -> str:
        """The record as `form` says."""
        return self.json() if form == "json" else self.text()


Emit = Callable[[AccessRecord], None]


def to_logger(record: AccessRecord) -> None:
    """The default emitter: the `modelhost.access` logger at INFO, the text line as the message."""
    log.info("%s", record.text(), extra={"access": asdict(record)})


def note(scope: Scope, **facts: Any) -> None:
    """Record what a route knows of its request (`model=`, `prompt_tokens=`, `completion_tokens=`); tokens add up
    (a request of several choices notes each)."""
    known = scope.get(SCOPE_KEY)
    if known is None:
        return
    for key, value in facts.items():
        known[key] = known.get(key, 0) + value if key.endswith("_tokens") else value


#: Longest path an access line repeats: a scanner's 8 KB URL must not make every log line 8 KB.
MAX_LOGGED_PATH = 200

#: A client's request id is kept when it is this short and plain (letters, digits, `-_.:`), as a log line and a
#: header can carry it; anything else (a megabyte, a newline that would forge a log line) gets a fresh id instead.
_CLIENT_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")

#: How much of a refusal's body is read for its error code: every door's error JSON is a few hundred bytes.
MAX_ERROR_BODY = 4096


def request_id(scope: Scope) -> str:
    """The client's `X-Request-Id` when usable, else a new random one (32 hex digits)."""
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id" and _CLIENT_REQUEST_ID.fullmatch(value):
            return bytes(value).decode("ascii")
    return uuid.uuid4().hex


def error_code(body: bytes) -> str:
    """The error code a refusal's JSON body carries: the worker's `code`, OpenAI's `error.code` (else its
    `error.type`); "" when there is none (Ollama's `{"error": "..."}`, docling's `{"detail": ...}`)."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    error = data.get("error")
    found = data.get("code") if not isinstance(error, dict) else (error.get("code") or error.get("type"))
    return found if isinstance(found, str) else ""


class AccessLog:
    """Emit one AccessRecord per HTTP request once its answer is over (pure ASGI, so a stream is timed whole)."""

    def __init__(self, app: ASGIApp, door: str, emit: Emit = to_logger) -> None:
        self.app = app
        self.door = door
        self.emit = emit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        status = 500  # what an exception that escapes every layer becomes
        rid = request_id(scope)
        known: dict[str, Any] = {}
        scope[SCOPE_KEY] = known
        refusal = bytearray()  # the first MAX_ERROR_BODY bytes of a 4xx/5xx body, for its code

        async def watching(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", ()), (b"x-request-id", rid.encode())]}
            elif message["type"] == "http.response.body" and status >= 400 and len(refusal) < MAX_ERROR_BODY:
                refusal.extend(message.get("body", b"")[: MAX_ERROR_BODY - len(refusal)])
            await send(message)

        try:
            await self.app(scope, receive, watching)
        finally:
            path = scope["path"]
            if len(path) > MAX_LOGGED_PATH:
                path = path[:MAX_LOGGED_PATH] + "..."
            final = known.get("status", status)
            error = str(known.get("error", "")) or (error_code(bytes(refusal)) if final >= 400 else "")
            if final == 499 and not error:
                error = "client_closed"  # nginx's name for it: the client left before its answer ended
            record = AccessRecord(
                self.door, scope["method"], path, final, time.perf_counter() - began,
                str(known.get("model", "")), int(known.get("prompt_tokens", 0)), int(known.get("completion_tokens", 0)),
                time=stamp, request_id=rid, error=error,
            )  # fmt: skip
            try:
                self.emit(record)
            except Exception:  # a broken log sink must not turn an answered request into a failed one
                log.exception("the access log could not be written")

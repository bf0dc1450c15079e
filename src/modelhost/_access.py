"""One access-log line per HTTP request, for both HTTP doors (the OpenAI/Ollama door and the job worker): method,
path, status, model, tokens and duration, as text for a person or as one JSON object for a log shipper.

A pure-ASGI middleware (`AccessLog`) times each request from its first byte in to its last byte out (a stream's
whole length), and catches the status. What only a route knows (the model it routed to, the tokens the answer
cost) the route writes with `note(scope, ...)` into the request's scope, where the middleware reads it when the
answer is over. A request whose client hung up is logged with status 499, as nginx does.

By default the lines go to the `modelhost.access` logger at INFO (silent unless the embedding process configures
logging); `modelhost serve` passes its own `emit` that prints them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
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

    def text(self) -> str:
        """`http POST /v1/chat/completions 200 model=default tokens=12+8 0.532s` (model and tokens when known)."""
        parts = [self.door, self.method, self.path, str(self.status)]
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
        status = 500  # what an exception that escapes every layer becomes
        known: dict[str, Any] = {}
        scope[SCOPE_KEY] = known

        async def watching(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watching)
        finally:
            path = scope["path"]
            if len(path) > MAX_LOGGED_PATH:
                path = path[:MAX_LOGGED_PATH] + "..."
            record = AccessRecord(
                self.door, scope["method"], path, known.get("status", status), time.perf_counter() - began,
                str(known.get("model", "")), int(known.get("prompt_tokens", 0)), int(known.get("completion_tokens", 0)),
            )  # fmt: skip
            try:
                self.emit(record)
            except Exception:  # a broken log sink must not turn an answered request into a failed one
                log.exception("the access log could not be written")

"""One family of errors for everything modelhost raises on purpose, and the one table of how every door answers each.

Callers branch on `code`, never on message text: the codes are stable API, the messages are for people. Each class
also declares its `kind` (an `ErrorKind`): the HTTP status and OpenAI error type, the inferd wire code and the giz
worker error class it becomes. Every door reads that declaration (`kind_of`, `kind_of_code`) instead of keeping a
table of its own, so a new error class is answered the same way by the HTTP doors, the socket and the job worker
(llama.cpp's server does the same with one error-type enum and one `format_error_response`). docs/errors.md lists
the table; a test checks it against this module.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, Literal

#: OpenAI's error types that modelhost's HTTP doors answer with (the `type` of an OpenAI error body).
HttpErrorType = Literal[
    "invalid_request_error", "authentication_error", "not_found_error", "rate_limit_error", "server_error"
]


@dataclass(frozen=True, slots=True)
class ErrorKind:
    """How every door answers one kind of error.

    - `http_status`, `http_type`: the HTTP doors' status and OpenAI error type (Ollama's body carries the message
      alone, at the same status).
    - `wire_code`: the inferd socket's error code, one of inferd's ErrorCodeV2 (`modelhost.wire.codec.ErrorCode`):
      the seeds' enumeration, never a new one, since a Go or Rust client branches on it.
    - `worker_class`: the giz worker's error class of a job that fails with it (`WORKER_INVALID_INPUT` is the job's
      own input, status 400; `WORKER_BUSY` means "wait and retry", which a job does on its own; `WORKER_FAILED`,
      `WORKER_CANCELLED` are the worker's, status 500). Plain strings here, as the wire code is: this module is a
      leaf every layer imports, so it names the doors' values without importing the doors.
    """

    http_status: int
    http_type: HttpErrorType
    wire_code: str
    worker_class: str


#: The request's own content or options are wrong: fix it, do not retry.
REFUSED = ErrorKind(400, "invalid_request_error", "invalid_request", "WORKER_INVALID_INPUT")
#: The request names something not here (a model, an adapter that was unloaded on its way in).
NOT_FOUND = ErrorKind(404, "not_found_error", "invalid_request", "WORKER_INVALID_INPUT")
#: The host's bounded queue is full: retry later (a job waits and asks again on its own).
BUSY = ErrorKind(429, "rate_limit_error", "queue_full", "WORKER_BUSY")
#: The model is loading, or waiting for memory: retry shortly (a job waits on its own).
LOADING = ErrorKind(503, "server_error", "backend_unavailable", "WORKER_BUSY")
#: This host cannot serve it now (closing, a model closed, a backend or cluster that cannot run here): another replica
#: may. A job fails: the worker cannot tell when it would come back.
UNAVAILABLE = ErrorKind(503, "server_error", "backend_unavailable", "WORKER_FAILED")
#: The server failed: a bug, or an engine that broke mid-answer.
INTERNAL = ErrorKind(500, "server_error", "internal", "WORKER_FAILED")
#: A server this one relays to (a hub, another host's socket) failed or could not be reached: this one worked.
UPSTREAM = ErrorKind(502, "server_error", "internal", "WORKER_FAILED")

#: A request the host cancelled while its client still waited: only the host's shutdown does that. On the wire a
#: cancelled generation ends with its `done` frame (stop reason cancelled), never an error frame, so `internal` is
#: only what a cancelled embedding would say; a job fails (the worker did not cancel it: WORKER_CANCELLED is its own).
CANCELLED = ErrorKind(503, "server_error", "internal", "WORKER_FAILED")


class ModelHostError(Exception):
    """Base of every deliberate modelhost error. `code` is stable; `str(err)` is for humans.

    Each subclass declares its `code` and its `kind` (how every door answers it). A code given at construction
    (`code=`) overrides the class's; its kind is then the code's own: the class's `codes` names the kinds of the
    extra codes its instances carry, else the class that declares that code (`kind_of`).
    """

    code: str = "internal"
    kind: ClassVar[ErrorKind] = INTERNAL
    #: Kinds of the codes an instance may carry besides the class's own (`code=` at construction).
    codes: ClassVar[Mapping[str, ErrorKind]] = MappingProxyType({"cancelled": CANCELLED})

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        """The human-readable message (same as `str(err)`)."""
        return str(self)


class InvalidOptionError(ModelHostError, ValueError):
    """An option has an unknown name, the wrong type or a value out of range; `option` names it."""

    code = "invalid_option"
    kind = REFUSED

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"option {option!r}: {message}")
        self.option = option
        self.detail = message


class InvalidInputError(ModelHostError, ValueError):
    """A request's own content is unusable (empty messages, a broken image, an unknown role)."""

    code = "invalid_input"
    kind = REFUSED


class UnsupportedAttachmentError(ModelHostError):
    """The loaded model cannot take this kind of input (an image sent to a text-only model).

    Raised before any compute, so a refused request costs nothing.
    """

    code = "attachment_unsupported"
    kind = ErrorKind(400, "invalid_request_error", "attachment_unsupported", "WORKER_INVALID_INPUT")


class EmbeddingUnsupportedError(ModelHostError):
    """The model named by the request cannot embed text (its backend offers no EmbeddingModel capability).

    Raised before anything is queued; the HTTP door answers 400 naming `model`, so a client learns to pick another
    model rather than retrying.
    """

    code = "embeddings_unsupported"
    kind = REFUSED


class BackendNotRegisteredError(ModelHostError, LookupError):
    """No backend of that name is registered."""

    code = "backend_not_registered"
    kind = UNAVAILABLE


class BackendUnavailableError(ModelHostError):
    """The backend is registered but cannot run here (library missing, no device)."""

    code = "backend_unavailable"
    kind = UNAVAILABLE


class NoBackendsError(ModelHostError):
    """The registry has nothing to offer: none registered, or none available."""

    code = "no_backends"
    kind = UNAVAILABLE


class ModelNotFoundError(ModelHostError, FileNotFoundError):
    """A model path or name resolves to nothing; the message lists what would have worked. Code `ambiguous_model`
    when several models fit the name (the request must say which)."""

    code = "model_not_found"
    kind = NOT_FOUND
    codes = MappingProxyType({"ambiguous_model": REFUSED})


class ModelLoadError(ModelHostError):
    """A backend tried to load the model and failed; the message names the backend and the cause."""

    code = "load_failed"
    kind = INTERNAL


class NotTrainableError(ModelHostError):
    """The loaded model does not offer the training capability that was asked for."""

    code = "not_trainable"
    kind = REFUSED


class ModelClosedError(ModelHostError):
    """The model was closed; its memory is gone and it can serve nothing more."""

    code = "model_closed"
    kind = UNAVAILABLE


class GenerationError(ModelHostError):
    """The engine failed while generating; the tokens produced before the failure were already yielded."""

    code = "generation_failed"
    kind = INTERNAL


class QueueFullError(ModelHostError):
    """The host's bounded queue is full; retry later. Doors turn this into 429 / queue_full / WORKER_BUSY."""

    code = "queue_full"
    kind = BUSY


class ModelLoadingError(ModelHostError):
    """The host is still loading its model; retry shortly. Doors answer 503 (HTTP) or ECONNREFUSED (socket)."""

    code = "model_loading"
    kind = LOADING


class HostClosedError(ModelHostError):
    """The host is shutting down and admits no new requests."""

    code = "host_closed"
    kind = UNAVAILABLE


class SchemaError(InvalidOptionError):
    """A JSON Schema (the `json_schema` option) that no grammar engine here may be given: too large, too deep, too
    costly a step, or one no value satisfies. `at` is where, as JSON pointer parts, so a door whose schema wraps the
    client's (a tool call's schema wraps each tool's parameters) can name the parameter the client sent."""

    def __init__(self, at: tuple[str, ...], reason: str) -> None:
        super().__init__("json_schema", f"{reason} (at {pointer(at)})")
        self.at = at
        self.reason = reason


def pointer(parts: tuple[str, ...]) -> str:
    """A JSON pointer of `parts` ("/" for the root), escaped as RFC 6901 says."""
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts) if parts else "/"


def family() -> Iterator[type[ModelHostError]]:
    """ModelHostError and every subclass defined so far (the modules that define them must have been imported),
    base first, each once."""
    seen: set[type[ModelHostError]] = set()
    todo: list[type[ModelHostError]] = [ModelHostError]
    while todo:
        cls = todo.pop(0)
        if cls not in seen:
            seen.add(cls)
            yield cls
            todo.extend(cls.__subclasses__())


def kind_of_code(code: str) -> ErrorKind:
    """The kind of an error known only by its code (a host `Failed` event, an error an actor sent back): the kind
    of the class that declares the code, else of a class that names it among its `codes`, else `internal`'s."""
    return _declared(code) or ModelHostError.kind


def kind_of(exc: ModelHostError) -> ErrorKind:
    """How every door answers `exc`: its class's kind, or, for a code given at construction, that code's (its
    class's own `codes` first, then the family's), else its class's."""
    cls = type(exc)
    if exc.code == cls.code:
        return cls.kind
    return cls.codes.get(exc.code) or _declared(exc.code) or cls.kind


def _declared(code: str) -> ErrorKind | None:
    """The kind the family declares for `code`: a class's own code first, then a class's extra `codes`."""
    extra: ErrorKind | None = None
    for cls in family():
        if cls.__dict__.get("code") == code:
            return cls.kind
        if extra is None:
            extra = cls.__dict__.get("codes", {}).get(code)
    return extra

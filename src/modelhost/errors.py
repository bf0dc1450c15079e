"""One family of errors for everything modelhost raises on purpose.

Callers branch on `code`, never on message text: the codes are stable API, the messages are for people. Each door
maps codes onto its own wire (an inferd error frame, a giz failure, an OpenAI error body) in its own module.
"""

from __future__ import annotations


class ModelHostError(Exception):
    """Base of every deliberate modelhost error. `code` is stable; `str(err)` is for humans."""

    code: str = "internal"

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

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"option {option!r}: {message}")
        self.option = option
        self.detail = message


class InvalidInputError(ModelHostError, ValueError):
    """A request's own content is unusable (empty messages, a broken image, an unknown role)."""

    code = "invalid_input"


class UnsupportedAttachmentError(ModelHostError):
    """The loaded model cannot take this kind of input (an image sent to a text-only model).

    Raised before any compute, so a refused request costs nothing.
    """

    code = "attachment_unsupported"


class EmbeddingUnsupportedError(ModelHostError):
    """The model named by the request cannot embed text (its backend offers no EmbeddingModel capability).

    Raised before anything is queued; the HTTP door answers 400 naming `model`, so a client learns to pick another
    model rather than retrying.
    """

    code = "embeddings_unsupported"


class BackendNotRegisteredError(ModelHostError, LookupError):
    """No backend of that name is registered."""

    code = "backend_not_registered"


class BackendUnavailableError(ModelHostError):
    """The backend is registered but cannot run here (library missing, no device)."""

    code = "backend_unavailable"


class NoBackendsError(ModelHostError):
    """The registry has nothing to offer: none registered, or none available."""

    code = "no_backends"


class ModelNotFoundError(ModelHostError, FileNotFoundError):
    """A model path or name resolves to nothing; the message lists what would have worked."""

    code = "model_not_found"


class ModelLoadError(ModelHostError):
    """A backend tried to load the model and failed; the message names the backend and the cause."""

    code = "load_failed"


class NotTrainableError(ModelHostError):
    """The loaded model does not offer the training capability that was asked for."""

    code = "not_trainable"


class ModelClosedError(ModelHostError):
    """The model was closed; its memory is gone and it can serve nothing more."""

    code = "model_closed"


class GenerationError(ModelHostError):
    """The engine failed while generating; the tokens produced before the failure were already yielded."""

    code = "generation_failed"


class QueueFullError(ModelHostError):
    """The host's bounded queue is full; retry later. Doors turn this into 429 / queue_full / WORKER_BUSY."""

    code = "queue_full"


class ModelLoadingError(ModelHostError):
    """The host is still loading its model; retry shortly. Doors answer 503 (HTTP) or ECONNREFUSED (socket)."""

    code = "model_loading"


class HostClosedError(ModelHostError):
    """The host is shutting down and admits no new requests."""

    code = "host_closed"


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

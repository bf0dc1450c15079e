"""A job's record and its vocabulary: statuses, progress stages, failure codes, input file references, ids, and the
refusals of the job board. This is the format of the job store (each job's `job.json`), which both job doors stand
on: the worker (modelhost.worker) serves a record as is (`GET /v1/jobs/{id}`), and the docling door
(modelhost.http.docling) reads its tasks' state from it.

The values are giz's (its inference worker protocol v1, summarised in docs/worker.md, where the project's decisions
on what the seed leaves open are recorded too): the worker's protocol re-exports them (`modelhost.worker.protocol`),
so what a giz caller observes is still read in one place, and a correction from a real giz caller is a one-line
change here.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any, Final

import msgspec

# -- error codes (seed: WORKER_BUSY, WORKER_INTERRUPTED, WORKER_INVALID_INPUT, WORKER_FAILED, WORKER_STORAGE,
#    WORKER_CANCELLED; the rest are the spec's decisions for answers the seed does not name) ------------------------
WORKER_BUSY: Final = "WORKER_BUSY"
WORKER_INTERRUPTED: Final = "WORKER_INTERRUPTED"
WORKER_INVALID_INPUT: Final = "WORKER_INVALID_INPUT"
WORKER_FAILED: Final = "WORKER_FAILED"
WORKER_STORAGE: Final = "WORKER_STORAGE"
WORKER_CANCELLED: Final = "WORKER_CANCELLED"
WORKER_NOT_FOUND: Final = "WORKER_NOT_FOUND"
WORKER_NOT_FINISHED: Final = "WORKER_NOT_FINISHED"

# -- job statuses (decision: the seed names queued/processing only implicitly) ----------------------------------
QUEUED: Final = "queued"
PROCESSING: Final = "processing"
COMPLETED: Final = "completed"
FAILED: Final = "failed"
CANCELLED: Final = "cancelled"
#: Statuses after which a job never changes again (ack and retention apply only to these).
FINISHED: Final = frozenset({COMPLETED, FAILED, CANCELLED})
#: Statuses that count against `capacity` ("jobs held at once, queued plus processing").
HELD: Final = frozenset({QUEUED, PROCESSING})

# -- progress stages, as giz names them -------------------------------------------------------------------------
STAGE_INITIALIZING: Final = "initializing"
STAGE_LOADING_MODEL: Final = "loading_model"
STAGE_ENCODING_PROMPT: Final = "encoding_prompt"
STAGE_GENERATING: Final = "generating"
STAGE_ENCODING_VIDEO: Final = "encoding_video"
STAGES: Final = (STAGE_INITIALIZING, STAGE_LOADING_MODEL, STAGE_ENCODING_PROMPT, STAGE_GENERATING, STAGE_ENCODING_VIDEO)
#: Ours, not giz's (so not in STAGES): an optimiser loop (`lora.train`), step of total optimiser steps.
STAGE_TRAINING: Final = "training"

# -- input references -------------------------------------------------------------------------------------------
#: In a submitted input: `{"$file": "<multipart field>"}` names an uploaded part.
FILE_REF: Final = "$file"
#: In a stored input (what the executor sees): `{"$inputFile": {"name", "contentType", "path"}}`.
INPUT_FILE: Final = "$inputFile"

#: Length of a job id in hex digits (128 bits: random ids never collide in practice).
ID_HEX_DIGITS: Final = 32
_HEX: Final = frozenset("0123456789abcdef")


class Record(msgspec.Struct, rename={"error_status": "errorStatus"}):
    """One job's state: the content of its `job.json` and the body of `GET /v1/jobs/{id}`. Every field always
    present (no defaults on purpose: a `job.json` missing a field is damaged and is not restored)."""

    id: str
    operation: str
    model: str
    input: str
    status: str
    stage: str
    step: int
    total: int
    remaining: float
    output: list[str]
    error: str
    code: str
    error_status: int
    created: int
    started: int
    completed: int
    acknowledged: bool
    cancel: bool

    @property
    def finished(self) -> bool:
        """True once the job can no longer change (completed, failed or cancelled)."""
        return self.status in FINISHED


def new_record(job_id: str, operation: str, model: str, input_json: str, created: int) -> Record:
    """A freshly queued job."""
    return Record(
        id=job_id,
        operation=operation,
        model=model,
        input=input_json,
        status=QUEUED,
        stage="",
        step=0,
        total=0,
        remaining=0.0,
        output=[],
        error="",
        code="",
        error_status=0,
        created=created,
        started=0,
        completed=0,
        acknowledged=False,
        cancel=False,
    )


_record_encoder = msgspec.json.Encoder()
_record_decoder = msgspec.json.Decoder(Record)


def encode_record(record: Record) -> bytes:
    """The record as JSON bytes (job.json, and the GET body)."""
    return _record_encoder.encode(record)


def decode_record(data: bytes) -> Record:
    """Parse a job.json; raises msgspec.DecodeError / ValidationError for a damaged or foreign file."""
    return _record_decoder.decode(data)


def job_id(model: str, operation: str, key: str) -> str:
    """The id of a job: with a key, the first 32 hex digits of SHA-256 over `model \\n operation \\n key` (UTF-8),
    so the same request gives the same job; without one, 32 random hex digits."""
    if not key:
        return secrets.token_hex(ID_HEX_DIGITS // 2)
    digest = hashlib.sha256(f"{model}\n{operation}\n{key}".encode()).hexdigest()
    return digest[:ID_HEX_DIGITS]


def is_job_id(value: str) -> bool:
    """True for 32 lowercase hex digits (anything else can never name a job folder)."""
    return len(value) == ID_HEX_DIGITS and set(value) <= _HEX


def now_ms() -> int:
    """Milliseconds since 1970, the unit of the record's times."""
    return time.time_ns() // 1_000_000


@dataclass(unsafe_hash=True)
class Failure(Exception):
    """Why a job failed (the seed's Failure): its code, message and HTTP-like status (4xx: the request's own fault,
    5xx: the worker's). Raised by an executor; stored in the record's code, error and errorStatus.

    Neither frozen nor slotted, as an exception must not be: leaving a `with` block, contextlib sets the
    exception's `__traceback__`, which a frozen dataclass refuses and a slotted one's generated `__setattr__`
    failed with `TypeError: super(type, obj)` (a cancelled `text.embed` job waiting for a full queue ended
    WORKER_FAILED with it instead of cancelled). Still equal and hashed by its fields, as when it was frozen."""

    code: str
    message: str
    status: int

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def invalid(message: str) -> Failure:
    """A failure of the job's own input: WORKER_INVALID_INPUT, status 400."""
    return Failure(WORKER_INVALID_INPUT, message, 400)


def failed(code: str, message: str) -> Failure:
    """A failure of the worker (WORKER_FAILED, WORKER_STORAGE, WORKER_CANCELLED, ...): status 500."""
    return Failure(code, message, 500)


def input_file(name: str, content_type: str, path: str) -> dict[str, Any]:
    """What the executor sees for an uploaded file."""
    return {INPUT_FILE: {"name": name, "contentType": content_type, "path": path}}


def input_path(value: Any) -> str | None:
    """The path of an input file (`{"$inputFile": {...}}`); None for any other value (the seed's `inputPath`)."""
    if isinstance(value, dict) and len(value) == 1:
        inner = value.get(INPUT_FILE)
        if isinstance(inner, dict) and isinstance(inner.get("path"), str):
            return str(inner["path"])
    return None


def safe_file_name(name: str) -> bool:
    """True for a plain file name: no `/`, `\\`, `..`, NUL, and not empty or a dot file (which could name the
    folder itself or a temporary file of the store)."""
    return (
        bool(name) and not name.startswith(".") and not any(c in name for c in ("/", "\\", "\x00")) and ".." not in name
    )


class ApiError(Exception):
    """An answer other than 2xx: its HTTP status, code and message (the error body), and for 429 a Retry-After."""

    def __init__(self, status: int, code: str, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


#: Most characters of a caller's own value (an id, a file name) echoed back in an error message: enough to recognise
#: it, while a 20 KB path segment does not come back as a 20 KB answer (nor into a log line).
MAX_ECHOED = 80


def shown(value: str) -> str:
    """`value` quoted for an error message, cut to MAX_ECHOED characters."""
    if len(value) <= MAX_ECHOED:
        return repr(value)
    return f"{value[:MAX_ECHOED]!r}... ({len(value)} characters)"


def not_found(what: str) -> ApiError:
    """404 WORKER_NOT_FOUND. `what` names the thing (values in it quoted with `shown`)."""
    return ApiError(404, WORKER_NOT_FOUND, f"{what} not found")


def bad_request(message: str) -> ApiError:
    """400 WORKER_INVALID_INPUT: the submission itself is unusable; nothing was stored."""
    return ApiError(400, WORKER_INVALID_INPUT, message)


def busy(message: str, retry_after: int) -> ApiError:
    """429 WORKER_BUSY: at capacity, or intake closed; Retry-After says when to try again."""
    return ApiError(429, WORKER_BUSY, message, retry_after=retry_after)


#: Retry-After of a 507: the worker retries its own storage at most this far apart (board.STORAGE_RETRY_MAX_SECONDS),
#: so a caller that waits this long tries against a store that has been probed again. Every 507 carries it (the first
#: of a full disk and the upload 507s once had none, and a client could only guess when to come back).
STORAGE_RETRY_AFTER: Final = 5


def storage_error(message: str, *, retry_after: int = STORAGE_RETRY_AFTER) -> ApiError:
    """507 WORKER_STORAGE: the job could not be made durable (disk full, I/O error); nothing was kept."""
    return ApiError(507, WORKER_STORAGE, message, retry_after=retry_after)

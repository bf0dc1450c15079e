"""giz's inference worker protocol, version 1: every wire constant and serialiser of the job worker, in one module.

The seed (giz's protocol, summarised in docs/worker.md) fixes the record, the codes, the stages and PICTURE_SIDE;
docs/worker.md also records the project's decisions where the seed is silent (status names, error bodies, the
bytes hashed for an id).
Everything a giz caller can observe on the wire is read here: the job's record, its statuses, stages and codes are
the job store's format (modelhost.jobs.schema, which the docling door's tasks share), re-exported below as they
are; the rest (submissions, health, queue and error bodies, content types) is defined here.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import msgspec

# The record and its vocabulary, the job store's format (modelhost.jobs.schema): re-exported (`__all__`).
from modelhost.jobs.schema import (
    CANCELLED,
    COMPLETED,
    FAILED,
    FILE_REF,
    FINISHED,
    HELD,
    ID_HEX_DIGITS,
    INPUT_FILE,
    MAX_ECHOED,
    PROCESSING,
    QUEUED,
    STAGE_ENCODING_PROMPT,
    STAGE_ENCODING_VIDEO,
    STAGE_GENERATING,
    STAGE_INITIALIZING,
    STAGE_LOADING_MODEL,
    STAGE_TRAINING,
    STAGES,
    STORAGE_RETRY_AFTER,
    WORKER_BUSY,
    WORKER_CANCELLED,
    WORKER_FAILED,
    WORKER_INTERRUPTED,
    WORKER_INVALID_INPUT,
    WORKER_NOT_FINISHED,
    WORKER_NOT_FOUND,
    WORKER_STORAGE,
    ApiError,
    Failure,
    Record,
    bad_request,
    busy,
    decode_record,
    encode_record,
    failed,
    input_file,
    input_path,
    invalid,
    is_job_id,
    job_id,
    new_record,
    not_found,
    now_ms,
    safe_file_name,
    shown,
    storage_error,
)

PROTOCOL_VERSION: Final = 1

#: A request without the right bearer token (401): the worker's own answer, never a job's code (those are the
#: record's, above).
WORKER_UNAUTHORIZED: Final = "WORKER_UNAUTHORIZED"

#: The longer side a job's picture is decoded to at least: a model reads at most ~4 megapixels, which 2048 covers,
#: and decoding a JPEG at 1/2, 1/4 or 1/8 keeps a phone photo of any size within the decoder's memory bounds.
PICTURE_SIDE: Final = 2048

#: Form field of a multipart submission that holds the JSON request.
REQUEST_FIELD: Final = "request"

_encoder = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    """Any other JSON body of the protocol."""
    return _encoder.encode(value)


#: Longest operation, model name and idempotency key of a submission. giz's keys are UUIDs and model names are
#: catalogue names or paths; 1024 holds any path. Unbounded, an 8 MiB key or model name was carried into the job's
#: record and echoed back in error messages.
MAX_NAME_CHARS: Final = 1024
_Name = Annotated[str, msgspec.Meta(max_length=MAX_NAME_CHARS)]


class Submission(msgspec.Struct, rename={"idempotency_key": "idempotencyKey"}):
    """The body of `POST /v1/jobs` (or its multipart field `request`). Unknown fields are ignored, so a newer giz
    that sends more does not break an older worker."""

    operation: _Name
    model: _Name
    input: msgspec.Raw = msgspec.Raw(b"null")
    idempotency_key: _Name = ""


_submission_decoder = msgspec.json.Decoder(Submission)


def decode_submission(data: bytes) -> Submission:
    """Parse a submission; raises msgspec.DecodeError or msgspec.ValidationError with a readable message."""
    return _submission_decoder.decode(data)


def error_body(code: str, message: str, status: int) -> bytes:
    """The body of every non-2xx answer: `{"code", "message", "status"}`."""
    return encode({"code": code, "message": message, "status": status})


def health_body(
    status: str, intake_open: bool, capacity: int, queued: int, processing: int, storage_error: str = ""
) -> dict[str, Any]:
    """`GET /v1/health`. status: "ok", "loading" (the model is still loading) or "draining" (stopping).

    Decision (the seed is silent): `storage` is "ok", or "failing" while the state folder refuses writes (disk full,
    I/O error), with the reason in `storageError`; meanwhile no job starts and intake answers 507. They are fields of
    their own, not a new `status`, so a caller that knows only the seed's statuses still reads this body."""
    return {
        "status": status,
        "protocol": PROTOCOL_VERSION,
        "intake": "open" if intake_open else "closed",
        "capacity": capacity,
        "queued": queued,
        "processing": processing,
        "storage": "failing" if storage_error else "ok",
        "storageError": storage_error,
    }


def queue_body(intake_open: bool, capacity: int, queued: int, processing: int, jobs: list[Record]) -> dict[str, Any]:
    """`GET /v1/queue`: the queued and processing jobs' records, in run order."""
    return {
        "capacity": capacity,
        "intake": "open" if intake_open else "closed",
        "queued": queued,
        "processing": processing,
        "jobs": jobs,
    }


def models_body(models: list[tuple[str, str]]) -> dict[str, Any]:
    """`GET /v1/models`: `{"models": [{"id", "operation"}]}`, one entry per (model, operation) served."""
    return {"models": [{"id": model, "operation": operation} for model, operation in models]}


#: Content types of output files by extension; anything else is served as bytes.
CONTENT_TYPES: Final = {
    ".txt": "text/plain; charset=utf-8",
    ".json": "application/json",
    ".md": "text/markdown; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
    ".mp4": "video/mp4",
    ".webm": "video/webm",
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".pdf": "application/pdf",
}


def content_type(name: str) -> str:
    """The Content-Type of an output file, from its extension."""
    dot = name.rfind(".")
    return CONTENT_TYPES.get(name[dot:].lower(), "application/octet-stream") if dot >= 0 else "application/octet-stream"


def too_large(limit: int) -> ApiError:
    """413 WORKER_INVALID_INPUT: the upload is over the configured limit."""
    return ApiError(413, WORKER_INVALID_INPUT, f"the request body is over the limit of {limit} bytes")


__all__ = [
    "CANCELLED",
    "COMPLETED",
    "CONTENT_TYPES",
    "FAILED",
    "FILE_REF",
    "FINISHED",
    "HELD",
    "ID_HEX_DIGITS",
    "INPUT_FILE",
    "MAX_ECHOED",
    "MAX_NAME_CHARS",
    "PICTURE_SIDE",
    "PROCESSING",
    "PROTOCOL_VERSION",
    "QUEUED",
    "REQUEST_FIELD",
    "STAGES",
    "STAGE_ENCODING_PROMPT",
    "STAGE_ENCODING_VIDEO",
    "STAGE_GENERATING",
    "STAGE_INITIALIZING",
    "STAGE_LOADING_MODEL",
    "STAGE_TRAINING",
    "STORAGE_RETRY_AFTER",
    "WORKER_BUSY",
    "WORKER_CANCELLED",
    "WORKER_FAILED",
    "WORKER_INTERRUPTED",
    "WORKER_INVALID_INPUT",
    "WORKER_NOT_FINISHED",
    "WORKER_NOT_FOUND",
    "WORKER_STORAGE",
    "WORKER_UNAUTHORIZED",
    "ApiError",
    "Failure",
    "Record",
    "Submission",
    "bad_request",
    "busy",
    "content_type",
    "decode_record",
    "decode_submission",
    "encode",
    "encode_record",
    "error_body",
    "failed",
    "health_body",
    "input_file",
    "input_path",
    "invalid",
    "is_job_id",
    "job_id",
    "models_body",
    "new_record",
    "not_found",
    "now_ms",
    "queue_body",
    "safe_file_name",
    "shown",
    "storage_error",
    "too_large",
]

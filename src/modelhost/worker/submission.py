"""`POST /v1/jobs`: a JSON submission, or a multipart one whose file parts stream to disk as they arrive.

Multipart is parsed chunk by chunk as the body arrives, by the HTTP doors' shared reader (`modelhost._uploads`,
also the docling door's): each part other than `request` is written straight into a private staging folder
(`.incoming-*/inputs/`), never held in memory.
When the `request` field comes first, it is admitted (replay, model, intake, capacity) before a byte of any file is
accepted, so a refused or replayed upload costs nothing. When the body is complete and every `$file` names a part,
the staging folder becomes the job's folder in one durable rename; on any failure it is removed, so nothing
half-written is left behind (and a crash mid-upload leaves only a staging folder, removed at the next start).

The cost of writing chunks from the event loop: a write into the page cache takes microseconds per network-sized
chunk; the slow part (making it durable) happens on the store's committer thread.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.types import Receive

from modelhost._uploads import BodyRefused, MultipartReader, PartHead, Parts, boundary_of, bounded, stored_name
from modelhost.jobs.board import JobBoard, Reservation
from modelhost.worker import protocol
from modelhost.worker.protocol import ApiError, Record, bad_request

#: Largest JSON body, and largest `request` field of a multipart body: both are held in memory to be parsed, and a
#: job's input is a few kilobytes of options and text; files belong in parts. 8 MiB still takes a long document.
MAX_JSON_BYTES = 8 << 20
#: Most parts in one multipart body: each is an open file and a folder entry; a job with more inputs than this is
#: more likely an attack on file descriptors than a real request.
MAX_PARTS = 256
#: Default limit of a whole upload (413 beyond it): a phone video or a few dozen full-size photos.
DEFAULT_MAX_UPLOAD_BYTES = 1 << 30


def _error_text(exc: Exception) -> str:
    return str(exc).replace("$.", "").strip() or type(exc).__name__


def check_references(value: Any, parts: dict[str, dict[str, Any]] | None) -> Any:
    """The input with each `{"$file": field}` replaced by its part's `$inputFile` (400 for a part that is missing).
    A caller's own `$inputFile` is refused: it would let a request name any file on this machine as its input."""
    if isinstance(value, list):
        return [check_references(v, parts) for v in value]
    if not isinstance(value, dict):
        return value
    if protocol.INPUT_FILE in value:
        raise bad_request(f"{protocol.INPUT_FILE} is the worker's own; upload a part and name it with $file")
    if protocol.FILE_REF in value:
        name = value[protocol.FILE_REF]
        if len(value) != 1 or not isinstance(name, str):
            raise bad_request('a file reference must be exactly {"$file": "<multipart field>"}')
        if parts is None or name not in parts:
            raise bad_request(f"$file names a missing part {name!r}")
        return parts[name]
    return {k: check_references(v, parts) for k, v in value.items()}


def _decode(body: bytes) -> protocol.Submission:
    try:
        return protocol.decode_submission(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise bad_request(f"the request is not a valid job submission: {_error_text(exc)}") from exc
    except RecursionError:
        # msgspec refuses JSON nested deeper than the interpreter's recursion limit with RecursionError, not
        # DecodeError: uncaught it was a bare 500 for what is the request's own fault.
        raise bad_request("the request is not a valid job submission: JSON nested too deeply") from None


def _parse_input(raw: bytes) -> Any:
    """A submission's `input` as a value: 400 for bytes that are not JSON (invalid UTF-8 included) or that nest
    deeper than the decoder's recursion allows."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise bad_request(f"the input is not valid JSON: {exc}") from exc
    except RecursionError:
        raise bad_request("the input is nested too deeply") from None


async def _check_input(board: JobBoard, model: str, operation: str, value: Any) -> None:
    """The operation's own check of the input (options in range, no picture for a text model): refused with 400
    before anything is reserved, rather than accepted and failed when it runs. On a worker thread: the model's
    check compiles a JSON Schema's grammar, which the event loop must not wait for."""
    check = board.input_check(model, operation)
    if check is None:
        return
    try:
        await asyncio.to_thread(check, value)
    except protocol.Failure as failure:
        raise bad_request(failure.message) from None
    except RecursionError:
        raise bad_request("the input is nested too deeply") from None


def _resolve(value: Any, parts: dict[str, dict[str, Any]] | None) -> Any:
    """check_references, with input nested too deeply for its recursion answered 400 rather than 500."""
    try:
        return check_references(value, parts)
    except RecursionError:
        raise bad_request("the input is nested too deeply") from None


async def read_json_body(receive: Receive, headers: list[tuple[bytes, bytes]], max_upload_bytes: int) -> bytes:
    """A JSON body straight from the ASGI channel, bounded (413) by the upload limit and MAX_JSON_BYTES."""
    limit = min(max_upload_bytes, MAX_JSON_BYTES)
    for name, value in headers:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise protocol.too_large(limit)
    chunks: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise bad_request("the request body was cut short (client disconnected)")
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            raise protocol.too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def submit_json(body: bytes, board: JobBoard) -> tuple[Record, bool]:
    """A JSON submission: the record and whether it is new (202) or a replay (200)."""
    submission = _decode(body)
    raw = bytes(submission.input)
    # msgspec.Raw keeps the input's bytes unchecked, and they are stored as text: bytes that are not UTF-8 are the
    # request's fault (400), found before a slot is reserved.
    try:
        input_json = raw.decode()
    except UnicodeDecodeError as exc:
        raise bad_request(f"the input is not valid UTF-8 (byte {exc.start})") from None
    # Cheap test first: almost no JSON job has either key. A `\u` escape can spell either one (`"\u0024inputFile"`
    # decodes to `$inputFile` in the executor), so any escape sends the input through the full check too.
    checked = board.input_check(submission.model, submission.operation) is not None
    if checked or b'"$file"' in raw or b'"$inputFile"' in raw or b"\\u" in raw:
        value = _parse_input(raw)
        _resolve(value, None)
        await _check_input(board, submission.model, submission.operation, value)
    admitted = await board.reserve(submission.operation, submission.model, submission.idempotency_key)
    if isinstance(admitted, Record):
        return admitted, False
    # The one owner of the reservation: whatever ends this call (a refusal, a cancelled task, a bug) gives the slot
    # back unless the commit took it (release is a no-op then).
    try:
        return await board.commit(admitted, input_json), True
    finally:
        board.release(admitted)


def _refused(exc: BodyRefused) -> ApiError:
    """A body the shared reader refused, in the worker's error shape."""
    return ApiError(exc.status, protocol.WORKER_INVALID_INPUT, exc.detail)


def _place(head: PartHead, parts: Parts) -> str | None:
    """The `request` field is the job's JSON, held in memory; every other part is a file, stored as it arrives."""
    if head.field == protocol.REQUEST_FIELD:
        if protocol.REQUEST_FIELD in parts.fields:
            raise BodyRefused(400, "two `request` fields")
        return None
    if any(stored.field == head.field for stored in parts.files):
        raise BodyRefused(400, f"two parts named {head.field!r}")
    if len(parts.files) >= MAX_PARTS:
        raise BodyRefused(400, f"more than {MAX_PARTS} files in one job")
    return stored_name(len(parts.files) + 1, head.filename or "")


async def submit_multipart(request: Request, board: JobBoard, max_upload_bytes: int) -> tuple[Record, bool]:
    """A multipart submission (see the module docstring): the record and whether it is new."""
    try:
        boundary = boundary_of(request)
    except BodyRefused as exc:
        raise _refused(exc) from None
    store = board.store
    staging = await asyncio.to_thread(store.new_staging)
    inputs = staging / "inputs"
    reader = MultipartReader(boundary, inputs, _place, MAX_JSON_BYTES)
    admitted: Reservation | None = None
    submission: protocol.Submission | None = None
    value: Any = None
    kept = False
    committing = False
    try:
        async for chunk in bounded(request, max_upload_bytes):
            reader.feed(chunk)
            sent = reader.parts.fields.get(protocol.REQUEST_FIELD)
            if submission is None and sent:
                # Admit as soon as the request is known: a replay or a refusal stops here, files unread.
                submission = _decode(sent[0])
                # Parsed once, here: checked before a slot is reserved, resolved against the parts at the end.
                value = _parse_input(bytes(submission.input))
                await _check_input(board, submission.model, submission.operation, value)
                result = await board.reserve(submission.operation, submission.model, submission.idempotency_key)
                if isinstance(result, Record):
                    return result, False
                admitted = result
            if reader.ended:
                break
        stored = reader.finish().files
        if submission is None:
            raise bad_request(f"a multipart submission needs a `{protocol.REQUEST_FIELD}` field with the job's JSON")
        assert admitted is not None
        final_inputs = store.inputs_dir(admitted.job_id)
        parts = {
            part.field: protocol.input_file(
                part.filename or part.field, part.content_type, str(final_inputs / part.stored)
            )
            for part in stored
        }
        resolved = _resolve(value, parts)
        used = _used_paths(resolved)
        files = []
        for part in stored:
            if str(final_inputs / part.stored) in used:
                files.append(inputs / part.stored)
            else:
                # A part no `$file` names is not an input of the job: dropped, not kept where nothing reads it.
                await asyncio.to_thread(os.unlink, inputs / part.stored)
        input_json = msgspec.json.encode(resolved).decode()
        committing = True
        record = await board.commit(admitted, input_json, staging, files)
        admitted = None
        kept = True
        return record, True
    except BodyRefused as exc:
        raise _refused(exc) from None
    except ApiError:
        committing = False  # the commit failed and gave the slot back: clean up below
        raise
    except OSError as exc:
        raise protocol.storage_error(f"the upload could not be stored: {exc}") from exc
    finally:
        reader.close()
        # Cancelled (server shutdown) during the shielded commit: the commit goes on and owns the slot and the
        # staging folder (it renames it into the job's folder); releasing or deleting them here would count the
        # slot back twice and delete the inputs of a job that is being made durable.
        if admitted is not None and not committing:
            board.release(admitted)
        if not kept and not committing:
            await asyncio.to_thread(shutil.rmtree, staging, True)


def _used_paths(value: Any) -> set[str]:
    """The paths of the `$inputFile` objects in a resolved input."""
    found: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, list):
            for item in v:
                walk(item)
        elif isinstance(v, dict):
            inner = v.get(protocol.INPUT_FILE)
            if isinstance(inner, dict) and len(v) == 1:
                found.add(str(inner["path"]))
                return
            for item in v.values():
                walk(item)

    walk(value)
    return found

"""docling-serve's v1 document routes on the HTTP door: convert a file or a source (now, or as a task), poll a task
(its `wait` a long poll), stream its status over a WebSocket, fetch its result.

Every conversion is a task (`tasks.DocumentTasks`), the synchronous routes too, as in docling-serve: they submit,
wait for the end within MAX_SYNC_WAIT_SECONDS (504 after it, as there) and answer the result; their task is then
removed, since no one else knows its id. Refusals use docling-serve's status codes and its `{"detail": ...}` body:
401 for a missing or wrong X-Api-Key, 404 for an unknown task, 413 for a body over the limit, 422 for options and
sources it would not take, 429 and 507 (with Retry-After) when the task store is full or cannot write.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import json
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from modelhost._uploads import BodyRefused
from modelhost.http.docling import results, schemas
from modelhost.http.docling.chunks import CHUNKERS, HYBRID_REFUSED, chunking_missing
from modelhost.http.docling.fetch import FetchFailed, FetchRefused, Policy, fetch
from modelhost.http.docling.options import OptionRefused, Plan, plan
from modelhost.http.docling.schemas import (
    ChunkingOptions,
    ChunkSourcesRequest,
    ConvertOptions,
    ConvertSourcesRequest,
    FileSource,
)
from modelhost.http.docling.tasks import DocumentTasks
from modelhost.http.docling.upload import DEFAULT_MAX_UPLOAD_BYTES, read_json, upload_into
from modelhost.jobs import schema
from modelhost.jobs.documents import job_input
from modelhost.jobs.schema import ApiError, Record

log = logging.getLogger(__name__)

#: The paths of this door: the HTTP door's Bearer check leaves them to `DoclingRoutes`, which takes docling's
#: X-Api-Key (and the Bearer form too).
PREFIXES: Final = ("/v1/convert/", "/v1/chunk/", "/v1/status/", "/v1/result/")
#: How long a synchronous conversion may take before the answer is 504 (docling-serve's max_sync_wait default):
#: a client's read timeout is usually about this, and a longer document belongs in the async routes.
MAX_SYNC_WAIT_SECONDS: Final = 120.0
#: The longest `wait` of one poll: a poll holds a connection, and the client asks for 5 s; an hour-long wait from a
#: careless caller would hold one of the door's connections for that hour.
MAX_POLL_WAIT_SECONDS: Final = 60.0
#: While a WebSocket client waits for its task, an update is sent at least this often (the status may not have
#: changed): a proxy or a NAT between them drops a connection silent for a minute.
WS_HEARTBEAT_SECONDS: Final = 15.0
#: How often a synchronous request looks whether its client has gone (then its task is cancelled).
DISCONNECT_CHECK_SECONDS: Final = 1.0
#: The largest document sent inline as base64 (POST /v1/convert/source): the JSON body, its text and the decoded
#: bytes are all in memory at once, so this is well below the upload limit (uploads stream to disk).
MAX_INLINE_BYTES: Final = 64 << 20
#: Bytes of a JSON body beyond its base64 document: the options and the names.
JSON_SLACK_BYTES: Final = 1 << 20
#: The form fields whose value is a list (each repeated field is an item); docling's client sends `page_range` as
#: two fields.
LIST_FIELDS: Final = frozenset({"from_formats", "to_formats", "ocr_lang", "page_range"})
#: Retry-After of a 507 (the job worker's: its store is probed again at most this far apart).
STORAGE_RETRY_AFTER: Final = schema.STORAGE_RETRY_AFTER
#: Form fields of the upload that are not options.
NOT_OPTIONS: Final = frozenset({"target_type", "callbacks"})
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,10}$")


def detail(status: int, message: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    """docling-serve's error answer: `{"detail": message}`."""
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


def _from_worker(exc: ApiError) -> JSONResponse:
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
    return detail(exc.status, exc.message, headers)


class _Refusal(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


def _refuse(status: int, message: Any) -> _Refusal:
    return _Refusal(detail(status, message))


class DoclingRoutes:
    """The routes over `tasks`. `api_key` (None: open) guards them all; `policy` says which URL sources are fetched."""

    def __init__(
        self,
        tasks: DocumentTasks,
        *,
        api_key: str | None = None,
        policy: Policy | None = None,
        max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
        max_sync_wait: float = MAX_SYNC_WAIT_SECONDS,
    ) -> None:
        self.tasks = tasks
        self.api_key = api_key.encode() if api_key else None
        self.policy = policy or Policy(max_bytes=max_upload_bytes)
        self.max_upload_bytes = max_upload_bytes
        self.max_sync_wait = max_sync_wait
        self._forgetting: set[asyncio.Task[None]] = set()  # held: the loop keeps only weak references to tasks

    def routes(self) -> list[Route | WebSocketRoute]:
        """The Starlette routes."""
        return [
            Route("/v1/convert/file", self._guarded(self.convert_file, sync=True), methods=["POST"]),
            Route("/v1/convert/file/async", self._guarded(self.convert_file, sync=False), methods=["POST"]),
            Route("/v1/convert/source", self._guarded(self.convert_source, sync=True), methods=["POST"]),
            Route("/v1/convert/source/async", self._guarded(self.convert_source, sync=False), methods=["POST"]),
            *(
                Route(
                    f"/v1/chunk/{chunker}/{kind}{tail}",
                    self._guarded(handler, sync=not tail, chunker=chunker),
                    methods=["POST"],
                )
                for chunker in ("hierarchical", "hybrid")
                for kind, handler in (("file", self.convert_file), ("source", self.convert_source))
                for tail in ("", "/async")
            ),
            Route("/v1/status/poll/{task_id}", self._guarded(self.poll), methods=["GET"]),
            Route("/v1/result/{task_id}", self._guarded(self.result), methods=["GET"]),
            WebSocketRoute("/v1/status/ws/{task_id}", self.status_ws),
        ]

    # -- the key --------------------------------------------------------------------------------------------------
    def _key_ok(self, given: str | None) -> bool:
        if self.api_key is None:
            return True
        # compare_digest: the time taken must not tell how much of the key a caller has right.
        return given is not None and hmac.compare_digest(given.strip().encode(), self.api_key)

    def _request_key(self, request: Request) -> str | None:
        given = request.headers.get("x-api-key")
        if given is None:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            given = token if scheme.lower() == "bearer" else None
        return given

    def _guarded(
        self, handler: Callable[..., Awaitable[Response]], **kwargs: Any
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if not self._key_ok(self._request_key(request)):
                return detail(401, "missing or invalid API key (send X-Api-Key: <key>)")
            try:
                return await handler(request, **kwargs)
            except _Refusal as refusal:
                return refusal.response
            except ApiError as exc:
                return _from_worker(exc)
            except BodyRefused as exc:
                return detail(exc.status, exc.detail)
            except OSError as exc:
                # The upload could not be written (a full disk, an I/O error): the store's fault, not the request's,
                # answered as the worker answers it, and the staging folder is already gone.
                retry = {"Retry-After": str(STORAGE_RETRY_AFTER)}
                return detail(507, f"the document could not be stored: {exc.strerror or exc}", retry)

        return endpoint

    # -- conversions ----------------------------------------------------------------------------------------------
    async def convert_file(self, request: Request, *, sync: bool, chunker: str | None = None) -> Response:
        """POST /v1/convert/file[/async]: a multipart upload (`files`, and the options as form fields); and
        /v1/chunk/{chunker}/file[/async], its options `convert_*` and `chunking_*` fields."""
        _check_chunker(chunker)
        staging = await asyncio.to_thread(self.tasks.staging)
        kept = False
        try:
            form = await upload_into(request, staging / "inputs", self.max_upload_bytes)
            if not form.files:
                raise _refuse(422, [{"loc": ["body", "files"], "msg": "Field required", "type": "missing"}])
            _check_target(_last(form.fields.get("target_type")) or "inbody")
            fields = form.fields
            chunking: dict[str, Any] | None = None
            if chunker is not None:
                chunking = _chunking({k[9:]: v[-1] for k, v in fields.items() if k.startswith("chunking_")}, chunker)
                chunking["include_converted_doc"] = _last(fields.get("include_converted_doc")) in ("true", "True", "1")
                fields = {k[8:]: v for k, v in fields.items() if k.startswith("convert_")}
            options = _form_options(fields)
            extra = {name: fields[name] for name in ("callbacks",) if name in fields}
            upload = form.files[0]
            job = _job(_plan(options, extra), upload.filename, results.sniff(upload.head), chunking)
            record = await self.tasks.submit(staging, upload.stored, upload.filename, upload.content_type, job)
            kept = True
        finally:
            if not kept:
                await asyncio.to_thread(self.tasks.discard, staging)
        return await self._answer(request, record, sync)

    async def convert_source(self, request: Request, *, sync: bool, chunker: str | None = None) -> Response:
        """POST /v1/convert/source[/async]: a JSON body with the options and one source (base64, or a URL); and
        /v1/chunk/{chunker}/source[/async], whose body has `convert_options` and `chunking_options`."""
        _check_chunker(chunker)
        body = await read_json(request, MAX_INLINE_BYTES * 4 // 3 + JSON_SLACK_BYTES)
        try:
            raw = json.loads(body)
        except ValueError as exc:
            where = [{"loc": ["body"], "msg": f"JSON decode error: {exc}", "type": "json_invalid"}]
            raise _refuse(422, where) from None
        except RecursionError:
            # json refuses nesting past the interpreter's recursion limit with RecursionError: uncaught, a body of
            # 100,000 `[` was a 500 on all four source routes for what is the request's own fault.
            where = [{"loc": ["body"], "msg": "JSON decode error: nested too deeply", "type": "json_invalid"}]
            raise _refuse(422, where) from None
        parsed: ConvertSourcesRequest | ChunkSourcesRequest
        chunking: dict[str, Any] | None = None
        try:
            if chunker is None:
                parsed = ConvertSourcesRequest.model_validate(raw)
                options = parsed.options
            else:
                parsed = ChunkSourcesRequest.model_validate(raw)
                options = parsed.convert_options
                chunking = _chunking(parsed.chunking_options.model_dump(), chunker)
                chunking["include_converted_doc"] = parsed.include_converted_doc
        except ValidationError as exc:
            raise _refuse(422, schemas.validation_detail(exc, "body")) from None
        if len(parsed.sources) != 1:
            raise _refuse(422, "one source per request here: send each document in a request of its own")
        _check_target(parsed.target.kind)
        chosen = _plan(options, dict(parsed.model_extra or {}))
        source = parsed.sources[0]
        staging = await asyncio.to_thread(self.tasks.staging)
        kept = False
        try:
            if isinstance(source, FileSource):
                stored, filename, content_type, head = await asyncio.to_thread(_write_inline, source, staging)
            else:
                stored = "1" + _suffix(source.url.split("?", 1)[0])
                try:
                    got = await fetch(source.url, source.headers, staging / "inputs" / stored, self.policy)
                except FetchRefused as exc:
                    raise _refuse(422, str(exc)) from None
                except FetchFailed as exc:
                    raise _refuse(422, f"the source could not be fetched: {exc}") from None
                filename, content_type, head = got.filename, got.content_type, got.head
            job = _job(chosen, filename, results.sniff(head), chunking)
            record = await self.tasks.submit(staging, stored, filename, content_type, job)
            kept = True
        finally:
            if not kept:
                await asyncio.to_thread(self.tasks.discard, staging)
        return await self._answer(request, record, sync)

    async def _answer(self, request: Request, record: Record, sync: bool) -> Response:
        if not sync:
            return JSONResponse(results.status_answer(record, self.tasks.position(record)))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_sync_wait
        try:
            while not record.finished:
                if loop.time() >= deadline:
                    await self._abandon(record.id)
                    return detail(
                        504,
                        f"Conversion is taking too long. The maximum wait time is {self.max_sync_wait:g} s; "
                        "use the async routes for longer documents.",
                    )
                record = await self.tasks.wait(record.id, min(DISCONNECT_CHECK_SECONDS, deadline - loop.time()))
                if not record.finished and await request.is_disconnected():
                    await self._abandon(record.id)  # no one is waiting for it
                    return Response(status_code=499)
            answer = await asyncio.to_thread(results.result_answer, record, self.tasks.outputs(record))
        finally:
            if record.finished:
                await self.tasks.forget(record.id)
        if answer.get("kind") == "TaskFailureResult":
            return detail(500, answer["failure"]["message"])
        return JSONResponse(answer)

    async def _abandon(self, task_id: str) -> None:
        """Cancel a synchronous request's task whose answer no one will read, and remove it once it has ended (a
        running conversion stops between pages or within one), so it does not wait out the retention."""
        await self.tasks.cancel(task_id)

        async def forget() -> None:
            with contextlib.suppress(ApiError):
                await self.tasks.wait(task_id, MAX_SYNC_WAIT_SECONDS)
                await self.tasks.forget(task_id)

        task = asyncio.get_running_loop().create_task(forget(), name=f"docling-forget-{task_id}")
        self._forgetting.add(task)
        task.add_done_callback(self._forgetting.discard)

    # -- tasks ----------------------------------------------------------------------------------------------------
    def _task(self, task_id: str) -> Record:
        try:
            return self.tasks.get(task_id)
        except ApiError:
            raise _refuse(404, schemas.TASK_NOT_FOUND) from None

    async def poll(self, request: Request) -> Response:
        """GET /v1/status/poll/{task_id}?wait=SECONDS: the task's status, once it is finished or `wait` is over."""
        task_id = request.path_params["task_id"]
        text = request.query_params.get("wait", "0")
        try:
            wait = float(text)
        except ValueError:
            raise _refuse(
                422, [{"loc": ["query", "wait"], "msg": "Input should be a valid number", "type": "float_parsing"}]
            ) from None
        if not 0 <= wait < float("inf"):
            wait = 0.0
        self._task(task_id)
        try:
            record = await self.tasks.wait(task_id, min(wait, MAX_POLL_WAIT_SECONDS))
        except ApiError:
            raise _refuse(404, schemas.TASK_NOT_FOUND) from None  # removed meanwhile (swept)
        return JSONResponse(results.status_answer(record, self.tasks.position(record)))

    async def result(self, request: Request) -> Response:
        """GET /v1/result/{task_id}: the result of a finished task (404 until it is)."""
        record = self._task(request.path_params["task_id"])
        if not record.finished:
            raise _refuse(404, schemas.RESULT_NOT_FOUND)
        answer = await asyncio.to_thread(results.result_answer, record, self.tasks.outputs(record))
        return JSONResponse(answer)

    async def status_ws(self, websocket: WebSocket) -> None:
        """WS /v1/status/ws/{task_id}?api_key=KEY: a `connection` message, then an `update` whenever the status
        changes (and every WS_HEARTBEAT_SECONDS), each after the client's `next`; closed after a final status."""
        given = websocket.query_params.get("api_key") or websocket.headers.get("x-api-key")
        if not self._key_ok(given):
            await websocket.close(code=1008)  # before accept: the handshake is answered 403
            return
        await websocket.accept()
        task_id = websocket.path_params["task_id"]
        try:
            record = self.tasks.get(task_id)
        except ApiError:
            await websocket.send_text(json.dumps(schemas.ws_message("error", None, schemas.TASK_NOT_FOUND)))
            await websocket.close()
            return
        try:
            last = results.status_answer(record, self.tasks.position(record))
            await websocket.send_text(json.dumps(schemas.ws_message("connection", last)))
            await websocket.send_text(json.dumps(schemas.ws_message("update", last)))
            while last["task_status"] not in (schemas.SUCCESS, schemas.FAILURE):
                await websocket.receive_text()  # the client's "next"
                last = await self._changed(task_id, last)
                await websocket.send_text(json.dumps(schemas.ws_message("update", last)))
            await websocket.close()
        except WebSocketDisconnect:
            return
        except ApiError:
            with contextlib.suppress(Exception):
                await websocket.close()  # the task was removed meanwhile

    async def _changed(self, task_id: str, last: dict[str, Any]) -> dict[str, Any]:
        """The task's status once it differs from `last`, or after the heartbeat."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WS_HEARTBEAT_SECONDS
        while True:
            record = await self.tasks.wait(task_id, min(1.0, max(0.0, deadline - loop.time())))
            now = results.status_answer(record, self.tasks.position(record))
            if now != last or loop.time() >= deadline:
                return now


def _check_target(kind: str) -> None:
    """Only results in the body: docling-serve's answer for a presigned target without storage (the client falls
    back to `inbody` on it), and a 422 for the others."""
    if kind == "inbody":
        return
    if kind == "presigned_url":
        raise _refuse(422, schemas.NO_ARTIFACT_STORAGE)
    raise _refuse(422, f"target {kind[:40]!r} is not supported here: results come in the answer's body (`inbody`)")


def _last(values: list[str] | None) -> str | None:
    return values[-1] if values else None


def _form_options(fields: dict[str, list[str]]) -> ConvertOptions:
    """The options of an upload's form fields, validated as docling validates them (422 for a bad one)."""
    raw: dict[str, Any] = {}
    for name, values in fields.items():
        if name in NOT_OPTIONS:
            continue
        raw[name] = [v for v in values if v != ""] if name in LIST_FIELDS else values[-1]
    try:
        return ConvertOptions.model_validate(raw)
    except ValidationError as exc:
        raise _refuse(422, schemas.validation_detail(exc, "body")) from None


def _plan(options: ConvertOptions, extra: dict[str, Any]) -> Plan:
    try:
        return plan(options, extra)
    except OptionRefused as exc:
        raise _refuse(422, str(exc)) from None


def _job(chosen: Plan, filename: str, fmt: str | None, chunking: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `document.convert` input beside the document: the engine's settings and the answer's (`docling`; for a
    chunk task, its chunker options too)."""
    job = job_input(chosen.convert)
    job["docling"] = {**chosen.settings(), "filename": shown_name(filename), "format": fmt}
    if chunking is not None:
        included = bool(chunking.pop("include_converted_doc", False))
        job["docling"].update(task_type="chunk", chunking=chunking, include_converted_doc=included)
    return job


def _check_chunker(chunker: str | None) -> None:
    if chunker is None:
        return
    if chunker not in CHUNKERS:
        raise _refuse(422, HYBRID_REFUSED)
    if missing := chunking_missing():
        raise _refuse(501, missing)


def _chunking(raw: dict[str, Any], chunker: str) -> dict[str, Any]:
    """A chunk request's chunker options, validated as docling validates them (422 for a bad one)."""
    try:
        options = ChunkingOptions.model_validate({**raw, "chunker": chunker})
    except ValidationError as exc:
        raise _refuse(422, schemas.validation_detail(exc, "body")) from None
    return options.model_dump(include={"include_raw_text", "use_markdown_tables"})


#: Longest file name kept for the answer's `document.filename`: a name is the client's own text.
MAX_NAME_CHARS: Final = 200


def shown_name(filename: str) -> str:
    """A client's file name as the answer gives it back: its last path part, control characters dropped, bounded."""
    name = "".join(ch for ch in filename.replace("\\", "/").rsplit("/", 1)[-1] if ch.isprintable()).strip()
    return name[:MAX_NAME_CHARS] or "document"


def _suffix(name: str) -> str:
    match = _EXTENSION.search(name.replace("\\", "/").rsplit("/", 1)[-1])
    return match.group(0).lower() if match else ""


def _write_inline(source: FileSource, staging: Path) -> tuple[str, str, str, bytes]:
    """A base64 source decoded into the staging folder: (stored name, filename, content type, first bytes)."""
    if len(source.base64_string) > MAX_INLINE_BYTES * 4 // 3 + 4:
        raise _refuse(413, f"an inline document is at most {MAX_INLINE_BYTES} bytes; upload larger ones")
    try:
        # Strict, whitespace aside (MIME base64 wraps its lines): a lenient decode drops every stray character and
        # turns a mangled document into an empty one, answered `skipped` instead of naming the fault.
        data = base64.b64decode("".join(source.base64_string.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _refuse(
            422, [{"loc": ["body", "sources", 0, "base64_string"], "msg": f"not base64: {exc}", "type": "value_error"}]
        ) from None
    stored = "1" + _suffix(source.filename)
    (staging / "inputs" / stored).write_bytes(data)
    return stored, source.filename, "application/octet-stream", data[:1024]


__all__ = ["MAX_SYNC_WAIT_SECONDS", "PREFIXES", "DoclingRoutes"]

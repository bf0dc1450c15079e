"""Ollama's model store over the hub cache: POST /api/pull (streamed progress), DELETE /api/delete, and the cached
models GET /api/tags lists beside the served ones.

A pull is `modelhost pull` (modelhost.hub) behind Ollama's wire: the name is checked and the repository listed
first, so a bad name, an unknown repository, an ambiguous one or an unreachable hub is an HTTP error with
Ollama's `{"error": ...}` body before any stream starts (the official client raises ResponseError with it). Then
the download runs on a worker thread and its progress comes back as NDJSON lines in the shape the `ollama` client
reads into ProgressResponse: `{"status": "pulling manifest"}`, per file `{"status": "pulling <file>", "digest":
"sha256:...", "total": N, "completed": M}`, `{"status": "verifying sha256 digest"}`, `{"status": "writing
manifest"}`, `{"status": "success"}`; a failure midway is one `{"error": ...}` line. A client that hangs up stops
the download at its next chunk (huggingface_hub deletes the partial file).

A pulled model is served from then on (loaded at its first request) when the process says how to load one
(`Models.spec_for`, which `serve` sets), as `ollama pull` then `ollama run` expects; /api/delete takes it out of the
set again before its files go, and refuses while it is loaded or in use.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from modelhost import hub
from modelhost.errors import ModelHostError
from modelhost.host.models import Models
from modelhost.http.errors import ApiError, from_exception
from modelhost.http.ollama.schema import ollama_timestamp
from modelhost.http.parsing import read_json, shown
from modelhost.hub import fetch
from modelhost.inference import hub_cache

#: Pulls that run at once; the others wait their turn. Each holds a thread and the link's bandwidth, and two pulls
#: of one file would only wait on each other's file lock.
MAX_CONCURRENT_PULLS = 2
#: Threads for the hub's network waits (a listing, a download), a pool of their own: never the event loop's default
#: executor, which every door's short off-loop work shares (a chat's grammar check, an answer's encoding). Six pulls
#: to a hub that accepts and never answers held all six of its threads (min(32, cores + 4) on 2 cores) for the
#: listing's 10 s timeout, and a 4-token chat beside them took 8.6 s instead of 0.1 s (12 pulls: 18.6 s). Past
#: the downloads' share, two listings run at once; more wait for a thread, holding none of anyone else's.
MAX_HUB_THREADS = MAX_CONCURRENT_PULLS + 2
#: Shortest gap between two progress lines of one file: huggingface_hub may report every chunk it receives, and a
#: client on a slow link must not be sent more progress lines than bytes of model.
PROGRESS_INTERVAL_S = 0.1

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
log = logging.getLogger("modelhost.http")
T = TypeVar("T")


def _line(body: dict[str, Any]) -> bytes:
    return msgspec.json.encode(body) + b"\n"


class _Cancelled(Exception):
    """Raised inside huggingface_hub's download loop (from its progress callback) when the client hung up."""


class _LineProgress:
    """A PullProgress that turns each event into an NDJSON line on an asyncio queue (from the download thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes], cancel: threading.Event) -> None:
        self._loop = loop
        self._queue = queue
        self._cancel = cancel
        self._completed: dict[str, int] = {}
        self._sent_at = 0.0

    def _send(self, body: dict[str, Any]) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, _line(body))

    def _status(self, file: fetch.RemoteFile) -> dict[str, Any]:
        body: dict[str, Any] = {"status": f"pulling {file.path}"}
        if file.sha256 is not None:
            body["digest"] = f"sha256:{file.sha256}"
        if file.size is not None:
            body["total"] = file.size
        body["completed"] = self._completed.get(file.path, 0)
        return body

    def file_started(self, file: fetch.RemoteFile) -> None:
        self._completed[file.path] = 0
        self._send(self._status(file))

    def advance(self, file: fetch.RemoteFile, nbytes: int) -> None:
        if self._cancel.is_set():
            raise _Cancelled
        self._completed[file.path] = max(0, self._completed.get(file.path, 0) + nbytes)
        now = time.monotonic()
        if now - self._sent_at >= PROGRESS_INTERVAL_S:
            self._sent_at = now
            self._send(self._status(file))

    def verifying(self, file: fetch.RemoteFile) -> None:
        if file.size is not None:
            self._completed[file.path] = file.size
        self._send(self._status(file))
        self._send({"status": "verifying sha256 digest"} | ({"digest": f"sha256:{file.sha256}"} if file.sha256 else {}))

    def file_done(self, file: fetch.RemoteFile) -> None:
        pass


class HubRoutes:
    """The handlers of /api/pull and /api/delete, and the cached entries of /api/tags, over a door's model set."""

    def __init__(self, model_set: Models) -> None:
        self.model_set = model_set
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_PULLS)
        self._hub_threads = concurrent.futures.ThreadPoolExecutor(MAX_HUB_THREADS, thread_name_prefix="modelhost-pull")

    async def _on_hub_thread(self, work: Callable[[], T]) -> T:
        """`work()` (a wait on the hub) on the pulls' own threads, off the event loop and its default executor."""
        return await asyncio.get_running_loop().run_in_executor(self._hub_threads, work)

    @staticmethod
    def _name(body: Any) -> str:
        name = (body.get("model") or body.get("name")) if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            raise ApiError(400, "model is required", param="model", code="invalid_value")
        return name

    async def pull(self, request: Request) -> Response:
        """POST /api/pull: download a hub model into the cache; NDJSON progress unless `stream` is false."""
        body = await read_json(request)
        name = self._name(body)
        stream = body.get("stream", True)
        if not isinstance(stream, bool):
            raise ApiError(400, "stream: expected true or false", param="stream", code="invalid_value")
        try:
            plan = await self._on_hub_thread(lambda: fetch.plan(name))
        except ModelHostError as exc:
            raise from_exception(exc) from None
        if not stream:
            async with self._slots:
                try:
                    await self._on_hub_thread(lambda: fetch.download(plan))
                except ModelHostError as exc:
                    raise from_exception(exc) from None
            await self._adopt(plan, name)
            return Response(_line({"status": "success"}), media_type="application/json")
        return StreamingResponse(self._progress(plan, name), media_type="application/x-ndjson")

    async def _adopt(self, plan: fetch.PullPlan, asked: str) -> None:
        """Serve the pulled model from now on (loaded at its first request), under its hub name and the name the
        client asked for (`hf.co/...`), when the process says how (Models.spec_for) and it is not served yet."""
        name = str(plan.ref)
        factory = self.model_set.spec_for
        if factory is None or name in self.model_set.names:
            return
        try:
            spec = await asyncio.to_thread(factory, name)
            aliases = tuple(a for a in (*spec.aliases, asked) if a != spec.name)
            self.model_set.add(dataclasses.replace(spec, aliases=aliases))
        except (ModelHostError, ValueError) as exc:  # pulled and listed, but not servable here (say, too big)
            log.warning("pulled %s is not served: %s", name, exc)

    async def _progress(self, plan: fetch.PullPlan, asked: str) -> AsyncIterator[bytes]:
        yield _line({"status": "pulling manifest"})
        async with self._slots:
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue[bytes] = asyncio.Queue()
            cancel = threading.Event()
            progress = _LineProgress(loop, queue, cancel)
            work = asyncio.ensure_future(self._on_hub_thread(lambda: fetch.download(plan, progress=progress)))
            # Read its outcome even when nobody is left to hear it (a client that hung up): no "never retrieved".
            work.add_done_callback(lambda task: task.cancelled() or task.exception())
            try:
                while not work.done() or not queue.empty():
                    getting = asyncio.ensure_future(queue.get())
                    await asyncio.wait({getting, work}, return_when=asyncio.FIRST_COMPLETED)
                    if getting.done():
                        yield getting.result()
                    else:
                        getting.cancel()
                error = work.exception()
                if error is None:
                    yield _line({"status": "writing manifest"})
                    await self._adopt(plan, asked)
                    yield _line({"status": "success"})
                elif isinstance(error, ModelHostError):
                    yield _line({"error": f"{error} [{error.code}]"})
                else:
                    yield _line({"error": f"pull failed: {type(error).__name__}: {error}"})
            finally:
                cancel.set()  # the client hung up (or we are done): the download stops at its next chunk

    async def delete(self, request: Request, body: Any = None) -> Response:
        """DELETE /api/delete: remove a model from the cache (not one this process is serving); `body` when the
        caller has read it already."""
        name = self._name(body if body is not None else await read_json(request))
        ref = hub_cache.parse_ref(name)
        if ref is None:
            raise ApiError(404, f"model {shown(name)!r} not found (only pulled hub models can be deleted)",
                           code="model_not_found")  # fmt: skip
        served = self._served_from(ref)
        if served is not None:
            # A model served here leaves the set first (only when unloaded and idle), so no request loads files
            # that are about to go.
            try:
                self.model_set.remove(served)
            except ValueError as exc:
                raise ApiError(400, f"model {name!r} is served by this process as {served!r}: {exc}",
                               param="model", code="model_in_use") from None  # fmt: skip
        try:
            await asyncio.to_thread(hub.remove, name)
        except ModelHostError as exc:
            raise ApiError(404, f"model {name!r} not found", code=exc.code) from None
        return Response(status_code=200)

    def _served_from(self, ref: hub_cache.HubRef) -> str | None:
        """The served model whose files the deletion of `ref` would take (a whole repository, or one file)."""
        folder = hub_cache.repo_folder(ref.repo).resolve()
        target = hub_cache.resolve_cached(ref) if ref.spec is not None else None
        if ref.spec is not None and target is None:
            return None  # not cached: nothing of it to take from anyone (the removal answers 404)
        for model in self.model_set:
            if model.path is None:
                continue
            path = Path(model.path).resolve()
            if path == Path(target).resolve() if target is not None else path.is_relative_to(folder):
                return model.name
        return None

    async def cached_tags(self) -> dict[str, dict[str, Any]]:
        """/api/tags entries of the pulled models in the hub cache, by name."""
        cached = await asyncio.to_thread(hub.cached_models)
        return {model.name: _tag(model) for model in cached}


def _tag(model: hub.CachedModel) -> dict[str, Any]:
    path = Path(model.path)
    blob = path.resolve().name if path.is_file() else ""
    quant = hub_cache.quant_of(path.name) if path.is_file() else None
    weights = "safetensors" if any(path.glob("*.safetensors")) else ""
    details = {
        "format": "gguf" if path.is_file() else weights,
        "family": "",
        "families": [],
        "parameter_size": "",
        "quantization_level": quant or "",
    }
    return {
        "name": model.name,
        "model": model.name,
        "modified_at": ollama_timestamp(model.modified),
        "size": model.bytes,
        # The blob of a GGUF is named by its sha256 in the hub cache: the digest Ollama shows is that of the model.
        "digest": blob if _SHA256.match(blob) else "",
        "details": details,
    }

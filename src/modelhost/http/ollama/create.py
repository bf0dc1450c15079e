"""Ollama's POST /api/create and POST /api/copy: a new model name over one this host can load, kept across restarts
(modelhost.hub.created), served from then on (loaded at its first request), listed by /api/tags, removed by
DELETE /api/delete.

A create takes Ollama's JSON fields (`from`, `files`, `adapters`, `system`, `template`, `parameters`, what the
`ollama` client sends) or a Modelfile's text (`modelfile`, what older clients and curl send). `from` is a served or
pulled model's name, a catalogue name, or a local GGUF file or model folder. `files` and `adapters` map file names to
blob digests a client uploaded first (`HEAD`/`POST /api/blobs/sha256:<hex>`, kept beside the created models, each
verified against its digest), which is how `ollama create` sends a GGUF or an adapter from another machine; an
`adapters` value may also be a local path. SYSTEM, PARAMETER and TEMPLATE become the created model's request
defaults on every door (host/defaults.py: a request's own system message and options win; TEMPLATE, Go template
text, renders its plain chats in place of the checkpoint's template). `/api/show` gives them back. A copy is a
create of the same model under a new name, with whatever the source was created with.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from modelhost._uploads import BodyRefused, bounded
from modelhost.errors import InvalidInputError, ModelHostError, ModelNotFoundError
from modelhost.host.models import Models, RequestDefaults
from modelhost.http.errors import ApiError
from modelhost.http.ollama.schema import SAMPLING_OPTIONS
from modelhost.http.parsing import read_json
from modelhost.hub import created as store
from modelhost.inference.lora_files import inspect_adapter
from modelhost.jobs.store import fsync_path

log = logging.getLogger(__name__)


#: Free disk space an upload leaves at least: a blob that would fill the disk is refused before it is written (the
#: store, the hub cache and the job folders share that disk, and a full one fails them all).
DISK_HEADROOM_BYTES = 1 << 30


def _line(obj: dict[str, Any]) -> bytes:
    return msgspec.json.encode(obj) + b"\n"


def request_defaults(model: store.CreatedModel) -> RequestDefaults | None:
    """What `model` adds to each of its requests, on every door: its PARAMETERs as the contract's options (the ones a
    request takes: a load setting such as num_ctx is the host's), its SYSTEM and TEMPLATE; None when it adds
    nothing. InvalidInputError for a TEMPLATE this host cannot run."""
    options: dict[str, Any] = {}
    for key, value in model.parameters.items():
        target = SAMPLING_OPTIONS.get(key)
        if target is None or (key == "num_predict" and value < 0):  # -1, -2: no bound of its own, as a request's
            continue
        options[target] = value
    if not options and model.system is None and model.template is None:
        return None
    return RequestDefaults(options=options, system=model.system, template=model.template)


def _write(out: IO[bytes], digest: Any, chunk: bytes) -> None:
    digest.update(chunk)
    out.write(chunk)


def _durable(out: IO[bytes]) -> None:
    """The blob's bytes on the disk before it is named: a power loss never leaves a short file under its digest."""
    out.flush()
    os.fsync(out.fileno())


def _put_in_place(partial: Path, path: Path) -> None:
    """Name the written blob by its digest, and keep that name across a power loss (the folder's fsync)."""
    os.replace(partial, path)
    fsync_path(path.parent)


class CreatedRoutes:
    """The created models of one model set: serving them, the two routes that make them, and their defaults."""

    def __init__(self, model_set: Models) -> None:
        self.model_set = model_set
        #: What each created model served here was made with, by name (its requests' defaults).
        self.made: dict[str, store.CreatedModel] = {}

    def restore(self) -> None:
        """Serve every kept created model (at start): one that no longer loads (its source gone) is skipped with a
        warning, so one stale file never stops a host."""
        for model in store.load_all():
            try:
                self._serve(model)
            except (ApiError, ModelHostError, ValueError) as exc:
                log.warning("created model %s is not served: %s", model.name, exc)

    def _serve(self, model: store.CreatedModel) -> None:
        """Add `model` to the model set (unloaded until a request needs it)."""
        factory = self.model_set.spec_for
        if factory is None:
            raise ApiError(501, "this host cannot serve new models", code="not_supported")
        try:
            path = self.model_set.get(model.source).spec.path or model.source
        except ModelNotFoundError:
            path = model.source  # a catalogue name, a pulled one or a local path: the spec resolves it
        if model.adapter is not None:
            inspect_adapter(model.adapter, field="adapter")  # a missing or foreign adapter: refused now
        spec = factory(path, adapter=model.adapter)
        defaults = request_defaults(model)
        self.model_set.add(dataclasses.replace(spec, name=model.name, aliases=(), pinned=False, defaults=defaults))
        self.made[model.name] = model

    def _made(self, body: Any, staged: dict[str, str]) -> store.CreatedModel:
        """The CreatedModel a create request asks for (`staged`: the local paths of its uploaded `files` and
        `adapters`, from `_staged`); ApiError (400) for what is not one."""
        if not isinstance(body, dict):
            raise ApiError(400, "expected a JSON object", code="invalid_value")
        try:
            name = store.check_name(body.get("model") or body.get("name"))
            modelfile = body.get("modelfile")
            fields: dict[str, Any] = store.parse_modelfile(modelfile) if isinstance(modelfile, str) else {}
            source = body.get("from") or staged.get("from") or fields.get("from")
            if not isinstance(source, str) or not source:
                raise ApiError(400, "from is required (the model this one is made from)", param="from",
                               code="invalid_value")  # fmt: skip
            adapters = body.get("adapters")
            adapter = staged.get("adapter", fields.get("adapter"))
            if adapters is not None and "adapter" not in staged:
                if (
                    not isinstance(adapters, dict)
                    or len(adapters) != 1
                    or not all(isinstance(v, str) for v in adapters.values())
                ):
                    raise ApiError(400, "adapters: one {name: local path}, or {file name: uploaded blob digest}",
                                   param="adapters", code="invalid_value")  # fmt: skip
                adapter = next(iter(adapters.values()))
            texts = {key: body.get(key, fields.get(key)) for key in ("system", "template")}
            for key, value in texts.items():
                if value is not None and not isinstance(value, str):
                    raise ApiError(400, f"{key}: expected a string", param=key, code="invalid_value")
            parameters = store.check_parameters(body.get("parameters", fields.get("parameters")))
            made = store.CreatedModel(name, source, adapter, texts["system"], texts["template"], parameters)
            request_defaults(made)  # a TEMPLATE this host cannot run is refused now, not at each request
        except ModelHostError as exc:
            raise ApiError(400, str(exc), code=exc.code) from None
        return made

    async def _staged(self, body: Any, held: list[Path]) -> dict[str, str]:
        """The local paths of a create's uploaded blobs: `from` for its `files`, `adapter` for its `adapters` when
        they are digests (a single file is its own link, several a folder of them); ApiError (400) for a name or
        digest that is not one, or a blob never uploaded. Each folder of links is added to `held`: the caller
        unholds it once the create is kept or given up (a delete meanwhile leaves it, hub/created.staged_files)."""
        staged: dict[str, str] = {}
        if not isinstance(body, dict):
            return staged
        for key, target in (("files", "from"), ("adapters", "adapter")):
            given = body.get(key)
            if not isinstance(given, dict) or not given:
                continue
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in given.items()):
                raise ApiError(400, f"{key}: expected {{file name: digest}}", param=key, code="invalid_value")
            if key == "adapters" and not all(store.DIGEST.fullmatch(v) for v in given.values()):
                continue  # {name: local path}: _made takes it
            try:
                where = await asyncio.to_thread(store.staged_files, given)
            except InvalidInputError as exc:
                raise ApiError(400, str(exc), param=key, code=exc.code) from None
            held.append(where)
            staged[target] = str(where / next(iter(given))) if len(given) == 1 else str(where)
        return staged

    async def create(self, request: Request) -> Response:
        """POST /api/create: serve and keep a model made from another; `{"status": "success"}` (as NDJSON status
        lines unless `stream` is false)."""
        body = await read_json(request)
        held: list[Path] = []
        try:
            model = self._made(body, await self._staged(body, held))
            await self._add(model)
        finally:
            for where in held:  # kept now (or refused): a delete may release its files from here on
                await asyncio.to_thread(store.unhold, where)  # its lock may wait on a release's file work
        if isinstance(body, dict) and body.get("stream", True) is False:
            return Response(_line({"status": "success"}), media_type="application/json")
        lines = _line({"status": f"creating {model.name} from {model.source}"}) + _line({"status": "success"})
        return Response(lines, media_type="application/x-ndjson")

    async def copy(self, request: Request) -> Response:
        """POST /api/copy: `destination` serves what `source` serves (and keeps what `source` was created with)."""
        body = await read_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("source"), str):
            raise ApiError(400, "source is required", param="source", code="invalid_value")
        source = body["source"]
        try:
            destination = store.check_name(body.get("destination"), "destination")
            served = self.model_set.get(source)
        except ModelNotFoundError as exc:
            raise ApiError(404, str(exc), code=exc.code) from None
        except ModelHostError as exc:
            raise ApiError(400, str(exc), param="destination", code=exc.code) from None
        made = self.made.get(served.name)
        base = (
            dataclasses.replace(made, name=destination) if made is not None else store.CreatedModel(destination, source)
        )
        await self._add(base)
        return Response(status_code=200)

    async def _add(self, model: store.CreatedModel) -> None:
        replaced = self.made.get(model.name)
        if model.name in self.model_set.names or model.name in self.model_set.adapters:
            if replaced is None:
                raise ApiError(400, f"model {model.name!r} is already served and was not created here",
                               param="model", code="model_exists")  # fmt: skip
            self._forget(model.name)  # created again: the new one replaces it, as Ollama's create does
        try:
            await asyncio.to_thread(store.check_room, model.name)  # before it is served: all or nothing
            await asyncio.to_thread(self._serve, model)  # resolving and estimating a model reads its files
            await asyncio.to_thread(store.save, model)
            if replaced is not None:
                await asyncio.to_thread(store.release, replaced)  # the uploads only the replaced one used
        except ModelNotFoundError as exc:
            raise ApiError(404, str(exc), param="from", code=exc.code) from None
        except ModelHostError as exc:
            raise ApiError(400, str(exc), code=exc.code) from None
        except ValueError as exc:
            raise ApiError(400, str(exc), code="invalid_value") from None

    def _forget(self, name: str) -> None:
        try:
            self.model_set.remove(name)
        except ValueError as exc:
            raise ApiError(400, f"model {name!r}: {exc}", param="model", code="model_in_use") from None
        self.made.pop(name, None)

    async def delete(self, name: str) -> bool:
        """DELETE /api/delete of a created model: stop serving it and forget it, with the uploaded blobs no other
        created model uses (hub/created.release); False when `name` is not one."""
        if name not in self.made:
            return False
        self._forget(name)
        await asyncio.to_thread(store.remove, name)
        return True

    async def blob_exists(self, request: Request) -> Response:
        """HEAD /api/blobs/sha256:<hex>: 200 when that blob is kept here, 404 when it is not (the client uploads it)."""
        path = self._blob(request)
        return Response(status_code=200 if await asyncio.to_thread(path.is_file) else 404)

    async def upload_blob(self, request: Request) -> Response:
        """POST /api/blobs/sha256:<hex>: keep the body as that blob, 201, once its bytes hash to the digest (400
        otherwise, nothing kept); 200 without reading when it is already kept. Bounded by MAX_BLOB_BYTES (413) and
        by the disk's free space less DISK_HEADROOM_BYTES (507); a disk that fills up or fails while it is written
        is 507 too, and nothing is kept. A blob kept is fsynced, and its folder once it is named, before the 201."""
        path = self._blob(request)
        if await asyncio.to_thread(path.is_file):
            return Response(status_code=200)
        await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
        declared = request.headers.get("content-length", "")
        free = max((await asyncio.to_thread(shutil.disk_usage, path.parent)).free - DISK_HEADROOM_BYTES, 0)
        sized = f"the blob ({declared} bytes)" if declared else "the streamed blob"
        no_room = ApiError(507, f"{sized} does not fit on this host's disk ({free} bytes free beyond its headroom)",
                           code="insufficient_storage")  # fmt: skip
        if declared.isdigit() and int(declared) > free:
            raise no_room
        fd, partial = tempfile.mkstemp(prefix=".upload.", dir=path.parent)
        digest = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as out:
                async for chunk in bounded(request, min(store.MAX_BLOB_BYTES, free)):
                    await asyncio.to_thread(_write, out, digest, chunk)
                if f"sha256-{digest.hexdigest()}" != path.name:
                    raise ApiError(400, f"digest mismatch: the body's is sha256:{digest.hexdigest()}",
                                   code="invalid_value")  # fmt: skip
                await asyncio.to_thread(_durable, out)
            await asyncio.to_thread(_put_in_place, Path(partial), path)
        except BodyRefused as exc:
            if exc.status == 413 and free < store.MAX_BLOB_BYTES:  # a streamed body (no length) past the disk's room
                raise no_room from None
            code = "body_too_large" if exc.status == 413 else "invalid_value"
            raise ApiError(exc.status, exc.detail, code=code) from None
        except OSError as exc:
            # The disk filled up meanwhile (another writer took the room checked above) or failed: the store's
            # fault, not the request's, answered as the other doors answer it (modelhost._uploads).
            raise ApiError(507, f"the blob could not be stored: {exc.strerror or exc}",
                           code="insufficient_storage") from None  # fmt: skip
        finally:
            Path(partial).unlink(missing_ok=True)
        return Response(status_code=201)

    def _blob(self, request: Request) -> Path:
        try:
            return store.blob_path(request.path_params["digest"])
        except InvalidInputError as exc:
            raise ApiError(400, str(exc), param="digest", code=exc.code) from None

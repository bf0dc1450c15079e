"""The Ollama-compatible routes: each reads a bounded body, parses it (`schema`, `embeddings`), honours the
request's `keep_alive` (`models`), waits for an unloaded model to load (Ollama's clients never retry a 503), submits
through the shared `Door`, and answers as one JSON object or as NDJSON lines (`streams`)."""

from __future__ import annotations

import asyncio
import importlib.metadata
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from modelhost.host.models import MemoryBudgetError, ServedModel
from modelhost.http import relay
from modelhost.http.door import Door
from modelhost.http.errors import ApiError, answers_errors
from modelhost.http.ollama import embeddings, facts, models, schema
from modelhost.http.ollama.create import CreatedRoutes
from modelhost.http.ollama.pull import HubRoutes
from modelhost.http.ollama.streams import OllamaStream
from modelhost.http.parsing import ParsedRequest, read_json
from modelhost.http.relay import StreamedAnswer


class OllamaRoutes:
    """The /api/* handlers over a door."""

    def __init__(self, door: Door) -> None:
        self.door = door
        self.hub = HubRoutes(door.model_set)
        self.created = CreatedRoutes(door.model_set)
        self.created.restore()  # the models /api/create and /api/copy made before this start

    def routes(self) -> list[Route]:
        """The routes, for the app."""
        return [
            Route("/api/chat", self.chat, methods=["POST"]),
            Route("/api/generate", self.generate, methods=["POST"]),
            Route("/api/tags", self.tags, methods=["GET"]),
            Route("/api/ps", self.ps, methods=["GET"]),
            Route("/api/show", self.show, methods=["POST"]),
            Route("/api/version", self.version, methods=["GET"]),
            Route("/api/embed", self.embed, methods=["POST"]),
            Route("/api/embeddings", self.embed, methods=["POST"]),
            Route("/api/pull", self.pull, methods=["POST"]),
            Route("/api/delete", self.delete, methods=["DELETE"]),
            Route("/api/create", self.create, methods=["POST"]),
            Route("/api/copy", self.copy, methods=["POST"]),
            Route("/api/blobs/{digest}", self.blob_exists, methods=["HEAD"]),
            Route("/api/blobs/{digest}", self.upload_blob, methods=["POST"]),
        ]

    @answers_errors("ollama")
    async def chat(self, request: Request) -> Response:
        """POST /api/chat."""
        body = await read_json(request)
        parsed = schema.parse_ollama_chat(body, relay.request_id())
        keep = models.body_keep_alive(body)
        served = self.door.route(request, body)
        served.keep_for(keep)
        return await self._answer(request, served, parsed, OllamaStream(served.name, "chat", parsed.tools))

    @answers_errors("ollama")
    async def generate(self, request: Request) -> Response:
        """POST /api/generate."""
        body = await read_json(request)
        parsed = schema.parse_ollama_generate(body, relay.request_id())
        keep = models.body_keep_alive(body)
        served = self.door.route(request, body)
        writer = OllamaStream(served.name, "generate")
        if parsed is None and keep == 0:
            # Ollama's "unload the model" request: unloaded now when idle, else as soon as its requests end.
            if served.pinned:
                raise ApiError(400, f"model {served.name!r} is pinned (it serves the socket door) and stays loaded",
                               param="keep_alive", code="model_pinned")  # fmt: skip
            served.keep_for(0)
            self.door.model_set.unload(served)
            return Response(models.unloaded(served.name), media_type="application/json")
        served.keep_for(keep)
        if parsed is None:
            # Ollama's "load the model" request: a lazy model starts loading; answered once it is loaded.
            with served.in_use():
                await self._loaded(request, served)
            return Response(writer.loaded(), media_type="application/json")
        return await self._answer(request, served, parsed, writer)

    @answers_errors("ollama")
    async def tags(self, request: Request) -> Response:
        """GET /api/tags."""
        model_set = self.door.model_set
        served = (*model_set, *model_set.adapters.values())  # adapters too, each naming its parent_model
        listed = [(m.name, facts.details(m), facts.disk_size(m), facts.digest(m.path)) for m in served]
        cached = await self.hub.cached_tags()
        return Response(schema.tags(listed, self.door.created, cached), media_type="application/json")

    @answers_errors("ollama")
    async def pull(self, request: Request) -> Response:
        """POST /api/pull: a hub model into the local cache, with Ollama's streamed progress (ollama/pull.py)."""
        return await self.hub.pull(request)

    @answers_errors("ollama")
    async def delete(self, request: Request) -> Response:
        """DELETE /api/delete: a created model (/api/create, /api/copy) forgotten, or a pulled one out of the cache."""
        body = await read_json(request)
        name = (body.get("model") or body.get("name")) if isinstance(body, dict) else None
        if isinstance(name, str) and await self.created.delete(name):
            return Response(status_code=200)
        return await self.hub.delete(request, body)

    @answers_errors("ollama")
    async def create(self, request: Request) -> Response:
        """POST /api/create: a model made from another (ollama/create.py), served and kept across restarts."""
        return await self.created.create(request)

    @answers_errors("ollama")
    async def copy(self, request: Request) -> Response:
        """POST /api/copy: the same model under another name, kept across restarts."""
        return await self.created.copy(request)

    @answers_errors("ollama")
    async def blob_exists(self, request: Request) -> Response:
        """HEAD /api/blobs/sha256:<hex>: whether that blob is kept here (200) or not (404)."""
        return await self.created.blob_exists(request)

    @answers_errors("ollama")
    async def upload_blob(self, request: Request) -> Response:
        """POST /api/blobs/sha256:<hex>: keep an uploaded file (a GGUF, an adapter) for a create to name."""
        return await self.created.upload_blob(request)

    @answers_errors("ollama")
    async def show(self, request: Request) -> Response:
        """POST /api/show: what a model is and can do (its capabilities: vision, tools, thinking, embedding), and
        what a created one was made with (its modelfile, parameters, template and system)."""
        body = await read_json(request)
        name = (body.get("model") or body.get("name")) if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            raise ApiError(400, "model is required", param="model", code="invalid_value")
        served = self.door.route(request, body | {"model": name})
        return Response(models.show(served, self.created.made.get(served.name)), media_type="application/json")

    @answers_errors("ollama")
    async def ps(self, request: Request) -> Response:
        """GET /api/ps: the models loaded now and when each would unload if left idle."""
        answer = models.ps(self.door.model_set, self.door.model_set.keep_alive)
        return Response(answer, media_type="application/json")

    @answers_errors("ollama")
    async def version(self, request: Request) -> Response:
        """GET /api/version: some Ollama clients probe it before anything else."""
        try:
            version = importlib.metadata.version("modelhost")
        except importlib.metadata.PackageNotFoundError:
            version = "0.0.0"
        return JSONResponse({"version": version})

    @answers_errors("ollama")
    async def embed(self, request: Request) -> Response:
        """POST /api/embed (and the older /api/embeddings, one raw vector)."""
        body = await read_json(request)
        legacy = request.url.path == "/api/embeddings"
        parsed = embeddings.parse_embeddings(body) if legacy else embeddings.parse_embed(body)
        keep = models.body_keep_alive(body)
        served = self.door.route(request, body)
        served.keep_for(keep)
        with served.in_use():  # from before the load's wait until the submit: see _loaded
            waited = await self._loaded(request, served)
            result, seconds = await self.door.embed(request, served, parsed)
        if legacy:
            answer = embeddings.embeddings_response(result)  # one vector
        else:
            answer = await asyncio.to_thread(embeddings.embed_response, served.name, result, seconds, waited)
        return Response(answer, media_type="application/json")

    async def _answer(
        self, request: Request, served: ServedModel, parsed: ParsedRequest, writer: OllamaStream
    ) -> Response:
        admissions = await self.door.precheck(served, parsed)  # the request's own checks, when the model is loaded
        with served.in_use():  # from before the load's wait until the submit: see _loaded
            writer.load_seconds = await self._loaded(request, served)
            models.check_think(served, parsed)  # needs the loaded model: only it knows whether it can think
            if any(a.engine_request is None for a in admissions):  # it was not loaded: checked now it is
                admissions = await self.door.precheck(served, parsed)
            choices = self.door.submit(served, parsed, admissions)
        if parsed.stream:
            return StreamedAnswer(self.door.metrics, request.url.path, choices, [writer], "application/x-ndjson")
        (answer,), seconds = await relay.collect(
            request, choices, self.door.metrics, logprobs=parsed.logprobs, split=True
        )
        body = writer.done(answer.done, seconds, answer.text, answer.reasoning or "", answer.logprobs or ())
        return Response(body, media_type="application/json")

    async def _loaded(self, request: Request, served: ServedModel) -> float:
        """Wait until `served` is loaded, starting the load of an unloaded one; the seconds waited (Ollama's
        load_duration). Ollama's requests wait for their model, and its clients (the official one included) never
        retry, so the OpenAI door's 503 "loading, retry" reached an Ollama user as an error on the first request
        after a keep_alive unload. A load that cannot start (busy models hold the memory budget) or fails is
        answered as before; a client that hangs up ends the wait. The caller holds `served.in_use()` from before
        this wait until after its submit: the wait ends some event-loop turns before the caller runs again, and a
        keep-alive sweep in between unloaded the model just loaded for it (a 503)."""
        if served.ready:
            return 0.0
        began = time.perf_counter()
        try:
            # A hang-up cancels only this wait: the load itself goes on (wait_loaded shields it).
            await self.door.unless_hung_up(request, served.wait_loaded())
        except MemoryBudgetError as exc:
            raise self.door.memory_wait(exc) from None
        if not served.ready:
            raise self.door.not_ready(served)
        return time.perf_counter() - began

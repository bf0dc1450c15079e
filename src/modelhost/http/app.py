"""The HTTP door: Starlette routes that turn OpenAI and Ollama requests into host requests and events into bytes.

Every generation route does the same four things: read a bounded body, parse it (openai_schema), `host.submit` it
(which refuses bad options, images for a text model and a full queue *before* any compute), then relay the host's
events. JSON shapes live in openai_schema; this module only moves them.

Cancellation: while a request is queued or generating, a task listens for the client's `http.disconnect` and
cancels the host request at once. Waiting for a failed write would not do: a queued or prefilling request writes
nothing, and a non-streaming one writes only at the end, so an abandoned request would keep the model busy for
nobody. The stream responses are raw ASGI for the same reason: the response owns both the writes and the listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import importlib.metadata
import logging
import math
import time
import typing
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelhost import _serving
from modelhost.errors import HostClosedError, ModelHostError, ModelLoadingError, ModelNotFoundError, QueueFullError
from modelhost.host import Delta, Done, Failed, Host, RequestStream, Started
from modelhost.host.events import Event, GenerationRequest
from modelhost.host.models import MemoryBudgetError, Models, ModelState, ServedModel, as_models
from modelhost.http import embeddings, ollama_models
from modelhost.http import openai_schema as schema
from modelhost.http.openai_schema import ApiError, ParsedRequest
from modelhost.http.reasoning import ReasoningSplit
from modelhost.inference.types import Channel, EmbeddingResult, TokenLogprob

log = logging.getLogger(__name__)

Flavour = Literal["openai", "ollama"]
T = TypeVar("T")

#: Bounds on the Retry-After we advertise with a 429: under a second is pointless (clients round up anyway), over a
#: minute means the estimate is unreliable and a client should back off on its own schedule.
_RETRY_AFTER_MIN, _RETRY_AFTER_MAX = 1, 60

#: The routes that carry work (and so need the API key). /health, /ready and /metrics stay open: an orchestrator or
#: a Prometheus scraper must see the process without holding the key, and they reveal no model output.
_PROTECTED_PREFIXES = ("/v1/", "/api/")


class _Writer(Protocol):
    """The per-request serialiser of a streamed answer (see openai_schema's *Stream classes)."""

    def started(self) -> bytes: ...

    def delta(self, text: str, logprobs: Sequence[TokenLogprob] = (), channel: Channel = "content") -> bytes: ...

    def done(self, done: Done, total_seconds: float) -> bytes: ...

    def error(self, err: ApiError) -> bytes: ...


@typing.runtime_checkable
class _ChoiceWriter(_Writer, Protocol):
    """A writer that can share its stream with other choices (OpenAI's `n`): one id, a finish chunk per choice,
    then one closing (usage and [DONE]) for the whole stream."""

    id: str
    created: int

    def finish(self, done: Done) -> bytes: ...

    def closing(self, usage: schema.Usage) -> bytes: ...


# -- metrics the door adds to the host's ----------------------------------------------------------------------------


class _HostStateCollector(Collector):
    """`modelhost_model_state{model_name=...,state=...}` = 1 for each model's current state, so a dashboard shows
    loading/unloaded/failed."""

    def __init__(self, models: Models) -> None:
        self._models = models

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "modelhost_model_state", "1 for a model's current state, 0 for the others.", labels=["model_name", "state"]
        )
        for model in self._models:
            current = model.state
            for state in typing.get_args(ModelState):
                family.add_metric([model.name, state], 1.0 if current == state else 0.0)
        yield family


class HttpMetrics:
    """What only the HTTP door knows: requests by route and status, and clients that hung up mid-request.

    A separate registry from the host's, exposed together at /metrics: two apps over one host (tests) must not
    register the same names twice in one registry.
    """

    def __init__(self, host: Host | Models) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "modelhost_http_requests", "HTTP requests answered, by route and status.", ["route", "method", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.disconnects = Counter(
            "modelhost_http_client_disconnects",
            "Clients that hung up before their answer was complete (their request was cancelled).",
            ["route"],
            registry=self.registry,
        )
        #: Refused by the HTTP layer before any route ran (slow headers or body, too many connections, bad HTTP).
        self.refusals = _serving.refusal_counter(self.registry, "modelhost_http")
        self.registry.register(_HostStateCollector(as_models(host)))


# -- middleware (pure ASGI: BaseHTTPMiddleware would buffer streams and hide disconnects) -------------------------


class _CountRequests:
    def __init__(self, app: ASGIApp, metrics: HttpMetrics, routes: frozenset[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            # Unknown paths are one label value: a scanner must not create a time series per URL it tries.
            route = scope["path"] if scope["path"] in self.routes else "other"
            self.metrics.requests.labels(route, scope["method"], str(status)).inc()


class _RequireApiKey:
    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.expected = api_key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(_PROTECTED_PREFIXES):
            scheme, _, given = dict(scope["headers"]).get(b"authorization", b"").partition(b" ")
            # The scheme is case-insensitive (RFC 9110 §11.1): "bearer" from some clients is as good as "Bearer".
            # compare_digest: the comparison time must not tell an attacker how much of the key they have right.
            if not (hmac.compare_digest(given.strip(), self.expected) and scheme.lower() == b"bearer"):
                err = ApiError(
                    401, "missing or invalid API key (send Authorization: Bearer <key>)",
                    type="authentication_error", code="invalid_api_key",
                )  # fmt: skip
                await _error_response(err, _flavour_of(scope["path"]))(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _flavour_of(path: str) -> Flavour:
    return "ollama" if path.startswith("/api/") else "openai"


def _error_response(err: ApiError, flavour: Flavour) -> Response:
    body = schema.ollama_error_body(err) if flavour == "ollama" else schema.openai_error_body(err)
    return Response(body, status_code=err.status, media_type="application/json", headers=err.headers)


# -- streaming --------------------------------------------------------------------------------------------------


class _Choices:
    """The host streams of one request's choices (OpenAI's `n`; usually one) as one source of (choice, event) in
    the order the events arrive, so the choices stream side by side however the host interleaves them. Closing it
    cancels every choice still running."""

    def __init__(self, streams: Sequence[RequestStream], wire_names: Mapping[str, str]) -> None:
        self.streams = tuple(streams)
        self.wire_names = wire_names  # a failure naming an option names the client's parameter (ParsedRequest)
        self.submitted_at = min(s.submitted_at for s in self.streams)
        self._events: asyncio.Queue[tuple[int, Event]] = asyncio.Queue()
        self._running = len(self.streams)
        # One stream (nearly every request) is read directly: a relay task and a queue hop per token buy nothing
        # when there is nothing to interleave.
        pumps = enumerate(self.streams) if len(self.streams) > 1 else ()
        self._pumps = [asyncio.create_task(self._pump(i, s)) for i, s in pumps]

    async def _pump(self, index: int, stream: RequestStream) -> None:
        async for event in stream:
            self._events.put_nowait((index, event))

    def __aiter__(self) -> _Choices:
        return self

    async def __anext__(self) -> tuple[int, Event]:
        if not self._running:
            raise StopAsyncIteration
        if self._pumps:
            index, event = await self._events.get()
        else:
            index, event = 0, await self.streams[0].__anext__()
        if isinstance(event, (Done, Failed)):
            self._running -= 1
        return index, event

    def cancel(self) -> None:
        """Cancel every choice, wherever it is (queued or generating)."""
        for stream in self.streams:
            stream.cancel()

    async def aclose(self) -> None:
        """Stop relaying and cancel the choices that have not finished."""
        for pump in self._pumps:
            pump.cancel()
        for stream in self.streams:
            await stream.aclose()


async def _cancel_on_disconnect(receive: Receive, stream: _Choices, gone: asyncio.Event) -> None:
    # Only called once the body is fully read, so the next message the server has for us is the disconnect.
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            stream.cancel()
            return


async def _disconnect(receive: Receive) -> None:
    """Returns when the client hangs up (called once the body is read, so the next message is the disconnect)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class _StreamedAnswer(Response):
    """Relays a host request's events as SSE or NDJSON, cancelling the request if the client goes away. With
    several choices, `writers[i]` writes choice i, and the stream ends once, after the last choice finished."""

    def __init__(
        self, door: _Door, route: str, stream: _Choices, writers: Sequence[_Writer], media_type: str, prompts: int = 1
    ) -> None:
        super().__init__(media_type=media_type)
        self.door = door
        self.route = route
        self.stream = stream
        self.writers = writers
        self.prompts = prompts  # distinct prompts among the choices (each billed once in the usage)
        self._finished: dict[int, Done] = {}
        self._ended = False  # an error ended the whole stream (the other choices are cancelled)
        # No caching, and no proxy buffering (nginx's header): tokens must reach the client as they are made.
        self.headers.update({"cache-control": "no-cache", "x-accel-buffering": "no"})
        del self.headers["content-length"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        gone = asyncio.Event()
        listener = asyncio.create_task(_cancel_on_disconnect(receive, self.stream, gone))
        try:
            async for index, event in self.stream:
                chunk = self._render(index, event, gone)
                if chunk and not gone.is_set():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if self._ended:
                    break
        finally:
            listener.cancel()
            await self.stream.aclose()
            if gone.is_set():
                self.door.metrics.disconnects.labels(self.route).inc()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _render(self, index: int, event: Event, gone: asyncio.Event) -> bytes:
        writer = self.writers[index]
        if isinstance(event, Delta):
            return writer.delta(event.text, event.logprobs, event.channel)
        if isinstance(event, Started):
            return writer.started()
        if isinstance(event, Failed):
            self._ended = True
            return writer.error(schema.from_failure(event, self.stream.wire_names))
        if event.finish_reason == "cancelled":
            # Cancelled while the client still listens: only the host's shutdown does that. Say so.
            self._ended = True
            return b"" if gone.is_set() else writer.error(_cancelled_by_host())
        if len(self.writers) == 1:
            return writer.done(event, time.perf_counter() - self.stream.submitted_at)
        assert isinstance(writer, _ChoiceWriter), "several choices are written by OpenAI writers only"
        self._finished[index] = event
        out = writer.finish(event)
        if len(self._finished) == len(self.writers):
            dones = [self._finished[i] for i in range(len(self.writers))]
            out += writer.closing(schema.usage_of(*dones, prompts=self.prompts))
        return out


def _answer_internal_error(scope: Scope) -> Response:
    return _error_response(_internal_error(), _flavour_of(scope["path"]))


def _internal_error() -> ApiError:
    return ApiError(500, "internal server error (see the server log)", type="server_error", code="internal")


def _cancelled_by_host() -> ApiError:
    return schema.from_host_error("cancelled", "the request was cancelled: the host is shutting down")


# -- the door -----------------------------------------------------------------------------------------------------


def _answers_errors(flavour: Flavour) -> Callable[[Callable[[_Door, Request], Awaitable[Response]]], Any]:
    """Turn ApiError (and any surprise) raised by a handler into the route family's error body."""

    def wrap(handler: Callable[[_Door, Request], Awaitable[Response]]) -> Callable[[_Door, Request], Any]:
        @functools.wraps(handler)
        async def run(self: _Door, request: Request) -> Response:
            try:
                return await handler(self, request)
            except ApiError as err:
                return _error_response(err, flavour)
            except Exception:
                log.exception("%s %s failed", request.method, request.url.path)
                return _error_response(_internal_error(), flavour)

        return run

    return wrap


class _Door:
    """The route handlers, bound to a model set (one model, or several routed by the request's `model`)."""

    def __init__(self, models: Models, metrics: HttpMetrics) -> None:
        self.model_set = models
        self.metrics = metrics
        self.created = time.time()

    def _route(self, body: Any) -> ServedModel:
        """The model a request body names (`model`); 404 model_not_found for a name not served here."""
        name = body.get("model") if isinstance(body, dict) else None
        try:
            return self.model_set.route(name if isinstance(name, str) else None)
        except ModelNotFoundError as exc:
            raise ApiError(404, str(exc), type="not_found_error", param="model", code="model_not_found") from None

    # -- operations ------------------------------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        """Liveness: answers from the event loop, never waits on a model. 503 only when a model can never serve
        again (its load failed, or it closed): restarting the process is then the fix."""
        states = self.model_set.states()
        status = 503 if any(s in ("failed", "closed") for s in states.values()) else 200
        body = {"status": "ok" if status == 200 else "error", "state": states[self.model_set.default], "models": states}
        return JSONResponse(body, status_code=status)

    async def ready(self, request: Request) -> Response:
        """Readiness: 200 when requests are admitted: every model loaded at start is ready (a lazy one may be
        unloaded: its first request loads it). Else 503 with the first state in the way. Each model's state too."""
        states = self.model_set.states()
        blocking = next((m.state for m in self.model_set if _blocks_readiness(m, self.model_set)), None)
        body: dict[str, Any] = {"status": blocking or "ready", "model": self.model_set.default, "models": states}
        if blocking is None:
            return JSONResponse(body)
        headers = {"retry-after": "1"} if blocking in ("new", "loading", "unloaded") else None
        return JSONResponse(body, status_code=503, headers=headers)

    async def prometheus(self, request: Request) -> Response:
        """The models' metrics (latencies, queue, tokens, finish reasons, by model) and the door's own."""
        body = generate_latest(self.model_set.metrics.registry) + generate_latest(self.metrics.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    # -- OpenAI ----------------------------------------------------------------------------------------------------
    @_answers_errors("openai")
    async def models(self, request: Request) -> Response:
        """GET /v1/models."""
        return Response(schema.models_list(self.model_set.names, int(self.created)), media_type="application/json")

    @_answers_errors("openai")
    async def chat_completions(self, request: Request) -> Response:
        """POST /v1/chat/completions."""
        body = await _read_json(request)
        parsed = schema.parse_chat_completion(body, _request_id())
        plan = parsed.tools
        if plan is None:
            return await self._openai(
                request, self._route(body), parsed, schema.OpenAIChatStream, schema.chat_completion
            )
        return await self._openai(
            request, self._route(body), parsed,
            lambda name, usage, choice: schema.OpenAIToolStream(name, usage, plan, choice),
            lambda name, answers: schema.chat_completion(name, answers, plan),
        )  # fmt: skip

    @_answers_errors("openai")
    async def completions(self, request: Request) -> Response:
        """POST /v1/completions."""
        body = await _read_json(request)
        parsed = schema.parse_completion(body, _request_id())
        prompts = max(1, len(parsed.prompts))
        return await self._openai(
            request, self._route(body), parsed, schema.OpenAICompletionStream,
            lambda name, answers: schema.completion(name, answers, prompts),
        )  # fmt: skip

    # -- Ollama ----------------------------------------------------------------------------------------------------
    @_answers_errors("ollama")
    async def ollama_chat(self, request: Request) -> Response:
        """POST /api/chat."""
        body = await _read_json(request)
        parsed = schema.parse_ollama_chat(body, _request_id())
        keep = ollama_models.body_keep_alive(body)
        served = self._route(body)
        served.keep_for(keep)
        return await self._ollama(request, served, parsed, schema.OllamaStream(served.name, "chat", parsed.tools))

    @_answers_errors("ollama")
    async def ollama_generate(self, request: Request) -> Response:
        """POST /api/generate."""
        body = await _read_json(request)
        parsed = schema.parse_ollama_generate(body, _request_id())
        keep = ollama_models.body_keep_alive(body)
        served = self._route(body)
        writer = schema.OllamaStream(served.name, "generate")
        if parsed is None and keep == 0:
            # Ollama's "unload the model" request: unloaded now when idle, else as soon as its requests end.
            if served.pinned:
                raise ApiError(400, f"model {served.name!r} is pinned (it serves the socket door) and stays loaded",
                               param="keep_alive", code="model_pinned")  # fmt: skip
            served.keep_for(0)
            self.model_set.unload(served)
            return Response(ollama_models.unloaded(served.name), media_type="application/json")
        served.keep_for(keep)
        if parsed is None:
            # Ollama's "load the model" request: a lazy model starts loading; answered once it is loaded.
            with served.in_use():
                await self._ollama_loaded(request, served)
            return Response(writer.loaded(), media_type="application/json")
        return await self._ollama(request, served, parsed, writer)

    @_answers_errors("ollama")
    async def ollama_tags(self, request: Request) -> Response:
        """GET /api/tags."""
        listed = [(m.name, m.model.model_type if m.ready else "", m.size) for m in self.model_set]
        return Response(schema.ollama_tags(listed, self.created), media_type="application/json")

    @_answers_errors("ollama")
    async def ollama_show(self, request: Request) -> Response:
        """POST /api/show: what a model is and can do (its capabilities: vision, tools, thinking, embedding)."""
        body = await _read_json(request)
        name = (body.get("model") or body.get("name")) if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            raise ApiError(400, "model is required", param="model", code="invalid_value")
        return Response(ollama_models.show(self._route(body | {"model": name})), media_type="application/json")

    @_answers_errors("ollama")
    async def ollama_ps(self, request: Request) -> Response:
        """GET /api/ps: the models loaded now and when each would unload if left idle."""
        answer = ollama_models.ps(self.model_set, self.model_set.keep_alive)
        return Response(answer, media_type="application/json")

    @_answers_errors("ollama")
    async def ollama_version(self, request: Request) -> Response:
        """GET /api/version: some Ollama clients probe it before anything else."""
        try:
            version = importlib.metadata.version("modelhost")
        except importlib.metadata.PackageNotFoundError:
            version = "0.0.0"
        return JSONResponse({"version": version})

    # -- embeddings (shapes in embeddings.py) ----------------------------------------------------------------------
    @_answers_errors("openai")
    async def openai_embeddings(self, request: Request) -> Response:
        """POST /v1/embeddings."""
        body = await _read_json(request)
        parsed = embeddings.parse_openai(body)
        served = self._route(body)
        result, _ = await self._embed(request, served, parsed)
        # Encoded off the event loop: 2048 vectors of a 4096-wide model are ~0.9 s of JSON floats (0.15 s base64).
        answer = await asyncio.to_thread(embeddings.openai_response, served.name, parsed, result)
        return Response(answer, media_type="application/json")

    @_answers_errors("ollama")
    async def ollama_embed(self, request: Request) -> Response:
        """POST /api/embed (and the older /api/embeddings, one raw vector)."""
        body = await _read_json(request)
        legacy = request.url.path == "/api/embeddings"
        parsed = embeddings.parse_ollama_embeddings(body) if legacy else embeddings.parse_ollama_embed(body)
        keep = ollama_models.body_keep_alive(body)
        served = self._route(body)
        served.keep_for(keep)
        with served.in_use():  # from before the load's wait until the submit: see _ollama_loaded
            waited = await self._ollama_loaded(request, served)
            result, seconds = await self._embed(request, served, parsed)
        if legacy:
            answer = embeddings.ollama_embeddings_response(result)  # one vector
        else:
            answer = await asyncio.to_thread(embeddings.ollama_embed_response, served.name, result, seconds, waited)
        return Response(answer, media_type="application/json")

    async def _embed(
        self, request: Request, served: ServedModel, parsed: embeddings.ParsedEmbedding
    ) -> tuple[EmbeddingResult, float]:
        """Submit an embedding and await it (cancelled if the client hangs up first): (result, seconds)."""
        with self._admission(served, lambda exc: embeddings.error(exc, parsed.wire_names)):
            ticket = served.submit_embedding(parsed.texts, **parsed.options)
        try:
            # Cancelling the awaiting of `result()` cancels the ticket: a queued embedding is never computed.
            result = await self._unless_hung_up(request, ticket.result())
        except ModelHostError as exc:
            raise embeddings.error(exc, parsed.wire_names) from None
        return result, time.perf_counter() - ticket.submitted_at

    async def _unless_hung_up(self, request: Request, work: Awaitable[T]) -> T:
        """`work`'s result, or, when the client hangs up first, `work` cancelled and a 499 (counted as a disconnect:
        nobody reads it; nginx's "client closed request" keeps the request counter truthful)."""
        task = asyncio.ensure_future(work)
        gone = asyncio.create_task(_disconnect(request.receive))
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not task.done():
                task.cancel()
        if not task.done() or task.cancelled():
            self.metrics.disconnects.labels(request.url.path).inc()
            raise ApiError(499, "client closed the request", code="cancelled")
        return task.result()

    async def _openai(
        self,
        request: Request,
        served: ServedModel,
        parsed: ParsedRequest,
        streamed: Callable[[str, bool, int], _ChoiceWriter],
        whole: Callable[[str, Sequence[schema.Answer]], bytes],
    ) -> Response:
        """Submit every choice; answer as SSE from `streamed(model, include_usage, choice)` writers (one per
        choice, sharing one id), or as one `whole(model, answers)` body."""
        await self._precheck(served, parsed)
        choices = self._submit(served, parsed)
        if parsed.stream:
            writers = [streamed(served.name, parsed.include_usage, i) for i in range(len(choices.streams))]
            for writer in writers[1:]:
                writer.id, writer.created = writers[0].id, writers[0].created
            prompts = max(1, len(parsed.prompts))
            return _StreamedAnswer(self, request.url.path, choices, writers, "text/event-stream", prompts)
        # Chat answers split a thinking model's thought out; a raw completion's text stays whole.
        answers, _ = await self._collect(
            request, choices, logprobs=parsed.logprobs, split=bool(parsed.generation.messages)
        )
        return Response(whole(served.name, answers), media_type="application/json")

    async def _ollama(
        self, request: Request, served: ServedModel, parsed: ParsedRequest, writer: schema.OllamaStream
    ) -> Response:
        await self._precheck(served, parsed)  # the request's own checks, before any wait for the model
        with served.in_use():  # from before the load's wait until the submit: see _ollama_loaded
            writer.load_seconds = await self._ollama_loaded(request, served)
            ollama_models.check_think(served, parsed)  # needs the loaded model: only it knows whether it can think
            choices = self._submit(served, parsed)
        if parsed.stream:
            return _StreamedAnswer(self, request.url.path, choices, [writer], "application/x-ndjson")
        (answer,), seconds = await self._collect(request, choices, logprobs=parsed.logprobs, split=True)
        body = writer.done(answer.done, seconds, answer.text, answer.reasoning or "", answer.logprobs or ())
        return Response(body, media_type="application/json")

    async def _ollama_loaded(self, request: Request, served: ServedModel) -> float:
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
            await self._unless_hung_up(request, served.wait_loaded())
        except MemoryBudgetError as exc:
            raise self._memory_wait(exc) from None
        if not served.ready:
            raise self._not_ready(served)
        return time.perf_counter() - began

    # -- the shared path -------------------------------------------------------------------------------------------
    def _submit(self, served: ServedModel, parsed: ParsedRequest) -> _Choices:
        """Submit every choice of the request, or none: when the queue cannot take them all, those already queued
        are cancelled and the whole request is refused (a client asking for n choices gets n or an error)."""
        streams: list[RequestStream] = []
        try:
            for generation in parsed.choices():
                streams.append(self._submit_one(served, parsed, generation))
        except BaseException:
            for stream in streams:
                stream.cancel()
            raise
        return _Choices(streams, parsed.wire_names)

    async def _precheck(self, served: ServedModel, parsed: ParsedRequest) -> None:
        """The request's checks on a worker thread (Host.precheck: a JSON Schema's grammar is compiled there, not
        on the event loop), refused as `_submit` would refuse them. The choices differ only in their seed, so one
        check stands for all."""
        with self._admission(served, lambda exc: schema.from_host_exception(exc, parsed.wire_names)):
            await served.precheck(parsed.generation)

    def _submit_one(self, served: ServedModel, parsed: ParsedRequest, generation: GenerationRequest) -> RequestStream:
        with self._admission(served, lambda exc: schema.from_host_exception(exc, parsed.wire_names)):
            return served.submit(generation)

    @contextlib.contextmanager
    def _admission(self, served: ServedModel, answer: Callable[[ModelHostError], ApiError]) -> Iterator[None]:
        """What a refused submission answers: a full queue `answer(exc)` with Retry-After, a model loading (or
        closed) 503, any other refusal `answer(exc)` (the route family's error, naming the client's parameter)."""
        try:
            yield
        except QueueFullError as exc:
            err = answer(exc)
            err.headers["retry-after"] = str(self._retry_after(served))
            raise err from None
        except MemoryBudgetError as exc:
            raise self._memory_wait(exc) from None
        except ModelLoadingError as exc:
            raise self._not_ready(served, str(exc)) from None
        except HostClosedError:
            raise self._not_ready(served) from None
        except ModelHostError as exc:
            raise answer(exc) from None

    def _not_ready(self, served: ServedModel, message: str | None = None) -> ApiError:
        state = served.state
        if state in ("new", "loading", "unloaded"):
            return ApiError(503, message or f"model {served.name!r} is loading; retry shortly", type="server_error",
                            code="model_loading", headers={"retry-after": "1"})  # fmt: skip
        return schema.from_host_error("host_closed", f"model {served.name!r} is not serving (state {state})")

    @staticmethod
    def _memory_wait(exc: MemoryBudgetError) -> ApiError:
        """A model waiting for memory, or making room for one: 503 with the set's estimate of the wait."""
        return ApiError(503, str(exc), type="server_error", code="model_loading",
                        headers={"retry-after": str(exc.retry_after)})  # fmt: skip

    def _retry_after(self, served: ServedModel) -> int:
        """Seconds until a queue slot is likely free: one mean request time so far (the queue drains one request
        at a time, so a slot frees when the running request ends; retrying sooner would only be refused again)."""
        mean = served.metrics.mean_request_seconds(served.host.name if served.host is not None else served.name)
        return max(_RETRY_AFTER_MIN, min(_RETRY_AFTER_MAX, math.ceil(mean or 1.0)))

    async def _collect(
        self, request: Request, choices: _Choices, *, logprobs: bool, split: bool
    ) -> tuple[list[schema.Answer], float]:
        """Drain a non-streaming request's choices, cancelling them all if the client hangs up before the answer
        is ready, or if one fails: (one Answer per choice, seconds). With `logprobs` each answer keeps its tokens'
        log-probabilities; with `split` a thinking model's thought is kept apart from the text."""
        n = len(choices.streams)
        parts: list[list[str]] = [[] for _ in range(n)]
        thoughts: list[list[str]] = [[] for _ in range(n)]
        entries: list[list[TokenLogprob]] = [[] for _ in range(n)]
        splits = [ReasoningSplit() if split else None for _ in range(n)]
        ends: list[Done | None] = [None] * n
        failed: Failed | None = None
        gone = asyncio.Event()
        listener = asyncio.create_task(_cancel_on_disconnect(request.receive, choices, gone))
        try:
            async for index, event in choices:
                if isinstance(event, Delta):
                    splitter = splits[index]
                    content, thought = splitter.feed(event.text, event.channel) if splitter else (event.text, "")
                    parts[index].append(content)
                    thoughts[index].append(thought)
                    entries[index].extend(event.logprobs)
                elif isinstance(event, Done):
                    ends[index] = event
                elif isinstance(event, Failed):
                    failed = event
                    break
        finally:
            listener.cancel()
            await choices.aclose()
        seconds = time.perf_counter() - choices.submitted_at
        if gone.is_set():
            self.metrics.disconnects.labels(request.url.path).inc()
            # Nobody reads this; 499 (nginx's "client closed request") keeps the request counter truthful.
            raise ApiError(499, "client closed the request", code="cancelled")
        if failed is not None:
            raise schema.from_failure(failed, choices.wire_names)
        answers = []
        for i, end in enumerate(ends):
            if end is None or end.finish_reason == "cancelled":
                raise _cancelled_by_host()
            splitter = splits[i]
            reasoning = "".join(thoughts[i]) if splitter is not None and splitter.saw_thought else None
            answers.append(schema.Answer("".join(parts[i]), end, entries[i] if logprobs else None, reasoning))
        return answers, seconds


#: Media types a JSON route refuses (415). Any other Content-Type, or none, is read as JSON: Ollama's own examples
#: (`curl -d '{...}'`) send application/x-www-form-urlencoded, and scripts often send text/plain, so insisting on
#: application/json would break real clients for no safety gain (a non-JSON body fails to parse with a 400 that says
#: where). A multipart body can never be JSON and means the client meant an upload: say so rather than "invalid JSON".
_NOT_JSON_TYPES = ("multipart/",)


async def _read_json(request: Request) -> Any:
    """The body, bounded by MAX_BODY_BYTES before it is all in memory, parsed as JSON."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type.startswith(_NOT_JSON_TYPES):
        raise ApiError(
            415, f"this route takes a JSON body, not {media_type}", param="Content-Type", code="unsupported_media_type"
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > schema.MAX_BODY_BYTES:
        raise _too_large()
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > schema.MAX_BODY_BYTES:
                raise _too_large()
    except ClientDisconnect:
        # A client that hangs up mid-body is not a server fault: count it as 499, log no traceback.
        raise ApiError(499, "client closed the request", code="cancelled") from None
    return schema.decode_json(bytes(body))


def _too_large() -> ApiError:
    return ApiError(413, f"request body exceeds {schema.MAX_BODY_BYTES} bytes", code="body_too_large")


def _request_id() -> str:
    return uuid.uuid4().hex


#: Codes of the answers the HTTP layer gives before any route runs (modelhost._serving), by status.
_LAYER_CODES = {400: "malformed_http", 408: "request_timeout", 503: "too_many_connections"}


def layer_error_body(status: int, message: str) -> bytes:
    """The door's JSON body for an answer of the HTTP layer itself (a slow client, too many connections, bytes that
    are not HTTP). The path may not be known yet, so it is OpenAI's shape, which Ollama clients also read."""
    kind: schema.ErrorType = "server_error" if status >= 500 else "invalid_request_error"
    return schema.openai_error_body(ApiError(status, message, type=kind, code=_LAYER_CODES.get(status)))


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (no such route) and 405 (wrong method), in the route family's JSON."""
    assert isinstance(exc, HTTPException)
    err = ApiError(exc.status_code, str(exc.detail), type="not_found_error" if exc.status_code == 404 else
                   "invalid_request_error", headers=exc.headers)  # fmt: skip
    return _error_response(err, _flavour_of(request.url.path))


def _blocks_readiness(model: ServedModel, models: Models) -> bool:
    """A model loaded at start that is not ready, or any model that failed or closed."""
    if model.state in ("failed", "closing", "closed"):
        return True
    if model.pinned:
        return not model.ready
    # Once started, a model unloaded by keep-alive or for room is fine: its next request loads it again.
    return not models.started and not models.lazy and not model.ready


def build_app(
    host: Host | Models,
    *,
    api_key: str | None = None,
    model_name: str | None = None,
    metrics: HttpMetrics | None = None,
) -> Starlette:
    """The Starlette app of the HTTP door over a host, or a model set (requests routed by their `model`). `api_key`
    guards /v1/* and /api/*; `model_name` is the name clients see of a lone host (default: the host's name). A model
    may still be loading: /health answers, /ready says 503."""
    models = as_models(host, name=model_name)
    metrics = metrics or HttpMetrics(models)
    door = _Door(models, metrics)
    routes = [
        Route("/health", door.health, methods=["GET"]),
        Route("/ready", door.ready, methods=["GET"]),
        Route("/metrics", door.prometheus, methods=["GET"]),
        Route("/v1/models", door.models, methods=["GET"]),
        Route("/v1/chat/completions", door.chat_completions, methods=["POST"]),
        Route("/v1/completions", door.completions, methods=["POST"]),
        Route("/api/chat", door.ollama_chat, methods=["POST"]),
        Route("/api/generate", door.ollama_generate, methods=["POST"]),
        Route("/api/tags", door.ollama_tags, methods=["GET"]),
        Route("/api/ps", door.ollama_ps, methods=["GET"]),
        Route("/api/show", door.ollama_show, methods=["POST"]),
        Route("/api/version", door.ollama_version, methods=["GET"]),
        Route("/v1/embeddings", door.openai_embeddings, methods=["POST"]),
        Route("/api/embed", door.ollama_embed, methods=["POST"]),
        Route("/api/embeddings", door.ollama_embed, methods=["POST"]),
    ]
    middleware = [
        # Outermost of ours, so it also covers the other middleware.
        Middleware(_serving.AnswerServerErrors, answer=_answer_internal_error),
        Middleware(_CountRequests, metrics=metrics, routes=frozenset(r.path for r in routes)),
    ]
    if api_key:
        middleware.append(Middleware(_RequireApiKey, api_key=api_key))
    return Starlette(routes=routes, middleware=middleware, exception_handlers={HTTPException: _http_error})


__all__ = ["HttpMetrics", "build_app", "layer_error_body"]

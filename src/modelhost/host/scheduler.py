"""The host: holds one loaded model and the one scheduler every door uses.

Why one thread per model: llama.cpp runs its compute on an OpenMP thread group per calling thread, so calling a
model from a new thread per request oversubscribes the cores and speed collapses (measured 80 -> 7-36 tokens/s).
The model is loaded and driven on one long-lived thread; doors are asyncio and never block the event loop.

Admission: the waiting queue is bounded (`max_queue`); beyond it `submit` raises QueueFullError at once, so a door
answers 429/queue_full instead of letting latency grow without bound. A request is cancelled, wherever it is, when
its consumer calls `cancel()` or closes its stream: a queued request leaves the queue and frees its slot; a running
one stops within one token (the contract's `cancel=` token), and the model takes the next request.

The model thread (host/loop.py) drives the model's engine in one loop: admit, step, emit, release, an embedding
between two steps; the stream and ticket objects a door holds are host/streams.py's.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from modelhost.errors import (
    EmbeddingUnsupportedError,
    HostClosedError,
    InvalidInputError,
    InvalidOptionError,
    ModelHostError,
    ModelLoadingError,
    ModelNotFoundError,
    QueueFullError,
    UnsupportedAttachmentError,
)
from modelhost.host.events import Admission, Done, Event, Failed, GenerationRequest, Started
from modelhost.host.loop import Chore, HostState, ModelLoop
from modelhost.host.metrics import HostMetrics
from modelhost.host.streams import EmbeddingTicket, RequestStream, cancelled_embedding
from modelhost.inference.capabilities import (
    EmbeddingModel,
    OptionChecker,
    as_capability,
    check_embedding_inputs,
    check_prompt_size,
    fit_embedding_inputs,
)
from modelhost.inference.engine import (
    AdapterEngine,
    Engine,
    EngineRequest,
    PreparingEngine,
)
from modelhost.inference.model import TextModel
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import ROLES, EmbeddingResult, GenerateMetrics, has_images

log = logging.getLogger(__name__)

#: Default bound on requests waiting for the model. A small CPU model serves a few requests a second; 64 waiting
#: is already a minute of backlog, past which a caller is better told "busy" than kept waiting.
DEFAULT_MAX_QUEUE = 64


class Host(ModelLoop):
    """One loaded model, its thread and its queue. Build with a loader; `await start()` loads on the model thread."""

    def __init__(
        self,
        loader: Callable[[], TextModel],
        *,
        name: str,
        max_queue: int = DEFAULT_MAX_QUEUE,
        metrics: HostMetrics | None = None,
        on_load: Callable[[Host, Engine], None] | None = None,
    ) -> None:
        """`on_load(host, engine)` runs on the model thread once the engine is made, before the host is ready (the
        model set loads its adapters there: `load_adapter_now`); what it raises fails the load."""
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        self.name = name
        self.max_queue = max_queue
        self.metrics = metrics or HostMetrics(name)
        self.state: HostState = "new"
        self.load_error: BaseException | None = None
        self._loader = loader
        self._model: TextModel | None = None
        self._accepts_images = False
        self._waiting: collections.deque[RequestStream] = collections.deque()
        self._running: list[RequestStream] = []  # what the model works on now: one, or one per busy batch slot
        self._deferred: set[asyncio.Task[None]] = set()  # submit_deferred's requests still being prepared
        self._embeddings: collections.deque[EmbeddingTicket] = collections.deque()
        self._embedding: EmbeddingTicket | None = None  # the one the model thread computes now
        self._engine: Engine | None = None  # set on the model thread at load
        self.slots = 1  # requests decoded at once; set at load from the model's engine
        self._on_load = on_load
        # Work the model thread does between two steps (adapters loaded and freed), oldest first.
        self._chores: collections.deque[Chore] = collections.deque()
        #: The LoRA adapters the engine holds now, by name (requests may name only these). Changed on the model
        #: thread, read anywhere: a frozenset is replaced whole, never mutated.
        self.adapters: frozenset[str] = frozenset()
        #: Why an adapter the model set asked for at load could not be loaded, by name (written on the model thread
        #: before the host is ready, read after).
        self.adapter_errors: dict[str, str] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._idle = threading.Event()
        self._idle.set()

    @classmethod
    def from_model(cls, model: TextModel, *, name: str, max_queue: int = DEFAULT_MAX_QUEUE) -> Host:
        """A host around an already loaded model (it is still driven from the host's own thread)."""
        return cls(lambda: model, name=name, max_queue=max_queue)

    # -- lifecycle -------------------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the model thread and load the model there; returns when ready, raises the load error otherwise."""
        if self.state != "new":
            raise RuntimeError(f"host already started (state {self.state})")
        self.state = "loading"
        self._thread = threading.Thread(target=self._main, name=f"modelhost-model-{self.name}", daemon=True)
        self._thread.start()
        await asyncio.get_running_loop().run_in_executor(None, self._ready.wait)
        if self.load_error is not None:
            raise self.load_error

    @property
    def ready(self) -> bool:
        """True when the model is loaded and the host admits requests."""
        return self.state == "ready"

    @property
    def model(self) -> TextModel:
        """The loaded model (for info and capabilities; drive it only through `submit`)."""
        if self._model is None:
            raise HostClosedError(f"host {self.name!r} has no model loaded (state {self.state})")
        return self._model

    @property
    def accepts_images(self) -> bool:
        """True when the loaded checkpoint accepts images (a live probe made once at load)."""
        return self._accepts_images

    async def aclose(self, grace: float = 10.0) -> None:
        """Stop admitting, let queued and running requests finish for up to `grace` seconds, cancel the rest, and
        close the model on its own thread."""
        if self.state in ("closed", "closing"):
            return
        loop = asyncio.get_running_loop()
        if self.state == "loading":
            await loop.run_in_executor(None, self._ready.wait)
        with self._cond:
            previous, self.state = self.state, "closing"
        if previous == "ready":
            drained = await loop.run_in_executor(None, self._idle.wait, grace)
            if not drained:
                self.cancel_all()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            await loop.run_in_executor(None, self._thread.join)
        self.state = "closed"

    # -- admission -------------------------------------------------------------------------------------------------
    def submit(self, request: GenerationRequest | Admission, choice: int = 0) -> RequestStream:
        """Queue choice `choice` of a request and return its event stream. Must be called on the event loop that will
        consume it.

        Given the Admission `precheck` made, nothing is checked again (but that the host still serves and still holds
        the request's adapter); given a GenerationRequest, it is checked here first (one choice: n=1). Raises at
        once (nothing queued) for: a host that is not ready, invalid options, an image for a text-only model, a full
        queue. The first choice of each request is counted in `request_params_n`.
        """
        self._check_serving()
        admission = request if isinstance(request, Admission) else Admission(request)
        if admission.engine_request is None or admission.engine is not self._engine:
            admission = self._admission(admission.request, admission.n, prepare=False)
        adapter = admission.adapter
        if adapter is not None and adapter not in self.adapters:  # removed since precheck: refused as it was then
            self.metrics.reject(self.name, ModelNotFoundError.code)
            raise ModelNotFoundError(f"model {self.name!r} holds no adapter {adapter!r}")
        stream = RequestStream(self, admission.request, admission.choice(choice))
        self._enqueue(stream)
        if choice == 0:
            self.metrics.request_params_n.labels(self.name).observe(admission.n)
        return stream

    def _enqueue(self, stream: RequestStream) -> None:
        """Put `stream` in the queue and wake the model thread; QueueFullError (counted) when the queue is full."""
        with self._cond:
            self._check_room()
            self._waiting.append(stream)
            self._gauge_waiting()
            self._idle.clear()
            self._cond.notify()

    def submit_deferred(
        self, request: GenerationRequest, prepare: Callable[[GenerationRequest], GenerationRequest]
    ) -> RequestStream:
        """Queue `prepare(request)` and return its stream now, `prepare` and the checks of what it returns running on
        a worker thread, as `precheck` runs them, never on the event loop (a created model's TEMPLATE given to
        `submit` as a plain GenerationRequest: ServedModel.submit). Raised at once, as `submit` raises them: a host
        that is not serving, a full queue. What only the prepared request shows (its options, its size) ends the
        stream with Failed after Started, as an engine's refusal does; a stream cancelled meanwhile ends cancelled
        and is never queued. Must be called on the event loop that consumes it."""
        self._check_serving()
        with self._cond:
            self._check_room()
        stream = RequestStream(self, request, EngineRequest(prompt=""))  # its engine request is made below

        async def queue() -> None:
            try:
                prepared = await asyncio.to_thread(prepare, request)
                admission = await asyncio.to_thread(self._admission, prepared, 1, prepare=True)
                if stream.cancel_event.is_set():
                    stream.emit(Done("cancelled", 0, 0, GenerateMetrics(finish_reason="cancelled")))
                    return
                stream.request, stream.engine_request = admission.request, admission.choice(0)
                self._check_serving()
                self._enqueue(stream)
                self.metrics.request_params_n.labels(self.name).observe(1)
            except ModelHostError as exc:  # counted where it was raised (metrics.reject)
                stream.emit(Started(time.perf_counter() - stream.submitted_at, 0))
                stream.emit(Failed(exc.code, str(exc), option=getattr(exc, "option", None)))
            except Exception as exc:  # a fault of the template or a check: the stream still ends, as at admission
                log.exception("request %r could not be prepared for model %r", request.request_id, self.name)
                stream.emit(Started(time.perf_counter() - stream.submitted_at, 0))
                stream.emit(Failed("internal", f"{type(exc).__name__}: {exc}"))

        task = asyncio.get_running_loop().create_task(queue())
        self._deferred.add(task)  # held until it ends: the loop keeps only a weak reference to a task
        task.add_done_callback(self._deferred.discard)
        return stream

    async def precheck(self, request: GenerationRequest, n: int = 1) -> Admission:
        """Check a request once, on a worker thread, and return its Admission for `submit` (each of its `n` choices
        shares it); raises what `submit` would raise. A door awaits this first so the event loop never compiles a
        grammar (a JSON Schema turned into llama.cpp's grammar or llguidance's, up to tens of milliseconds for a
        large schema) nor renders and tokenizes a prompt: when the model's engine is a PreparingEngine, the
        options are resolved and the prompt tokenized here, so the model thread only admits it. A host that is not
        ready returns the request unchecked, for `submit` to refuse."""
        if n < 1:
            raise ValueError("a request has at least one choice")
        if self.state != "ready":
            return Admission(request, n=n)
        return await asyncio.to_thread(self._admission, request, n, prepare=True)

    def _admission(self, request: GenerationRequest, n: int, *, prepare: bool) -> Admission:
        """Parse and check the request (the one parse of its options), and have the engine prepare it when it can
        and `prepare` says to (off the event loop); a refusal is counted in the metrics and raised."""
        engine = self._engine
        try:
            options = self._validate(request, check_model=not (prepare and isinstance(engine, PreparingEngine)))
            engine_request = _engine_request(request, options)
            if prepare and isinstance(engine, PreparingEngine):
                engine_request = engine.prepare(engine_request)  # the model's checks, the template, the tokens
        except ModelHostError as exc:
            self.metrics.reject(self.name, exc.code)
            raise
        return Admission(request, engine_request, n, engine)

    def submit_embedding(
        self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False, dimensions: int | None = None
    ) -> EmbeddingTicket:
        """Queue an embedding of `texts` and return its ticket. Must be called on the event loop that awaits it.

        Raises at once (nothing queued) for: a host that is not ready, a model without the EmbeddingModel capability
        (EmbeddingUnsupportedError), inputs that are empty, not strings or too many (InvalidInputError naming the
        input), an input of more bytes than the context can hold without `truncate` (cut to the bound with it),
        `dimensions` other than the model's vector size (InvalidOptionError), a full queue. Inputs within the bytes
        but too long in tokens are the model's to find (it tokenises): the ticket's result raises that error.
        """
        self._check_serving()
        try:
            embedder = as_capability(self._model, EmbeddingModel)
            if embedder is None:
                raise EmbeddingUnsupportedError(f"model {self.name!r} cannot embed text (its backend offers no "
                                                "embeddings); choose a model that does")  # fmt: skip
            # Over the context by their bytes alone: refused (or cut, with truncate) here, before the queue, so the
            # model thread never tokenizes megabytes only to keep their first tokens.
            items = fit_embedding_inputs(self._model, check_embedding_inputs(texts), truncate=truncate)
            if dimensions is not None and dimensions != embedder.embedding_size():
                raise InvalidOptionError(
                    "dimensions", f"model {self.name!r} makes vectors of {embedder.embedding_size()} dimensions only"
                )
        except ModelHostError as exc:
            self.metrics.reject(self.name, exc.code)
            raise
        ticket = EmbeddingTicket(self, items, {"normalize": normalize, "truncate": truncate})
        with self._cond:
            self._check_room()
            self._embeddings.append(ticket)
            self._gauge_waiting()
            self._idle.clear()
            self._cond.notify()
        return ticket

    async def embed(self, texts: Sequence[str], **opts: Any) -> EmbeddingResult:
        """Submit an embedding and await its vectors in one step (the Python API's door)."""
        return await self.submit_embedding(texts, **opts).result()

    def _check_serving(self) -> None:
        """Refuse (and count, as every refusal at admission is counted) a request to a host that is not ready: still
        loading (retry), or failed, closing or closed."""
        if self.state == "ready":
            return
        exc: ModelHostError
        if self.state in ("new", "loading"):
            exc = ModelLoadingError(f"model {self.name!r} is still loading")
        else:
            exc = HostClosedError(f"host {self.name!r} is not serving (state {self.state})")
        self.metrics.reject(self.name, exc.code)
        raise exc

    def _check_room(self) -> None:
        # Under the lock. Embeddings and generations share the bound: both wait for the same thread.
        if self.waiting >= self.max_queue:
            self.metrics.reject(self.name, QueueFullError.code)
            raise QueueFullError(f"queue full: {self.waiting} requests waiting for {self.name!r}")

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        """Submit and iterate in one step; leaving the loop early cancels the request."""
        async with self.submit(request) as stream:
            async for event in stream:
                yield event

    def _validate(self, request: GenerationRequest, *, check_model: bool) -> GenerateOptions:
        """The request's options parsed (InvalidOptionError naming the option), and the request checked against what
        the host knows (and, with `check_model`, what only the model knows it cannot honour: a JSON Schema ...)."""
        options = GenerateOptions.parse(request.options)
        checker = as_capability(self._model, OptionChecker) if check_model and self._model is not None else None
        if checker is not None:
            # The model's own check, of the options parsed above: for a request its engine cannot prepare ahead (a
            # PreparingEngine checks them in `prepare`). Either way the request's options are parsed once.
            checker.check_options(options)
        if "cancel" in request.options:
            raise InvalidInputError("the host owns cancellation; cancel a request by closing its stream")
        if request.adapter is not None and request.adapter not in self.adapters:
            raise ModelNotFoundError(f"model {self.name!r} holds no adapter {request.adapter!r}")
        for message in request.messages:
            if message.role not in ROLES:
                raise InvalidInputError(f"unknown role {message.role!r}; expected one of {', '.join(sorted(ROLES))}")
        if has_images(request.messages) and not self._accepts_images:
            raise UnsupportedAttachmentError(f"model {self.name!r} does not accept image input")
        # Over the context by its bytes alone: refused here, so the model thread never tokenizes it.
        check_prompt_size(self._model, None if request.messages else (request.prompt or ""), request.messages)
        return options

    def withdraw(self, stream: RequestStream) -> None:
        """Take a cancelled request out of the queue, ending it "cancelled" (nothing when it runs or has ended)."""
        with self._cond:
            try:
                self._waiting.remove(stream)
            except ValueError:
                return  # already running or finished: the cancel token does the rest
            self._gauge_waiting()
            if self._quiet():
                self._idle.set()
        self._finish(stream, Done("cancelled", 0, 0, GenerateMetrics(finish_reason="cancelled")), started=False)

    def withdraw_embedding(self, ticket: EmbeddingTicket) -> None:
        """Take a cancelled embedding out of the queue (nothing when it runs or has ended)."""
        with self._cond:
            try:
                self._embeddings.remove(ticket)
            except ValueError:
                return  # already running (it finishes) or finished
            self._gauge_waiting()
            if self._quiet():
                self._idle.set()
        self.metrics.embedding_requests.labels(self.name, "cancelled").inc()
        ticket.resolve(cancelled_embedding())

    def cancel_all(self) -> None:
        """Cancel every queued and running request now (a second stop signal: do not wait for the grace period)."""
        with self._cond:
            pending = list(self._waiting)
            running = list(self._running)
            embeddings = list(self._embeddings)
        for ticket in embeddings:
            ticket.cancel()
        for stream in pending:
            stream.cancel()
        for stream in running:
            stream.cancel_event.set()

    # -- adapters: work between two steps --------------------------------------------------------------------------
    @property
    def serves_adapters(self) -> bool:
        """True when the loaded model's engine can hold LoRA adapters by name (AdapterEngine)."""
        return isinstance(self._engine, AdapterEngine)

    async def load_adapter(self, name: str, path: str) -> None:
        """Load the adapter at `path` into the running engine under `name`, on the model thread between two steps
        (so the event loop never waits on it, and no step runs beside it); the engine's error when it refuses."""
        await self._between(lambda engine: self.load_adapter_now(engine, name, path))

    def load_adapter_now(self, engine: Engine, name: str, path: str) -> None:
        """`load_adapter` on the model thread itself (the model set's `on_load` calls it at load)."""
        if not isinstance(engine, AdapterEngine):
            raise InvalidInputError(f"model {self.name!r} cannot serve LoRA adapters by name (its engine has none)")
        engine.load_adapter(name, path)
        self.adapters = self.adapters | {name}

    async def unload_adapter(self, name: str) -> None:
        """Free the adapter `name` on the model thread; the requests waiting for it are refused from then on (the
        model set drains the running ones first: `adapter_requests`)."""

        def unload(engine: Engine) -> None:
            self.adapters = self.adapters - {name}
            if isinstance(engine, AdapterEngine):
                engine.unload_adapter(name)

        await self._between(unload)

    def adapter_requests(self, name: str) -> list[RequestStream]:
        """The requests queued for or running with the adapter `name` now."""
        with self._cond:
            return [s for s in (*self._waiting, *self._running) if s.request.adapter == name]

    async def _between(self, work: Callable[[Engine], Any]) -> Any:
        if self.state != "ready":
            raise HostClosedError(f"host {self.name!r} is not serving (state {self.state})")
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._cond:
            self._chores.append((work, future))
            self._cond.notify()
        return await asyncio.wrap_future(future)


def _engine_request(request: GenerationRequest, options: GenerateOptions) -> EngineRequest:
    if request.messages:
        return EngineRequest(messages=tuple(request.messages), options=options, adapter=request.adapter)
    return EngineRequest(prompt=request.prompt or "", options=options, adapter=request.adapter)

"""The host: holds one loaded model and the one scheduler every door uses.

Why one thread per model: llama.cpp runs its compute on an OpenMP thread group per calling thread, so calling a
model from a new thread per request oversubscribes the cores and speed collapses (measured 80 -> 7-36 tokens/s).
The model is loaded and driven on one long-lived thread; doors are asyncio and never block the event loop.

Admission: the waiting queue is bounded (`max_queue`); beyond it `submit` raises QueueFullError at once, so a door
answers 429/queue_full instead of letting latency grow without bound. A request is cancelled, wherever it is, when
its consumer calls `cancel()` or closes its stream: a queued request leaves the queue and frees its slot; a running
one stops within one token (the contract's `cancel=` token), and the model takes the next request.

One loop: the model thread drives an Engine (inference/engine.py): the model's own (EngineModel), else one slot
over the model's own streams (inference/adapters.py). Each
iteration runs at most one waiting embedding, applies cancellations (releases the handles of cancelled requests:
the one point where cancellation happens), admits waiting requests into free slots, steps the engine once and
hands each request its tokens. So a request joins a running batch without waiting for the others to finish, a
cancelled one frees its slot within one step, and a one-slot model is served by the very same loop. Every door
submits here, so requests from the socket, HTTP and the job worker share the same slots.

Embeddings: `submit_embedding` queues an EmbeddingTicket for a model with the EmbeddingModel capability (a model
without it is refused at once, EmbeddingUnsupportedError). The model thread runs it on its own thread (the only one
that may touch the model), and never behind a generation: between two steps of the engine (two tokens of a one-slot
model), or next when the model is idle. The capability promises that `embed` leaves a
suspended generation and the engine exactly as they were. An embedding is a job of bounded steps
(`start_embedding`: a ChunkedEmbedding model's own, else one `embed` call) and at most one step runs per gap, so a
long embedding or a stream of them slows a running generation by one bounded step per token rather than stopping
it. Tickets share the
queue bound with generation requests (`max_queue` counts both) and are counted in the metrics' waiting/running
gauges and in the `modelhost_embedding_*` series.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

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
from modelhost.host.events import Admission, Delta, Done, Event, Failed, GenerationRequest, Started
from modelhost.host.metrics import HostMetrics
from modelhost.inference import accepts_images
from modelhost.inference.adapters import engine_of
from modelhost.inference.capabilities import (
    EmbeddingJob,
    EmbeddingModel,
    OptionChecker,
    as_capability,
    check_embedding_inputs,
    check_prompt_size,
    fit_embedding_inputs,
    start_embedding,
)
from modelhost.inference.engine import (
    AdapterEngine,
    Admitted,
    CacheReportingEngine,
    Engine,
    EngineRequest,
    Handle,
    PreparingEngine,
)
from modelhost.inference.model import TextModel
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import ROLES, EmbeddingResult, GenerateMetrics, Token, has_images

log = logging.getLogger(__name__)

#: Default bound on requests waiting for the model. A small CPU model serves a few requests a second; 64 waiting
#: is already a minute of backlog, past which a caller is better told "busy" than kept waiting.
DEFAULT_MAX_QUEUE = 64

HostState = Literal["new", "loading", "ready", "failed", "closing", "closed"]

#: Work for the model thread between two steps (an adapter loaded or freed), and where its result goes.
_Chore = tuple[Callable[[Engine], Any], "concurrent.futures.Future[Any]"]


class RequestStream:
    """The events of one submitted request, as an async iterator. Close it (or `cancel()`) to cancel the request.

    Use as `async with host.submit(req) as stream: async for event in stream: ...`; leaving the block early
    cancels the request wherever it is.
    """

    def __init__(self, host: Host, request: GenerationRequest, engine_request: EngineRequest) -> None:
        self.request = request
        #: What the engine admits: the checked options (and the prompt's tokens, when `precheck` prepared them off
        #: the model thread), shared with the other choices of the request but for the seed.
        self.engine_request = engine_request
        self.cancel_event = threading.Event()
        self.submitted_at = time.perf_counter()
        self._host = host
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._finished = False

    # -- called on the model thread --------------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)
        except RuntimeError:
            # The consumer's loop is closed: nobody is listening; make the model stop working for them.
            self.cancel_event.set()

    # -- consumer side ---------------------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Cancel the request: dropped from the queue if waiting, stopped within one token if running."""
        if not self.cancel_event.is_set():
            self.cancel_event.set()
            self._host._dequeue(self)

    async def aclose(self) -> None:
        """Cancel unless already finished."""
        if not self._finished:
            self.cancel()

    def __aiter__(self) -> RequestStream:
        return self

    async def __anext__(self) -> Event:
        # A plain __anext__ rather than an async generator: a consumer that stops right after the terminal event
        # leaves no suspended generator behind for the loop to finalise (and warn about) later.
        if self._finished:
            raise StopAsyncIteration
        event = await self._events.get()
        if isinstance(event, (Done, Failed)):
            self._finished = True
        return event

    async def __aenter__(self) -> RequestStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class EmbeddingTicket:
    """One embedding request queued for the model. `await result()` for the EmbeddingResult (or the model's
    ModelHostError); `cancel()` drops it if the model has not started it, and stops a started one before its next
    step. Made by `Host.submit_embedding` on the event loop that awaits it."""

    def __init__(self, host: Host, texts: list[str], options: dict[str, Any]) -> None:
        self.texts = texts
        self.options = options
        self.cancel_event = threading.Event()
        self.submitted_at = time.perf_counter()
        self.job: EmbeddingJob | None = None  # its steps, once the model thread starts it
        self._host = host
        self._loop = asyncio.get_running_loop()
        self._future: asyncio.Future[EmbeddingResult] = self._loop.create_future()

    # -- called on the model thread --------------------------------------------------------------------------------
    def _resolve(self, result: EmbeddingResult | BaseException) -> None:
        def settle() -> None:
            if self._future.done():
                return  # the awaiting task was cancelled: nobody wants the answer
            if isinstance(result, BaseException):
                self._future.set_exception(result)
            else:
                self._future.set_result(result)

        try:
            self._loop.call_soon_threadsafe(settle)
        except RuntimeError:
            self.cancel_event.set()  # the consumer's loop is closed: nobody is listening

    # -- consumer side ---------------------------------------------------------------------------------------------
    async def result(self) -> EmbeddingResult:
        """The vectors, once the model thread has computed them. Cancelling the awaiting task cancels the ticket."""
        try:
            return await self._future
        except asyncio.CancelledError:
            self.cancel()
            raise

    def cancel(self) -> None:
        """Drop the ticket from the queue if it is still waiting; its result is then never computed, and `result()`
        raises ModelHostError with code "cancelled"."""
        if not self.cancel_event.is_set():
            self.cancel_event.set()
            self._host._dequeue_embedding(self)


@dataclass(eq=False, slots=True)
class _Progress:
    """Tokens streamed so far for one running request, for its Delta counts and latency metrics."""

    tokens: int = 0
    last: float = 0.0


class Host:
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
        self._embeddings: collections.deque[EmbeddingTicket] = collections.deque()
        self._embedding: EmbeddingTicket | None = None  # the one the model thread computes now
        self._engine: Engine | None = None  # set on the model thread at load
        self.slots = 1  # requests decoded at once; set at load from the model's engine
        self._on_load = on_load
        # Work the model thread does between two steps (adapters loaded and freed), oldest first.
        self._chores: collections.deque[_Chore] = collections.deque()
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

    @property
    def waiting(self) -> int:
        """Requests queued for the model (generations and embeddings)."""
        return len(self._waiting) + len(self._embeddings)

    @property
    def running(self) -> int:
        """Requests the model is working on (up to `slots` when the model batches, plus an embedding)."""
        return len(self._running) + (self._embedding is not None)

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
        with self._cond:
            self._check_room()
            self._waiting.append(stream)
            self._gauge_waiting()
            self._idle.clear()
            self._cond.notify()
        if choice == 0:
            self.metrics.request_params_n.labels(self.name).observe(admission.n)
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

    def _gauge_waiting(self) -> None:
        self.metrics.requests_waiting.labels(self.name).set(self.waiting)

    def _gauge_running(self) -> None:
        self.metrics.requests_running.labels(self.name).set(self.running)

    def _quiet(self) -> bool:
        """Nothing queued and nothing running (under the lock): the host is idle."""
        return not self._waiting and not self._running and not self._embeddings and self._embedding is None

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
            # The model's own check takes keywords, so it parses them again: only for a request its engine cannot
            # prepare ahead (a PreparingEngine checks the parsed options in `prepare`, the one parse).
            checker.check_options(**request.options)
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

    def _dequeue(self, stream: RequestStream) -> None:
        with self._cond:
            try:
                self._waiting.remove(stream)
            except ValueError:
                return  # already running or finished: the cancel token does the rest
            self._gauge_waiting()
            if self._quiet():
                self._idle.set()
        self._finish(stream, Done("cancelled", 0, 0, GenerateMetrics(finish_reason="cancelled")), started=False)

    def _dequeue_embedding(self, ticket: EmbeddingTicket) -> None:
        with self._cond:
            try:
                self._embeddings.remove(ticket)
            except ValueError:
                return  # already running (it finishes) or finished
            self._gauge_waiting()
            if self._quiet():
                self._idle.set()
        self.metrics.embedding_requests.labels(self.name, "cancelled").inc()
        ticket._resolve(_cancelled_embedding())

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

    # -- the model thread ------------------------------------------------------------------------------------------
    def _main(self) -> None:
        engine: Engine | None = None
        try:
            self._model = self._loader()
            self._accepts_images = accepts_images(self._model)
            engine = engine_of(self._model)
            self._engine = engine
            self.slots = engine.slots
            self.metrics.batch_slots.labels(self.name).set(engine.slots)
            reported = str(isinstance(engine, CacheReportingEngine)).lower()
            self.metrics.cache_config_info.labels(self.name, str(engine.slots), reported).set(1)
            if self._on_load is not None:
                self._on_load(self, engine)
            self.state = "ready"  # aclose() waits for the load to end, so nothing else can have moved the state
        except BaseException as exc:
            self.load_error = exc
            self.state = "failed"
            self._ready.set()
            if engine is None and self._model is not None:
                self._close_model()
            return
        self._ready.set()
        try:
            self._run(engine)
        except BaseException as exc:
            # Only this thread can run the model. If it dies (an engine raising SystemExit or KeyboardInterrupt,
            # which the loop deliberately does not swallow), say so: admitting requests nobody will ever take would
            # leave every caller waiting forever behind a host that still claims to be ready.
            # Re-raising would only end this thread, which ends here anyway; the log line carries the cause.
            log.critical("the model thread of %r stopped: %r", self.name, exc, exc_info=True)
            self._fail_all(f"the model thread stopped: {exc!r}")
        finally:
            self._refuse_chores()
            try:
                engine.close()
            except Exception:
                log.exception("closing the engine of %r failed", self.name)
            self._close_model()

    def _close_model(self) -> None:
        model, self._model = self._model, None
        if model is None:
            return
        try:
            model.close()
        except Exception:
            log.exception("closing model %r failed", self.name)

    def _fail_all(self, message: str) -> None:
        with self._cond:
            self.state = "failed"
            doomed = self._running + list(self._waiting)
            tickets = list(self._embeddings) + ([self._embedding] if self._embedding is not None else [])
            self._waiting.clear()
            self._embeddings.clear()
            self._running = []
            self._embedding = None
            self.metrics.requests_waiting.labels(self.name).set(0)
            self.metrics.requests_running.labels(self.name).set(0)
            self._idle.set()
        for stream in doomed:
            self.metrics.requests_failed.labels(self.name, "internal").inc()
            stream._emit(Failed("internal", message))
        for ticket in tickets:
            self.metrics.embedding_requests.labels(self.name, "error").inc()
            self.metrics.requests_failed.labels(self.name, "internal").inc()
            ticket._resolve(ModelHostError(message))

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

    def _run_chores(self, engine: Engine) -> None:
        while self._chores:  # a racy peek, as in _embed_between: the common case takes no lock
            with self._cond:
                if not self._chores:
                    return
                work, future = self._chores.popleft()
            try:
                future.set_result(work(engine))
            except Exception as exc:
                future.set_exception(exc)

    def _refuse_chores(self) -> None:
        with self._cond:
            chores, self._chores = list(self._chores), collections.deque()
        for _, future in chores:
            future.set_exception(HostClosedError(f"host {self.name!r} closed"))

    # -- embeddings (the model thread) -----------------------------------------------------------------------------
    def _pop_embedding(self) -> EmbeddingTicket:
        # Under the lock, with at least one ticket queued.
        ticket = self._embeddings.popleft()
        self._embedding = ticket
        self._gauge_waiting()
        self._gauge_running()
        return ticket

    def _embed_between(self) -> None:
        """Run one step of the embedding in hand, else start the next queued one, if any: called between two tokens
        or two batch steps."""
        ticket = self._embedding  # set and cleared on this thread only
        if ticket is None:
            if not self._embeddings:  # a racy peek, re-checked under the lock: the common case takes no lock
                return
            with self._cond:
                if not self._embeddings:
                    return
                ticket = self._pop_embedding()
        self._embed(ticket)

    def _embed(self, ticket: EmbeddingTicket) -> None:
        """One step of `ticket` on this (the model's) thread; after its last, hand its result to the awaiting loop."""
        name = self.name
        answer: EmbeddingResult | BaseException | None
        if ticket.cancel_event.is_set():
            outcome, answer = "cancelled", _cancelled_embedding()
        else:
            try:
                if ticket.job is None:
                    ticket.job = start_embedding(self._model, ticket.texts, **ticket.options)
                answer = ticket.job.step()
                outcome = "ok"
            except ModelHostError as exc:
                outcome, answer = "error", exc
            except Exception as exc:
                log.exception("an embedding failed in model %r", name)
                outcome, answer = "error", ModelHostError(f"{type(exc).__name__}: {exc}")
        if answer is None:
            return  # more steps to go: the next gap runs the next one
        if ticket.job is not None:
            ticket.job.close()
        # Leave "running" before the answer goes out, so a caller holding it never sees the embedding still running.
        with self._cond:
            self._embedding = None
            self._gauge_running()
            if self._quiet():
                self._idle.set()
        if isinstance(answer, EmbeddingResult):
            self.metrics.embedding_inputs.labels(name).inc(len(ticket.texts))
            self.metrics.embedding_tokens.labels(name).inc(answer.prompt_tokens)
        self.metrics.embedding_requests.labels(name, outcome).inc()
        if isinstance(answer, ModelHostError) and outcome == "error":
            self.metrics.requests_failed.labels(name, answer.code).inc()
        self.metrics.embedding_latency.labels(name).observe(time.perf_counter() - ticket.submitted_at)
        ticket._resolve(answer)

    def _stream_token(self, stream: RequestStream, progress: _Progress, token: Token) -> None:
        now = time.perf_counter()
        if progress.tokens == 0:
            self.metrics.time_to_first_token.labels(self.name).observe(now - stream.submitted_at)
        else:
            self.metrics.inter_token_latency.labels(self.name).observe(now - progress.last)
        progress.last = now
        progress.tokens += 1
        if token.text or token.logprob is not None:
            logprobs = () if token.logprob is None else (token.logprob,)
            stream._emit(Delta(token.text, progress.tokens, logprobs, token.channel))

    def _done(self, stream: RequestStream, m: GenerateMetrics) -> None:
        reason = "cancelled" if stream.cancel_event.is_set() else (m.finish_reason or "stop")
        asked = stream.request.options.get("max_tokens")
        self.metrics.finished(self.name, m, asked if isinstance(asked, int) else None)
        self._finish(stream, Done(reason, m.prompt_tokens, m.generated_tokens, m))

    # -- the one loop (the model thread) ---------------------------------------------------------------------------
    def _run(self, engine: Engine) -> None:
        """Take waiting work, admit, step, emit, release: until the host closes and nothing is left to do.

        Every model is driven this way, whatever its engine (a batching one, or one slot over a model's own
        stream): between two steps an embedding runs, cancelled requests leave, and waiting ones join.
        """
        live: dict[Handle, tuple[RequestStream, _Progress]] = {}
        name = self.name
        # The engine's KV-cache report, looked up once (a Protocol check per step would cost more than the report).
        usage = engine.cache_usage if isinstance(engine, CacheReportingEngine) else None
        self._gauge_cache(usage)  # shown from the start, at its idle value
        while True:
            self._embed_between()  # between two steps: an embedding never waits for a generation to finish
            self._run_chores(engine)  # adapters are loaded and freed here, never under a step
            # Cancellation is applied here, once per iteration: cancelled requests leave first, so their slots are
            # free for the waiting ones in this same round.
            for handle, (stream, _) in list(live.items()):
                if stream.cancel_event.is_set():
                    del live[handle]
                    m = engine.release(handle)
                    self._done(stream, m or GenerateMetrics(finish_reason="cancelled"))
            taken = self._take(engine, live)
            if taken is None:
                return
            for stream in taken:
                self._admit(engine, stream, live)
            self.metrics.batch_slots_used.labels(name).set(len(live))
            self._gauge_adapters(live)
            if not live:
                self._gauge_cache(usage)  # the last request may have just been cancelled
                continue
            try:
                result = engine.step()
            except Exception as exc:
                # An engine that raises (rather than failing its requests) has lost track of them: fail them all.
                log.exception("a step of model %r failed", name)
                for handle, (stream, progress) in list(live.items()):
                    del live[handle]
                    engine.release(handle)
                    self._finish(stream, Failed("internal", f"{type(exc).__name__}: {exc}", progress.tokens))
                continue
            if result.batch_tokens:
                self.metrics.batch_tokens.labels(name).observe(result.batch_tokens)
                self.metrics.iteration_tokens.labels(name).observe(result.batch_tokens)
                self.metrics.batch_sequences.labels(name).observe(result.sampled)
            for handle, out in result.outputs.items():
                entry = live.get(handle)
                if entry is None:
                    continue
                stream, progress = entry
                for token in out.tokens:
                    self._stream_token(stream, progress, token)
                if out.finish_reason is None:
                    continue
                del live[handle]
                if out.error is not None:
                    error = out.error
                    if isinstance(error, ModelHostError):
                        failed = Failed(error.code, str(error), progress.tokens, getattr(error, "option", None))
                    else:
                        log.error("request %r failed in model %r: %r", stream.request.request_id, name, error)
                        failed = Failed("internal", f"{type(error).__name__}: {error}", progress.tokens)
                    self._finish(stream, failed)
                else:
                    self._done(stream, out.metrics or GenerateMetrics(finish_reason=out.finish_reason))
            self._gauge_cache(usage)  # after the step: requests it finished hold no cells any more

    def _gauge_adapters(self, live: dict[Handle, tuple[RequestStream, _Progress]]) -> None:
        """lora_requests_info: the adapters of the running and waiting requests (only when adapters are served)."""
        if not self.adapters:
            return
        running = {s.request.adapter for s, _ in live.values() if s.request.adapter}
        with self._cond:
            waiting = {s.request.adapter for s in self._waiting if s.request.adapter}
        self.metrics.lora_requests(self.name, ",".join(sorted(running)), ",".join(sorted(waiting)), len(self.adapters))

    def _gauge_cache(self, usage: Callable[[], float | None] | None) -> None:
        """The KV-cache gauge (once per loop iteration) from the engine's report; never shown without one."""
        value = usage() if usage is not None else None
        if value is not None:
            self.metrics.kv_cache_usage.labels(self.name).set(value)

    def _take(self, engine: Engine, live: dict[Handle, Any]) -> list[RequestStream] | None:
        """Waiting requests for the free slots; blocks while there is nothing at all to do; None once closed."""
        with self._cond:
            while not self._waiting and not live and not self._embeddings and not self._chores and not self._embedding:
                if self.state in ("closing", "closed"):
                    return None
                # Idle: no slot holds a request. Set here, where every path to idle passes (the last request
                # finishing in a step, failing, cancelled), or the gauge kept its last busy value while idle.
                self.metrics.batch_slots_used.labels(self.name).set(0)
                if self.adapters:  # no adapter runs or waits now (the last step's names would otherwise stay)
                    self.metrics.lora_requests(self.name, "", "", len(self.adapters))
                self._idle.set()
                self._cond.wait()
            taken: list[RequestStream] = []
            free = engine.free_slots()
            while self._waiting and len(taken) < free:
                taken.append(self._waiting.popleft())
            self._running.extend(taken)
            self._gauge_waiting()
            self._gauge_running()
        return taken

    def _admit(
        self, engine: Engine, stream: RequestStream, live: dict[Handle, tuple[RequestStream, _Progress]]
    ) -> None:
        queued = time.perf_counter() - stream.submitted_at
        self.metrics.queue_time.labels(self.name).observe(queued)
        outcome = self._engine_admit(engine, stream)
        # Started goes out once the engine has counted the prompt, so the doors can show it from their first chunk
        # (vLLM's continuous usage); a request refused here still gets its Started first, as every request does.
        stream._emit(Started(queued, outcome.prompt_tokens if isinstance(outcome, Admitted) else 0))
        if isinstance(outcome, Admitted):
            live[outcome.handle] = (stream, _Progress())
        else:
            self._finish(stream, outcome)

    def _engine_admit(self, engine: Engine, stream: RequestStream) -> Admitted | Done | Failed:
        """The engine's admission of a request, or how the request ends instead (cancelled while it waited, or
        refused by the engine)."""
        if stream.cancel_event.is_set():
            return Done("cancelled", 0, 0, GenerateMetrics(finish_reason="cancelled"))
        request = stream.request
        # The host's cancel token goes in too: an engine whose step is long (a whole OCR page) can stop inside it.
        prepared = stream.engine_request
        try:
            return engine.admit(replace(prepared, options=replace(prepared.options, cancel=stream.cancel_event)))
        except ModelHostError as exc:
            return Failed(exc.code, str(exc), option=getattr(exc, "option", None))
        except Exception as exc:
            log.exception("request %r could not be admitted by model %r", request.request_id, self.name)
            return Failed("internal", f"{type(exc).__name__}: {exc}")

    def _finish(self, stream: RequestStream, event: Done | Failed, *, started: bool = True) -> None:
        name = self.name
        if started:
            # Leave "running" before counting the request finished, so no scrape ever sees it in both.
            with self._cond:
                if stream in self._running:
                    self._running.remove(stream)
                self._gauge_running()
                if self._quiet():
                    self._idle.set()
            self.metrics.e2e_latency.labels(name).observe(time.perf_counter() - stream.submitted_at)
        if isinstance(event, Done):
            self.metrics.requests_finished.labels(name, event.finish_reason).inc()
        else:
            self.metrics.requests_failed.labels(name, event.code).inc()
        stream._emit(event)


def _engine_request(request: GenerationRequest, options: GenerateOptions) -> EngineRequest:
    if request.messages:
        return EngineRequest(messages=tuple(request.messages), options=options, adapter=request.adapter)
    return EngineRequest(prompt=request.prompt or "", options=options, adapter=request.adapter)


def _cancelled_embedding() -> ModelHostError:
    return ModelHostError("the embedding was cancelled before the model computed it", code="cancelled")

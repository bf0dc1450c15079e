"""A model set: the models one process serves, each in its own Host (thread, queue, scheduler), found by name.

Ollama's shape: several models side by side, each loaded at start or at its first request (`lazy`), unloaded after
`keep_alive` idle seconds, and kept within a memory budget (`max_memory`), which host/budget.py keeps: to make room
for a model, the least recently used *idle* models are unloaded, a model that cannot fit for busy ones claims the
room (fair eviction), and a model that can never fit is refused when the set is built. What a set is built from
(ModelSpec, the sizes) is host/spec.py; the keep-alive sweep's timing is host/keepalive.py; the set's own metrics
(resident bytes, loads, unloads) are host/set_metrics.py.

A Host is one-shot (loaded once, closed once), so unloading closes it and the next load builds a fresh one: the
ServedModel is the stable face the doors hold, and its metrics (one HostMetrics for the whole set, labelled by model)
outlive every load. Everything here runs on the event loop and decides synchronously: a door looks a model up and
submits with no await between, so an unload can never close a host between the two.

A model may be pinned: loaded at start whatever `lazy` says, never unloaded (nor drained for another). The socket
door's model is pinned, because on the inferd wire a bound socket says "ready" and a request has no way to wait for a
load.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import Any, Literal, Protocol

from modelhost.errors import HostClosedError, ModelHostError, ModelLoadingError, ModelNotFoundError
from modelhost.host.budget import (
    FRESH_LOAD_HOLD_SECONDS,
    RETRY_AFTER_MAX,
    RETRY_AFTER_MIN,
    Budget,
    MemoryBudgetError,
    MemoryReleasingError,
)
from modelhost.host.defaults import RequestDefaults
from modelhost.host.events import Admission, GenerationRequest
from modelhost.host.keepalive import MAX_SWEEP_SECONDS, sweep_every, sweep_interval
from modelhost.host.metrics import HostMetrics
from modelhost.host.scheduler import DEFAULT_MAX_QUEUE, Host
from modelhost.host.set_metrics import ModelSetCollector
from modelhost.host.spec import ModelSpec, parse_size, resident_size
from modelhost.host.streams import EmbeddingTicket, RequestStream
from modelhost.inference.engine import Engine
from modelhost.inference.model import TextModel

log = logging.getLogger(__name__)

#: Names that moved to host/budget.py, host/keepalive.py and host/spec.py when this module was split (issue 37 item
#: 4): the doors, the jobs and the tests import them from here as before.
__all__ = [
    "FRESH_LOAD_HOLD_SECONDS",
    "MAX_SWEEP_SECONDS",
    "RETRY_AFTER_MAX",
    "RETRY_AFTER_MIN",
    "MemoryBudgetError",
    "MemoryReleasingError",
    "ModelSpec",
    "ModelState",
    "Models",
    "RequestDefaults",
    "Servable",
    "ServedModel",
    "as_models",
    "parse_size",
    "resident_size",
]

#: A served model's state: a Host's, or "unloaded" (not resident; a request loads it).
ModelState = Literal["unloaded", "new", "loading", "ready", "failed", "closing", "closed"]


class Servable(Protocol):
    """What a door needs of one model: a Host, or a ServedModel of a set."""

    @property
    def name(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def ready(self) -> bool: ...

    @property
    def accepts_images(self) -> bool: ...

    @property
    def metrics(self) -> HostMetrics: ...

    @property
    def slots(self) -> int: ...

    async def precheck(self, request: GenerationRequest, n: int = 1) -> Admission: ...

    def submit(self, request: GenerationRequest | Admission, choice: int = 0) -> RequestStream: ...

    def submit_embedding(
        self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False
    ) -> EmbeddingTicket: ...


class ServedModel:
    """One model of a set: the stable face the doors hold while its Host comes and goes (see the module doc)."""

    def __init__(self, spec: ModelSpec, models: Models) -> None:
        self.spec = spec
        self.path = spec.path
        self.size = spec.size
        self.pinned = spec.pinned
        self._host: Host | None = None
        #: The LoRA adapters served by name over this model (host/adapters.py adds and removes them): each loads into
        #: this model's engine whenever it loads, so they share its weights and slots.
        self.adapters: dict[str, ServedModel] = {}
        self.last_used = time.monotonic()
        self.loads = 0
        self.unloads = 0
        #: Seconds to stay loaded after use that the last request asked for (Ollama's per-request keep_alive; inf:
        #: for good); None: the set's own keep_alive. Cleared when the model unloads.
        self.hold: float | None = None
        self._load_task: asyncio.Task[None] | None = None  # the load running now, for `wait_loaded`
        self._waiters = 0  # requests in `wait_loaded` or `in_use`: they count as use, so no sweep unloads under them
        #: The model waiting for this one's memory: set, this model finishes what it holds, takes no new request,
        #: and is unloaded once its requests end (fair eviction, see the module doc).
        self.draining_for: str | None = None
        #: When a load for a request began, until a request uses the model (FRESH_LOAD_HOLD_SECONDS).
        self.fresh_since: float | None = None
        self._models = models
        self._name = spec.name

    @property
    def name(self) -> str:
        return self._name

    @property
    def host(self) -> Host | None:
        """The model's Host while it is loaded (or loading, or closing); None while unloaded."""
        return self._host

    @host.setter
    def host(self, host: Host | None) -> None:
        self._host = host

    @property
    def loaded(self) -> bool:
        """Whether the model holds a Host (loading, loaded or closing): its size counts against the budget."""
        return self._host is not None

    @property
    def parent(self) -> ServedModel | None:
        """The model an adapter runs on; None for a model (host/adapters.py's ServedAdapter has one)."""
        return None

    def load_adapters(self, host: Host, engine: Engine) -> None:
        """Load this model's adapters into its engine (on the model thread, at load: Host's `on_load`). One the
        engine refuses does not fail the model's load (an adapter a client loaded while the model was unloaded must
        not stop the model from ever loading again): its error is kept in `host.adapter_errors`, and the set drops
        the adapter once the load ends (`Models._settle_adapters`)."""
        for adapter in list(self.adapters.values()):  # a snapshot: the event loop may register one meanwhile
            assert adapter.path is not None  # an adapter is always served from its files
            try:
                host.load_adapter_now(engine, adapter.name, adapter.path)
            except ModelHostError as exc:
                detail = getattr(exc, "detail", str(exc))
                host.adapter_errors[adapter.name] = f"adapter {adapter.name!r} cannot go on {self.name!r}: {detail}"

    @property
    def state(self) -> ModelState:
        return "unloaded" if self.host is None else self.host.state

    @property
    def ready(self) -> bool:
        return self.host is not None and self.host.ready

    @property
    def accepts_images(self) -> bool:
        return self.host is not None and self.host.accepts_images

    @property
    def metrics(self) -> HostMetrics:
        return self._models.metrics

    @property
    def models(self) -> Models:
        """The set this model belongs to."""
        return self._models

    @property
    def slots(self) -> int:
        """Requests the model decodes at once (1 until it is loaded)."""
        return self.host.slots if self.host is not None else 1

    @property
    def model(self) -> TextModel:
        """The loaded model (for info; drive it only through `submit`)."""
        if self.host is None:
            raise HostClosedError(f"model {self.name!r} is not loaded")
        return self.host.model

    @property
    def busy(self) -> bool:
        """True while requests wait for (or for the load of) or run on the model."""
        return self._waiters > 0 or self.in_flight > 0

    @property
    def in_flight(self) -> int:
        """Requests queued on or running on the loaded model (0 when unloaded)."""
        return 0 if self.host is None else self.host.waiting + self.host.running

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        """Count as use of the model while the caller waits for its load and submits: neither the keep-alive sweep
        nor the memory budget unloads it meanwhile. A door holds it from before its wait until after its submit,
        since the wait may end some event-loop turns before the caller runs again (the window in which a sweep once
        unloaded a model a request had just loaded)."""
        self._waiters += 1
        try:
            yield
        finally:
            self._waiters -= 1

    def _used(self) -> None:
        self.last_used = time.monotonic()
        self.fresh_since = None

    async def wait_loaded(self) -> None:
        """Start loading the model if it is unloaded and wait until its load ends: ready, or failed (the caller looks
        at `ready`). While a caller waits the model counts as busy, so neither the keep-alive sweep nor the memory
        budget unloads it during the load; a caller that submits afterwards holds `in_use` around both. A model
        loaded counts as used. MemoryBudgetError when busy models hold the room it needs (nothing waited for); room
        held only by models still closing is waited for."""
        with self.in_use():
            while not self.ready:
                if self.host is None:
                    try:
                        self._models.load_soon(self)
                    except MemoryReleasingError:
                        # The room is on its way back (a keep_alive 0 unload still closing): wait for it, not 503.
                        await self._models.budget.released()
                        continue
                task = self._load_task
                if task is None or self.host is None or self.host.state not in ("new", "loading"):
                    return  # failed or closing: nothing more to wait for
                await asyncio.shield(task)
            self._used()

    def prepare(self, request: GenerationRequest) -> GenerationRequest:
        """`request` with this model's defaults where it says nothing: a created model's SYSTEM, PARAMETERs and
        TEMPLATE (host/defaults.py), whichever door it came through; other models' requests pass as they are."""
        defaults = self.spec.defaults
        return request if defaults is None else defaults.apply(request)

    async def precheck(self, request: GenerationRequest, n: int = 1) -> Admission:
        """Host.precheck on the loaded model (the request unchecked when unloaded: `submit` answers that), after its
        defaults (`prepare`). Both run on a worker thread, not the event loop: a created model's TEMPLATE renders the
        whole chat (up to host/gotemplate's bounds) and the host's check tokenizes it. The model counts as busy
        meanwhile, as in `wait_loaded`, so no sweep unloads it between the check and the submit."""
        defaults = self.spec.defaults
        if defaults is not None and defaults.renders(request):
            request = await asyncio.to_thread(self.prepare, request)
        else:
            request = self.prepare(request)  # a system prompt or options only: nothing to render
        host = self.host
        if host is None:
            return Admission(request, n=n)
        with self.in_use():
            return await host.precheck(request, n)

    def _admit(self) -> Host:
        """The host to queue a request on; ModelLoadingError (retry) when unloaded (its load starts) or making room
        for another model."""
        host = self.host
        if host is None:
            self._models.load_soon(self)
            self.metrics.reject(self.name, ModelLoadingError.code)
            raise ModelLoadingError(f"model {self.name!r} is loading; retry shortly")
        if self.draining_for is not None:
            wait = self._models.budget.drain_seconds([self])
            self.metrics.reject(self.name, MemoryBudgetError.code)
            raise MemoryBudgetError(
                f"model {self.name!r} is giving its memory to {self.draining_for!r}, which waits for it: it takes no "
                f"new request until it is loaded again; retry in about {wait} s",
                retry_after=wait,
            )
        return host

    def submit(self, request: GenerationRequest | Admission, choice: int = 0) -> RequestStream:
        """Queue a request (choice `choice` of its Admission) on the loaded model (Host.submit); an unloaded model
        starts loading and the request is answered ModelLoadingError (retry), as while any model loads, or while it
        makes room for another. A plain GenerationRequest that a created model's TEMPLATE renders is rendered and
        checked on a worker thread, as `precheck` does it (Host.submit_deferred): its refusals then end the stream."""
        if isinstance(request, GenerationRequest):  # an Admission was prepared at its precheck
            defaults = self.spec.defaults
            if defaults is not None and defaults.renders(request):
                stream = self._admit().submit_deferred(request, self.prepare)
                self._used()
                return stream
            request = self.prepare(request)  # a system prompt or options only: nothing to render
        stream = self._admit().submit(request, choice)
        self._used()
        return stream

    def submit_embedding(self, texts: Sequence[str], **opts: Any) -> EmbeddingTicket:
        """Queue an embedding on the loaded model (Host.submit_embedding); an unloaded model starts loading and the
        request is answered ModelLoadingError (retry), exactly as `submit` does."""
        ticket = self._admit().submit_embedding(texts, **opts)
        self._used()
        return ticket

    def keep_for(self, seconds: float | None) -> None:
        """A request's keep_alive: stay loaded `seconds` after the model is last used (0: unload once idle, inf:
        for good), or the set's policy again for None. The last request's value wins, as in Ollama."""
        self.hold = seconds
        self._models.wake_sweep()

    def keep_alive_seconds(self, default: float | None) -> float | None:
        """How long this model stays loaded after use: the last request's keep_alive, else `default` (None: for
        good). A pinned model always stays."""
        if self.pinned:
            return None
        return self.hold if self.hold is not None else default

    def load(self) -> None:
        """Start loading if unloaded (a job about to need the model); never raises for want of memory."""
        if self.host is None:
            with contextlib.suppress(MemoryBudgetError):
                self._models.load_soon(self)

    def cancel_all(self) -> None:
        if self.host is not None:
            self.host.cancel_all()


class Models:
    """The models one process serves, by name. Build with specs, `await start()`, look up with `route()`/`get()`,
    `await aclose()`; or wrap one existing Host with `Models.of(host)` (the host stays the caller's to start and
    close)."""

    def __init__(
        self,
        specs: Sequence[ModelSpec],
        *,
        max_queue: int = DEFAULT_MAX_QUEUE,
        lazy: bool = False,
        keep_alive: float | None = None,
        max_memory: int | None = None,
        metrics: HostMetrics | None = None,
        sweep_interval: float | None = None,
    ) -> None:
        """`sweep_interval`: seconds between the keep-alive sweep's passes (None: from keep_alive, see
        MAX_SWEEP_SECONDS); 0 sweeps at every turn of the event loop, the harshest schedule, with which a test
        finds any moment at which a model in use looks idle."""
        if not specs:
            raise ValueError("a model set needs at least one model")
        if keep_alive is not None and keep_alive < 0:
            raise ValueError("keep_alive must be at least 0 seconds")
        self.max_queue = max_queue
        self.lazy = lazy
        self.keep_alive = keep_alive
        self.metrics = metrics or HostMetrics(specs[0].name)
        #: The memory budget (host/budget.py): what fits, what to unload for it, who waits for room.
        self.budget = Budget(max_memory, self.metrics)
        if metrics is None:  # a registry of our own: the set's figures go with the hosts' (never twice in one)
            self.metrics.registry.register(ModelSetCollector(self))
        self._models: dict[str, ServedModel] = {}
        self._aliases: dict[str, str] = {}
        #: The LoRA adapters served by name, each over a model of the set (host/adapters.py manages them). Not in
        #: iteration, the memory budget or the keep-alive sweep: an adapter lives and loads with its model.
        self.adapters: dict[str, ServedModel] = {}
        #: Set once the set has served an adapter: from then on a lone model no longer answers every name, so a
        #: request for an adapter (even one since unloaded) never silently gets the base model's answer.
        self.by_name_only = False
        for spec in specs:
            if spec.name in self._models:
                raise ValueError(f"two models are named {spec.name!r}; choose names with NAME=PATH")
            self.budget.check(spec.name, spec.size)
            self._models[spec.name] = ServedModel(spec, self)
            if spec.name != self.metrics.model_name:
                self.metrics.include(spec.name)
        for spec in specs:
            for alias in spec.aliases:
                if alias not in self._models:
                    self._aliases.setdefault(alias, spec.name)
        self.default = specs[0].name
        self.started = False
        self.closed = False
        self._owned = True
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._sweep_now = asyncio.Event()  # set when a request's keep_alive changed: check at once, not in a second
        self._sweep_interval = sweep_interval
        #: How this process turns a model name (and a created model's `adapter=`) into a spec for `add` (its backend,
        #: load options), set by the composition root (`serve`); None: the set takes no new model while it runs (a
        #: door then only lists it).
        self.spec_for: Callable[..., ModelSpec] | None = None
        #: Whether a door may load and unload LoRA adapters while the process runs (vLLM's /v1/load_lora_adapter):
        #: the operator's switch (`serve --allow-adapter-loading`), off by default since a client that may load
        #: adapters makes the server read files at paths it names.
        self.adapter_loading = False

    @classmethod
    def of(cls, host: Host, *, name: str | None = None) -> Models:
        """A one-model set around `host` (started or not, by its owner), served under `name` (default: its own)."""
        models = cls([ModelSpec(name or host.name, lambda: host.model)], metrics=host.metrics)
        served = models._models[name or host.name]
        served.host = host
        served.pinned = True
        models.started = True
        models._owned = False
        return models

    # -- lookup --------------------------------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return list(self._models)

    def __iter__(self) -> Iterator[ServedModel]:
        return iter(self._models.values())

    def __len__(self) -> int:
        return len(self._models)

    def get(self, name: str) -> ServedModel:
        """The model named `name` (or an alias of it); ModelNotFoundError naming the served ones otherwise."""
        found = self._models.get(name) or self._models.get(self._aliases.get(name, "")) or self.adapters.get(name)
        if found is None:
            served = ", ".join([*self._models, *self.adapters])
            raise ModelNotFoundError(f"model {name!r} is not served here; served: {served}")
        return found

    def route(self, name: str | None) -> ServedModel:
        """The model a request names. No name: the first model. One model served: it answers every name (as
        llama.cpp's server does: clients configured with any model name work), unless adapters were ever served
        (`by_name_only`); several: the name decides."""
        if name in self.adapters:
            return self.adapters[name]
        if not name or (len(self._models) == 1 and name not in self._aliases and not self.by_name_only):
            return self._models[self.default]
        return self.get(name)

    def add(self, spec: ModelSpec) -> ServedModel:
        """Serve one more model from now on (one pulled while the process runs), unloaded until a request needs it.
        ValueError when its name is taken or it needs more than the whole memory budget."""
        if spec.name in self._models or spec.name in self._aliases or spec.name in self.adapters:
            raise ValueError(f"a model named {spec.name!r} is already served")
        self.budget.check(spec.name, spec.size)
        served = ServedModel(spec, self)
        self._models[spec.name] = served
        for alias in spec.aliases:
            if alias not in self._models:
                self._aliases.setdefault(alias, spec.name)
        self.metrics.include(spec.name)
        return served

    def remove(self, name: str) -> None:
        """Stop serving a model that is unloaded and idle (before its files are deleted); ValueError saying why
        not: the first model (the default of requests that name none), a pinned one, or one loaded or in use."""
        model = self.get(name)
        if model.name == self.default or model.pinned:
            raise ValueError(f"model {model.name!r} is {'pinned' if model.pinned else 'the first model served'}")
        if model.host is not None or model.busy:
            raise ValueError(f"model {model.name!r} is loaded or in use; unload it first (keep_alive 0)")
        del self._models[model.name]
        self._aliases = {alias: target for alias, target in self._aliases.items() if target != model.name}
        self.budget.claims.pop(model.name, None)

    def states(self) -> dict[str, str]:
        return {m.name: m.state for m in self}

    @property
    def resident(self) -> int:
        """Bytes held by loaded (or loading) models, and by unloaded ones still closing, by their estimates."""
        held = sum(m.size for m in self if m.host is not None and m.host.state not in ("failed", "closed"))
        return held + self.budget.releasing

    @property
    def max_memory(self) -> int | None:
        """The bound on the loaded models' total size in bytes (None: none)."""
        return self.budget.max_memory

    # -- lifecycle -----------------------------------------------------------------------------------------------
    async def start(self, on_ready: Callable[[ServedModel], Awaitable[None]] | None = None) -> None:
        """Load the models that load at start (all, or only pinned ones when lazy) side by side, as many as the
        budget holds, the pinned ones first and then in their order; raise the first load error. Then start the
        keep-alive sweep.

        The loads run at once, each on its own model thread: a load is mostly reading and mapping files and
        building sessions, and a two-model serve loading one after the other kept the second model's door shut for
        the whole of the first one's load. The budget counts a loading model as resident, so together they never
        take more than it allows; a library whose loads must not overlap (llama.cpp's) serialises them itself, so
        loads of different libraries overlap and those of one such library queue. `on_ready(model)` is awaited as
        soon as that model is ready, whatever the others are doing: `serve` binds its inferd socket there (a bound
        socket is the wire's readiness signal, and a client such as pdf-spec retries its dial for 10 s only, so a
        socket must not wait for any other model)."""
        starting: list[ServedModel] = []
        # Pinned models first: the loads overlap and a loading model cannot be unloaded, so a pinned model listed
        # after others that fill the budget would find no room and fail the start; the others then take what is left.
        for model in sorted(self, key=lambda m: not m.pinned):
            if model.pinned or not self.lazy:
                # A start loads what fits, in order, unloading nothing (a pinned model excepted): the ones left out
                # load at their first request, making room then.
                fits = self.budget.fits(self.resident, model.size)
                if not (fits or model.pinned):
                    log.info("model %r stays unloaded at start: the memory budget is full", model.name)
                    continue
                self.load_soon(model, by_request=False)
                starting.append(model)
        waiters = [asyncio.create_task(self._ready_at_start(model, on_ready)) for model in starting]
        try:
            for waiter in asyncio.as_completed(waiters):
                await waiter  # the first load error ends the start (serve then closes every model)
        finally:
            for waiter in waiters:
                waiter.cancel()  # only after an error: announcing the others is pointless then
            await asyncio.gather(*waiters, return_exceptions=True)
        # Always: a request's keep_alive can ask for an unload even when the server itself keeps models for good.
        interval = sweep_interval(self.keep_alive, self._sweep_interval)
        self._sweeper = asyncio.create_task(
            sweep_every(interval, self._sweep_now, self.sweep), name="modelhost-keep-alive"
        )
        self.started = True

    async def _ready_at_start(
        self, model: ServedModel, on_ready: Callable[[ServedModel], Awaitable[None]] | None
    ) -> None:
        """Wait for `model`'s own load (not the others'), then raise its error or announce it ready."""
        task = model._load_task
        if task is not None:
            await asyncio.wait({task})  # wait, unlike gather, leaves the load running when this waiter is cancelled
        if model.host is not None and model.host.load_error is not None:
            raise model.host.load_error
        if on_ready is not None and model.ready:
            await on_ready(model)

    def load_soon(self, model: ServedModel, *, by_request: bool = True) -> None:
        """Start loading `model` (no-op if loaded or loading), unloading idle models first if the budget needs the
        room; MemoryBudgetError (nothing started) when busy models hold it, which then make room for it (a request's
        load claims the room; a load at start does not, nor is it held for a request)."""
        if model.host is not None or self.closed:
            return
        try:
            victims = self.budget.make_room(model, list(self), self.resident)
        except MemoryBudgetError:
            if by_request:
                self.budget.claims[model.name] = time.monotonic()
            raise
        self._start_load(model, victims, fresh=by_request)

    def _start_load(self, model: ServedModel, victims: list[ServedModel], *, fresh: bool) -> None:
        self.budget.claims.pop(model.name, None)
        host = Host(
            model.spec.loader, name=model.name, max_queue=self.max_queue, metrics=self.metrics,
            on_load=model.load_adapters,
        )  # fmt: skip
        model.host = host
        model.fresh_since = time.monotonic() if fresh else None
        closing = [self._release(victim) for victim in victims]
        model._load_task = self._spawn(self._load(model, host, closing), f"modelhost-load-{model.name}")

    def _grant(self, now: float) -> None:
        """Load the waiting models the room has freed for, in the order they asked; forget a claim nobody renewed
        within FRESH_LOAD_HOLD_SECONDS (its clients went away), and let models drained for it serve again."""
        claims = self.budget.claims
        for name, asked in list(claims.items()):
            model = self._models[name]
            if model.host is not None or now - asked > FRESH_LOAD_HOLD_SECONDS:
                del claims[name]
                continue
            with contextlib.suppress(MemoryBudgetError):
                self._start_load(model, self.budget.make_room(model, list(self), self.resident), fresh=True)
        for model in self:
            if model.draining_for is not None and model.draining_for not in claims:
                model.draining_for = None

    def _release(self, model: ServedModel) -> Coroutine[Any, Any, None]:
        """Take `model`'s host away now (new requests load it afresh); the returned coroutine closes it, its size
        counted as resident until the close ends."""
        host = model.host
        assert host is not None
        model.host = None
        model.hold = None  # the next load starts from the set's policy, or its own request's keep_alive
        model.draining_for = None
        model.fresh_since = None
        model.unloads += 1
        self.budget.releasing_begins(model.size)
        log.info("unloading model %r (idle, or making room)", model.name)

        async def close() -> None:
            try:
                await host.aclose()
            finally:
                self.budget.releasing_ends(model.size)

        return close()

    async def _load(self, model: ServedModel, host: Host, closing: list[Coroutine[Any, Any, None]]) -> None:
        # The room is free once the unloaded models are closed (their memory given back), not before.
        await asyncio.gather(*closing, return_exceptions=True)
        try:
            await host.start()
        except Exception as exc:
            log.error("loading model %r failed: %s", model.name, exc)
            return
        model.loads += 1
        model.last_used = time.monotonic()
        await self._settle_adapters(model, host)

    async def _settle_adapters(self, model: ServedModel, host: Host) -> None:
        """After a load: load the adapters registered while it ran (too late for `load_adapters`), and stop serving
        the ones the engine refused, each with a log line saying why."""
        for adapter in list(model.adapters.values()):
            if adapter.name in host.adapters:
                continue
            error = host.adapter_errors.get(adapter.name)
            if error is None and adapter.path is not None:
                try:
                    await host.load_adapter(adapter.name, adapter.path)
                    continue
                except ModelHostError as exc:
                    error = f"adapter {adapter.name!r} cannot go on {model.name!r}: {getattr(exc, 'detail', exc)}"
                    host.adapter_errors[adapter.name] = error
            log.error("%s; it is no longer served", error)
            model.adapters.pop(adapter.name, None)
            self.adapters.pop(adapter.name, None)

    def unload(self, model: ServedModel) -> None:
        """Unload `model` now if it is loaded and idle (keep-alive; an explicit unload)."""
        if model.host is None or not model.ready or model.busy or model.pinned:
            return
        self._spawn(self._release(model), f"modelhost-unload-{model.name}")

    def wake_sweep(self) -> None:
        """Look for models to unload now (a request changed a model's keep_alive)."""
        self._sweep_now.set()

    def sweep(self) -> None:
        """One pass of the keep-alive sweep (the sweep task runs it every interval): unload the models idle past
        their keep-alive, and load the models waiting for memory that has freed."""
        now = time.monotonic()

        def fresh(model: ServedModel) -> bool:  # loaded for a request that has not come back yet
            return self.budget.held_fresh(model, now)

        for model in self:
            keep = model.keep_alive_seconds(self.keep_alive)
            if model.busy:
                model.last_used = now  # a long request is use until it ends
            elif keep is not None and model.ready and now - model.last_used >= keep and not fresh(model):
                self.unload(model)
        if self.budget.claims:
            self._grant(now)

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def cancel_all(self) -> None:
        for model in self:
            model.cancel_all()

    async def aclose(self, grace: float = 10.0) -> None:
        """Stop the sweep, let loads end, and close every model's host (each drains for up to `grace` seconds)."""
        if self.closed:
            return
        self.closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if not self._owned:
            return
        hosts = [m.host for m in self if m.host is not None]
        await asyncio.gather(*(h.aclose(grace=grace) for h in hosts), return_exceptions=True)


def as_models(target: Host | Models, *, name: str | None = None) -> Models:
    """A door's model set: `target` itself, or a one-model set around a Host (the one-model API of old)."""
    return target if isinstance(target, Models) else Models.of(target, name=name)

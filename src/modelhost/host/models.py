"""A model set: the models one process serves, each in its own Host (thread, queue, scheduler), found by name.

Ollama's shape: several models side by side, each loaded at start or at its first request (`lazy`), unloaded after
`keep_alive` idle seconds, and kept within a memory budget (`max_memory`): to make room for a model, the least
recently used *idle* models are unloaded; a model that can never fit is refused when the set is built, and one that
cannot fit now (the resident models are busy) is answered "loading, retry" until they are idle.

A Host is one-shot (loaded once, closed once), so unloading closes it and the next load builds a fresh one: the
ServedModel is the stable face the doors hold, and its metrics (one HostMetrics for the whole set, labelled by model)
outlive every load. Everything here runs on the event loop and decides synchronously: a door looks a model up and
submits with no await between, so an unload can never close a host between the two.

A model may be pinned: loaded at start whatever `lazy` says, never unloaded. The socket door's model is pinned,
because on the inferd wire a bound socket says "ready" and a request has no way to wait for a load.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from modelhost.errors import HostClosedError, ModelLoadingError, ModelNotFoundError
from modelhost.host.events import GenerationRequest
from modelhost.host.metrics import HostMetrics
from modelhost.host.scheduler import DEFAULT_MAX_QUEUE, EmbeddingTicket, Host, RequestStream
from modelhost.inference.model import TextModel

log = logging.getLogger(__name__)

#: A served model's state: a Host's, or "unloaded" (not resident; a request loads it).
ModelState = Literal["unloaded", "new", "loading", "ready", "failed", "closing", "closed"]

#: How often the keep-alive sweep looks for idle models, at most: idle times are seconds to minutes, so a second of
#: lateness is noise; a short keep-alive (tests) is checked four times per period.
MAX_SWEEP_SECONDS = 1.0


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

    async def precheck(self, request: GenerationRequest) -> None: ...

    def submit(self, request: GenerationRequest) -> RequestStream: ...

    def submit_embedding(
        self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False
    ) -> EmbeddingTicket: ...


class MemoryBudgetError(ModelLoadingError):
    """The model cannot be loaded now: the memory budget is held by models that are busy. A retry may succeed (the
    doors answer it like a model still loading: 503 with Retry-After, a job waits)."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One model to serve: its name, where it comes from (a path, for whoever needs the files: lora.train), how to
    load it, its resident size in bytes (0: unknown, not counted against the budget), and whether it is pinned."""

    name: str
    loader: Callable[[], TextModel]
    path: str | None = None
    size: int = 0
    pinned: bool = False
    #: Other names a request may use for it (the catalogue name given on the command line, e.g. `ocr`).
    aliases: tuple[str, ...] = ()


def resident_size(path: str | os.PathLike[str]) -> int:
    """An estimate of a model's resident size: the bytes of its file, or of every file in its folder (weights
    dominate; a GGUF is mapped whole, a safetensors checkpoint is read whole)."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    if p.is_dir():
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return 0


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> int:
    """`8G`, `512M`, `1.5GiB`, `1000000` into bytes (binary units); ValueError naming the bad value."""
    found = _SIZE.match(text)
    if not found:
        raise ValueError(f"expected a size such as 8G, 512M or a number of bytes, got {text!r}")
    return int(float(found.group(1)) * _UNITS[found.group(2).lower()])


def _mb(size: int) -> str:
    return f"{size / 2**20:.0f} MB" if size >= 2**20 else f"{size} bytes"


class ServedModel:
    """One model of a set: the stable face the doors hold while its Host comes and goes (see the module doc)."""

    def __init__(self, spec: ModelSpec, models: Models) -> None:
        self.spec = spec
        self.path = spec.path
        self.size = spec.size
        self.pinned = spec.pinned
        self.host: Host | None = None
        self.last_used = time.monotonic()
        self.loads = 0
        self.unloads = 0
        #: Seconds to stay loaded after use that the last request asked for (Ollama's per-request keep_alive; inf:
        #: for good); None: the set's own keep_alive. Cleared when the model unloads.
        self.hold: float | None = None
        self._load_task: asyncio.Task[None] | None = None  # the load running now, for `wait_loaded`
        self._waiters = 0  # requests waiting in `wait_loaded`: they count as use, so no sweep unloads under them
        self._models = models
        self._name = spec.name

    @property
    def name(self) -> str:
        return self._name

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
        if self._waiters:
            return True
        return self.host is not None and (self.host.waiting > 0 or self.host.running > 0)

    async def wait_loaded(self) -> None:
        """Start loading the model if it is unloaded and wait until its load ends: ready, or failed (the caller looks
        at `ready`). While a caller waits the model counts as busy, so neither the keep-alive sweep nor the memory
        budget unloads it between its load and the caller's submit. MemoryBudgetError when busy models hold the
        room it needs (nothing waited for)."""
        self._waiters += 1
        try:
            while not self.ready:
                if self.host is None:
                    self._models.load_soon(self)
                task = self._load_task
                if task is None or self.host is None or self.host.state not in ("new", "loading"):
                    return  # failed or closing: nothing more to wait for
                await asyncio.shield(task)
        finally:
            self._waiters -= 1

    async def precheck(self, request: GenerationRequest) -> None:
        """Host.precheck on the loaded model (nothing when unloaded: `submit` answers that). The model counts as
        busy meanwhile, as in `wait_loaded`, so no sweep unloads it between the check and the caller's submit."""
        host = self.host
        if host is None:
            return
        self._waiters += 1
        try:
            await host.precheck(request)
        finally:
            self._waiters -= 1

    def submit(self, request: GenerationRequest) -> RequestStream:
        """Queue a request on the loaded model (Host.submit); an unloaded model starts loading and the request is
        answered ModelLoadingError (retry), as while any model loads."""
        host = self.host
        if host is None:
            self._models.load_soon(self)
            raise ModelLoadingError(f"model {self.name!r} is loading; retry shortly")
        stream = host.submit(request)
        self.last_used = time.monotonic()
        return stream

    def submit_embedding(self, texts: Sequence[str], **opts: Any) -> EmbeddingTicket:
        """Queue an embedding on the loaded model (Host.submit_embedding); an unloaded model starts loading and the
        request is answered ModelLoadingError (retry), exactly as `submit` does."""
        host = self.host
        if host is None:
            self._models.load_soon(self)
            raise ModelLoadingError(f"model {self.name!r} is loading; retry shortly")
        ticket = host.submit_embedding(texts, **opts)
        self.last_used = time.monotonic()
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
    ) -> None:
        if not specs:
            raise ValueError("a model set needs at least one model")
        if keep_alive is not None and keep_alive < 0:
            raise ValueError("keep_alive must be at least 0 seconds")
        self.max_queue = max_queue
        self.lazy = lazy
        self.keep_alive = keep_alive
        self.max_memory = max_memory
        self.metrics = metrics or HostMetrics(specs[0].name)
        if metrics is None:  # a registry of our own: the set's figures go with the hosts' (never twice in one)
            self.metrics.registry.register(_ModelSetCollector(self))
        self._models: dict[str, ServedModel] = {}
        self._aliases: dict[str, str] = {}
        for spec in specs:
            if spec.name in self._models:
                raise ValueError(f"two models are named {spec.name!r}; choose names with NAME=PATH")
            if max_memory is not None and spec.size > max_memory:
                raise ValueError(
                    f"model {spec.name!r} needs about {_mb(spec.size)}, more than the whole memory budget "
                    f"({_mb(max_memory)})"
                )
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
        #: Bytes of unloaded models whose hosts are still closing: still held until the close ends.
        self._releasing = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._sweep_now = asyncio.Event()  # set when a request's keep_alive changed: check at once, not in a second

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
        found = self._models.get(name) or self._models.get(self._aliases.get(name, ""))
        if found is None:
            raise ModelNotFoundError(f"model {name!r} is not served here; served: {', '.join(self._models)}")
        return found

    def route(self, name: str | None) -> ServedModel:
        """The model a request names. No name: the first model. One model served: it answers every name (as
        llama.cpp's server does: clients configured with any model name work); several: the name decides."""
        if not name or (len(self._models) == 1 and name not in self._aliases):
            return self._models[self.default]
        return self.get(name)

    def states(self) -> dict[str, str]:
        return {m.name: m.state for m in self}

    @property
    def resident(self) -> int:
        """Bytes held by loaded (or loading) models, and by unloaded ones still closing, by their estimates."""
        held = sum(m.size for m in self if m.host is not None and m.host.state not in ("failed", "closed"))
        return held + self._releasing

    # -- lifecycle -----------------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Load the models that load at start (all, or only pinned ones when lazy), in order, each within the
        budget; raise the first load error. Then start the keep-alive sweep."""
        for model in self:
            if model.pinned or not self.lazy:
                # A start loads what fits, in order, unloading nothing (a pinned model excepted): the ones left out
                # load at their first request, making room then.
                fits = self.max_memory is None or self.resident + model.size <= self.max_memory
                if not (fits or model.pinned):
                    log.info("model %r stays unloaded at start: the memory budget is full", model.name)
                    continue
                self.load_soon(model)
                await self._settle(model)
                if model.host is not None and model.host.load_error is not None:
                    raise model.host.load_error
        # Always: a request's keep_alive can ask for an unload even when the server itself keeps models for good.
        self._sweeper = asyncio.create_task(self._sweep(), name="modelhost-keep-alive")
        self.started = True

    async def _settle(self, model: ServedModel) -> None:
        while model.host is not None and model.host.state in ("new", "loading"):
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def load_soon(self, model: ServedModel) -> None:
        """Start loading `model` (no-op if loaded or loading), unloading idle models first if the budget needs the
        room; MemoryBudgetError (nothing started) when busy models hold it."""
        if model.host is not None or self.closed:
            return
        victims = self._make_room(model)
        host = Host(model.spec.loader, name=model.name, max_queue=self.max_queue, metrics=self.metrics)
        model.host = host
        closing = [self._release(victim) for victim in victims]
        model._load_task = self._spawn(self._load(model, host, closing), f"modelhost-load-{model.name}")

    def _make_room(self, model: ServedModel) -> list[ServedModel]:
        if self.max_memory is None or not model.size:
            return []
        need = self.resident + model.size - self.max_memory
        if need <= 0:
            return []
        if self._releasing and need <= self._releasing:
            raise MemoryBudgetError(f"model {model.name!r} waits for unloaded models to give their memory back")
        idle = sorted(
            (m for m in self if m.host is not None and m.ready and not m.pinned and not m.busy),
            key=lambda m: m.last_used,
        )
        victims: list[ServedModel] = []
        for candidate in idle:
            if need <= 0:
                break
            victims.append(candidate)
            need -= candidate.size
        if need > 0:
            raise MemoryBudgetError(
                f"model {model.name!r} needs about {_mb(model.size)}, but the memory budget ({_mb(self.max_memory)}) "
                f"is held by models that are busy or pinned ({_mb(self.resident)} resident); retry shortly"
            )
        return victims

    def _release(self, model: ServedModel) -> Coroutine[Any, Any, None]:
        """Take `model`'s host away now (new requests load it afresh); the returned coroutine closes it, its size
        counted as resident until the close ends."""
        host = model.host
        assert host is not None
        model.host = None
        model.hold = None  # the next load starts from the set's policy, or its own request's keep_alive
        model.unloads += 1
        self._releasing += model.size
        log.info("unloading model %r (idle)", model.name)

        async def close() -> None:
            try:
                await host.aclose()
            finally:
                self._releasing -= model.size

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

    def unload(self, model: ServedModel) -> None:
        """Unload `model` now if it is loaded and idle (keep-alive; an explicit unload)."""
        if model.host is None or not model.ready or model.busy or model.pinned:
            return
        self._spawn(self._release(model), f"modelhost-unload-{model.name}")

    def wake_sweep(self) -> None:
        """Look for models to unload now (a request changed a model's keep_alive)."""
        self._sweep_now.set()

    async def _sweep(self) -> None:
        interval = (
            MAX_SWEEP_SECONDS if self.keep_alive is None else max(0.02, min(MAX_SWEEP_SECONDS, self.keep_alive / 4))
        )
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sweep_now.wait(), interval)
            self._sweep_now.clear()
            now = time.monotonic()
            for model in self:
                keep = model.keep_alive_seconds(self.keep_alive)
                if model.busy:
                    model.last_used = now  # a long request is use until it ends
                elif keep is not None and model.ready and now - model.last_used >= keep:
                    self.unload(model)

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


class _ModelSetCollector(Collector):
    """What the set adds to the hosts' metrics: each model's resident bytes, loads and unloads, and the budget."""

    def __init__(self, models: Models) -> None:
        self._models = models

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        labels = ["model_name"]
        resident = GaugeMetricFamily(
            "modelhost_model_resident_bytes",
            "A loaded model's estimated size (weights and KV cache), 0 when unloaded.",
            labels=labels,
        )
        loads = CounterMetricFamily("modelhost_model_loads", "Loads of the model that succeeded.", labels=labels)
        unloads = CounterMetricFamily(
            "modelhost_model_unloads", "Unloads of the model: idle past keep-alive, or for room.", labels=labels
        )
        for model in self._models:
            held = model.host is not None and model.host.state not in ("failed", "closed")
            resident.add_metric([model.name], float(model.size if held else 0))
            loads.add_metric([model.name], float(model.loads))
            unloads.add_metric([model.name], float(model.unloads))
        yield resident
        yield loads
        yield unloads
        if self._models.max_memory is not None:
            yield GaugeMetricFamily(
                "modelhost_memory_budget_bytes", "The bound on loaded models' total size.", self._models.max_memory
            )


def as_models(target: Host | Models, *, name: str | None = None) -> Models:
    """A door's model set: `target` itself, or a one-model set around a Host (the one-model API of old)."""
    return target if isinstance(target, Models) else Models.of(target, name=name)

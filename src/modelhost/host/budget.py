"""The memory budget of a model set: which models to unload so that another fits, and who waits for whom.

Ollama's `server/sched.go` keeps this apart from its routes; here it is apart from the set's lookup and lifecycle
(host/models.py), which asks it before every load and follows its answer. The rules:

- A model fits when the resident models' sizes and its own stay within `max_memory`; a model that can never fit is
  refused when the set is built (`check`).
- To make room, the least recently used *idle* models are unloaded (`make_room` names them; the set unloads them).
- Fair eviction: a model that cannot fit now because the resident models are busy is not left to retry until they
  happen to be idle (steady traffic to one model starved the other for good: 0 of 147 requests in 90 s). Its request
  claims the room (`claims`): the busy models it needs gone finish the requests they hold, take no new ones meanwhile
  (`draining_for`), and are unloaded as soon as those end; then the claimant loads, and keeps its memory until a
  request has used it (for at most FRESH_LOAD_HOLD_SECONDS), so the model it displaced cannot take the room back
  before the claimant's client returns.
- Every refusal says how long the wait should be (MemoryBudgetError.retry_after: the holders' requests in flight
  times their mean request time); room held only by models still closing is a wait of its own end (`released`).

Everything here runs on the event loop and decides synchronously.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from modelhost.errors import ModelLoadingError
from modelhost.host.metrics import HostMetrics
from modelhost.host.spec import megabytes

log = logging.getLogger("modelhost.host.models")  # the set's logger: these lines are about its models

#: How long a model loaded for a request keeps its memory (against the budget and keep-alive alike) before any request
#: has used it: an OpenAI client answered 503 "loading, Retry-After: 1" comes back after a second or a few on a busy
#: machine, and without the hold the model it displaced (or a keep-alive of 0) took the room back before it did, so
#: neither model was ever served. A client that never comes back holds the memory no longer than this.
FRESH_LOAD_HOLD_SECONDS = 30.0

#: The bounds of a memory wait's Retry-After: at least a second (sooner is refused again), at most a minute (an
#: estimate from a few slow requests should not send a client away for longer).
RETRY_AFTER_MIN, RETRY_AFTER_MAX = 1, 60


class MemoryBudgetError(ModelLoadingError):
    """The model cannot be loaded now (the memory budget is held by models that are busy), or takes no new requests
    now (it is making room for one that waits). A retry after `retry_after` seconds may succeed (the doors answer it
    like a model still loading: 503 with that Retry-After, a job waits)."""

    def __init__(self, message: str, *, retry_after: int = RETRY_AFTER_MIN) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class MemoryReleasingError(MemoryBudgetError):
    """The room a model needs is held only by models already unloading: it is free once their hosts have closed, a
    wait of its own end (`Budget.released`), not one to retry on a guess."""


class Member(Protocol):
    """What the budget reads of a model of the set (host/models.py's ServedModel)."""

    draining_for: str | None
    fresh_since: float | None
    last_used: float

    @property
    def name(self) -> str: ...

    @property
    def size(self) -> int: ...

    @property
    def pinned(self) -> bool: ...

    @property
    def loaded(self) -> bool: ...

    @property
    def ready(self) -> bool: ...

    @property
    def busy(self) -> bool: ...

    @property
    def in_flight(self) -> int: ...


#: A model of the set, as the caller's own type: `make_room` answers with the models it was given.
M = TypeVar("M", bound=Member)


class Budget:
    """One set's memory: its bound (None: none), the bytes of unloaded models still closing, and the models waiting
    for room (`claims`, by name, with when they last asked)."""

    def __init__(self, max_memory: int | None, metrics: HostMetrics) -> None:
        self.max_memory = max_memory
        self.metrics = metrics
        #: Bytes of unloaded models whose hosts are still closing: still held until the close ends.
        self.releasing = 0
        self._released = asyncio.Event()  # set as a close of an unloaded model ends (see `released`)
        #: Models whose requests were refused for want of memory, in the order they first asked, with the time they
        #: last asked: the sweep loads them as the room frees.
        self.claims: dict[str, float] = {}

    def check(self, name: str, size: int) -> None:
        """ValueError when a model of `size` bytes could never fit, even alone."""
        if self.max_memory is not None and size > self.max_memory:
            raise ValueError(
                f"model {name!r} needs about {megabytes(size)}, more than the whole memory budget "
                f"({megabytes(self.max_memory)})"
            )

    def fits(self, resident: int, size: int) -> bool:
        return self.max_memory is None or resident + size <= self.max_memory

    def held_fresh(self, model: Member, now: float) -> bool:
        """Whether `model` was loaded for a request that has not used it yet (FRESH_LOAD_HOLD_SECONDS)."""
        return model.fresh_since is not None and now - model.fresh_since < FRESH_LOAD_HOLD_SECONDS

    def make_room(self, model: M, members: Sequence[M], resident: int) -> list[M]:
        """The models of `members` to unload so that `model` fits beside `resident` bytes: idle ones, least recently
        used first (and drained ones: see the module doc). When they are not enough, the busy ones it needs are told
        to drain and MemoryBudgetError says how long that should take."""
        if self.max_memory is None or not model.size:
            return []
        need = resident + model.size - self.max_memory
        if need <= 0:
            return []
        if self.releasing and need <= self.releasing:
            raise MemoryReleasingError(f"model {model.name!r} waits for unloaded models to give their memory back")
        now = time.monotonic()
        movable = sorted(
            (
                m
                for m in members
                if m is not model and m.loaded and m.ready and not m.pinned and not self.held_fresh(m, now)
            ),
            key=lambda m: m.last_used,
        )
        # Free now: idle, or drained for a waiting model (requests waiting to submit to it are refused anyway).
        free = [m for m in movable if not m.busy or (m.draining_for is not None and m.in_flight == 0)]
        victims: list[M] = []
        for candidate in free:
            if need <= 0:
                return victims
            victims.append(candidate)
            need -= candidate.size
        if need <= 0:
            return victims
        holders = []
        for candidate in (m for m in movable if m not in free):
            if need <= 0:
                break
            holders.append(candidate)
            need -= candidate.size
        if need > 0:  # pinned models, or ones just loaded for a request, hold the rest: nothing is drained for it
            busy = [m for m in members if m is not model and m.loaded]
            raise MemoryBudgetError(
                f"model {model.name!r} needs about {megabytes(model.size)}, but the memory budget "
                f"({megabytes(self.max_memory)}) is held by models that are busy, pinned or just loaded for a request "
                f"({megabytes(resident)} resident); retry shortly",
                retry_after=self.drain_seconds(busy),
            )
        for holder in holders:
            if holder.draining_for is None:
                holder.draining_for = model.name
                log.info("model %r takes no new requests: it unloads for %r once they end", holder.name, model.name)
        wait = self.drain_seconds(holders)
        names = ", ".join(repr(h.name) for h in holders)
        raise MemoryBudgetError(
            f"model {model.name!r} needs about {megabytes(model.size)} of the memory budget "
            f"({megabytes(self.max_memory)}), held by busy models: {names} finish their "
            f"{sum(h.in_flight for h in holders)} requests in flight, take no new ones, and unload for it; retry in "
            f"about {wait} s",
            retry_after=wait,
        )

    def drain_seconds(self, models: Iterable[Member]) -> int:
        """About how long until `models` have ended their requests in flight (their count times each model's mean
        request time so far, a second when unknown), within RETRY_AFTER_MIN and RETRY_AFTER_MAX."""
        total = sum(m.in_flight * (self.metrics.mean_request_seconds(m.name) or 1.0) for m in models)
        return max(RETRY_AFTER_MIN, min(RETRY_AFTER_MAX, math.ceil(total)))

    def releasing_begins(self, size: int) -> None:
        """An unloaded model's host starts closing: its `size` stays held until `releasing_ends`."""
        self.releasing += size

    def releasing_ends(self, size: int) -> None:
        self.releasing -= size
        self._released.set()

    async def released(self) -> None:
        """Wait until the close of an unloaded model ends (its memory given back to the budget)."""
        self._released.clear()  # no await since the caller saw the room held: no close ended unseen
        await self._released.wait()

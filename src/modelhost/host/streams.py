"""What a door holds of a submitted request: its RequestStream (the events, as an async iterator) and, for an
embedding, its EmbeddingTicket (an awaitable result).

Both are made on the consumer's event loop and fed from the model thread (`emit`, `resolve`: the loop of
host/loop.py), which hands each item over with `call_soon_threadsafe`, so the consumer never blocks on the model and
the model never waits on the consumer. Cancelling either (`cancel()`, or leaving the stream's `async with`) sets its
cancel token and asks the host to withdraw it from the queue; a running one stops at the model thread's next turn.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Protocol

from modelhost.errors import ModelHostError
from modelhost.host.events import Done, Event, Failed, GenerationRequest
from modelhost.inference.capabilities import EmbeddingJob
from modelhost.inference.engine import EngineRequest
from modelhost.inference.types import EmbeddingResult


class Owner(Protocol):
    """What a stream or a ticket needs of the host it was queued on: to be withdrawn from the queue when cancelled."""

    def withdraw(self, stream: RequestStream) -> None:
        """Take a cancelled request out of the queue (nothing when it is running or finished already)."""
        ...

    def withdraw_embedding(self, ticket: EmbeddingTicket) -> None:
        """Take a cancelled embedding out of the queue (nothing when it is running or finished already)."""
        ...


class RequestStream:
    """The events of one submitted request, as an async iterator. Close it (or `cancel()`) to cancel the request.

    Use as `async with host.submit(req) as stream: async for event in stream: ...`; leaving the block early
    cancels the request wherever it is.
    """

    def __init__(self, host: Owner, request: GenerationRequest, engine_request: EngineRequest) -> None:
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
    def emit(self, event: Event) -> None:
        """Hand `event` to the consumer's event loop (the model thread's call)."""
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
            self._host.withdraw(self)

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

    def __init__(self, host: Owner, texts: list[str], options: dict[str, Any]) -> None:
        self.texts = texts
        self.options = options
        self.cancel_event = threading.Event()
        self.submitted_at = time.perf_counter()
        self.job: EmbeddingJob | None = None  # its steps, once the model thread starts it
        self._host = host
        self._loop = asyncio.get_running_loop()
        self._future: asyncio.Future[EmbeddingResult] = self._loop.create_future()

    # -- called on the model thread --------------------------------------------------------------------------------
    def resolve(self, result: EmbeddingResult | BaseException) -> None:
        """Hand the result (or the error) to the awaiting event loop (the model thread's call)."""

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
            self._host.withdraw_embedding(self)


def cancelled_embedding() -> ModelHostError:
    """The error a cancelled embedding's `result()` raises."""
    return ModelHostError("the embedding was cancelled before the model computed it", code="cancelled")

"""What every generation and embedding route does, whatever its protocol: find the model a request names, check
and submit it (refused as the route family's error), and wait on work while watching for the client to hang up.

A protocol's handlers (`openai.handlers`, `ollama.handlers`) parse their own requests and write their own answers;
they reach the host only through a `Door`. `Host.submit` refuses bad options, images for a text model and a full
queue *before* any compute, so every refusal is an answer before the model is touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from starlette.requests import Request

from modelhost import _access
from modelhost.errors import HostClosedError, ModelHostError, ModelLoadingError, ModelNotFoundError, QueueFullError
from modelhost.host import Admission, RequestStream
from modelhost.host.models import MemoryBudgetError, Models, ServedModel
from modelhost.http import embeddings
from modelhost.http.errors import ApiError, client_gone, from_exception, from_host_error, from_host_exception
from modelhost.http.metrics import HttpMetrics
from modelhost.http.parsing import ParsedRequest
from modelhost.http.relay import Choices, disconnect
from modelhost.inference.types import EmbeddingResult

T = TypeVar("T")

#: Bounds on the Retry-After we advertise with a 429: under a second is pointless (clients round up anyway), over a
#: minute means the estimate is unreliable and a client should back off on its own schedule.
_RETRY_AFTER_MIN, _RETRY_AFTER_MAX = 1, 60


def running_context(loaded: Any) -> int:
    """The context a loaded model runs with, the most tokens a prompt may have here: its own `context_length` where
    the backend says it (llama.cpp runs SmolLM2, trained on 8192 positions, with 4096 by default), else the trained
    length from its ModelInfo. What /api/ps and /tokenize's `max_model_len` report."""
    runs_with = getattr(loaded, "context_length", None)
    if isinstance(runs_with, int) and not isinstance(runs_with, bool):
        return runs_with
    return int(loaded.info().context_length)


class Door:
    """The shared path of the HTTP door's routes, bound to a model set (one model, or several routed by `model`)."""

    def __init__(self, models: Models, metrics: HttpMetrics) -> None:
        self.model_set = models
        self.metrics = metrics
        self.created = time.time()
        #: Set by `stop_intake` when the server begins to stop: work already admitted runs on, new work is refused.
        self.stopping = False

    def stop_intake(self) -> None:
        """Refuse new generations and embeddings from now on (503 host_closed; /ready says "stopping"), while what
        was admitted runs to its end or its grace. The door keeps answering: /health, /ready and /metrics stay
        truthful while the host drains, and a client learns at once that this server is going away."""
        self.stopping = True

    def route(self, request: Request, body: Any) -> ServedModel:
        """The model a request body names (`model`); 404 model_not_found for a name not served here. The model
        served goes into the request's access-log line."""
        name = body.get("model") if isinstance(body, dict) else None
        try:
            served = self.model_set.route(name if isinstance(name, str) else None)
        except ModelNotFoundError as exc:
            raise from_exception(exc, param="model") from None
        _access.note(request.scope, model=served.name)
        return served

    def submit(self, served: ServedModel, parsed: ParsedRequest, admissions: list[Admission]) -> Choices:
        """Submit every choice of the request (`n` of each prompt's Admission, in OpenAI's choice order: prompt by
        prompt), or none: when the queue cannot take them all, those already queued are cancelled and the whole
        request is refused (a client asking for n choices gets n or an error)."""
        streams: list[RequestStream] = []
        try:
            for admitted in admissions:
                for choice in range(admitted.n):
                    with self.admission(served, lambda exc: from_host_exception(exc, parsed.wire_names)):
                        streams.append(served.submit(admitted, choice))
        except BaseException:
            for stream in streams:
                stream.cancel()
            raise
        return Choices(streams, parsed.wire_names)

    async def precheck(self, served: ServedModel, parsed: ParsedRequest) -> list[Admission]:
        """The request parsed and checked once per prompt, on a worker thread (ServedModel.precheck: a created model's
        TEMPLATE is rendered there; Host.precheck: a JSON Schema's grammar is compiled there and the prompt tokenized,
        not on the event loop), refused as `submit` would refuse it. The choices differ only in their seed, so one
        Admission stands for all `n` of a prompt."""
        with self.admission(served, lambda exc: from_host_exception(exc, parsed.wire_names)):
            return [await served.precheck(generation, parsed.n) for generation in parsed.generations()]

    @contextlib.contextmanager
    def admission(self, served: ServedModel, answer: Callable[[ModelHostError], ApiError]) -> Iterator[None]:
        """What a refused submission answers: a full queue `answer(exc)` with Retry-After, a model loading (or
        closed) 503, any other refusal `answer(exc)` (the route family's error, naming the client's parameter)."""
        if self.stopping:
            # A request that reached a stopping server would otherwise be queued behind the drain and then
            # cancelled at the grace's end: refused now, the client can retry on another replica at once. Counted as
            # the host counts its own refusals (a rejection, and so a failure, by its code).
            served.metrics.reject(served.name, "host_closed")
            raise from_host_error("host_closed", "the server is stopping: it takes no new requests")
        try:
            yield
        except QueueFullError as exc:
            err = answer(exc)
            err.headers["retry-after"] = str(self._retry_after(served))
            raise err from None
        except MemoryBudgetError as exc:
            raise self.memory_wait(exc) from None
        except ModelLoadingError as exc:
            raise self.not_ready(served, str(exc)) from None
        except HostClosedError:
            raise self.not_ready(served) from None
        except ModelHostError as exc:
            raise answer(exc) from None

    def not_ready(self, served: ServedModel, message: str | None = None) -> ApiError:
        """A model that cannot take the request now: 503 "loading, retry" (with Retry-After), or not serving."""
        state = served.state
        if state in ("new", "loading", "unloaded"):
            loading = from_host_error("model_loading", message or f"model {served.name!r} is loading; retry shortly")
            loading.headers["retry-after"] = "1"
            return loading
        return from_host_error("host_closed", f"model {served.name!r} is not serving (state {state})")

    @staticmethod
    def memory_wait(exc: MemoryBudgetError) -> ApiError:
        """A model waiting for memory, or making room for one: 503 with the set's estimate of the wait."""
        waiting = from_exception(exc)
        waiting.headers["retry-after"] = str(exc.retry_after)
        return waiting

    def _retry_after(self, served: ServedModel) -> int:
        """Seconds until a queue slot is likely free: one mean request time so far (the queue drains one request
        at a time, so a slot frees when the running request ends; retrying sooner would only be refused again)."""
        mean = served.metrics.mean_request_seconds(served.host.name if served.host is not None else served.name)
        return max(_RETRY_AFTER_MIN, min(_RETRY_AFTER_MAX, math.ceil(mean or 1.0)))

    async def embed(
        self, request: Request, served: ServedModel, parsed: embeddings.ParsedEmbedding
    ) -> tuple[EmbeddingResult, float]:
        """Submit an embedding and await it (cancelled if the client hangs up first): (result, seconds)."""
        with self.admission(served, lambda exc: embeddings.error(exc, parsed.wire_names)):
            ticket = served.submit_embedding(parsed.texts, **parsed.options)
        try:
            # Cancelling the awaiting of `result()` cancels the ticket: a queued embedding is never computed.
            result = await self.unless_hung_up(request, ticket.result())
        except ModelHostError as exc:
            raise embeddings.error(exc, parsed.wire_names) from None
        _access.note(request.scope, prompt_tokens=int(result.prompt_tokens))
        return result, time.perf_counter() - ticket.submitted_at

    async def unless_hung_up(self, request: Request, work: Awaitable[T]) -> T:
        """`work`'s result, or, when the client hangs up first, `work` cancelled and a 499 (counted as a disconnect:
        nobody reads it; nginx's "client closed request" keeps the request counter truthful)."""
        task = asyncio.ensure_future(work)
        gone = asyncio.create_task(disconnect(request.receive))
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not task.done():
                task.cancel()
        if not task.done() or task.cancelled():
            self.metrics.disconnects.labels(request.url.path).inc()
            raise client_gone()
        return task.result()

"""The model thread of a Host: load the model, then drive its engine in one loop until the host closes.

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

import collections
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from modelhost.errors import HostClosedError, ModelHostError
from modelhost.host.events import Delta, Done, Failed, Started
from modelhost.host.metrics import HostMetrics
from modelhost.host.streams import EmbeddingTicket, RequestStream, cancelled_embedding
from modelhost.inference import accepts_images
from modelhost.inference.adapters import engine_of
from modelhost.inference.capabilities import start_embedding
from modelhost.inference.engine import Admitted, CacheReportingEngine, Engine, Handle
from modelhost.inference.model import TextModel
from modelhost.inference.types import EmbeddingResult, GenerateMetrics, Token

log = logging.getLogger("modelhost.host.scheduler")  # the host's one logger, whichever of its modules logs

HostState = Literal["new", "loading", "ready", "failed", "closing", "closed"]

#: Work for the model thread between two steps (an adapter loaded or freed), and where its result goes.
Chore = tuple[Callable[[Engine], Any], "concurrent.futures.Future[Any]"]


@dataclass(eq=False, slots=True)
class _Progress:
    """Tokens streamed so far for one running request, for its Delta counts and latency metrics."""

    tokens: int = 0
    last: float = 0.0


class ModelLoop:
    """The model thread's half of a Host (host/scheduler.py): `_main` loads the model and runs `_run`, the one loop;
    everything here runs on that thread but the gauges and `_finish`, which the host's consumer side shares. The
    state it reads is the Host's own, set up by its `__init__` and guarded by its `_cond`."""

    name: str
    metrics: HostMetrics
    state: HostState
    load_error: BaseException | None
    slots: int
    adapters: frozenset[str]
    _loader: Callable[[], TextModel]
    _model: TextModel | None
    _accepts_images: bool
    _waiting: collections.deque[RequestStream]
    _running: list[RequestStream]
    _embeddings: collections.deque[EmbeddingTicket]
    _embedding: EmbeddingTicket | None
    _engine: Engine | None
    _on_load: Callable[[Any, Engine], None] | None
    _chores: collections.deque[Chore]
    _cond: threading.Condition
    _ready: threading.Event
    _idle: threading.Event

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
            stream.emit(Failed("internal", message))
        for ticket in tickets:
            self.metrics.embedding_requests.labels(self.name, "error").inc()
            self.metrics.requests_failed.labels(self.name, "internal").inc()
            ticket.resolve(ModelHostError(message))

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
            outcome, answer = "cancelled", cancelled_embedding()
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
        ticket.resolve(answer)

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
            stream.emit(Delta(token.text, progress.tokens, logprobs, token.channel))

    def _done(self, stream: RequestStream, m: GenerateMetrics) -> None:
        reason = "cancelled" if stream.cancel_event.is_set() else (m.finish_reason or "stop")
        asked = stream.request.options.get("max_tokens")
        self.metrics.finished(self.name, m, asked if isinstance(asked, int) else None)
        self._finish(stream, Done(reason, m.prompt_tokens, m.generated_tokens, m))

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
        stream.emit(Started(queued, outcome.prompt_tokens if isinstance(outcome, Admitted) else 0))
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
        stream.emit(event)

    def _gauge_waiting(self) -> None:
        self.metrics.requests_waiting.labels(self.name).set(self.waiting)

    def _gauge_running(self) -> None:
        self.metrics.requests_running.labels(self.name).set(self.running)

    def _quiet(self) -> bool:
        """Nothing queued and nothing running (under the lock): the host is idle."""
        return not self._waiting and not self._running and not self._embeddings and self._embedding is None

    @property
    def waiting(self) -> int:
        """Requests queued for the model (generations and embeddings)."""
        return len(self._waiting) + len(self._embeddings)

    @property
    def running(self) -> int:
        """Requests the model is working on (up to `slots` when the model batches, plus an embedding)."""
        return len(self._running) + (self._embedding is not None)

"""The job board: every job's state, the run queue, capacity and intake, and the only code that changes a record.

All of it runs on the event loop, so a change is atomic between awaits. A record changes in memory first and is then
saved as a snapshot; the store writes snapshots in the order they were taken, so the disk always converges on the
newest state. A new job enters the board only once it is durable, so a job a caller has an id for survives a crash.
Progress (stage, step, total, remaining) is kept in memory only: a restart fails a processing job anyway, so its
progress would be stale the moment it was read back, and writing it per token would cost a disk flush per token.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from modelhost.worker import protocol
from modelhost.worker.metrics import WorkerMetrics
from modelhost.worker.protocol import ApiError, Failure, Record
from modelhost.worker.store import JobStore, StorageError

log = logging.getLogger(__name__)

#: Retry-After (seconds) while intake is closed: an operator closed it on purpose, so asking again every second
#: would only add load; half a minute is a fair poll for a maintenance window.
RETRY_AFTER_CLOSED = 30
#: Bounds of the Retry-After given at capacity (the mean job duration, clamped): at least one second so a client
#: does not spin, at most a minute so a long job does not park callers that could have come back sooner.
RETRY_AFTER_MIN, RETRY_AFTER_MAX = 1, 60

Journal = Callable[[str], None]


def print_journal(line: str) -> None:
    """The default journal: one line per finished job on stderr."""
    print(line, file=sys.stderr, flush=True)


@dataclass(slots=True)
class Reservation:
    """A slot held for a job being submitted (counted against capacity until committed or released)."""

    job_id: str
    operation: str
    model: str
    keyed: bool
    done: bool = False


class JobBoard:
    """The jobs of one worker. See the module docstring for the consistency rules."""

    def __init__(
        self,
        store: JobStore,
        *,
        capacity: int,
        models: Sequence[tuple[str, str]],
        metrics: WorkerMetrics,
        journal: Journal = print_journal,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.store = store
        self.capacity = capacity
        self.models = list(models)
        self._served = frozenset(self.models)
        self.metrics = metrics
        self.journal = journal
        self.records: dict[str, Record] = {}
        self.intake_open = True
        self.draining = False
        self.processing: Record | None = None
        self._queue: collections.deque[str] = collections.deque()
        self._reserved = 0
        self._pending: dict[str, asyncio.Future[Record | None]] = {}
        # Jobs being removed (ack, retention) -> set once the removal is over; a key resubmitted meanwhile waits.
        self._removing: dict[str, asyncio.Event] = {}
        self._cancel_hooks: dict[str, list[Callable[[str], None]]] = {}
        self._wake = asyncio.Event()
        self._stopped = False
        self._last_created = 0
        self._mean_seconds = 0.0
        metrics.capacity.set(capacity)
        metrics.intake_open.set(1)

    # -- restore --------------------------------------------------------------------------------------------------
    def load(self, records: Iterable[Record]) -> None:
        """Take the store's restored records (queued ones in creation order)."""
        for record in records:
            self.records[record.id] = record
            self._last_created = max(self._last_created, record.created)
            if record.status == protocol.QUEUED:
                self._queue.append(record.id)
        self._gauges()
        if self._queue:
            self._wake.set()

    # -- views ----------------------------------------------------------------------------------------------------
    @property
    def queued(self) -> int:
        """Jobs waiting to run."""
        return len(self._queue)

    @property
    def held(self) -> int:
        """Jobs counted against capacity: queued, processing, and submissions being made durable."""
        return len(self._queue) + (self.processing is not None) + self._reserved

    def get(self, job_id: str) -> Record:
        """A job's record; 404 when there is none (or it is being acknowledged away)."""
        record = self.records.get(job_id)
        if record is None or job_id in self._removing:
            raise protocol.not_found(f"job {job_id!r}")
        return record

    def run_order(self) -> list[Record]:
        """The processing job, then the queued ones in the order they will run."""
        jobs = [self.processing] if self.processing is not None else []
        return jobs + [self.records[i] for i in self._queue]

    def retry_after(self) -> int:
        """Seconds a refused caller should wait: about one job's duration."""
        return max(RETRY_AFTER_MIN, min(RETRY_AFTER_MAX, math.ceil(self._mean_seconds)))

    # -- intake ---------------------------------------------------------------------------------------------------
    async def reserve(self, operation: str, model: str, key: str) -> Reservation | Record:
        """Admit a submission: the existing job when its key names one (a replay, answered whatever the load), or a
        reserved slot. Raises ApiError for an unknown operation or model (400) or when refusing new jobs (429)."""
        job_id = protocol.job_id(model, operation, key)
        while True:
            existing = self.records.get(job_id)
            if existing is not None and job_id not in self._removing:
                self.metrics.jobs_replayed.inc()
                return existing
            removing = self._removing.get(job_id)
            if removing is not None:
                # The key's previous job is being acked away: its folder still exists, so creating the new job now
                # would fail (507), or succeed and then be dropped from the board by the ack finishing after it.
                await removing.wait()
                continue
            pending = self._pending.get(job_id)
            if pending is None:
                break
            # The same key is being submitted right now: answer with that job once it is durable, or, if that
            # submission failed, try afresh.
            record = await asyncio.shield(pending)
            if record is not None:
                self.metrics.jobs_replayed.inc()
                return record
        try:
            if (model, operation) not in self._served:
                served = ", ".join(f"{m}/{o}" for m, o in self.models) or "none"
                raise protocol.bad_request(f"no model {model!r} with operation {operation!r} here; served: {served}")
            if self.draining:
                raise protocol.busy("the worker is stopping", RETRY_AFTER_CLOSED)
            if not self.intake_open:
                raise protocol.busy("intake is closed", RETRY_AFTER_CLOSED)
            if self.held >= self.capacity:
                raise protocol.busy(f"the worker holds {self.held} of {self.capacity} jobs", self.retry_after())
        except ApiError as exc:
            self.metrics.jobs_rejected.labels(exc.code).inc()
            raise
        self._reserved += 1
        if key:
            self._pending[job_id] = asyncio.get_running_loop().create_future()
        return Reservation(job_id, operation, model, keyed=bool(key))

    def release(self, reservation: Reservation) -> None:
        """Give a reserved slot back (the submission failed before it was stored)."""
        if reservation.done:
            return
        reservation.done = True
        self._reserved -= 1
        pending = self._pending.pop(reservation.job_id, None)
        if pending is not None and not pending.done():
            pending.set_result(None)

    async def commit(
        self, reservation: Reservation, input_json: str, staging: Path | None = None, files: Sequence[Path] = ()
    ) -> Record:
        """Make the reserved job durable and queue it. Raises ApiError 507 when the store cannot keep it."""
        # Shielded: once the write is under way the job may reach the disk, so the board must learn of it even if
        # the request's task is cancelled; otherwise a restart would find a job nobody had counted.
        return await asyncio.shield(self._commit(reservation, input_json, staging, files))

    async def _commit(
        self, reservation: Reservation, input_json: str, staging: Path | None, files: Sequence[Path]
    ) -> Record:
        record = protocol.new_record(
            reservation.job_id, reservation.operation, reservation.model, input_json, self._next_created()
        )
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            await self.store.create(record, staging, files)
        except StorageError as exc:
            self.release(reservation)
            self.metrics.jobs_rejected.labels(protocol.WORKER_STORAGE).inc()
            raise protocol.storage_error(f"the job could not be stored: {exc}") from exc
        self.metrics.store_commit.observe(loop.time() - began)
        reservation.done = True
        self._reserved -= 1
        self.records[record.id] = record
        self._queue.append(record.id)
        pending = self._pending.pop(record.id, None)
        if pending is not None and not pending.done():
            pending.set_result(record)
        self.metrics.jobs_created.inc()
        self._gauges()
        self._wake.set()
        # A snapshot for the 202: the executor may take the job before the caller's task resumes.
        return msgspec.structs.replace(record)

    def _next_created(self) -> int:
        # `created` orders the queue across restarts, so it must be strictly increasing: two jobs in one millisecond
        # get consecutive values. Drift needs a sustained 1,000+ jobs/s, and it heals once the rate drops.
        self._last_created = max(protocol.now_ms(), self._last_created + 1)
        return self._last_created

    def set_intake(self, open_: bool) -> None:
        """Open or close intake (new jobs only: queued jobs still run)."""
        self.intake_open = open_
        self.metrics.intake_open.set(1 if open_ else 0)

    # -- cancel and ack -------------------------------------------------------------------------------------------
    async def cancel(self, job_id: str) -> Record:
        """DELETE: a queued job ends cancelled at once; a processing one is asked to stop (cancel: true, persisted);
        a finished one is returned unchanged."""
        record = self.get(job_id)
        if record.status == protocol.QUEUED:
            self._queue.remove(job_id)
            await self._end(record, failure=protocol.failed(protocol.WORKER_CANCELLED, "cancelled before it ran"))
        elif record.status == protocol.PROCESSING and not record.cancel:
            record.cancel = True
            self._fire_cancel(job_id, protocol.WORKER_CANCELLED)
            await self._save(record)
        return record

    async def ack(self, job_id: str) -> Record:
        """Free a finished job: its folder is removed; a second ack is 404. 409 for a job not finished yet."""
        record = self.get(job_id)
        if not record.finished:
            raise ApiError(409, protocol.WORKER_NOT_FINISHED, f"job {job_id} is {record.status}; ack a finished job")
        await self._remove(record)
        record.acknowledged = True
        return record

    async def _remove(self, record: Record) -> None:
        removed = self._removing[record.id] = asyncio.Event()
        try:
            await self.store.remove(record.id)
        except StorageError as exc:
            raise protocol.storage_error(f"job {record.id} could not be removed: {exc}") from exc
        else:
            if self.records.get(record.id) is record:
                del self.records[record.id]
        finally:
            del self._removing[record.id]
            removed.set()
        self.metrics.jobs_stored.set(len(self.records))

    async def sweep(self, older_than_ms: int) -> int:
        """Remove finished, unacknowledged jobs that finished before `older_than_ms`; returns how many."""
        stale = [r for r in self.records.values() if r.finished and r.completed < older_than_ms]
        for record in stale:
            if record.id in self.records and record.id not in self._removing:
                try:
                    await self._remove(record)
                except ApiError:
                    log.exception("retention: job %s could not be removed; retrying at the next sweep", record.id)
        return len(stale)

    # -- the executor's side --------------------------------------------------------------------------------------
    async def next_job(self) -> Record | None:
        """The next queued job, now processing (durably); waits for one. None once the board stops."""
        while not self._stopped:
            if self._queue:
                job_id = self._queue.popleft()
                record = self.records[job_id]
                record.status = protocol.PROCESSING
                record.stage = protocol.STAGE_INITIALIZING
                record.started = protocol.now_ms()
                self.processing = record
                self._gauges()
                self.metrics.queue_wait.observe(max(0, record.started - record.created) / 1000)
                try:
                    await self._save(record)
                except StorageError as exc:
                    await self.finish(record, failure=protocol.failed(protocol.WORKER_STORAGE, str(exc)))
                    continue
                return record
            self._wake.clear()
            await self._wake.wait()
        return None

    def stop(self) -> None:
        """No job starts after this (queued ones stay queued on disk for the next start)."""
        self._stopped = True
        self._wake.set()

    def on_cancel(self, job_id: str, hook: Callable[[str], None]) -> None:
        """Call `hook(code)` when the processing job is cancelled: WORKER_CANCELLED (DELETE) or WORKER_INTERRUPTED
        (the worker stops)."""
        self._cancel_hooks.setdefault(job_id, []).append(hook)

    def interrupt(self) -> None:
        """Stop the processing job because the worker stops (it ends WORKER_INTERRUPTED)."""
        if self.processing is not None:
            self._fire_cancel(self.processing.id, protocol.WORKER_INTERRUPTED)

    def _fire_cancel(self, job_id: str, code: str) -> None:
        for hook in self._cancel_hooks.get(job_id, ()):
            try:
                hook(code)
            except Exception:
                log.exception("cancel hook of job %s failed", job_id)

    def progress(self, record: Record, stage: str, step: int, total: int, remaining: float) -> bool:
        """Keep a processing job's progress (memory only); False once it was cancelled."""
        record.stage = stage
        record.step = step
        record.total = total
        record.remaining = remaining
        return not record.cancel

    async def finish(
        self, record: Record, *, outputs: Sequence[str] = (), failure: Failure | None = None, files: Sequence[Path] = ()
    ) -> None:
        """Keep how the processing job ended: its outputs (durable before the record says completed), or why not."""
        self._cancel_hooks.pop(record.id, None)
        # The slot frees as the status changes (not after the write), so a caller who sees the job finished also
        # sees its capacity back; the runner starts the next job only after this returns, so one runs at a time.
        if self.processing is record:
            self.processing = None
        await self._end(record, outputs=outputs, failure=failure, files=files)

    async def _end(
        self, record: Record, *, outputs: Sequence[str] = (), failure: Failure | None = None, files: Sequence[Path] = ()
    ) -> None:
        now = protocol.now_ms()
        if failure is None:
            record.status = protocol.COMPLETED
            record.output = list(outputs)
        else:
            record.status = protocol.CANCELLED if failure.code == protocol.WORKER_CANCELLED else protocol.FAILED
            record.output = []
            record.code = failure.code
            record.error = failure.message
            record.error_status = failure.status
        record.completed = now
        record.stage = ""
        record.remaining = 0.0
        try:
            await self._save(record, files)
        except StorageError as exc:
            # The outputs could not be made durable: say so, and try once more to record that much.
            log.error("job %s: could not store its end: %s", record.id, exc)
            record.status, record.output = protocol.FAILED, []
            record.code, record.error, record.error_status = protocol.WORKER_STORAGE, str(exc), 500
            try:
                await self._save(record)
            except StorageError:
                log.error("job %s: the store is failing; its end is kept in memory only", record.id)
        seconds = (now - (record.started or record.created)) / 1000
        if record.started:
            self.metrics.job_duration.observe(seconds)
            # An exponential mean: recent jobs say more about the next wait than old ones.
            self._mean_seconds = seconds if not self._mean_seconds else 0.8 * self._mean_seconds + 0.2 * seconds
        self.metrics.jobs_finished.labels(record.status, record.code).inc()
        self._gauges()
        line = f"{record.id} {record.operation} {record.status} {seconds:.3f}s"
        try:
            self.journal(f"{line} {record.code}" if record.code else line)
        except Exception:
            log.exception("the journal failed")

    async def _save(self, record: Record, files: Sequence[Path] = ()) -> None:
        loop = asyncio.get_running_loop()
        began = loop.time()
        await self.store.save(record, files)
        self.metrics.store_commit.observe(loop.time() - began)

    def _gauges(self) -> None:
        self.metrics.jobs_queued.set(len(self._queue))
        self.metrics.jobs_processing.set(0 if self.processing is None else 1)
        self.metrics.jobs_stored.set(len(self.records))

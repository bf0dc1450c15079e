"""The job board: every job's state, the run queue, capacity and intake, and the only code that changes a record.

All of it runs on the event loop, so a change is atomic between awaits. A change of status is written first and
applied to the record in memory only once it is durable, so what GET shows is what a restart would read back; a write
that fails changes nothing (the store undoes its partial files). A new job enters the board only once it is durable,
so a job a caller has an id for survives a crash. Progress (stage, step, total, remaining) is kept in memory only: a
restart fails a processing job anyway, so its progress would be stale the moment it was read back, and writing it per
token would cost a disk flush per token.

A storage fault (disk full, I/O error) never ends a job. While the store refuses writes, no job starts, intake
answers 507, and health says why; a job whose end cannot be written waits, still processing, until it can. The board
probes the store with backoff and resumes by itself once a write succeeds again.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from modelhost.jobs import schema
from modelhost.jobs.metrics import JobMetrics
from modelhost.jobs.schema import ApiError, Failure, Record
from modelhost.jobs.store import JobStore, StorageError

log = logging.getLogger(__name__)

#: Retry-After (seconds) while intake is closed: an operator closed it on purpose, so asking again every second
#: would only add load; half a minute is a fair poll for a maintenance window.
RETRY_AFTER_CLOSED = 30
#: Bounds of the Retry-After given at capacity (the mean job duration, clamped): at least one second so a client
#: does not spin, at most a minute so a long job does not park callers that could have come back sooner.
RETRY_AFTER_MIN, RETRY_AFTER_MAX = 1, 60
#: After a failed write the store is probed again after this long, doubling per failure up to the maximum. The first
#: retry is quick because a transient error often clears at once; a full disk waits for an operator, and polling it
#: more often than every few seconds only fills the log. The maximum is every 507's Retry-After (protocol).
STORAGE_RETRY_MIN_SECONDS, STORAGE_RETRY_MAX_SECONDS = 0.1, float(schema.STORAGE_RETRY_AFTER)

Journal = Callable[[str], None]
#: Checks a submitted input the way its operation will read it; raises schema.Failure for one it would refuse.
InputCheck = Callable[[Any], None]


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
        metrics: JobMetrics,
        journal: Journal = print_journal,
        input_checks: Mapping[str | tuple[str, str], InputCheck] | None = None,
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        """`input_checks` maps an operation, or a (model, operation) pair where the check reads the model, to the
        check of its input made at submission (400 for a bad one). `aliases` maps other names of a served model
        (the catalogue name it was started with, such as `default`) to its name, as the HTTP door takes them."""
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.store = store
        self.capacity = capacity
        self.models = list(models)
        self._served = frozenset(self.models)
        self.metrics = metrics
        self.journal = journal
        self.input_checks = dict(input_checks or {})
        self.aliases = dict(aliases or {})
        self.records: dict[str, Record] = {}
        self.intake_open = True
        self.draining = False
        # The jobs running now, in the order they started (several at once where the model decodes several).
        self.running: dict[str, Record] = {}
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
        # Why the store refuses writes ("" while it takes them), and the event the executor waits on meanwhile.
        self.storage_error = ""
        self._writable = asyncio.Event()
        self._writable.set()
        self._recovery: asyncio.Task[None] | None = None
        self._settling: asyncio.Task[None] | None = None  # writes the ends a full disk kept from the last run
        # The first wait of the next probe round: it keeps doubling across rounds until a job's own write succeeds,
        # because a probe can pass while a bigger write (a job's outputs) still fails, and each round reruns that job.
        self._retry_delay = STORAGE_RETRY_MIN_SECONDS
        # Jobs whose end is being written: a DELETE meanwhile must not write `cancel` over the end.
        self._ending: set[str] = set()
        # Queued jobs a DELETE is cancelling -> set once their end is written (or the write failed).
        self._cancelling: dict[str, asyncio.Event] = {}
        metrics.capacity.set(capacity)
        metrics.intake_open.set(1)
        metrics.storage_writable.set(1)

    # -- restore --------------------------------------------------------------------------------------------------
    def load(self, records: Iterable[Record]) -> None:
        """Take the store's restored records (queued ones in creation order). A record still processing is a job
        the last run left processing whose interrupted end the store could not write (a full disk): it shows as
        processing, as on disk, and its end is written, like any other end, once the store takes writes."""
        unwritten = []
        for record in records:
            self.records[record.id] = record
            self._last_created = max(self._last_created, record.created)
            if record.status == schema.QUEUED:
                self._queue.append(record.id)
            elif record.status == schema.PROCESSING:
                self.running[record.id] = record
                unwritten.append(record)
        self._gauges()
        if self._queue:
            self._wake.set()
        if unwritten:
            self._settling = asyncio.get_running_loop().create_task(self._settle(unwritten), name="worker-settle")

    async def _settle(self, records: Sequence[Record]) -> None:
        interrupted = schema.failed(schema.WORKER_INTERRUPTED, "the worker stopped while this job was processing")
        for record in records:
            await self.finish(record, failure=interrupted)

    # -- views ----------------------------------------------------------------------------------------------------
    @property
    def queued(self) -> int:
        """Jobs waiting to run."""
        return len(self._queue)

    @property
    def held(self) -> int:
        """Jobs counted against capacity: queued, processing, and submissions being made durable."""
        return len(self._queue) + len(self.running) + self._reserved

    def canonical(self, model: str) -> str:
        """The served name of `model` (itself, or what it is an alias of)."""
        return self.aliases.get(model, model)

    def input_check(self, model: str, operation: str) -> InputCheck | None:
        """The submission check of `operation` on `model`: the pair's own, else the operation's; None: none."""
        return self.input_checks.get((self.canonical(model), operation)) or self.input_checks.get(operation)

    def get(self, job_id: str) -> Record:
        """A job's record; 404 when there is none (or it is being acknowledged away)."""
        record = self.records.get(job_id)
        if record is None or job_id in self._removing:
            raise schema.not_found(f"job {schema.shown(job_id)}")
        return record

    @property
    def processing(self) -> int:
        """Jobs running now."""
        return len(self.running)

    def run_order(self) -> list[Record]:
        """The processing jobs (oldest start first), then the queued ones in the order they will run."""
        return [*self.running.values(), *(self.records[i] for i in self._queue)]

    def retry_after(self) -> int:
        """Seconds a refused caller should wait: about one job's duration."""
        return max(RETRY_AFTER_MIN, min(RETRY_AFTER_MAX, math.ceil(self._mean_seconds)))

    # -- intake ---------------------------------------------------------------------------------------------------
    async def reserve(self, operation: str, model: str, key: str) -> Reservation | Record:
        """Admit a submission: the existing job when its key names one (a replay, answered whatever the load), or a
        reserved slot. Raises ApiError for an unknown operation or model (400) or when refusing new jobs (429). A
        model named by an alias is the model itself: its job, its idempotency key and its record."""
        model = self.canonical(model)
        job_id = schema.job_id(model, operation, key)
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
                raise schema.bad_request(f"no model {model!r} with operation {operation!r} here; served: {served}")
            if self.draining:
                raise schema.busy("the worker is stopping", RETRY_AFTER_CLOSED)
            if not self.intake_open:
                raise schema.busy("intake is closed", RETRY_AFTER_CLOSED)
            if self.storage_error:
                raise schema.storage_error(self.storage_error)
            if self.held >= self.capacity:
                raise schema.busy(f"the worker holds {self.held} of {self.capacity} jobs", self.retry_after())
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
        record = schema.new_record(
            reservation.job_id, reservation.operation, reservation.model, input_json, self._next_created()
        )
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            await self.store.create(record, staging, files)
        except StorageError as exc:
            self.release(reservation)
            self.storage_failed(exc)
            self.metrics.jobs_rejected.labels(schema.WORKER_STORAGE).inc()
            raise schema.storage_error(f"the job could not be stored: {exc}") from exc
        self.metrics.store_commit.observe(loop.time() - began)
        self._storage_ok()
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
        self._last_created = max(schema.now_ms(), self._last_created + 1)
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
        if record.status == schema.QUEUED and job_id in self._cancelling:
            # Another DELETE is writing this job's end (it is out of the queue already): answer with what it wrote.
            # Three DELETEs at once made the second and third remove it from the queue again (500, not in deque).
            await self._cancelling[job_id].wait()
            return record
        if record.status == schema.QUEUED:
            # Out of the queue before the write, so the executor cannot start it meanwhile; back in if it fails.
            self._queue.remove(job_id)
            done = self._cancelling[job_id] = asyncio.Event()
            try:
                await self._end(record, failure=schema.failed(schema.WORKER_CANCELLED, "cancelled before it ran"))
            except StorageError as exc:
                self._requeue(record)
                raise schema.storage_error(f"job {job_id} could not be cancelled: {exc}") from exc
            finally:
                del self._cancelling[job_id]
                done.set()
        elif record.status == schema.PROCESSING and not record.cancel and job_id not in self._ending:
            record.cancel = True
            self._fire_cancel(job_id, schema.WORKER_CANCELLED)
            try:
                await self._save(record)
            except StorageError as exc:
                # The job stops all the same, and its end (cancelled) is written with retries like any end.
                log.warning("job %s: its cancel flag is not durable (%s); its end will be", job_id, exc)
        return record

    def _requeue(self, record: Record) -> None:
        # Creation order is run order (see _next_created), so a job put back goes where it was.
        index = next((i for i, j in enumerate(self._queue) if self.records[j].created > record.created), None)
        self._queue.insert(len(self._queue) if index is None else index, record.id)
        self._gauges()
        self._wake.set()

    async def ack(self, job_id: str) -> Record:
        """Free a finished job: its folder is removed; a second ack is 404. 409 for a job not finished yet."""
        record = self.get(job_id)
        if not record.finished:
            raise ApiError(409, schema.WORKER_NOT_FINISHED, f"job {job_id} is {record.status}; ack a finished job")
        await self._remove(record)
        record.acknowledged = True
        return record

    async def _remove(self, record: Record) -> None:
        removed = self._removing[record.id] = asyncio.Event()
        try:
            await self.store.remove(record.id)
        except StorageError as exc:
            raise schema.storage_error(f"job {record.id} could not be removed: {exc}") from exc
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
    async def next_job(self, startable: Callable[[Record], bool] | None = None) -> Record | None:
        """The next queued job that may start (`startable`, default any), now processing (durably); waits for one.
        Jobs the predicate refuses keep their place in the queue; call `nudge()` when its answer may have changed.
        None once the board stops."""
        while not self._stopped:
            job_id = next((i for i in self._queue if startable is None or startable(self.records[i])), None)
            if job_id is not None and self._writable.is_set():
                record = self.records[job_id]
                started = msgspec.structs.replace(
                    record, status=schema.PROCESSING, stage=schema.STAGE_INITIALIZING, started=schema.now_ms()
                )
                try:
                    await self._save(started)
                except StorageError:
                    continue  # still queued, in its place, as on disk; the loop waits for the store
                if job_id not in self._queue:
                    continue  # cancelled while the write was under way: its cancel was written after it
                self._queue.remove(job_id)
                _apply(record, started)
                self.running[job_id] = record
                self._gauges()
                self.metrics.queue_wait.observe(max(0, record.started - record.created) / 1000)
                return record
            # Woken by a new job, by the store taking writes again, or by stop().
            self._wake.clear()
            await self._wake.wait()
        return None

    def nudge(self) -> None:
        """Make a waiting `next_job` look at the queue again (a job it passed over may be startable now)."""
        self._wake.set()

    def stop(self) -> None:
        """No job starts after this (queued ones stay queued on disk for the next start)."""
        self._stopped = True
        self._wake.set()

    def on_cancel(self, job_id: str, hook: Callable[[str], None]) -> None:
        """Call `hook(code)` when the processing job is cancelled: WORKER_CANCELLED (DELETE) or WORKER_INTERRUPTED
        (the worker stops)."""
        self._cancel_hooks.setdefault(job_id, []).append(hook)

    def interrupt(self) -> None:
        """Stop the processing jobs because the worker stops (they end WORKER_INTERRUPTED)."""
        for job_id in list(self.running):
            self._fire_cancel(job_id, schema.WORKER_INTERRUPTED)

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
        self,
        record: Record,
        *,
        outputs: Sequence[str] = (),
        failure: Failure | None = None,
        files: Sequence[Path] = (),
        retry: bool = True,
    ) -> None:
        """Keep how the processing job ended: its outputs (durable before the record says completed), or why not.

        A storage fault does not end the job differently: the end is written again each time the store takes writes
        once more, and until then the job stays processing (as on disk) and no new job starts. `retry=False` (the
        worker is stopping) tries once; a job whose end was not written restores as WORKER_INTERRUPTED.
        """
        self._cancel_hooks.pop(record.id, None)
        self._ending.add(record.id)
        try:
            await self._end(record, outputs=outputs, failure=failure, files=files, retry=retry)
        finally:
            self._ending.discard(record.id)

    async def _end(
        self,
        record: Record,
        *,
        outputs: Sequence[str] = (),
        failure: Failure | None = None,
        files: Sequence[Path] = (),
        retry: bool = False,
    ) -> None:
        now = schema.now_ms()
        if failure is None:
            ended = msgspec.structs.replace(record, status=schema.COMPLETED, output=list(outputs))
        else:
            status = schema.CANCELLED if failure.code == schema.WORKER_CANCELLED else schema.FAILED
            ended = msgspec.structs.replace(
                record, status=status, output=[], code=failure.code, error=failure.message, error_status=failure.status
            )
        ended.completed = now
        ended.stage = ""
        ended.remaining = 0.0
        while True:
            try:
                await self._save(ended, files)
                break
            except StorageError as exc:
                if not retry or exc.errno == errno.ESHUTDOWN:
                    raise
                log.error("job %s: its end (%s) waits for the store: %s", record.id, ended.status, exc)
                await self._writable.wait()
        # The slot frees as the status changes, so a caller who sees the job finished also sees its capacity back.
        _apply(record, ended)
        if self.running.get(record.id) is record:
            del self.running[record.id]
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
        try:
            await self.store.save(record, files)
        except StorageError as exc:
            self.storage_failed(exc)
            raise
        self.metrics.store_commit.observe(loop.time() - began)
        self._retry_delay = STORAGE_RETRY_MIN_SECONDS
        self._storage_ok()

    # -- storage faults -------------------------------------------------------------------------------------------
    def storage_failed(self, exc: OSError) -> None:
        """The store refused a write (or an operation could not write its outputs): stop starting jobs, refuse
        intake (507), and probe the store with backoff until it takes writes again."""
        if isinstance(exc, StorageError) and exc.errno == errno.ESHUTDOWN:
            return  # the store is closing, not failing
        self.metrics.storage_errors.inc()
        self.storage_error = f"the state folder cannot be written: {exc.strerror or exc}"
        if self._writable.is_set():
            log.error("%s; no job starts and intake answers 507 until it can", self.storage_error)
            self._writable.clear()
            self.metrics.storage_writable.set(0)
        if self._recovery is None or self._recovery.done():
            self._recovery = asyncio.get_running_loop().create_task(self._recover(), name="worker-storage-probe")

    async def writable(self) -> None:
        """Wait until the store takes writes (at once when it does)."""
        await self._writable.wait()

    def _storage_ok(self) -> None:
        if self._writable.is_set():
            return
        log.warning("the state folder takes writes again; jobs resume")
        self.storage_error = ""
        self._writable.set()
        self.metrics.storage_writable.set(1)
        self._wake.set()

    async def _recover(self) -> None:
        while not self._writable.is_set():
            await asyncio.sleep(self._retry_delay)
            self._retry_delay = min(self._retry_delay * 2, STORAGE_RETRY_MAX_SECONDS)
            try:
                await self.store.probe()
            except StorageError as exc:
                if exc.errno == errno.ESHUTDOWN:
                    return
                self.storage_error = f"the state folder cannot be written: {exc.strerror or exc}"
            else:
                self._storage_ok()

    def close(self) -> None:
        """Stop probing the store (the worker has stopped); an interrupted end not yet written stays for next time."""
        if self._recovery is not None:
            self._recovery.cancel()
        if self._settling is not None:
            self._settling.cancel()

    def _gauges(self) -> None:
        self.metrics.jobs_queued.set(len(self._queue))
        self.metrics.jobs_processing.set(len(self.running))
        self.metrics.jobs_stored.set(len(self.records))


def _apply(record: Record, new: Record) -> None:
    """Make `record` (the object every view holds) carry the state of `new`, a durable snapshot of it."""
    for name in record.__struct_fields__:
        setattr(record, name, getattr(new, name))

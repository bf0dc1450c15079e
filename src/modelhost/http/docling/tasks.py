"""docling tasks on the job store both job doors stand on (modelhost.jobs): each task is a durable
`document.convert` job, so a task accepted before a crash (kill -9) is answered after a restart on the same state
folder, and capacity (429), a full disk (507) and cancellation behave as the job worker's.

A restart keeps queued tasks (they run) and finished ones (their results are served), and fails a task that was
being converted (`the worker stopped`), as the worker does with its jobs: a half-converted document is not resumed.
The door's store is its own folder, not the worker's (`serve --worker` may run beside it on another folder): each
store is held by one process (its lock), and the two doors' jobs are counted against their own capacity.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any, Final

import msgspec

from modelhost.host.models import Models, ServedModel
from modelhost.jobs import documents, schema
from modelhost.jobs.board import JobBoard, Journal
from modelhost.jobs.executor import Runner
from modelhost.jobs.metrics import JobMetrics
from modelhost.jobs.schema import ApiError, Record
from modelhost.jobs.store import JobStore, SyncMode

log = logging.getLogger(__name__)

OPERATION: Final = documents.OPERATION
#: How often a long poll looks at its task again besides being woken at its end (the board's journal line): a
#: safety net only, so a wake-up that was missed costs at most this much.
WAIT_STEP_SECONDS = 1.0
#: Finished tasks are kept this long unless fetched by a sync request (which removes its own), then swept: a day,
#: as the worker keeps its jobs, so a client that polls once an hour still finds its result.
RETENTION_SECONDS = 24 * 3600
#: How often finished tasks past their retention are looked for: retention is hours, a minute late is noise.
SWEEP_SECONDS = 60.0
#: How long closing lets the running conversions finish before interrupting them (their tasks then fail, `the worker
#: stopped`): a few pages on a CPU, well within a service manager's stop timeout.
DRAIN_SECONDS = 30.0
#: After interrupting, how long a conversion gets to notice (it stops between pages or within one).
INTERRUPT_SECONDS = 5.0


class DocumentTasks:
    """The door's tasks: a JobBoard of `document.convert` on one served model, its store in `state_dir`, and the
    executor that runs them. `start()` restores and starts; `aclose()` drains, as WorkerServer does."""

    def __init__(
        self,
        models: Models,
        *,
        model: str,
        state_dir: Path,
        capacity: int,
        journal: Journal | None = None,
        sync: SyncMode | None = None,
        retention_seconds: float = RETENTION_SECONDS,
    ) -> None:
        self.models = models
        self.model = models.get(model)
        self.state_dir = Path(state_dir)
        self.retention_seconds = retention_seconds
        self.drain_seconds = DRAIN_SECONDS
        self.metrics = JobMetrics()
        self.store = JobStore(self.state_dir, sync=sync)
        self._journal = journal or (lambda line: log.info("docling task %s", line))
        # Long polls and sync requests waiting for a task's end, woken by the board's journal line of that end (it
        # is written once the end is durable and applied), so a result is answered as soon as it exists.
        self._ended: dict[str, asyncio.Event] = {}
        self.board = JobBoard(
            self.store,
            capacity=capacity,
            models=[(self.model.name, OPERATION)],
            metrics=self.metrics,
            journal=self._on_end,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: asyncio.Task[None] | None = None
        self._closing = False

    def _on_end(self, line: str) -> None:
        """The board's line for a finished job (`ID OPERATION STATUS SECONDS [CODE]`): wake its waiters."""
        event = self._ended.pop(line.split(" ", 1)[0], None)
        if event is not None:
            event.set()
        self._journal(line)

    @property
    def host(self) -> ServedModel:
        """The model the tasks read page pixels with."""
        return self.model

    async def start(self) -> None:
        """Open the store (its lock: one process per folder), restore its tasks, start running them."""
        await asyncio.to_thread(self.store.open)
        records = await asyncio.to_thread(self.store.restore, schema.now_ms())
        self.board.load(records)
        self.store.start()
        self._runner = asyncio.create_task(
            Runner(self.board, self.model, {OPERATION: documents.CONVERT}).run(), name="docling-tasks"
        )
        self._tasks.append(asyncio.create_task(self._sweep(), name="docling-retention"))

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(min(SWEEP_SECONDS, max(0.05, self.retention_seconds / 10)))
            await self.board.sweep(schema.now_ms() - int(self.retention_seconds * 1000))

    async def aclose(self, grace: float | None = None) -> None:
        """Stop: no task starts, running ones get `grace` seconds (default DRAIN_SECONDS) then are interrupted,
        queued ones stay queued on disk for the next start. Idempotent."""
        if self._closing:
            return
        self._closing = True
        self.board.draining = True
        self.board.stop()
        runner = self._runner
        if runner is not None:
            done, _ = await asyncio.wait({runner}, timeout=self.drain_seconds if grace is None else grace)
            if not done:
                self.board.interrupt()
                done, _ = await asyncio.wait({runner}, timeout=INTERRUPT_SECONDS)
            if not done:
                runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
        self.board.close()
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._runner is not None:
            await self.store.aclose()

    # -- intake ---------------------------------------------------------------------------------------------------
    def staging(self) -> Path:
        """A private folder for an upload in progress (removed at start if a crash leaves it)."""
        return self.store.new_staging()

    def discard(self, staging: Path) -> None:
        """Remove a staging folder that did not become a task."""
        import shutil

        shutil.rmtree(staging, ignore_errors=True)

    async def submit(self, staging: Path, stored: str, filename: str, content_type: str, job: dict[str, Any]) -> Record:
        """Make a task of the upload `staging/inputs/<stored>`: durable before this returns (the staging folder
        becomes the job's). `job` is the rest of the job's input (pages, text_layer, pixels, docling). Raises
        worker ApiError: 429 at capacity or while stopping, 507 when the store cannot keep it."""
        admitted = await self.board.reserve(OPERATION, self.model.name, "")
        if isinstance(admitted, Record):  # only with an idempotency key, which docling has not
            return admitted
        try:
            path = self.store.inputs_dir(admitted.job_id) / stored
            value = {"document": schema.input_file(filename, content_type, str(path)), **job}
            input_json = msgspec.json.encode(value).decode()
            return await self.board.commit(admitted, input_json, staging, [staging / "inputs" / stored])
        finally:
            self.board.release(admitted)

    # -- views ----------------------------------------------------------------------------------------------------
    def get(self, task_id: str) -> Record:
        """The task's record; worker ApiError 404 for none."""
        return self.board.get(task_id)

    def position(self, record: Record) -> int | None:
        """Where a queued task is in the queue, from 1 (docling-serve's task_position); None once it runs."""
        if record.status != schema.QUEUED:
            return None
        queued = [r.id for r in self.board.run_order() if r.status == schema.QUEUED]
        return queued.index(record.id) + 1 if record.id in queued else None

    async def wait(self, task_id: str, seconds: float) -> Record:
        """The task's record once it is finished, or after `seconds`, whichever comes first (a long poll)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, seconds)
        record = self.get(task_id)
        while not record.finished and loop.time() < deadline:
            event = self._ended.setdefault(task_id, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(WAIT_STEP_SECONDS, max(0.0, deadline - loop.time())))
            record = self.get(task_id)
        return record

    def outputs(self, record: Record) -> Path:
        """The folder a finished task's outputs are in."""
        return self.store.outputs_dir(record.id)

    async def forget(self, task_id: str) -> None:
        """Remove a finished task and its files (a sync request's own task, once answered)."""
        with contextlib.suppress(ApiError):
            await self.board.ack(task_id)

    async def cancel(self, task_id: str) -> Record:
        """Cancel a task (a sync request whose client went away): queued, it ends at once; running, it stops."""
        return await self.board.cancel(task_id)

    @property
    def storage_error(self) -> str:
        """Why the store refuses writes, "" while it takes them."""
        return self.board.storage_error

    def close_intake(self) -> None:
        """No new task (a stop began)."""
        self.board.draining = True


__all__ = ["OPERATION", "DocumentTasks"]

"""The executor: runs jobs through the operations it is given (name -> Operation record), as many at once as the
model decodes at once (the host's batch slots), so worker jobs share the batch with each other and with the other
doors; at most one at a time of an `exclusive` operation. It knows no operation: each door hands it its own (the
worker's `registry`, the docling door's one `document.convert`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path

from modelhost.host.models import Servable, ServedModel
from modelhost.jobs import schema
from modelhost.jobs.board import JobBoard
from modelhost.jobs.operation import JobContext, Operation, Work
from modelhost.jobs.schema import Failure, Record, failed, invalid

log = logging.getLogger(__name__)

#: Errors of writing an operation's outputs that are the disk's fault, not the job's: the job is run again once the
#: store takes writes, instead of ending failed for a result it did compute.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})


class Runner:
    """Takes jobs from the board in run order and runs each through its operation, up to `concurrency` at once
    (None: the host's batch slots, read each time a job could start, since they are known only once it loaded),
    and at most one at a time of each exclusive operation (Operation.exclusive)."""

    def __init__(
        self,
        board: JobBoard,
        host: Servable,
        operations: Mapping[str, Operation],
        concurrency: int | None = None,
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.board = board
        self.host = host
        self.operations = dict(operations)
        self.concurrency = concurrency
        self.exclusive = frozenset(name for name, op in self.operations.items() if op.exclusive)
        self._exclusive_running: set[str] = set()

    def _startable(self, record: Record) -> bool:
        return record.operation not in self._exclusive_running

    def _limit(self) -> int:
        return self.concurrency if self.concurrency is not None else max(1, self.host.slots)

    async def run(self) -> None:
        """Run jobs until the board stops; then let the running ones end. Cancelled (the worker stops for good),
        it cancels them, and each ends WORKER_INTERRUPTED."""
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                # A job is taken from the queue only when it can start: one taken early would show processing
                # while it waits, and could not be cancelled as a queued one.
                while len(tasks) >= self._limit():
                    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                record = await self.board.next_job(self._startable)
                if record is None:
                    break
                task = asyncio.create_task(self.run_one(record), name=f"worker-job-{record.id}")
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                if record.operation in self.exclusive:
                    self._exclusive_running.add(record.operation)
                    task.add_done_callback(functools.partial(self._exclusive_done, record.operation))
            if tasks:
                await asyncio.wait(tasks)
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks)

    def _exclusive_done(self, operation: str, _task: asyncio.Task[None]) -> None:
        self._exclusive_running.discard(operation)
        self.board.nudge()  # a job of the same operation may be waiting for this one

    async def run_one(self, record: Record) -> None:
        """Run one processing job to its end, whatever happens (the board always learns how it ended).

        A job whose outputs cannot be written for want of disk is not ended by it: its partial outputs are removed,
        and it runs again, still processing, once the store takes writes."""
        out = self.board.store.outputs_dir(record.id)
        try:
            while True:
                try:
                    names, files = await self._attempt(record, out)
                except OSError as exc:
                    if exc.errno not in STORAGE_ERRNOS:
                        raise
                    log.error(
                        "job %s: its outputs could not be written (%s); it runs again when they can", record.id, exc
                    )
                    await asyncio.to_thread(shutil.rmtree, out, True)
                    self.board.storage_failed(exc)
                    await self.board.writable()
                    continue
                break
        except Failure as failure:
            await self.board.finish(record, failure=failure)
        except asyncio.CancelledError:
            # One try only: the worker is stopping, and a job whose end is not written restores as interrupted.
            with contextlib.suppress(OSError):
                await asyncio.shield(
                    self.board.finish(
                        record, failure=failed(schema.WORKER_INTERRUPTED, "the worker stopped"), retry=False
                    )
                )
            raise
        except Exception as exc:
            log.exception("job %s (%s) failed", record.id, record.operation)
            await self.board.finish(record, failure=failed(schema.WORKER_FAILED, f"{type(exc).__name__}: {exc}"))
        else:
            await self.board.finish(record, outputs=names, files=files)

    def _host_for(self, record: Record) -> Servable:
        """The model a job names: of the served set (the board admitted only served names), loading it if it is
        unloaded; or the one host."""
        if not isinstance(self.host, ServedModel):
            return self.host
        served = self.host.models.get(record.model)
        served.load()
        return served

    async def _attempt(self, record: Record, out: Path) -> tuple[list[str], list[Path]]:
        try:
            value = json.loads(record.input)
        except ValueError as exc:
            raise invalid(f"the input is not JSON: {exc}") from exc
        ctx = JobContext(
            self.board, record, Work(record.id, record.operation, record.model, value, out), self._host_for(record)
        )
        if ctx.cancelled:
            raise ctx.stopped()
        operation = self.operations.get(record.operation)
        if operation is None:
            raise invalid(f"no operation {record.operation!r}; known: {', '.join(sorted(self.operations))}")
        await asyncio.to_thread(out.mkdir, exist_ok=True)
        names = await operation.run(ctx)
        return names, _check_outputs(out, names)


def _check_outputs(out: Path, names: list[str]) -> list[Path]:
    files = []
    for name in names:
        if not schema.safe_file_name(name) or not (out / name).is_file():
            raise failed(schema.WORKER_FAILED, f"the operation reported an output {name!r} it did not write")
        files.append(out / name)
    return files

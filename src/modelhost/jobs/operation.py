"""What an operation is: one record (`Operation`: its name, the check of its input at submission, the coroutine
that runs a job, and whether it runs alone), and what a running job gets (`JobContext`).

An operation's `run` gets a JobContext (the seed's Work, plus `progress` and the host) and returns the names of the
output files it wrote in `ctx.dir`, or raises a schema.Failure: `invalid(...)` for the job's own input (400),
`failed(code, ...)` for the worker's (500). Anything else it raises is WORKER_FAILED with the message, and the
worker carries on with the next job.

Model work goes through the host's scheduler only (`submit_to_host`): the worker is one door among several, and the
host is the one place that queues, cancels and measures model work. Closing a request's stream cancels it; that
is how DELETE stops a processing job within one token.

Each operation module defines its records: `documents` here (both job doors run it), the worker's own in
modelhost.worker (`text`, `embeddings`, `training`), whose `registry` lists the worker's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from modelhost.errors import ModelHostError, QueueFullError, kind_of, kind_of_code
from modelhost.host.models import Servable, ServedModel
from modelhost.jobs import schema
from modelhost.jobs.board import JobBoard
from modelhost.jobs.schema import Failure, Record, failed, invalid

T = TypeVar("T")

#: While the host's queue is full (other doors share it), a job waits this long before asking again: short enough
#: to take a free slot promptly, long enough not to spin.
HOST_RETRY_SECONDS = 0.05


def host_failure(code: str, message: str) -> Failure:
    """The job's failure for a modelhost error known by its code (a host's Failed event, an actor's error): the
    worker class its kind declares (modelhost.errors, the table every door reads)."""
    return _failure(kind_of_code(code).worker_class, code, message)


def failure_of(exc: ModelHostError, message: str | None = None) -> Failure:
    """The job's failure for a modelhost exception: the worker class its kind declares (its class's, or for a code
    given at construction, that code's), saying `message` (the exception's own by default)."""
    return _failure(kind_of(exc).worker_class, exc.code, str(exc) if message is None else message)


def _failure(worker_class: str, code: str, message: str) -> Failure:
    """The job's own input is WORKER_INVALID_INPUT (400) with the message; the rest is the worker's (500), the
    message after the code. A "retry later" (WORKER_BUSY) that comes once the work has begun cannot be retried:
    WORKER_FAILED."""
    if worker_class == schema.WORKER_INVALID_INPUT:
        return invalid(message)
    return failed(schema.WORKER_FAILED if worker_class == schema.WORKER_BUSY else worker_class, f"{code}: {message}")


@dataclass(frozen=True, slots=True)
class Work:
    """A job for an operation (the seed's Work): its input (files as `$inputFile`) and the folder for its outputs."""

    id: str
    operation: str
    model: str
    input: Any
    dir: Path


class JobContext:
    """What an operation gets: the work, the host, and progress/cancel plumbing to the board."""

    def __init__(self, board: JobBoard, record: Record, work: Work, host: Servable) -> None:
        self.board = board
        self.record = record
        self.work = work
        self.host = host
        self.cancel_code = ""  # WORKER_CANCELLED or WORKER_INTERRUPTED once cancelled
        self._hooks: list[Callable[[], None]] = []
        board.on_cancel(record.id, self._cancelled)
        if record.cancel:
            self.cancel_code = schema.WORKER_CANCELLED

    @property
    def dir(self) -> Path:
        """The folder the outputs go into."""
        return self.work.dir

    @property
    def cancelled(self) -> bool:
        """True once the job was cancelled (DELETE) or interrupted (the worker stops)."""
        return bool(self.cancel_code)

    def progress(self, stage: str, step: int = 0, total: int = 0, remaining: float = 0.0) -> bool:
        """Tell giz where the job is; False once it was cancelled (stop, then raise `self.stopped()`)."""
        return self.board.progress(self.record, stage, step, total, remaining) and not self.cancelled

    def on_cancel(self, hook: Callable[[], None]) -> None:
        """Call `hook()` when the job is cancelled (at once if it already was)."""
        if self.cancelled:
            hook()
        else:
            self._hooks.append(hook)

    def stopped(self) -> Failure:
        """The failure a cancelled job ends with."""
        if self.cancel_code == schema.WORKER_INTERRUPTED:
            return failed(schema.WORKER_INTERRUPTED, "the worker stopped while this job was processing")
        return failed(schema.WORKER_CANCELLED, "cancelled while processing")

    def _cancelled(self, code: str) -> None:
        if self.cancel_code:
            return
        self.cancel_code = code
        for hook in self._hooks:
            hook()


RunJob = Callable[[JobContext], Awaitable[list[str]]]
"""An operation's runner: runs one job, returns the names of its outputs in `ctx.dir`, or raises a Failure."""

CheckInput = Callable[[Any, Servable], None]
"""An operation's check of a job's input at submission, on the model the job names: raises `invalid(...)` (the
submission is answered 400) before the job is stored; the runner checks again when the job runs."""


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation the worker serves: `name` (what a job's `operation` says), `run`, `check` (None: the input is
    read only when the job runs), and `exclusive`: at most one job of it runs at a time (an operation that holds a
    heavy resource of its own for its whole run, beyond the host's batch slots)."""

    name: str
    run: RunJob
    check: CheckInput | None = None
    exclusive: bool = False


def bound(operation: Operation, **resources: Any) -> Operation:
    """`operation` with `resources` given to its runner and its check as keyword arguments (what a worker holds
    beside its model: the cluster of `serve --worker --ray`)."""
    check = functools.partial(operation.check, **resources) if operation.check is not None else None
    return Operation(operation.name, functools.partial(operation.run, **resources), check, operation.exclusive)


async def submit_to_host(
    ctx: JobContext, submit: Callable[[], T], precheck: Callable[[], Awaitable[None]] | None = None
) -> T:
    """`submit()` (a request to the job's host), retried while the model loads or the host's queue is full, with
    the job's stage saying which; the host's refusal of the job's own input is the job's fault (invalid). A model
    of a set counts as in use meanwhile: a keep-alive of 0 unloaded it between its load and the next retry.
    `precheck` (the host's `precheck` of the same request) runs before each `submit()`, so the request's own checks
    (a JSON Schema's grammar compiled and bounded) run on a worker thread, never on the event loop or the model's."""
    held = ctx.host.in_use() if isinstance(ctx.host, ServedModel) else contextlib.nullcontext()
    with held:
        return await _submit_retrying(ctx, submit, precheck)


async def _submit_retrying(
    ctx: JobContext, submit: Callable[[], T], precheck: Callable[[], Awaitable[None]] | None
) -> T:
    while True:
        if ctx.cancelled:
            raise ctx.stopped()
        state = ctx.host.state
        if state in ("new", "loading"):
            ctx.progress(schema.STAGE_LOADING_MODEL)
            await asyncio.sleep(HOST_RETRY_SECONDS)
            continue
        try:
            if precheck is not None:
                await precheck()
            return submit()
        except ModelHostError as exc:
            if kind_of(exc).worker_class != schema.WORKER_BUSY:
                raise failure_of(exc) from exc
            # Retry later (a full queue other doors share, a model loading or waiting for memory): the job asks again.
            ctx.progress(schema.STAGE_INITIALIZING if isinstance(exc, QueueFullError) else schema.STAGE_LOADING_MODEL)
            await asyncio.sleep(HOST_RETRY_SECONDS)

"""The host's live state as the page shows it: one JSON value built from the host's own objects (the model set, each
model's Host, its HostMetrics, the job boards), never by parsing /metrics.

    state = LiveState(models)
    state.add_jobs("docling", door.tasks.board)   # and the worker's board, where `serve --worker` runs one
    await state.start()                           # samples throughput every SAMPLE_SECONDS
    snapshot = state.snapshot()                   # what GET /ui/api/state answers and the event stream pushes

Throughput over the last minutes comes from the host's cumulative counters (tokens generated, time to first token's
sum and count), sampled on a timer into a bounded ring per model: each point is the difference between two samples,
so it says what happened in that interval, whatever the process did before.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modelhost.host.models import Models, ServedModel

if TYPE_CHECKING:  # the job worker's package costs half a second to import: only a server with jobs needs it
    from modelhost.jobs.board import JobBoard
    from modelhost.jobs.schema import Record

#: How often throughput is sampled: the chart's resolution. Requests last seconds, so finer points are mostly zero,
#: and a sample reads a few counters (microseconds).
SAMPLE_SECONDS = 5.0
#: How much history the chart shows: the "last minutes" an operator asks about when a request felt slow.
WINDOW_SECONDS = 300.0
#: Samples kept per model: the window at the sampling rate (60 points, a few KB per model).
MAX_POINTS = int(WINDOW_SECONDS / SAMPLE_SECONDS)
#: The shortest interval the live point (latest sample to now) is shown for: a shorter one's tokens/s is noise.
LIVE_SECONDS = 1.0
#: Jobs shown, newest first: a store may hold thousands of finished jobs for a day; the page needs the ones running,
#: queued and just finished, and a snapshot pushed every second must stay small.
MAX_JOBS_SHOWN = 50
#: The finish reasons the host counts (host/metrics.py's request_success): shown so a cancel is visible as one.
FINISH_REASONS = ("stop", "length", "cancelled")


@dataclass(frozen=True, slots=True)
class _Sample:
    at: float  # time.time(): the page draws wall-clock times
    tokens: float
    ttft_sum: float
    ttft_count: float


class LiveState:
    """The model set's state, throughput history and the jobs of the boards it was given, as JSON-ready dicts."""

    def __init__(self, models: Models) -> None:
        self.models = models
        self._boards: dict[str, JobBoard] = {}
        self._samples: dict[str, deque[_Sample]] = {}
        self._task: asyncio.Task[None] | None = None

    def add_jobs(self, source: str, board: JobBoard) -> None:
        """Show `board`'s jobs (under `source`: `docling`, `worker`) and let the page cancel them."""
        self._boards[source] = board

    async def start(self) -> None:
        """Start sampling throughput (idempotent)."""
        if self._task is None:
            self.sample()
            self._task = asyncio.create_task(self._sampler(), name="modelhost-ui-sampler")

    async def aclose(self) -> None:
        """Stop sampling."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _sampler(self) -> None:
        while True:
            await asyncio.sleep(SAMPLE_SECONDS)
            self.sample()

    # -- throughput -----------------------------------------------------------------------------------------------
    def sample(self) -> None:
        """Record each model's counters now (the sampler calls this; a test may too)."""
        now = time.time()
        for name in self.models.names:
            ring = self._samples.setdefault(name, deque(maxlen=MAX_POINTS + 1))
            ring.append(self._counters(name, now))

    def _counters(self, name: str, now: float) -> _Sample:
        registry = self.models.metrics.registry
        labels = {"model_name": name}

        def value(sample: str) -> float:
            return registry.get_sample_value(sample, labels) or 0.0

        return _Sample(
            now,
            value("modelhost_generation_tokens_total"),
            value("modelhost_time_to_first_token_seconds_sum"),
            value("modelhost_time_to_first_token_seconds_count"),
        )

    def history(self, name: str) -> list[dict[str, Any]]:
        """One point per sampling interval of the window, and a last one from the latest sample to now (once it is
        LIVE_SECONDS long, so the chart moves while a request runs): its end (`t`, epoch seconds), its length
        (`seconds`), tokens per second over it, and the mean time to first token of the requests whose first token
        came in it (None: there were none)."""
        ring = list(self._samples.get(name, ()))
        if ring and time.time() - ring[-1].at >= LIVE_SECONDS:
            ring.append(self._counters(name, time.time()))
        points = []
        for before, after in itertools.pairwise(ring):
            span = after.at - before.at
            firsts = after.ttft_count - before.ttft_count
            points.append({
                "t": round(after.at, 3),
                "seconds": round(span, 3),
                "tokens_per_second": round((after.tokens - before.tokens) / span, 3) if span > 0 else 0.0,
                "ttft_seconds": round((after.ttft_sum - before.ttft_sum) / firsts, 4) if firsts > 0 else None,
            })  # fmt: skip
        return points

    # -- the snapshot ---------------------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Everything the State view shows, as one JSON-ready dict (built on the event loop in microseconds: it
        reads attributes and counters, never waits on a model)."""
        now = time.monotonic()
        models = self.models
        return {
            "time": round(time.time(), 3),
            "default": models.default,
            "models": [self._model(m, now) for m in models],
            "adapters": [
                {"name": a.name, "parent": a.parent.name if a.parent else None} for a in models.adapters.values()
            ],
            "memory": {
                "resident_bytes": models.resident,
                "budget_bytes": models.max_memory,
                "process_rss_bytes": process_rss(),
            },
            "jobs": self.jobs(),
        }  # fmt: skip

    def _model(self, model: ServedModel, now: float) -> dict[str, Any]:
        host = model.host
        registry = self.models.metrics.registry
        finished = {
            reason: int(registry.get_sample_value(
                "modelhost_request_success_total", {"model_name": model.name, "finished_reason": reason}
            ) or 0)
            for reason in FINISH_REASONS
        }  # fmt: skip
        return {
            "name": model.name,
            "aliases": list(model.spec.aliases),
            "state": model.state,
            "pinned": model.pinned,
            "size_bytes": model.size,
            "slots": model.slots,
            "running": host.running if host is not None else 0,
            "waiting": host.waiting if host is not None else 0,
            "accepts_images": model.accepts_images,
            "keep_alive_left_seconds": keep_alive_left(model, self.models.keep_alive, now),
            "finished": finished,
            "history": self.history(model.name),
        }

    # -- jobs -----------------------------------------------------------------------------------------------------
    def jobs(self) -> list[dict[str, Any]]:
        """The boards' jobs, running and queued first, then the newest finished, at most MAX_JOBS_SHOWN."""
        rows: list[tuple[int, str, Record]] = []
        for source, board in self._boards.items():
            rows += [(0 if not r.finished else 1, source, r) for r in board.records.values()]
        rows.sort(key=lambda row: (row[0], -row[2].created))
        return [job_view(source, record) for _, source, record in rows[:MAX_JOBS_SHOWN]]

    async def cancel(self, source: str, job_id: str) -> dict[str, Any]:
        """Cancel a job of a board (worker ApiError 404 for an unknown source or job)."""
        from modelhost.jobs import schema
        from modelhost.jobs.schema import ApiError

        board = self._boards.get(source)
        if board is None:
            raise ApiError(404, schema.WORKER_NOT_FOUND, f"no job source {source!r}")
        return job_view(source, await board.cancel(job_id))


def job_view(source: str, record: Record) -> dict[str, Any]:
    """One job as the page lists it: its progress (step of total in its stage) and how it ended."""
    return {
        "source": source,
        "id": record.id,
        "operation": record.operation,
        "model": record.model,
        "status": record.status,
        "stage": record.stage,
        "step": record.step,
        "total": record.total,
        "remaining_seconds": record.remaining,
        "error": record.error,
        "cancelling": record.cancel and not record.finished,
        "created_ms": record.created,
    }


def keep_alive_left(model: ServedModel, default: float | None, now: float) -> float | None:
    """Seconds until the keep-alive sweep would unload `model` if it stays idle; None when it stays for good (pinned,
    no keep-alive) or is not loaded."""
    keep = model.keep_alive_seconds(default)
    if model.host is None or keep is None or math.isinf(keep):
        return None
    if model.busy:
        return round(keep, 1)  # the clock starts when its last request ends
    return round(max(0.0, model.last_used + keep - now), 1)


def process_rss() -> int | None:
    """This process's resident memory in bytes (Linux's /proc), None where it cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


__all__ = ["MAX_JOBS_SHOWN", "SAMPLE_SECONDS", "WINDOW_SECONDS", "LiveState", "job_view", "keep_alive_left"]

"""WorkerServer: the job worker door, composed from a Host, a state folder and limits; served by uvicorn.

Startable on an ephemeral port in a test (`port=0`, then `server.url`), stoppable gracefully: intake stops, the
running job may finish within `drain_seconds` (else it is interrupted and ends WORKER_INTERRUPTED), queued jobs stay
queued on disk for the next start, the store is flushed, and only then does the HTTP server go away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from pathlib import Path

import uvicorn

from modelhost import _access, _serving
from modelhost.host import Host
from modelhost.host.models import Models, Servable, ServedModel, as_models
from modelhost.jobs.board import InputCheck, JobBoard, Journal, print_journal
from modelhost.jobs.executor import Runner
from modelhost.jobs.metrics import JobMetrics
from modelhost.jobs.operation import CheckInput, Operation, RunJob
from modelhost.jobs.store import JobStore, SyncMode
from modelhost.worker import protocol
from modelhost.worker.app import build_app, layer_error_body
from modelhost.worker.registry import default_operations
from modelhost.worker.submission import DEFAULT_MAX_UPLOAD_BYTES

log = logging.getLogger(__name__)

#: Unacknowledged finished jobs are kept this long (the spec's default, 24 h), then swept.
DEFAULT_RETENTION_SECONDS = 24 * 3600
#: How long `aclose()` lets the running job finish before interrupting it: a typical generation on a CPU ends
#: well within it, and a service manager's stop timeout (systemd: 90 s) is not reached.
DEFAULT_DRAIN_SECONDS = 30.0
#: After interrupting, how long the job gets to notice (it stops within one token; this bounds a stuck engine).
INTERRUPT_GRACE_SECONDS = 5.0
#: uvicorn's wait for open connections at shutdown: in-flight answers finish; a stuck client cannot hold us.
HTTP_GRACE_SECONDS = 5
#: Sweeps for expired jobs at most this often: retention is hours, so a minute of lateness is noise.
MAX_SWEEP_INTERVAL = 60.0


def _check_on(check: CheckInput, host: Servable) -> InputCheck:
    """An operation's input check bound to the model the job names."""
    return lambda value: check(value, host)


class WorkerServer:
    """The giz job worker on `host`'s model, its jobs in `state_dir`."""

    def __init__(
        self,
        host: Host | Models,
        *,
        state_dir: Path,
        capacity: int,
        bind_host: str = "127.0.0.1",
        port: int = 0,
        authorization: str | None = None,
        max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
        retention_seconds: float = DEFAULT_RETENTION_SECONDS,
        journal: Journal = print_journal,
        operations: Mapping[str, Operation | RunJob] | None = None,
        drain_seconds: float = DEFAULT_DRAIN_SECONDS,
        execute: bool = True,
        sync: SyncMode | None = None,
        concurrency: int | None = None,
        limits: _serving.ClientLimits | None = None,
        access_log: _access.Emit = _access.to_logger,
    ) -> None:
        """`operations` defaults to the registry's (modelhost.worker.registry); a bare coroutine function is an
        operation of that name with no submission check that may run beside others. `execute=False` stores
        jobs but runs none (benchmarks, maintenance). `sync` picks how the store makes writes durable (see store.py).
        `limits` bounds slow and excess clients (modelhost._serving): a stalled JSON body and a stalled multipart
        upload are cut alike. `concurrency` is how many jobs run at once (None: as many as the model decodes at once,
        its batch slots, so jobs share the batch). `access_log` gets one record per request (modelhost._access: the
        `modelhost.access` logger by default)."""
        # Several models: each served with every operation, each job run on the model it names.
        self.models = as_models(host)
        self.host: Host | ServedModel = host if isinstance(host, Host) else self.models.get(self.models.default)
        self.bind_host = bind_host
        self.port = port
        self.retention_seconds = retention_seconds
        self.drain_seconds = drain_seconds
        self.execute = execute
        self.concurrency = concurrency
        given = operations if operations is not None else default_operations()
        self.operations = {name: op if isinstance(op, Operation) else Operation(name, op) for name, op in given.items()}
        self.metrics = JobMetrics()
        self.store = JobStore(Path(state_dir), sync=sync)
        served = [(m.name, op) for m in self.models for op in sorted(self.operations)]
        # Inputs are checked at submission by the operation's own check; the checks read the model (does it take
        # images?): one per (model, operation) when several are served.
        checks: dict[str | tuple[str, str], InputCheck] = {}
        for served_model in [self.host] if len(self.models) == 1 else list(self.models):
            for name, op in self.operations.items():
                if op.check is not None:
                    key = name if len(self.models) == 1 else (served_model.name, name)
                    checks[key] = _check_on(op.check, served_model)
        # The names the HTTP door takes take here too (one alias table: the model set's).
        aliases: dict[str, str] = {}
        for m in self.models:
            for alias in m.spec.aliases:
                if alias not in self.models.names:
                    aliases.setdefault(alias, m.name)  # the first model claiming a name keeps it, as Models routes
        self.board = JobBoard(
            self.store, capacity=capacity, models=served, metrics=self.metrics, journal=journal, input_checks=checks,
            aliases=aliases,
        )  # fmt: skip
        self.app = build_app(
            self.board,
            health=self._health,
            registries=(self.metrics.registry, self.models.metrics.registry),
            authorization=authorization or None,
            max_upload_bytes=max_upload_bytes,
            access_log=access_log,
        )
        limits = limits or _serving.ClientLimits()
        refusals = _serving.refusal_counter(self.metrics.registry, "modelhost_worker")
        self.guard = _serving.ClientGuard(limits, layer_error_body, refusals, frozenset({"/v1/health", "/metrics"}))
        self.url = ""
        self.restored = 0
        self._server: _serving.EmbeddedUvicorn | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._runner_task: asyncio.Task[None] | None = None
        self._closing = False

    def _health(self) -> str:
        if self._closing:
            return "draining"
        # Loading at start (or a pinned model, a lone host): not yet serving. Later, a model of the set loading on
        # demand, or unloaded (lazy, keep-alive, for room), is fine: a job loads it.
        if self.host.state in ("new", "loading") and (not self.models.started or getattr(self.host, "pinned", True)):
            return "loading"
        return "ok" if self.host.state in ("ready", "unloaded", "new", "loading") else "draining"

    async def start(self) -> None:
        """Restore the store, bind, serve, start the executor. `self.url` is the real address afterwards."""
        await asyncio.to_thread(self.store.open)
        records = await asyncio.to_thread(self.store.restore, protocol.now_ms())
        self.restored = len(records)
        self.board.load(records)
        self.store.start()
        sock = _serving.bind(self.bind_host, self.port)
        self.url = _serving.url_of(sock)
        config = uvicorn.Config(
            self.app,
            lifespan="off",
            log_level="warning",
            access_log=False,
            # httptools (several times faster than h11), with slow and excess clients bounded.
            http=self.guard.protocol_class(),
            loop="asyncio",
            timeout_graceful_shutdown=HTTP_GRACE_SECONDS,
            # Not behind a proxy: X-Forwarded-* must not be trusted, and skipping that middleware and the
            # Server header is CPU the hot path (a durable submission) gets back.
            proxy_headers=False,
            server_header=False,
        )
        server = _serving.EmbeddedUvicorn(config)
        self._tasks.append(await _serving.serve(server, sock, name="worker-http"))
        self._server = server
        if self.execute:
            self._runner_task = asyncio.create_task(
                Runner(self.board, self.host, self.operations, self.concurrency).run()
            )
        self._tasks.append(asyncio.create_task(self._sweep(), name="worker-retention"))

    async def _sweep(self) -> None:
        interval = min(MAX_SWEEP_INTERVAL, max(0.05, self.retention_seconds / 10))
        while True:
            removed = await self.board.sweep(protocol.now_ms() - int(self.retention_seconds * 1000))
            if removed:
                log.info("retention: removed %d finished jobs older than %ss", removed, self.retention_seconds)
            await asyncio.sleep(interval)

    async def aclose(self) -> None:
        """Stop gracefully (see the module docstring). Idempotent."""
        if self._closing:
            return
        self._closing = True
        self.board.draining = True
        self.board.stop()
        runner = self._runner_task
        if runner is not None:
            done, _ = await asyncio.wait({runner}, timeout=self.drain_seconds)
            if not done:
                self.board.interrupt()
                done, _ = await asyncio.wait({runner}, timeout=INTERRUPT_GRACE_SECONDS)
            if not done:
                runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
        self.board.close()
        sweeper = self._tasks[-1] if len(self._tasks) > 1 else None
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
        if self._server is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._tasks[0]
        await self.store.aclose()

    async def __aenter__(self) -> WorkerServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

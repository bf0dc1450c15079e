"""One Ray Serve replica: a whole modelhost host (its model set, loaded once, its own continuous batching) behind
the HTTP door's own app, so every route (OpenAI, Ollama, streaming, /health, /ready, /metrics) is the one
`modelhost serve --http` answers. The door comes in the replica's config (`ReplicaConfig.door`: the composition
root gives modelhost.http.mounted.MountedDoor), so this package imports no door.

The replica is RUNNING for Serve only once its models have loaded: its constructor awaits the load, so Serve's
proxy never routes a request to a replica still loading, and a load that fails fails the replica's start (Serve
retries it, then reports the deployment unhealthy with the load's error). Serve's health check asks the same
question /health answers (can the models still serve?), so a replica whose model failed is replaced. Every answer
carries `x-modelhost-replica`, the replica's id, so a probe through the proxy says which replica it reached, and
`/replicas` answers for the whole application (200 while every replica runs, 503 with the counts otherwise), and
`/replicas/metrics` with every replica's metrics, each series labelled with its replica (modelhost.ray.metrics).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST
from ray import serve
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelhost.host import DEFAULT_MAX_QUEUE, adapters
from modelhost.host.models import Models, ModelSpec
from modelhost.inference.lora_files import AdapterFiles
from modelhost.ray.metrics import Reporter, merged

log = logging.getLogger(__name__)

#: The response header naming the replica that answered.
REPLICA_HEADER = "x-modelhost-replica"

#: The path that answers for the whole application (every replica's state), whichever replica it reaches; the
#: door's own /health, /ready and /metrics answer for the replica that took them.
REPLICAS_PATH = "/replicas"
#: Every replica's metrics in one exposition, each series labelled with its replica (modelhost.ray.metrics).
REPLICAS_METRICS_PATH = "/replicas/metrics"

#: Seconds a stopping replica gives its in-flight requests before cancelling them (each stream then ends with its
#: "cancelled" answer). Under Serve's graceful_shutdown_timeout_s (serving.GRACEFUL_SHUTDOWN_SECONDS), so the
#: replica's own close ends before Serve kills the actor.
CLOSE_GRACE_SECONDS = 10.0


class ReplicaDoor(Protocol):
    """The door a replica serves its models through (modelhost.http.mounted.MountedDoor is the HTTP door's)."""

    def app(self) -> ASGIApp:
        """The ASGI app of the door's routes (built once the models have loaded)."""
        ...

    def metrics(self) -> bytes:
        """The replica's metrics in Prometheus' text format: the models' series, then the door's."""
        ...


#: Builds a replica's door over its loaded models: `door(models, api_key=..., access_log=...)`. A class or a
#: function of an importable module: the config travels pickled, and the door with it by reference.
DoorFactory = Callable[..., ReplicaDoor]


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    """What each replica serves. The specs are resolved where the application is built (a missing model fails
    there, before any replica starts) and travel pickled: each node must hold the model files at the same path
    (one install, or shared storage; docs/cluster.md)."""

    specs: tuple[ModelSpec, ...]
    #: The door each replica serves (the composition root's choice: modelhost.serve gives the HTTP door's).
    door: DoorFactory
    max_queue: int = DEFAULT_MAX_QUEUE
    lazy: bool = False
    keep_alive: float | None = None
    max_memory: int | None = None
    #: Bearer token for /v1 and /api (the HTTP door's own check, in each replica).
    api_key: str | None = None
    #: One access-log line per request in the replica's log (Ray's log folder on its node).
    access_log: bool = True
    #: `--adapter`s, checked where the application is built: (name, base or None, AdapterFiles), each served by
    #: every replica (the files, like the models', at the same path on every node).
    adapters: tuple[tuple[str, str | None, AdapterFiles], ...] = ()


class _ReplicaApp:
    """The door's app with the replica's id on every answer, and the model set closed at the ASGI lifespan's end
    (Serve runs it when the replica stops: scale-down, redeploy, `serve.delete`)."""

    def __init__(self, app: ASGIApp, models: Models, replica: str, reporter: Reporter) -> None:
        self.app = app
        self.models = models
        self.reporter = reporter
        self.header = (REPLICA_HEADER.encode(), replica.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] == "http" and scope["path"] == REPLICAS_PATH:
            await self._replicas(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] == REPLICAS_METRICS_PATH:
            body = merged(await self.reporter.read())
            await Response(body, media_type=CONTENT_TYPE_LATEST)(scope, receive, self._tagging(send))
            return
        await self.app(scope, receive, self._tagging(send))

    async def _replicas(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Readiness in total: Serve's controller counts the application's replicas by state (a blocking call to
        # it: on a worker thread, off the event loop that streams other requests' tokens).
        counts = await asyncio.to_thread(replica_states, serve.get_replica_context().app_name)
        whole = bool(counts) and set(counts) == {"RUNNING"}
        body = {"status": "ready" if whole else "degraded", "replicas": counts}
        response = JSONResponse(body, status_code=200 if whole else 503)
        await response(scope, receive, self._tagging(send))

    def _tagging(self, send: Send) -> Send:
        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        return tagged

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                with contextlib.suppress(Exception):  # a close that fails must not keep the replica from stopping
                    await self.models.aclose(grace=CLOSE_GRACE_SECONDS)
                await send({"type": "lifespan.shutdown.complete"})
                return


def replica_states(app: str) -> dict[str, int]:
    """An application's replicas by state (`RUNNING`, `STARTING`, `RECOVERING`, ...), from Serve's controller
    (blocking); empty when no such application runs."""
    status = serve.status().applications.get(app)
    counts: dict[str, int] = {}
    for deployment in status.deployments.values() if status is not None else ():
        for state, count in deployment.replica_states.items():
            key = str(getattr(state, "value", state))
            counts[key] = counts.get(key, 0) + count
    return counts


def app_name() -> str:
    """This replica's Serve application's name, or "local" outside Serve."""
    try:
        return str(serve.get_replica_context().app_name)
    except Exception:  # no replica context: built outside a replica (a test of the app itself)
        return "local"


def replica_id() -> str:
    """This replica's id in its deployment (Serve's unique id), or "local" outside Serve."""
    try:
        return str(serve.get_replica_context().replica_id.unique_id)
    except Exception:  # no replica context: built outside a replica (a test of the app itself)
        return "local"


class ModelhostReplica:
    """A Serve deployment of modelhost: each replica loads the models once and serves the HTTP door's routes."""

    async def __init__(self, config: ReplicaConfig) -> None:  # type: ignore[misc]  # Serve awaits an async init
        self.config = config
        self.models = Models(
            list(config.specs),
            max_queue=config.max_queue,
            lazy=config.lazy,
            keep_alive=config.keep_alive,
            max_memory=config.max_memory,
        )
        for name, base, files in config.adapters:
            adapters.register_adapter(self.models, name, files, base, name_field="--adapter", path_field="--adapter")
        await self.models.start()  # raises the load's error: Serve reports the replica as failed to start
        self.replica = replica_id()
        self.door = config.door(self.models, api_key=config.api_key, access_log=config.access_log)
        self.reporter = Reporter(app_name())
        log.info("modelhost replica %s ready: %s", self.replica, ", ".join(self.models.names))

    def __serve_build_asgi_app__(self) -> ASGIApp:
        return _ReplicaApp(self.door.app(), self.models, self.replica, self.reporter)

    async def check_health(self) -> None:
        """Serve's periodic health check: fails (and Serve replaces the replica) when a model can never serve
        again, the condition under which /health answers 503; and, each time, hands this replica's metrics to the
        application's board (modelhost.ray.metrics)."""
        broken = {name: state for name, state in self.models.states().items() if state in ("failed", "closed")}
        if broken:
            raise RuntimeError(f"modelhost replica {self.replica}: models cannot serve: {broken}")
        await self.reporter.report(self.replica, self.door.metrics().decode())

    async def describe(self) -> dict[str, Any]:
        """This replica's id, process, node and model states (for `serving.replicas()` and the tests)."""
        import os

        import ray

        return {
            "replica": self.replica,
            "pid": os.getpid(),
            "node": ray.get_runtime_context().get_node_id(),
            "models": self.models.states(),
            "in_flight": sum(m.in_flight for m in self.models),
        }


#: The Serve deployment of ModelhostReplica (its HTTP ingress the app `__serve_build_asgi_app__` builds in each
#: replica, after the models load); `serving.application` sets its replicas and resources.
REPLICA_DEPLOYMENT: Any = serve.deployment(serve.ingress()(ModelhostReplica))

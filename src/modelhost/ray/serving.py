"""modelhost on Ray Serve: N replicas of a whole host behind Serve's HTTP ingress (`modelhost serve --ray`).

    from modelhost.ray import serving
    app = serving.application(config, replicas=2, num_cpus=1)   # a Serve Application: serve.run(app) it yourself
    serving.run("127.0.0.2:6379", config, replicas=2, http=("127.0.0.2", 8000))   # what the CLI does

Serve's router sends each request to the less loaded of two replicas it samples ("power of two choices"), counting
the requests each replica holds; a replica takes at most `max_ongoing_requests` at once and the rest wait at the
proxy, where they can still go to whichever replica frees first. MAX_ONGOING_PER_SLOT sets that bound from the
replica's batch (its `--parallel` slots): enough that the batcher fills, not so many that requests queue inside one
replica while another idles.

A replica that dies (its process killed, its node lost) takes its in-flight requests with it: each of their clients
gets an error at once (a stream is cut off with no final chunk, a pending request is answered 5xx), never a hang;
Serve's controller starts a replacement, and meanwhile the proxy routes to the replicas that live.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

from ray import serve

from modelhost.ray.cluster import NAMESPACE, connect
from modelhost.ray.replica import REPLICA_DEPLOYMENT, ReplicaConfig, replica_states

#: The Serve application's name (and its deployment's): one per cluster unless the caller names its own.
APP_NAME = "modelhost"

#: Requests a replica holds at once per batch slot of its model. Measured by bench/ray_cluster.py (SmolLM2, 2 replicas
#: of 2 slots, 8 clients, one run at load 14-17 on 2 cores), CPU s per 1,000 tokens and tokens/s: 1 x slots 26.2 and
#: 40.4 (a replica's batch runs short while a request waits at the proxy between two answers), 2 x 25.1 and 42.7,
#: 4 x 23.4 and 46.2; one host alone 20.0 and 42.4. 2 x and 4 x are within that machine's noise of each other;
#: 2 x keeps what waits inside one replica (where no other replica can take it) to one batch.
MAX_ONGOING_PER_SLOT = 2
#: The batch slots of a replica whose `--parallel` is not given: llama_cpp's default (LoadOptions.parallel).
DEFAULT_SLOTS = 4

#: Seconds Serve lets a stopping replica finish before killing it: above the replica's own close grace
#: (replica.CLOSE_GRACE_SECONDS), so in-flight streams end with their "cancelled" answer, not a cut.
GRACEFUL_SHUTDOWN_SECONDS = 20.0
#: How often Serve asks each replica whether its models can still serve, and how long an answer may take (the
#: check answers from the event loop; a replica too busy to answer for 30 s on 2 loaded cores is not yet dead).
HEALTH_CHECK_PERIOD_SECONDS = 5.0
HEALTH_CHECK_TIMEOUT_SECONDS = 30.0


def max_ongoing(slots: int | None) -> int:
    """Serve's `max_ongoing_requests` for a replica with `slots` batch slots (None: the backend's default)."""
    return MAX_ONGOING_PER_SLOT * (slots or DEFAULT_SLOTS)


def application(
    config: ReplicaConfig,
    *,
    replicas: int = 2,
    num_cpus: float = 1.0,
    num_gpus: float = 0.0,
    slots: int | None = None,
    max_ongoing_requests: int | None = None,
    name: str = APP_NAME,
) -> Any:
    """The Serve Application of `replicas` modelhost replicas, each reserving `num_cpus` and `num_gpus` (one GPU
    each: one model per GPU). `slots` is the models' `--parallel`, from which `max_ongoing_requests` is chosen
    unless given. Run it with `serve.run(app, name=..., route_prefix="/")` or in a Serve config file."""
    if replicas < 1:
        raise ValueError(f"--replicas must be at least 1, got {replicas}")
    if num_cpus < 0 or num_gpus < 0:
        raise ValueError("--num-cpus and --num-gpus must not be negative")
    deployment = REPLICA_DEPLOYMENT.options(
        name=name,
        num_replicas=replicas,
        ray_actor_options={"num_cpus": num_cpus, "num_gpus": num_gpus},
        max_ongoing_requests=max_ongoing_requests or max_ongoing(slots),
        health_check_period_s=HEALTH_CHECK_PERIOD_SECONDS,
        health_check_timeout_s=HEALTH_CHECK_TIMEOUT_SECONDS,
        graceful_shutdown_timeout_s=GRACEFUL_SHUTDOWN_SECONDS,
    )
    return deployment.bind(config)


def proxy_location(host: str) -> str:
    """Where Serve runs its HTTP proxies: on every node when they bind all interfaces (a load balancer in front
    spreads clients over the nodes), on the head only when they bind one address, which exists on one node."""
    return "EveryNode" if host in ("0.0.0.0", "::", "") else "HeadOnly"


def run(
    address: str,
    config: ReplicaConfig,
    *,
    http: tuple[str, int],
    replicas: int = 2,
    num_cpus: float = 1.0,
    num_gpus: float = 0.0,
    slots: int | None = None,
    name: str = APP_NAME,
    say: Callable[[str], None] = print,
) -> None:
    """Join the cluster, deploy the replicas behind Serve's proxy on `http` (HOST, PORT), and block until SIGTERM
    or SIGINT; then delete the application (each replica drains for its grace) and, when this call started Serve,
    stop Serve too."""
    connect(address)
    app = application(config, replicas=replicas, num_cpus=num_cpus, num_gpus=num_gpus, slots=slots, name=name)
    started_serve = not _serve_running()
    host, port = http
    serve.start(http_options={"host": host, "port": port, "location": proxy_location(host)})
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        say(f"modelhost: deploying {replicas} replica(s) of {', '.join(s.name for s in config.specs)} on Ray Serve")
        serve.run(app, name=name, route_prefix="/", blocking=False)  # returns once every replica is RUNNING
        say(f"modelhost: ready: {replicas} replica(s) on http://{host}:{port} (Ray Serve app {name!r})")
        stop.wait()
        say("modelhost: stopping: deleting the Serve application (replicas drain their in-flight requests)")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        try:
            serve.delete(name)
            if started_serve:
                serve.shutdown()
        finally:
            say("modelhost: stopped")


def _serve_running() -> bool:
    """Whether Serve's controller already runs on the cluster (a user's own apps: left running on our stop)."""
    import ray

    try:
        ray.get_actor("SERVE_CONTROLLER_ACTOR", namespace="serve")
    except ValueError:
        return False
    return True


def replicas(name: str = APP_NAME) -> dict[str, int]:
    """The application's replicas by state (`RUNNING`, `STARTING`, `RECOVERING`, ...), from Serve's controller."""
    return replica_states(name)


__all__ = ["APP_NAME", "NAMESPACE", "ReplicaConfig", "application", "max_ongoing", "replicas", "run"]

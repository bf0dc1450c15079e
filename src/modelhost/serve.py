"""`modelhost serve`: the models (one Host each, a model set: modelhost.host.models) and the doors around them,
with an orderly start and stop.

Start order matters. The HTTP door binds first, so `/health` answers and `/ready` says 503 while the model loads
(llama.cpp's operations view: health that tells the truth). A socket door binds only after its model is loaded,
because on the inferd wire a bound socket IS the readiness signal (no health frame exists; a client that connects
early must get ECONNREFUSED and retry), and as soon as it is: not after the other models have loaded too. Stop
order is the reverse: stop accepting, let in-flight requests finish for a bounded grace period, then close the
model and remove the socket. A stop that has not ended HARD_EXIT_SECONDS after the grace (a model thread stuck in a
native call never sees its cancel) exits the process hard, with a line saying so: a stop signal always stops the
process.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from modelhost._access import AccessRecord, LogFormat
from modelhost.errors import ModelLoadError
from modelhost.host import DEFAULT_MAX_QUEUE, adapters
from modelhost.host.models import Models, ModelSpec, ServedModel, resident_size
from modelhost.inference import catalogue, openmp, registry
from modelhost.inference.catalogue import model_name
from modelhost.inference.lora_files import AdapterFiles, inspect_adapter

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from modelhost._serving import ClientLimits
    from modelhost.http.ui import WebUi
    from modelhost.worker import WorkerServer
    from modelhost.worker.registry import Cluster

#: How long a stop signal waits for in-flight requests before cancelling them. Long enough for a typical answer
#: on a small model, short enough that a service manager's own kill timeout (systemd: 90 s) never fires first.
DEFAULT_GRACE_SECONDS = 30.0

#: The grace of a Ctrl-C (SIGINT) instead: a person at a terminal is waiting, and 30 s of "stopping" reads as a hang
#: (issue 21). Five seconds lets a short answer end; a long stream is cancelled, and a second Ctrl-C cancels at once.
INTERRUPT_GRACE_SECONDS = 5.0

#: After the grace, how long the doors still wait for the cancelled requests' last answers (their "cancelled" done
#: frame) before hanging up: the cancel reaches the model thread and comes back within one token, which takes under
#: a second even on a loaded machine (1 s was measured enough on a quiet one; 2 leaves room).
CANCELLED_ANSWER_SECONDS = 2.0

#: How long after its grace (after a second signal: after that signal) a stop may still take before the process
#: exits hard. The orderly rest (cancelled requests end at their next token, the model closes) takes well under a
#: second; a model thread wedged inside a C call (issue 25: one grammar step of minutes) never gets there, and
#: neither SIGTERM nor a second one stopped the process, only kill -9.
HARD_EXIT_SECONDS = 10.0


class Door(Protocol):
    """A server on the host: binds in `start()`, refuses new work after `stop_intake()`, closes in `aclose()`."""

    async def start(self) -> None: ...

    def stop_intake(self) -> None: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """What to serve and through which doors. A door whose setting is None is off."""

    model: str = "default"
    #: Several models (`NAME_OR_PATH` or `name=NAME_OR_PATH`); when given, `model` is not used.
    models: tuple[str, ...] = ()
    #: The model the inferd socket serves (its requests name none): None, the first.
    socket_model: str | None = None
    #: More sockets, one model each: `NAME=PATH` (inferd clients that want another model connect to its socket).
    model_sockets: tuple[str, ...] = ()
    #: Load models at their first request (the socket's model excepted: a bound socket means "ready").
    lazy: bool = False
    #: Unload a model idle this many seconds (the socket's model excepted); None: never.
    keep_alive: float | None = None
    #: Bytes all loaded models may hold, each by its backend's estimate (a GGUF: file plus KV cache), else its files;
    #: the least recently used idle one makes room.
    max_memory: int | None = None
    backend: str | None = None
    socket: str | None = None
    http: tuple[str, int] | None = None
    api_key: str | None = None
    #: The page for people at / of the HTTP door (modelhost.http.ui): chat, documents, the host's live state.
    ui: bool = True
    worker: tuple[str, int] | None = None
    state_dir: Path | None = None
    capacity: int = 8
    max_queue: int = DEFAULT_MAX_QUEUE
    #: Requests the model decodes at once (continuous batching); None: the backend's default (llama_cpp: 4).
    parallel: int | None = None
    #: Compute threads per model (llama_cpp, transformers); None: the cores this process may use.
    threads: int | None = None
    #: How compute threads wait for each other, 0-100 (inference/openmp.py); None: its measured default.
    poll: int | None = None
    #: A vision model's projector GGUF (llama_cpp; one --model only). None: an `mmproj-<name>.gguf` beside the model.
    mmproj: str | None = None
    #: vllm: devices each model's layers are split across (tensor parallel) and pipeline stages; None: one.
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    #: Slow and excess clients of the HTTP doors (header/body timeouts, connections); None: each door's default.
    client_limits: ClientLimits | None = None
    #: The HTTP doors' access log, one line per request on stderr: "text" for a person, "json" for a log shipper,
    #: None for none.
    access_log: LogFormat | None = "text"
    #: LoRA adapters served by name beside their base: `NAME=PATH`, or `NAME=MODEL:PATH` to name the base.
    adapters: tuple[str, ...] = ()
    #: Whether clients may load and unload adapters at runtime (vLLM's /v1/load_lora_adapter).
    allow_adapter_loading: bool = False
    #: docling-serve's document API on the HTTP door, its pages read by this served model; None: off.
    docling: str | None = None
    #: The docling door's URL sources: fetched only when allowed, from private and loopback addresses only if
    #: `fetch_private` too.
    allow_fetch: bool = False
    fetch_private: bool = False
    #: `--worker ... --ray ADDRESS`: the Ray cluster the worker's `"ray": true` jobs run on (None: such a job is
    #: refused), and each such job's actor pool: its actors, and the CPUs and GPUs each reserves.
    ray: str | None = None
    ray_actors: int = 2
    ray_actor_cpus: float = 1.0
    ray_actor_gpus: float = 0.0

    def __post_init__(self) -> None:
        """Refuse settings that contradict each other, or need what is not installed, when the config is made: the
        CLI and the Python API refuse the same things, in one line, before any model loads (ValueError, or
        ClusterError for a missing Ray)."""
        for flag, value, low, high in self._bounded():
            if value is not None and (value < low or (high is not None and value > high)):
                bounds = f"{low} or more" if high is None else f"{low} to {high}"
                raise ValueError(f"{flag} takes {bounds}, got {value}")
        if self.access_log not in (None, "text", "json"):
            raise ValueError(f"--log-format takes text, json or none, got {self.access_log!r}")
        if self.docling is not None and self.http is None:
            raise ValueError("--docling serves its API on the HTTP door: add --http")
        if self.fetch_private and not self.allow_fetch:
            raise ValueError("--fetch-private widens --allow-fetch: add --allow-fetch")
        if self.ray is not None:
            if self.worker is None:
                raise ValueError("--ray serves replicas on Ray Serve (run_on_ray); here it goes with --worker")
            from modelhost.ray.cluster import check_installed

            check_installed("--ray")

    def _bounded(self) -> tuple[tuple[str, float | None, float, float | None], ...]:
        """(flag, value, lowest, highest or None) of each number with a range: the ranges `modelhost serve`'s flags
        declare, so a config made in Python is refused as the command line is, before any model loads."""
        return (
            ("--keep-alive", self.keep_alive, 0, None),
            ("--capacity", self.capacity, 1, None),  # the job worker holds no job with 0
            ("--max-queue", self.max_queue, 1, None),  # 0 would refuse every request that cannot start at once
            ("--parallel", self.parallel, 1, None),
            ("--threads", self.threads, 1, None),
            ("--poll", self.poll, 0, openmp.MAX_POLL),
            ("--tp", self.tensor_parallel, 1, None),
            ("--pp", self.pipeline_parallel, 1, None),
            ("--actors", self.ray_actors, 1, None),
            ("--num-cpus", self.ray_actor_cpus, 0, None),
            ("--num-gpus", self.ray_actor_gpus, 0, None),
        )


def docling_state(config: ServeConfig) -> Path:
    """The docling door's task folder: `docling/` in --state's folder, else ~/.local/state/modelhost/docling. Its
    own folder: a store is held by one process, and the worker's may be in use beside it."""
    if config.state_dir is not None:
        return config.state_dir / "docling"
    return Path(os.path.expanduser("~/.local/state/modelhost/docling"))


def split_model(arg: str) -> tuple[str | None, str]:
    """`name=NAME_OR_PATH` into (name, what); a bare `NAME_OR_PATH` into (None, it)."""
    name, sep, what = arg.partition("=")
    if sep and name and "/" not in name and what:
        return name, what
    return None, arg


def _chosen(config: ServeConfig) -> list[tuple[str | None, str]]:
    """The `--model` arguments as (NAME or None, what)."""
    return [split_model(arg) for arg in (config.models or (config.model,))]


def split_adapter(arg: str, served: Collection[str]) -> tuple[str, str | None, str]:
    """`--adapter NAME=PATH` or `NAME=MODEL:PATH` into (name, base or None, path); ValueError for anything else.
    `MODEL:` is read as a base only when MODEL is in `served` (the models' names and what `--model` gave), so a
    path holding a colon still works as a path."""
    name, sep, rest = arg.partition("=")
    if not (sep and name and rest):
        raise ValueError(f"--adapter takes NAME=PATH or NAME=MODEL:PATH, got {arg!r}")
    base, colon, path = rest.partition(":")
    if colon and base and path and base in served:
        return name, base, path
    return name, None, rest


def checked_adapters(config: ServeConfig) -> list[tuple[str, str | None, AdapterFiles]]:
    """Each `--adapter` split and its files checked, from the command line alone: `serve` calls this before it
    resolves or estimates any model (a transformers estimate imports torch: half a minute on a busy machine), so
    a wrong adapter path is the only line it prints, at once."""
    served = {n for name, what in _chosen(config) for n in (name or model_name(what), what)}
    found = []
    for arg in config.adapters:
        name, base, path = split_adapter(arg, served)
        found.append((name, base, inspect_adapter(path, field="--adapter")))
    return found


def register_adapters(models: Models, found: list[tuple[str, str | None, AdapterFiles]], allow: bool) -> None:
    """Put each checked `--adapter` on its base model (they load with their models), and set the runtime switch."""
    for name, base, files in found:
        adapters.register_adapter(models, name, files, base, name_field="--adapter", path_field="--adapter")
    models.adapter_loading = allow


def models_adapter_error(models: Models, name: str) -> str:
    """Why the `--adapter` `name` is not served after the start (its engine refused it), as loading said."""
    for model in models:
        if model.host is not None and name in model.host.adapter_errors:
            return model.host.adapter_errors[name]
    return f"adapter {name!r} is not served"


def _estimated_size(path: str, backend: str | None, load_opts: dict[str, Any]) -> int:
    """What the memory budget counts for a model: its backend's estimate of the loaded model (weights and the KV
    cache of its batch slots), else its files' size. An estimate that fails (an unreadable header) must not stop
    `serve`: the load itself will say what is wrong."""
    try:
        estimate = registry.memory_estimate(path, backend, **load_opts)
    except Exception as exc:
        log.warning("cannot estimate the memory of %s (%s); counting its files' size", path, exc)
        estimate = None
    return estimate if estimate is not None else resident_size(path)


def model_specs(config: ServeConfig) -> tuple[list[ModelSpec], list[tuple[str, str]]]:
    """The model set's specs (each resolved now: fail fast, before binding anything, on a model that is not there)
    and the sockets, (model name, path), the main one first. ValueError for a bad --socket-model or --model-socket."""
    load_opts = _load_options(config)
    chosen = _chosen(config)
    if config.mmproj is not None:
        if len(chosen) > 1:
            raise ValueError("--mmproj goes with one --model; for several, put each mmproj beside its model")
        load_opts["mmproj"] = config.mmproj
    resolved = [(name or model_name(what), what, catalogue.resolve(what)) for name, what in chosen]
    names = [name for name, _, _ in resolved]

    def served(wanted: str, flag: str) -> str:
        matches = [n for n, what, _ in resolved if wanted in (n, what)]
        if not matches:
            raise ValueError(f"{flag} {wanted!r} is not served; served: {', '.join(names)}")
        return matches[0]

    sockets: list[tuple[str, str]] = []
    if config.socket is not None:
        socket_name = served(config.socket_model, "--socket-model") if config.socket_model is not None else names[0]
        sockets.append((socket_name, config.socket))
    for arg in config.model_sockets:
        wanted, sep, path = arg.partition("=")
        if not (sep and wanted and path):
            raise ValueError(f"--model-socket takes NAME=PATH, got {arg!r}")
        sockets.append((served(wanted, "--model-socket"), path))
    on_socket = {name for name, _ in sockets}
    specs = [
        ModelSpec(
            name,
            functools.partial(registry.load_model, path, config.backend, **load_opts),
            path=path,
            size=_estimated_size(path, config.backend, load_opts),
            pinned=name in on_socket,
            aliases=(what,) if what in catalogue.ENTRIES and what != name else (),
        )
        for name, what, path in resolved
    ]
    return specs, sockets


def _load_options(config: ServeConfig) -> dict[str, Any]:
    opts = {"parallel": config.parallel, "tensor_parallel": config.tensor_parallel,
            "pipeline_parallel": config.pipeline_parallel, "threads": config.threads, "poll": config.poll}  # fmt: skip
    return {name: value for name, value in opts.items() if value is not None}


def pulled_spec(config: ServeConfig, name: str, *, adapter: str | None = None) -> ModelSpec:
    """The spec of a model pulled while `serve` runs (Ollama's /api/pull), or created (/api/create: with its LoRA
    `adapter`): resolved now, loaded at its first request with serve's backend and options, counted against the
    memory budget by its estimate."""
    load_opts = _load_options(config)
    path = catalogue.resolve(name)
    return ModelSpec(
        model_name(name),
        functools.partial(registry.load_model, path, config.backend, adapter=adapter, **load_opts),
        path=path,
        size=_estimated_size(path, config.backend, load_opts),
    )


def parse_hostport(value: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` or `PORT` into (host, port); raises ValueError with the bad value."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"expected HOST:PORT, got {value!r}") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"port out of range in {value!r}")
    return (host.strip("[]") or default_host), number


def raise_open_file_limit() -> int:
    """Raise this process's soft limit of open file descriptors to its hard limit; return the soft limit now.

    Every door caps its connections (the HTTP doors and the socket door at 256 each), which keeps them under the
    common soft limit of 1024 together; the rest of the process (the model's files, the worker's job files, uvicorn's
    own sockets) needs descriptors too. The hard limit is what the administrator allows; the soft one is only a
    default, often far below it (1024 under a hard 524288 on systemd hosts). Raising it leaves room for everything
    the caps do not count, as nginx's worker_rlimit_nofile and most servers do.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return soft


async def serve(config: ServeConfig, *, say: Callable[[str], None] | None = None) -> None:
    """Run until SIGTERM or SIGINT, then stop in order. `say` prints the ready and stop lines."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    raise_open_file_limit()
    openmp.configure(config.poll)  # before anything below imports an engine, which loads OpenMP (read once)
    found = checked_adapters(config)
    specs, sockets = model_specs(config)
    _check_doors(config, sockets)
    cluster = join_cluster(config, say)  # before any model loads: a cluster that cannot be joined is the one line
    models = Models(
        specs, max_queue=config.max_queue, lazy=config.lazy, keep_alive=config.keep_alive, max_memory=config.max_memory
    )
    models.spec_for = functools.partial(pulled_spec, config)
    register_adapters(models, found, config.allow_adapter_loading)
    name = ", ".join(models.names)
    form = config.access_log

    def access_log(record: AccessRecord) -> None:
        if form is not None:
            say(record.line(form))

    # Socket and job doors, closed before the host drains; each is given the grace the stop signal chose.
    closers: list[Callable[[float], Awaitable[None]]] = []
    http: Door | None = None  # closed last, so /health and /ready stay truthful while the host drains
    web_ui: WebUi | None = None  # the page at / of the HTTP door, which also lists the worker's jobs
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    deadline: list[threading.Timer] = []
    grace = [config.grace_seconds]  # what in-flight requests get once a stop begins (SIGINT: shorter, see above)
    timers: list[asyncio.TimerHandle] = []  # the grace's end, cancelled when the stop ends sooner

    def on_signal(sig: signal.Signals) -> None:
        # The first signal starts an orderly stop; a second one means "now": cancel what is still running.
        if stop.is_set():
            say("modelhost: second stop signal: cancelling in-flight requests")
            models.cancel_all()
            _exit_hard_after(HARD_EXIT_SECONDS, say, deadline)
        else:
            if sig == signal.SIGINT:
                grace[0] = min(grace[0], INTERRUPT_GRACE_SECONDS)
            say(
                f"modelhost: stopping: no new requests; in-flight ones get {grace[0]:g} s to finish, then are "
                "cancelled (Ctrl-C again cancels them now)"
            )
            _exit_hard_after(grace[0] + HARD_EXIT_SECONDS, say, deadline)
            if http is not None:
                http.stop_intake()  # the other doors stop taking work as they close; this one stays up to the end
            # At the grace's end the host cancels what still runs, so each stream ends with its "cancelled" answer
            # (a done frame, a finish_reason) before the doors hang up, rather than being cut off mid-stream.
            timers.append(loop.call_later(grace[0], models.cancel_all))
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        if config.http is not None:
            from modelhost.http import HttpServer

            docling = _docling_door(config, models)
            http_server = HttpServer(
                models,
                bind_host=config.http[0],
                port=config.http[1],
                api_key=config.api_key,
                limits=config.client_limits,
                access_log=access_log,
                docling=docling,
                ui=config.ui,
            )
            try:
                await http_server.start()
            except OSError as exc:
                raise ValueError(listen_error("--http", config.http, exc)) from exc
            except RuntimeError as exc:
                if docling is None:
                    raise
                # The docling door's task folder is held by another serve (its store's lock): one line, exit 2.
                raise ValueError(f"--docling: {exc} (give this serve its own --state)") from exc
            http = http_server
            say(f"modelhost: http on {http_server.url} (ready once {name} is loaded)")
            web_ui = http_server.ui
            if web_ui is not None:
                say(f"modelhost: page for people on {http_server.url}/ (chat, documents, state; --no-ui: none)")
            if docling is not None:
                closers.append(docling.aclose)  # its conversions drain with the other doors, before the models
                say(f"modelhost: docling API on {http_server.url}/v1/convert (pages read by {config.docling}; tasks "
                    f"in {docling.tasks.state_dir})")  # fmt: skip
        for spec in specs:
            when = "at its first request" if config.lazy and not spec.pinned else "now"
            say(f"modelhost: loading {spec.name} from {spec.path} ({when})")
        bound: list[str] = []

        async def bind_sockets(model: ServedModel) -> None:
            # Each model's sockets bind the moment THAT model is ready: a two-model serve once opened no socket
            # until the slower model had loaded, past the 10 s an inferd client (pdf-spec's Dial) retries for.
            if stop.is_set():
                return  # on the way out: a bound socket would say "ready"
            from modelhost.wire.server import WireServer

            for served_name, socket_path in sockets:
                if served_name == model.name:
                    wire = WireServer(model, socket_path)
                    await wire.start()
                    closers.append(wire.aclose)  # aclose(grace)
                    bound.append(f"{served_name} on unix:{wire.path}")
                    say(f"modelhost: socket ready: {served_name} on unix:{wire.path}")

        await models.start(on_ready=bind_sockets)
        refused = [models_adapter_error(models, name) for name, _, _ in found if name not in models.adapters]
        if refused:  # an --adapter the engine would not take: the operator asked for it, so serve stops
            raise ModelLoadError("; ".join(refused))
        if stop.is_set():
            # A stop signal came while the model loaded (a load cannot be interrupted, so it was waited for). Open
            # no door now: a bound socket would tell inferd clients "ready" from a host already on its way out.
            return
        if config.worker is not None:
            from modelhost.worker import WorkerServer, default_operations

            state = config.state_dir or Path(os.path.expanduser("~/.local/state/modelhost/worker"))
            worker = WorkerServer(
                models,
                state_dir=state,
                capacity=config.capacity,
                bind_host=config.worker[0],
                port=config.worker[1],
                authorization=os.environ.get("GIZ_WORKER_AUTHORIZATION") or None,
                drain_seconds=config.grace_seconds,
                limits=config.client_limits,
                access_log=access_log,
                operations=default_operations(cluster),
            )
            try:
                await worker.start()
            except OSError as exc:  # taken since _check_doors looked
                raise ValueError(listen_error("--worker", config.worker, exc)) from exc
            closers.append(functools.partial(_close_worker, worker))
            if web_ui is not None:
                web_ui.add_jobs("worker", worker.board)
            say(f"modelhost: worker on {worker.url} (state {state})")
        if bound:
            say(f"modelhost: ready: serving {name} ({', '.join(bound)})")
        else:
            say(f"modelhost: ready: serving {name}")
        await stop.wait()
    finally:
        # The doors drain concurrently (each waits for its own in-flight requests), then the host closes the model.
        wait = grace[0] + CANCELLED_ANSWER_SECONDS
        await asyncio.gather(*(close(wait) for close in reversed(closers)), return_exceptions=True)
        await models.aclose(grace=wait)
        if http is not None:
            with contextlib.suppress(Exception):
                await http.aclose()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        for handle in timers:
            handle.cancel()
        for timer in deadline:
            timer.cancel()  # stopped in time: nothing to force (and an embedding process must not be exited)
        say("modelhost: stopped")


def join_cluster(config: ServeConfig, say: Callable[[str], None]) -> Cluster | None:
    """The Ray cluster of `--worker ... --ray ADDRESS`, joined now (blocking, seconds: before any door opens or any
    signal handler is set, as `ray.init` wants); None without `--ray`. ClusterError (one line) when it cannot be
    joined (ServeConfig refused `--ray` without `--worker`: serving replicas is `run_on_ray`)."""
    if config.ray is None:
        return None
    from modelhost.ray.jobs import ClusterJobs
    from modelhost.ray.pool import Pool

    cluster = ClusterJobs(config.ray, Pool(config.ray_actors, config.ray_actor_cpus, config.ray_actor_gpus))
    say(
        f'modelhost: worker jobs with "ray": true run on the Ray cluster at {config.ray} '
        f"({config.ray_actors} actor(s) each)"
    )
    return cluster


def _docling_door(config: ServeConfig, models: Models) -> Any:
    """The docling door of `--docling MODEL`, or None; ValueError (one line) for a model that is not served."""
    if config.docling is None:
        return None
    from modelhost.http.docling import DoclingDoor, Policy

    if config.docling not in models.names and config.docling not in [a for m in models for a in m.spec.aliases]:
        raise ValueError(f"--docling {config.docling!r} is not served; add --model {config.docling}")
    return DoclingDoor(
        models,
        model=config.docling,
        state_dir=docling_state(config),
        capacity=config.capacity,
        api_key=config.api_key,
        policy=Policy(allowed=config.allow_fetch, private=config.fetch_private),
    )


def listen_error(flag: str, where: tuple[str, int], exc: OSError) -> str:
    """The one line for a door that cannot listen on `where` (HOST, PORT): which flag, and what to do about it."""
    host, port = where
    if exc.errno == errno.EADDRINUSE:
        why = "the port is in use (another server listens there): stop it, or choose another port"
    elif exc.errno == errno.EACCES:
        why = "permission denied (ports below 1024 need privileges)"
    elif isinstance(exc, socket.gaierror):
        why = f"unknown host {host!r}"
    else:
        why = exc.strerror or str(exc)
    return f"{flag} {host}:{port}: cannot listen: {why}"


def _check_doors(config: ServeConfig, sockets: list[tuple[str, str]]) -> None:
    """Refuse now, before any model loads or any door opens, what a door would refuse later: a socket path it cannot
    bind, or whose folder is missing (only the default address's folder is made: SocketPathError) and a port already
    taken (ValueError naming the flag), so the mistake is the only line."""
    from modelhost.wire.address import default_address
    from modelhost.wire.server import check_path

    default_folder = os.path.dirname(default_address())
    for _, path in sockets:
        check_path(path, make_folder=os.path.dirname(path) == default_folder)
    for flag, where in (("--http", config.http), ("--worker", config.worker)):
        if where is not None and where[1] != 0:  # port 0: the system picks a free one
            from modelhost import _serving  # only with an HTTP door: it imports uvicorn

            try:
                _serving.bind(*where).close()
            except OSError as exc:
                raise ValueError(listen_error(flag, where, exc)) from exc


async def _close_worker(worker: WorkerServer, grace: float) -> None:
    """Close the job worker, its running jobs given at most `grace` seconds (its drain, as the other doors')."""
    worker.drain_seconds = min(worker.drain_seconds, grace)
    await worker.aclose()


def _exit_hard_after(seconds: float, say: Callable[[str], None], timers: list[threading.Timer]) -> None:
    """Exit the process `seconds` from now unless the stop ends first (the caller cancels `timers`). os._exit: a
    wedged thread cannot be joined, and a normal exit joins every thread."""

    def exit_now() -> None:
        say(
            f"modelhost: still not stopped {seconds:g} s after the stop began (a model thread is stuck in a native "
            "call): exiting now, without a clean close"
        )
        os._exit(1)

    timer = threading.Timer(seconds, exit_now)
    timer.daemon = True
    timer.start()
    timers.append(timer)


def run(config: ServeConfig, **kwargs: Any) -> None:
    """Blocking entry point for the CLI."""
    asyncio.run(serve(config, **kwargs))


@dataclass(frozen=True, slots=True)
class RayPlacement:
    """`serve --ray`: the cluster to join and the replicas to run there (modelhost.ray.serving)."""

    address: str
    replicas: int = 2
    num_cpus: float = 1.0
    num_gpus: float = 0.0


def run_on_ray(config: ServeConfig, placement: RayPlacement, *, say: Callable[[str], None] | None = None) -> None:
    """Blocking: serve the models as replicas on Ray Serve (each replica a whole host behind Serve's HTTP proxy on
    `config.http`) until SIGTERM or SIGINT. The doors that cannot be spread (a Unix socket, the job worker with its
    state folder) are refused: ValueError naming the flag."""
    refused = {
        "--socket": config.socket,
        "--model-socket": config.model_sockets,
        "--worker": config.worker,
        "--docling": config.docling,  # its tasks live in one process's job store, which replicas do not share
    }
    for flag, given in refused.items():
        if given:
            raise ValueError(f"{flag} cannot go with --ray: Ray Serve replicas answer over HTTP only (--http)")
    if config.allow_adapter_loading:
        # An adapter loaded over HTTP would reach the one replica that took the request, not the others.
        raise ValueError("--allow-adapter-loading cannot go with --ray: give each adapter with --adapter")
    from modelhost.ray.cluster import check_installed

    check_installed("--ray")  # after the refusals above (a wrong flag is said first), before any model resolves
    from modelhost.http.mounted import MountedDoor
    from modelhost.ray import serving
    from modelhost.ray.replica import ReplicaConfig

    specs, _ = model_specs(config)  # resolved here: a missing model fails before any replica starts
    found = checked_adapters(config)
    replica = ReplicaConfig(
        tuple(specs),
        door=MountedDoor,  # each replica serves the HTTP door's routes (the Ray package imports no door)
        max_queue=config.max_queue,
        lazy=config.lazy,
        keep_alive=config.keep_alive,
        max_memory=config.max_memory,
        api_key=config.api_key,
        access_log=config.access_log is not None,
        adapters=tuple(found),
    )
    serving.run(
        placement.address,
        replica,
        http=config.http or ("127.0.0.1", 8000),
        replicas=placement.replicas,
        num_cpus=placement.num_cpus,
        num_gpus=placement.num_gpus,
        slots=config.parallel,
        say=say or (lambda line: print(line, file=sys.stderr, flush=True)),
    )

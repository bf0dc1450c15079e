"""`modelhost serve`: its flags become one `modelhost.serve.ServeConfig`, which checks how they go together, so
the Python API refuses what the command refuses."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from modelhost import errors
from modelhost.cli.argv import default_socket
from modelhost.cli.common import BackendOpt, fail, usage

if TYPE_CHECKING:
    from modelhost._access import LogFormat
    from modelhost._serving import ClientLimits

__all__ = ["serve"]


def serve(
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            "-m",
            help="A catalogue name, a .gguf file or a model folder; NAME=... to choose its name. Repeat to serve "
            "several (requests name theirs) [default].",
        ),
    ] = None,
    socket_model: Annotated[
        str | None, typer.Option("--socket-model", help="The model the inferd socket serves [the first --model].")
    ] = None,
    model_socket: Annotated[
        list[str] | None,
        typer.Option("--model-socket", help="Another inferd socket for one model: NAME=PATH (repeatable)."),
    ] = None,
    lazy: Annotated[
        bool, typer.Option("--lazy", help="Load each model at its first request (the socket's model: at start).")
    ] = False,
    keep_alive: Annotated[
        float | None, typer.Option("--keep-alive", min=0, help="Unload a model idle this many seconds [never].")
    ] = None,
    max_memory: Annotated[
        str | None,
        typer.Option(
            "--max-memory", help="Bound on loaded models' total size, e.g. 8G; the LRU idle one unloads [none]."
        ),
    ] = None,
    backend: BackendOpt = None,
    socket: Annotated[
        str | None, typer.Option("--socket", help="Unix socket path (default: the inferd address).")
    ] = None,
    no_socket: Annotated[bool, typer.Option("--no-socket", help="Do not open the inferd socket door.")] = False,
    http: Annotated[
        str | None, typer.Option("--http", help="OpenAI/Ollama HTTP door on HOST:PORT (alone: 127.0.0.1:8000).")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option("--api-key", envvar="MODELHOST_API_KEY", help="Bearer token for /v1 and /api.")
    ] = None,
    no_ui: Annotated[
        bool, typer.Option("--no-ui", help="No page for people at / of the --http door (chat, documents, state).")
    ] = False,
    worker: Annotated[
        str | None, typer.Option("--worker", help="giz job worker on HOST:PORT (alone: 127.0.0.1:8001).")
    ] = None,
    docling: Annotated[
        str | None,
        typer.Option(
            "--docling",
            help="docling-serve's document API on the --http door, pages read by this served model (alone: ocr); "
            "its tasks in --state's docling/ [~/.local/state/modelhost/docling].",
        ),
    ] = None,
    allow_fetch: Annotated[
        bool, typer.Option("--allow-fetch", help="--docling: fetch URL sources (public addresses only).")
    ] = False,
    fetch_private: Annotated[
        bool, typer.Option("--fetch-private", help="--docling --allow-fetch: private and loopback addresses too.")
    ] = False,
    state: Annotated[
        str | None, typer.Option("--state", help="The job worker's state folder [~/.local/state/modelhost/worker].")
    ] = None,
    capacity: Annotated[int, typer.Option("--capacity", help="Jobs the worker holds at once.")] = 8,
    max_queue: Annotated[int, typer.Option("--max-queue", help="Requests that may wait for the model.")] = 64,
    parallel: Annotated[
        int | None,
        typer.Option(
            "--parallel",
            min=1,
            help="Requests decoded at once (continuous batching; llama_cpp default 4; 1: one at a time).",
        ),
    ] = None,
    mmproj: Annotated[
        str | None,
        typer.Option(
            "--mmproj", help="A GGUF vision model's projector (llama_cpp) [an mmproj-<name>.gguf beside the model]."
        ),
    ] = None,
    threads: Annotated[
        int | None, typer.Option("--threads", min=1, help="Compute threads per model [the cores this process may use].")
    ] = None,
    poll: Annotated[
        int | None,
        typer.Option(
            "--poll",
            min=0,
            max=100,  # inference/openmp.py's MAX_POLL, written out: this module imports no contract at the top
            help="How long compute threads spin before they sleep, 0-100 (0: sleep at once; 100: OpenMP's and "
            "llama-server's 3 ms) [measured at start: 100 on cores of its own, 0 on shared ones].",
        ),
    ] = None,
    tensor_parallel: Annotated[
        int | None, typer.Option("--tp", min=1, help="vllm: GPUs each model's layers are split across [1].")
    ] = None,
    pipeline_parallel: Annotated[
        int | None, typer.Option("--pp", min=1, help="vllm: pipeline stages each model is cut into [1].")
    ] = None,
    header_timeout: Annotated[
        float | None, typer.Option("--header-timeout", help="HTTP doors: seconds a request's headers may take [60].")
    ] = None,
    body_timeout: Annotated[
        float | None, typer.Option("--body-timeout", help="HTTP doors: seconds a request body may pause [60].")
    ] = None,
    max_connections: Annotated[
        int | None, typer.Option("--max-connections", help="HTTP doors: open connections each holds [256].")
    ] = None,
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format", help="HTTP doors' access log on stderr: text (for a person), json (a line each) or none."
        ),
    ] = "text",
    adapter: Annotated[
        list[str] | None,
        typer.Option(
            "--adapter",
            help="A LoRA adapter served by name beside its base: NAME=PATH (the base its config names, or the only "
            "model), or NAME=MODEL:PATH (repeatable). Requests name it in `model`.",
        ),
    ] = None,
    allow_adapter_loading: Annotated[
        bool,
        typer.Option(
            "--allow-adapter-loading",
            help="Let HTTP clients load and unload adapters at runtime (POST /v1/load_lora_adapter, "
            "/v1/unload_lora_adapter); the server then reads any path a client names.",
        ),
    ] = False,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help="Serve as replicas on the Ray cluster at HOST:PORT (or auto): HTTP only. With --worker: serve here "
            'as without --ray, and run the worker\'s jobs that ask "ray": true on that cluster.',
        ),
    ] = None,
    replicas: Annotated[
        int | None, typer.Option("--replicas", min=1, help="--ray: replicas, each a whole host [2].")
    ] = None,
    actors: Annotated[int, typer.Option("--actors", min=1, help='--ray --worker: actors of each "ray": true job.')] = 2,
    num_cpus: Annotated[
        float, typer.Option("--num-cpus", min=0, help="--ray: CPUs each replica (with --worker: each actor) reserves.")
    ] = 1.0,
    num_gpus: Annotated[
        float, typer.Option("--num-gpus", min=0, help="--ray: GPUs each replica (with --worker: each actor) reserves.")
    ] = 0.0,
) -> None:
    """Hold a model and serve it: the inferd socket (default), and optionally HTTP and the job worker."""
    from modelhost import serve as serving
    from modelhost.host.models import parse_size

    socket_path: str | None = None
    on_serve = ray is not None and worker is None  # replicas on Ray Serve; with --worker, Ray runs only its jobs
    if not no_socket and not (on_serve and socket is None):  # replicas: no default socket, HTTP only
        socket_path = socket if socket is not None else default_socket()
    if ray is not None and not on_serve and replicas is not None:
        raise usage("--replicas goes with serve --ray's replicas; with --worker, --actors sizes its jobs' pools")
    try:
        config = serving.ServeConfig(
            models=tuple(model or ("default",)),
            socket_model=socket_model,
            model_sockets=tuple(model_socket or ()),
            lazy=lazy,
            keep_alive=keep_alive,
            max_memory=parse_size(max_memory) if max_memory is not None else None,
            backend=backend,
            socket=socket_path,
            http=serving.parse_hostport(http) if http else None,
            api_key=api_key,
            ui=not no_ui,
            worker=serving.parse_hostport(worker) if worker else None,
            state_dir=Path(state) if state else None,
            capacity=capacity,
            max_queue=max_queue,
            parallel=parallel,
            threads=threads,
            poll=poll,
            mmproj=mmproj,
            tensor_parallel=tensor_parallel,
            pipeline_parallel=pipeline_parallel,
            client_limits=_client_limits(header_timeout, body_timeout, max_connections),
            access_log=_log_format(log_format),
            adapters=tuple(adapter or ()),
            allow_adapter_loading=allow_adapter_loading,
            docling=docling,
            allow_fetch=allow_fetch,
            fetch_private=fetch_private,
            ray=ray if not on_serve else None,
            ray_actors=actors,
            ray_actor_cpus=num_cpus,
            ray_actor_gpus=num_gpus,
        )
        if on_serve:
            assert ray is not None
            placement = serving.RayPlacement(ray, num_cpus=num_cpus, num_gpus=num_gpus)
            if replicas is not None:
                placement = dataclasses.replace(placement, replicas=replicas)
            serving.run_on_ray(config, placement)
        else:
            serving.run(config)
    except ValueError as exc:
        raise usage(str(exc)) from exc
    except errors.ModelHostError as exc:
        raise fail(exc) from exc
    except OSError as exc:  # what no check foresaw (a disk that fails): still one line, not a traceback
        raise fail(exc) from exc


def _log_format(value: str) -> LogFormat | None:
    """`--log-format`: text, json or none; ValueError (one line) for anything else."""
    if value == "none":
        return None
    if value == "text":
        return "text"
    if value == "json":
        return "json"
    raise ValueError(f"--log-format takes text, json or none, got {value!r}")


def _client_limits(
    header_timeout: float | None, body_timeout: float | None, max_connections: int | None
) -> ClientLimits | None:
    """The doors' ClientLimits from the flags given (None: the doors' defaults); ValueError for a bad value."""
    if header_timeout is None and body_timeout is None and max_connections is None:
        return None
    from modelhost import _serving

    default = _serving.ClientLimits()
    return _serving.ClientLimits(
        header_timeout=default.header_timeout if header_timeout is None else header_timeout,
        body_timeout=default.body_timeout if body_timeout is None else body_timeout,
        max_connections=default.max_connections if max_connections is None else max_connections,
    )

"""A Ray Serve replica serves the door it is handed (ReplicaConfig.door), not one it imports: the replica class run
in this process, without a cluster, over a stand-in model, its ASGI app driven over loopback by uvicorn as Serve's
proxy would reach it. tests/ray/test_ray_serve.py runs the same replicas on a real cluster through `serve --ray`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from modelhost import _serving
from modelhost.host.models import ModelSpec
from modelhost.http.mounted import MountedDoor
from modelhost.testing.standins import ScriptedModel
from modelhost.testing.waiting import STATE_WAIT_SECONDS


def scripted() -> ScriptedModel:
    """A stand-in model writing one word per token (module-level: the config travels pickled, its loader with it)."""
    return ScriptedModel(["alpha ", "beta ", "gamma ", "delta "])


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop on a thread of its own, as a replica's."""
    running = asyncio.new_event_loop()
    thread = threading.Thread(target=running.run_forever, daemon=True)
    thread.start()
    yield running
    running.call_soon_threadsafe(running.stop)
    thread.join(10)
    running.close()


def run(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, loop).result(STATE_WAIT_SECONDS)


def test_a_replica_serves_the_door_its_config_hands_it(
    ray_env: dict[str, str], loop: asyncio.AbstractEventLoop
) -> None:
    from ray import cloudpickle

    from modelhost.ray.replica import REPLICA_HEADER, ModelhostReplica, ReplicaConfig

    config = ReplicaConfig((ModelSpec("scripted", scripted),), door=MountedDoor, access_log=False)
    # What Serve does with it: the config crosses to the replica's process pickled, the door by reference.
    config = cloudpickle.loads(cloudpickle.dumps(config))
    assert config.door is MountedDoor
    replica = object.__new__(ModelhostReplica)
    run(loop, replica.__init__(config))  # Serve awaits the async constructor: the models load here
    assert isinstance(replica.door, MountedDoor) and replica.door.models is replica.models
    sock = _serving.bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(replica.__serve_build_asgi_app__(), log_config=None, lifespan="off"))
    task = run(loop, _serving.serve(server, sock, name="replica"))
    url = _serving.url_of(sock)
    try:
        health = httpx.get(f"{url}/health", timeout=STATE_WAIT_SECONDS)
        answer = httpx.post(
            f"{url}/v1/completions",
            json={"model": "scripted", "prompt": "x", "max_tokens": 2},
            timeout=STATE_WAIT_SECONDS,
        )
    finally:
        server.should_exit = True
        run(loop, asyncio.wait_for(task, STATE_WAIT_SECONDS))
        run(loop, replica.models.aclose(grace=1.0))
    assert health.status_code == 200 and health.headers[REPLICA_HEADER] == "local"  # outside Serve: "local"
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["text"] == "alpha beta "
    # What the replica hands the application's board at each health check: the door's series count the answer.
    assert b'modelhost_http_requests_total{method="POST",route="/v1/completions",status="200"} 1.0' in (
        replica.door.metrics()
    )

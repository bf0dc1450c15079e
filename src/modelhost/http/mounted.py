"""The HTTP door mounted in a server it does not run: its ASGI app and its metrics over a model set someone else
loaded, without HttpServer's uvicorn. A Ray Serve replica (modelhost.ray.replica) serves the app behind Serve's
proxy and hands the metrics to the application's board; the composition root (modelhost.serve) gives the replica
this class, so the Ray package imports no door.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp

from modelhost.host.models import Models
from modelhost.http.app import build_app
from modelhost.http.metrics import HttpMetrics, exposition


class MountedDoor:
    """The HTTP door over `models`: every route `modelhost serve --http` answers (OpenAI, Ollama, streaming,
    /health, /ready, /metrics), `api_key` guarding /v1 and /api, one access-log line per request unless
    `access_log` is False. The door's own metrics exist from construction, so they can be read before the app is."""

    def __init__(self, models: Models, *, api_key: str | None = None, access_log: bool = True) -> None:
        self.models = models
        self.api_key = api_key
        self.access_log = access_log
        self.http_metrics = HttpMetrics(models)

    def app(self) -> ASGIApp:
        """A new ASGI app of the door's routes over the model set."""
        # Without the access log, each record goes nowhere (the door's default writes it to its logger).
        quiet: dict[str, Any] = {} if self.access_log else {"access_log": lambda record: None}
        return build_app(self.models, api_key=self.api_key, metrics=self.http_metrics, **quiet)

    def metrics(self) -> bytes:
        """What the door's /metrics serves: the models' series, then the door's own."""
        return exposition(self.models, self.http_metrics)


__all__ = ["MountedDoor"]

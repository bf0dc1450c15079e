"""The metrics only the HTTP door knows (requests by route and status, clients that hung up, refusals of the HTTP
layer), beside each model's state; /metrics serves them after the host's."""

from __future__ import annotations

import typing
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from modelhost import _serving
from modelhost.host import Host
from modelhost.host.models import Models, ModelState, as_models


class _HostStateCollector(Collector):
    """`modelhost_model_state{model_name=...,state=...}` = 1 for each model's current state, so a dashboard shows
    loading/unloaded/failed."""

    def __init__(self, models: Models) -> None:
        self._models = models

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "modelhost_model_state", "1 for a model's current state, 0 for the others.", labels=["model_name", "state"]
        )
        for model in self._models:
            current = model.state
            for state in typing.get_args(ModelState):
                family.add_metric([model.name, state], 1.0 if current == state else 0.0)
        yield family


class HttpMetrics:
    """What only the HTTP door knows: requests by route and status, and clients that hung up mid-request.

    A separate registry from the host's, exposed together at /metrics: two apps over one host (tests) must not
    register the same names twice in one registry.
    """

    def __init__(self, host: Host | Models) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "modelhost_http_requests", "HTTP requests answered, by route and status.", ["route", "method", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.disconnects = Counter(
            "modelhost_http_client_disconnects",
            "Clients that hung up before their answer was complete (their request was cancelled).",
            ["route"],
            registry=self.registry,
        )
        #: Refused by the HTTP layer before any route ran (slow headers or body, too many connections, bad HTTP).
        self.refusals = _serving.refusal_counter(self.registry, "modelhost_http")
        self.registry.register(_HostStateCollector(as_models(host)))


def exposition(models: Models, metrics: HttpMetrics) -> bytes:
    """What the door's /metrics serves: the models' series (latencies, queue, tokens, finish reasons, by model),
    then the door's own."""
    return generate_latest(models.metrics.registry) + generate_latest(metrics.registry)

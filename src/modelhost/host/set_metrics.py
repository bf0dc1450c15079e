"""What a model set adds to its hosts' Prometheus metrics: each model's resident bytes, its loads and unloads, and
the memory budget. The hosts' own figures (requests, tokens, queue) are host/metrics.py's; these belong to the set,
since they outlive every load of a model."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

#: States in which a model holds no memory: never loaded or unloaded, or its load failed, or its host has closed.
NOT_RESIDENT = frozenset({"unloaded", "failed", "closed"})


class Counted(Protocol):
    """What the figures read of one model of the set (host/models.py's ServedModel)."""

    loads: int
    unloads: int

    @property
    def name(self) -> str: ...

    @property
    def size(self) -> int: ...

    @property
    def state(self) -> str: ...


class CountedSet(Protocol):
    """What the figures read of the set (host/models.py's Models)."""

    def __iter__(self) -> Iterator[Counted]: ...

    @property
    def max_memory(self) -> int | None: ...


class ModelSetCollector(Collector):
    """The set's figures, read at each scrape."""

    def __init__(self, models: CountedSet) -> None:
        self._models = models

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        labels = ["model_name"]
        resident = GaugeMetricFamily(
            "modelhost_model_resident_bytes",
            "A loaded model's estimated size (weights and KV cache), 0 when unloaded.",
            labels=labels,
        )
        loads = CounterMetricFamily("modelhost_model_loads", "Loads of the model that succeeded.", labels=labels)
        unloads = CounterMetricFamily(
            "modelhost_model_unloads", "Unloads of the model: idle past keep-alive, or for room.", labels=labels
        )
        for model in self._models:
            resident.add_metric([model.name], float(0 if model.state in NOT_RESIDENT else model.size))
            loads.add_metric([model.name], float(model.loads))
            unloads.add_metric([model.name], float(model.unloads))
        yield resident
        yield loads
        yield unloads
        if self._models.max_memory is not None:
            yield GaugeMetricFamily(
                "modelhost_memory_budget_bytes", "The bound on loaded models' total size.", self._models.max_memory
            )

"""The replicas' metrics in one view (`/replicas/metrics`, through whichever replica takes it): every live replica's
`/metrics` series in one Prometheus exposition, each sample labelled with its `replica`.

How they get there: Serve asks each replica for its health every few seconds (serving.HEALTH_CHECK_PERIOD_SECONDS);
each check also hands the replica's current `/metrics` text to one small actor of the application (MetricsBoard,
named after the application, no CPU reserved, created by the first replica that reports). The view reads that board.
So it is at most one health period old, and says how old: `modelhost_replica_metrics_age_seconds{replica}`. A replica
that stops reporting (killed, replaced, scaled down) leaves the view after STALE_SECONDS. The board belongs to the
replica that made it: when that replica dies the board goes too, and the next report of a replica alive makes a new
one (the others' series are back within one period).

Totals are not computed here. `sum without (replica) (...)` in Prometheus gives them for the series that add up
(counters, histograms, the gauges that count: requests running and waiting, batch slots, resident memory); for
those that do not (`kv_cache_usage_perc`, a fraction; `process_start_time_seconds`) a sum would be a wrong number,
and the per-replica series is what there is to say.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

import ray
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from modelhost.ray.cluster import NAMESPACE

#: Seconds after its last report that a replica leaves the view: a live replica reports at every health check,
#: which Serve makes every 5 s and lets take up to 30 s on a busy replica before replacing it (serving.py); a replica
#: silent for 60 s is dead or replaced.
STALE_SECONDS = 60.0
#: The label each sample gets: the replica's id (the `x-modelhost-replica` header of its answers).
LABEL = "replica"
#: The series saying how old each replica's part of the view is.
AGE_SERIES = "modelhost_replica_metrics_age_seconds"


class MetricsBoard:
    """The application's board (a Ray actor): each replica's last `/metrics` text and when it came."""

    def __init__(self) -> None:
        self.reports: dict[str, tuple[float, str]] = {}

    def report(self, replica: str, text: str) -> None:
        """Keep `replica`'s current metrics text."""
        self.reports[replica] = (time.monotonic(), text)

    def read(self) -> dict[str, tuple[float, str]]:
        """Each replica's (age in seconds, metrics text), those silent for STALE_SECONDS dropped."""
        now = time.monotonic()
        self.reports = {r: (at, text) for r, (at, text) in self.reports.items() if now - at < STALE_SECONDS}
        return {r: (now - at, text) for r, (at, text) in self.reports.items()}


_BOARD: Any = ray.remote(num_cpus=0)(MetricsBoard)


def board_name(app: str) -> str:
    """The board's actor name (in modelhost's Ray namespace): one per Serve application."""
    return f"modelhost-metrics-{app}"


class Reporter:
    """A replica's link to its application's board: `report` at each health check, `read` for the view."""

    def __init__(self, app: str) -> None:
        self.app = app
        self._board: Any = None

    def _handle(self) -> Any:
        if self._board is None:
            self._board = _BOARD.options(name=board_name(self.app), namespace=NAMESPACE, get_if_exists=True).remote()
        return self._board

    async def report(self, replica: str, text: str) -> None:
        """Hand the board this replica's metrics (a board that died is made again at the next report)."""
        try:
            await asyncio.to_thread(self._handle)  # a lookup in the cluster's GCS: off the replica's event loop
            await self._board.report.remote(replica, text)
        except ray.exceptions.RayError:
            self._board = None

    async def read(self) -> dict[str, tuple[float, str]]:
        """Each live replica's (age, metrics text); empty when no board answers."""
        try:
            await asyncio.to_thread(self._handle)
            reports: dict[str, tuple[float, str]] = await self._board.read.remote()
        except ray.exceptions.RayError:
            self._board = None
            return {}
        return reports


def merged(reports: dict[str, tuple[float, str]]) -> bytes:
    """One Prometheus exposition of every replica's series, each sample labelled `replica`, and each replica's
    age (AGE_SERIES)."""
    families: dict[str, Metric] = {}
    age = Metric(AGE_SERIES, "Seconds since the replica's metrics in this view were taken.", "gauge")
    for replica, (seconds, text) in sorted(reports.items()):
        age.add_sample(AGE_SERIES, {LABEL: replica}, round(seconds, 3))
        for family in text_string_to_metric_families(text):
            into = families.setdefault(family.name, Metric(family.name, family.documentation, family.type))
            for sample in family.samples:
                into.add_sample(sample.name, {**sample.labels, LABEL: replica}, sample.value, sample.timestamp)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed([age, *families.values()]))
    return generate_latest(registry)


class _Fixed(Collector):
    """A collector of families made already (what `merged` gathered)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


__all__ = ["AGE_SERIES", "LABEL", "STALE_SECONDS", "MetricsBoard", "Reporter", "board_name", "merged"]

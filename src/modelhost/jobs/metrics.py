"""A job board's Prometheus metrics (`modelhost_worker_` prefix, the job worker's names since it was the only job
door; counters end in `_total`, times are in seconds).

Each board owns its registry (the worker's, and the docling door's tasks), so two in one process never collide; the
worker's `/metrics` also appends the host's own registry, so one scrape shows the jobs and the model serving them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Job durations: from a no-op job (a millisecond of bookkeeping) to a long generation on a CPU (tens of minutes).
_DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
# Store commits: one device flush is ~3 ms here; anything past 100 ms means the disk is in trouble.
_COMMIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class JobMetrics:
    """Counters, gauges and histograms of one job board."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # prometheus_client appends `_total` to counters itself.
        self.jobs_created = Counter("modelhost_worker_jobs_created", "Jobs accepted (202).", registry=r)
        self.jobs_replayed = Counter(
            "modelhost_worker_jobs_replayed", "Submissions answered with an existing job (200).", registry=r
        )
        self.jobs_finished = Counter(
            "modelhost_worker_jobs_finished", "Jobs finished, by status and code.", ["status", "code"], registry=r
        )
        self.jobs_rejected = Counter(
            "modelhost_worker_jobs_rejected", "Submissions refused, by code.", ["code"], registry=r
        )
        self.jobs_queued = Gauge("modelhost_worker_jobs_queued", "Jobs waiting to run.", registry=r)
        self.jobs_processing = Gauge("modelhost_worker_jobs_processing", "Jobs running now.", registry=r)
        self.jobs_stored = Gauge("modelhost_worker_jobs_stored", "Jobs in the state folder (any status).", registry=r)
        self.capacity = Gauge("modelhost_worker_capacity", "Jobs the worker holds at once.", registry=r)
        self.intake_open = Gauge("modelhost_worker_intake_open", "1 while new jobs are accepted.", registry=r)
        self.storage_writable = Gauge(
            "modelhost_worker_storage_writable",
            "1 while the state folder takes writes; 0 while it fails (jobs wait, intake answers 507).",
            registry=r,
        )
        self.storage_errors = Counter(
            "modelhost_worker_storage_errors", "Writes of the state folder that failed (disk full, I/O).", registry=r
        )
        self.job_duration = Histogram(
            "modelhost_worker_job_duration_seconds",
            "From a job's start to its end.",
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.queue_wait = Histogram(
            "modelhost_worker_queue_wait_seconds",
            "From a job's creation to its start.",
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.store_commit = Histogram(
            "modelhost_worker_store_commit_seconds",
            "From a write's submission to its durability (group commit included).",
            buckets=_COMMIT_BUCKETS,
            registry=r,
        )

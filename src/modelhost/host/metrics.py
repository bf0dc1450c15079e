"""The host's Prometheus metrics, named in vLLM's style under a `modelhost_` prefix.

They live with the scheduler because that is the one place every request of every door passes: a door adds
nothing of its own to latency figures. Each Host owns a CollectorRegistry, so two hosts in one process (tests)
never collide and `/metrics` of a door shows exactly its host.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Latency buckets in seconds: from a cached-prompt first token on a small model (~10 ms) to a long page (minutes).
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# Inter-token buckets: 1 ms (GPU) to 1 s (a large model on a busy CPU).
_ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)


# Batch sizes: from one sequence to a full prefill chunk on top of many decoding slots.
_BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256, 512)


class HostMetrics:
    """Counters, gauges and histograms of one host, labelled with its model name."""

    def __init__(self, model_name: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        labels = ["model_name"]
        r = self.registry
        self.requests_running = Gauge(
            "modelhost_num_requests_running", "Requests the model is working on now.", labels, registry=r
        )
        self.requests_waiting = Gauge(
            "modelhost_num_requests_waiting", "Requests queued for the model.", labels, registry=r
        )
        self.prompt_tokens = Counter("modelhost_prompt_tokens", "Prompt tokens processed.", labels, registry=r)
        self.prompt_tokens_cached = Counter(
            "modelhost_prompt_tokens_cached",
            "Prompt tokens reused from the KV cache (a shared prefix).",
            labels,
            registry=r,
        )
        self.prompt_tokens_evaluated = Counter(
            "modelhost_prompt_tokens_evaluated", "Prompt tokens the model evaluated (not cached).", labels, registry=r
        )
        self.batch_slots = Gauge(
            "modelhost_batch_slots", "Requests the model decodes at once (1: one at a time).", labels, registry=r
        )
        self.batch_slots_used = Gauge(
            "modelhost_batch_slots_used", "Batch slots holding a request (0 when idle).", labels, registry=r
        )
        self.batch_tokens = Histogram(
            "modelhost_batch_tokens",
            "Tokens evaluated per batch step (one per decoding request plus prompt chunks).",
            labels,
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.batch_sequences = Histogram(
            "modelhost_batch_sequences",
            "Requests that drew a token per batch step (the batch size of decoding).",
            labels,
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.generation_tokens = Counter("modelhost_generation_tokens", "Tokens generated.", labels, registry=r)
        self.requests_finished = Counter(
            "modelhost_request_success",
            "Requests finished, by finish reason (stop, length, cancelled, error).",
            [*labels, "finished_reason"],
            registry=r,
        )
        self.requests_rejected = Counter(
            "modelhost_request_rejected", "Requests refused at admission, by code.", [*labels, "code"], registry=r
        )
        self.time_to_first_token = Histogram(
            "modelhost_time_to_first_token_seconds",
            "From submission to the first generated token.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.inter_token_latency = Histogram(
            "modelhost_inter_token_latency_seconds",
            "Between consecutive generated tokens.",
            labels,
            buckets=_ITL_BUCKETS,
            registry=r,
        )
        self.e2e_latency = Histogram(
            "modelhost_e2e_request_latency_seconds",
            "From submission to the terminal event.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_time = Histogram(
            "modelhost_request_queue_time_seconds",
            "Time spent waiting for the model.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.embedding_requests = Counter(
            "modelhost_embedding_requests",
            "Embedding requests the model thread finished, by outcome (ok, error, cancelled).",
            [*labels, "outcome"],
            registry=r,
        )
        self.embedding_inputs = Counter(
            "modelhost_embedding_inputs", "Texts embedded (one per input of a request).", labels, registry=r
        )
        self.embedding_tokens = Counter(
            "modelhost_embedding_tokens", "Tokens evaluated for embeddings.", labels, registry=r
        )
        self.embedding_latency = Histogram(
            "modelhost_embedding_latency_seconds",
            "From an embedding's submission to its vectors (queue wait included).",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.model_name = model_name
        self.include(model_name)

    def mean_request_seconds(self, model_name: str) -> float | None:
        """The mean time of `model_name`'s requests so far, from submission to their end (None before the first)."""
        labels = {"model_name": model_name}
        total = self.registry.get_sample_value("modelhost_e2e_request_latency_seconds_sum", labels)
        count = self.registry.get_sample_value("modelhost_e2e_request_latency_seconds_count", labels)
        return total / count if total is not None and count else None

    def include(self, model_name: str) -> None:
        """Show `model_name`'s gauges from the start (at their idle values): one HostMetrics serves a model set,
        each model's host labelling its own series."""
        for metric in (self.requests_running, self.requests_waiting, self.batch_slots_used):
            metric.labels(model_name).set(0)
        self.batch_slots.labels(model_name).set(1)

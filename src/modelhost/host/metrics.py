"""The host's Prometheus metrics, named in vLLM's style under a `modelhost_` prefix.

They live with the scheduler because that is the one place every request of every door passes: a door adds
nothing of its own to latency figures. Each Host owns a CollectorRegistry, so two hosts in one process (tests)
never collide and `/metrics` of a door shows exactly its host. The registry also carries prometheus_client's
`process_*` series (memory, CPU, open files of this process), once.

vLLM's names where vLLM has the figure: `request_success` counts requests by finish reason (stop, length,
cancelled) and `request_failure` those that ended in an error, by code; `request_prompt_tokens`,
`request_generation_tokens`, `request_prefill_time_seconds` and `request_decode_time_seconds` are histograms with
one observation per request the model worked on; `kv_cache_usage_perc` is a fraction (0 to 1, as vLLM's).
`prefix_cache_queries` and `prefix_cache_hits` count prompt tokens looked up in the slots' kept prefixes and those
reused (their ratio is the prefix cache's hit rate); `iteration_tokens_total` is the tokens of each engine step;
`request_params_max_tokens`, `request_params_n` (the choices a request asked for, once per request however many
choices it has), `time_per_output_token_seconds` and `request_inference_time_seconds` (prefill plus
decode) are per request; `lora_requests_info` names the adapters running and waiting, `cache_config_info` the
cache's shape (batch slots), both as vLLM's info gauges (labels carry the facts; the value is when they were set).

A host nothing reads figures from (`modelhost convert` in one process: no door, no /metrics) is given
`UnreadMetrics`, which drops every figure: prometheus_client is imported where a HostMetrics is built, not with this
module, so such a host never imports it (with the http.server and wsgiref it pulls in) nor builds a registry of 30
series (0.035 CPU s together, measured, of a one-page convert that should take under one).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from modelhost.inference.types import GenerateMetrics

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

# Latency buckets in seconds: from a cached-prompt first token on a small model (~10 ms) to a long page (minutes).
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# Inter-token buckets: 1 ms (GPU) to 1 s (a large model on a busy CPU).
_ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)


# Per-request token counts (prompt or answer): vLLM's 1-2-5 steps, from a one-token answer to a 200k-token context, so
# a chat turn (tens), a page of a document (hundreds to a few thousand) and a long context each land in their own
# bucket; a finer grid would only multiply series per model.
_TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000, 200_000)


# Choices per request (OpenAI's `n`): vLLM's own buckets for request_params_n; the doors allow at most 16.
_N_BUCKETS = (1, 2, 5, 10, 20)

# Batch sizes: from one sequence to a full prefill chunk on top of many decoding slots.
_BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256, 512)


class HostMetrics:
    """Counters, gauges and histograms of one host, labelled with its model name."""

    def __init__(self, model_name: str, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

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
            "Requests finished, by finish reason (stop, length, cancelled); failures are in request_failure.",
            [*labels, "finished_reason"],
            registry=r,
        )
        self.requests_failed = Counter(
            "modelhost_request_failure",
            "Requests (generations and embeddings) that ended in an error, by error code: refused at admission "
            "(those are also in request_rejected) or failed on the model.",
            [*labels, "code"],
            registry=r,
        )
        self.request_prompt_tokens = Histogram(
            "modelhost_request_prompt_tokens",
            "Prompt tokens per request (cached ones included), one observation per request the model worked on.",
            labels,
            buckets=_TOKEN_BUCKETS,
            registry=r,
        )
        self.request_generation_tokens = Histogram(
            "modelhost_request_generation_tokens",
            "Tokens generated per request the model worked on.",
            labels,
            buckets=_TOKEN_BUCKETS,
            registry=r,
        )
        self.request_prefill_time = Histogram(
            "modelhost_request_prefill_time_seconds",
            "Per request: time the model spent evaluating its prompt, up to the first token.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.request_decode_time = Histogram(
            "modelhost_request_decode_time_seconds",
            "Per request: time from its first token to its last.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.kv_cache_usage = Gauge(
            "modelhost_kv_cache_usage_perc",
            "Fraction (0 to 1) of the model's KV-cache cells held by running requests; prefixes idle slots keep for "
            "reuse count as free, as in vLLM. Only for models whose engine reports it.",
            labels,
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
        self.prefix_cache_queries = Counter(
            "modelhost_prefix_cache_queries",
            "Prompt tokens looked up in the prefixes the batch slots keep (every prompt token of every request).",
            labels,
            registry=r,
        )
        self.prefix_cache_hits = Counter(
            "modelhost_prefix_cache_hits", "Prompt tokens found there and reused, not evaluated.", labels, registry=r
        )
        self.iteration_tokens = Histogram(
            "modelhost_iteration_tokens_total",
            "Tokens evaluated per engine step (vLLM's name; the same steps as batch_tokens).",
            labels,
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.request_max_tokens = Histogram(
            "modelhost_request_params_max_tokens",
            "The max_tokens each request the model worked on asked for.",
            labels,
            buckets=_TOKEN_BUCKETS,
            registry=r,
        )
        self.request_params_n = Histogram(
            "modelhost_request_params_n",
            "The choices (n) each request asked for: one observation per request, not per choice.",
            labels,
            buckets=_N_BUCKETS,
            registry=r,
        )
        self.time_per_output_token = Histogram(
            "modelhost_time_per_output_token_seconds",
            "Per request: its decode time over the tokens after its first.",
            labels,
            buckets=_ITL_BUCKETS,
            registry=r,
        )
        self.request_inference_time = Histogram(
            "modelhost_request_inference_time_seconds",
            "Per request: the time the model worked on it (prefill and decode).",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.lora_requests_info = Gauge(
            "modelhost_lora_requests_info",
            "The LoRA adapters of the running and the waiting requests (comma-separated) and the adapters the model "
            "holds; the value is when that last changed (vLLM's info gauge).",
            [*labels, "running_lora_adapters", "waiting_lora_adapters", "max_lora"],
            registry=r,
        )
        self._lora_labels: dict[str, tuple[str, str, str]] = {}
        self.cache_config_info = Gauge(
            "modelhost_cache_config_info",
            "The model's KV cache: its batch slots (each keeps its prompt's prefix for reuse) and whether the engine "
            "reports its use (kv_cache_usage_perc); the value is 1.",
            [*labels, "num_slots", "usage_reported"],
            registry=r,
        )
        if registry is None:
            # prometheus_client's process_* series (memory, CPU, open files), on the registry made here only: a
            # caller's registry may have its own already (the library's default REGISTRY does), and a registry does
            # not refuse a second one, so every process_* sample would appear twice and Prometheus reject the scrape.
            ProcessCollector(registry=r)
        self.model_name = model_name
        self.include(model_name)

    def reject(self, model_name: str, code: str) -> None:
        """Count a request refused at admission: a rejection, and so a failure."""
        self.requests_rejected.labels(model_name, code).inc()
        self.requests_failed.labels(model_name, code).inc()

    def finished(self, model_name: str, m: GenerateMetrics, max_tokens: int | None = None) -> None:
        """Count the tokens of a request the model worked on and that ended without an error (cancelled included),
        and observe each per-request histogram once from its GenerateMetrics (and the max_tokens it asked for,
        when it said). (Its finish reason is counted when its terminal event goes out, with the requests that
        never reached the model.)"""
        self.prefix_cache_queries.labels(model_name).inc(m.prompt_tokens)
        self.prefix_cache_hits.labels(model_name).inc(m.cached_prompt_tokens)
        self.request_inference_time.labels(model_name).observe(m.prefill_seconds + m.decode_seconds)
        if m.generated_tokens > 1:
            self.time_per_output_token.labels(model_name).observe(m.decode_seconds / (m.generated_tokens - 1))
        if max_tokens is not None:
            self.request_max_tokens.labels(model_name).observe(max_tokens)
        self.prompt_tokens.labels(model_name).inc(m.prompt_tokens)
        self.prompt_tokens_cached.labels(model_name).inc(m.cached_prompt_tokens)
        self.prompt_tokens_evaluated.labels(model_name).inc(max(0, m.prompt_tokens - m.cached_prompt_tokens))
        self.generation_tokens.labels(model_name).inc(m.generated_tokens)
        self.request_prompt_tokens.labels(model_name).observe(m.prompt_tokens)
        self.request_generation_tokens.labels(model_name).observe(m.generated_tokens)
        self.request_prefill_time.labels(model_name).observe(m.prefill_seconds)
        self.request_decode_time.labels(model_name).observe(m.decode_seconds)

    def lora_requests(self, model_name: str, running: str, waiting: str, max_lora: int) -> None:
        """Name the adapters of the running and waiting requests (comma-separated), when that changed."""
        labels = (running, waiting, str(max_lora))
        previous = self._lora_labels.get(model_name)
        if previous == labels:
            return
        if previous is not None:
            self.lora_requests_info.remove(model_name, *previous)
        self._lora_labels[model_name] = labels
        self.lora_requests_info.labels(model_name, *labels).set(time.time())

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


class UnreadMetrics(HostMetrics):
    """The metrics of a host whose figures nothing reads (no door serves its /metrics, no budget weighs its
    requests): every update is dropped, and nothing of prometheus_client is imported or built (the module's
    docstring). `mean_request_seconds` knows no request."""

    def __init__(self, model_name: str) -> None:  # no registry: HostMetrics.__init__ is not run
        self.model_name = model_name
        self._lora_labels = {}

    def __getattr__(self, name: str) -> Any:
        # Only for the attributes HostMetrics.__init__ would have set (its series): each is the series that drops
        # what it is given.
        return _DROPPED

    def mean_request_seconds(self, model_name: str) -> float | None:
        return None


class _Dropped:
    """A series that drops every update: `labels(...)` is the series itself; inc, dec, set, observe, remove do
    nothing."""

    def labels(self, *values: str) -> _Dropped:
        return self

    def inc(self, amount: float = 1) -> None: ...

    def dec(self, amount: float = 1) -> None: ...

    def set(self, value: float) -> None: ...

    def observe(self, value: float) -> None: ...

    def remove(self, *values: str) -> None: ...


_DROPPED = _Dropped()

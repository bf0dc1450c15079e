"""Jobs spread over a cluster: a worker started with `--ray ADDRESS` runs a `document.convert` or `text.embed` job
whose input says `"ray": true` on that Ray cluster's actors instead of its own model. Each operation says what it
needs of the cluster (`documents.ClusterDocuments`, `embeddings.ClusterEmbeddings`; `registry.Cluster` is both,
which modelhost.ray.jobs implements: the worker never imports Ray). A job that asks for it on a worker without a
cluster is refused at submission (400, naming the field), never quietly run here.

What a cluster job must give back is what the plain job would: the same outputs byte for byte (documents) or within
float rounding (vectors), progress as it goes, and a cancel that stops the cluster's work and frees its actors.
"""

from __future__ import annotations

from typing import Any

from modelhost.host.models import ModelSpec
from modelhost.jobs import schema
from modelhost.jobs.schema import failed, invalid

#: The input field that asks for the cluster.
FIELD = "ray"


def wants_cluster(operation: str, value: dict[str, Any], cluster: object | None) -> bool:
    """Whether a job's input asks for the cluster (`"ray": true`); 400 naming the field when it is not a boolean,
    or when this worker has no cluster to run it on."""
    asked = value.get(FIELD, False)
    if not isinstance(asked, bool):
        raise invalid(f"{operation}: `{FIELD}` must be true or false, got {asked!r}")
    if asked and cluster is None:
        raise invalid(
            f"{operation}: `{FIELD}` is true, but this worker runs no jobs on a Ray cluster: start it with "
            "`modelhost serve --worker ... --ray ADDRESS`, or leave `ray` out"
        )
    return asked


def served_spec(host: Any, operation: str) -> ModelSpec:
    """The spec of the model a cluster job names (its actors load it as the worker does); WORKER_FAILED for a
    worker built on a bare Host (the library's own use), which has none to give them."""
    spec = getattr(host, "spec", None)
    if not isinstance(spec, ModelSpec):
        raise failed(schema.WORKER_FAILED, f"{operation} on Ray needs a worker serving a model set (modelhost serve)")
    return spec

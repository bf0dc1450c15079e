"""Every operation the worker serves, in one list: adding an operation is its module (defining an `Operation`
record) and one line here. The executor and the server read this list; neither imports an operation."""

from __future__ import annotations

from typing import Protocol

from modelhost.jobs import documents
from modelhost.jobs.operation import Operation, bound
from modelhost.worker import embeddings, text, training

#: The operations every worker serves.
OPERATIONS: tuple[Operation, ...] = (
    text.CHAT,
    text.GENERATE,
    embeddings.EMBED,
    training.LORA_TRAIN,
    documents.CONVERT,
)


class Cluster(documents.ClusterDocuments, embeddings.ClusterEmbeddings, Protocol):
    """Where a worker's `"ray": true` jobs run (jobs.cluster): what both operations that take it need.
    modelhost.ray.jobs.ClusterJobs is one, on a Ray cluster."""

    address: str


def default_operations(cluster: Cluster | None = None) -> dict[str, Operation]:
    """The operations every worker serves, by name: text.chat, text.generate, text.embed, lora.train and
    document.convert; with a `cluster` (a worker started with --ray), text.embed and document.convert run the jobs
    that ask `"ray": true` on it (without one, such a job is refused at submission)."""
    operations = {op.name: op for op in OPERATIONS}
    if cluster is not None:
        for op in (embeddings.EMBED, documents.CONVERT):
            operations[op.name] = bound(op, cluster=cluster)
    return operations

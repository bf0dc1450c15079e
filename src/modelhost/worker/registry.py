"""Every operation the worker serves, in one list: adding an operation is its module (defining an `Operation`
record) and one line here. The executor and the server read this list; neither imports an operation."""

from __future__ import annotations

from modelhost.worker import documents, embeddings, text, training
from modelhost.worker.operation import Operation

#: The operations every worker serves.
OPERATIONS: tuple[Operation, ...] = (
    text.CHAT,
    text.GENERATE,
    embeddings.EMBED,
    training.LORA_TRAIN,
    documents.CONVERT,
)


def default_operations() -> dict[str, Operation]:
    """The operations every worker serves, by name: text.chat, text.generate, text.embed, lora.train and
    document.convert."""
    return {op.name: op for op in OPERATIONS}

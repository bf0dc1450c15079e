"""The job worker door: giz's inference worker protocol v1 over HTTP, durable, on the host's scheduler.

`WorkerServer(host, state_dir=..., capacity=...)` is the whole door; `protocol` holds every wire constant and
serialiser; `app` and `submission` giz's routes and uploads; `registry` the operations it serves (text.chat,
text.generate, text.embed, lora.train, document.convert), each from its own module. It stands on modelhost.jobs,
as the docling door does: what an operation is (`jobs.operation`), the executor that runs jobs through them, the
board (capacity, idempotency, cancel, ack) and the durable job folders (`jobs.store`).
"""

from modelhost.jobs.operation import JobContext, Operation, RunJob, Work
from modelhost.worker.app import build_app
from modelhost.worker.protocol import PICTURE_SIDE, Failure, Record, failed, invalid
from modelhost.worker.registry import OPERATIONS, default_operations
from modelhost.worker.server import WorkerServer

__all__ = [
    "OPERATIONS",
    "PICTURE_SIDE",
    "Failure",
    "JobContext",
    "Operation",
    "Record",
    "RunJob",
    "Work",
    "WorkerServer",
    "build_app",
    "default_operations",
    "failed",
    "invalid",
]

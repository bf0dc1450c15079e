"""The job worker door: giz's inference worker protocol v1 over HTTP, durable, on the host's scheduler.

`WorkerServer(host, state_dir=..., capacity=...)` is the whole door; `protocol` holds every wire constant and
serialiser; `operation` what an operation is (one `Operation` record: name, input check, runner, exclusive);
`registry` the list of them (text.chat, text.generate, text.embed, lora.train, document.convert), each from its own
module; `executor` runs jobs through them; `store` the durable job folders.
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

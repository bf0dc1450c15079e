"""The job worker door: giz's inference worker protocol v1 over HTTP, durable, on the host's scheduler.

`WorkerServer(host, state_dir=..., capacity=...)` is the whole door; `protocol` holds every wire constant and
serialiser; `executor` the operation registry (text.chat, text.generate); `store` the durable job folders.
"""

from modelhost.worker.app import build_app
from modelhost.worker.executor import JobContext, Operation, Work, default_operations
from modelhost.worker.protocol import PICTURE_SIDE, Failure, Record, failed, invalid
from modelhost.worker.server import WorkerServer

__all__ = [
    "PICTURE_SIDE",
    "Failure",
    "JobContext",
    "Operation",
    "Record",
    "Work",
    "WorkerServer",
    "build_app",
    "default_operations",
    "failed",
    "invalid",
]

"""The host: one loaded model, one scheduler, and the request/event shapes every door uses."""

from modelhost.host.events import Admission, Delta, Done, Event, Failed, GenerationRequest, Started
from modelhost.host.metrics import HostMetrics
from modelhost.host.scheduler import DEFAULT_MAX_QUEUE, Host
from modelhost.host.streams import EmbeddingTicket, RequestStream

__all__ = [
    "DEFAULT_MAX_QUEUE",
    "Admission",
    "Delta",
    "Done",
    "EmbeddingTicket",
    "Event",
    "Failed",
    "GenerationRequest",
    "Host",
    "HostMetrics",
    "RequestStream",
    "Started",
]

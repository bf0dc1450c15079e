"""Errors the wire's client, server and in-process door raise: members of the modelhost error family.

``code`` is what callers branch on. For :class:`RemoteError` it is the code the host answered with (an inferd
``ErrorCode`` value such as ``queue_full`` or ``invalid_request``), so a caller retries on ``queue_full`` and
``backend_unavailable`` and fixes its request on the rest, without parsing messages.
"""

from __future__ import annotations

from modelhost.errors import ModelHostError

__all__ = ["ConnectError", "RemoteError", "SocketPathError", "TruncatedError", "WireProtocolError"]


class ConnectError(ModelHostError):
    """No model host could be reached at the address (after the retries that ENOENT/ECONNREFUSED earn)."""

    code = "connect_failed"


class WireProtocolError(ModelHostError):
    """The peer broke the protocol: a malformed frame, a BLOB on the response stream, or the stream ending early.

    The connection is closed after it: a framing error cannot be resynced from.
    """

    code = "protocol_error"


class RemoteError(ModelHostError):
    """The host answered the request with an ``error`` frame; ``code`` is the host's code, verbatim.

    ``request_id`` is the id the error frame echoed (``""`` when the host failed before it could parse one).
    """

    def __init__(self, code: str, message: str, *, request_id: str = "") -> None:
        super().__init__(f"{code}: {message}" if message else code, code=code)
        self.remote_message = message
        self.request_id = request_id


class TruncatedError(ModelHostError):
    """Generation stopped at its ``max_tokens`` bound: the text is cut short (a page truncated mid-table).

    Returned beside the partial text by ``recognize``, never instead of it: a truncated page is worth strictly
    more than an empty one, and the caller decides.
    """

    code = "max_tokens"


class SocketPathError(ModelHostError):
    """The socket path cannot be served: a symlink, a file that is not a socket, a live host already bound there,
    or a path too long for ``sun_path``."""

    code = "socket_unavailable"

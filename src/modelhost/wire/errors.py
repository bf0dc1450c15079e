"""Errors the wire's client, server and in-process door raise: members of the modelhost error family.

``code`` is what callers branch on. For :class:`RemoteError` it is the code the host answered with (an inferd
``ErrorCode`` value such as ``queue_full`` or ``invalid_request``), so a caller retries on ``queue_full`` and
``backend_unavailable`` and fixes its request on the rest, without parsing messages.
"""

from __future__ import annotations

from types import MappingProxyType

from modelhost.errors import INTERNAL, REFUSED, UNAVAILABLE, UPSTREAM, ModelHostError

__all__ = ["ConnectError", "RemoteError", "SocketPathError", "TruncatedError", "WireProtocolError"]


class ConnectError(ModelHostError):
    """No model host could be reached at the address (after the retries that ENOENT/ECONNREFUSED earn)."""

    code = "connect_failed"
    kind = UNAVAILABLE


class WireProtocolError(ModelHostError):
    """The peer broke the protocol: a malformed frame, a BLOB on the response stream, or the stream ending early.

    The connection is closed after it: a framing error cannot be resynced from.
    """

    code = "protocol_error"
    kind = UPSTREAM


class RemoteError(ModelHostError):
    """The host answered the request with an ``error`` frame; ``code`` is the host's code, verbatim.

    ``request_id`` is the id the error frame echoed (``""`` when the host failed before it could parse one).
    Its kind is its code's: the family's for the codes modelhost also raises (``queue_full``,
    ``backend_unavailable``, ``attachment_unsupported``), ``codes`` for the wire's own, and for ``internal`` or a
    code this build does not know, a relayed server's failure (502: this side worked).
    """

    kind = UPSTREAM
    codes = MappingProxyType(
        {
            "invalid_request": REFUSED,
            "frame_too_large": REFUSED,
            "wire_version_unsupported": UPSTREAM,
            "tool_call_malformed": UPSTREAM,
        }
    )

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
    # Returned beside the text, never raised to a door: were it raised, the page was not read whole.
    kind = INTERNAL


class SocketPathError(ModelHostError):
    """The socket path cannot be served: a symlink, a file that is not a socket, a live host already bound there,
    or a path too long for ``sun_path``."""

    code = "socket_unavailable"
    # Raised while serve starts, before any door answers: the operator's to fix.
    kind = INTERNAL

"""The codec's one exception, :class:`WireError`: the error code to answer with, and whether the connection survives."""

from __future__ import annotations

from modelhost.wire.codec.constants import ErrorCode
from modelhost.wire.codec.messages import Error

__all__ = ["WireError", "invalid", "truncated_frame"]


class WireError(Exception):
    """A request, frame or value the wire cannot carry, with the error code to answer it with.

    ``fatal`` tells a server what to do with the connection after writing the error frame (spec §6):

    - fatal: a protocol violation (bad framing, undecodable JSON, wrong version, descriptor/blob mismatch). The
      stream position, or the meaning of what follows, is no longer known, so the only safe move is to close; a
      server that tried to continue would read the middle of someone's payload as a frame header.
    - not fatal: a well-framed request that is semantically wrong (what inferd's ``resolve()`` refuses). Every byte
      of it has been consumed, so the connection stays usable for the next request.

    ``request_id`` is the id to echo on the error frame: the request's id once it was parsed, ``""`` before.
    """

    def __init__(self, code: ErrorCode, message: str, *, fatal: bool, request_id: str = "") -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.fatal = fatal
        self.request_id = request_id

    def to_event(self) -> Error:
        """The ``error`` response that reports this failure to the peer."""
        return Error(self.request_id, self.code, self.message)


def invalid(message: str, *, fatal: bool = True) -> WireError:
    """An invalid_request error: fatal (close after answering) unless the whole request was consumed."""
    return WireError(ErrorCode.INVALID_REQUEST, message, fatal=fatal)


def truncated_frame(detail: str) -> WireError:
    """The error for an EOF inside a frame (mid-varint, before the type byte, or mid-payload).

    EOF *between* frames is a clean close and is not an error; EOF inside one means the peer died or lied about a
    length, which is worth telling apart ("the client went away" versus "the client was killed mid-page").
    """
    return invalid(f"truncated frame: {detail}")

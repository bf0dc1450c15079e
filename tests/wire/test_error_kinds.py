"""The socket door answers a modelhost error with the wire code its class's kind declares (modelhost.errors, the
one table), over a real socket to a real host: a case the door's own table used to call `internal`.
"""

from __future__ import annotations

from pathlib import Path

from modelhost.docengine.errors import DocumentError
from modelhost.testing.standins import ScriptedModel
from modelhost.wire import codec
from modelhost.wire.codec import ErrorCode

from ._support import Served, connect, read_response, send_request, text_request


def _unreadable_page() -> DocumentError:
    return DocumentError("page 3: the image cannot be decoded")


def test_a_page_the_model_cannot_read_is_the_requests_fault_and_the_connection_stays(tmp_path: Path) -> None:
    """A reading model that refuses its input (invalid_document, an invalid_input) answers invalid_request, which
    tells a client to fix the request rather than retry; the connection serves the next request."""
    served = Served(ScriptedModel(["never"], fail_after=0, failure=_unreadable_page), tmp_path / "run" / "x.sock")
    try:
        with connect(served.path) as sock:
            send_request(sock, text_request("read this", "r1"))
            unreadable = "page 3: the image cannot be decoded"
            assert read_response(sock)[-1] == codec.Error("r1", str(ErrorCode.INVALID_REQUEST), unreadable)
            send_request(sock, text_request("again", "r2"))
            assert read_response(sock)[-1] == codec.Error("r2", str(ErrorCode.INVALID_REQUEST), unreadable)
    finally:
        served.close()

"""Reading one whole request off a stream: a sans-IO state machine over frame headers and payloads (spec §3, §6)."""

from __future__ import annotations

import dataclasses

from modelhost.wire.codec.bounds import charge_blob, check_attachment_ids
from modelhost.wire.codec.constants import MAX_ATTACHMENT_BYTES, Buffer, FrameType
from modelhost.wire.codec.decode import decode_blob_descriptor, decode_request_json
from modelhost.wire.codec.errors import WireError, invalid, truncated_frame
from modelhost.wire.codec.frames import Frame, FrameHeader
from modelhost.wire.codec.messages import BlobDescriptor, Request

__all__ = ["RequestReader"]


class RequestReader:
    """Sans-IO reader of one request: the request frame, then a descriptor and a BLOB per declared attachment.

    Loop ``n = accept_header(header)``, read exactly ``n`` payload bytes into a buffer, ``accept_payload(buf)``,
    until :attr:`complete`; then :attr:`request` is the request with every attachment's ``data`` set (the buffers
    given, uncopied). Every check that protects the stream runs as early as it can: the frame type and the blob
    length against the header (before the caller allocates), the attachment count as soon as the request JSON is
    read (before any blob), the 64 MiB blob cap and the 128 MiB per-request budget on each descriptor (before its
    blob). All its WireErrors are fatal and carry the request id once known. Use one reader per request; after an
    error it refuses further input.
    """

    def __init__(self) -> None:
        self._request: Request | None = None
        self._pending: FrameHeader | None = None
        self._descriptor: BlobDescriptor | None = None  # set between a descriptor and its blob
        self._data: dict[str, Buffer] = {}
        self._budget = MAX_ATTACHMENT_BYTES
        self._failed = False

    @property
    def request_id(self) -> str:
        """The id to echo on an error frame: the request's id once its JSON was read, ``""`` before."""
        return self._request.id if self._request is not None else ""

    @property
    def complete(self) -> bool:
        """True once the request frame and every attachment's descriptor and blob have been accepted."""
        return self._request is not None and len(self._data) == len(self._request.attachments)

    @property
    def request(self) -> Request:
        """The whole request, attachment bytes attached. Only valid once :attr:`complete`."""
        if self._request is None or not self.complete:
            raise RuntimeError("request is not complete")
        if not self._request.attachments:
            return self._request
        atts = tuple(dataclasses.replace(a, data=self._data[a.id]) for a in self._request.attachments)
        return dataclasses.replace(self._request, attachments=atts)

    def _fail(self, exc: WireError) -> WireError:
        self._failed = True
        if not exc.request_id:
            exc.request_id = self.request_id
        return exc

    def accept_header(self, header: FrameHeader) -> int:
        """Check the next frame's header against what the protocol expects now; return the payload bytes to read."""
        if self._failed or self._pending is not None or self.complete:
            raise RuntimeError("RequestReader used out of order")
        try:
            if self._descriptor is None:
                what = "request" if self._request is None else "attachment descriptor"
                if header.frame_type is not FrameType.JSON:
                    raise invalid(f"expected a JSON {what} frame, got {header.frame_type.name}")
            else:
                if header.frame_type is not FrameType.BLOB:
                    raise invalid(
                        f"expected the BLOB for attachment {self._descriptor.attachment_id!r}, "
                        f"got {header.frame_type.name}"
                    )
                if header.payload_len != self._descriptor.len:
                    raise invalid(
                        f"blob of {header.payload_len} bytes for attachment {self._descriptor.attachment_id!r}, "
                        f"whose descriptor declared {self._descriptor.len}"
                    )
        except WireError as exc:
            raise self._fail(exc) from None
        self._pending = header
        return header.payload_len

    def accept_payload(self, payload: Buffer) -> None:
        """Take the payload of the frame whose header was accepted last (exactly that many bytes)."""
        header = self._pending
        if self._failed or header is None:
            raise RuntimeError("RequestReader used out of order")
        self._pending = None
        try:
            if len(payload) != header.payload_len:
                raise truncated_frame(f"got {len(payload)} of {header.payload_len} payload bytes")
            if self._request is None:
                request = decode_request_json(payload)
                self._request = request
                check_attachment_ids(request.attachments, fatal=True)
            elif self._descriptor is None:
                self._descriptor = self._check_descriptor(decode_blob_descriptor(payload))
            else:
                self._data[self._descriptor.attachment_id] = payload
                self._descriptor = None
        except WireError as exc:
            raise self._fail(exc) from None

    def eof(self, *, mid_frame: bool = False) -> None:
        """Report that the stream ended; ``mid_frame`` if some bytes of a frame had been read.

        Returns quietly when nothing of a request had arrived: a clean close between requests, which is how a
        client says it is done. Otherwise raises a fatal truncated-frame WireError carrying the request id.
        """
        if not mid_frame and self._request is None and self._pending is None:
            return
        what = "a request frame" if self._request is None else f"request {self.request_id!r}"
        raise self._fail(truncated_frame(f"EOF inside {what}"))

    def accept_frame(self, frame: Frame) -> None:
        """``accept_header`` and ``accept_payload`` for a frame that was read whole (e.g. from a FrameDecoder)."""
        self.accept_header(FrameHeader(len(frame.payload), frame.frame_type, 0))
        self.accept_payload(frame.payload)

    def _check_descriptor(self, desc: BlobDescriptor) -> BlobDescriptor:
        assert self._request is not None
        if self._request.attachment(desc.attachment_id) is None:
            raise invalid(f"descriptor for attachment {desc.attachment_id!r}, which the request does not declare")
        if desc.attachment_id in self._data:
            raise invalid(f"received more than one BLOB for attachment {desc.attachment_id!r}")
        self._budget = charge_blob(desc.attachment_id, desc.len, self._budget, fatal=True)
        return desc

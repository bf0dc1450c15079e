"""Codec of the local wire: inferd generation protocol v2 (wire_version 1), byte-compatible with pdf-spec's Go ``ipc``.

This package is the only place that knows what a byte of the wire means. It does no I/O: a server or client reads
and writes the bytes however it likes (asyncio streams, a blocking socket, a test's ``bytes``) and asks this module
what they mean. Reference: ``docs/wire.md`` in the repository (its section numbers are cited as "spec §N").

One module per job, each importing only those above it:

- ``constants``: the version, every bound with its reason, the closed sets (frame types, error codes, roles, ...);
- ``messages``: the request and response values; ``errors``: :class:`WireError`;
- ``frames``: varints, frame headers, whole frames, :class:`FrameDecoder`;
- ``gojson``: JSON as Go's ``encoding/json`` writes it;
- ``bounds``: the checks both ends make alike (image axes, attachment count and ids, the per-request byte budget);
- ``encode`` and ``decode``: requests and responses to bytes and back;
- ``reader``: :class:`RequestReader`, one whole request off a stream; ``validate``: inferd's ``resolve()``;
- ``pages``: image attachments and pdf-spec's page request.

Import the names below from ``modelhost.wire.codec`` itself; the modules are where each is defined.

Framing (spec §3)::

    [payload_len: unsigned LEB128 varint][frame_type: 1 byte][payload: exactly payload_len bytes]

A request is one JSON frame (the request, attachment *metadata* only), then for each declared attachment one JSON
descriptor frame ``{"type":"attachment_blob","attachment_id":..,"len":..}`` immediately followed by one BLOB frame
with the raw bytes. Responses are JSON frames only: zero or more ``frame`` deltas, then exactly one ``done`` or
``error``.

How a server uses it (sans-IO; ``read_exactly``/``read_into`` stand for whatever the transport offers)::

    reader = RequestReader()
    while not reader.complete:
        head = bytearray()
        while (header := parse_frame_header(head)) is None:   # at most MAX_HEADER_LEN bytes
            head += read_exactly(1)                            # on EOF: reader.eof(mid_frame=bool(head))
        buf = bytearray(reader.accept_header(header))          # bounded: checked before this allocation
        read_into(buf)                                         # on a short read: reader.eof(mid_frame=True)
        reader.accept_payload(buf)
    request = reader.request                 # WireError so far: fatal -> error frame, then close
    validate_request(request)                # WireError here: not fatal -> error frame, keep the connection
    ... write encode_response(FrameDelta(...)), then encode_response(Done(...)) ...

``reader.eof`` returns quietly when nothing of a request had arrived (the client closed between requests: end the
session) and raises a truncation error otherwise. On any ``WireError`` ``e``: write ``encode_response(e.to_event())``,
then close if ``e.fatal``.

Output JSON is byte-identical to Go's ``encoding/json`` on pdf-spec's structs (spec §7, §9): compact, struct key
order, ``<`` ``>`` ``&`` U+2028 U+2029 escaped, floats spelled as Go spells them. Input JSON is accepted in any key
order and any escaping (so the Rust daemon's ``"type"``-first responses decode too) but is strict on types.
"""

from __future__ import annotations

from modelhost.wire.codec.bounds import image_byte_length
from modelhost.wire.codec.constants import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_PROMPT,
    MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENTS,
    MAX_FRAME,
    MAX_HEADER_LEN,
    MAX_ID_CHARS,
    MAX_IMAGE_AXIS,
    MAX_VARINT_BYTES,
    WIRE_VERSION,
    AttachmentKind,
    Buffer,
    ErrorCode,
    FrameType,
    Role,
    StopReason,
)
from modelhost.wire.codec.decode import decode_blob_descriptor, decode_request_json, decode_response
from modelhost.wire.codec.encode import (
    descriptor_to_json,
    encode_request,
    encode_response,
    request_to_json,
    response_to_json,
)
from modelhost.wire.codec.errors import WireError, truncated_frame
from modelhost.wire.codec.frames import (
    Frame,
    FrameDecoder,
    FrameHeader,
    decode_uvarint,
    encode_frame,
    encode_uvarint,
    frame_header,
    parse_frame_header,
)
from modelhost.wire.codec.gojson import go_float, go_json
from modelhost.wire.codec.messages import (
    Attachment,
    BlobDescriptor,
    ContentBlock,
    Done,
    Error,
    FrameDelta,
    ImageBlock,
    Message,
    OtherBlock,
    Request,
    ResponseEvent,
    TextBlock,
    is_terminal,
)
from modelhost.wire.codec.pages import attachment_array, attachment_image, image_attachment, page_request
from modelhost.wire.codec.reader import RequestReader
from modelhost.wire.codec.validate import validate_request

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_PROMPT",
    "MAX_ATTACHMENTS",
    "MAX_ATTACHMENT_BYTES",
    "MAX_FRAME",
    "MAX_HEADER_LEN",
    "MAX_ID_CHARS",
    "MAX_IMAGE_AXIS",
    "MAX_VARINT_BYTES",
    "WIRE_VERSION",
    "Attachment",
    "AttachmentKind",
    "BlobDescriptor",
    "Buffer",
    "ContentBlock",
    "Done",
    "Error",
    "ErrorCode",
    "Frame",
    "FrameDecoder",
    "FrameDelta",
    "FrameHeader",
    "FrameType",
    "ImageBlock",
    "Message",
    "OtherBlock",
    "Request",
    "RequestReader",
    "ResponseEvent",
    "Role",
    "StopReason",
    "TextBlock",
    "WireError",
    "attachment_array",
    "attachment_image",
    "decode_blob_descriptor",
    "decode_request_json",
    "decode_response",
    "decode_uvarint",
    "descriptor_to_json",
    "encode_frame",
    "encode_request",
    "encode_response",
    "encode_uvarint",
    "frame_header",
    "go_float",
    "go_json",
    "image_attachment",
    "image_byte_length",
    "is_terminal",
    "page_request",
    "parse_frame_header",
    "request_to_json",
    "response_to_json",
    "truncated_frame",
    "validate_request",
]

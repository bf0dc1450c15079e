"""Encoding: requests and responses to the bytes pdf-spec's Go ``ipc`` writes (spec §4, §5, §9)."""

from __future__ import annotations

from modelhost.wire.codec.bounds import charge_blob, check_attachment_ids, image_byte_length
from modelhost.wire.codec.constants import (
    DESCRIPTOR_TYPE,
    MAX_ATTACHMENT_BYTES,
    RESPONSE_DONE,
    RESPONSE_ERROR,
    RESPONSE_FRAME,
    U32_MAX,
    AttachmentKind,
    Buffer,
    FrameType,
)
from modelhost.wire.codec.errors import invalid
from modelhost.wire.codec.frames import encode_frame, frame_header
from modelhost.wire.codec.gojson import go_json
from modelhost.wire.codec.messages import (
    Attachment,
    BlobDescriptor,
    ContentBlock,
    Done,
    FrameDelta,
    ImageBlock,
    Request,
    ResponseEvent,
    TextBlock,
)

__all__ = ["descriptor_to_json", "encode_request", "encode_response", "request_to_json", "response_to_json"]


def _block_json(block: ContentBlock) -> dict[str, object]:
    if isinstance(block, TextBlock):
        # Go's Block has text,omitempty and would drop "" entirely; inferd's Rust reader then fails "missing field
        # text". We always emit it: identical bytes for every non-empty text, parseable by every peer.
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "image", "attachment_id": block.attachment_id}
    out: dict[str, object] = {"type": block.type}
    if block.attachment_id is not None:
        out["attachment_id"] = block.attachment_id
    return out


def _attachment_json(att: Attachment) -> dict[str, object]:
    out: dict[str, object] = {"kind": att.kind, "id": att.id}
    # Images always carry both axes (Rust requires them); other kinds only when set, as Go's omitempty would.
    if att.kind == AttachmentKind.IMAGE or att.width:
        out["width"] = att.width
    if att.kind == AttachmentKind.IMAGE or att.height:
        out["height"] = att.height
    return out


def request_to_json(request: Request) -> bytes:
    """The request JSON payload, byte-identical to pdf-spec's Go ``Request`` where pdf-spec has the fields.

    Key order: pdf-spec's struct order ``wire_version, id, messages, attachments, max_tokens, temperature``, then the
    fields pdf-spec lacks in inferd's Go relative order (``top_p, top_k, stream``), then Rust-only ``thinking``.
    ``id`` and ``attachments`` are omitted when empty, optional numbers and flags when None (Go omitempty on
    pointers: a present 0 is written). ``messages`` is always written (``[]`` where Go would write ``null``).
    """
    obj: dict[str, object] = {"wire_version": request.wire_version}
    if request.id:
        obj["id"] = request.id
    obj["messages"] = [
        {"role": str(msg.role), "content": [_block_json(b) for b in msg.content]} for msg in request.messages
    ]
    if request.attachments:
        obj["attachments"] = [_attachment_json(a) for a in request.attachments]
    optional: tuple[tuple[str, object], ...] = (
        ("max_tokens", request.max_tokens),
        ("temperature", None if request.temperature is None else float(request.temperature)),
        ("top_p", None if request.top_p is None else float(request.top_p)),
        ("top_k", request.top_k),
        ("stream", request.stream),
        ("thinking", request.thinking),
    )
    for key, value in optional:
        if value is not None:
            obj[key] = value
    return go_json(obj)


def descriptor_to_json(descriptor: BlobDescriptor) -> bytes:
    """The descriptor JSON payload (same shape and order in every implementation)."""
    return go_json({"type": DESCRIPTOR_TYPE, "attachment_id": descriptor.attachment_id, "len": descriptor.len})


def encode_request(request: Request) -> list[Buffer]:
    """All frames of a request, as buffers for ``writelines`` (attachment bytes are not copied).

    The request frame, then for each attachment in declaration order a descriptor frame and a BLOB frame. Refuses
    (WireError, not fatal: nothing was sent) what a reader would have to refuse or would hang on: more than 32
    attachments, duplicate ids, an attachment without bytes, an image whose bytes are not width*height*3 or whose
    axes are out of bounds, a blob over 64 MiB or a total over 128 MiB. ``wire_version`` is sent as given, so a
    test can send a version the server must refuse.
    """
    check_attachment_ids(request.attachments, fatal=False)
    blobs: list[tuple[str, Buffer]] = []
    budget_left = MAX_ATTACHMENT_BYTES
    for att in request.attachments:
        if att.data is None or len(att.data) == 0:
            # Upstream Go writers skip the blob of an empty attachment while every reader waits for one: a hang.
            raise invalid(f"attachment {att.id!r} has no bytes; every declared attachment needs a blob", fatal=False)
        size = len(att.data)
        if att.kind == AttachmentKind.IMAGE and size != image_byte_length(att.width, att.height):
            raise invalid(
                f"image {att.id!r} is {att.width}x{att.height} but carries {size} bytes, not width*height*3",
                fatal=False,
            )
        budget_left = charge_blob(att.id, size, budget_left, fatal=False)
        blobs.append((att.id, att.data))
    out: list[Buffer] = [encode_frame(FrameType.JSON, request_to_json(request))]
    for attachment_id, data in blobs:
        out.append(encode_frame(FrameType.JSON, descriptor_to_json(BlobDescriptor(attachment_id, len(data)))))
        out.append(frame_header(FrameType.BLOB, len(data)))
        out.append(data)
    return out


def _u32_saturated(value: int, name: str) -> int:
    if value < 0:
        raise ValueError(f"{name} cannot be negative: {value}")
    return min(value, U32_MAX)  # pdf-spec saturates its counters; a u32 overflow would make Rust peers fail


def response_to_json(event: ResponseEvent) -> bytes:
    """The response JSON payload in Go order (``id`` first), as pdf-spec's Go server writes it.

    Unlike Go's omitempty, ``delta``, ``backend``, ``stop_reason``, ``message`` and both usage fields are always
    written, because inferd's Rust client requires them and cannot parse a done frame without ``backend``; a done's
    ``warning`` (modelhost's own, :class:`Done`) is written only when there is one.
    Token counts saturate at 2**32-1.
    """
    obj: dict[str, object]
    if isinstance(event, FrameDelta):
        obj = {"id": event.id, "type": RESPONSE_FRAME, "block": {"type": "text", "delta": event.text}}
    elif isinstance(event, Done):
        obj = {
            "id": event.id,
            "type": RESPONSE_DONE,
            "usage": {
                "input_tokens": _u32_saturated(event.input_tokens, "input_tokens"),
                "output_tokens": _u32_saturated(event.output_tokens, "output_tokens"),
            },
            "stop_reason": str(event.stop_reason),
            "backend": event.backend,
        }
        if event.warning:  # omitted when empty, so a done without one is the bytes pdf-spec's server writes
            obj["warning"] = event.warning
    else:
        obj = {"id": event.id, "type": RESPONSE_ERROR, "code": str(event.code), "message": event.message}
    return go_json(obj)


def encode_response(event: ResponseEvent) -> bytes:
    """One whole response frame (JSON); write it and flush before producing the next, as upstream writers do."""
    return encode_frame(FrameType.JSON, response_to_json(event))

"""Decoding: strict on types, tolerant of key order, escaping and Go's omitted fields (spec §4, §5, §7).

Every failure is a fatal :class:`~modelhost.wire.codec.errors.WireError`: after a payload that does not decode, the
meaning of what follows on the stream is not known.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final

from modelhost.wire.codec.constants import (
    DESCRIPTOR_TYPE,
    MAX_ID_CHARS,
    RESPONSE_DONE,
    RESPONSE_ERROR,
    RESPONSE_FRAME,
    ROLES,
    U32_MAX,
    U64_MAX,
    WIRE_VERSION,
    AttachmentKind,
    Buffer,
    ErrorCode,
    FrameType,
    Role,
)
from modelhost.wire.codec.errors import WireError, invalid
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
)

# Lone surrogates: JSON may spell one as a \ud800-style escape in valid UTF-8, but no UTF-8 text can hold it.
_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")

__all__ = ["decode_blob_descriptor", "decode_request_json", "decode_response"]


def _reject_constant(name: str) -> Any:
    raise invalid(f"decode: {name} is not JSON")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses to inf in Python; Go and Rust refuse it
        raise invalid(f"decode: number {text} is out of float64 range")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Go keeps the last duplicate, Rust refuses: two readers of one payload must not see two different requests,
    # so we refuse like the normative Rust side.
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise invalid(f"decode: duplicate key {key!r:.40}")
        obj[key] = value
    return obj


def _loads_object(payload: Buffer, what: str) -> dict[str, Any]:
    """Strict JSON object decoding: UTF-8 only (no BOM, no UTF-16), no NaN/Infinity/overflowing numbers."""
    try:
        text = str(payload, "utf-8")
    except UnicodeDecodeError as exc:
        raise invalid(f"decode {what}: payload is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        obj = json.loads(
            text, parse_constant=_reject_constant, parse_float=_parse_float, object_pairs_hook=_no_duplicate_keys
        )
    except WireError:
        raise
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, int digit limit, nesting too deep
        raise invalid(f"decode {what}: {exc}") from None
    if not isinstance(obj, dict):
        raise invalid(f"decode {what}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _get(obj: Mapping[str, Any], key: str) -> Any:
    # A JSON null means "absent" for every field: Go leaves the zero value, Rust's Option reads None.
    return obj.get(key)


def _str(obj: Mapping[str, Any], key: str, where: str, *, default: str | None = "") -> str:
    value = _get(obj, key)
    if value is None:
        if default is None:
            raise invalid(f"decode: {where}.{key} is missing")
        return default
    if type(value) is not str:
        raise invalid(f"decode: {where}.{key} must be a string, got {type(value).__name__}")
    if _SURROGATE_RE.search(value):
        # Only a \\ud800-style escape gets here (the payload was valid UTF-8). Rust refuses it, and text with a lone
        # surrogate cannot be encoded to UTF-8 downstream (tokenizers, logs).
        raise invalid(f"decode: {where}.{key} contains an unpaired surrogate escape")
    return value


def _uint(obj: Mapping[str, Any], key: str, where: str, *, maximum: int = U32_MAX) -> int | None:
    value = _get(obj, key)
    if value is None:
        return None
    # type() rather than isinstance(): True is an int in Python and 1.0 equals 1, but neither is a JSON integer
    # to Go or Rust.
    if type(value) is not int or not 0 <= value <= maximum:
        raise invalid(f"decode: {where}.{key} must be an integer in 0..{maximum}, got {value!r:.40}")
    return value


def _float(obj: Mapping[str, Any], key: str, where: str) -> float | None:
    value = _get(obj, key)
    if value is None:
        return None
    if type(value) not in (int, float):
        raise invalid(f"decode: {where}.{key} must be a number, got {type(value).__name__}")
    try:
        result = float(value)
    except OverflowError:  # an integer literal with hundreds of digits
        raise invalid(f"decode: {where}.{key} is out of float64 range") from None
    return result


def _bool(obj: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = _get(obj, key)
    if value is None:
        return None
    if type(value) is not bool:
        raise invalid(f"decode: {where}.{key} must be true or false, got {type(value).__name__}")
    return value


def _list(obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = _get(obj, key)
    if value is None:  # Go writes a nil slice as null; an empty list is then refused semantically if it matters
        return []
    if type(value) is not list:
        raise invalid(f"decode: {where}.{key} must be an array, got {type(value).__name__}")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise invalid(f"decode: {where} must be an object, got {type(value).__name__}")
    return value


def _decode_block(raw: Any, where: str) -> ContentBlock:
    obj = _object(raw, where)
    block_type = _str(obj, "type", where, default=None)
    if block_type == "text":
        return TextBlock(_str(obj, "text", where))
    if block_type == "image":
        return ImageBlock(_str(obj, "attachment_id", where))
    if block_type in (AttachmentKind.AUDIO, AttachmentKind.VIDEO):
        return OtherBlock(block_type, _str(obj, "attachment_id", where))
    # tool_use, tool_result, or a type the protocol does not define: its other fields are not ours to check.
    return OtherBlock(block_type)


def _decode_message(raw: Any, where: str) -> Message:
    obj = _object(raw, where)
    role = _str(obj, "role", where, default=None)
    if role not in ROLES:
        raise invalid(f"decode: {where}.role {role!r} is not one of system, user, assistant")
    content = tuple(_decode_block(b, f"{where}.content[{j}]") for j, b in enumerate(_list(obj, "content", where)))
    return Message(Role(role), content)


def _id(obj: Mapping[str, Any], key: str, where: str, *, default: str | None = "") -> str:
    """A request or attachment id: a string of at most MAX_ID_CHARS characters."""
    value = _str(obj, key, where, default=default)
    if len(value) > MAX_ID_CHARS:
        raise invalid(f"decode: {where}.{key} is {len(value)} characters; at most {MAX_ID_CHARS}")
    return value


def _decode_attachment(raw: Any, where: str) -> Attachment:
    obj = _object(raw, where)
    return Attachment(
        kind=_str(obj, "kind", where, default=None),
        id=_id(obj, "id", where),
        # Missing axes read as 0 (Go omits a 0 axis); the axis bound then refuses it semantically.
        width=_uint(obj, "width", where) or 0,
        height=_uint(obj, "height", where) or 0,
    )


def decode_request_json(payload: Buffer, *, check_version: bool = True) -> Request:
    """Decode a request JSON payload. Every failure is a fatal WireError (the stream cannot be trusted after it).

    The version is checked first, straight after the JSON parses, so a request from a future version gets
    wire_version_unsupported rather than a complaint about a field it spells differently; a missing
    ``wire_version`` reads as 0 and is refused the same way. ``check_version=False`` decodes any version by v1
    rules (tools, tests). Unknown fields are ignored. The error carries the request's id once it could be read.
    """
    obj = _loads_object(payload, "request")
    raw_id = obj.get("id")
    echo_id = ""
    if type(raw_id) is str and len(raw_id) <= MAX_ID_CHARS and not _SURROGATE_RE.search(raw_id):
        echo_id = raw_id
    try:
        version = _uint(obj, "wire_version", "request") or 0
        if check_version and version != WIRE_VERSION:
            raise WireError(
                ErrorCode.WIRE_VERSION_UNSUPPORTED,
                f"wire version {version} unsupported, this build speaks {WIRE_VERSION}",
                fatal=True,
            )
        return Request(
            wire_version=version,
            id=_id(obj, "id", "request"),
            messages=tuple(
                _decode_message(m, f"messages[{i}]") for i, m in enumerate(_list(obj, "messages", "request"))
            ),
            attachments=tuple(
                _decode_attachment(a, f"attachments[{i}]") for i, a in enumerate(_list(obj, "attachments", "request"))
            ),
            max_tokens=_uint(obj, "max_tokens", "request"),
            temperature=_float(obj, "temperature", "request"),
            top_p=_float(obj, "top_p", "request"),
            top_k=_uint(obj, "top_k", "request"),
            stream=_bool(obj, "stream", "request"),
            thinking=_bool(obj, "thinking", "request"),
        )
    except WireError as exc:
        exc.request_id = echo_id
        raise


def decode_blob_descriptor(payload: Buffer) -> BlobDescriptor:
    """Decode a descriptor frame's payload. ``type`` must be exactly ``"attachment_blob"`` (fatal WireError else)."""
    obj = _loads_object(payload, "descriptor")
    kind = _get(obj, "type")
    if kind != DESCRIPTOR_TYPE or type(kind) is not str:
        raise invalid(f"decode: descriptor type must be {DESCRIPTOR_TYPE!r}, got {kind!r:.40}")
    length = _uint(obj, "len", "descriptor", maximum=U64_MAX)
    if length is None:
        raise invalid("decode: descriptor.len is missing")
    return BlobDescriptor(_id(obj, "attachment_id", "descriptor", default=None), length)


def decode_response(payload: Buffer, frame_type: FrameType = FrameType.JSON) -> ResponseEvent | None:
    """Decode one frame off the response stream (for a client). ``None`` means "not for you, skip it".

    Accepts Go order (``id`` first) and Rust order (``type`` first), any escaping. Skips (returns None) unknown
    response types, frames without a block and non-text blocks (thinking, tool_use), as pdf-spec's client does.
    Go's omitted fields read as zero values (a done without ``backend``, an error without ``message``). A BLOB
    frame, a non-object, a missing ``type`` or a wrongly typed field is a fatal WireError: the client closes.
    """
    if frame_type is not FrameType.JSON:
        raise invalid("malformed response stream: a BLOB frame; responses are JSON frames only")
    obj = _loads_object(payload, "response")
    resp_type = _str(obj, "type", "response", default=None)
    resp_id = _str(obj, "id", "response")
    if resp_type == RESPONSE_FRAME:
        block = _get(obj, "block")
        if block is None:
            return None
        block = _object(block, "response.block")
        if _str(block, "type", "response.block", default=None) != "text":
            return None
        return FrameDelta(resp_id, _str(block, "delta", "response.block"))
    if resp_type == RESPONSE_DONE:
        raw_usage = _get(obj, "usage")
        usage = {} if raw_usage is None else _object(raw_usage, "response.usage")
        return Done(
            resp_id,
            input_tokens=_uint(usage, "input_tokens", "response.usage") or 0,
            output_tokens=_uint(usage, "output_tokens", "response.usage") or 0,
            stop_reason=_str(obj, "stop_reason", "response"),
            backend=_str(obj, "backend", "response"),
            warning=_str(obj, "warning", "response"),
        )
    if resp_type == RESPONSE_ERROR:
        return Error(resp_id, _str(obj, "code", "response"), _str(obj, "message", "response"))
    return None

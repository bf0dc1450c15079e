"""Semantic validation, inferd's ``resolve()``: a well-framed request that makes no sense is refused, and the
connection is kept."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from modelhost.wire.codec.bounds import check_attachment_ids, image_byte_length
from modelhost.wire.codec.constants import KINDS, AttachmentKind, ErrorCode
from modelhost.wire.codec.errors import WireError
from modelhost.wire.codec.messages import Attachment, OtherBlock, Request, TextBlock

__all__ = ["validate_request"]


_TOOL_BLOCKS: Final = frozenset({"tool_use", "tool_result"})


def validate_request(request: Request, *, supported_kinds: Iterable[str] = (AttachmentKind.IMAGE,)) -> None:
    """Refuse a well-framed request that makes no sense, like inferd's ``resolve()``: non-fatal WireErrors.

    Checks, in order: at least one message; attachment count; each attachment has a non-empty unique id and a kind
    the protocol defines (invalid_request) that this host supports (``supported_kinds``; else
    attachment_unsupported); image axes in 1..65536 (before multiplying) and, once bytes are attached, exactly
    width*height*3 of them; each message has content; image/audio/video blocks reference an attachment of their own
    kind; tool blocks and unknown block types are refused. What a particular door further requires (pdf-spec's
    "one user message, one image, one text") is that door's business.
    """
    supported = frozenset(str(k) for k in supported_kinds)
    rid = request.id

    def refuse(message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> WireError:
        # The message opens with its code in words ("invalid request: ...", "attachment unsupported: ..."), so a
        # person reading only the message is not told the opposite of what a program branching on the code sees.
        return WireError(code, f"{code.value.replace('_', ' ')}: {message}", fatal=False, request_id=rid)

    if not request.messages:
        raise refuse("messages is empty")
    try:
        check_attachment_ids(request.attachments, fatal=False)
    except WireError as exc:
        raise refuse(exc.message) from None
    by_id: dict[str, Attachment] = {}
    for i, att in enumerate(request.attachments):
        if not att.id:
            raise refuse(f"attachments[{i}] has an empty id")
        by_id[att.id] = att
        if att.kind not in KINDS:
            raise refuse(f"attachments[{i}] has unknown kind {att.kind!r}")
        if att.kind not in supported:
            raise refuse(f"{att.kind} attachments are not supported by this host", ErrorCode.ATTACHMENT_UNSUPPORTED)
        if att.kind == AttachmentKind.IMAGE:
            try:
                expected = image_byte_length(att.width, att.height)
            except WireError as exc:
                raise refuse(f"attachment {att.id!r}: {exc.message}") from None
            if att.data is not None and len(att.data) != expected:
                raise refuse(
                    f"image {att.id!r} is {att.width}x{att.height}, which needs {expected} bytes, "
                    f"but its blob has {len(att.data)}"
                )
    for i, msg in enumerate(request.messages):
        if not msg.content:
            raise refuse(f"messages[{i}].content is empty")
        for j, block in enumerate(msg.content):
            where = f"messages[{i}].content[{j}]"
            if isinstance(block, TextBlock):
                continue
            if isinstance(block, OtherBlock) and block.type in _TOOL_BLOCKS:
                raise refuse(f"{where} is a {block.type} block; this host does not run tools")
            if isinstance(block, OtherBlock) and block.type not in KINDS:
                raise refuse(f"{where} uses unknown content-block type {block.type!r}")
            target_id = block.attachment_id or ""
            target = by_id.get(target_id)
            if target is None:
                raise refuse(f"{where} references attachment {target_id!r}, which the request does not carry")
            if target.kind != block.type:
                raise refuse(f"{where} is a {block.type} block but attachment {target_id!r} is {target.kind!r}")

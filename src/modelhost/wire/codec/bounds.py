"""The checks both ends of the wire make alike: image axes before their product, attachment count and ids, and the
byte budget of one request's blobs. A sender refuses what a receiver would refuse, with the same words."""

from __future__ import annotations

from collections.abc import Sequence

from modelhost.wire.codec.constants import (
    MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENTS,
    MAX_FRAME,
    MAX_IMAGE_AXIS,
    ErrorCode,
)
from modelhost.wire.codec.errors import WireError, invalid
from modelhost.wire.codec.messages import Attachment

__all__ = ["charge_blob", "check_attachment_ids", "image_byte_length"]


def image_byte_length(width: int, height: int) -> int:
    """``width*height*3`` after checking both axes are in 1..MAX_IMAGE_AXIS (before multiplying).

    Raises WireError invalid_request (not fatal). Used by senders and receivers alike, so the check is the same at
    both ends.
    """
    for name, axis in (("width", width), ("height", height)):
        if not 1 <= axis <= MAX_IMAGE_AXIS:
            raise invalid(f"image {name} {axis} is outside 1..{MAX_IMAGE_AXIS}", fatal=False)
    return width * height * 3


def check_attachment_ids(attachments: Sequence[Attachment], *, fatal: bool) -> None:
    """The count bound and unique ids: without both a request's blob phase cannot be read (or takes forever)."""
    if len(attachments) > MAX_ATTACHMENTS:
        raise invalid(f"{len(attachments)} attachments; at most {MAX_ATTACHMENTS} per request", fatal=fatal)
    seen: set[str] = set()
    for att in attachments:
        # Blobs are matched to attachments by id; with two attachments of one id the second blob cannot be placed.
        if att.id in seen:
            raise invalid(f"duplicate attachment id {att.id!r}; blobs are matched by id", fatal=fatal)
        seen.add(att.id)


def charge_blob(attachment_id: str, size: int, budget_left: int, *, fatal: bool) -> int:
    """Check one blob against the frame cap and the request's remaining byte budget; return the budget left."""
    if size > MAX_FRAME:
        raise WireError(
            ErrorCode.FRAME_TOO_LARGE,
            f"attachment {attachment_id!r} is {size} bytes, over the {MAX_FRAME} byte frame cap",
            fatal=fatal,
        )
    if size > budget_left:
        raise WireError(
            ErrorCode.FRAME_TOO_LARGE,
            f"attachments total more than the {MAX_ATTACHMENT_BYTES} byte per-request budget",
            fatal=fatal,
        )
    return budget_left - size

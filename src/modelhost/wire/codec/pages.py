"""Images on the wire and the page request pdf-spec sends: packed RGB in, arrays and PIL images out.

numpy and PIL are imported by the functions that use them, so reading the codec costs neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelhost.wire.codec.bounds import image_byte_length
from modelhost.wire.codec.constants import DEFAULT_MAX_TOKENS, DEFAULT_PROMPT, AttachmentKind, Buffer, Role
from modelhost.wire.codec.errors import invalid
from modelhost.wire.codec.messages import Attachment, ImageBlock, Message, Request, TextBlock

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from PIL import Image as PILImage

__all__ = ["attachment_array", "attachment_image", "image_attachment", "page_request"]


def image_attachment(attachment_id: str, image: npt.NDArray[np.uint8] | PILImage.Image) -> Attachment:
    """An image attachment from a numpy ``HxWx3`` uint8 array or a PIL image (any mode; converted to RGB).

    The bytes are exactly width*height*3 interleaved RGB: alpha dropped (a rasterised page is opaque), row padding
    and strides dropped (a sliced array is packed, not copied flat, which would skew every row after the first).
    The axis bound is checked before the product is computed or any pixel copied; an out-of-bounds or empty image
    raises WireError (invalid_request), so a sender cannot put on the wire what the receiver must refuse.
    """
    import numpy as np

    if isinstance(image, np.ndarray):
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise ValueError(f"expected an HxWx3 uint8 array, got shape {image.shape} dtype {image.dtype}")
        height, width = int(image.shape[0]), int(image.shape[1])
        image_byte_length(width, height)
        data = image.tobytes(order="C")
    else:
        width, height = image.size
        image_byte_length(width, height)
        data = (image if image.mode == "RGB" else image.convert("RGB")).tobytes()
    return Attachment(kind=AttachmentKind.IMAGE, id=attachment_id, width=width, height=height, data=data)


def _image_data(attachment: Attachment) -> Buffer:
    if attachment.kind != AttachmentKind.IMAGE:
        raise invalid(f"attachment {attachment.id!r} is {attachment.kind!r}, not an image", fatal=False)
    expected = image_byte_length(attachment.width, attachment.height)
    if attachment.data is None or len(attachment.data) != expected:
        got = "no" if attachment.data is None else len(attachment.data)
        raise invalid(
            f"image {attachment.id!r} is {attachment.width}x{attachment.height}, which needs {expected} bytes, "
            f"but has {got}",
            fatal=False,
        )
    return attachment.data


def attachment_array(attachment: Attachment) -> npt.NDArray[np.uint8]:
    """The image as an ``HxWx3`` uint8 array viewing the attachment's bytes (read-only when they are ``bytes``).

    Validates kind, axes and length first: a blob one byte short of width*height*3 must be refused, not reshaped.
    """
    import numpy as np

    data = _image_data(attachment)
    return np.frombuffer(data, dtype=np.uint8).reshape(attachment.height, attachment.width, 3)


def attachment_image(attachment: Attachment) -> PILImage.Image:
    """The image as an RGB PIL image (a copy), after the same validation as :func:`attachment_array`."""
    from PIL import Image

    data = _image_data(attachment)
    return Image.frombytes("RGB", (attachment.width, attachment.height), bytes(data))


def page_request(
    request_id: str,
    image: npt.NDArray[np.uint8] | PILImage.Image,
    *,
    prompt: str = DEFAULT_PROMPT,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    temperature: float | None = 0.0,
) -> Request:
    """The request pdf-spec's client sends for one page: one user message, image block then prompt, one image.

    The attachment id is the request id (pdf-spec uses ``page-N`` for both). ``max_tokens`` of 0 or less is
    omitted, meaning "no bound", as pdf-spec does; temperature 0 asks for greedy decoding, which is what OCR wants.
    """
    att = image_attachment(request_id, image)
    return Request(
        id=request_id,
        messages=(Message(Role.USER, (ImageBlock(request_id), TextBlock(prompt))),),
        attachments=(att,),
        max_tokens=max_tokens if max_tokens > 0 else None,
        temperature=temperature,
    )

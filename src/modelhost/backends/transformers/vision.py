"""Images as callers hold them (PIL images, HxWx3 uint8 arrays, PNG/JPEG bytes) to bounded RGB PIL images.

Sizes are checked before pixels are decoded: a PNG or JPEG header is a few bytes that can claim any size, and
decoding trusts it, so a 60-byte file claiming 100000x100000 would otherwise ask for 30 GB. The bounds match the
inferd wire's (an axis of at most 2^16, 128 MiB of RGB per image), so whatever the wire admits is admitted here.
"""

from __future__ import annotations

import io
from typing import Any

from modelhost.errors import InvalidInputError

#: Largest width or height: the inferd wire's `MaxImageAxis`.
MAX_IMAGE_AXIS = 1 << 16

#: Largest pixel count: 128 MiB of interleaved RGB, the wire's per-request attachment budget. A scanned A3 page at
#: 300 dpi (17 MP) fits with room to spare.
MAX_IMAGE_PIXELS = (128 << 20) // 3

#: Encoded formats accepted: what the doors document. PIL would sniff dozens more, each one more parser to attack.
ENCODED_FORMATS = ("PNG", "JPEG")


def _check_size(width: int, height: int, what: str) -> None:
    if width <= 0 or height <= 0:
        raise InvalidInputError(f"{what} is empty ({width}x{height})")
    if width > MAX_IMAGE_AXIS or height > MAX_IMAGE_AXIS or width * height > MAX_IMAGE_PIXELS:
        raise InvalidInputError(
            f"{what} is {width}x{height}; the limit is {MAX_IMAGE_AXIS} per side and {MAX_IMAGE_PIXELS} pixels"
        )


def to_rgb_image(image: Any, index: int = 0) -> Any:
    """One caller image as an RGB `PIL.Image.Image`, or InvalidInputError saying what was wrong with it."""
    from PIL import Image

    what = f"image {index}"
    if isinstance(image, Image.Image):
        _check_size(image.width, image.height, what)
        return image if image.mode == "RGB" else image.convert("RGB")
    if isinstance(image, (bytes, bytearray, memoryview)):
        return _decode(bytes(image), what)
    shape = getattr(image, "shape", None)
    dtype = getattr(image, "dtype", None)
    if shape is not None and dtype is not None:  # a numpy array (or anything array-like that says its shape)
        if len(shape) != 3 or shape[2] != 3 or str(dtype) != "uint8":
            raise InvalidInputError(f"{what}: an array image must be HxWx3 uint8 (RGB), got {tuple(shape)} {dtype}")
        _check_size(int(shape[1]), int(shape[0]), what)
        import numpy as np

        return Image.fromarray(np.ascontiguousarray(image))  # HxWx3 uint8 is RGB
    raise InvalidInputError(
        f"{what}: unsupported type {type(image).__name__}; send a PIL image, an HxWx3 uint8 array or PNG/JPEG bytes"
    )


def _decode(data: bytes, what: str) -> Any:
    from PIL import Image

    try:
        # `open` reads only the header: the size is known here and nothing large has been allocated yet.
        img = Image.open(io.BytesIO(data), formats=ENCODED_FORMATS)
    except Image.DecompressionBombError as exc:
        raise InvalidInputError(f"{what}: {exc}") from exc
    except Exception as exc:  # PIL raises several unrelated types for unreadable input
        raise InvalidInputError(f"{what}: not a readable PNG or JPEG image ({exc})") from exc
    _check_size(img.width, img.height, what)
    try:
        img.load()
        return img if img.mode == "RGB" else img.convert("RGB")
    except Exception as exc:
        raise InvalidInputError(f"{what}: the image data is damaged ({exc})") from exc

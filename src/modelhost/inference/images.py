"""Images as callers hold them (PIL images, HxWx3 uint8 arrays, PNG/JPEG bytes) to bounded RGB pixels.

One module for every image bound, used by the wire codec (which checks a page's axes before it multiplies them)
and by every backend that takes images, so whatever one door admits every backend admits, and no backend is asked
to decode what another would refuse.

Sizes are checked before pixels are decoded: a PNG or JPEG header is a few bytes that can claim any size, and
decoding trusts it, so a 60-byte file claiming 100000x100000 would otherwise ask for 30 GB. The bounds are the
inferd wire's (an axis of at most 2^16, 128 MiB of RGB per image).
"""

from __future__ import annotations

import io
from typing import Any

from modelhost.errors import InvalidInputError

#: Largest width or height: the inferd wire's `MaxImageAxis` (pdf-spec). 65,536 is four times the longest edge of
#: a US Letter page at 1200 DPI. It is checked before width*height*3 is computed: in the Go and Rust peers a hostile
#: pair of dimensions overflows the product into a small number that then agrees with a short blob.
MAX_IMAGE_AXIS = 1 << 16

#: Largest pixel count: 128 MiB of interleaved RGB, the wire's per-request attachment budget. A scanned A3 page at
#: 300 dpi (17 MP) fits with room to spare.
MAX_IMAGE_PIXELS = (128 << 20) // 3

#: Encoded formats accepted: what the doors document. PIL would sniff dozens more, each one more parser to attack.
ENCODED_FORMATS = ("PNG", "JPEG")


def check_size(width: int, height: int, what: str) -> None:
    """Refuse an empty image or one over the bounds, naming it (`what`: "image 2"), before any pixel exists."""
    if width <= 0 or height <= 0:
        raise InvalidInputError(f"{what} is empty ({width}x{height})")
    if width > MAX_IMAGE_AXIS or height > MAX_IMAGE_AXIS or width * height > MAX_IMAGE_PIXELS:
        raise InvalidInputError(
            f"{what} is {width}x{height}; the limit is {MAX_IMAGE_AXIS} per side and {MAX_IMAGE_PIXELS} pixels"
        )


def _array_shape(image: Any, what: str) -> tuple[int, int] | None:
    """(width, height) of an HxWx3 uint8 array image (checked), None for anything that is not an array."""
    shape = getattr(image, "shape", None)
    dtype = getattr(image, "dtype", None)
    if shape is None or dtype is None or isinstance(image, (bytes, bytearray, memoryview)):
        return None
    if len(shape) != 3 or shape[2] != 3 or str(dtype) != "uint8":
        raise InvalidInputError(f"{what}: an array image must be HxWx3 uint8 (RGB), got {tuple(shape)} {dtype}")
    width, height = int(shape[1]), int(shape[0])
    check_size(width, height, what)
    return width, height


def to_rgb_image(image: Any, index: int = 0) -> Any:
    """One caller image as an RGB `PIL.Image.Image`, or InvalidInputError saying what was wrong with it."""
    from PIL import Image

    what = f"image {index}"
    if isinstance(image, Image.Image):
        check_size(image.width, image.height, what)
        return image if image.mode == "RGB" else image.convert("RGB")
    if isinstance(image, (bytes, bytearray, memoryview)):
        return _decode(bytes(image), what)
    if _array_shape(image, what) is not None:
        import numpy as np

        return Image.fromarray(np.ascontiguousarray(image))  # HxWx3 uint8 is RGB
    raise InvalidInputError(
        f"{what}: unsupported type {type(image).__name__}; send a PIL image, an HxWx3 uint8 array or PNG/JPEG bytes"
    )


def to_rgb_array(image: Any, index: int = 0) -> Any:
    """One caller image as a C-contiguous HxWx3 uint8 numpy array: an array caller's own memory when it already is
    one (a wire page is handed to the backend without a copy), else decoded once through `to_rgb_image`."""
    import numpy as np

    if _array_shape(image, f"image {index}") is not None:
        return np.ascontiguousarray(image)
    return np.asarray(to_rgb_image(image, index), dtype=np.uint8)


def _decode(data: bytes, what: str) -> Any:
    from PIL import Image

    try:
        # `open` reads only the header: the size is known here and nothing large has been allocated yet.
        img = Image.open(io.BytesIO(data), formats=ENCODED_FORMATS)
    except Image.DecompressionBombError as exc:
        raise InvalidInputError(f"{what}: {exc}") from exc
    except Exception as exc:  # PIL raises several unrelated types for unreadable input
        raise InvalidInputError(f"{what}: not a readable PNG or JPEG image ({exc})") from exc
    check_size(img.width, img.height, what)
    try:
        img.load()
        return img if img.mode == "RGB" else img.convert("RGB")
    except Exception as exc:
        raise InvalidInputError(f"{what}: the image data is damaged ({exc})") from exc

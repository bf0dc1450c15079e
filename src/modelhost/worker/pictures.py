"""Uploaded pictures, decoded at the smallest scale that still covers PICTURE_SIDE (the seed's `uploadedImages`).

A phone photo can be 50-200 megapixels; decoded whole it is 150-600 MB of RGB for a model that reads ~4 megapixels.
A JPEG decodes straight to 1/2, 1/4 or 1/8 scale (the DCT scaling of libjpeg, through PIL's `draft()`), so it never
exists at full size in memory. A PNG has no such shortcut: it is decoded whole (within MAX_PNG_PIXELS) and then
reduced by the same factors. The bounds are checked on the header, before a single pixel is decoded.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from PIL import Image, ImageOps, JpegImagePlugin, PngImagePlugin

from modelhost.worker.protocol import PICTURE_SIDE, input_path, invalid

#: Largest side either format can declare (JPEG's header field is 16 bits; a larger PNG is a decompression bomb).
MAX_SIDE = 65535
#: Largest JPEG accepted, in pixels of the full image: 1/8 scale of it is 16 megapixels (48 MB RGB), the most the
#: smallest decode scale may cost. Beyond it even the cheapest decode is too much memory for one job.
MAX_JPEG_PIXELS = 1 << 30
#: Largest PNG accepted: it is decoded whole, so this bounds the memory of one decode to ~200 MB of RGB (an 8K
#: screenshot is 33 megapixels; anything larger is not a screenshot).
MAX_PNG_PIXELS = 1 << 26
#: Reduction factors a JPEG can decode at, smallest output first.
SCALES = (8, 4, 2)

_JPEG_MAGIC = b"\xff\xd8\xff"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def scale_for(width: int, height: int, side: int = PICTURE_SIDE) -> int:
    """The largest factor (8, 4, 2, else 1) whose reduced longer side still covers `side`."""
    longer = max(width, height)
    for factor in SCALES:
        if math.ceil(longer / factor) >= side:
            return factor
    return 1


def decode_picture(path: str | Path, side: int = PICTURE_SIDE) -> Image.Image:
    """An RGB picture from a JPEG or PNG file, at the smallest scale covering `side`, upright (EXIF orientation).

    Raises the seed's invalid-input Failure for anything else, or for a picture over the bounds above.
    """
    try:
        with open(path, "rb") as f:
            magic = f.read(8)
            f.seek(0)
            # The format plugins are used directly, not Image.open: it would try every format PIL knows (a wider
            # attack surface than JPEG and PNG) and its own bomb check would refuse a large JPEG we can decode small.
            if magic.startswith(_JPEG_MAGIC):
                image: Image.Image = JpegImagePlugin.JpegImageFile(f)
                limit = MAX_JPEG_PIXELS
            elif magic.startswith(_PNG_MAGIC):
                image = PngImagePlugin.PngImageFile(f)
                limit = MAX_PNG_PIXELS
            else:
                raise invalid(f"{Path(path).name}: not a JPEG or PNG picture")
            width, height = image.size
            if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE) or width * height > limit:
                raise invalid(f"{Path(path).name}: a {width}x{height} picture is over the decoder's bounds")
            factor = scale_for(width, height, side)
            if isinstance(image, JpegImagePlugin.JpegImageFile):
                if factor > 1:
                    # draft() picks the largest DCT scale that keeps the image at least this size.
                    image.draft("RGB", (math.ceil(width / factor), math.ceil(height / factor)))
                image = image.convert("RGB")
            else:
                image = image.convert("RGB")
                if factor > 1:
                    image = image.reduce(factor)
            return ImageOps.exif_transpose(image) or image
    except OSError as exc:
        raise invalid(f"{Path(path).name}: cannot decode the picture: {exc}") from exc
    except (ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise invalid(f"{Path(path).name}: cannot decode the picture: {exc}") from exc


def uploaded_images(input_: Any, key: str, side: int = PICTURE_SIDE) -> list[Image.Image]:
    """The pictures of field `key` of a job's input (one uploaded image, or a list of them), decoded to `side`."""
    value = input_.get(key) if isinstance(input_, dict) else None
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    pictures = []
    for item in items:
        path = input_path(item)
        if path is None:
            raise invalid(f"{key!r} must be an uploaded picture ({{'$file': field}}) or a list of them")
        pictures.append(decode_picture(path, side))
    return pictures

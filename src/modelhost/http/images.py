"""Images in HTTP requests, for both protocols: OpenAI's `data:image/...;base64,` URIs and Ollama's bare base64,
bounded before decoding, and checked to be PNG or JPEG. The backend decodes the pixels (and bounds their size).
"""

from __future__ import annotations

import base64
import binascii
import re

from modelhost.http.errors import ApiError
from modelhost.http.parsing import MAX_BODY_BYTES

#: Largest base64 text of one image, checked *before* decoding, so a hostile body cannot make us allocate the
#: decoded copy of something we would refuse anyway. 16 MiB of base64 is 12 MiB of PNG/JPEG: a 300 dpi A4 scan.
MAX_IMAGE_BASE64_CHARS = 16 * 1024 * 1024

#: Most images per request: each costs a vision encoder pass; past this it is a mistake or an attack.
MAX_IMAGES = 16

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_JPEG_MAGIC = b"\xff\xd8\xff"
_DATA_URI = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[\w.+-]+=[\w.+-]+)*);base64,", re.ASCII)
_IMAGE_MIMES = frozenset({"image/png", "image/jpeg", "image/jpg"})


def too_many_images(param: str) -> ApiError:
    """The refusal of a request carrying more than MAX_IMAGES images (counted over the whole request)."""
    return ApiError(400, f"at most {MAX_IMAGES} images per request", param=param, code="too_many_images")


def decode_image_base64(b64: str, param: str) -> bytes:
    """Base64 text of a PNG or JPEG -> its bytes, bounded before decoding; the backend decodes the pixels."""
    if len(b64) > MAX_IMAGE_BASE64_CHARS:
        raise ApiError(
            413 if len(b64) > MAX_BODY_BYTES else 400,
            f"image is {len(b64)} base64 characters; the limit is {MAX_IMAGE_BASE64_CHARS}",
            param=param,
            code="image_too_large",
        )
    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, "image is not valid base64", param=param, code="invalid_image") from None
    if not (data.startswith(_PNG_MAGIC) or data.startswith(_JPEG_MAGIC)):
        raise ApiError(400, "image must be PNG or JPEG", param=param, code="invalid_image")
    return data


def decode_image_data_uri(url: str, param: str) -> bytes:
    """A `data:image/png;base64,...` URI -> the encoded image bytes. Anything else (an http URL) is refused:
    the host reaches no network, and fetching on a client's behalf would make it a proxy."""
    match = _DATA_URI.match(url)
    if match is None:
        raise ApiError(
            400,
            "image_url must be a data URI (data:image/png;base64,... or data:image/jpeg;base64,...); "
            "modelhost fetches nothing from the network",
            param=param,
            code="invalid_image_url",
        )
    mime = (match.group("mime") or "").lower()
    if mime not in _IMAGE_MIMES:
        raise ApiError(400, f"image type {mime or '(none)'!r} is not supported; use PNG or JPEG", param=param)
    return decode_image_base64(url[match.end() :], param)

"""The contract's one images module: bounds checked before pixels exist, the same bound the wire codec enforces."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from modelhost.errors import InvalidInputError
from modelhost.inference import images
from modelhost.wire import codec


def png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims `width`x`height` and whose data is a few bytes: decoding it would trust the claim."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 16))


def test_the_wire_and_the_backends_share_one_axis_bound() -> None:
    assert codec.MAX_IMAGE_AXIS == images.MAX_IMAGE_AXIS == 1 << 16


@pytest.mark.parametrize(
    ("width", "height"), [(0, 5), (5, 0), (images.MAX_IMAGE_AXIS + 1, 1), (1, images.MAX_IMAGE_AXIS + 1), (8000, 8000)]
)
def test_sizes_outside_the_bounds_are_refused_naming_the_image(width: int, height: int) -> None:
    with pytest.raises(InvalidInputError, match="image 3"):
        images.check_size(width, height, "image 3")


def test_a_tiny_file_claiming_a_huge_page_is_refused_from_its_header() -> None:
    with pytest.raises(InvalidInputError, match=r"image 0"):
        images.to_rgb_image(png_header(100_000, 100_000))
    with pytest.raises(InvalidInputError, match=r"image 0 is 70000x10"):  # under PIL's own bomb bound, over ours
        images.to_rgb_image(png_header(70_000, 10))


def test_an_rgb_array_is_passed_through_without_a_copy_and_others_are_decoded_once() -> None:
    pixels = np.zeros((4, 6, 3), dtype=np.uint8)
    assert images.to_rgb_array(pixels) is pixels
    buf = io.BytesIO()
    Image.new("L", (6, 4), 200).save(buf, format="PNG")
    decoded = images.to_rgb_array(buf.getvalue(), 1)
    assert decoded.shape == (4, 6, 3) and decoded.dtype == np.uint8 and int(decoded[0, 0, 0]) == 200


@pytest.mark.parametrize("bad", [np.zeros((4, 4), np.uint8), np.zeros((4, 4, 4), np.uint8), np.zeros((4, 4, 3))])
def test_an_array_that_is_not_hxwx3_uint8_is_refused(bad: np.ndarray) -> None:
    with pytest.raises(InvalidInputError, match="HxWx3 uint8"):
        images.to_rgb_array(bad, 2)


def test_an_unknown_type_is_refused_by_name() -> None:
    with pytest.raises(InvalidInputError, match="unsupported type str"):
        images.to_rgb_image("a path", 0)

"""Uploaded pictures: decoded at the smallest JPEG/PNG scale that keeps the longer side >= PICTURE_SIDE, bounds
checked on the header before decoding."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from modelhost.worker import protocol
from modelhost.worker.pictures import decode_picture, scale_for, uploaded_images


def test_scale_choice() -> None:
    assert scale_for(16384, 100) == 8 and scale_for(16376, 100) == 4
    assert scale_for(8192, 6000) == 4 and scale_for(4096, 3000) == 2 and scale_for(4094, 10) == 1
    assert scale_for(100, 2048) == 1


def test_jpeg_decodes_at_a_reduced_scale(tmp_path: Path) -> None:
    # Thin pictures keep the test cheap while exercising the same scale logic as a phone photo.
    path = tmp_path / "wide.jpg"
    Image.new("RGB", (8400, 64), (200, 10, 10)).save(path, quality=80)
    picture = decode_picture(path)
    assert picture.mode == "RGB" and picture.size == (2100, 16)  # 1/4: 8400/8 = 1050 would be under 2048


def test_png_is_reduced_after_decoding(tmp_path: Path) -> None:
    path = tmp_path / "tall.png"
    Image.new("RGB", (40, 4200), (0, 0, 255)).save(path)
    assert decode_picture(path).size == (20, 2100)
    small = tmp_path / "small.png"
    Image.new("L", (300, 200)).save(small)
    assert decode_picture(small).size == (300, 200) and decode_picture(small).mode == "RGB"


def test_a_png_over_the_bounds_is_refused_from_its_header(tmp_path: Path) -> None:
    # A valid PNG header that declares 60000 x 60000 pixels, and no pixel data at all.
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0)
    path = tmp_path / "bomb.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"") + chunk(b"IEND", b""))
    with pytest.raises(protocol.Failure, match="over the decoder's bounds") as info:
        decode_picture(path)
    assert info.value.code == "WORKER_INVALID_INPUT" and info.value.status == 400


def test_other_files_are_invalid_input(tmp_path: Path) -> None:
    gif = tmp_path / "a.gif"
    Image.new("RGB", (4, 4)).save(gif)
    truncated = tmp_path / "cut.jpg"
    Image.new("RGB", (64, 64)).save(truncated)
    truncated.write_bytes(truncated.read_bytes()[:200])
    for path in (gif, truncated):
        with pytest.raises(protocol.Failure):
            decode_picture(path)


def test_uploaded_images_takes_one_or_a_list(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    Image.new("RGB", (8, 8)).save(path)
    ref = protocol.input_file("a.png", "image/png", str(path))
    assert len(uploaded_images({"images": ref}, "images")) == 1
    assert len(uploaded_images({"images": [ref, ref]}, "images")) == 2
    assert uploaded_images({}, "images") == []
    with pytest.raises(protocol.Failure):
        uploaded_images({"images": "a.png"}, "images")

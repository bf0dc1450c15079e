"""Golden vectors (spec §9), the malformed-input corpus (spec §8 / V6) and unit tests of modelhost.wire.codec.

Every vector is checked in both directions: what we encode equals the spec's hex byte for byte, and what we decode
from that hex equals the values it was made from. The hex below is copied from docs/wire.md §9,
which was produced by Go's encoding/json and cross-checked there; it is never regenerated from this codec.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest
from PIL import Image

from modelhost.wire.codec import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_PROMPT,
    MAX_ATTACHMENT_BYTES,
    MAX_ATTACHMENTS,
    MAX_FRAME,
    MAX_HEADER_LEN,
    MAX_IMAGE_AXIS,
    MAX_VARINT_BYTES,
    WIRE_VERSION,
    Attachment,
    AttachmentKind,
    BlobDescriptor,
    Done,
    Error,
    ErrorCode,
    Frame,
    FrameDecoder,
    FrameDelta,
    FrameHeader,
    FrameType,
    ImageBlock,
    Message,
    OtherBlock,
    Request,
    RequestReader,
    Role,
    StopReason,
    TextBlock,
    WireError,
    attachment_array,
    attachment_image,
    decode_blob_descriptor,
    decode_request_json,
    decode_response,
    decode_uvarint,
    descriptor_to_json,
    encode_frame,
    encode_request,
    encode_response,
    encode_uvarint,
    frame_header,
    go_float,
    go_json,
    image_attachment,
    image_byte_length,
    is_terminal,
    page_request,
    parse_frame_header,
    request_to_json,
    response_to_json,
    truncated_frame,
    validate_request,
)

# ---------------------------------------------------------------------------------------------------------------
# Golden hex, copied from spec §9
# ---------------------------------------------------------------------------------------------------------------

V1_HEX = (
    "70017b22776972655f76657273696f6e223a312c226964223a227231222c226d65737361676573223a5b7b22726f6c65223a"
    "2275736572222c22636f6e74656e74223a5b7b2274797065223a2274657874222c2274657874223a226869227d5d7d5d2c22"
    "6d61785f746f6b656e73223a347d"
)
V2_REQUEST_HEX = (
    "9002017b22776972655f76657273696f6e223a312c226964223a22706167652d31222c226d65737361676573223a5b7b2272"
    "6f6c65223a2275736572222c22636f6e74656e74223a5b7b2274797065223a22696d616765222c226174746163686d656e74"
    "5f6964223a22706167652d31227d2c7b2274797065223a2274657874222c2274657874223a22436f6e766572742074686973"
    "207061676520746f20646f636c696e672e227d5d7d5d2c226174746163686d656e7473223a5b7b226b696e64223a22696d61"
    "6765222c226964223a22706167652d31222c227769647468223a322c22686569676874223a317d5d2c226d61785f746f6b65"
    "6e73223a383139322c2274656d7065726174757265223a307d"
)
V2_DESCRIPTOR_HEX = (
    "3b017b2274797065223a226174746163686d656e745f626c6f62222c226174746163686d656e745f6964223a22706167652d"
    "31222c226c656e223a367d"
)
V2_BLOB_HEX = "0602102030405060"
V3A_HEX = (
    "8f01017b226964223a22706167652d31222c2274797065223a226672616d65222c22626c6f636b223a7b2274797065223a22"
    "74657874222c2264656c7461223a225c7530303363646f637461675c75303033655c7530303363746578745c75303033655c"
    "75303033636c6f635f315c753030336561205c753030323620625c75303033632f746578745c7530303365227d7d"
)
V3B_HEX = (
    "9f01017b226964223a22706167652d31222c2274797065223a22646f6e65222c227573616765223a7b22696e7075745f746f"
    "6b656e73223a302c226f75747075745f746f6b656e73223a377d2c2273746f705f726561736f6e223a22656e645f7475726e"
    "222c226261636b656e64223a226c6c616d612e6370702f69626d2d6772616e6974652f6772616e6974652d646f636c696e67"
    "2d3235384d2d47475546227d"
)
V3C_HEX = (
    "7b017b226964223a22222c2274797065223a226572726f72222c22636f6465223a22776972655f76657273696f6e5f756e73"
    "7570706f72746564222c226d657373616765223a226970633a20776972652076657273696f6e203220756e737570706f7274"
    "65642c2074686973206275696c6420737065616b732031227d"
)
V2_SHA256 = "fea45debebd9994fe374ef58ab635ed061bae0272194510e1724736fbf1d3440"
V3D_JSON = b'{"id":"x","type":"done","usage":{"input_tokens":0,"output_tokens":0},"stop_reason":"max_tokens"}'
V3E_JSON = b'{"id":"bad","type":"error","code":"invalid_request","message":"no image block; there is nothing to read"}'
# V4, spelled out from spec §7's rules rather than taken from the codec: Go escapes < > & U+2028 U+2029 and C0
# controls (lowercase hex, \t \n \r short forms), keeps "/", DEL and non-ASCII raw.
V4_TEXT = 'é\u2028\u2029\x01\x1f\t\n\r"\\/\x7f<>&😀'
V4_JSON = (
    b'{"type":"text","delta":"'
    + "é".encode()
    + b'\\u2028\\u2029\\u0001\\u001f\\t\\n\\r\\"\\\\/\x7f\\u003c\\u003e\\u0026'
    + "😀".encode()
    + b'"}'
)

V2_PIXELS = bytes([0x10, 0x20, 0x30, 0x40, 0x50, 0x60])
BACKEND = "llama.cpp/ibm-granite/granite-docling-258M-GGUF"


def request_frames(request: Request) -> list[bytes]:
    """encode_request's buffers as bytes (it hands back the attachment buffers themselves, uncopied)."""
    return [bytes(part) for part in encode_request(request)]


def payload_of(frame: bytes) -> bytes:
    header = parse_frame_header(frame)
    assert header is not None and len(frame) == header.header_len + header.payload_len
    return frame[header.header_len :]


def unhex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def json_frame(payload: bytes) -> bytes:
    """A JSON frame built by hand (single-byte varint), independent of encode_frame."""
    assert len(payload) < 0x80
    return bytes([len(payload), 0x01]) + payload


def v2_request() -> Request:
    return Request(
        id="page-1",
        messages=(Message(Role.USER, (ImageBlock("page-1"), TextBlock(DEFAULT_PROMPT))),),
        attachments=(Attachment(kind="image", id="page-1", width=2, height=1, data=V2_PIXELS),),
        max_tokens=8192,
        temperature=0.0,
    )


# ---------------------------------------------------------------------------------------------------------------
# Two readers, the shapes a server and a client will take; both only use the public API
# ---------------------------------------------------------------------------------------------------------------


def read_request_sync(stream: io.BufferedIOBase) -> Request | None:
    """Read one request the way the asyncio server will: header byte by byte, then recv_into an exact buffer.

    Returns None on a clean close (EOF before the first byte of a request); raises WireError otherwise.
    """
    reader = RequestReader()
    while not reader.complete:
        head = bytearray()
        while (header := parse_frame_header(head)) is None:
            assert len(head) < MAX_HEADER_LEN  # a header always resolves within MAX_HEADER_LEN bytes
            byte = stream.read(1)
            if not byte:
                reader.eof(mid_frame=bool(head))
                return None
            head += byte
        buf = bytearray(reader.accept_header(header))
        if stream.readinto(buf) != len(buf):
            reader.eof(mid_frame=True)
        reader.accept_payload(buf)
    return reader.request


def read_session_sync(data: bytes) -> list[Request]:
    """Every request on one connection, reading as the server will, until a clean close."""
    stream = io.BufferedReader(io.BytesIO(data))
    requests = []
    while (request := read_request_sync(stream)) is not None:
        requests.append(request)
    return requests


def read_session_decoder(data: bytes, chunk: int = 7) -> list[Request]:
    """The same, through FrameDecoder fed in arbitrary chunks and RequestReader.accept_frame."""
    decoder = FrameDecoder()
    requests = []
    reader = RequestReader()
    for start in range(0, len(data), chunk):
        for frame in decoder.feed(data[start : start + chunk]):
            reader.accept_frame(frame)
            if reader.complete:
                requests.append(reader.request)
                reader = RequestReader()
    decoder.eof()
    reader.eof()
    return requests


SessionReader = Callable[[bytes], list[Request]]
SESSION_READERS: list[SessionReader] = [read_session_sync, read_session_decoder]


def read_responses(data: bytes) -> list[Done | Error | FrameDelta]:
    decoder = FrameDecoder(expect=FrameType.JSON)
    events = []
    for frame in decoder.feed(data):
        event = decode_response(frame.payload, frame.frame_type)
        if event is not None:
            events.append(event)
    decoder.eof()
    return events


# ---------------------------------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------------------------------


def test_constants_are_inferds() -> None:
    assert WIRE_VERSION == 1
    assert (FrameType.JSON, FrameType.BLOB) == (0x01, 0x02)
    assert MAX_FRAME == 67_108_864
    assert MAX_VARINT_BYTES == 5
    assert MAX_HEADER_LEN == 6
    assert MAX_IMAGE_AXIS == 65_536
    assert MAX_ATTACHMENTS == 32
    assert MAX_ATTACHMENT_BYTES == 134_217_728
    assert DEFAULT_PROMPT == "Convert this page to docling."
    assert DEFAULT_MAX_TOKENS == 8192
    assert {c.value for c in ErrorCode} == {
        "queue_full",
        "backend_unavailable",
        "invalid_request",
        "frame_too_large",
        "internal",
        "attachment_unsupported",
        "tool_call_malformed",
        "wire_version_unsupported",
    }
    assert {s.value for s in StopReason} == {
        "end_turn",
        "max_tokens",
        "tool_use",
        "stop_sequence",
        "cancelled",
        "error",
    }
    assert {r.value for r in Role} == {"system", "user", "assistant"}


# ---------------------------------------------------------------------------------------------------------------
# Varints (spec §3 reference values)
# ---------------------------------------------------------------------------------------------------------------

VARINT_TABLE = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "80 01"),
    (300, "ac 02"),
    (16383, "ff 7f"),
    (16384, "80 80 01"),
    (1 << 21, "80 80 80 01"),
    (64 << 20, "80 80 80 20"),
    ((64 << 20) + 1, "81 80 80 20"),
]


@pytest.mark.parametrize(("value", "hexed"), VARINT_TABLE)
def test_varint_table_both_directions(value: int, hexed: str) -> None:
    raw = unhex(hexed)
    assert encode_uvarint(value) == raw
    assert decode_uvarint(raw) == (value, len(raw))
    assert decode_uvarint(b"\xaa" + raw + b"\xff", 1) == (value, 1 + len(raw))
    # Every strict prefix asks for more bytes rather than guessing.
    for cut in range(len(raw)):
        assert decode_uvarint(raw[:cut]) is None


@pytest.mark.parametrize(
    ("hexed", "value"),
    [("80 00", 0), ("80 80 80 80 00", 0), ("ff 80 00", 127), ("ff ff ff ff 0f", (1 << 32) - 1)],
)
def test_varint_non_minimal_and_five_byte_forms_are_accepted(hexed: str, value: int) -> None:
    raw = unhex(hexed)
    assert decode_uvarint(raw) == (value, len(raw))


@pytest.mark.parametrize("raw", [b"\x80" * 5, b"\x80" * 12, unhex("80 80 80 80 80 01"), encode_uvarint(1 << 40)])
def test_varint_longer_than_five_bytes_is_refused_at_the_fifth(raw: bytes) -> None:
    with pytest.raises(WireError) as info:
        decode_uvarint(raw)
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert info.value.fatal
    # The 5th byte decides: the same error with nothing after it, so a reader never waits for a 6th byte.
    with pytest.raises(WireError):
        decode_uvarint(raw[:5])


def test_varint_refuses_negative() -> None:
    with pytest.raises(ValueError):
        encode_uvarint(-1)


# ---------------------------------------------------------------------------------------------------------------
# Frame headers
# ---------------------------------------------------------------------------------------------------------------


def test_frame_layout_matches_pdf_spec() -> None:
    # pdf-spec TestFraming: {"a":1} is 07 01 7b 22 61 22 3a 31 7d, nothing trailing.
    assert encode_frame(FrameType.JSON, b'{"a":1}') == unhex("07 01 7b 22 61 22 3a 31 7d")
    assert encode_frame(FrameType.BLOB, b"") == b"\x00\x02"
    assert frame_header(FrameType.BLOB, 300) == b"\xac\x02\x02"
    assert encode_frame(FrameType.BLOB, bytearray(b"\n\x00")) == b"\x02\x02\n\x00"


def test_frame_writer_refuses_over_the_cap_and_allows_exactly_the_cap() -> None:
    assert frame_header(FrameType.BLOB, MAX_FRAME) == unhex("80 80 80 20 02")
    with pytest.raises(WireError) as info:
        frame_header(FrameType.BLOB, MAX_FRAME + 1)
    assert info.value.code is ErrorCode.FRAME_TOO_LARGE
    assert not info.value.fatal  # nothing was written, the connection is fine


def test_frame_writer_refuses_unknown_type() -> None:
    with pytest.raises(ValueError):
        frame_header(3, 1)  # type: ignore[arg-type]


def test_parse_header_needs_more_then_completes() -> None:
    raw = encode_frame(FrameType.JSON, b"x" * 300)
    assert parse_frame_header(b"") is None
    assert parse_frame_header(raw[:1]) is None
    assert parse_frame_header(raw[:2]) is None  # varint done, type byte missing
    header = parse_frame_header(raw[:3])
    assert header == FrameHeader(300, FrameType.JSON, 3)
    assert parse_frame_header(raw) == header  # payload bytes after the header are ignored
    assert raw[header.header_len :] == b"x" * 300


def test_parse_header_accepts_exactly_the_cap() -> None:
    assert parse_frame_header(unhex("80 80 80 20 02")) == FrameHeader(MAX_FRAME, FrameType.BLOB, 5)


def test_cap_is_checked_right_after_the_varint_before_the_type_byte() -> None:
    # 64 MiB + 1 with no type byte yet: refused now, not "need more".
    with pytest.raises(WireError) as info:
        parse_frame_header(unhex("81 80 80 20"))
    assert info.value.code is ErrorCode.FRAME_TOO_LARGE
    assert info.value.fatal
    assert "67108865" in info.value.message
    # Exactly the cap without a type byte is still "need more".
    assert parse_frame_header(unhex("80 80 80 20")) is None


def test_parse_header_honours_a_smaller_cap() -> None:
    assert parse_frame_header(b"\x10\x01", max_payload=16) == FrameHeader(16, FrameType.JSON, 2)
    with pytest.raises(WireError) as info:
        parse_frame_header(b"\x11", max_payload=16)
    assert info.value.code is ErrorCode.FRAME_TOO_LARGE


@pytest.mark.parametrize("type_byte", [0x00, 0x03, 0x09, 0x45, 0x7F, 0xFF])
def test_unknown_frame_type_is_invalid_request(type_byte: int) -> None:
    with pytest.raises(WireError) as info:
        parse_frame_header(bytes([0x01, type_byte]))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert info.value.fatal
    assert f"0x{type_byte:02x}" in info.value.message


def test_parse_header_expect_refuses_the_other_type() -> None:
    assert parse_frame_header(b"\x00\x01", expect=FrameType.JSON) == FrameHeader(0, FrameType.JSON, 2)
    with pytest.raises(WireError) as info:
        parse_frame_header(b"\x00\x02", expect=FrameType.JSON)
    assert info.value.code is ErrorCode.INVALID_REQUEST


# ---------------------------------------------------------------------------------------------------------------
# FrameDecoder
# ---------------------------------------------------------------------------------------------------------------


def test_frame_decoder_splits_frames_however_the_bytes_arrive() -> None:
    stream = (
        encode_frame(FrameType.JSON, b'{"a":1}')
        + encode_frame(FrameType.BLOB, b"")
        + encode_frame(FrameType.BLOB, bytes(range(256)) * 2)
        + encode_frame(FrameType.JSON, b"{}")
    )
    expected = [
        Frame(FrameType.JSON, b'{"a":1}'),
        Frame(FrameType.BLOB, b""),
        Frame(FrameType.BLOB, bytes(range(256)) * 2),
        Frame(FrameType.JSON, b"{}"),
    ]
    for chunk in (1, 2, 3, 5, 64, len(stream)):
        decoder = FrameDecoder()
        frames = []
        for start in range(0, len(stream), chunk):
            frames += decoder.feed(memoryview(stream)[start : start + chunk])
        assert frames == expected, chunk
        assert decoder.at_boundary
        decoder.eof()


def test_frame_decoder_emits_an_empty_frame_ending_a_chunk() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"\x00") == []
    assert decoder.feed(b"\x02") == [Frame(FrameType.BLOB, b"")]


@pytest.mark.parametrize(("data", "detail"), [(b"\x85", "header"), (b"\x05", "header"), (b"\x05\x01ab", "2 of 5")])
def test_frame_decoder_eof_inside_a_frame_is_truncation(data: bytes, detail: str) -> None:
    decoder = FrameDecoder()
    assert decoder.feed(data) == []
    assert not decoder.at_boundary
    with pytest.raises(WireError) as info:
        decoder.eof()
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert "truncated" in info.value.message and detail in info.value.message


def test_frame_decoder_stays_failed() -> None:
    decoder = FrameDecoder(expect=FrameType.JSON)
    with pytest.raises(WireError):
        decoder.feed(b"\x00\x02")
    with pytest.raises(WireError):
        decoder.feed(encode_frame(FrameType.JSON, b"{}"))
    with pytest.raises(WireError):
        decoder.eof()


def test_frame_decoder_delivers_frames_before_a_bad_header_first() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(encode_frame(FrameType.JSON, b"{}") + b"\x01\x7fx") == [Frame(FrameType.JSON, b"{}")]
    with pytest.raises(WireError, match="0x7f"):
        decoder.eof()


def test_frame_decoder_memory_follows_bytes_received_not_bytes_declared() -> None:
    decoder = FrameDecoder()
    tracemalloc.start()
    try:
        decoder.feed(unhex("80 80 80 20 02") + b"ab")  # declares 64 MiB, sends 2 bytes
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert not decoder.at_boundary


# ---------------------------------------------------------------------------------------------------------------
# Malformed-input corpus: pdf-spec TestMalformedFrames (spec §8) + V6 extras, through both reader shapes
# ---------------------------------------------------------------------------------------------------------------

MALFORMED = [
    pytest.param(b"\x05", ErrorCode.INVALID_REQUEST, id="varint-then-eof"),
    pytest.param(b"\x05\x01", ErrorCode.INVALID_REQUEST, id="header-then-eof"),
    pytest.param(b"\x05\x01ab", ErrorCode.INVALID_REQUEST, id="short-payload"),
    pytest.param(b"\x01\x7fx", ErrorCode.INVALID_REQUEST, id="unknown-type-7f"),
    pytest.param(b"\x00\x01", ErrorCode.INVALID_REQUEST, id="zero-length-json"),
    pytest.param(b"GET / HTTP/1.1\r\n\r\n", ErrorCode.INVALID_REQUEST, id="http"),
    pytest.param(b"\x80" * 12, ErrorCode.INVALID_REQUEST, id="twelve-0x80"),
    pytest.param(unhex("80 80 80 80 80 01"), ErrorCode.INVALID_REQUEST, id="six-byte-varint"),
    pytest.param(unhex("81 80 80 20 01"), ErrorCode.FRAME_TOO_LARGE, id="cap-plus-one"),
    pytest.param(encode_uvarint(1 << 40) + b"\x01", ErrorCode.INVALID_REQUEST, id="2^40-varint"),
    pytest.param(b"\x00\x02", ErrorCode.INVALID_REQUEST, id="blob-first"),
    pytest.param(b"\x06\x02" + V2_PIXELS, ErrorCode.INVALID_REQUEST, id="blob-with-payload-first"),
    pytest.param(json_frame(b"[1]"), ErrorCode.INVALID_REQUEST, id="json-array"),
    pytest.param(json_frame(b'{"wire_version":1,"messages":[]'), ErrorCode.INVALID_REQUEST, id="unclosed-json"),
]


@pytest.mark.parametrize("read", SESSION_READERS)
@pytest.mark.parametrize(("data", "code"), MALFORMED)
def test_malformed_corpus_is_refused_with_its_code(read: SessionReader, data: bytes, code: ErrorCode) -> None:
    with pytest.raises(WireError) as info:
        read(data)
    assert info.value.code is code
    assert info.value.fatal  # framing errors cannot be resynced from: error frame, then close
    assert info.value.request_id == ""


@pytest.mark.parametrize("read", SESSION_READERS)
def test_empty_stream_is_a_clean_close(read: SessionReader) -> None:
    assert read(b"") == []


def test_error_names_the_cap_for_the_http_and_cap_cases() -> None:
    with pytest.raises(WireError, match="unknown frame type 0x45"):
        read_session_sync(b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(WireError, match="exceeds the 67108864 byte cap"):
        read_session_sync(unhex("81 80 80 20 01"))


# ---------------------------------------------------------------------------------------------------------------
# V1: spec §5 text request
# ---------------------------------------------------------------------------------------------------------------

V1_REQUEST = Request(id="r1", messages=(Message(Role.USER, (TextBlock("hi"),)),), max_tokens=4)


def test_v1_encodes_to_the_golden_bytes() -> None:
    raw = unhex(V1_HEX)
    assert len(raw) == 114 and raw[0] == 0x70  # the spec doc's 6F is off by one
    assert b"".join(request_frames(V1_REQUEST)) == raw
    assert encode_frame(FrameType.JSON, request_to_json(V1_REQUEST)) == raw


@pytest.mark.parametrize("read", SESSION_READERS)
def test_v1_decodes_to_its_values(read: SessionReader) -> None:
    assert read(unhex(V1_HEX)) == [V1_REQUEST]
    assert decode_request_json(unhex(V1_HEX)[2:]) == V1_REQUEST


# ---------------------------------------------------------------------------------------------------------------
# V2: pdf-spec page request with a 2x1 image
# ---------------------------------------------------------------------------------------------------------------

V2_STREAM_HEX = V2_REQUEST_HEX + V2_DESCRIPTOR_HEX + V2_BLOB_HEX


def test_v2_golden_bytes_are_what_the_spec_says() -> None:
    raw = unhex(V2_STREAM_HEX)
    assert len(raw) == 344
    assert hashlib.sha256(raw).hexdigest() == V2_SHA256


def test_v2_encodes_to_the_golden_bytes() -> None:
    frames = request_frames(v2_request())
    assert b"".join(frames) == unhex(V2_STREAM_HEX)
    assert frames[0] == unhex(V2_REQUEST_HEX)
    assert frames[1] == unhex(V2_DESCRIPTOR_HEX)
    assert frames[2] + frames[3] == unhex(V2_BLOB_HEX)
    assert descriptor_to_json(BlobDescriptor("page-1", 6)) == unhex(V2_DESCRIPTOR_HEX)[2:]


def test_v2_from_page_request_with_numpy_and_pil() -> None:
    array = np.frombuffer(V2_PIXELS, dtype=np.uint8).reshape(1, 2, 3)
    assert b"".join(request_frames(page_request("page-1", array))) == unhex(V2_STREAM_HEX)
    pil = Image.frombytes("RGB", (2, 1), V2_PIXELS)
    assert b"".join(request_frames(page_request("page-1", pil))) == unhex(V2_STREAM_HEX)


@pytest.mark.parametrize("read", SESSION_READERS)
def test_v2_decodes_to_its_values(read: SessionReader) -> None:
    [request] = read(unhex(V2_STREAM_HEX))
    assert request == v2_request()
    assert request.attachments[0].data == V2_PIXELS
    validate_request(request)
    assert attachment_array(request.attachments[0]).tolist() == [[[0x10, 0x20, 0x30], [0x40, 0x50, 0x60]]]


def test_request_json_never_carries_the_bytes() -> None:
    # pdf-spec TestRequestJSONShape.
    payload = request_to_json(v2_request())
    assert b"bytes" not in payload.lower() and b"data" not in payload
    obj = json.loads(payload)
    assert list(obj) == ["wire_version", "id", "messages", "attachments", "max_tokens", "temperature"]
    assert list(obj["attachments"][0]) == ["kind", "id", "width", "height"]


def test_inferd_multimodal_round_trip_vector() -> None:
    # inferd clients/go TestV2MultimodalRoundTrip: 2x2 RGB, descriptor len 12.
    pixels = bytes([220, 30, 30, 255, 255, 255, 255, 255, 255, 220, 30, 30])
    request = page_request("mm", np.frombuffer(pixels, dtype=np.uint8).reshape(2, 2, 3), prompt="what colour?")
    frames = request_frames(request)
    assert json.loads(payload_of(frames[1])) == {"type": "attachment_blob", "attachment_id": "mm", "len": 12}
    [back] = read_session_sync(b"".join(frames))
    assert back == request
    reply = encode_response(FrameDelta("mm", "a red")) + encode_response(Done("mm", 276, 2, "end_turn", "llamacpp"))
    assert read_responses(reply) == [FrameDelta("mm", "a red"), Done("mm", 276, 2, StopReason.END_TURN, "llamacpp")]


# ---------------------------------------------------------------------------------------------------------------
# V3, V4, V5: responses
# ---------------------------------------------------------------------------------------------------------------

V3_VECTORS = [
    pytest.param(FrameDelta("page-1", "<doctag><text><loc_1>a & b</text>"), V3A_HEX, id="V3a-delta"),
    pytest.param(Done("page-1", 0, 7, StopReason.END_TURN, BACKEND), V3B_HEX, id="V3b-done"),
    pytest.param(
        Error("", ErrorCode.WIRE_VERSION_UNSUPPORTED, "ipc: wire version 2 unsupported, this build speaks 1"),
        V3C_HEX,
        id="V3c-version",
    ),
    pytest.param(
        Error("bad", ErrorCode.INVALID_REQUEST, "no image block; there is nothing to read"),
        (b"\x69\x01" + V3E_JSON).hex(),
        id="V3e-invalid",
    ),
]


@pytest.mark.parametrize(("event", "hexed"), V3_VECTORS)
def test_v3_responses_encode_to_the_golden_bytes(event: FrameDelta | Done | Error, hexed: str) -> None:
    assert encode_response(event) == unhex(hexed)


@pytest.mark.parametrize(("event", "hexed"), V3_VECTORS)
def test_v3_responses_decode_to_their_values(event: FrameDelta | Done | Error, hexed: str) -> None:
    assert read_responses(unhex(hexed)) == [event]


def test_v3_lengths_are_the_spec_lengths() -> None:
    assert [len(unhex(h)) for h in (V3A_HEX, V3B_HEX, V3C_HEX)] == [146, 162, 125]
    assert len(V3E_JSON) == 0x69


def test_v3d_done_without_backend_decodes_but_is_never_produced() -> None:
    assert len(V3D_JSON) == 0x60
    assert read_responses(b"\x60\x01" + V3D_JSON) == [Done("x", 0, 0, StopReason.MAX_TOKENS, "")]
    ours = response_to_json(Done("x", 0, 0, StopReason.MAX_TOKENS, ""))
    assert ours == V3D_JSON[:-1] + b',"backend":""}'  # Go order, plus the backend a Rust client requires


def test_v4_escaping_is_gos() -> None:
    frame = encode_frame(FrameType.JSON, go_json({"type": "text", "delta": V4_TEXT}))
    assert frame == b"\x56\x01" + V4_JSON
    assert len(frame) == 88
    assert json.loads(V4_JSON)["delta"] == V4_TEXT
    # The same escaping inside a real delta frame, and back.
    delta = encode_response(FrameDelta("x", V4_TEXT))
    assert V4_JSON[len(b'{"type":"text",') : -1] in delta
    assert read_responses(delta) == [FrameDelta("x", V4_TEXT)]


def test_v5_first_frame_of_pdf_spec_client_server_stream() -> None:
    expected = b'{"id":"page-1","type":"frame","block":{"type":"text","delta":"\\u003cdoctag\\u003e\\u003c"}}'
    assert encode_response(FrameDelta("page-1", "<doctag><")) == b"\x59\x01" + expected


@pytest.mark.parametrize(
    "payload",
    [
        b'{"type":"frame","id":"page-1","block":{"type":"text","delta":"<doctag><text><loc_1>a & b</text>"}}',
        b'{"block":{"delta":"<doctag><text><loc_1>a \\u0026 b</text>","type":"text"},"type":"frame","id":"page-1"}',
        b'{ "id" : "page-1", "type" : "frame", "block" : { "type" : "text", "delta" : '
        b'"\\u003cdoctag>\\u003ctext>\\u003cloc_1>a & b\\u003c\\/text>" }, "extra": [1, {"x": null}] }',
    ],
)
def test_rust_order_and_any_escaping_decode_the_same(payload: bytes) -> None:
    assert decode_response(payload) == FrameDelta("page-1", "<doctag><text><loc_1>a & b</text>")


def test_rust_done_and_error_decode() -> None:
    done = (
        b'{"type":"done","id":"r1","usage":{"input_tokens":12,"output_tokens":2},"stop_reason":"end_turn",'
        b'"backend":"llamacpp","tool_choice_unsatisfied":true}'
    )
    assert decode_response(done) == Done("r1", 12, 2, "end_turn", "llamacpp")
    error = b'{"type":"error","id":"r1","code":"queue_full","message":"busy"}'
    assert decode_response(error) == Error("r1", ErrorCode.QUEUE_FULL, "busy")


# ---------------------------------------------------------------------------------------------------------------
# Response encoding and decoding details
# ---------------------------------------------------------------------------------------------------------------


def test_responses_always_carry_the_fields_rust_requires() -> None:
    assert response_to_json(FrameDelta("", "")) == b'{"id":"","type":"frame","block":{"type":"text","delta":""}}'
    assert response_to_json(Done("")) == (
        b'{"id":"","type":"done","usage":{"input_tokens":0,"output_tokens":0},"stop_reason":"end_turn","backend":""}'
    )
    assert response_to_json(Error("", ErrorCode.INTERNAL, "")) == (
        b'{"id":"","type":"error","code":"internal","message":""}'
    )


def test_a_done_warning_is_written_after_backend_only_when_there_is_one() -> None:
    # modelhost's own optional field (a page in a script the model cannot read, issue 34 item 5): after `backend`,
    # as inferd's optional tool_choice_unsatisfied; a done without one stays the golden V3b bytes (above).
    done = Done("page-1", 0, 7, StopReason.END_TURN, BACKEND, warning="3 of its 3 lines <unread>")
    payload = response_to_json(done)
    v3b = unhex(V3B_HEX)[3:]  # the JSON of V3b, past its frame header (a 2-byte varint, the type)
    assert payload == v3b[:-1] + b',"warning":"3 of its 3 lines \\u003cunread\\u003e"}'
    assert read_responses(encode_response(done)) == [done]
    rust = b'{"type":"done","id":"r1","usage":{"input_tokens":1,"output_tokens":2},"stop_reason":"end_turn",'
    rust += b'"backend":"b","tool_choice_unsatisfied":true,"warning":"w"}'
    assert decode_response(rust) == Done("r1", 1, 2, "end_turn", "b", warning="w")
    with pytest.raises(WireError) as info:
        decode_response(rust.replace(b'"w"', b"7"))
    assert info.value.fatal


def test_done_token_counts_saturate_and_refuse_negatives() -> None:
    assert b'"output_tokens":4294967295' in response_to_json(Done("x", 0, 1 << 40))
    with pytest.raises(ValueError):
        response_to_json(Done("x", -1, 0))


def test_blob_on_the_response_stream_is_refused() -> None:
    with pytest.raises(WireError) as info:
        decode_response(b"{}", FrameType.BLOB)
    assert info.value.fatal and info.value.code is ErrorCode.INVALID_REQUEST
    with pytest.raises(WireError):
        read_responses(encode_frame(FrameType.BLOB, b"\x00\x01"))


@pytest.mark.parametrize(
    "payload",
    [
        b'{"id":"r","type":"progress","pct":5}',
        b'{"id":"r","type":"frame"}',
        b'{"id":"r","type":"frame","block":null}',
        b'{"id":"r","type":"frame","block":{"type":"thinking","delta":"hmm"}}',
        b'{"id":"r","type":"frame","block":{"type":"tool_use","tool_call_id":"t","name":"f","input":{}}}',
    ],
)
def test_client_skips_what_is_not_for_it(payload: bytes) -> None:
    assert decode_response(payload) is None


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"[]",
        b'{"id":"r"}',
        b'{"id":"r","type":5}',
        b'{"id":5,"type":"done"}',
        b'{"id":"r","type":"frame","block":{"type":"text","delta":5}}',
        b'{"id":"r","type":"frame","block":"text"}',
        b'{"id":"r","type":"done","usage":{"input_tokens":1.0,"output_tokens":0}}',
        b'{"id":"r","type":"done","usage":{"input_tokens":true,"output_tokens":0}}',
        b'{"id":"r","type":"done","usage":{"input_tokens":4294967296,"output_tokens":0}}',
        b'{"id":"r","type":"done","usage":0}',
        b'{"id":"r","type":"done","usage":{},"backend":null,"stop_reason":7}',
        b'{"id":"r","type":"error","code":["x"]}',
    ],
)
def test_client_refuses_malformed_responses(payload: bytes) -> None:
    with pytest.raises(WireError) as info:
        decode_response(payload)
    assert info.value.code is ErrorCode.INVALID_REQUEST and info.value.fatal


def test_go_omitted_response_fields_read_as_zero_values() -> None:
    assert decode_response(b'{"type":"done"}') == Done("", 0, 0, "", "")
    assert decode_response(b'{"type":"error","id":"r"}') == Error("r", "", "")
    assert decode_response(b'{"type":"frame","id":"r","block":{"type":"text"}}') == FrameDelta("r", "")
    assert decode_response(b'{"type":"done","stop_reason":"weird","usage":null}') == Done("", stop_reason="weird")


def test_is_terminal() -> None:
    assert not is_terminal(FrameDelta("x", "a"))
    assert is_terminal(Done("x"))
    assert is_terminal(Error("x", ErrorCode.INTERNAL, "boom"))


def test_wire_error_becomes_an_error_frame() -> None:
    err = WireError(ErrorCode.QUEUE_FULL, "try later", fatal=False, request_id="r7")
    assert err.to_event() == Error("r7", ErrorCode.QUEUE_FULL, "try later")
    assert encode_response(err.to_event()) == json_frame(
        b'{"id":"r7","type":"error","code":"queue_full","message":"try later"}'
    )
    assert str(err) == "queue_full: try later"


# ---------------------------------------------------------------------------------------------------------------
# Go JSON: floats and strings
# ---------------------------------------------------------------------------------------------------------------

GO_FLOATS = [
    (0.0, "0"),
    (-0.0, "-0"),
    (1.0, "1"),
    (-1.0, "-1"),
    (0.7, "0.7"),
    (0.1 + 0.2, "0.30000000000000004"),
    (123.0, "123"),
    (1.5e-6, "0.0000015"),
    (1e-6, "0.000001"),
    (9.99e-7, "9.99e-7"),
    (1e-7, "1e-7"),
    (1.5e-10, "1.5e-10"),
    (-2.5e-300, "-2.5e-300"),
    (5e-324, "5e-324"),
    (1e20, "100000000000000000000"),
    (1.5e16, "15000000000000000"),
    (12345678901234567890.0, "12345678901234567000"),
    (1e21, "1e+21"),
    (1.25e21, "1.25e+21"),
    (1e100, "1e+100"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (123456.789, "123456.789"),
]


@pytest.mark.parametrize(("value", "spelled"), GO_FLOATS)
def test_floats_are_spelled_as_go_spells_them(value: float, spelled: str) -> None:
    assert go_float(value) == spelled
    assert float(spelled) == value


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_floats_cannot_be_encoded(value: float) -> None:
    with pytest.raises(ValueError):
        go_float(value)


def test_request_floats_use_go_spelling() -> None:
    request = Request(messages=(), temperature=0.0, top_p=1.0, top_k=40, max_tokens=0, stream=False, thinking=True)
    assert request_to_json(request) == (
        b'{"wire_version":1,"messages":[],"max_tokens":0,"temperature":0,"top_p":1,"top_k":40,'
        b'"stream":false,"thinking":true}'
    )


def test_go_string_escapes() -> None:
    assert go_json("\b\f\x00\x7f/") == b'"\\b\\f\\u0000\x7f/"'
    assert go_json("a\ud800b") == b'"a\\ufffdb"'  # a lone surrogate is what Go calls invalid UTF-8
    assert go_json({"<k>": [None, True, 1, 2.5, "&"]}) == b'{"\\u003ck\\u003e":[null,true,1,2.5,"\\u0026"]}'
    with pytest.raises(TypeError):
        go_json(object())


def test_empty_text_is_always_written() -> None:
    # Go's omitempty would drop it and inferd's Rust reader would then fail "missing field text".
    request = Request(messages=(Message(Role.USER, (TextBlock(""),)),))
    assert b'{"type":"text","text":""}' in request_to_json(request)


# ---------------------------------------------------------------------------------------------------------------
# Request decoding: strict on types, tolerant of order, escaping and omitted fields
# ---------------------------------------------------------------------------------------------------------------

GOOD_MESSAGES = '[{"role":"user","content":[{"type":"text","text":"hi"}]}]'


def request_json(**fields: str) -> bytes:
    """A request payload with the given raw JSON field values (wire_version 1 and a valid message by default)."""
    base = {"wire_version": "1", "id": '"r9"', "messages": GOOD_MESSAGES}
    base.update(fields)
    return ("{" + ",".join(f'"{k}":{v}' for k, v in base.items()) + "}").encode()


@pytest.mark.parametrize(
    "fields",
    [
        {"wire_version": "true"},
        {"wire_version": "1.0"},
        {"wire_version": '"1"'},
        {"wire_version": "-1"},
        {"wire_version": "4294967296"},
        {"max_tokens": "1.0"},
        {"max_tokens": "1e0"},
        {"max_tokens": "true"},
        {"max_tokens": "-1"},
        {"max_tokens": "4294967296"},
        {"top_k": '"40"'},
        {"temperature": "1" + "0" * 400},
        {"temperature": '"0"'},
        {"temperature": "true"},
        {"top_p": "[]"},
        {"stream": '"yes"'},
        {"thinking": "1"},
        {"id": "5"},
        {"id": '"\\ud800"'},
        {"messages": "5"},
        {"messages": "{}"},
        {"messages": '["x"]'},
        {"messages": '[{"role":"User","content":[]}]'},
        {"messages": '[{"role":"tool","content":[]}]'},
        {"messages": '[{"content":[]}]'},
        {"messages": '[{"role":null,"content":[]}]'},
        {"messages": '[{"role":"user","content":"hi"}]'},
        {"messages": '[{"role":"user","content":["hi"]}]'},
        {"messages": '[{"role":"user","content":[{"text":"hi"}]}]'},
        {"messages": '[{"role":"user","content":[{"type":5}]}]'},
        {"messages": '[{"role":"user","content":[{"type":"text","text":5}]}]'},
        {"messages": '[{"role":"user","content":[{"type":"text","text":"\\udc00"}]}]'},
        {"messages": '[{"role":"user","content":[{"type":"image","attachment_id":1}]}]'},
        {"attachments": '{"kind":"image"}'},
        {"attachments": '[{"id":"a","width":1,"height":1}]'},
        {"attachments": '[{"kind":"image","id":"a","width":"2","height":1}]'},
        {"attachments": '[{"kind":"image","id":"a","width":1.5,"height":1}]'},
        {"attachments": '[{"kind":"image","id":"a","width":1,"height":-1}]'},
        {"attachments": '[{"kind":"image","id":7,"width":1,"height":1}]'},
    ],
)
def test_request_with_wrong_types_is_refused(fields: dict[str, str]) -> None:
    with pytest.raises(WireError) as info:
        decode_request_json(request_json(**fields))
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert info.value.fatal
    # The id is echoed whenever it could be read.
    assert info.value.request_id == ("r9" if "id" not in fields else "")


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_numbers_json_cannot_spell_are_refused(number: str) -> None:
    with pytest.raises(WireError) as info:
        decode_request_json(request_json(temperature=number))
    assert info.value.code is ErrorCode.INVALID_REQUEST and info.value.fatal
    assert info.value.request_id == ""  # refused while parsing the JSON, before the id could be read


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"   ",
        b"null",
        b"[]",
        b"1",
        b'"request"',
        b'{"wire_version":1,"messages":[]} trailing',
        b'{"wire_version":1,"wire_version":1,"messages":[]}',
        b'{"wire_version":1,"messages":[],"id":"\xff"}',
        b'\xef\xbb\xbf{"wire_version":1,"messages":[]}',
        '{"wire_version":1,"messages":[]}'.encode("utf-16"),
        b'{"wire_version":1,"messages":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ],
    ids=[
        "empty",
        "blank",
        "null",
        "array",
        "number",
        "string",
        "trailing",
        "duplicate-key",
        "bad-utf8",
        "bom",
        "utf16",
        "deep-nesting",
    ],
)
def test_request_payloads_that_are_not_one_json_object_are_refused(payload: bytes) -> None:
    with pytest.raises(WireError) as info:
        decode_request_json(payload)
    assert info.value.code is ErrorCode.INVALID_REQUEST and info.value.fatal


def test_missing_wire_version_reads_as_zero_and_is_refused() -> None:
    payload = b'{"id":"r1","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}'
    with pytest.raises(WireError) as info:
        decode_request_json(payload)
    assert info.value.code is ErrorCode.WIRE_VERSION_UNSUPPORTED
    assert info.value.fatal and info.value.request_id == "r1"
    assert info.value.message == "wire version 0 unsupported, this build speaks 1"
    assert decode_request_json(payload, check_version=False).wire_version == 0


def test_a_future_version_is_named_before_its_fields_are_judged() -> None:
    payload = b'{"wire_version":2,"id":"f","messages":"a shape v1 does not know"}'
    with pytest.raises(WireError) as info:
        decode_request_json(payload)
    assert info.value.code is ErrorCode.WIRE_VERSION_UNSUPPORTED
    assert info.value.request_id == "f"
    assert "wire version 2" in info.value.message


def test_decoding_is_tolerant_of_order_escaping_unknown_fields_and_go_omissions() -> None:
    payload = (
        b'{"tools":[{"name":"f"}],"tool_choice":"auto","response_format":{"type":"json_schema","schema":{}},'
        b'"Future":1,"messages":[{"content":[{"attachment_id":"p","type":"image"},{"type":"text"},'
        b'{"type":"text","text":"\\u0048\\u0069 \\u003c\\/b\\u003e"},{"type":"tool_use","input":{"a":[1]}},'
        b'{"type":"audio","attachment_id":"s"},{"type":"hologram","attachment_id":5}],"role":"assistant"},'
        b'{"role":"system","content":null}],'
        b'"attachments":[{"id":"p","kind":"image"},{"kind":"audio","id":"s","sample_rate":16000}],'
        b'"max_tokens":null,"temperature":1,"top_p":0.95,"top_k":0,"stream":true,"thinking":false,'
        b'"\\u0069d":"esc","wire_version":1}'
    )
    assert decode_request_json(payload) == Request(
        id="esc",
        messages=(
            Message(
                Role.ASSISTANT,
                (
                    ImageBlock("p"),
                    TextBlock(""),
                    TextBlock("Hi </b>"),
                    OtherBlock("tool_use"),
                    OtherBlock("audio", "s"),
                    OtherBlock("hologram"),
                ),
            ),
            Message(Role.SYSTEM, ()),
        ),
        attachments=(Attachment(kind="image", id="p"), Attachment(kind="audio", id="s")),
        temperature=1.0,
        top_p=0.95,
        top_k=0,
        stream=True,
        thinking=False,
    )


def test_null_messages_read_as_empty_and_are_refused_semantically() -> None:
    request = decode_request_json(b'{"wire_version":1,"id":"n","messages":null}')
    assert request.messages == ()
    with pytest.raises(WireError) as info:
        validate_request(request)
    assert not info.value.fatal and info.value.request_id == "n"


# ---------------------------------------------------------------------------------------------------------------
# Descriptors
# ---------------------------------------------------------------------------------------------------------------


def test_descriptor_decodes_in_any_order() -> None:
    assert decode_blob_descriptor(b'{"len":6,"attachment_id":"page-1","type":"attachment_blob"}') == BlobDescriptor(
        "page-1", 6
    )
    assert decode_blob_descriptor(b'{"type":"attachment_blob","attachment_id":"a","len":18446744073709551615}') == (
        BlobDescriptor("a", (1 << 64) - 1)
    )


@pytest.mark.parametrize(
    "payload",
    [
        b'{"type":"attachment-blob","attachment_id":"a","len":1}',
        b'{"type":"Attachment_blob","attachment_id":"a","len":1}',
        b'{"attachment_id":"a","len":1}',
        b'{"type":5,"attachment_id":"a","len":1}',
        b'{"type":["attachment_blob"],"attachment_id":"a","len":1}',
        b'{"type":"attachment_blob","len":1}',
        b'{"type":"attachment_blob","attachment_id":"a"}',
        b'{"type":"attachment_blob","attachment_id":"a","len":1.0}',
        b'{"type":"attachment_blob","attachment_id":"a","len":-1}',
        b'{"type":"attachment_blob","attachment_id":"a","len":18446744073709551616}',
        b'{"type":"attachment_blob","attachment_id":"a","len":"1"}',
    ],
)
def test_bad_descriptors_are_refused(payload: bytes) -> None:
    with pytest.raises(WireError) as info:
        decode_blob_descriptor(payload)
    assert info.value.code is ErrorCode.INVALID_REQUEST and info.value.fatal


# ---------------------------------------------------------------------------------------------------------------
# RequestReader: the blob phase
# ---------------------------------------------------------------------------------------------------------------


def image_request(*ids: str, rid: str = "q", side: int = 1) -> Request:
    pixels = bytes(side * side * 3)
    return Request(
        id=rid,
        messages=(Message(Role.USER, (*(ImageBlock(i) for i in ids), TextBlock("p"))),),
        attachments=tuple(Attachment(kind="image", id=i, width=side, height=side, data=pixels) for i in ids),
    )


def frames_of(*parts: bytes) -> bytes:
    return b"".join(parts)


def descriptor_frame(attachment_id: str, length: int) -> bytes:
    return encode_frame(FrameType.JSON, descriptor_to_json(BlobDescriptor(attachment_id, length)))


def expect_wire_error(data: bytes, code: ErrorCode, fragment: str, request_id: str = "q") -> None:
    for read in SESSION_READERS:
        with pytest.raises(WireError) as info:
            read(data)
        assert info.value.code is code, read
        assert info.value.fatal
        assert fragment in info.value.message
        assert info.value.request_id == request_id


def test_blob_length_must_equal_the_descriptor_len() -> None:
    # pdf-spec TestBlobMismatch: descriptor says 99, blob is 3 bytes. Refused at the header, before allocation.
    head = request_frames(image_request("a"))[0]
    expect_wire_error(
        head + descriptor_frame("a", 99) + encode_frame(FrameType.BLOB, b"abc"),
        ErrorCode.INVALID_REQUEST,
        "declared 99",
    )
    reader = RequestReader()
    reader.accept_frame(Frame(FrameType.JSON, payload_of(head)))
    reader.accept_frame(Frame(FrameType.JSON, descriptor_to_json(BlobDescriptor("a", 99))))
    with pytest.raises(WireError):
        reader.accept_header(FrameHeader(3, FrameType.BLOB, 2))


def test_descriptor_for_an_undeclared_attachment_is_refused() -> None:
    head = request_frames(image_request("a"))[0]
    expect_wire_error(
        head + descriptor_frame("other", 3) + encode_frame(FrameType.BLOB, b"abc"), ErrorCode.INVALID_REQUEST, "'other'"
    )


def test_second_blob_for_one_id_is_refused() -> None:
    head = request_frames(image_request("a", "b"))[0]
    blob = encode_frame(FrameType.BLOB, bytes(3))
    expect_wire_error(
        head + descriptor_frame("a", 3) + blob + descriptor_frame("a", 3) + blob,
        ErrorCode.INVALID_REQUEST,
        "more than one BLOB",
    )


def test_blobs_are_matched_by_id_not_position() -> None:
    request = Request(
        id="q",
        messages=(Message(Role.USER, (ImageBlock("a"), ImageBlock("b"))),),
        attachments=(
            Attachment(kind="image", id="a", width=1, height=1, data=b"AAA"),
            Attachment(kind="image", id="b", width=1, height=1, data=b"BBB"),
        ),
    )
    frames = request_frames(request)
    swapped = frames[0] + b"".join(frames[4:7]) + b"".join(frames[1:4])
    for read in SESSION_READERS:
        [back] = read(swapped)
        assert back == request
        assert [bytes(a.data or b"") for a in back.attachments] == [b"AAA", b"BBB"]


def test_wrong_frame_types_in_the_blob_phase_are_refused() -> None:
    head = request_frames(image_request("a"))[0]
    expect_wire_error(head + encode_frame(FrameType.BLOB, bytes(3)), ErrorCode.INVALID_REQUEST, "descriptor")
    expect_wire_error(
        head + descriptor_frame("a", 3) + encode_frame(FrameType.JSON, b"{}!"), ErrorCode.INVALID_REQUEST, "BLOB"
    )
    expect_wire_error(
        head + encode_frame(FrameType.JSON, b'{"type":"blob","attachment_id":"a","len":3}'),
        ErrorCode.INVALID_REQUEST,
        "attachment_blob",
    )


def test_eof_in_the_blob_phase_is_truncation() -> None:
    frames = request_frames(image_request("a"))
    expect_wire_error(frames[0], ErrorCode.INVALID_REQUEST, "truncated")
    expect_wire_error(frames[0] + frames[1], ErrorCode.INVALID_REQUEST, "truncated")


def test_attachment_count_is_checked_before_any_blob() -> None:
    ids = [f"i{n}" for n in range(MAX_ATTACHMENTS + 1)]
    payload = request_to_json(image_request(*ids))
    reader = RequestReader()
    reader.accept_header(FrameHeader(len(payload), FrameType.JSON, 0))
    with pytest.raises(WireError) as info:
        reader.accept_payload(payload)
    assert info.value.code is ErrorCode.INVALID_REQUEST and info.value.fatal
    assert info.value.request_id == "q" and "33 attachments" in info.value.message
    with pytest.raises(RuntimeError):
        reader.accept_header(FrameHeader(3, FrameType.JSON, 0))
    # Exactly 32 is fine, end to end.
    request = image_request(*ids[:MAX_ATTACHMENTS])
    assert read_session_sync(b"".join(request_frames(request))) == [request]


def test_duplicate_attachment_ids_make_the_blob_phase_unreadable() -> None:
    payload = request_to_json(image_request("a", "a"))
    with pytest.raises(WireError) as info:
        read_session_sync(encode_frame(FrameType.JSON, payload))
    assert info.value.code is ErrorCode.INVALID_REQUEST and "duplicate attachment id" in info.value.message


def test_a_descriptor_over_the_frame_cap_is_frame_too_large_before_the_blob() -> None:
    head = request_frames(image_request("a"))[0]
    expect_wire_error(head + descriptor_frame("a", MAX_FRAME + 1), ErrorCode.FRAME_TOO_LARGE, "67108865")


def test_the_per_request_budget_is_charged_per_descriptor_before_its_blob() -> None:
    # Two blobs of exactly 64 MiB fill the 128 MiB budget; a third of one byte is refused on its descriptor.
    request = image_request("a", "b", "c")
    reader = RequestReader()
    reader.accept_frame(Frame(FrameType.JSON, request_to_json(request)))
    big = bytes(MAX_FRAME)
    for attachment_id in ("a", "b"):
        reader.accept_frame(Frame(FrameType.JSON, descriptor_to_json(BlobDescriptor(attachment_id, MAX_FRAME))))
        assert reader.accept_header(FrameHeader(MAX_FRAME, FrameType.BLOB, 5)) == MAX_FRAME
        reader.accept_payload(big)
    with pytest.raises(WireError) as info:
        reader.accept_frame(Frame(FrameType.JSON, descriptor_to_json(BlobDescriptor("c", 1))))
    assert info.value.code is ErrorCode.FRAME_TOO_LARGE and info.value.fatal and info.value.request_id == "q"
    assert "134217728" in info.value.message


def test_wire_version_is_refused_before_blobs_with_the_request_id() -> None:
    frames = request_frames(dataclasses.replace(image_request("a"), wire_version=2))
    expect_wire_error(b"".join(frames), ErrorCode.WIRE_VERSION_UNSUPPORTED, "wire version 2")


def test_reader_hands_back_the_buffers_it_was_given() -> None:
    request = image_request("a")
    frames = request_frames(request)
    reader = RequestReader()
    reader.accept_frame(Frame(FrameType.JSON, payload_of(frames[0])))
    reader.accept_frame(Frame(FrameType.JSON, payload_of(frames[1])))
    buf = bytearray(reader.accept_header(parse_frame_header(frames[2]) or FrameHeader(0, FrameType.JSON, 0)))
    buf[:] = bytes(request.attachments[0].data or b"")
    reader.accept_payload(buf)
    assert reader.complete
    assert reader.request.attachments[0].data is buf


def test_reader_refuses_misuse() -> None:
    reader = RequestReader()
    with pytest.raises(RuntimeError):
        reader.request  # noqa: B018
    with pytest.raises(RuntimeError):
        reader.accept_payload(b"{}")
    reader.accept_header(FrameHeader(5, FrameType.JSON, 0))
    with pytest.raises(RuntimeError):
        reader.accept_header(FrameHeader(5, FrameType.JSON, 0))
    with pytest.raises(WireError, match="truncated"):
        reader.accept_payload(b"{}")


def test_reader_eof_is_clean_only_between_requests() -> None:
    RequestReader().eof()  # nothing arrived: the client closed between requests
    with pytest.raises(WireError) as info:
        RequestReader().eof(mid_frame=True)
    assert info.value.code is ErrorCode.INVALID_REQUEST and info.value.fatal and info.value.request_id == ""
    assert "truncated" in truncated_frame("x").message and truncated_frame("x").fatal


def test_text_only_request_is_complete_after_one_frame() -> None:
    reader = RequestReader()
    assert not reader.complete and reader.request_id == ""
    reader.accept_frame(Frame(FrameType.JSON, request_to_json(V1_REQUEST)))
    assert reader.complete and reader.request == V1_REQUEST and reader.request_id == "r1"


def test_a_connection_carries_requests_back_to_back() -> None:
    # Connection reuse: the next varint follows the previous request immediately, and a semantically bad request
    # (here an image whose blob is one byte short) leaves the stream in sync for the next one.
    short = Request(
        id="short",
        messages=(Message(Role.USER, (ImageBlock("s"),)),),
        attachments=(Attachment(kind="image", id="s", width=2, height=2, data=bytes(11)),),
    )
    short_frames = [encode_frame(FrameType.JSON, request_to_json(short)), descriptor_frame("s", 11)]
    short_frames.append(encode_frame(FrameType.BLOB, bytes(11)))
    data = b"".join(request_frames(V1_REQUEST)) + b"".join(short_frames) + b"".join(request_frames(v2_request()))
    for read in SESSION_READERS:
        first, second, third = read(data)
        assert first == V1_REQUEST and third == v2_request()
        with pytest.raises(WireError) as info:
            validate_request(second)
        assert not info.value.fatal and info.value.request_id == "short" and "11" in info.value.message


# ---------------------------------------------------------------------------------------------------------------
# Semantic validation (not fatal; the connection is kept)
# ---------------------------------------------------------------------------------------------------------------


def one_message(*blocks: TextBlock | ImageBlock | OtherBlock) -> tuple[Message, ...]:
    return (Message(Role.USER, blocks),)


def image(attachment_id: str = "a", width: int = 2, height: int = 2, data: bytes | None = bytes(12)) -> Attachment:
    return Attachment(kind="image", id=attachment_id, width=width, height=height, data=data)


SEMANTIC_FAILURES = [
    pytest.param(Request(id="v"), ErrorCode.INVALID_REQUEST, "messages is empty", id="no-messages"),
    pytest.param(
        Request(id="v", messages=(Message(Role.USER, ()),)),
        ErrorCode.INVALID_REQUEST,
        "content is empty",
        id="empty-content",
    ),
    pytest.param(
        Request(id="v", messages=one_message(ImageBlock("")), attachments=(image(""),)),
        ErrorCode.INVALID_REQUEST,
        "empty id",
        id="empty-attachment-id",
    ),
    pytest.param(
        Request(id="v", messages=one_message(ImageBlock("a")), attachments=(image(), image())),
        ErrorCode.INVALID_REQUEST,
        "duplicate attachment id",
        id="duplicate-id",
    ),
    pytest.param(
        Request(id="v", messages=one_message(TextBlock("x")), attachments=(Attachment(kind="pdf", id="d"),)),
        ErrorCode.INVALID_REQUEST,
        "unknown kind 'pdf'",
        id="unknown-kind",
    ),
    pytest.param(
        Request(
            id="v", messages=one_message(OtherBlock("audio", "s")), attachments=(Attachment(kind="audio", id="s"),)
        ),
        ErrorCode.ATTACHMENT_UNSUPPORTED,
        "audio",
        id="audio-unsupported",
    ),
    pytest.param(
        Request(
            id="v", messages=one_message(OtherBlock("video", "s")), attachments=(Attachment(kind="video", id="s"),)
        ),
        ErrorCode.ATTACHMENT_UNSUPPORTED,
        "video",
        id="video-unsupported",
    ),
    pytest.param(
        Request(id="v", messages=one_message(ImageBlock("a")), attachments=(image(width=0),)),
        ErrorCode.INVALID_REQUEST,
        "width 0",
        id="zero-width",
    ),
    pytest.param(
        Request(id="v", messages=one_message(ImageBlock("a")), attachments=(image(height=0),)),
        ErrorCode.INVALID_REQUEST,
        "height 0",
        id="zero-height",
    ),
    pytest.param(
        Request(id="v", messages=one_message(ImageBlock("a")), attachments=(image(width=65537, height=1, data=None),)),
        ErrorCode.INVALID_REQUEST,
        "width 65537",
        id="too-wide",
    ),
    pytest.param(
        Request(id="v", messages=one_message(ImageBlock("a")), attachments=(image(width=1 << 20, height=1 << 20),)),
        ErrorCode.INVALID_REQUEST,
        "outside 1..65536",
        id="2^20-square",
    ),
    pytest.param(
        Request(id="v", messages=one_message(ImageBlock("a")), attachments=(image(data=bytes(11)),)),
        ErrorCode.INVALID_REQUEST,
        "needs 12 bytes",
        id="11-bytes-for-2x2",
    ),
    pytest.param(
        Request(id="v", messages=one_message(ImageBlock("a")), attachments=(image(data=bytes(13)),)),
        ErrorCode.INVALID_REQUEST,
        "needs 12 bytes",
        id="13-bytes-for-2x2",
    ),
    pytest.param(
        Request(id="v", messages=one_message(ImageBlock("zz")), attachments=(image(),)),
        ErrorCode.INVALID_REQUEST,
        "'zz', which the request does not carry",
        id="dangling",
    ),
    pytest.param(
        Request(id="v", messages=one_message(ImageBlock("a"), OtherBlock("tool_use")), attachments=(image(),)),
        ErrorCode.INVALID_REQUEST,
        "tool_use",
        id="tool-use",
    ),
    pytest.param(
        Request(id="v", messages=one_message(TextBlock("x"), OtherBlock("hologram"))),
        ErrorCode.INVALID_REQUEST,
        "unknown content-block type 'hologram'",
        id="unknown-block",
    ),
    pytest.param(
        Request(id="v", messages=one_message(TextBlock("x")), attachments=tuple(image(str(n)) for n in range(33))),
        ErrorCode.INVALID_REQUEST,
        "33 attachments",
        id="too-many",
    ),
]


@pytest.mark.parametrize(("request_", "code", "fragment"), SEMANTIC_FAILURES)
def test_semantic_failures_are_not_fatal(request_: Request, code: ErrorCode, fragment: str) -> None:
    with pytest.raises(WireError) as info:
        validate_request(request_)
    assert info.value.code is code
    assert not info.value.fatal
    assert info.value.request_id == "v"
    assert fragment in info.value.message
    # The words the message opens with name the same failure as the code (attachment_unsupported said "invalid
    # request:" once).
    assert info.value.message.startswith(f"{code.value.replace('_', ' ')}: ")


def test_supported_kinds_are_host_policy() -> None:
    audio = Request(messages=one_message(OtherBlock("audio", "s")), attachments=(Attachment(kind="audio", id="s"),))
    validate_request(audio, supported_kinds=("image", "audio"))
    mismatch = Request(messages=one_message(ImageBlock("s")), attachments=(Attachment(kind="audio", id="s"),))
    with pytest.raises(WireError, match="image block but attachment 's' is 'audio'"):
        validate_request(mismatch, supported_kinds=("image", "audio"))


def test_valid_requests_pass() -> None:
    validate_request(V1_REQUEST)
    validate_request(v2_request())
    validate_request(image_request(*[str(n) for n in range(MAX_ATTACHMENTS)]))
    # Metadata only (bytes not attached yet) is judged on its metadata.
    validate_request(Request(messages=one_message(ImageBlock("a")), attachments=(image(data=None),)))


# ---------------------------------------------------------------------------------------------------------------
# Request encoding refusals (the client never sends what a reader must refuse or would hang on)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attachments", "code", "fragment"),
    [
        ((image(data=None),), ErrorCode.INVALID_REQUEST, "no bytes"),
        ((image(data=b""),), ErrorCode.INVALID_REQUEST, "no bytes"),
        ((image(width=0, data=b"x"),), ErrorCode.INVALID_REQUEST, "width 0"),
        ((image(width=65537, height=1, data=b"x"),), ErrorCode.INVALID_REQUEST, "width 65537"),
        ((image(data=bytes(11)),), ErrorCode.INVALID_REQUEST, "carries 11 bytes"),
        ((image(), image()), ErrorCode.INVALID_REQUEST, "duplicate attachment id"),
        (tuple(image(str(n)) for n in range(33)), ErrorCode.INVALID_REQUEST, "33 attachments"),
    ],
)
def test_encode_request_refuses(attachments: tuple[Attachment, ...], code: ErrorCode, fragment: str) -> None:
    with pytest.raises(WireError) as info:
        encode_request(Request(messages=one_message(TextBlock("x")), attachments=attachments))
    assert info.value.code is code and not info.value.fatal and fragment in info.value.message


def test_encode_request_refuses_a_blob_over_the_frame_cap() -> None:
    huge = memoryview(bytes(MAX_FRAME + 1))
    with pytest.raises(WireError) as info:
        encode_request(Request(messages=(), attachments=(Attachment(kind="video", id="v", data=huge),)))
    assert info.value.code is ErrorCode.FRAME_TOO_LARGE


def test_encode_request_refuses_a_total_over_the_budget() -> None:
    chunk = bytes(48 << 20)  # three of these are 144 MiB; each alone fits a frame
    attachments = tuple(Attachment(kind="video", id=str(n), data=chunk) for n in range(3))
    with pytest.raises(WireError) as info:
        encode_request(Request(messages=(), attachments=attachments))
    assert info.value.code is ErrorCode.FRAME_TOO_LARGE and "134217728" in info.value.message
    assert len(encode_request(Request(messages=(), attachments=attachments[:2]))) == 7


def test_encode_request_does_not_copy_attachment_bytes_and_sends_any_version() -> None:
    request = dataclasses.replace(image_request("a"), wire_version=7)
    data = bytearray(3)
    request = dataclasses.replace(request, attachments=(dataclasses.replace(request.attachments[0], data=data),))
    frames = encode_request(request)
    assert frames[-1] is data
    assert json.loads(payload_of(bytes(frames[0])))["wire_version"] == 7


# ---------------------------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------------------------


def test_numpy_round_trip_and_strided_arrays_are_packed() -> None:
    rng = np.random.default_rng(0)
    big = rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    view = big[1:4, 2:6]  # not contiguous: rows are 21 bytes apart, not 12
    att = image_attachment("p", view)
    assert (att.kind, att.id, att.width, att.height) == ("image", "p", 4, 3)
    assert att.data == b"".join(bytes(big[row, 2:6].reshape(-1)) for row in range(1, 4))
    assert np.array_equal(attachment_array(att), view)
    assert np.array_equal(np.asarray(attachment_image(att)), view)


def test_pil_images_drop_alpha_and_convert_modes() -> None:
    rgba = Image.new("RGBA", (3, 2), (10, 20, 30, 0))
    att = image_attachment("p", rgba)
    assert (att.width, att.height) == (3, 2)
    assert att.data == bytes([10, 20, 30]) * 6
    gray = image_attachment("g", Image.new("L", (1, 1), 77))
    assert gray.data == bytes([77, 77, 77])


@pytest.mark.parametrize("shape", [(1, 65537, 3), (65537, 1, 3), (0, 0, 3), (0, 4, 3), (4, 0, 3)])
def test_image_axes_are_bounded_before_anything_is_copied(shape: tuple[int, int, int]) -> None:
    with pytest.raises(WireError) as info:
        image_attachment("p", np.zeros(shape, dtype=np.uint8))
    assert info.value.code is ErrorCode.INVALID_REQUEST


def test_image_axis_bound_is_inclusive_and_checked_before_multiplying() -> None:
    assert image_attachment("p", np.zeros((1, 65536, 3), dtype=np.uint8)).width == 65536
    assert image_byte_length(9504, 7344) == 9504 * 7344 * 3  # pdf-spec TestImageAttachmentBounds: accepted
    assert image_byte_length(65536, 65536) == 3 << 32
    for width, height in ((65537, 1), (1, 65537), (0, 1), (1, 0), (-1, -1), (1 << 40, 1 << 40)):
        with pytest.raises(WireError):
            image_byte_length(width, height)


@pytest.mark.parametrize(
    "array",
    [np.zeros((2, 2), dtype=np.uint8), np.zeros((2, 2, 4), dtype=np.uint8), np.zeros((2, 2, 3), dtype=np.float32)],
)
def test_image_helper_refuses_arrays_that_are_not_hxwx3_uint8(array: np.ndarray) -> None:
    with pytest.raises(ValueError):
        image_attachment("p", array)


@pytest.mark.parametrize(
    "att",
    [
        Attachment(kind="audio", id="a", width=1, height=1, data=bytes(3)),
        image(data=bytes(11)),
        image(data=bytes(13)),
        image(data=None),
        image(width=0, data=b""),
        image(width=1 << 20, height=1 << 20, data=bytes(3)),
    ],
)
def test_attachment_to_pixels_validates_first(att: Attachment) -> None:
    for convert in (attachment_array, attachment_image):
        with pytest.raises(WireError) as info:
            convert(att)
        assert info.value.code is ErrorCode.INVALID_REQUEST and not info.value.fatal


def test_page_request_defaults_and_max_tokens_omission() -> None:
    pixels = np.zeros((1, 1, 3), dtype=np.uint8)
    request = page_request("page-3", pixels)
    assert request.max_tokens == DEFAULT_MAX_TOKENS and request.temperature == 0.0
    assert request.messages[0].content == (ImageBlock("page-3"), TextBlock(DEFAULT_PROMPT))
    assert request.attachments[0].kind == AttachmentKind.IMAGE and request.attachments[0].id == "page-3"
    for bound in (0, -5):
        payload = request_to_json(page_request("p", pixels, max_tokens=bound, temperature=None))
        assert b"max_tokens" not in payload and b"temperature" not in payload

"""Property tests of modelhost.wire.codec: round trips, and hostile bytes that must only ever produce WireError.

Example counts are modest (the machine is shared); each property still runs a few hundred distinct inputs per run
and hypothesis keeps the failures it finds in its database.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelhost.wire.codec import (
    MAX_HEADER_LEN,
    MAX_VARINT_BYTES,
    Attachment,
    Done,
    Error,
    ErrorCode,
    FrameDecoder,
    FrameDelta,
    FrameHeader,
    FrameType,
    ImageBlock,
    Message,
    OtherBlock,
    Request,
    ResponseEvent,
    Role,
    StopReason,
    TextBlock,
    WireError,
    decode_request_json,
    decode_response,
    decode_uvarint,
    encode_request,
    encode_response,
    encode_uvarint,
    go_float,
    parse_frame_header,
    request_to_json,
    response_to_json,
    validate_request,
)

from .test_codec import SESSION_READERS, read_responses, read_session_decoder, read_session_sync

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Drawing a whole request or a nested JSON value costs ~10-15 ms on this machine class, more than checking it; fewer
# examples keep the file fast.
FUZZ_HEAVY = settings(FUZZ, max_examples=80)
U32 = (1 << 32) - 1

# Text that exercises every escaping rule: Go's HTML escapes, JS line separators, controls, quotes, astral chars.
texts = st.text(
    st.one_of(st.characters(codec="utf-8"), st.sampled_from('<>&\u2028\u2029"\\/\x00\x01\x1f\x7f\n\t\b\f😀é')),
    max_size=24,
)
ids = st.text(max_size=8)
u32 = st.integers(0, U32)
finite = st.floats(allow_nan=False, allow_infinity=False)
WIRE_V1 = st.just(1)


@st.composite
def attachments(draw: st.DrawFn, attachment_id: str) -> Attachment:
    buffer = draw(st.sampled_from([bytes, bytearray]))
    if draw(st.booleans()):
        width, height = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        data = draw(st.binary(min_size=width * height * 3, max_size=width * height * 3))
        return Attachment(kind="image", id=attachment_id, width=width, height=height, data=buffer(data))
    kind = draw(st.one_of(st.sampled_from(["audio", "video"]), st.text(max_size=6).filter(lambda k: k != "image")))
    return Attachment(kind=kind, id=attachment_id, data=buffer(draw(st.binary(min_size=1, max_size=40))))


blocks = st.one_of(
    texts.map(TextBlock),
    ids.map(ImageBlock),
    st.builds(OtherBlock, st.sampled_from(["audio", "video"]), ids),
    st.builds(OtherBlock, st.text(max_size=10).filter(lambda t: t not in {"text", "image", "audio", "video"})),
)
messages = st.builds(Message, st.sampled_from(list(Role)), st.lists(blocks, max_size=4).map(tuple))


@st.composite
def requests(draw: st.DrawFn, wire_version: st.SearchStrategy[int] = WIRE_V1) -> Request:
    attachment_ids = draw(st.lists(ids, unique=True, max_size=3))
    return Request(
        wire_version=draw(wire_version),
        id=draw(ids),
        messages=tuple(draw(st.lists(messages, max_size=3))),
        attachments=tuple(draw(attachments(i)) for i in attachment_ids),
        max_tokens=draw(st.none() | u32),
        temperature=draw(st.none() | finite),
        top_p=draw(st.none() | finite),
        top_k=draw(st.none() | u32),
        stream=draw(st.none() | st.booleans()),
        thinking=draw(st.none() | st.booleans()),
    )


events: st.SearchStrategy[ResponseEvent] = st.one_of(
    st.builds(FrameDelta, ids, texts),
    st.builds(Done, ids, u32, u32, st.sampled_from(list(StopReason)) | texts, texts),
    st.builds(Error, ids, st.sampled_from(list(ErrorCode)) | texts, texts),
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | finite | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def metadata(request: Request) -> Request:
    """The request as its JSON carries it: attachment bytes ride in blobs, not in the JSON."""
    return dataclasses.replace(
        request, attachments=tuple(dataclasses.replace(a, data=None) for a in request.attachments)
    )


def chunked(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out, pos = [], 0
    while pos < len(data):
        step = rng.randint(1, 17)
        out.append(data[pos : pos + step])
        pos += step
    return out


# ---------------------------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------------------------


@FUZZ_HEAVY
@given(requests(wire_version=u32))
def test_request_json_round_trips(request: Request) -> None:
    payload = request_to_json(request)
    assert decode_request_json(payload, check_version=False) == metadata(request)
    # Another peer's spelling of the same object (sorted keys, ASCII escapes, whitespace) means the same request.
    respelled = json.dumps(json.loads(payload), sort_keys=True, ensure_ascii=True, indent=1).encode()
    assert decode_request_json(respelled, check_version=False) == metadata(request)


@FUZZ_HEAVY
@given(requests(), st.integers(0, 2**32))
def test_whole_request_streams_round_trip_through_both_readers(request: Request, seed: int) -> None:
    data = b"".join(encode_request(request)) * 2  # two requests back to back on one connection
    assert read_session_sync(data) == [request, request]
    decoder_frames = []
    decoder = FrameDecoder()
    for chunk in chunked(data, seed):
        decoder_frames += decoder.feed(chunk)
    decoder.eof()
    assert read_session_decoder(data, chunk=1 + seed % 50) == [request, request]
    assert sum(len(f.payload) for f in decoder_frames) < len(data)


@FUZZ
@given(events)
def test_responses_round_trip_in_go_and_rust_spellings(event: ResponseEvent) -> None:
    assert read_responses(encode_response(event)) == [event]
    obj = json.loads(response_to_json(event))
    rust = {"type": obj.pop("type"), **obj}  # serde's internally tagged enums put "type" first, no HTML escaping
    assert decode_response(json.dumps(rust, ensure_ascii=False, separators=(",", ":")).encode()) == event


@FUZZ
@given(finite)
def test_go_float_spelling_round_trips_and_follows_gos_format_choice(value: float) -> None:
    spelled = go_float(value)
    assert float(spelled) == value and math.copysign(1, float(spelled)) == math.copysign(1, value)
    exponent_form = "e" in spelled
    assert exponent_form == (value != 0 and not 1e-6 <= abs(value) < 1e21)
    assert not spelled.endswith(".0") and "e-0" not in spelled and "e+0" not in spelled and "E" not in spelled

    # Shortest digits: the same significant digits Python's repr chose.
    def significant(text: str) -> str:
        return text.lstrip("-").split("e")[0].replace(".", "").strip("0")

    assert significant(spelled) == significant(repr(abs(value)))


@FUZZ
@given(st.integers(0, (1 << 35) - 1))
def test_varints_round_trip_minimal_and_padded(value: int) -> None:
    raw = encode_uvarint(value)
    assert len(raw) == max(1, math.ceil(value.bit_length() / 7))
    assert decode_uvarint(raw) == (value, len(raw))
    padded = bytes(b | 0x80 for b in raw) + b"\x80" * (MAX_VARINT_BYTES - len(raw) - 1) + b"\x00"
    if len(padded) <= MAX_VARINT_BYTES:
        assert decode_uvarint(padded) == (value, len(padded))


# ---------------------------------------------------------------------------------------------------------------
# Hostile input: only WireError, bounded, terminating
# ---------------------------------------------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=12), st.integers(0, 1 << 27))
def test_frame_header_parser_resolves_within_six_bytes_and_respects_the_cap(data: bytes, cap: int) -> None:
    try:
        header = parse_frame_header(data, max_payload=cap)
    except WireError as exc:
        assert exc.fatal and exc.code in {ErrorCode.INVALID_REQUEST, ErrorCode.FRAME_TOO_LARGE}
        return
    if header is None:
        assert len(data) < MAX_HEADER_LEN  # "need more" never outlasts the longest possible header
        return
    assert isinstance(header, FrameHeader)
    assert 2 <= header.header_len <= MAX_HEADER_LEN
    assert 0 <= header.payload_len <= cap
    assert header.frame_type in (FrameType.JSON, FrameType.BLOB)
    assert parse_frame_header(data[: header.header_len], max_payload=cap) == header


@FUZZ
@given(st.binary(max_size=600), st.integers(0, 64), st.integers(0, 2**32))
def test_frame_decoder_on_arbitrary_bytes(data: bytes, cap: int, seed: int) -> None:
    decoder = FrameDecoder(max_payload=cap)
    frames = []
    try:
        for chunk in chunked(data, seed):
            frames += decoder.feed(chunk)
        decoder.eof()
    except WireError as exc:
        assert exc.fatal
    assert all(len(f.payload) <= cap for f in frames)
    assert sum(len(f.payload) + 2 for f in frames) <= len(data)


def outcome(read: object, data: bytes) -> object:
    try:
        return read(data)  # type: ignore[operator]
    except WireError as exc:
        assert exc.fatal
        return exc.code


@FUZZ
@given(st.binary(max_size=300))
def test_session_readers_on_arbitrary_bytes_only_raise_wire_errors_and_agree(data: bytes) -> None:
    results = [outcome(read, data) for read in SESSION_READERS]
    assert results[0] == results[1]


@FUZZ_HEAVY
@given(requests(), st.data())
def test_mutated_request_streams_only_raise_wire_errors_and_readers_agree(
    request: Request, data: st.DataObject
) -> None:
    stream = bytearray(b"".join(encode_request(request)))
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(stream)))
        action = data.draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        if action == "flip" and pos < len(stream):
            stream[pos] ^= data.draw(st.integers(1, 255))
        elif action == "insert":
            stream[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
        elif action == "delete":
            del stream[pos : pos + data.draw(st.integers(1, 4))]
        else:
            del stream[pos:]
    raw = bytes(stream)
    results = [outcome(read, raw) for read in SESSION_READERS]
    assert results[0] == results[1]
    # Whatever decoded is judged by validate_request without anything but a non-fatal WireError.
    if isinstance(results[0], list):
        for decoded in results[0]:
            try:
                validate_request(decoded)
            except WireError as exc:
                assert not exc.fatal


REQUEST_FIELDS = ["wire_version", "id", "messages", "attachments", "max_tokens", "temperature", "top_p", "top_k"]
REQUEST_FIELDS += ["stream", "thinking", "content", "role", "kind", "width", "type", "text", "attachment_id"]


@FUZZ_HEAVY
@given(st.sampled_from(REQUEST_FIELDS), json_values, st.sampled_from(["top", "message", "block", "attachment"]))
def test_arbitrary_json_in_any_request_field_yields_a_request_or_a_wire_error(
    key: str, value: object, where: str
) -> None:
    obj: dict[str, object] = {
        "wire_version": 1,
        "messages": [{"role": "user", "content": [{"type": "image", "attachment_id": "a"}]}],
        "attachments": [{"kind": "image", "id": "a", "width": 1, "height": 1}],
    }
    target = {
        "top": obj,
        "message": obj["messages"][0],  # type: ignore[index]
        "block": obj["messages"][0]["content"][0],  # type: ignore[index]
        "attachment": obj["attachments"][0],  # type: ignore[index]
    }[where]
    target[key] = value
    try:
        request = decode_request_json(json.dumps(obj).encode())
    except WireError as exc:
        assert exc.fatal
        return
    try:
        validate_request(request)
    except WireError as exc:
        assert not exc.fatal


@FUZZ_HEAVY
@given(
    st.sampled_from(["id", "type", "block", "delta", "usage", "input_tokens", "stop_reason", "backend", "code"]),
    json_values,
    st.sampled_from(["frame", "done", "error"]),
)
def test_arbitrary_json_in_any_response_field_yields_an_event_none_or_a_wire_error(
    key: str, value: object, kind: str
) -> None:
    obj: dict[str, object] = {"id": "r", "type": kind, "block": {"type": "text", "delta": "x"}, "usage": {}}
    target = obj["block"] if key == "delta" else obj["usage"] if key == "input_tokens" else obj
    target[key] = value  # type: ignore[index]
    try:
        decode_response(json.dumps(obj).encode())
    except WireError as exc:
        assert exc.fatal and exc.code is ErrorCode.INVALID_REQUEST


@FUZZ
@given(st.binary(max_size=200))
def test_arbitrary_payloads_decode_to_a_value_or_a_wire_error(payload: bytes) -> None:
    for decode in (decode_request_json, decode_response):
        try:
            decode(payload)
        except WireError as exc:
            assert exc.fatal


@FUZZ_HEAVY
@given(st.integers(0, 8) | st.integers(65530, 65540), st.integers(0, 4), st.booleans())
def test_image_bound_is_the_same_for_sender_and_receiver(long_axis: int, short_axis: int, swap: bool) -> None:
    width, height = (short_axis, long_axis) if swap else (long_axis, short_axis)
    fits = 1 <= width <= 1 << 16 and 1 <= height <= 1 << 16
    request = Request(
        messages=(Message(Role.USER, (ImageBlock("a"),)),),
        attachments=(
            Attachment(kind="image", id="a", width=width, height=height, data=bytes(width * height * 3) or b"x"),
        ),
    )
    try:
        frames = encode_request(request)
    except WireError as exc:
        assert not fits and exc.code is ErrorCode.INVALID_REQUEST
        # What the sender refuses, the receiver refuses too (given the same metadata and bytes).
        try:
            validate_request(request)
        except WireError as receiver_exc:
            assert not receiver_exc.fatal
        else:
            raise AssertionError("receiver accepted what the sender refused") from None
        return
    assert fits
    [back] = read_session_sync(b"".join(frames))
    validate_request(back)

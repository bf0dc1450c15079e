"""Framing (spec §3): LEB128 length varints, frame headers, whole frames, and an incremental frame splitter.

Every length is checked against its cap as soon as the varint ends, before a payload buffer is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelhost.wire.codec.constants import MAX_FRAME, MAX_VARINT_BYTES, Buffer, ErrorCode, FrameType
from modelhost.wire.codec.errors import WireError, invalid, truncated_frame

__all__ = [
    "Frame",
    "FrameDecoder",
    "FrameHeader",
    "decode_uvarint",
    "encode_frame",
    "encode_uvarint",
    "frame_header",
    "parse_frame_header",
]


def encode_uvarint(value: int) -> bytes:
    """Unsigned LEB128, minimal length: 7 bits per byte, low group first, high bit set on all but the last byte."""
    if value < 0:
        raise ValueError(f"uvarint cannot encode a negative number: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_uvarint(buf: Buffer, offset: int = 0) -> tuple[int, int] | None:
    """Read a LEB128 varint at ``buf[offset:]``: ``(value, offset_after)``, or ``None`` if more bytes are needed.

    At most MAX_VARINT_BYTES bytes are read: a 5th byte that still has its continuation bit set raises
    ``WireError(invalid_request, fatal)``, so no input makes this wait forever. Non-minimal encodings (``80 00``
    for 0) are accepted, as both upstream readers accept them.
    """
    value = 0
    for i in range(MAX_VARINT_BYTES):
        pos = offset + i
        if pos >= len(buf):
            return None
        byte = buf[pos]
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return value, pos + 1
    raise invalid(f"malformed frame: length varint longer than {MAX_VARINT_BYTES} bytes")


@dataclass(frozen=True, slots=True)
class FrameHeader:
    """A parsed frame header: the payload that follows is exactly ``payload_len`` bytes (already bounded)."""

    payload_len: int
    frame_type: FrameType
    header_len: int
    """Bytes the header occupied (varint + type byte): where the payload starts in the buffer that was parsed."""


def parse_frame_header(
    buf: Buffer, *, max_payload: int = MAX_FRAME, expect: FrameType | None = None
) -> FrameHeader | None:
    """Parse the frame header at the start of ``buf`` (the bytes read so far; extra bytes after it are ignored).

    Returns ``None`` when more bytes are needed (only possible while ``len(buf) < MAX_HEADER_LEN``), a
    :class:`FrameHeader` once complete, or raises a fatal :class:`WireError`:

    - varint longer than 5 bytes: invalid_request;
    - declared length over ``max_payload``: frame_too_large, raised as soon as the varint ends, *before* the type
      byte is read and before anything is allocated (so a caller may then allocate ``payload_len`` bytes);
    - unknown type byte: invalid_request;
    - ``expect`` given and the type differs (a BLOB where a request or a response must be JSON): invalid_request.

    Reading byte by byte, a caller appends one byte and calls again until this returns a header; reading from a
    buffer, it calls once and slices the payload from ``header_len``.
    """
    got = decode_uvarint(buf)
    if got is None:
        return None
    payload_len, end = got
    if payload_len > max_payload:
        raise WireError(
            ErrorCode.FRAME_TOO_LARGE,
            f"declared frame length {payload_len} exceeds the {max_payload} byte cap",
            fatal=True,
        )
    if end >= len(buf):
        return None
    type_byte = buf[end]
    if type_byte not in (FrameType.JSON, FrameType.BLOB):
        raise invalid(f"malformed frame: unknown frame type 0x{type_byte:02x}")
    frame_type = FrameType(type_byte)
    if expect is not None and frame_type is not expect:
        raise invalid(f"malformed frame: expected a {expect.name} frame, got {frame_type.name}")
    return FrameHeader(payload_len, frame_type, end + 1)


def frame_header(frame_type: FrameType, payload_len: int) -> bytes:
    """The header bytes for a frame of ``payload_len`` bytes; write the payload after it without copying it.

    Refuses (WireError frame_too_large, not fatal: nothing was written) a payload over MAX_FRAME, since the peer
    would refuse it and close; ``== MAX_FRAME`` is allowed, as upstream allows it.
    """
    if payload_len > MAX_FRAME:
        raise WireError(
            ErrorCode.FRAME_TOO_LARGE,
            f"frame payload of {payload_len} bytes exceeds the {MAX_FRAME} byte cap",
            fatal=False,
        )
    return encode_uvarint(payload_len) + bytes((FrameType(frame_type),))


def encode_frame(frame_type: FrameType, payload: Buffer) -> bytes:
    """One whole frame: header then payload (a copy; for large blobs write ``frame_header`` and the buffer)."""
    return frame_header(frame_type, len(payload)) + payload


@dataclass(frozen=True, slots=True)
class Frame:
    """One complete frame as :class:`FrameDecoder` delivers it."""

    frame_type: FrameType
    payload: bytes


class FrameDecoder:
    """Incremental frame splitter: feed it bytes as they arrive, get whole frames back.

    For a peer that receives small frames into its own buffers (the client reading responses, a protocol-based
    reader, tests); a server receiving blobs should parse headers itself and ``recv_into`` a buffer of exactly
    ``payload_len``. Memory held grows with the bytes actually received, never beyond the declared (bounded) length,
    so a peer that declares 64 MiB and sends two bytes costs two bytes. After a WireError the decoder stays failed:
    the stream position is lost and there is nothing valid left to decode.
    """

    def __init__(self, *, max_payload: int = MAX_FRAME, expect: FrameType | None = None) -> None:
        self._max_payload = max_payload
        self._expect = expect
        self._head = bytearray()
        self._header: FrameHeader | None = None
        self._chunks: list[bytes] = []
        self._have = 0
        self._failed: WireError | None = None

    @property
    def at_boundary(self) -> bool:
        """True when no partial frame is buffered: an EOF now is a clean close."""
        return self._header is None and not self._head

    def feed(self, data: Buffer) -> list[Frame]:
        """Consume ``data``; return the frames it completed, in order.

        A bad header raises a fatal WireError; if frames were completed before it in the same ``data``, they are
        returned first and the error is raised by the next ``feed`` or ``eof``.
        """
        if self._failed is not None:
            raise self._failed
        frames: list[Frame] = []
        view = memoryview(data).cast("B")
        pos = 0
        try:
            while True:
                if self._header is None:
                    if pos >= len(view):
                        break
                    # One byte at a time: a header is at most MAX_HEADER_LEN bytes, and stopping exactly where it
                    # ends is what lets the cap be checked before the payload is buffered.
                    self._head.append(view[pos])
                    pos += 1
                    self._header = parse_frame_header(self._head, max_payload=self._max_payload, expect=self._expect)
                    if self._header is None:
                        continue
                    self._head.clear()
                want = self._header.payload_len - self._have
                take = min(want, len(view) - pos)
                if take:
                    self._chunks.append(bytes(view[pos : pos + take]))
                    self._have += take
                    pos += take
                if self._have < self._header.payload_len:
                    break
                frames.append(Frame(self._header.frame_type, b"".join(self._chunks)))
                self._header, self._chunks, self._have = None, [], 0
        except WireError as exc:
            self._failed = exc
            if frames:
                # Deliver what came before the bad header first: its consumer may have its own, earlier error to
                # report (a BLOB where a request was due), and errors must surface in stream order.
                return frames
            raise
        return frames

    def eof(self) -> None:
        """Report end of stream: fine between frames, a fatal truncated-frame WireError inside one."""
        if self._failed is not None:
            raise self._failed
        if self._head:
            raise truncated_frame(f"EOF inside a frame header after {len(self._head)} byte(s)")
        if self._header is not None:
            raise truncated_frame(f"EOF after {self._have} of {self._header.payload_len} payload bytes")

"""Codec of the local wire: inferd generation protocol v2 (wire_version 1), byte-compatible with pdf-spec's Go ``ipc``.

This module is the only place that knows what a byte of the wire means. It does no I/O: a server or client reads
and writes the bytes however it likes (asyncio streams, a blocking socket, a test's ``bytes``) and asks this module
what they mean. Reference: ``docs/wire.md`` in the repository (its section numbers are cited as "spec §N").

Framing (spec §3)::

    [payload_len: unsigned LEB128 varint][frame_type: 1 byte][payload: exactly payload_len bytes]

A request is one JSON frame (the request, attachment *metadata* only), then for each declared attachment one JSON
descriptor frame ``{"type":"attachment_blob","attachment_id":..,"len":..}`` immediately followed by one BLOB frame
with the raw bytes. Responses are JSON frames only: zero or more ``frame`` deltas, then exactly one ``done`` or
``error``.

How a server uses it (sans-IO; ``read_exactly``/``read_into`` stand for whatever the transport offers)::

    reader = RequestReader()
    while not reader.complete:
        head = bytearray()
        while (header := parse_frame_header(head)) is None:   # at most MAX_HEADER_LEN bytes
            head += read_exactly(1)                            # on EOF: reader.eof(mid_frame=bool(head))
        buf = bytearray(reader.accept_header(header))          # bounded: checked before this allocation
        read_into(buf)                                         # on a short read: reader.eof(mid_frame=True)
        reader.accept_payload(buf)
    request = reader.request                 # WireError so far: fatal -> error frame, then close
    validate_request(request)                # WireError here: not fatal -> error frame, keep the connection
    ... write encode_response(FrameDelta(...)), then encode_response(Done(...)) ...

``reader.eof`` returns quietly when nothing of a request had arrived (the client closed between requests: end the
session) and raises a truncation error otherwise. On any ``WireError`` ``e``: write ``encode_response(e.to_event())``,
then close if ``e.fatal``.

Output JSON is byte-identical to Go's ``encoding/json`` on pdf-spec's structs (spec §7, §9): compact, struct key
order, ``<`` ``>`` ``&`` U+2028 U+2029 escaped, floats spelled as Go spells them. Input JSON is accepted in any key
order and any escaping (so the Rust daemon's ``"type"``-first responses decode too) but is strict on types.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeAlias

from modelhost.inference import images

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from PIL import Image as PILImage

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_PROMPT",
    "MAX_ATTACHMENTS",
    "MAX_ATTACHMENT_BYTES",
    "MAX_FRAME",
    "MAX_HEADER_LEN",
    "MAX_ID_CHARS",
    "MAX_IMAGE_AXIS",
    "MAX_VARINT_BYTES",
    "WIRE_VERSION",
    "Attachment",
    "AttachmentKind",
    "BlobDescriptor",
    "Buffer",
    "ContentBlock",
    "Done",
    "Error",
    "ErrorCode",
    "Frame",
    "FrameDecoder",
    "FrameDelta",
    "FrameHeader",
    "FrameType",
    "ImageBlock",
    "Message",
    "OtherBlock",
    "Request",
    "RequestReader",
    "ResponseEvent",
    "Role",
    "StopReason",
    "TextBlock",
    "WireError",
    "attachment_array",
    "attachment_image",
    "decode_blob_descriptor",
    "decode_request_json",
    "decode_response",
    "decode_uvarint",
    "descriptor_to_json",
    "encode_frame",
    "encode_request",
    "encode_response",
    "encode_uvarint",
    "frame_header",
    "go_float",
    "go_json",
    "image_attachment",
    "image_byte_length",
    "is_terminal",
    "page_request",
    "parse_frame_header",
    "request_to_json",
    "response_to_json",
    "truncated_frame",
    "validate_request",
]

# --------------------------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------------------------

# In-band version, carried by every request and checked before anything else in it is trusted. A mismatch is then
# a named error (wire_version_unsupported) on the first request instead of a hang or a misparse of a future shape.
# 1 is inferd's current generation wire; this moves only together with upstream, because moving it alone makes us
# incompatible with every daemon and client that speaks 1.
WIRE_VERSION: Final = 1

# Bounds one frame's payload at 64 MiB (inferd and pdf-spec agree). Sized for the largest thing that rides in one
# frame, a raster page: 300 DPI US Letter as RGB is 25 MB, so the cap is ~2.5x that and far below what threatens a
# process. It is checked against the *declared* length, before a buffer is allocated; that is what makes it a bound
# rather than a check: a peer cannot make us allocate 4 GiB by sending five bytes.
MAX_FRAME: Final = 64 << 20

# A varint of 64 MiB needs 27 bits = 4 groups of 7; the 5th byte is the hard stop (inferd's Rust reader). Without a
# stop, a stream of 0x80 bytes is an endless length that a reader would consume forever (pdf-spec's malformed corpus
# has twelve of them). Go readers accept up to 10 bytes; stopping at 5 is stricter and still reads every legal
# header.
MAX_VARINT_BYTES: Final = 5

# Longest possible frame header: the longest varint plus the type byte. A server reading a header byte by byte
# knows it is done, one way or the other, after at most this many bytes.
MAX_HEADER_LEN: Final = MAX_VARINT_BYTES + 1

# Bounds an image's width and height on both sides of the wire (pdf-spec MaxImageAxis): the contract's one images
# bound (modelhost.inference.images says why it is checked before width*height*3 is computed), so every image the
# wire admits, every backend admits. The check is the same at both ends so that no sender can produce what a
# receiver must refuse.
MAX_IMAGE_AXIS: Final = images.MAX_IMAGE_AXIS

# Per-request attachment bounds (inferd protocol-v2 §3.7, enforced before any blob is read; pdf-spec has none).
# 32 attachments: a page request carries one, a multi-image chat a handful; the count is checked before reading so
# a request cannot declare a million descriptors and keep the reader busy. Over the count is invalid_request.
MAX_ATTACHMENTS: Final = 32
# 128 MiB summed over the declared descriptor lens: each blob is already under MAX_FRAME, but 32 of them would be
# 2 GiB held at once for one request. Charged per descriptor, before its blob is read; over it is frame_too_large.
MAX_ATTACHMENT_BYTES: Final = 128 << 20

# Longest request or attachment id, in characters. inferd's ids are UUIDs (36 characters) and pdf-spec's are page
# numbers: 256 leaves room for any naming scheme. Without it a 1 MB id was echoed in every delta frame, a megabyte
# written per token (80 s for one short answer). Over it is invalid_request, answered with no id echoed.
MAX_ID_CHARS: Final = 256

# pdf-spec's ocr.PromptPage: the instruction that makes granite-docling emit DocTags for a whole page.
DEFAULT_PROMPT: Final = "Convert this page to docling."
# pdf-spec's CLI default -max-tokens: a dense page in DocTags runs to thousands of tokens, and a bound that is too
# small truncates tables mid-row (the dominant failure on dense pages).
DEFAULT_MAX_TOKENS: Final = 8192

_U32_MAX: Final = (1 << 32) - 1
_U64_MAX: Final = (1 << 64) - 1

Buffer: TypeAlias = bytes | bytearray | memoryview
"""Any bytes-like payload this codec accepts: a server hands over the very buffer it ``recv_into``-ed."""


class FrameType(enum.IntEnum):
    """The frame type byte. Any other value is a malformed frame: the stream cannot be resynced, so the peer closes."""

    JSON = 0x01
    BLOB = 0x02


class ErrorCode(enum.StrEnum):
    """Error codes of the ``error`` response (inferd ErrorCodeV2, snake_case).

    An enumeration, not free text, because callers branch on it: "retry later" (queue_full, backend_unavailable)
    versus "this request is wrong" (invalid_request, ...). Parsing message strings for that is how brittle retry
    loops get written.
    """

    QUEUE_FULL = "queue_full"
    BACKEND_UNAVAILABLE = "backend_unavailable"
    INVALID_REQUEST = "invalid_request"
    FRAME_TOO_LARGE = "frame_too_large"
    INTERNAL = "internal"
    ATTACHMENT_UNSUPPORTED = "attachment_unsupported"
    TOOL_CALL_MALFORMED = "tool_call_malformed"
    WIRE_VERSION_UNSUPPORTED = "wire_version_unsupported"


class StopReason(enum.StrEnum):
    """Why generation stopped (``done.stop_reason``), a closed set in inferd's Rust decoder.

    Clients branch on max_tokens in particular: pdf-spec treats it as "the page is truncated", keeps the text and
    reports an error as well.
    """

    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    TOOL_USE = "tool_use"
    STOP_SEQUENCE = "stop_sequence"
    CANCELLED = "cancelled"
    ERROR = "error"


class Role(enum.StrEnum):
    """Message roles. Exact lowercase (inferd's Rust enum refuses ``"User"``); there is no ``tool`` role."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


class AttachmentKind(enum.StrEnum):
    """Attachment kinds the protocol defines. Any other ``kind`` string is kept as is and refused semantically."""

    IMAGE = "image"
    AUDIO = "audio"
    VIDEO = "video"


_ROLES: Final = frozenset(r.value for r in Role)
_KINDS: Final = frozenset(k.value for k in AttachmentKind)
_DESCRIPTOR_TYPE: Final = "attachment_blob"
_RESP_FRAME: Final = "frame"
_RESP_DONE: Final = "done"
_RESP_ERROR: Final = "error"

# --------------------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------------------


class WireError(Exception):
    """A request, frame or value the wire cannot carry, with the error code to answer it with.

    ``fatal`` tells a server what to do with the connection after writing the error frame (spec §6):

    - fatal: a protocol violation (bad framing, undecodable JSON, wrong version, descriptor/blob mismatch). The
      stream position, or the meaning of what follows, is no longer known, so the only safe move is to close; a
      server that tried to continue would read the middle of someone's payload as a frame header.
    - not fatal: a well-framed request that is semantically wrong (what inferd's ``resolve()`` refuses). Every byte
      of it has been consumed, so the connection stays usable for the next request.

    ``request_id`` is the id to echo on the error frame: the request's id once it was parsed, ``""`` before.
    """

    def __init__(self, code: ErrorCode, message: str, *, fatal: bool, request_id: str = "") -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.fatal = fatal
        self.request_id = request_id

    def to_event(self) -> Error:
        """The ``error`` response that reports this failure to the peer."""
        return Error(self.request_id, self.code, self.message)


def _invalid(message: str, *, fatal: bool = True) -> WireError:
    return WireError(ErrorCode.INVALID_REQUEST, message, fatal=fatal)


def truncated_frame(detail: str) -> WireError:
    """The error for an EOF inside a frame (mid-varint, before the type byte, or mid-payload).

    EOF *between* frames is a clean close and is not an error; EOF inside one means the peer died or lied about a
    length, which is worth telling apart ("the client went away" versus "the client was killed mid-page").
    """
    return _invalid(f"truncated frame: {detail}")


# --------------------------------------------------------------------------------------------------------------
# Varints and frame headers
# --------------------------------------------------------------------------------------------------------------


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
    raise _invalid(f"malformed frame: length varint longer than {MAX_VARINT_BYTES} bytes")


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
        raise _invalid(f"malformed frame: unknown frame type 0x{type_byte:02x}")
    frame_type = FrameType(type_byte)
    if expect is not None and frame_type is not expect:
        raise _invalid(f"malformed frame: expected a {expect.name} frame, got {frame_type.name}")
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


# --------------------------------------------------------------------------------------------------------------
# Go-compatible JSON encoding (spec §7)
# --------------------------------------------------------------------------------------------------------------

# Go's encoding/json escapes these on top of what Python's json escapes: < > & so that JSON can sit inside HTML
# (DocTags is full of them, so every delta shows it), U+2028/U+2029 because they end lines in JavaScript. Lone
# surrogates cannot occur in a Go string; Go writes invalid UTF-8 as the escape \ufffd, and so do we, rather than
# failing to encode the frame at all.
_GO_ESCAPES: Final = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_GO_ESCAPE_RE: Final = re.compile("[<>&\u2028\u2029\ud800-\udfff]")
_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")


def _go_string(text: str) -> str:
    # json.dumps(ensure_ascii=False) already matches Go (>= 1.22) for " \\ \b \f \n \r \t, other C0 controls as
    # lowercase \u00xx, raw DEL and raw "/". Only Go's extra escapes remain; they can occur only inside strings.
    out = json.dumps(text, ensure_ascii=False)
    if _GO_ESCAPE_RE.search(out):
        out = _GO_ESCAPE_RE.sub(lambda m: _GO_ESCAPES.get(m.group(), "\\ufffd"), out)
    return out


def go_float(value: float) -> str:
    """Spell a float64 exactly as Go's encoding/json does.

    Shortest round-trip digits (the same digits Python's ``repr`` picks); plain decimal (``'f'``) when
    ``1e-6 <= |x| < 1e21``, so ``0`` not ``0.0`` and ``0.0000015``; otherwise exponent form with Go's cleanup
    (``1e-7``, ``1e+21``). ``-0.0`` is ``-0``. NaN and infinities raise ValueError, as in Go: JSON cannot spell them.
    """
    if not math.isfinite(value):
        raise ValueError(f"JSON cannot represent {value!r}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    # The value is 0.<digits> * 10**point; normalise digits to no leading or trailing zeros.
    point = len(whole) + (int(exp_text) if exp_text else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    if 1e-6 <= abs(value) < 1e21:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return sign + digits + "0" * (point - len(digits))
        return f"{sign}{digits[:point]}.{digits[point:]}"
    # Exponent form. |x| < 1e-6 means an exponent <= -7 and |x| >= 1e21 one >= 21, so Go's "at least two exponent
    # digits, then drop the 0 of e-0N" comes out as the plain exponent.
    exponent = point - 1
    frac_part = f".{digits[1:]}" if len(digits) > 1 else ""
    return f"{sign}{digits[0]}{frac_part}e{'-' if exponent < 0 else '+'}{abs(exponent)}"


def _go_encode(value: object, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(go_float(value))
    elif isinstance(value, str):
        out.append(_go_string(value))
    elif isinstance(value, Mapping):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            out.append(_go_string(str(key)))
            out.append(":")
            _go_encode(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _go_encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def go_json(value: object) -> bytes:
    """Serialise JSON-able Python values (dicts in insertion order) the way Go's ``json.Marshal`` would."""
    out: list[str] = []
    _go_encode(value, out)
    return "".join(out).encode("utf-8")


# --------------------------------------------------------------------------------------------------------------
# Request model
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextBlock:
    """A text content block (a prompt, or a replayed turn's text)."""

    text: str
    type: ClassVar[str] = "text"


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """A reference to an image attachment; the pixels travel in a BLOB frame, which keeps the request JSON loggable."""

    attachment_id: str
    type: ClassVar[str] = "image"


@dataclass(frozen=True, slots=True)
class OtherBlock:
    """A content block this codec parses but does not model (audio, video, tool_use, tool_result, unknown types).

    Kept rather than refused at decode time so the refusal is semantic (connection kept) and names the block:
    :func:`validate_request` turns it into attachment_unsupported or invalid_request. Only ``type`` and
    ``attachment_id`` survive; other fields (a tool call's ``input``) are dropped.
    """

    type: str
    attachment_id: str | None = None


ContentBlock: TypeAlias = TextBlock | ImageBlock | OtherBlock


@dataclass(frozen=True, slots=True)
class Message:
    """One turn: a role and its content blocks, in order (pdf-spec puts the image before the instruction)."""

    role: Role
    content: tuple[ContentBlock, ...]


@dataclass(frozen=True, slots=True)
class Attachment:
    """One attachment's metadata, and once its BLOB has arrived, its bytes.

    ``data`` is never serialised into the request JSON (no ``bytes`` key may appear there; pdf-spec tests for it):
    it rides in the BLOB frame after a descriptor keyed by ``id``. For an image it is ``width*height*3`` bytes of
    interleaved RGB, rows top to bottom, no alpha, no row padding. A server gets the buffer it received into,
    uncopied. ``repr`` leaves it out: a page is 25 MB.
    """

    kind: str
    id: str
    width: int = 0
    height: int = 0
    data: Buffer | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class BlobDescriptor:
    """The JSON frame that precedes each BLOB: which attachment it fills and how long it is."""

    attachment_id: str
    len: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One generation request (inferd RequestV2). Fields the protocol defines but this host does not use (tools,
    tool_choice, response_format) are ignored on decode, as unknown fields must be (spec §4.2)."""

    wire_version: int = WIRE_VERSION
    id: str = ""
    messages: tuple[Message, ...] = ()
    attachments: tuple[Attachment, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stream: bool | None = None
    thinking: bool | None = None

    def attachment(self, attachment_id: str) -> Attachment | None:
        """The first attachment with this id, or None."""
        for att in self.attachments:
            if att.id == attachment_id:
                return att
        return None


# --------------------------------------------------------------------------------------------------------------
# Response model
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FrameDelta:
    """A ``frame`` response carrying a text delta; concatenate the deltas for the answer."""

    id: str
    text: str


@dataclass(frozen=True, slots=True)
class Done:
    """The terminal success response. ``stop_reason`` is a :class:`StopReason` value; an unknown one is kept as text."""

    id: str
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str = StopReason.END_TURN
    backend: str = ""


@dataclass(frozen=True, slots=True)
class Error:
    """The terminal error response. ``code`` is an :class:`ErrorCode` value; an unknown one is kept as text."""

    id: str
    code: str
    message: str


ResponseEvent: TypeAlias = FrameDelta | Done | Error


def is_terminal(event: ResponseEvent) -> bool:
    """True for ``done`` and ``error``: exactly one of them ends each request's response stream."""
    return not isinstance(event, FrameDelta)


# --------------------------------------------------------------------------------------------------------------
# Encoding (Go bytes)
# --------------------------------------------------------------------------------------------------------------


def _block_json(block: ContentBlock) -> dict[str, object]:
    if isinstance(block, TextBlock):
        # Go's Block has text,omitempty and would drop "" entirely; inferd's Rust reader then fails "missing field
        # text". We always emit it: identical bytes for every non-empty text, parseable by every peer.
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "image", "attachment_id": block.attachment_id}
    out: dict[str, object] = {"type": block.type}
    if block.attachment_id is not None:
        out["attachment_id"] = block.attachment_id
    return out


def _attachment_json(att: Attachment) -> dict[str, object]:
    out: dict[str, object] = {"kind": att.kind, "id": att.id}
    # Images always carry both axes (Rust requires them); other kinds only when set, as Go's omitempty would.
    if att.kind == AttachmentKind.IMAGE or att.width:
        out["width"] = att.width
    if att.kind == AttachmentKind.IMAGE or att.height:
        out["height"] = att.height
    return out


def request_to_json(request: Request) -> bytes:
    """The request JSON payload, byte-identical to pdf-spec's Go ``Request`` where pdf-spec has the fields.

    Key order: pdf-spec's struct order ``wire_version, id, messages, attachments, max_tokens, temperature``, then the
    fields pdf-spec lacks in inferd's Go relative order (``top_p, top_k, stream``), then Rust-only ``thinking``.
    ``id`` and ``attachments`` are omitted when empty, optional numbers and flags when None (Go omitempty on
    pointers: a present 0 is written). ``messages`` is always written (``[]`` where Go would write ``null``).
    """
    obj: dict[str, object] = {"wire_version": request.wire_version}
    if request.id:
        obj["id"] = request.id
    obj["messages"] = [
        {"role": str(msg.role), "content": [_block_json(b) for b in msg.content]} for msg in request.messages
    ]
    if request.attachments:
        obj["attachments"] = [_attachment_json(a) for a in request.attachments]
    optional: tuple[tuple[str, object], ...] = (
        ("max_tokens", request.max_tokens),
        ("temperature", None if request.temperature is None else float(request.temperature)),
        ("top_p", None if request.top_p is None else float(request.top_p)),
        ("top_k", request.top_k),
        ("stream", request.stream),
        ("thinking", request.thinking),
    )
    for key, value in optional:
        if value is not None:
            obj[key] = value
    return go_json(obj)


def descriptor_to_json(descriptor: BlobDescriptor) -> bytes:
    """The descriptor JSON payload (same shape and order in every implementation)."""
    return go_json({"type": _DESCRIPTOR_TYPE, "attachment_id": descriptor.attachment_id, "len": descriptor.len})


def image_byte_length(width: int, height: int) -> int:
    """``width*height*3`` after checking both axes are in 1..MAX_IMAGE_AXIS (before multiplying).

    Raises WireError invalid_request (not fatal). Used by senders and receivers alike, so the check is the same at
    both ends.
    """
    for name, axis in (("width", width), ("height", height)):
        if not 1 <= axis <= MAX_IMAGE_AXIS:
            raise _invalid(f"image {name} {axis} is outside 1..{MAX_IMAGE_AXIS}", fatal=False)
    return width * height * 3


def _check_attachment_ids(attachments: Sequence[Attachment], *, fatal: bool) -> None:
    """The count bound and unique ids: without both a request's blob phase cannot be read (or takes forever)."""
    if len(attachments) > MAX_ATTACHMENTS:
        raise _invalid(f"{len(attachments)} attachments; at most {MAX_ATTACHMENTS} per request", fatal=fatal)
    seen: set[str] = set()
    for att in attachments:
        # Blobs are matched to attachments by id; with two attachments of one id the second blob cannot be placed.
        if att.id in seen:
            raise _invalid(f"duplicate attachment id {att.id!r}; blobs are matched by id", fatal=fatal)
        seen.add(att.id)


def _charge_blob(attachment_id: str, size: int, budget_left: int, *, fatal: bool) -> int:
    """Check one blob against the frame cap and the request's remaining byte budget; return the budget left."""
    if size > MAX_FRAME:
        raise WireError(
            ErrorCode.FRAME_TOO_LARGE,
            f"attachment {attachment_id!r} is {size} bytes, over the {MAX_FRAME} byte frame cap",
            fatal=fatal,
        )
    if size > budget_left:
        raise WireError(
            ErrorCode.FRAME_TOO_LARGE,
            f"attachments total more than the {MAX_ATTACHMENT_BYTES} byte per-request budget",
            fatal=fatal,
        )
    return budget_left - size


def encode_request(request: Request) -> list[Buffer]:
    """All frames of a request, as buffers for ``writelines`` (attachment bytes are not copied).

    The request frame, then for each attachment in declaration order a descriptor frame and a BLOB frame. Refuses
    (WireError, not fatal: nothing was sent) what a reader would have to refuse or would hang on: more than 32
    attachments, duplicate ids, an attachment without bytes, an image whose bytes are not width*height*3 or whose
    axes are out of bounds, a blob over 64 MiB or a total over 128 MiB. ``wire_version`` is sent as given, so a
    test can send a version the server must refuse.
    """
    _check_attachment_ids(request.attachments, fatal=False)
    blobs: list[tuple[str, Buffer]] = []
    budget_left = MAX_ATTACHMENT_BYTES
    for att in request.attachments:
        if att.data is None or len(att.data) == 0:
            # Upstream Go writers skip the blob of an empty attachment while every reader waits for one: a hang.
            raise _invalid(f"attachment {att.id!r} has no bytes; every declared attachment needs a blob", fatal=False)
        size = len(att.data)
        if att.kind == AttachmentKind.IMAGE and size != image_byte_length(att.width, att.height):
            raise _invalid(
                f"image {att.id!r} is {att.width}x{att.height} but carries {size} bytes, not width*height*3",
                fatal=False,
            )
        budget_left = _charge_blob(att.id, size, budget_left, fatal=False)
        blobs.append((att.id, att.data))
    out: list[Buffer] = [encode_frame(FrameType.JSON, request_to_json(request))]
    for attachment_id, data in blobs:
        out.append(encode_frame(FrameType.JSON, descriptor_to_json(BlobDescriptor(attachment_id, len(data)))))
        out.append(frame_header(FrameType.BLOB, len(data)))
        out.append(data)
    return out


def _u32_saturated(value: int, name: str) -> int:
    if value < 0:
        raise ValueError(f"{name} cannot be negative: {value}")
    return min(value, _U32_MAX)  # pdf-spec saturates its counters; a u32 overflow would make Rust peers fail


def response_to_json(event: ResponseEvent) -> bytes:
    """The response JSON payload in Go order (``id`` first), as pdf-spec's Go server writes it.

    Unlike Go's omitempty, ``delta``, ``backend``, ``stop_reason``, ``message`` and both usage fields are always
    written, because inferd's Rust client requires them and cannot parse a done frame without ``backend``.
    Token counts saturate at 2**32-1.
    """
    obj: dict[str, object]
    if isinstance(event, FrameDelta):
        obj = {"id": event.id, "type": _RESP_FRAME, "block": {"type": "text", "delta": event.text}}
    elif isinstance(event, Done):
        obj = {
            "id": event.id,
            "type": _RESP_DONE,
            "usage": {
                "input_tokens": _u32_saturated(event.input_tokens, "input_tokens"),
                "output_tokens": _u32_saturated(event.output_tokens, "output_tokens"),
            },
            "stop_reason": str(event.stop_reason),
            "backend": event.backend,
        }
    else:
        obj = {"id": event.id, "type": _RESP_ERROR, "code": str(event.code), "message": event.message}
    return go_json(obj)


def encode_response(event: ResponseEvent) -> bytes:
    """One whole response frame (JSON); write it and flush before producing the next, as upstream writers do."""
    return encode_frame(FrameType.JSON, response_to_json(event))


# --------------------------------------------------------------------------------------------------------------
# Decoding (strict on types, tolerant of order, escaping and Go's omitted fields)
# --------------------------------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise _invalid(f"decode: {name} is not JSON")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses to inf in Python; Go and Rust refuse it
        raise _invalid(f"decode: number {text} is out of float64 range")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Go keeps the last duplicate, Rust refuses: two readers of one payload must not see two different requests,
    # so we refuse like the normative Rust side.
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _invalid(f"decode: duplicate key {key!r:.40}")
        obj[key] = value
    return obj


def _loads_object(payload: Buffer, what: str) -> dict[str, Any]:
    """Strict JSON object decoding: UTF-8 only (no BOM, no UTF-16), no NaN/Infinity/overflowing numbers."""
    try:
        text = str(payload, "utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid(f"decode {what}: payload is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        obj = json.loads(
            text, parse_constant=_reject_constant, parse_float=_parse_float, object_pairs_hook=_no_duplicate_keys
        )
    except WireError:
        raise
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, int digit limit, nesting too deep
        raise _invalid(f"decode {what}: {exc}") from None
    if not isinstance(obj, dict):
        raise _invalid(f"decode {what}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _get(obj: Mapping[str, Any], key: str) -> Any:
    # A JSON null means "absent" for every field: Go leaves the zero value, Rust's Option reads None.
    return obj.get(key)


def _str(obj: Mapping[str, Any], key: str, where: str, *, default: str | None = "") -> str:
    value = _get(obj, key)
    if value is None:
        if default is None:
            raise _invalid(f"decode: {where}.{key} is missing")
        return default
    if type(value) is not str:
        raise _invalid(f"decode: {where}.{key} must be a string, got {type(value).__name__}")
    if _SURROGATE_RE.search(value):
        # Only a \\ud800-style escape gets here (the payload was valid UTF-8). Rust refuses it, and text with a lone
        # surrogate cannot be encoded to UTF-8 downstream (tokenizers, logs).
        raise _invalid(f"decode: {where}.{key} contains an unpaired surrogate escape")
    return value


def _uint(obj: Mapping[str, Any], key: str, where: str, *, maximum: int = _U32_MAX) -> int | None:
    value = _get(obj, key)
    if value is None:
        return None
    # type() rather than isinstance(): True is an int in Python and 1.0 equals 1, but neither is a JSON integer
    # to Go or Rust.
    if type(value) is not int or not 0 <= value <= maximum:
        raise _invalid(f"decode: {where}.{key} must be an integer in 0..{maximum}, got {value!r:.40}")
    return value


def _float(obj: Mapping[str, Any], key: str, where: str) -> float | None:
    value = _get(obj, key)
    if value is None:
        return None
    if type(value) not in (int, float):
        raise _invalid(f"decode: {where}.{key} must be a number, got {type(value).__name__}")
    try:
        result = float(value)
    except OverflowError:  # an integer literal with hundreds of digits
        raise _invalid(f"decode: {where}.{key} is out of float64 range") from None
    return result


def _bool(obj: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = _get(obj, key)
    if value is None:
        return None
    if type(value) is not bool:
        raise _invalid(f"decode: {where}.{key} must be true or false, got {type(value).__name__}")
    return value


def _list(obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = _get(obj, key)
    if value is None:  # Go writes a nil slice as null; an empty list is then refused semantically if it matters
        return []
    if type(value) is not list:
        raise _invalid(f"decode: {where}.{key} must be an array, got {type(value).__name__}")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise _invalid(f"decode: {where} must be an object, got {type(value).__name__}")
    return value


def _decode_block(raw: Any, where: str) -> ContentBlock:
    obj = _object(raw, where)
    block_type = _str(obj, "type", where, default=None)
    if block_type == "text":
        return TextBlock(_str(obj, "text", where))
    if block_type == "image":
        return ImageBlock(_str(obj, "attachment_id", where))
    if block_type in (AttachmentKind.AUDIO, AttachmentKind.VIDEO):
        return OtherBlock(block_type, _str(obj, "attachment_id", where))
    # tool_use, tool_result, or a type the protocol does not define: its other fields are not ours to check.
    return OtherBlock(block_type)


def _decode_message(raw: Any, where: str) -> Message:
    obj = _object(raw, where)
    role = _str(obj, "role", where, default=None)
    if role not in _ROLES:
        raise _invalid(f"decode: {where}.role {role!r} is not one of system, user, assistant")
    content = tuple(_decode_block(b, f"{where}.content[{j}]") for j, b in enumerate(_list(obj, "content", where)))
    return Message(Role(role), content)


def _id(obj: Mapping[str, Any], key: str, where: str, *, default: str | None = "") -> str:
    """A request or attachment id: a string of at most MAX_ID_CHARS characters."""
    value = _str(obj, key, where, default=default)
    if len(value) > MAX_ID_CHARS:
        raise _invalid(f"decode: {where}.{key} is {len(value)} characters; at most {MAX_ID_CHARS}")
    return value


def _decode_attachment(raw: Any, where: str) -> Attachment:
    obj = _object(raw, where)
    return Attachment(
        kind=_str(obj, "kind", where, default=None),
        id=_id(obj, "id", where),
        # Missing axes read as 0 (Go omits a 0 axis); the axis bound then refuses it semantically.
        width=_uint(obj, "width", where) or 0,
        height=_uint(obj, "height", where) or 0,
    )


def decode_request_json(payload: Buffer, *, check_version: bool = True) -> Request:
    """Decode a request JSON payload. Every failure is a fatal WireError (the stream cannot be trusted after it).

    The version is checked first, straight after the JSON parses, so a request from a future version gets
    wire_version_unsupported rather than a complaint about a field it spells differently; a missing
    ``wire_version`` reads as 0 and is refused the same way. ``check_version=False`` decodes any version by v1
    rules (tools, tests). Unknown fields are ignored. The error carries the request's id once it could be read.
    """
    obj = _loads_object(payload, "request")
    raw_id = obj.get("id")
    echo_id = ""
    if type(raw_id) is str and len(raw_id) <= MAX_ID_CHARS and not _SURROGATE_RE.search(raw_id):
        echo_id = raw_id
    try:
        version = _uint(obj, "wire_version", "request") or 0
        if check_version and version != WIRE_VERSION:
            raise WireError(
                ErrorCode.WIRE_VERSION_UNSUPPORTED,
                f"wire version {version} unsupported, this build speaks {WIRE_VERSION}",
                fatal=True,
            )
        return Request(
            wire_version=version,
            id=_id(obj, "id", "request"),
            messages=tuple(
                _decode_message(m, f"messages[{i}]") for i, m in enumerate(_list(obj, "messages", "request"))
            ),
            attachments=tuple(
                _decode_attachment(a, f"attachments[{i}]") for i, a in enumerate(_list(obj, "attachments", "request"))
            ),
            max_tokens=_uint(obj, "max_tokens", "request"),
            temperature=_float(obj, "temperature", "request"),
            top_p=_float(obj, "top_p", "request"),
            top_k=_uint(obj, "top_k", "request"),
            stream=_bool(obj, "stream", "request"),
            thinking=_bool(obj, "thinking", "request"),
        )
    except WireError as exc:
        exc.request_id = echo_id
        raise


def decode_blob_descriptor(payload: Buffer) -> BlobDescriptor:
    """Decode a descriptor frame's payload. ``type`` must be exactly ``"attachment_blob"`` (fatal WireError else)."""
    obj = _loads_object(payload, "descriptor")
    kind = _get(obj, "type")
    if kind != _DESCRIPTOR_TYPE or type(kind) is not str:
        raise _invalid(f"decode: descriptor type must be {_DESCRIPTOR_TYPE!r}, got {kind!r:.40}")
    length = _uint(obj, "len", "descriptor", maximum=_U64_MAX)
    if length is None:
        raise _invalid("decode: descriptor.len is missing")
    return BlobDescriptor(_id(obj, "attachment_id", "descriptor", default=None), length)


def decode_response(payload: Buffer, frame_type: FrameType = FrameType.JSON) -> ResponseEvent | None:
    """Decode one frame off the response stream (for a client). ``None`` means "not for you, skip it".

    Accepts Go order (``id`` first) and Rust order (``type`` first), any escaping. Skips (returns None) unknown
    response types, frames without a block and non-text blocks (thinking, tool_use), as pdf-spec's client does.
    Go's omitted fields read as zero values (a done without ``backend``, an error without ``message``). A BLOB
    frame, a non-object, a missing ``type`` or a wrongly typed field is a fatal WireError: the client closes.
    """
    if frame_type is not FrameType.JSON:
        raise _invalid("malformed response stream: a BLOB frame; responses are JSON frames only")
    obj = _loads_object(payload, "response")
    resp_type = _str(obj, "type", "response", default=None)
    resp_id = _str(obj, "id", "response")
    if resp_type == _RESP_FRAME:
        block = _get(obj, "block")
        if block is None:
            return None
        block = _object(block, "response.block")
        if _str(block, "type", "response.block", default=None) != "text":
            return None
        return FrameDelta(resp_id, _str(block, "delta", "response.block"))
    if resp_type == _RESP_DONE:
        raw_usage = _get(obj, "usage")
        usage = {} if raw_usage is None else _object(raw_usage, "response.usage")
        return Done(
            resp_id,
            input_tokens=_uint(usage, "input_tokens", "response.usage") or 0,
            output_tokens=_uint(usage, "output_tokens", "response.usage") or 0,
            stop_reason=_str(obj, "stop_reason", "response"),
            backend=_str(obj, "backend", "response"),
        )
    if resp_type == _RESP_ERROR:
        return Error(resp_id, _str(obj, "code", "response"), _str(obj, "message", "response"))
    return None


# --------------------------------------------------------------------------------------------------------------
# Reading a whole request (sans-IO state machine)
# --------------------------------------------------------------------------------------------------------------


class RequestReader:
    """Sans-IO reader of one request: the request frame, then a descriptor and a BLOB per declared attachment.

    Loop ``n = accept_header(header)``, read exactly ``n`` payload bytes into a buffer, ``accept_payload(buf)``,
    until :attr:`complete`; then :attr:`request` is the request with every attachment's ``data`` set (the buffers
    given, uncopied). Every check that protects the stream runs as early as it can: the frame type and the blob
    length against the header (before the caller allocates), the attachment count as soon as the request JSON is
    read (before any blob), the 64 MiB blob cap and the 128 MiB per-request budget on each descriptor (before its
    blob). All its WireErrors are fatal and carry the request id once known. Use one reader per request; after an
    error it refuses further input.
    """

    def __init__(self) -> None:
        self._request: Request | None = None
        self._pending: FrameHeader | None = None
        self._descriptor: BlobDescriptor | None = None  # set between a descriptor and its blob
        self._data: dict[str, Buffer] = {}
        self._budget = MAX_ATTACHMENT_BYTES
        self._failed = False

    @property
    def request_id(self) -> str:
        """The id to echo on an error frame: the request's id once its JSON was read, ``""`` before."""
        return self._request.id if self._request is not None else ""

    @property
    def complete(self) -> bool:
        """True once the request frame and every attachment's descriptor and blob have been accepted."""
        return self._request is not None and len(self._data) == len(self._request.attachments)

    @property
    def request(self) -> Request:
        """The whole request, attachment bytes attached. Only valid once :attr:`complete`."""
        if self._request is None or not self.complete:
            raise RuntimeError("request is not complete")
        if not self._request.attachments:
            return self._request
        atts = tuple(dataclasses.replace(a, data=self._data[a.id]) for a in self._request.attachments)
        return dataclasses.replace(self._request, attachments=atts)

    def _fail(self, exc: WireError) -> WireError:
        self._failed = True
        if not exc.request_id:
            exc.request_id = self.request_id
        return exc

    def accept_header(self, header: FrameHeader) -> int:
        """Check the next frame's header against what the protocol expects now; return the payload bytes to read."""
        if self._failed or self._pending is not None or self.complete:
            raise RuntimeError("RequestReader used out of order")
        try:
            if self._descriptor is None:
                what = "request" if self._request is None else "attachment descriptor"
                if header.frame_type is not FrameType.JSON:
                    raise _invalid(f"expected a JSON {what} frame, got {header.frame_type.name}")
            else:
                if header.frame_type is not FrameType.BLOB:
                    raise _invalid(
                        f"expected the BLOB for attachment {self._descriptor.attachment_id!r}, "
                        f"got {header.frame_type.name}"
                    )
                if header.payload_len != self._descriptor.len:
                    raise _invalid(
                        f"blob of {header.payload_len} bytes for attachment {self._descriptor.attachment_id!r}, "
                        f"whose descriptor declared {self._descriptor.len}"
                    )
        except WireError as exc:
            raise self._fail(exc) from None
        self._pending = header
        return header.payload_len

    def accept_payload(self, payload: Buffer) -> None:
        """Take the payload of the frame whose header was accepted last (exactly that many bytes)."""
        header = self._pending
        if self._failed or header is None:
            raise RuntimeError("RequestReader used out of order")
        self._pending = None
        try:
            if len(payload) != header.payload_len:
                raise truncated_frame(f"got {len(payload)} of {header.payload_len} payload bytes")
            if self._request is None:
                request = decode_request_json(payload)
                self._request = request
                _check_attachment_ids(request.attachments, fatal=True)
            elif self._descriptor is None:
                self._descriptor = self._check_descriptor(decode_blob_descriptor(payload))
            else:
                self._data[self._descriptor.attachment_id] = payload
                self._descriptor = None
        except WireError as exc:
            raise self._fail(exc) from None

    def eof(self, *, mid_frame: bool = False) -> None:
        """Report that the stream ended; ``mid_frame`` if some bytes of a frame had been read.

        Returns quietly when nothing of a request had arrived: a clean close between requests, which is how a
        client says it is done. Otherwise raises a fatal truncated-frame WireError carrying the request id.
        """
        if not mid_frame and self._request is None and self._pending is None:
            return
        what = "a request frame" if self._request is None else f"request {self.request_id!r}"
        raise self._fail(truncated_frame(f"EOF inside {what}"))

    def accept_frame(self, frame: Frame) -> None:
        """``accept_header`` and ``accept_payload`` for a frame that was read whole (e.g. from a FrameDecoder)."""
        self.accept_header(FrameHeader(len(frame.payload), frame.frame_type, 0))
        self.accept_payload(frame.payload)

    def _check_descriptor(self, desc: BlobDescriptor) -> BlobDescriptor:
        assert self._request is not None
        if self._request.attachment(desc.attachment_id) is None:
            raise _invalid(f"descriptor for attachment {desc.attachment_id!r}, which the request does not declare")
        if desc.attachment_id in self._data:
            raise _invalid(f"received more than one BLOB for attachment {desc.attachment_id!r}")
        self._budget = _charge_blob(desc.attachment_id, desc.len, self._budget, fatal=True)
        return desc


# --------------------------------------------------------------------------------------------------------------
# Semantic validation (inferd's resolve(); failures keep the connection)
# --------------------------------------------------------------------------------------------------------------

_TOOL_BLOCKS: Final = frozenset({"tool_use", "tool_result"})


def validate_request(request: Request, *, supported_kinds: Iterable[str] = (AttachmentKind.IMAGE,)) -> None:
    """Refuse a well-framed request that makes no sense, like inferd's ``resolve()``: non-fatal WireErrors.

    Checks, in order: at least one message; attachment count; each attachment has a non-empty unique id and a kind
    the protocol defines (invalid_request) that this host supports (``supported_kinds``; else
    attachment_unsupported); image axes in 1..65536 (before multiplying) and, once bytes are attached, exactly
    width*height*3 of them; each message has content; image/audio/video blocks reference an attachment of their own
    kind; tool blocks and unknown block types are refused. What a particular door further requires (pdf-spec's
    "one user message, one image, one text") is that door's business.
    """
    supported = frozenset(str(k) for k in supported_kinds)
    rid = request.id

    def refuse(message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> WireError:
        # The message opens with its code in words ("invalid request: ...", "attachment unsupported: ..."), so a
        # person reading only the message is not told the opposite of what a program branching on the code sees.
        return WireError(code, f"{code.value.replace('_', ' ')}: {message}", fatal=False, request_id=rid)

    if not request.messages:
        raise refuse("messages is empty")
    try:
        _check_attachment_ids(request.attachments, fatal=False)
    except WireError as exc:
        raise refuse(exc.message) from None
    by_id: dict[str, Attachment] = {}
    for i, att in enumerate(request.attachments):
        if not att.id:
            raise refuse(f"attachments[{i}] has an empty id")
        by_id[att.id] = att
        if att.kind not in _KINDS:
            raise refuse(f"attachments[{i}] has unknown kind {att.kind!r}")
        if att.kind not in supported:
            raise refuse(f"{att.kind} attachments are not supported by this host", ErrorCode.ATTACHMENT_UNSUPPORTED)
        if att.kind == AttachmentKind.IMAGE:
            try:
                expected = image_byte_length(att.width, att.height)
            except WireError as exc:
                raise refuse(f"attachment {att.id!r}: {exc.message}") from None
            if att.data is not None and len(att.data) != expected:
                raise refuse(
                    f"image {att.id!r} is {att.width}x{att.height}, which needs {expected} bytes, "
                    f"but its blob has {len(att.data)}"
                )
    for i, msg in enumerate(request.messages):
        if not msg.content:
            raise refuse(f"messages[{i}].content is empty")
        for j, block in enumerate(msg.content):
            where = f"messages[{i}].content[{j}]"
            if isinstance(block, TextBlock):
                continue
            if isinstance(block, OtherBlock) and block.type in _TOOL_BLOCKS:
                raise refuse(f"{where} is a {block.type} block; this host does not run tools")
            if isinstance(block, OtherBlock) and block.type not in _KINDS:
                raise refuse(f"{where} uses unknown content-block type {block.type!r}")
            target_id = block.attachment_id or ""
            target = by_id.get(target_id)
            if target is None:
                raise refuse(f"{where} references attachment {target_id!r}, which the request does not carry")
            if target.kind != block.type:
                raise refuse(f"{where} is a {block.type} block but attachment {target_id!r} is {target.kind!r}")


# --------------------------------------------------------------------------------------------------------------
# Images and page requests
# --------------------------------------------------------------------------------------------------------------


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
        raise _invalid(f"attachment {attachment.id!r} is {attachment.kind!r}, not an image", fatal=False)
    expected = image_byte_length(attachment.width, attachment.height)
    if attachment.data is None or len(attachment.data) != expected:
        got = "no" if attachment.data is None else len(attachment.data)
        raise _invalid(
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

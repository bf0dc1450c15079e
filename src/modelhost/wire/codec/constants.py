"""The local wire's constants: its version, every bound with the failure it prevents, and its closed sets of values.

One module of constants for the whole inferd wire (pdf-spec's Go ``ipc`` is the authority for each value): the
framing, JSON, reading and validation modules beside it take every number and every enumeration from here.
"""

from __future__ import annotations

import enum
from typing import Final, TypeAlias

from modelhost.inference import images

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_PROMPT",
    "DESCRIPTOR_TYPE",
    "KINDS",
    "MAX_ATTACHMENTS",
    "MAX_ATTACHMENT_BYTES",
    "MAX_FRAME",
    "MAX_HEADER_LEN",
    "MAX_ID_CHARS",
    "MAX_IMAGE_AXIS",
    "MAX_VARINT_BYTES",
    "RESPONSE_DONE",
    "RESPONSE_ERROR",
    "RESPONSE_FRAME",
    "ROLES",
    "U32_MAX",
    "U64_MAX",
    "WIRE_VERSION",
    "AttachmentKind",
    "Buffer",
    "ErrorCode",
    "FrameType",
    "Role",
    "StopReason",
]


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

# The widest integers the peers' structs hold: counts, axes and token bounds are u32 in Go and Rust (a larger one
# fails their decoder), a descriptor's blob length is u64.
U32_MAX: Final = (1 << 32) - 1
U64_MAX: Final = (1 << 64) - 1

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


# The same closed sets as strings, for checking a decoded value before it becomes an enum member.
ROLES: Final = frozenset(r.value for r in Role)
KINDS: Final = frozenset(k.value for k in AttachmentKind)
# The ``type`` of the JSON frame that announces each BLOB, and of the three response frames (spec §4.3, §5).
DESCRIPTOR_TYPE: Final = "attachment_blob"
RESPONSE_FRAME: Final = "frame"
RESPONSE_DONE: Final = "done"
RESPONSE_ERROR: Final = "error"

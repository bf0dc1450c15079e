"""What travels: the request (messages, content blocks, attachments) and the response events, as plain values.

No encoding here: :mod:`~modelhost.wire.codec.encode` writes these as Go does and
:mod:`~modelhost.wire.codec.decode` reads them back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, TypeAlias

from modelhost.wire.codec.constants import WIRE_VERSION, Buffer, Role, StopReason

__all__ = [
    "Attachment",
    "BlobDescriptor",
    "ContentBlock",
    "Done",
    "Error",
    "FrameDelta",
    "ImageBlock",
    "Message",
    "OtherBlock",
    "Request",
    "ResponseEvent",
    "TextBlock",
    "is_terminal",
]


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


@dataclass(frozen=True, slots=True)
class FrameDelta:
    """A ``frame`` response carrying a text delta; concatenate the deltas for the answer."""

    id: str
    text: str


@dataclass(frozen=True, slots=True)
class Done:
    """The terminal success response. ``stop_reason`` is a :class:`StopReason` value; an unknown one is kept as text.

    ``warning`` is modelhost's own optional field: what the model found doubtful about its answer ("" when nothing;
    the ``ocr`` model: a page in a script its recogniser cannot read). It is written only when there is one, after
    ``backend``, as inferd writes its own optional ``tool_choice_unsatisfied``; peers that do not know it ignore it
    (Go's ``encoding/json`` drops unknown keys, and inferd's serde structs do not deny them), spec §5.
    """

    id: str
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str = StopReason.END_TURN
    backend: str = ""
    warning: str = ""


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

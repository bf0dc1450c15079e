"""The request handler every face of the wire shares: a decoded Request in, response events out.

The socket server (:mod:`modelhost.wire.server`) and the in-process door (:class:`modelhost.wire.client.Local`)
both call :func:`respond`, so the two cannot answer a request differently: validation, the mapping of host errors
to wire codes, stop reasons and usage all live here, once. Nothing here touches bytes; the codec does that.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any, Final

from modelhost.errors import HostClosedError, InvalidInputError, ModelHostError, kind_of, kind_of_code
from modelhost.host import Delta, Failed, GenerationRequest, RequestStream
from modelhost.host import Done as HostDone
from modelhost.host.models import Servable
from modelhost.inference.options import MAX_TOKENS_LIMIT
from modelhost.inference.types import Message as ChatMessage
from modelhost.wire.codec.constants import AttachmentKind, ErrorCode, StopReason
from modelhost.wire.codec.errors import WireError
from modelhost.wire.codec.messages import Done, Error, FrameDelta, ImageBlock, Request, ResponseEvent, TextBlock
from modelhost.wire.codec.pages import attachment_array
from modelhost.wire.codec.validate import validate_request

__all__ = ["TEXT_BLOCK_SEPARATOR", "backend_name", "events", "respond", "to_generation_request"]

#: How the text blocks of one message are joined into the contract's single ``content`` string. A newline keeps
#: two blocks ("Convert this page." + "Only the table.") from running into one word; one block is passed as is.
TEXT_BLOCK_SEPARATOR: Final = "\n"

# The contract's finish reasons, as the wire spells them. "length" is max_tokens: pdf-spec's client reads it as "the
# page is truncated", so reporting end_turn there (as pdf-spec's own server does) would hide a cut page.
_STOP_REASONS: Final = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "cancelled": StopReason.CANCELLED,
    "error": StopReason.ERROR,
}


def backend_name(host: Servable) -> str:
    """The ``done.backend`` string: diagnostic only (consumers must not branch on it), never empty (Rust needs it)."""
    return f"modelhost/{host.name}"


def to_generation_request(request: Request) -> GenerationRequest:
    """The host request for a validated wire request: messages with their images, and the sampling options.

    Images become ``HxWx3`` uint8 arrays viewing the received blob (no copy), in block order within each message.
    ``max_tokens`` 0 means "no bound given" (pdf-spec omits it for 0 and its server reads 0 as unbounded), so the
    checkpoint's default applies; a bound past what the contract accepts saturates there, as pdf-spec saturates.
    """
    messages = []
    for message in request.messages:
        texts: list[str] = []
        images: list[Any] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                texts.append(block.text)
            elif isinstance(block, ImageBlock):
                attachment = request.attachment(block.attachment_id)
                if attachment is None:  # validate_request refuses this first; kept for a caller that did not
                    raise InvalidInputError(f"image block references unknown attachment {block.attachment_id!r}")
                images.append(attachment_array(attachment))
        messages.append(ChatMessage(str(message.role), TEXT_BLOCK_SEPARATOR.join(texts), images=tuple(images)))
    options: dict[str, Any] = {}
    if request.max_tokens:
        options["max_tokens"] = min(request.max_tokens, MAX_TOKENS_LIMIT)
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(request, name)
        if value is not None:
            options[name] = value
    return GenerationRequest(messages=messages, options=options, request_id=request.id)


def _wire_error(exc: ModelHostError, request_id: str) -> WireError:
    # The wire code is the error's kind's (modelhost.errors: the one table every door reads).
    code = ErrorCode(kind_of(exc).wire_code)
    # A host that is closing admits nothing more on this connection either (inferd closes it); every other refusal
    # consumed the whole request, so the connection stays usable.
    fatal = isinstance(exc, HostClosedError)
    return WireError(code, str(exc), fatal=fatal, request_id=request_id)


async def respond(host: Servable, request: Request) -> AsyncGenerator[ResponseEvent, None]:
    """Answer one complete request (attachment bytes attached): yield text deltas, then exactly one ``Done``.

    Every refusal or failure raises :class:`WireError` instead of yielding, carrying the code, the request id and
    ``fatal`` (close the connection after the error frame) so each caller reports it its own way; deltas already
    yielded stand (partial output is kept by design). Leaving the iteration early (``aclose()``, a cancelled task)
    cancels the generation wherever it is and frees the model for the next request.
    """
    rid = request.id
    supported = (AttachmentKind.IMAGE,) if host.accepts_images else ()
    validate_request(request, supported_kinds=supported)
    generation = to_generation_request(request)
    try:
        # Checked once, off the event loop (a JSON Schema's grammar compiled, the prompt tokenized: Host.precheck).
        admission = await host.precheck(generation)
        stream: RequestStream = host.submit(admission)
    except ModelHostError as exc:
        raise _wire_error(exc, rid) from None
    backend = backend_name(host)
    # Leaving the block early (a terminal event, an error, aclose() from the connection) cancels the request; the
    # stream is a plain async iterator, so nothing is left suspended for the loop to finalise.
    async with stream:
        async for event in stream:
            if isinstance(event, Delta):
                if event.text:  # pdf-spec never emits an empty delta; its client would skip one anyway
                    yield FrameDelta(rid, event.text)
            elif isinstance(event, HostDone):
                yield Done(
                    rid,
                    input_tokens=event.prompt_tokens,
                    output_tokens=event.completion_tokens,
                    stop_reason=_STOP_REASONS.get(event.finish_reason, StopReason.END_TURN).value,
                    backend=backend,
                    warning=event.metrics.warning,
                )
                return
            elif isinstance(event, Failed):
                code = ErrorCode(kind_of_code(event.code).wire_code)
                raise WireError(code, event.message, fatal=False, request_id=rid)


async def events(host: Servable, request: Request) -> AsyncGenerator[ResponseEvent, None]:
    """:func:`respond`, with a refusal or failure yielded as the terminal ``Error`` event instead of raised."""
    try:
        async with contextlib.aclosing(respond(host, request)) as answers:
            async for event in answers:
                yield event
    except WireError as exc:
        # Plain strings, as a decoded frame carries them, so in-process and socket answers compare equal.
        yield Error(exc.request_id or request.id, str(exc.code), exc.message)

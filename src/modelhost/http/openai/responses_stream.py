"""A streamed Responses API answer as OpenAI's (and vLLM's) server-sent events: `event: <type>` then `data: {...}`,
each event with its `sequence_number`.

The order: `response.created`, `response.in_progress`; then for each output item as the model produces it,
`response.output_item.added`, its deltas (`response.reasoning_text.delta` of a thought, `response.content_part.added`
and `response.output_text.delta` of a reply, `response.function_call_arguments.delta` of a call), its closing events
(`...done`) and `response.output_item.done`; last `response.completed` (or `response.incomplete` when
max_output_tokens cut it) with the whole response. An error after the stream began is an `error` event; it also
carries OpenAI's `{"error": {...}}` body, so the `openai` client raises it as an APIError, as on the chat route.
Text that may be a tool call is held back by the call reader (see tools.CallReader) and sent as text if it is not.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import msgspec

from modelhost.host.events import Done
from modelhost.http import tools as tooling
from modelhost.http.errors import ApiError
from modelhost.http.openai.responses import (
    ParsedResponses,
    call_item,
    message_item,
    new_id,
    reasoning_item,
    response_object,
)
from modelhost.http.reasoning import ReasoningSplit
from modelhost.inference.types import Channel, TokenLogprob


class _Item:
    """One output item being streamed: its place, id, and the text or arguments so far."""

    def __init__(self, kind: str, index: int, item_id: str, call_id: str = "", name: str = "") -> None:
        self.kind = kind
        self.index = index
        self.id = item_id
        self.call_id = call_id
        self.name = name
        self.text: list[str] = []

    def body(self, status: str) -> dict[str, Any]:
        text = "".join(self.text)
        if self.kind == "reasoning":
            return reasoning_item(self.id, text, status)
        if self.kind == "function_call":
            return call_item(self.id, self.call_id, self.name, text, status)
        return message_item(self.id, text, status)


class ResponsesStream:
    """Serialises one streamed Responses answer (the relay's Writer)."""

    def __init__(self, model: str, parsed: ParsedResponses) -> None:
        self.id = new_id("resp")
        self.created = int(time.time())
        self.model = model
        self.parsed = parsed
        self._seq = 0
        self._split = ReasoningSplit()
        plan = parsed.parsed.tools
        self._reader = plan.reader() if plan is not None else None
        self._items: list[_Item] = []  # every item so far, in output order
        self._open: _Item | None = None  # the item text goes into now
        self._calls: dict[int, _Item] = {}  # the reader's call index -> its item

    def _event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + msgspec.json.encode(payload) + b"\n\n"

    def _response(self, done: Done | None) -> dict[str, Any]:
        output = [item.body("completed" if done is not None else "in_progress") for item in self._items]
        return response_object(self.id, self.created, self.model, self.parsed.echo, output, done)

    def started(self, prompt_tokens: int = 0) -> bytes:
        """response.created and response.in_progress, when the model takes the request."""
        response = self._response(None)
        return self._event("response.created", response=response) + self._event("response.in_progress",
                                                                                 response=response)  # fmt: skip

    # -- items ---------------------------------------------------------------------------------------------------
    def _begin(self, kind: str, call_id: str = "", name: str = "") -> tuple[_Item, bytes]:
        out = self._close()
        prefix = {"reasoning": "rs", "function_call": "fc", "message": "msg"}[kind]
        item = _Item(kind, len(self._items), new_id(prefix), call_id, name)
        self._items.append(item)
        self._open = item
        out += self._event("response.output_item.added", output_index=item.index, item=item.body("in_progress"))
        if kind == "message":
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            out += self._event("response.content_part.added", item_id=item.id, output_index=item.index,
                               content_index=0, part=part)  # fmt: skip
        return item, out

    def _close(self) -> bytes:
        item, self._open = self._open, None
        if item is None:
            return b""
        text = "".join(item.text)
        where = {"item_id": item.id, "output_index": item.index}
        if item.kind == "reasoning":
            out = self._event("response.reasoning_text.done", **where, content_index=0, text=text)
        elif item.kind == "function_call":
            out = self._event("response.function_call_arguments.done", **where, arguments=text)
        else:
            out = self._event("response.output_text.done", **where, content_index=0, text=text, logprobs=[])
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            out += self._event("response.content_part.done", **where, content_index=0, part=part)
        return out + self._event("response.output_item.done", output_index=item.index, item=item.body("completed"))

    def _text(self, kind: str, text: str) -> bytes:
        if not text:
            return b""
        out = b""
        item = self._open
        if item is None or item.kind != kind:
            item, out = self._begin(kind)
        item.text.append(text)
        where = {"item_id": item.id, "output_index": item.index, "content_index": 0}
        if kind == "reasoning":
            return out + self._event("response.reasoning_text.delta", **where, delta=text)
        return out + self._event("response.output_text.delta", **where, delta=text, logprobs=[])

    def _read(self, events: Sequence[tooling.ReadEvent]) -> bytes:
        out = b""
        for event in events:
            if isinstance(event, tooling.Content):
                out += self._text("message", event.text)
            elif isinstance(event, tooling.CallStart):
                item, begun = self._begin("function_call", event.id, event.name)
                self._calls[event.index] = item
                out += begun
            else:
                item = self._calls[event.index]
                item.text.append(event.text)
                out += self._event("response.function_call_arguments.delta", item_id=item.id,
                                   output_index=item.index, delta=event.text)  # fmt: skip
        return out

    # -- the Writer --------------------------------------------------------------------------------------------
    def delta(
        self, text: str, logprobs: Sequence[TokenLogprob] = (), channel: Channel = "content", tokens: int = 0
    ) -> bytes:
        """A piece of thought or reply (a reply through the call reader when the request has tools)."""
        if self._reader is not None and channel == "content":
            return self._read(self._reader.feed(text))
        content, thought = self._split.feed(text, channel)
        return self._text("reasoning", thought) + self._text("message", content)

    def done(self, done: Done, total_seconds: float) -> bytes:
        """What was held back, the open item's closing events, and response.completed (or .incomplete)."""
        out = self._read(self._reader.close()) if self._reader is not None else b""
        if not self._items:  # an empty answer is still an answer: one empty message, as the whole body has
            out += self._begin("message")[1]
        out += self._close()
        kind = "response.incomplete" if done.finish_reason == "length" else "response.completed"
        return out + self._event(kind, response=self._response(done))

    def error(self, err: ApiError) -> bytes:
        """An error after the stream began: OpenAI's `error` event, with the `error` body the client raises."""
        detail = {"message": err.message, "type": err.type, "param": err.param, "code": err.code}
        return self._event("error", code=err.code, message=err.message, param=err.param, error=detail)

"""Ollama's answers as NDJSON lines: text (or thinking) as it is generated, tool calls in one message at the end,
and a final line with the counts and durations; also the single object of an answer that does not stream."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from modelhost.host.events import Done
from modelhost.http import tools as tooling
from modelhost.http.errors import ApiError, ollama_error_body
from modelhost.http.ollama.schema import done_stats, ollama_logprobs, ollama_timestamp
from modelhost.http.reasoning import ReasoningSplit
from modelhost.inference.types import Channel, TokenLogprob, ToolCall


class OllamaStream:
    """Serialises an Ollama answer as NDJSON lines (`/api/chat` puts text in message.content, `/api/generate` in
    response). Also builds the single object of a non-streaming answer."""

    def __init__(self, model: str, kind: Literal["chat", "generate"], tools: tooling.ToolPlan | None = None) -> None:
        self.model = model
        self.kind = kind
        self._split = ReasoningSplit()
        self.tools = tools
        self._reader = tools.reader() if tools is not None else None
        self._fed: list[str] = []  # content fed through the reader (a stream); else done() reads the whole text
        self._after: list[str] = []  # content after a call began: held, since the call may yet not parse
        self.load_seconds = 0.0  # how long the request waited for its model's load (the door sets it)

    def _line(
        self,
        text: str,
        done: bool,
        extra: Mapping[str, Any] | None = None,
        thinking: str = "",
        calls: Sequence[ToolCall] = (),
        logprobs: Sequence[TokenLogprob] = (),
    ) -> bytes:
        body: dict[str, Any] = {"model": self.model, "created_at": ollama_timestamp()}
        if self.kind == "chat":
            body["message"] = {"role": "assistant", "content": text}
            if thinking:
                body["message"]["thinking"] = thinking  # Ollama's name for the thought
            if calls:
                # Ollama's shape: arguments as an object, no id or type; all calls in one message.
                body["message"]["tool_calls"] = [
                    {"function": {"name": c.name, "arguments": json.loads(c.arguments)}} for c in calls
                ]
        else:
            body["response"] = text
            if thinking:
                body["thinking"] = thinking
        body["done"] = done
        if logprobs:
            body["logprobs"] = ollama_logprobs(logprobs)
        if extra:
            body.update(extra)
        return msgspec.json.encode(body) + b"\n"

    def started(self, prompt_tokens: int = 0) -> bytes:
        """Nothing: Ollama has no role line."""
        return b""

    def delta(
        self, text: str, logprobs: Sequence[TokenLogprob] = (), channel: Channel = "content", tokens: int = 0
    ) -> bytes:
        """One line of text or thinking, with its tokens' logprobs when asked. With tools, content that may be a
        call is held back (its logprobs still go out, on a line of no text); the calls go out in one message at the
        end, as Ollama sends them."""
        if self._reader is not None and channel == "content":
            self._fed.append(text)
            text = "".join(e.text for e in self._reader.feed(text) if isinstance(e, tooling.Content))
            if self._reader.calls:
                self._after.append(text)
                text = ""
        content, thought = self._split.feed(text, channel)
        return (
            self._line(content, False, thinking=thought, logprobs=logprobs) if content or thought or logprobs else b""
        )

    def done(
        self,
        done: Done,
        total_seconds: float,
        text: str = "",
        thinking: str = "",
        logprobs: Sequence[TokenLogprob] = (),
    ) -> bytes:
        """The final line with counts and durations (with the whole text, thinking and logprobs when not
        streaming); a request with tools gets its calls in a message of their own (streaming) or in the final one."""
        stats = done_stats(done, total_seconds, self.load_seconds)
        if self._reader is None or self.tools is None:
            return self._line(text, True, stats, thinking, logprobs=logprobs)
        if not self._fed:
            read = self.tools.read(text)
            return self._line(read.content or "", True, stats, thinking, read.calls, logprobs)
        held = "".join(e.text for e in self._reader.close() if isinstance(e, tooling.Content))
        calls = self._reader.calls
        if not calls:
            out = self._line(held, False) if held else b""
        elif self._reader.complete and all(tooling.is_object(c.arguments) for c in calls):
            after = "".join(self._after) + held
            out = (self._line(after, False) if after.strip() else b"") + self._line("", False, calls=calls)
        else:
            # A call that did not parse: nothing of it was sent yet, so the whole answer goes out as content.
            out = self._line("".join(self._fed), False)
        return out + self._line("", True, stats)

    def error(self, err: ApiError) -> bytes:
        """An error after the stream started, as one NDJSON line."""
        return ollama_error_body(err) + b"\n"

    def loaded(self) -> bytes:
        """The answer to a prompt-less /api/generate: Ollama's "the model is loaded" reply."""
        return self._line("", True, {"done_reason": "load"})

"""OpenAI's streamed answers as server-sent events: one writer per choice of a chat answer (with or without tools)
or of a text completion; each turns the host's events into `data: {...}` chunks and ends with `data: [DONE]`."""

from __future__ import annotations

import time
from collections.abc import Sequence

import msgspec

from modelhost.host.events import Done
from modelhost.http import tools as tooling
from modelhost.http.errors import ApiError, openai_error_body
from modelhost.http.openai.schema import (
    ChatCompletionChunk,
    ChunkChoice,
    ChunkDelta,
    Completion,
    CompletionChoice,
    Usage,
    chat_logprobs,
    completion_logprobs,
    new_id,
    openai_finish_reason,
    usage_of,
)
from modelhost.http.reasoning import ReasoningSplit
from modelhost.inference.types import Channel, TokenLogprob


class RunningUsage:
    """The usage so far of one streamed choice, for vLLM's `continuous_usage_stats` (off: no usage on the chunks).

    The completion count is the host's (Delta.tokens). The prompt's count is the engine's at admission (Started), so
    every chunk from the role chunk on carries it, as vLLM's do; the finish chunk (and the usage chunk after it) take
    the model's final counts from Done. A model that counts its prompt only as it runs (a TextModel's own stream)
    reports 0 until then."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.tokens = 0
        self.prompt = 0

    def begin(self, prompt_tokens: int) -> None:
        """The model took the request: the prompt's tokens as its engine counted them."""
        self.prompt = prompt_tokens

    def end(self, done: Done) -> None:
        """The choice finished: its counts are now the model's."""
        self.tokens, self.prompt = done.completion_tokens, done.prompt_tokens

    def usage(self) -> Usage | None:
        """The usage a chunk carries now (None when not asked for)."""
        return Usage(self.prompt, self.tokens, self.prompt + self.tokens) if self.on else None


class OpenAIChatStream:
    """Serialises one streamed chat answer: a role chunk, content chunks, a finish chunk, an optional usage chunk."""

    def __init__(self, model: str, include_usage: bool, choice: int = 0, continuous_usage: bool = False) -> None:
        self.id = new_id("chatcmpl")
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        self.choice = choice  # this writer's index among a request's `n` choices
        self._split = ReasoningSplit()
        self._running = RunningUsage(continuous_usage)

    def _chunk(self, delta: ChunkDelta, finish: str | None = None) -> bytes:
        return self._send(ChunkChoice(self.choice, delta, finish))

    def _send(self, choice: ChunkChoice) -> bytes:
        chunk = ChatCompletionChunk(self.id, self.created, self.model, [choice], self._running.usage())
        return sse(msgspec.json.encode(chunk))

    def started(self, prompt_tokens: int = 0) -> bytes:
        """The role chunk, sent when the model takes the request (OpenAI sends it first)."""
        self._running.begin(prompt_tokens)
        return self._chunk(ChunkDelta(role="assistant", content=""))

    def delta(
        self, text: str, logprobs: Sequence[TokenLogprob] = (), channel: Channel = "content", tokens: int = 0
    ) -> bytes:
        """A content or reasoning_content chunk (with its tokens' log-probabilities when the request asked);
        `tokens` is how many the answer has so far (the per-chunk usage of continuous_usage_stats)."""
        self._running.tokens = max(self._running.tokens, tokens)
        content, thought = self._split.feed(text, channel)
        if not (content or thought or logprobs):
            return b""
        delta = ChunkDelta(reasoning_content=thought) if thought else ChunkDelta(content=content)
        return self._send(ChunkChoice(self.choice, delta, None, chat_logprobs(logprobs) if logprobs else None))

    def done(self, done: Done, total_seconds: float) -> bytes:
        """The finish chunk, the usage chunk when asked for, and the [DONE] sentinel."""
        return self.finish(done) + self.closing([done], 1)

    def finish(self, done: Done) -> bytes:
        """This choice's finish chunk (a stream of several choices sends one per choice, then `closing` once)."""
        self._running.end(done)
        return self._chunk(ChunkDelta(), openai_finish_reason(done))

    def closing(self, dones: Sequence[Done], prompts: int) -> bytes:
        """The end of the whole stream: the usage chunk (of every choice's `dones`, over `prompts` prompts) when
        asked for, and the [DONE] sentinel."""
        if not self.include_usage:
            return SSE_DONE
        usage = usage_of(*dones, prompts=prompts)
        return sse(msgspec.json.encode(ChatCompletionChunk(self.id, self.created, self.model, [], usage))) + SSE_DONE

    def error(self, err: ApiError) -> bytes:
        """An error after the stream started; the openai client raises it as an APIError."""
        return sse_error(err)


class OpenAIToolStream(OpenAIChatStream):
    """A streamed chat answer of a request with tools, in OpenAI's shape: once the answer is known to be a call, the
    call's first delta carries `index`, `id`, `type` and `function.name` (with `arguments: ""`), and later deltas
    only `index` and the arguments' fragments as they are generated. Text that may still be a call is held back;
    text that is not one streams as content (see tools.CallReader); the finish reason of a call is "tool_calls"."""

    def __init__(
        self, model: str, include_usage: bool, tools: tooling.ToolPlan, choice: int = 0, continuous_usage: bool = False
    ) -> None:
        super().__init__(model, include_usage, choice, continuous_usage)
        self.tools = tools
        self._reader = tools.reader()

    def _events(self, events: Sequence[tooling.ReadEvent], logprobs: Sequence[TokenLogprob]) -> bytes:
        # The tokens' log-probabilities ride on the first chunk these events make (or on an empty one).
        out = b""
        for event in events:
            if isinstance(event, tooling.Content):
                out += super().delta(event.text, logprobs)
            else:
                if isinstance(event, tooling.CallStart):
                    call = {"index": event.index, "id": event.id, "type": "function",
                            "function": {"name": event.name, "arguments": ""}}  # fmt: skip
                else:
                    call = {"index": event.index, "function": {"arguments": event.text}}
                lp = chat_logprobs(logprobs) if logprobs else None
                out += self._send(ChunkChoice(self.choice, ChunkDelta(tool_calls=[call]), None, lp))
            logprobs = ()
        return out + (super().delta("", logprobs) if logprobs else b"")

    def delta(
        self, text: str, logprobs: Sequence[TokenLogprob] = (), channel: Channel = "content", tokens: int = 0
    ) -> bytes:
        """Content goes through the call reader; thought goes out as usual."""
        self._running.tokens = max(self._running.tokens, tokens)
        if channel != "content":
            return super().delta(text, logprobs, channel)
        return self._events(self._reader.feed(text), logprobs)

    def finish(self, done: Done) -> bytes:
        """What was held back (content when it was not a call), then the finish chunk: "tool_calls" when the answer
        made calls that ended (a call cut off by max_tokens finishes "length", as OpenAI's does)."""
        self._running.end(done)
        out = self._events(self._reader.close(), ())
        if self._reader.calls and self._reader.complete:
            return out + self._chunk(ChunkDelta(), "tool_calls")
        return out + super().finish(done)


class OpenAICompletionStream:
    """Serialises one streamed /v1/completions answer."""

    def __init__(self, model: str, include_usage: bool, choice: int = 0, continuous_usage: bool = False) -> None:
        self.id = new_id("cmpl")
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        self.choice = choice  # this writer's index among a request's `n` choices
        self._offset = 0  # characters of token text streamed so far (logprobs' text_offset)
        self._running = RunningUsage(continuous_usage)

    def _chunk(self, text: str, finish: str | None = None) -> bytes:
        return self._send(CompletionChoice(self.choice, text, finish))

    def _send(self, choice: CompletionChoice) -> bytes:
        chunk = Completion(self.id, self.created, self.model, [choice], self._running.usage())
        return sse(msgspec.json.encode(chunk))

    def started(self, prompt_tokens: int = 0) -> bytes:
        """Nothing (completions have no role chunk); the prompt's count is kept for the chunks' usage."""
        self._running.begin(prompt_tokens)
        return b""

    def delta(
        self, text: str, logprobs: Sequence[TokenLogprob] = (), channel: Channel = "content", tokens: int = 0
    ) -> bytes:
        """A text chunk (with its tokens' log-probabilities when the request asked); raw text is not split."""
        self._running.tokens = max(self._running.tokens, tokens)
        if not logprobs:
            return self._chunk(text)
        choice = CompletionChoice(self.choice, text, None, completion_logprobs(logprobs, self._offset))
        self._offset += sum(len(e.text) for e in logprobs)
        return self._send(choice)

    def done(self, done: Done, total_seconds: float) -> bytes:
        """The finish chunk, the usage chunk when asked for, and the [DONE] sentinel."""
        return self.finish(done) + self.closing([done], 1)

    def finish(self, done: Done) -> bytes:
        """This choice's finish chunk (a stream of several choices sends one per choice, then `closing` once)."""
        self._running.end(done)
        return self._chunk("", openai_finish_reason(done))

    def closing(self, dones: Sequence[Done], prompts: int) -> bytes:
        """The end of the whole stream: the usage chunk (of every choice's `dones`, over `prompts` prompts) when
        asked for, and the [DONE] sentinel."""
        if not self.include_usage:
            return SSE_DONE
        usage = usage_of(*dones, prompts=prompts)
        return sse(msgspec.json.encode(Completion(self.id, self.created, self.model, [], usage))) + SSE_DONE

    def error(self, err: ApiError) -> bytes:
        """An error after the stream started; the openai client raises it as an APIError."""
        return sse_error(err)


def sse(payload: bytes) -> bytes:
    """One server-sent event carrying a JSON payload."""
    return b"data: " + payload + b"\n\n"


#: The sentinel that ends an OpenAI stream.
SSE_DONE = b"data: [DONE]\n\n"


def sse_error(err: ApiError) -> bytes:
    """An error inside an already-started stream; the openai client raises it as an APIError."""
    return sse(openai_error_body(err)) + SSE_DONE

"""Relaying a request's host events to its client, for both protocols: the choices of one request as one event
source, the streamed answer (SSE or NDJSON, written by a protocol's writer), and the collected answer of a request
that does not stream.

Cancellation: while a request is queued or generating, a task listens for the client's `http.disconnect` and
cancels the host request at once. Waiting for a failed write would not do: a queued or prefilling request writes
nothing, and a non-streaming one writes only at the end, so an abandoned request would keep the model busy for
nobody. The stream responses are raw ASGI for the same reason: the response owns both the writes and the listener.
"""

from __future__ import annotations

import asyncio
import time
import typing
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from modelhost import _access
from modelhost.host import Delta, Done, Failed, RequestStream, Started
from modelhost.host.events import Event
from modelhost.http.errors import ApiError, cancelled_by_host, client_gone, from_failure
from modelhost.http.metrics import HttpMetrics
from modelhost.http.reasoning import ReasoningSplit
from modelhost.inference.types import Channel, TokenLogprob


class Writer(Protocol):
    """The per-request serialiser of a streamed answer (see each protocol's `streams` module)."""

    def started(self, prompt_tokens: int = 0) -> bytes:
        """What the stream says once the model took the request; `prompt_tokens` is the prompt's count so far
        (Started's)."""
        ...

    def delta(
        self, text: str, logprobs: Sequence[TokenLogprob] = (), channel: Channel = "content", tokens: int = 0
    ) -> bytes: ...

    def done(self, done: Done, total_seconds: float) -> bytes: ...

    def error(self, err: ApiError) -> bytes: ...


@typing.runtime_checkable
class ChoiceWriter(Writer, Protocol):
    """A writer that can share its stream with other choices (OpenAI's `n`): one id, a finish chunk per choice,
    then one closing (usage and [DONE]) for the whole stream."""

    id: str
    created: int

    def finish(self, done: Done) -> bytes: ...

    def closing(self, dones: Sequence[Done], prompts: int) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Answer:
    """One choice of a non-streamed answer, as the door collected it."""

    text: str
    done: Done
    logprobs: Sequence[TokenLogprob] | None = None  # when the request asked for them
    reasoning: str | None = None  # a thinking model's thought, when it thought


class Choices:
    """The host streams of one request's choices (OpenAI's `n`; usually one) as one source of (choice, event) in
    the order the events arrive, so the choices stream side by side however the host interleaves them. Closing it
    cancels every choice still running."""

    def __init__(self, streams: Sequence[RequestStream], wire_names: Mapping[str, str]) -> None:
        self.streams = tuple(streams)
        self.wire_names = wire_names  # a failure naming an option names the client's parameter (ParsedRequest)
        self.submitted_at = min(s.submitted_at for s in self.streams)
        self._events: asyncio.Queue[tuple[int, Event]] = asyncio.Queue()
        self._running = len(self.streams)
        # One stream (nearly every request) is read directly: a relay task and a queue hop per token buy nothing
        # when there is nothing to interleave.
        pumps = enumerate(self.streams) if len(self.streams) > 1 else ()
        self._pumps = [asyncio.create_task(self._pump(i, s)) for i, s in pumps]

    async def _pump(self, index: int, stream: RequestStream) -> None:
        async for event in stream:
            self._events.put_nowait((index, event))

    def __aiter__(self) -> Choices:
        return self

    async def __anext__(self) -> tuple[int, Event]:
        if not self._running:
            raise StopAsyncIteration
        if self._pumps:
            index, event = await self._events.get()
        else:
            index, event = 0, await self.streams[0].__anext__()
        if isinstance(event, (Done, Failed)):
            self._running -= 1
        return index, event

    def cancel(self) -> None:
        """Cancel every choice, wherever it is (queued or generating)."""
        for stream in self.streams:
            stream.cancel()

    async def aclose(self) -> None:
        """Stop relaying and cancel the choices that have not finished."""
        for pump in self._pumps:
            pump.cancel()
        for stream in self.streams:
            await stream.aclose()


async def cancel_on_disconnect(receive: Receive, stream: Choices, gone: asyncio.Event) -> None:
    """Cancel `stream` and set `gone` when the client hangs up."""
    # Only called once the body is fully read, so the next message the server has for us is the disconnect.
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            stream.cancel()
            return


async def disconnect(receive: Receive) -> None:
    """Returns when the client hangs up (called once the body is read, so the next message is the disconnect)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class StreamedAnswer(Response):
    """Relays a host request's events as SSE or NDJSON, cancelling the request if the client goes away. With
    several choices, `writers[i]` writes choice i, and the stream ends once, after the last choice finished."""

    def __init__(
        self,
        metrics: HttpMetrics,
        route: str,
        stream: Choices,
        writers: Sequence[Writer],
        media_type: str,
        prompts: int = 1,
    ) -> None:
        super().__init__(media_type=media_type)
        self.metrics = metrics
        self.route = route
        self.stream = stream
        self.writers = writers
        self.prompts = prompts  # distinct prompts among the choices (each billed once in the usage)
        self._finished: dict[int, Done] = {}
        self._ended = False  # an error ended the whole stream (the other choices are cancelled)
        self._scope: Scope = {}  # the request's, once it runs: the access log's facts go there
        # No caching, and no proxy buffering (nginx's header): tokens must reach the client as they are made.
        self.headers.update({"cache-control": "no-cache", "x-accel-buffering": "no"})
        del self.headers["content-length"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._scope = scope
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        gone = asyncio.Event()
        listener = asyncio.create_task(cancel_on_disconnect(receive, self.stream, gone))
        try:
            async for index, event in self.stream:
                chunk = self._render(index, event, gone)
                if chunk and not gone.is_set():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if self._ended:
                    break
        finally:
            listener.cancel()
            await self.stream.aclose()
            if gone.is_set():
                self.metrics.disconnects.labels(self.route).inc()
                _access.note(scope, status=499)  # its 200 went out, but the client left before the answer ended
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _render(self, index: int, event: Event, gone: asyncio.Event) -> bytes:
        writer = self.writers[index]
        if isinstance(event, Delta):
            return writer.delta(event.text, event.logprobs, event.channel, event.tokens)
        if isinstance(event, Started):
            return writer.started(event.prompt_tokens)
        if isinstance(event, Failed):
            self._ended = True
            return writer.error(from_failure(event, self.stream.wire_names))
        if event.finish_reason == "cancelled":
            # Cancelled while the client still listens: only the host's shutdown does that. Say so.
            self._ended = True
            return b"" if gone.is_set() else writer.error(cancelled_by_host())
        _access.note(self._scope, completion_tokens=event.completion_tokens)
        if len(self.writers) == 1:
            _access.note(self._scope, prompt_tokens=event.prompt_tokens)
            return writer.done(event, time.perf_counter() - self.stream.submitted_at)
        assert isinstance(writer, ChoiceWriter), "several choices are written by OpenAI writers only"
        self._finished[index] = event
        out = writer.finish(event)
        if len(self._finished) == len(self.writers):
            dones = [self._finished[i] for i in range(len(self.writers))]
            _access.note(self._scope, prompt_tokens=prompt_tokens(dones, self.prompts))
            out += writer.closing(dones, self.prompts)
        return out


async def collect(
    request: Request, choices: Choices, metrics: HttpMetrics, *, logprobs: bool, split: bool, prompts: int = 1
) -> tuple[list[Answer], float]:
    """Drain a non-streaming request's choices, cancelling them all if the client hangs up before the answer
    is ready, or if one fails: (one Answer per choice, seconds). With `logprobs` each answer keeps its tokens'
    log-probabilities; with `split` a thinking model's thought is kept apart from the text."""
    n = len(choices.streams)
    parts: list[list[str]] = [[] for _ in range(n)]
    thoughts: list[list[str]] = [[] for _ in range(n)]
    entries: list[list[TokenLogprob]] = [[] for _ in range(n)]
    splits = [ReasoningSplit() if split else None for _ in range(n)]
    ends: list[Done | None] = [None] * n
    failed: Failed | None = None
    gone = asyncio.Event()
    listener = asyncio.create_task(cancel_on_disconnect(request.receive, choices, gone))
    try:
        async for index, event in choices:
            if isinstance(event, Delta):
                splitter = splits[index]
                content, thought = splitter.feed(event.text, event.channel) if splitter else (event.text, "")
                parts[index].append(content)
                thoughts[index].append(thought)
                entries[index].extend(event.logprobs)
            elif isinstance(event, Done):
                ends[index] = event
            elif isinstance(event, Failed):
                failed = event
                break
    finally:
        listener.cancel()
        await choices.aclose()
    seconds = time.perf_counter() - choices.submitted_at
    if gone.is_set():
        metrics.disconnects.labels(request.url.path).inc()
        raise client_gone()
    if failed is not None:
        raise from_failure(failed, choices.wire_names)
    answers = []
    for i, end in enumerate(ends):
        if end is None or end.finish_reason == "cancelled":
            raise cancelled_by_host()
        splitter = splits[i]
        reasoning = "".join(thoughts[i]) if splitter is not None and splitter.saw_thought else None
        answers.append(Answer("".join(parts[i]), end, entries[i] if logprobs else None, reasoning))
    dones = [a.done for a in answers]
    _access.note(request.scope, completion_tokens=sum(d.completion_tokens for d in dones),
                 prompt_tokens=prompt_tokens(dones, prompts))  # fmt: skip
    return answers, seconds


def prompt_tokens(dones: Sequence[Done], prompts: int = 1) -> int:
    """The prompt tokens of one answer's choices, `dones` in choice order over `prompts` prompts: each prompt counted
    once (every choice of a prompt read the same prompt, as OpenAI bills it)."""
    per_prompt = max(1, len(dones) // max(1, prompts))
    return sum(d.prompt_tokens for d in dones[::per_prompt])


def request_id() -> str:
    """A fresh id for a request (carried to the host for its logs and metrics)."""
    return uuid.uuid4().hex

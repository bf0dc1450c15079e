"""The OpenAI-compatible routes: each reads a bounded body, parses it (`schema`, `embeddings`), submits it through
the shared `Door`, and answers as one JSON body or as server-sent events (`streams`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from modelhost.host.models import ServedModel
from modelhost.http import relay
from modelhost.http.door import Door
from modelhost.http.errors import answers_errors
from modelhost.http.openai import embeddings, schema, streams
from modelhost.http.parsing import ParsedRequest, read_json
from modelhost.http.relay import Answer, ChoiceWriter, StreamedAnswer

StreamedWriter = Callable[[str, bool, int], ChoiceWriter]
WholeBody = Callable[[str, Sequence[Answer]], bytes]


class OpenAIRoutes:
    """The /v1/* handlers over a door."""

    def __init__(self, door: Door) -> None:
        self.door = door

    def routes(self) -> list[Route]:
        """The routes, for the app."""
        return [
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/v1/embeddings", self.embeddings, methods=["POST"]),
        ]

    @answers_errors("openai")
    async def models(self, request: Request) -> Response:
        """GET /v1/models."""
        listed = schema.models_list(self.door.model_set.names, int(self.door.created))
        return Response(listed, media_type="application/json")

    @answers_errors("openai")
    async def chat_completions(self, request: Request) -> Response:
        """POST /v1/chat/completions."""
        body = await read_json(request)
        parsed = schema.parse_chat_completion(body, relay.request_id())
        plan = parsed.tools
        if plan is None:
            return await self._answer(
                request, self.door.route(body), parsed, streams.OpenAIChatStream, schema.chat_completion
            )
        return await self._answer(
            request, self.door.route(body), parsed,
            lambda name, usage, choice: streams.OpenAIToolStream(name, usage, plan, choice),
            lambda name, answers: schema.chat_completion(name, answers, plan),
        )  # fmt: skip

    @answers_errors("openai")
    async def completions(self, request: Request) -> Response:
        """POST /v1/completions."""
        body = await read_json(request)
        parsed = schema.parse_completion(body, relay.request_id())
        prompts = max(1, len(parsed.prompts))
        return await self._answer(
            request, self.door.route(body), parsed, streams.OpenAICompletionStream,
            lambda name, answers: schema.completion(name, answers, prompts),
        )  # fmt: skip

    @answers_errors("openai")
    async def embeddings(self, request: Request) -> Response:
        """POST /v1/embeddings."""
        body = await read_json(request)
        parsed = embeddings.parse(body)
        served = self.door.route(body)
        result, _ = await self.door.embed(request, served, parsed)
        # Encoded off the event loop: 2048 vectors of a 4096-wide model are ~0.9 s of JSON floats (0.15 s base64).
        answer = await asyncio.to_thread(embeddings.response, served.name, parsed, result)
        return Response(answer, media_type="application/json")

    async def _answer(
        self,
        request: Request,
        served: ServedModel,
        parsed: ParsedRequest,
        streamed: StreamedWriter,
        whole: WholeBody,
    ) -> Response:
        """Submit every choice; answer as SSE from `streamed(model, include_usage, choice)` writers (one per
        choice, sharing one id), or as one `whole(model, answers)` body."""
        await self.door.precheck(served, parsed)
        choices = self.door.submit(served, parsed)
        if parsed.stream:
            writers = [streamed(served.name, parsed.include_usage, i) for i in range(len(choices.streams))]
            for writer in writers[1:]:
                writer.id, writer.created = writers[0].id, writers[0].created
            prompts = max(1, len(parsed.prompts))
            return StreamedAnswer(self.door.metrics, request.url.path, choices, writers, "text/event-stream", prompts)
        # Chat answers split a thinking model's thought out; a raw completion's text stays whole.
        answers, _ = await relay.collect(
            request, choices, self.door.metrics, logprobs=parsed.logprobs, split=bool(parsed.generation.messages)
        )
        return Response(whole(served.name, answers), media_type="application/json")

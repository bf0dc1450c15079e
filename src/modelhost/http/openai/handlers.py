"""The OpenAI-compatible routes: each reads a bounded body, parses it (`schema`, `embeddings`), submits it through
the shared `Door`, and answers as one JSON body or as server-sent events (`streams`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from modelhost.errors import ModelNotFoundError
from modelhost.host.models import ServedModel
from modelhost.http import relay
from modelhost.http.door import Door
from modelhost.http.errors import ApiError, answers_errors
from modelhost.http.openai import embeddings, lora, responses, schema, streams, tokens
from modelhost.http.openai.responses_stream import ResponsesStream
from modelhost.http.parsing import ParsedRequest, read_json
from modelhost.http.relay import Answer, ChoiceWriter, StreamedAnswer
from modelhost.inference import hub_cache

#: A stream writer of one choice: (model name, the request, choice index) -> writer.
StreamedWriter = Callable[[str, ParsedRequest, int], ChoiceWriter]
WholeBody = Callable[[str, Sequence[Answer]], bytes]


class OpenAIRoutes:
    """The /v1/* handlers over a door."""

    def __init__(self, door: Door) -> None:
        self.door = door

    def routes(self) -> list[Route]:
        """The routes, for the app."""
        return [
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/models/{model:path}", self.model, methods=["GET"]),
            Route("/tokenize", self.tokenize, methods=["POST"]),
            Route("/detokenize", self.detokenize, methods=["POST"]),
            Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/v1/responses", self.responses, methods=["POST"]),
            Route("/v1/embeddings", self.embeddings, methods=["POST"]),
            Route("/v1/load_lora_adapter", self.load_lora_adapter, methods=["POST"]),
            Route("/v1/unload_lora_adapter", self.unload_lora_adapter, methods=["POST"]),
        ]

    @answers_errors("openai")
    async def load_lora_adapter(self, request: Request) -> Response:
        """POST /v1/load_lora_adapter (vLLM's; lora.py)."""
        return await lora.load(request, self.door.model_set)

    @answers_errors("openai")
    async def unload_lora_adapter(self, request: Request) -> Response:
        """POST /v1/unload_lora_adapter (vLLM's; lora.py)."""
        return await lora.unload(request, self.door.model_set)

    @answers_errors("openai")
    async def models(self, request: Request) -> Response:
        """GET /v1/models."""
        model_set = self.door.model_set
        listed = [_listed(m) for m in (*model_set, *model_set.adapters.values())]
        return Response(schema.models_list(listed, int(self.door.created)), media_type="application/json")

    @answers_errors("openai")
    async def model(self, request: Request) -> Response:
        """GET /v1/models/{id}: a served model by its name or an alias (404 model_not_found for any other name:
        unlike a generation, which one lone model answers whatever it names, a lookup must not pretend)."""
        try:
            served = self.door.model_set.get(request.path_params["model"])
        except ModelNotFoundError as exc:
            raise ApiError(404, str(exc), type="not_found_error", param="model", code="model_not_found") from None
        body = schema.model_object(_listed(served), int(self.door.created))
        return Response(msgspec.json.encode(body), media_type="application/json")

    @answers_errors("openai")
    async def tokenize(self, request: Request) -> Response:
        """POST /tokenize (llama-server's and vLLM's shapes, see tokens.py)."""
        body = await read_json(request)
        parsed = tokens.parse_tokenize(body)
        served = self.door.route(request, body)
        self._loaded(served)
        return Response(await tokens.tokenize(served, parsed), media_type="application/json")

    @answers_errors("openai")
    async def detokenize(self, request: Request) -> Response:
        """POST /detokenize (llama-server's and vLLM's shapes, see tokens.py)."""
        body = await read_json(request)
        parsed = tokens.parse_detokenize(body)
        served = self.door.route(request, body)
        self._loaded(served)
        return Response(await tokens.detokenize(served, parsed), media_type="application/json")

    @answers_errors("openai")
    async def chat_completions(self, request: Request) -> Response:
        """POST /v1/chat/completions."""
        body = await read_json(request)
        parsed = schema.parse_chat_completion(body, relay.request_id())
        plan = parsed.tools
        if plan is None:
            return await self._answer(
                request, self.door.route(request, body), parsed,
                lambda name, p, choice: streams.OpenAIChatStream(name, p.include_usage, choice, p.continuous_usage),
                schema.chat_completion,
            )  # fmt: skip
        return await self._answer(
            request, self.door.route(request, body), parsed,
            lambda name, p, choice: streams.OpenAIToolStream(name, p.include_usage, plan, choice, p.continuous_usage),
            lambda name, answers: schema.chat_completion(name, answers, plan),
        )  # fmt: skip

    @answers_errors("openai")
    async def completions(self, request: Request) -> Response:
        """POST /v1/completions."""
        body = await read_json(request)
        parsed = schema.parse_completion(body, relay.request_id())
        served = self.door.route(request, body)
        if parsed.prompt_ids:
            parsed = await self._read_ids(served, parsed)
        prompts = max(1, len(parsed.prompts))
        return await self._answer(
            request, served, parsed,
            lambda name, p, choice: streams.OpenAICompletionStream(name, p.include_usage, choice, p.continuous_usage),
            lambda name, answers: schema.completion(name, answers, prompts),
        )  # fmt: skip

    @answers_errors("openai")
    async def responses(self, request: Request) -> Response:
        """POST /v1/responses (OpenAI's Responses API; shapes in responses.py, events in responses_stream.py)."""
        body = await read_json(request)
        shaped = responses.parse_responses(body, relay.request_id())
        served = self.door.route(request, body)
        parsed = shaped.parsed
        admissions = await self.door.precheck(served, parsed)
        choices = self.door.submit(served, parsed, admissions)
        if parsed.stream:
            writer = ResponsesStream(served.name, shaped)
            return StreamedAnswer(self.door.metrics, request.url.path, choices, [writer], "text/event-stream")
        (answer,), _ = await relay.collect(request, choices, self.door.metrics, logprobs=False, split=True)
        return Response(responses.whole(served.name, shaped, answer), media_type="application/json")

    async def _read_ids(self, served: ServedModel, parsed: ParsedRequest) -> ParsedRequest:
        """A completion of token ids as the completion of the text they spell (tokens.py says why it is exact)."""
        self._loaded(served)
        texts = await tokens.texts_of_ids(served, parsed.prompt_ids, "prompt")
        generation = replace(parsed.generation, prompt=texts[0])
        return replace(parsed, generation=generation, prompts=tuple(texts) if len(texts) > 1 else (), prompt_ids=())

    @answers_errors("openai")
    async def embeddings(self, request: Request) -> Response:
        """POST /v1/embeddings."""
        body = await read_json(request)
        parsed = embeddings.parse(body)
        served = self.door.route(request, body)
        if parsed.token_ids:
            self._loaded(served)
            parsed = replace(parsed, texts=await tokens.texts_of_ids(served, parsed.token_ids, "input"), token_ids=())
        result, _ = await self.door.embed(request, served, parsed)
        # Encoded off the event loop: 2048 vectors of a 4096-wide model are ~0.9 s of JSON floats (0.15 s base64).
        answer = await asyncio.to_thread(embeddings.response, served.name, parsed, result)
        return Response(answer, media_type="application/json")

    def _loaded(self, served: ServedModel) -> None:
        """Refuse (503, retry) a request that needs the model's tokenizer while the model is not loaded; a lazy
        model starts loading, so the retry finds it, as a text request's would."""
        if not served.ready:
            served.load()
            raise self.door.not_ready(served)

    async def _answer(
        self,
        request: Request,
        served: ServedModel,
        parsed: ParsedRequest,
        streamed: StreamedWriter,
        whole: WholeBody,
    ) -> Response:
        """Submit every choice; answer as SSE from `streamed(model, parsed, choice)` writers (one per
        choice, sharing one id), or as one `whole(model, answers)` body."""
        admissions = await self.door.precheck(served, parsed)
        choices = self.door.submit(served, parsed, admissions)
        if parsed.stream:
            writers = [streamed(served.name, parsed, i) for i in range(len(choices.streams))]
            for writer in writers[1:]:
                writer.id, writer.created = writers[0].id, writers[0].created
            prompts = max(1, len(parsed.prompts))
            return StreamedAnswer(self.door.metrics, request.url.path, choices, writers, "text/event-stream", prompts)
        # Chat answers split a thinking model's thought out; a raw completion's text stays whole.
        answers, _ = await relay.collect(
            request, choices, self.door.metrics, logprobs=parsed.logprobs, split=bool(parsed.generation.messages),
            prompts=max(1, len(parsed.prompts)),
        )  # fmt: skip
        return Response(whole(served.name, answers), media_type="application/json")


def _listed(served: ServedModel) -> schema.ListedModel:
    # `root` names what the model is (its hub repository, else its served id), never where it lies on the
    # server's disk: a client has no use for the path, and it told anyone who can list models the host's layout.
    parent = served.parent
    root = hub_cache.repo_of(served.path) if served.path else None
    return schema.ListedModel(served.name, served.spec.aliases, root, parent.name if parent else None)

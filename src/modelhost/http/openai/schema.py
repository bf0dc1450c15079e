"""OpenAI's JSON shapes of chat and text completions: the requests (parsed into a `ParsedRequest` for the host) and
the whole answers of a request that does not stream. The streamed chunks are written by `openai.streams`.

Requests decode into msgspec Structs that forbid unknown fields (see `modelhost.http.parsing`): a parameter we do not
implement is a 400 naming it, not silently ignored.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from modelhost.errors import pointer
from modelhost.host.events import Done, GenerationRequest
from modelhost.http import tools as tooling
from modelhost.http.errors import ApiError
from modelhost.http.images import MAX_IMAGES, decode_image_data_uri, too_many_images
from modelhost.http.openai import tokens
from modelhost.http.parsing import ParsedRequest, convert, invalid, shown, unsupported
from modelhost.http.relay import Answer, prompt_tokens
from modelhost.inference.options import ANY_JSON_OBJECT, DEFAULT_MAX_TOKENS
from modelhost.inference.types import Message, TokenLogprob, ToolCall

#: What OpenAI's /v1/completions does when `max_tokens` is absent. Kept, so clients written against OpenAI see the
#: length they expect (chat has no such default: the checkpoint's own bound applies).
COMPLETIONS_DEFAULT_MAX_TOKENS = 16


class _TextPart(msgspec.Struct, tag_field="type", tag="text", forbid_unknown_fields=True):
    text: str


class _ImageURL(msgspec.Struct, forbid_unknown_fields=True):
    url: str
    detail: str | None = None  # "auto" | "low" | "high": a hint for OpenAI's tiling; our processor decides.


class _ImagePart(msgspec.Struct, tag_field="type", tag="image_url", forbid_unknown_fields=True):
    image_url: _ImageURL


class _ChatMessage(msgspec.Struct, forbid_unknown_fields=True):
    role: str
    content: str | list[_TextPart | _ImagePart] | None = None
    name: str | None = None
    tool_calls: list[Any] | None = None
    tool_call_id: str | None = None
    refusal: str | None = None


class _StreamOptions(msgspec.Struct, forbid_unknown_fields=True):
    include_usage: bool = False
    #: vLLM's: every chunk carries the usage so far (a benchmark's per-chunk token count); honoured.
    continuous_usage_stats: bool = False
    #: OpenAI's random padding against length side channels; a hint about framing only, nothing to pad here.
    include_obfuscation: bool | None = None


class _Sampling(msgspec.Struct, forbid_unknown_fields=True):
    """Fields shared by chat and completions. Extensions beyond OpenAI (vLLM's names): top_k, min_p,
    repetition_penalty, min_tokens, ignore_eos, stop_token_ids. Hints that change nothing about the answer are
    accepted and have no effect (see README "What the OpenAI door accepts"): user, metadata, store, service_tier,
    prompt_cache_key, safety_identifier, cache_prompt."""

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: _StreamOptions | None = None
    user: str | None = None  # an end-user id for the caller's own abuse tracking; nothing to do here
    safety_identifier: str | None = None  # OpenAI's newer name for `user`
    metadata: dict[str, str] | None = None  # the caller's tags for its own records; nothing is stored here
    store: bool | None = None  # nothing is stored here, so nothing can be retrieved later either way
    service_tier: str | None = None  # a latency/price tier: one tier here
    prompt_cache_key: str | None = None  # a cache-routing hint: the prefix cache is always on
    cache_prompt: bool | None = None  # llama-server's: the prefix cache is always on, and never changes an answer
    #: vLLM's: generate to max_tokens, the end-of-sequence and stop tokens banned until then (min_tokens = max_tokens).
    ignore_eos: bool = False
    stop_token_ids: list[int] | None = None  # vLLM's: ids that end the answer (the contract's stop_tokens)
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    min_tokens: int | None = None
    n: int | None = None  # choices per request (see MAX_CHOICES)
    # Accepted only at their neutral value (see _refuse_non_neutral).
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    logit_bias: dict[str, float] | None = None


class _JsonSchemaSpec(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    schema: dict[str, Any] | None = None  # absent: any JSON object
    description: str | None = None
    strict: bool | None = None  # the schema is always enforced (constrained decoding), strict or not


class _TextFormat(msgspec.Struct, tag_field="type", tag="text", forbid_unknown_fields=True):
    pass


class _JsonObjectFormat(msgspec.Struct, tag_field="type", tag="json_object", forbid_unknown_fields=True):
    pass


class _JsonSchemaFormat(msgspec.Struct, tag_field="type", tag="json_schema", forbid_unknown_fields=True):
    json_schema: _JsonSchemaSpec


ResponseFormat = _TextFormat | _JsonObjectFormat | _JsonSchemaFormat


def _response_schema(fmt: ResponseFormat | None) -> dict[str, Any] | None:
    """The contract's `json_schema` option for a response_format (None for plain text)."""
    if isinstance(fmt, _JsonObjectFormat):
        return dict(ANY_JSON_OBJECT)
    if isinstance(fmt, _JsonSchemaFormat):
        return fmt.json_schema.schema if fmt.json_schema.schema is not None else dict(ANY_JSON_OBJECT)
    return None


class ChatCompletionRequest(_Sampling, forbid_unknown_fields=True):
    """POST /v1/chat/completions."""

    messages: list[_ChatMessage] = msgspec.field(default_factory=list)
    max_completion_tokens: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    tools: list[Any] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    functions: list[Any] | None = None
    function_call: str | dict[str, Any] | None = None
    response_format: ResponseFormat | None = None
    # How a thinking model's thought is switched: OpenAI's `reasoning_effort`, and vLLM's / llama-server's
    # `chat_template_kwargs` (`{"enable_thinking": false}`, what Qwen3 users send through `extra_body`).
    reasoning_effort: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None


#: `reasoning_effort` values: OpenAI's (`none` turns reasoning off). One thought channel has no effort levels, so
#: every level but `none` turns it on, as Ollama's `think` levels do.
REASONING_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high"})


def _enable_thinking(req: ChatCompletionRequest) -> tuple[bool | None, str]:
    """Whether the request turns a thinking model's thought on or off (None: the template's default), and the
    parameter that said so. Template arguments other than `enable_thinking` are refused by name, not passed on: the
    contract carries no free-form template variables."""
    said: bool | None = None
    param = ""
    if req.reasoning_effort is not None:
        if req.reasoning_effort not in REASONING_EFFORTS:
            raise invalid("reasoning_effort", f"must be one of {', '.join(sorted(REASONING_EFFORTS))}")
        said, param = req.reasoning_effort != "none", "reasoning_effort"
    for key, value in (req.chat_template_kwargs or {}).items():
        if key != "enable_thinking":
            raise unsupported(f"chat_template_kwargs.{shown(key)}", "only enable_thinking is supported")
        if not isinstance(value, bool):
            raise invalid("chat_template_kwargs.enable_thinking", "must be true or false")
        if said is not None and said != value:
            raise invalid("chat_template_kwargs.enable_thinking", "contradicts reasoning_effort")
        said, param = value, "chat_template_kwargs.enable_thinking"
    return said, param


class CompletionRequest(_Sampling, forbid_unknown_fields=True):
    """POST /v1/completions."""

    #: Text, a list of texts, token ids, or a list of token-id lists (vLLM's and llama-server's forms; see tokens.py).
    prompt: Any = None
    echo: bool | None = None
    suffix: str | None = None
    best_of: int | None = None
    logprobs: int | None = None


#: Most choices one request may ask for (`n`). Each choice is a full generation that holds a queue place (and a
#: batch slot) of its own, so an unbounded `n` would let one request fill the whole queue and starve every other
#: client; 16 is past what sampling-based clients ask for (best-of-k, self-consistency voting).
MAX_CHOICES = 16


def _refuse_non_neutral(req: _Sampling) -> None:
    if req.n is not None and not 1 <= req.n <= MAX_CHOICES:
        raise ApiError(400, f"n must be between 1 and {MAX_CHOICES}", param="n", code="invalid_value")
    for name in ("frequency_penalty", "presence_penalty"):
        if getattr(req, name) not in (None, 0):
            raise unsupported(name, "is not supported; use repetition_penalty")
    if req.logit_bias:
        raise unsupported("logit_bias", "is not supported")


def _sampling_options(req: _Sampling, max_tokens: int | None) -> tuple[dict[str, Any], dict[str, str]]:
    names = {"repeat_penalty": "repetition_penalty", "stop_tokens": "stop_token_ids"}
    min_tokens = req.min_tokens
    if req.ignore_eos:
        # Honoured with the contract's own ban on stops until min_tokens: every backend implements it, and a
        # backend's refusals (a grammar cannot be combined with it) then name ignore_eos. Without a max_tokens the
        # engine's own bound applies, so the answer runs to that bound.
        max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
        min_tokens = max_tokens
        names["min_tokens"] = "ignore_eos"
    options: dict[str, Any] = {
        "max_tokens": max_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "seed": req.seed,
        "stop": req.stop,
        "top_k": req.top_k,
        "min_p": req.min_p,
        "repeat_penalty": req.repetition_penalty,
        "min_tokens": min_tokens,
        "stop_tokens": req.stop_token_ids,
    }
    return {k: v for k, v in options.items() if v is not None}, names


def _chat_message(index: int, msg: _ChatMessage, images_so_far: int) -> Message:
    param = f"messages[{index}]"
    role = "system" if msg.role == "developer" else msg.role  # OpenAI's newer name for the system turn
    # Tool turns: an assistant's earlier calls and a tool's result go to the template as such (see tools.py).
    calls: tuple[ToolCall, ...] = ()
    if msg.tool_calls:
        if role != "assistant":
            raise invalid(f"{param}.tool_calls", "only an assistant message carries tool_calls")
        calls = tooling.message_calls(msg.tool_calls, f"{param}.tool_calls", invalid)
    if role == "tool" and not msg.tool_call_id:
        raise invalid(f"{param}.tool_call_id", "a tool message must name the call it answers")
    if msg.tool_call_id is not None and role != "tool":
        raise invalid(f"{param}.tool_call_id", "only a tool message carries tool_call_id")
    tool_fields: dict[str, Any] = {"tool_calls": calls, "tool_call_id": msg.tool_call_id or "", "name": msg.name or ""}
    if isinstance(msg.content, str) or msg.content is None:
        return Message(role, msg.content or "", **tool_fields)
    texts: list[str] = []
    images: list[bytes] = []
    for j, part in enumerate(msg.content):
        if isinstance(part, _TextPart):
            texts.append(part.text)
        else:
            if images_so_far + len(images) >= MAX_IMAGES:
                raise too_many_images(param)
            images.append(decode_image_data_uri(part.image_url.url, f"{param}.content[{j}].image_url.url"))
    # Text parts joined by newlines, as vLLM does: parts are separate paragraphs to the client that split them.
    return Message(role, "\n".join(texts), tuple(images), **tool_fields)


def add_tools(
    plan: tooling.ToolPlan, options: dict[str, Any], names: dict[str, str], where: Callable[[str], str] = str
) -> None:
    """A tool plan as the contract's options: the tools (the backend renders them through the model's own chat
    template, or its generic tools turn), and a required call's schema, each part of it named by `where(param)`
    of the chat shape's parameter (`tools[i].function.parameters`)."""
    options["tools"] = plan.specs()
    names["tools"] = "tools"
    call_schema = plan.schema()
    if call_schema is not None:
        options["json_schema"] = call_schema
        names["json_schema"] = "tools"
        names.update({"json_schema" + pointer(at): where(param) for at, param in plan.schema_params().items()})


def parse_chat_completion(data: Any, request_id: str = "") -> ParsedRequest:
    """Decoded JSON of POST /v1/chat/completions -> ParsedRequest; raises ApiError naming the bad parameter."""
    req: ChatCompletionRequest = convert(data, ChatCompletionRequest)
    _refuse_non_neutral(req)
    if req.top_logprobs is not None and not req.logprobs:
        raise ApiError(400, "top_logprobs requires logprobs: true", param="top_logprobs", code="invalid_value")
    if req.functions:
        raise unsupported("functions", "the legacy functions API is not supported; use tools")
    tool_plan = tooling.plan(req.tools, req.tool_choice, invalid, req.parallel_tool_calls)
    if tool_plan is not None and tool_plan.schema() is not None and req.response_format is not None:
        raise unsupported("tool_choice", "a required tool call cannot be combined with response_format")
    if req.function_call not in (None, "none", "auto"):
        raise unsupported("function_call", "the legacy functions API is not supported; use tool_choice")
    if not req.messages:
        raise ApiError(400, "messages must be a non-empty list", param="messages", code="invalid_value")
    messages: list[Message] = []
    images = 0
    for i, msg in enumerate(req.messages):
        messages.append(_chat_message(i, msg, images))
        images += len(messages[-1].images)
    # max_completion_tokens is OpenAI's current name; max_tokens its deprecated alias. The newer one wins.
    limit = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    options, names = _sampling_options(req, limit)
    if req.max_completion_tokens is not None:
        names["max_tokens"] = "max_completion_tokens"
    schema = _response_schema(req.response_format)
    if schema is not None:
        options["json_schema"] = schema
        names["json_schema"] = "response_format"
    if req.logprobs:
        options["logprobs"] = req.top_logprobs or 0
        names["logprobs"] = "top_logprobs" if req.top_logprobs else "logprobs"
    thinking, thinking_param = _enable_thinking(req)
    if thinking is not None:
        options["enable_thinking"] = thinking
        names["enable_thinking"] = thinking_param
    if tool_plan is not None:
        add_tools(tool_plan, options, names)
    return ParsedRequest(
        GenerationRequest(messages=messages, options=options, request_id=request_id),
        stream=req.stream,
        include_usage=_include_usage(req),
        continuous_usage=_continuous_usage(req),
        logprobs=bool(req.logprobs),
        tools=tool_plan if tool_plan is not None and tool_plan.reads_calls else None,  # "none": content only
        n=req.n or 1,
        wire_names=names,
    )


def parse_completion(data: Any, request_id: str = "") -> ParsedRequest:
    """Decoded JSON of POST /v1/completions -> ParsedRequest (a raw prompt: no chat template)."""
    req: CompletionRequest = convert(data, CompletionRequest)
    _refuse_non_neutral(req)
    if req.echo:
        raise unsupported("echo", "is not supported")
    if req.suffix:
        raise unsupported("suffix", "fill-in-the-middle is not supported")
    if req.best_of not in (None, 1):
        raise unsupported("best_of", "only best_of=1 is supported")
    texts, ids = _prompts(req.prompt)
    count = len(texts or ids)
    if count * (req.n or 1) > MAX_CHOICES:
        raise ApiError(
            400, f"at most {MAX_CHOICES} generations per request (prompts x n)", param="prompt", code="invalid_value"
        )
    limit = req.max_tokens if req.max_tokens is not None else COMPLETIONS_DEFAULT_MAX_TOKENS
    options, names = _sampling_options(req, limit)
    if req.logprobs is not None:  # an int on /v1/completions: the number of alternatives (0: the chosen token's only)
        options["logprobs"] = req.logprobs
    return ParsedRequest(
        # Token ids are read into text with the model's tokenizer before submission (handlers, tokens.py).
        GenerationRequest(prompt=texts[0] if texts else "", options=options, request_id=request_id),
        stream=req.stream,
        include_usage=_include_usage(req),
        continuous_usage=_continuous_usage(req),
        logprobs=req.logprobs is not None,
        n=req.n or 1,
        prompts=tuple(texts) if len(texts) > 1 else (),
        prompt_ids=tuple(ids),
        wire_names=names,
    )


def _prompts(value: Any) -> tuple[list[str], list[tuple[int, ...]]]:
    """/v1/completions' `prompt` as (texts, token-id sequences): one of them is non-empty."""
    if isinstance(value, str):
        return [value], []
    if value is None:
        raise ApiError(400, "prompt is required", param="prompt", code="invalid_value")
    if not isinstance(value, list):
        raise invalid("prompt", f"must be a string, a list of strings or token ids, got {type(value).__name__}")
    if not value:
        raise ApiError(400, "prompt must not be an empty list", param="prompt", code="invalid_value")
    if all(isinstance(p, str) for p in value):
        return list(value), []
    if tokens.is_ids(value):
        return [], [tuple(value)]
    if all(tokens.is_ids(p) and p for p in value):
        return [], [tuple(p) for p in value]
    raise invalid("prompt", "must be a string, a list of strings, a list of token ids, or a list of token-id lists")


def _include_usage(req: _Sampling) -> bool:
    return bool(req.stream_options and req.stream_options.include_usage)


def _continuous_usage(req: _Sampling) -> bool:
    # As vLLM: per-chunk usage is a refinement of the usage chunk, so it needs include_usage too.
    return bool(req.stream_options and req.stream_options.include_usage and req.stream_options.continuous_usage_stats)


# -- OpenAI responses ---------------------------------------------------------------------------------------------

OpenAIFinish = Literal["stop", "length"]


def openai_finish_reason(done: Done) -> OpenAIFinish:
    """Done's reason on OpenAI's wire. "cancelled" never reaches a client that is still listening (see app.py)."""
    return "length" if done.finish_reason == "length" else "stop"


class Usage(msgspec.Struct):
    """Token counts, from the model's own tokenizer via Done."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


def usage_of(*dones: Done, prompts: int = 1) -> Usage:
    """Usage of one answer's choices, `dones` in choice order over `prompts` prompts: each prompt counted once
    (every choice of a prompt read the same prompt, as OpenAI bills it), the completions summed."""
    prompt = prompt_tokens(dones, prompts)
    completion = sum(d.completion_tokens for d in dones)
    return Usage(prompt, completion, prompt + completion)


class _AssistantMessage(msgspec.Struct, omit_defaults=True):
    role: str
    content: str | None  # null when the answer is tool calls
    reasoning_content: str | None = None  # a thinking model's thought, as vLLM and llama-server emit it
    tool_calls: list[dict[str, Any]] | None = None


class _ChatChoice(msgspec.Struct):
    index: int
    message: _AssistantMessage
    finish_reason: str
    logprobs: dict[str, Any] | None = None


class ChatCompletion(msgspec.Struct):
    """A non-streaming chat answer."""

    id: str
    created: int
    model: str
    choices: list[_ChatChoice]
    usage: Usage
    object: str = "chat.completion"


class ChunkDelta(msgspec.Struct, omit_defaults=True):
    role: str | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


def _tool_calls(calls: Sequence[ToolCall], *, indexed: bool = False) -> list[dict[str, Any]]:
    out = []
    for i, call in enumerate(calls):
        entry: dict[str, Any] = {"id": call.id, "type": "function",
                                 "function": {"name": call.name, "arguments": call.arguments}}  # fmt: skip
        out.append({"index": i, **entry} if indexed else entry)
    return out


class ChunkChoice(msgspec.Struct):
    index: int
    delta: ChunkDelta
    finish_reason: str | None = None
    logprobs: dict[str, Any] | None = None


class ChatCompletionChunk(msgspec.Struct):
    """One server-sent event of a streamed chat answer."""

    id: str
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None
    object: str = "chat.completion.chunk"


class CompletionChoice(msgspec.Struct):
    index: int
    text: str
    finish_reason: str | None
    logprobs: dict[str, Any] | None = None


def chat_logprobs(entries: Sequence[TokenLogprob]) -> dict[str, Any]:
    """A chat choice's `logprobs`: {"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}."""

    def one(e: TokenLogprob) -> dict[str, Any]:
        return {"token": e.text, "logprob": e.logprob, "bytes": list(e.bytes)}

    return {"content": [{**one(e), "top_logprobs": [one(t) for t in e.top]} for e in entries], "refusal": None}


def completion_logprobs(entries: Sequence[TokenLogprob], offset: int = 0) -> dict[str, Any]:
    """A /v1/completions choice's `logprobs` (the legacy shape); `offset` is where the first token's text starts."""
    offsets = []
    for e in entries:
        offsets.append(offset)
        offset += len(e.text)
    return {
        "tokens": [e.text for e in entries],
        "token_logprobs": [e.logprob for e in entries],
        "top_logprobs": [{t.text: t.logprob for t in e.top} for e in entries],
        "text_offset": offsets,
    }


class Completion(msgspec.Struct):
    """A /v1/completions answer, whole or as one streamed chunk (same object name either way, as OpenAI does)."""

    id: str
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None
    object: str = "text_completion"


def new_id(prefix: str) -> str:
    """A response id in OpenAI's style (`chatcmpl-...`, `cmpl-...`)."""
    return f"{prefix}-{uuid.uuid4().hex}"


def _chat_choice(index: int, answer: Answer, tools: tooling.ToolPlan | None) -> _ChatChoice:
    lp = chat_logprobs(answer.logprobs) if answer.logprobs is not None else None
    read = tools.read(answer.text) if tools is not None else tooling.ReadAnswer(answer.text, [])
    calls, content = read.calls, read.content
    message = _AssistantMessage("assistant", content, answer.reasoning, _tool_calls(calls) if calls else None)
    return _ChatChoice(index, message, "tool_calls" if calls else openai_finish_reason(answer.done), lp)


def chat_completion(model: str, answers: Sequence[Answer], tools: tooling.ToolPlan | None = None) -> bytes:
    """The body of a non-streaming chat answer, one choice per answer (`logprobs` when the request asked;
    `reasoning_content` when it thought; `tool_calls` when the request had tools and the answer is a call of one)."""
    choices = [_chat_choice(i, answer, tools) for i, answer in enumerate(answers)]
    usage = usage_of(*(a.done for a in answers))
    return msgspec.json.encode(ChatCompletion(new_id("chatcmpl"), int(time.time()), model, choices, usage))


def completion(model: str, answers: Sequence[Answer], prompts: int = 1) -> bytes:
    """The body of a non-streaming /v1/completions answer, one choice per answer, over `prompts` prompts
    (`logprobs` when the request asked for them; raw text is never split into a thought)."""
    choices = [
        CompletionChoice(
            i, a.text, openai_finish_reason(a.done), completion_logprobs(a.logprobs) if a.logprobs is not None else None
        )
        for i, a in enumerate(answers)
    ]
    usage = usage_of(*(a.done for a in answers), prompts=prompts)
    return msgspec.json.encode(Completion(new_id("cmpl"), int(time.time()), model, choices, usage))


@dataclass(frozen=True, slots=True)
class ListedModel:
    """What /v1/models says of one served id: its name, its other names, what it was loaded from (`root`: its hub
    repository; None says the id) and, for a LoRA adapter, the model it runs on (`parent`)."""

    name: str
    aliases: Sequence[str] = ()
    root: str | None = None
    parent: str | None = None


def model_object(model: ListedModel, created: int) -> dict[str, Any]:
    """One model as OpenAI lists it, with the other names a request may use for it (`aliases`: the catalogue name it
    was started with, such as `default`), and vLLM's `root` (the hub repository it was loaded from, else its id:
    never a path on the server's disk) and `parent` (an
    adapter's base model; null for a model)."""
    return {"id": model.name, "object": "model", "created": created, "owned_by": "modelhost",
            "aliases": list(model.aliases), "root": model.root or model.name, "parent": model.parent}  # fmt: skip


def models_list(models: Sequence[ListedModel], created: int) -> bytes:
    """GET /v1/models: every model this host serves, and every adapter after the models, each once."""
    data = [model_object(model, created) for model in models]
    return msgspec.json.encode({"object": "list", "data": data})

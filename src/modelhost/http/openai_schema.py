"""Every JSON shape of the HTTP door, in one module: OpenAI and Ollama requests, responses, stream chunks and errors.

The rest of the door (app.py) moves bytes and events; it never spells a field name. Requests are decoded with
msgspec Structs that forbid unknown fields, so a parameter we do not implement is refused with a 400 that names it
instead of being silently ignored (a client asking for `n=3` or `tools` must learn it got neither). Parameters
whose *neutral* value changes nothing (`n=1`, `presence_penalty=0`, `tools=[]`) are accepted, because many clients
send defaults explicitly.

Each parser returns a `ParsedRequest`: the host's GenerationRequest plus the few wire facts the response needs.
Host errors become wire errors in `from_host_error`, the one table of code -> (HTTP status, OpenAI error type).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec

from modelhost.errors import InvalidOptionError, ModelHostError, SchemaError, pointer
from modelhost.host.events import Done, Failed, GenerationRequest
from modelhost.http import tools as tooling
from modelhost.http.reasoning import ReasoningSplit
from modelhost.inference.options import ANY_JSON_OBJECT
from modelhost.inference.types import Channel, Message, TokenLogprob, ToolCall

# -- limits -------------------------------------------------------------------------------------------------------

#: Largest request body read. A page image as a data URI is a few MB; 32 MiB leaves room for several while bounding
#: what one client can make the process buffer before a single check has run.
MAX_BODY_BYTES = 32 * 1024 * 1024

#: Largest base64 text of one image, checked *before* decoding, so a hostile body cannot make us allocate the
#: decoded copy of something we would refuse anyway. 16 MiB of base64 is 12 MiB of PNG/JPEG: a 300 dpi A4 scan.
MAX_IMAGE_BASE64_CHARS = 16 * 1024 * 1024

#: Most images per request: each costs a vision encoder pass; past this it is a mistake or an attack.
MAX_IMAGES = 16

#: What OpenAI's /v1/completions does when `max_tokens` is absent. Kept, so clients written against OpenAI see the
#: length they expect (chat has no such default: the checkpoint's own bound applies).
COMPLETIONS_DEFAULT_MAX_TOKENS = 16

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_JPEG_MAGIC = b"\xff\xd8\xff"
_DATA_URI = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[\w.+-]+=[\w.+-]+)*);base64,", re.ASCII)
_IMAGE_MIMES = frozenset({"image/png", "image/jpeg", "image/jpg"})


# -- errors -------------------------------------------------------------------------------------------------------

ErrorType = Literal[
    "invalid_request_error", "authentication_error", "not_found_error", "rate_limit_error", "server_error"
]


class ApiError(Exception):
    """A request the door refuses or cannot finish, with everything both wire formats need to say why."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: ErrorType = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = dict(headers or {})


class _ErrorDetail(msgspec.Struct):
    message: str
    type: str
    param: str | None
    code: str | None


class _ErrorBody(msgspec.Struct):
    error: _ErrorDetail


def openai_error_body(err: ApiError) -> bytes:
    """OpenAI's error body: {"error": {"message", "type", "param", "code"}}."""
    return msgspec.json.encode(_ErrorBody(_ErrorDetail(err.message, err.type, err.param, err.code)))


def ollama_error_body(err: ApiError) -> bytes:
    """Ollama's error body: {"error": "message"}."""
    return msgspec.json.encode({"error": err.message})


# modelhost error code -> (HTTP status, OpenAI error type). Callers branch on the code (see modelhost.errors).
_HOST_ERRORS: dict[str, tuple[int, ErrorType]] = {
    "invalid_option": (400, "invalid_request_error"),
    "invalid_input": (400, "invalid_request_error"),
    "attachment_unsupported": (400, "invalid_request_error"),
    "queue_full": (429, "rate_limit_error"),
    "host_closed": (503, "server_error"),
    "model_closed": (503, "server_error"),
    "cancelled": (503, "server_error"),
    "generation_failed": (500, "server_error"),
    "internal": (500, "server_error"),
}


def from_host_error(code: str, message: str, *, param: str | None = None) -> ApiError:
    """The wire error for a modelhost error code (from an exception or a Failed event)."""
    status, kind = _HOST_ERRORS.get(code, (500, "server_error"))
    return ApiError(status, message, type=kind, param=param, code=code)


def from_host_exception(exc: ModelHostError, wire_names: Mapping[str, str]) -> ApiError:
    """The wire error for an exception `Host.submit` raised; an option error names the parameter the client sent."""
    param = None
    message = str(exc)
    if isinstance(exc, SchemaError):
        param, message = _schema_refusal(exc, wire_names)
    elif isinstance(exc, InvalidOptionError):
        param = wire_names.get(exc.option, exc.option)
        if param != exc.option:
            # The message names it too: Ollama's error body is the message alone, and `option 'max_tokens'` names
            # nothing an Ollama client sent (it sent options.num_predict).
            message = f"{param}: {exc.detail}"
    return from_host_error(exc.code, message, param=param)


def from_failure(failed: Failed, wire_names: Mapping[str, str]) -> ApiError:
    """The wire error of a request that failed mid-answer; one naming an option (a grammar with no token left to
    allow) names the parameter the client sent, as `from_host_exception` does at submit."""
    if failed.option is None:
        return from_host_error(failed.code, failed.message)
    param = wire_names.get(failed.option, failed.option)
    detail = failed.message.removeprefix(f"option {failed.option!r}: ")
    return from_host_error(failed.code, f"{param}: {detail}" if param != failed.option else failed.message, param=param)


def _schema_refusal(exc: SchemaError, wire_names: Mapping[str, str]) -> tuple[str, str]:
    """(param, message) of a refused schema: the parameter holding the deepest part of the schema the refusal is
    in (a tool's parameters inside a call schema), and where inside that parameter."""
    for cut in range(len(exc.at), -1, -1):
        param = wire_names.get(exc.option + (pointer(exc.at[:cut]) if cut else ""))
        if param is not None:
            return param, f"{param}: {exc.reason} (at {pointer(exc.at[cut:])})"
    return exc.option, str(exc)


# -- the request the app hands to the host --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """A decoded request: what to submit, and the wire facts its response needs."""

    generation: GenerationRequest
    stream: bool
    include_usage: bool = False
    logprobs: bool = False  # the answer carries each token's log-probability
    tools: tooling.ToolPlan | None = None  # the model may (or must) answer with tool calls
    n: int = 1  # choices: each is its own generation of the same request (OpenAI's `n`)
    #: /v1/completions given several prompts: one generation per prompt and choice (`generation` holds the first).
    prompts: tuple[str, ...] = ()
    # contract option name -> the parameter name the client used, so errors name what the client sent.
    wire_names: Mapping[str, str] = field(default_factory=dict)

    def choices(self) -> list[GenerationRequest]:
        """One generation per prompt and choice, in OpenAI's choice order (prompt by prompt, `n` each). With a
        `seed`, choice i of a prompt samples with seed + i: the choices differ from each other (n copies of one
        sample would be useless) and the whole answer is still reproducible."""
        bases = [replace(self.generation, prompt=p) for p in self.prompts] if self.prompts else [self.generation]
        if self.n == 1:
            return bases
        seed = self.generation.options.get("seed")
        out = []
        for base in bases:
            for i in range(self.n):
                options = dict(base.options)
                if seed is not None:
                    options["seed"] = (seed + i) % (1 << 64)  # the option's own range (inference.options)
                out.append(replace(base, options=options))
        return out


#: Longest piece of client text (a parameter name) an error message repeats: enough to recognise it, while a
#: 20 KB name sent to probe us is not echoed back whole (twice: in `message` and `param`).
MAX_ECHOED_CHARS = 100


def shown(text: str) -> str:
    """`text` for an error message: as is when short, else its start and how long it was."""
    if len(text) <= MAX_ECHOED_CHARS:
        return text
    return f"{text[:MAX_ECHOED_CHARS]}... ({len(text)} characters)"


def decode_json(body: bytes) -> Any:
    """Parse a body as JSON; a syntax error is a 400 that says where."""
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise ApiError(400, f"invalid JSON body: {exc}", code="invalid_json") from None
    except RecursionError:
        # msgspec refuses nesting past the interpreter's recursion limit with RecursionError, not DecodeError;
        # uncaught it became a 500 "internal" (and a logged traceback) for a malformed request.
        raise ApiError(400, "invalid JSON body: nested too deeply", code="invalid_json") from None


# msgspec says where a value failed as "... - at `$.messages[0].role`"; the param is that path without "$.".
_AT_PATH = re.compile(r" - at `\$\.?([^`]*)`$")
_UNKNOWN_FIELD = re.compile(r"unknown field `([^`]*)`")


def _convert(data: Any, kind: type[Any]) -> Any:
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    try:
        return msgspec.convert(data, kind, strict=True)
    except msgspec.ValidationError as exc:
        text = str(exc)
        unknown = _UNKNOWN_FIELD.search(text)
        at = _AT_PATH.search(text)
        path = at.group(1) if at else ""
        if unknown:
            name = shown(f"{path}.{unknown.group(1)}" if path else unknown.group(1))
            raise ApiError(
                400,
                f"unrecognized request argument supplied: {name} (modelhost refuses parameters it does not implement)",
                param=name,
                code="unsupported_parameter",
            ) from None
        raise ApiError(400, f"invalid request: {text}", param=path or None, code="invalid_value") from None


def _unsupported(param: str, why: str) -> ApiError:
    return ApiError(400, f"{param}: {why}", param=param, code="unsupported_parameter")


def _invalid(param: str, why: str) -> ApiError:
    return ApiError(400, f"{param}: {why}", param=param, code="invalid_value")


def _decode_image_base64(b64: str, param: str) -> bytes:
    """Base64 text of a PNG or JPEG -> its bytes, bounded before decoding; the backend decodes the pixels."""
    if len(b64) > MAX_IMAGE_BASE64_CHARS:
        raise ApiError(
            413 if len(b64) > MAX_BODY_BYTES else 400,
            f"image is {len(b64)} base64 characters; the limit is {MAX_IMAGE_BASE64_CHARS}",
            param=param,
            code="image_too_large",
        )
    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, "image is not valid base64", param=param, code="invalid_image") from None
    if not (data.startswith(_PNG_MAGIC) or data.startswith(_JPEG_MAGIC)):
        raise ApiError(400, "image must be PNG or JPEG", param=param, code="invalid_image")
    return data


def decode_image_data_uri(url: str, param: str) -> bytes:
    """A `data:image/png;base64,...` URI -> the encoded image bytes. Anything else (an http URL) is refused:
    the host reaches no network, and fetching on a client's behalf would make it a proxy."""
    match = _DATA_URI.match(url)
    if match is None:
        raise ApiError(
            400,
            "image_url must be a data URI (data:image/png;base64,... or data:image/jpeg;base64,...); "
            "modelhost fetches nothing from the network",
            param=param,
            code="invalid_image_url",
        )
    mime = (match.group("mime") or "").lower()
    if mime not in _IMAGE_MIMES:
        raise ApiError(400, f"image type {mime or '(none)'!r} is not supported; use PNG or JPEG", param=param)
    return _decode_image_base64(url[match.end() :], param)


# -- OpenAI requests ----------------------------------------------------------------------------------------------


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


class _Sampling(msgspec.Struct, forbid_unknown_fields=True):
    """Fields shared by chat and completions. Extensions beyond OpenAI (vLLM's names): top_k, min_p,
    repetition_penalty, min_tokens."""

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: _StreamOptions | None = None
    user: str | None = None  # an end-user id for the caller's own abuse tracking; nothing to do here
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
            raise _invalid("reasoning_effort", f"must be one of {', '.join(sorted(REASONING_EFFORTS))}")
        said, param = req.reasoning_effort != "none", "reasoning_effort"
    for key, value in (req.chat_template_kwargs or {}).items():
        if key != "enable_thinking":
            raise _unsupported(f"chat_template_kwargs.{shown(key)}", "only enable_thinking is supported")
        if not isinstance(value, bool):
            raise _invalid("chat_template_kwargs.enable_thinking", "must be true or false")
        if said is not None and said != value:
            raise _invalid("chat_template_kwargs.enable_thinking", "contradicts reasoning_effort")
        said, param = value, "chat_template_kwargs.enable_thinking"
    return said, param


class CompletionRequest(_Sampling, forbid_unknown_fields=True):
    """POST /v1/completions."""

    prompt: str | list[str] | None = None
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
            raise _unsupported(name, "is not supported; use repetition_penalty")
    if req.logit_bias:
        raise _unsupported("logit_bias", "is not supported")


def _sampling_options(req: _Sampling, max_tokens: int | None) -> tuple[dict[str, Any], dict[str, str]]:
    options: dict[str, Any] = {
        "max_tokens": max_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "seed": req.seed,
        "stop": req.stop,
        "top_k": req.top_k,
        "min_p": req.min_p,
        "repeat_penalty": req.repetition_penalty,
        "min_tokens": req.min_tokens,
    }
    return {k: v for k, v in options.items() if v is not None}, {"repeat_penalty": "repetition_penalty"}


def _chat_message(index: int, msg: _ChatMessage, images_so_far: int) -> Message:
    param = f"messages[{index}]"
    role = "system" if msg.role == "developer" else msg.role  # OpenAI's newer name for the system turn
    # Tool turns: an assistant's earlier calls and a tool's result go to the template as such (see tools.py).
    calls: tuple[ToolCall, ...] = ()
    if msg.tool_calls:
        if role != "assistant":
            raise _invalid(f"{param}.tool_calls", "only an assistant message carries tool_calls")
        calls = tooling.message_calls(msg.tool_calls, f"{param}.tool_calls", _invalid)
    if role == "tool" and not msg.tool_call_id:
        raise _invalid(f"{param}.tool_call_id", "a tool message must name the call it answers")
    if msg.tool_call_id is not None and role != "tool":
        raise _invalid(f"{param}.tool_call_id", "only a tool message carries tool_call_id")
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
                raise ApiError(400, f"at most {MAX_IMAGES} images per request", param=param, code="too_many_images")
            images.append(decode_image_data_uri(part.image_url.url, f"{param}.content[{j}].image_url.url"))
    # Text parts joined by newlines, as vLLM does: parts are separate paragraphs to the client that split them.
    return Message(role, "\n".join(texts), tuple(images), **tool_fields)


def parse_chat_completion(data: Any, request_id: str = "") -> ParsedRequest:
    """Decoded JSON of POST /v1/chat/completions -> ParsedRequest; raises ApiError naming the bad parameter."""
    req: ChatCompletionRequest = _convert(data, ChatCompletionRequest)
    _refuse_non_neutral(req)
    if req.top_logprobs is not None and not req.logprobs:
        raise ApiError(400, "top_logprobs requires logprobs: true", param="top_logprobs", code="invalid_value")
    if req.functions:
        raise _unsupported("functions", "the legacy functions API is not supported; use tools")
    tool_plan = tooling.plan(req.tools, req.tool_choice, _invalid, req.parallel_tool_calls)
    if tool_plan is not None and tool_plan.schema() is not None and req.response_format is not None:
        raise _unsupported("tool_choice", "a required tool call cannot be combined with response_format")
    if req.function_call not in (None, "none", "auto"):
        raise _unsupported("function_call", "the legacy functions API is not supported; use tool_choice")
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
        # The backend renders them through the model's own chat template (or its generic tools turn).
        options["tools"] = tool_plan.specs()
        names["tools"] = "tools"
        call_schema = tool_plan.schema()
        if call_schema is not None:
            options["json_schema"] = call_schema
            names["json_schema"] = "tools"
            names.update({"json_schema" + pointer(at): param for at, param in tool_plan.schema_params().items()})
    return ParsedRequest(
        GenerationRequest(messages=messages, options=options, request_id=request_id),
        stream=req.stream,
        include_usage=bool(req.stream_options and req.stream_options.include_usage),
        logprobs=bool(req.logprobs),
        tools=tool_plan if tool_plan is not None and tool_plan.reads_calls else None,  # "none": content only
        n=req.n or 1,
        wire_names=names,
    )


def parse_completion(data: Any, request_id: str = "") -> ParsedRequest:
    """Decoded JSON of POST /v1/completions -> ParsedRequest (a raw prompt: no chat template)."""
    req: CompletionRequest = _convert(data, CompletionRequest)
    _refuse_non_neutral(req)
    if req.echo:
        raise _unsupported("echo", "is not supported")
    if req.suffix:
        raise _unsupported("suffix", "fill-in-the-middle is not supported")
    if req.best_of not in (None, 1):
        raise _unsupported("best_of", "only best_of=1 is supported")
    prompts = req.prompt if isinstance(req.prompt, list) else None
    if prompts is not None and not prompts:
        raise ApiError(400, "prompt must not be an empty list", param="prompt", code="invalid_value")
    if prompts is not None and len(prompts) * (req.n or 1) > MAX_CHOICES:
        raise ApiError(
            400, f"at most {MAX_CHOICES} generations per request (prompts x n)", param="prompt", code="invalid_value"
        )
    prompt = prompts[0] if prompts is not None else req.prompt
    if not isinstance(prompt, str):
        raise ApiError(400, "prompt is required", param="prompt", code="invalid_value")
    limit = req.max_tokens if req.max_tokens is not None else COMPLETIONS_DEFAULT_MAX_TOKENS
    options, names = _sampling_options(req, limit)
    if req.logprobs is not None:  # an int on /v1/completions: the number of alternatives (0: the chosen token's only)
        options["logprobs"] = req.logprobs
    return ParsedRequest(
        GenerationRequest(prompt=prompt, options=options, request_id=request_id),
        stream=req.stream,
        include_usage=bool(req.stream_options and req.stream_options.include_usage),
        logprobs=req.logprobs is not None,
        n=req.n or 1,
        prompts=tuple(prompts) if prompts is not None and len(prompts) > 1 else (),
        wire_names=names,
    )


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
    per_prompt = max(1, len(dones) // prompts)
    prompt = sum(d.prompt_tokens for d in dones[::per_prompt])
    completion = sum(d.completion_tokens for d in dones)
    return Usage(prompt, completion, prompt + completion)


@dataclass(frozen=True, slots=True)
class Answer:
    """One choice of a non-streamed answer, as the door collected it."""

    text: str
    done: Done
    logprobs: Sequence[TokenLogprob] | None = None  # when the request asked for them
    reasoning: str | None = None  # a thinking model's thought, when it thought


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


class _Delta(msgspec.Struct, omit_defaults=True):
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


class _ChunkChoice(msgspec.Struct):
    index: int
    delta: _Delta
    finish_reason: str | None = None
    logprobs: dict[str, Any] | None = None


class ChatCompletionChunk(msgspec.Struct):
    """One server-sent event of a streamed chat answer."""

    id: str
    created: int
    model: str
    choices: list[_ChunkChoice]
    usage: Usage | None = None
    object: str = "chat.completion.chunk"


class _CompletionChoice(msgspec.Struct):
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
    choices: list[_CompletionChoice]
    usage: Usage | None = None
    object: str = "text_completion"


def new_id(prefix: str) -> str:
    """A response id in OpenAI's style (`chatcmpl-...`, `cmpl-...`)."""
    return f"{prefix}-{uuid.uuid4().hex}"


class OpenAIChatStream:
    """Serialises one streamed chat answer: a role chunk, content chunks, a finish chunk, an optional usage chunk."""

    def __init__(self, model: str, include_usage: bool, choice: int = 0) -> None:
        self.id = new_id("chatcmpl")
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        self.choice = choice  # this writer's index among a request's `n` choices
        self._split = ReasoningSplit()

    def _chunk(self, delta: _Delta, finish: str | None = None) -> bytes:
        choice = _ChunkChoice(self.choice, delta, finish)
        return sse(msgspec.json.encode(ChatCompletionChunk(self.id, self.created, self.model, [choice])))

    def started(self) -> bytes:
        """The role chunk, sent when the model takes the request (OpenAI sends it first)."""
        return self._chunk(_Delta(role="assistant", content=""))

    def delta(self, text: str, logprobs: Sequence[TokenLogprob] = (), channel: Channel = "content") -> bytes:
        """A content or reasoning_content chunk (with its tokens' log-probabilities when the request asked)."""
        content, thought = self._split.feed(text, channel)
        if not (content or thought or logprobs):
            return b""
        delta = _Delta(reasoning_content=thought) if thought else _Delta(content=content)
        choice = _ChunkChoice(self.choice, delta, None, chat_logprobs(logprobs) if logprobs else None)
        return sse(msgspec.json.encode(ChatCompletionChunk(self.id, self.created, self.model, [choice])))

    def done(self, done: Done, total_seconds: float) -> bytes:
        """The finish chunk, the usage chunk when asked for, and the [DONE] sentinel."""
        return self.finish(done) + self.closing(usage_of(done))

    def finish(self, done: Done) -> bytes:
        """This choice's finish chunk (a stream of several choices sends one per choice, then `closing` once)."""
        return self._chunk(_Delta(), openai_finish_reason(done))

    def closing(self, usage: Usage) -> bytes:
        """The end of the whole stream: the usage chunk when asked for, and the [DONE] sentinel."""
        if not self.include_usage:
            return SSE_DONE
        return sse(msgspec.json.encode(ChatCompletionChunk(self.id, self.created, self.model, [], usage))) + SSE_DONE

    def error(self, err: ApiError) -> bytes:
        """An error after the stream started; the openai client raises it as an APIError."""
        return sse_error(err)


class OpenAIToolStream(OpenAIChatStream):
    """A streamed chat answer of a request with tools, in OpenAI's shape: once the answer is known to be a call, the
    call's first delta carries `index`, `id`, `type` and `function.name` (with `arguments: ""`), and later deltas
    only `index` and the arguments' fragments as they are generated. Text that may still be a call is held back;
    text that is not one streams as content (see tools.CallReader); the finish reason of a call is "tool_calls"."""

    def __init__(self, model: str, include_usage: bool, tools: tooling.ToolPlan, choice: int = 0) -> None:
        super().__init__(model, include_usage, choice)
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
                choice = _ChunkChoice(self.choice, _Delta(tool_calls=[call]), None, lp)
                out += sse(msgspec.json.encode(ChatCompletionChunk(self.id, self.created, self.model, [choice])))
            logprobs = ()
        return out + (super().delta("", logprobs) if logprobs else b"")

    def delta(self, text: str, logprobs: Sequence[TokenLogprob] = (), channel: Channel = "content") -> bytes:
        """Content goes through the call reader; thought goes out as usual."""
        if channel != "content":
            return super().delta(text, logprobs, channel)
        return self._events(self._reader.feed(text), logprobs)

    def finish(self, done: Done) -> bytes:
        """What was held back (content when it was not a call), then the finish chunk: "tool_calls" when the answer
        made calls that ended (a call cut off by max_tokens finishes "length", as OpenAI's does)."""
        out = self._events(self._reader.close(), ())
        if self._reader.calls and self._reader.complete:
            return out + self._chunk(_Delta(), "tool_calls")
        return out + super().finish(done)


class OpenAICompletionStream:
    """Serialises one streamed /v1/completions answer."""

    def __init__(self, model: str, include_usage: bool, choice: int = 0) -> None:
        self.id = new_id("cmpl")
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        self.choice = choice  # this writer's index among a request's `n` choices
        self._offset = 0  # characters of token text streamed so far (logprobs' text_offset)

    def _chunk(self, text: str, finish: str | None = None) -> bytes:
        choice = _CompletionChoice(self.choice, text, finish)
        return sse(msgspec.json.encode(Completion(self.id, self.created, self.model, [choice])))

    def started(self) -> bytes:
        """Nothing: completions have no role chunk."""
        return b""

    def delta(self, text: str, logprobs: Sequence[TokenLogprob] = (), channel: Channel = "content") -> bytes:
        """A text chunk (with its tokens' log-probabilities when the request asked); raw text is not split."""
        if not logprobs:
            return self._chunk(text)
        choice = _CompletionChoice(self.choice, text, None, completion_logprobs(logprobs, self._offset))
        self._offset += sum(len(e.text) for e in logprobs)
        return sse(msgspec.json.encode(Completion(self.id, self.created, self.model, [choice])))

    def done(self, done: Done, total_seconds: float) -> bytes:
        """The finish chunk, the usage chunk when asked for, and the [DONE] sentinel."""
        return self.finish(done) + self.closing(usage_of(done))

    def finish(self, done: Done) -> bytes:
        """This choice's finish chunk (a stream of several choices sends one per choice, then `closing` once)."""
        return self._chunk("", openai_finish_reason(done))

    def closing(self, usage: Usage) -> bytes:
        """The end of the whole stream: the usage chunk when asked for, and the [DONE] sentinel."""
        if not self.include_usage:
            return SSE_DONE
        return sse(msgspec.json.encode(Completion(self.id, self.created, self.model, [], usage))) + SSE_DONE

    def error(self, err: ApiError) -> bytes:
        """An error after the stream started; the openai client raises it as an APIError."""
        return sse_error(err)


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
        _CompletionChoice(
            i, a.text, openai_finish_reason(a.done), completion_logprobs(a.logprobs) if a.logprobs is not None else None
        )
        for i, a in enumerate(answers)
    ]
    usage = usage_of(*(a.done for a in answers), prompts=prompts)
    return msgspec.json.encode(Completion(new_id("cmpl"), int(time.time()), model, choices, usage))


def models_list(models: Sequence[str], created: int) -> bytes:
    """GET /v1/models: every model this host serves."""
    data = [{"id": model, "object": "model", "created": created, "owned_by": "modelhost"} for model in models]
    return msgspec.json.encode({"object": "list", "data": data})


def sse(payload: bytes) -> bytes:
    """One server-sent event carrying a JSON payload."""
    return b"data: " + payload + b"\n\n"


#: The sentinel that ends an OpenAI stream.
SSE_DONE = b"data: [DONE]\n\n"


def sse_error(err: ApiError) -> bytes:
    """An error inside an already-started stream; the openai client raises it as an APIError."""
    return sse(openai_error_body(err)) + SSE_DONE


# -- Ollama requests ----------------------------------------------------------------------------------------------

# Ollama options that configure loading (context size, threads, GPU layers). They are fixed by whoever started the
# host, not per request; Ollama clients send them routinely, so they are accepted and have no effect.
_OLLAMA_LOAD_OPTIONS = frozenset(
    {
        "num_ctx", "num_batch", "num_gpu", "main_gpu", "low_vram", "num_thread", "use_mmap", "use_mlock", "numa",
        "vocab_only", "f16_kv", "num_keep", "logits_all", "embedding_only",
        # mirostat's own tuning: without mirostat (only 0 is accepted, below) they change nothing, at any value.
        "mirostat_tau", "mirostat_eta",
    }
)  # fmt: skip
# Ollama sampling options accepted only at the value that disables them.
_OLLAMA_NEUTRAL: dict[str, Any] = {
    "mirostat": 0,
    "tfs_z": 1.0,
    "typical_p": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "penalize_newline": False,
    # Not "off" but the window both backends' repeat_penalty looks at (Ollama's default too); no other is built.
    "repeat_last_n": 64,
}
# Ollama option -> contract option.
_OLLAMA_SAMPLING = {
    "num_predict": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "seed": "seed",
    "stop": "stop",
    "repeat_penalty": "repeat_penalty",
}


class _OllamaMessage(msgspec.Struct, forbid_unknown_fields=True):
    role: str
    content: str = ""
    images: list[str] | None = None
    thinking: str | None = None
    tool_calls: list[Any] | None = None
    tool_name: str | None = None


class _OllamaCommon(msgspec.Struct, forbid_unknown_fields=True):
    model: str = ""
    stream: bool = True  # Ollama streams unless told not to
    options: dict[str, Any] | None = None
    format: str | dict[str, Any] | None = None
    keep_alive: str | float | None = None  # the host keeps its model loaded for its whole life
    # true/false, or an effort level ("low", "medium", "high": Ollama's values, the client's `think` type), which
    # turns thinking on: the contract has no effort option, and a thinking template only opens or closes the thought.
    think: bool | Literal["low", "medium", "high"] | None = None
    tools: list[Any] | None = None
    # Each token's log-probability (and `top_logprobs` alternatives): the entries of OpenAI's chat logprobs.
    logprobs: bool | None = None
    top_logprobs: int | None = None


class OllamaChatRequest(_OllamaCommon, forbid_unknown_fields=True):
    """POST /api/chat."""

    messages: list[_OllamaMessage] = msgspec.field(default_factory=list)


class OllamaGenerateRequest(_OllamaCommon, forbid_unknown_fields=True):
    """POST /api/generate."""

    prompt: str = ""
    system: str | None = None
    images: list[str] | None = None
    raw: bool = False
    template: str | None = None
    context: list[int] | None = None
    suffix: str | None = None


def _ollama_format(fmt: str | dict[str, Any] | None) -> dict[str, Any] | None:
    """Ollama's `format`: "json" (any JSON object, as Ollama's own JSON mode) or a JSON Schema."""
    if fmt is None or fmt == "":
        return None
    if fmt == "json":
        return dict(ANY_JSON_OBJECT)
    if isinstance(fmt, dict):
        return fmt
    raise ApiError(400, f'format must be "json" or a JSON Schema object, got {shown(fmt)!r}', param="format",
                   code="invalid_value")  # fmt: skip


def _ollama_options(req: _OllamaCommon) -> tuple[dict[str, Any], dict[str, str]]:
    options: dict[str, Any] = {}
    names: dict[str, str] = {}
    for key, value in (req.options or {}).items():
        if key in _OLLAMA_LOAD_OPTIONS:
            continue
        if key in _OLLAMA_NEUTRAL:
            if value != _OLLAMA_NEUTRAL[key]:
                raise _unsupported(f"options.{key}", f"only {_OLLAMA_NEUTRAL[key]!r} is supported")
            continue
        target = _OLLAMA_SAMPLING.get(key)
        if target is None:
            raise _unsupported(f"options.{shown(key)}", "is not a supported option")
        if key == "num_predict" and isinstance(value, int) and value < 0:
            continue  # Ollama's -1 ("no limit") and -2 ("fill the context"): the checkpoint's own bound applies
        options[target] = value
        names[target] = f"options.{key}"
    if req.top_logprobs and not req.logprobs:
        raise _invalid("top_logprobs", "requires logprobs: true")
    if req.logprobs:
        options["logprobs"] = req.top_logprobs or 0
        names["logprobs"] = "top_logprobs" if req.top_logprobs else "logprobs"
    if req.think is not None:
        options["enable_thinking"] = req.think is not False
        names["enable_thinking"] = "think"
    schema = _ollama_format(req.format)
    if schema is not None:
        options["json_schema"] = schema
        names["json_schema"] = "format"
    return options, names


def _ollama_images(images: Sequence[str] | None, param: str, images_so_far: int = 0) -> tuple[bytes, ...]:
    if not images:
        return ()
    # Counted over the whole request (as the OpenAI path does): per message, many messages would carry any number
    # of images, each a vision encoder pass.
    if images_so_far + len(images) > MAX_IMAGES:
        raise ApiError(400, f"at most {MAX_IMAGES} images per request", param=param, code="too_many_images")
    # Ollama sends bare base64; some clients send a data URI there too.
    return tuple(
        decode_image_data_uri(img, f"{param}[{i}]") if img.startswith("data:") else _decode_image_base64(img, param)
        for i, img in enumerate(images)
    )


def parse_ollama_chat(data: Any, request_id: str = "") -> ParsedRequest:
    """Decoded JSON of POST /api/chat -> ParsedRequest."""
    req: OllamaChatRequest = _convert(data, OllamaChatRequest)
    options, names = _ollama_options(req)
    # Ollama has no tool_choice: the model may call a tool or answer (OpenAI's "auto"); calls are read as on the
    # OpenAI door and sent in Ollama's shape (OllamaStream).
    tool_plan = tooling.plan(req.tools, None, _invalid)
    if tool_plan is not None:
        options["tools"] = tool_plan.specs()
        names["tools"] = "tools"
    if not req.messages:
        raise ApiError(400, "messages must be a non-empty list", param="messages", code="invalid_value")
    messages = []
    images = 0
    for i, msg in enumerate(req.messages):
        calls: tuple[ToolCall, ...] = ()
        if msg.tool_calls:
            if msg.role != "assistant":
                raise _invalid(f"messages[{i}].tool_calls", "only an assistant message carries tool_calls")
            calls = tooling.message_calls(msg.tool_calls, f"messages[{i}].tool_calls", _invalid)
        if msg.tool_name is not None and msg.role != "tool":
            raise _invalid(f"messages[{i}].tool_name", "only a tool message carries tool_name")
        attached = _ollama_images(msg.images, f"messages[{i}].images", images)
        messages.append(Message(msg.role, msg.content, attached, tool_calls=calls, name=msg.tool_name or ""))
        images += len(messages[-1].images)
    return ParsedRequest(GenerationRequest(messages=messages, options=options, request_id=request_id), req.stream,
                         logprobs=bool(req.logprobs), tools=tool_plan, wire_names=names)  # fmt: skip


def parse_ollama_generate(data: Any, request_id: str = "") -> ParsedRequest | None:
    """Decoded JSON of POST /api/generate -> ParsedRequest, or None for Ollama's "load the model" call (no prompt).

    Without `raw`, Ollama applies the model's chat template to the prompt as one user turn (after `system`), so we
    send it as chat; with `raw`, the prompt goes to the model as is.
    """
    req: OllamaGenerateRequest = _convert(data, OllamaGenerateRequest)
    options, names = _ollama_options(req)
    if req.tools:
        raise _unsupported("tools", "tools are for /api/chat (a call needs a conversation to answer it in)")
    if req.template:
        raise _unsupported("template", "the model's own chat template is always used")
    if req.context:
        raise _unsupported("context", "continuing from a token context is not supported; use /api/chat")
    if req.suffix:
        raise _unsupported("suffix", "fill-in-the-middle is not supported")
    images = _ollama_images(req.images, "images")
    if not req.prompt and not images:
        return None
    if req.raw:
        if images:
            raise _unsupported("images", "raw prompts cannot carry images; drop raw to use the chat template")
        generation = GenerationRequest(prompt=req.prompt, options=options, request_id=request_id)
    else:
        turns = [Message("system", req.system)] if req.system else []
        turns.append(Message("user", req.prompt, images))
        generation = GenerationRequest(messages=turns, options=options, request_id=request_id)
    return ParsedRequest(generation, req.stream, logprobs=bool(req.logprobs), wire_names=names)


# -- Ollama responses ---------------------------------------------------------------------------------------------


def ollama_timestamp(at: float | None = None) -> str:
    """RFC 3339 in UTC with nanosecond-style precision, as Ollama writes `created_at`."""
    moment = datetime.fromtimestamp(time.time() if at is None else at, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"


def _ns(seconds: float) -> int:
    return int(seconds * 1e9) if math.isfinite(seconds) else 0


def _ollama_stats(done: Done, total_seconds: float, load_seconds: float = 0.0) -> dict[str, Any]:
    m = done.metrics
    return {
        "done_reason": "length" if done.finish_reason == "length" else "stop",
        "total_duration": _ns(total_seconds + load_seconds),  # Ollama's total includes the load
        "load_duration": _ns(load_seconds),  # how long the request waited for its model to load (0: it was loaded)
        "prompt_eval_count": done.prompt_tokens,
        "prompt_eval_duration": _ns(m.prefill_seconds),
        "eval_count": done.completion_tokens,
        "eval_duration": _ns(m.decode_seconds),
    }


def ollama_logprobs(entries: Sequence[TokenLogprob]) -> list[dict[str, Any]]:
    """Ollama's `logprobs`: [{token, logprob, bytes, top_logprobs}] (OpenAI's chat entries, without the wrapper)."""
    content: list[dict[str, Any]] = chat_logprobs(entries)["content"]
    return content


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

    def started(self) -> bytes:
        """Nothing: Ollama has no role line."""
        return b""

    def delta(self, text: str, logprobs: Sequence[TokenLogprob] = (), channel: Channel = "content") -> bytes:
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
        stats = _ollama_stats(done, total_seconds, self.load_seconds)
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


def ollama_tags(models: Sequence[tuple[str, str, int]], modified: float) -> bytes:
    """GET /api/tags: every model this host serves, (name, family, size in bytes), in Ollama's listing shape."""
    entries = []
    for model, family, size in models:
        details = {"format": "", "family": family, "families": [family], "parameter_size": "", "quantization_level": ""}
        entries.append(
            {
                "name": model,
                "model": model,
                "modified_at": ollama_timestamp(modified),
                "size": size,
                "digest": "",
                "details": details,
            }
        )
    return msgspec.json.encode({"models": entries})

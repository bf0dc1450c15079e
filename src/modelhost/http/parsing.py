"""What both protocols' request parsers share: the bounded body read, JSON decoding, msgspec conversion with errors
that name the parameter, and `ParsedRequest`, the host's GenerationRequest plus the wire facts a response needs.

Requests are decoded with msgspec Structs that forbid unknown fields, so a parameter we do not implement is refused
with a 400 that names it instead of being silently ignored (a client asking for `logit_bias` must learn it got none).
Parameters whose *neutral* value changes nothing (`n=1`, `presence_penalty=0`, `tools=[]`) are accepted, because
many clients send defaults explicitly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec
from starlette.requests import ClientDisconnect, Request

from modelhost.host.events import GenerationRequest
from modelhost.http import tools as tooling
from modelhost.http.errors import ApiError, client_gone

#: Largest request body read. A page image as a data URI is a few MB; 32 MiB leaves room for several while bounding
#: what one client can make the process buffer before a single check has run.
MAX_BODY_BYTES = 32 * 1024 * 1024

#: Longest piece of client text (a parameter name) an error message repeats: enough to recognise it, while a
#: 20 KB name sent to probe us is not echoed back whole (twice: in `message` and `param`).
MAX_ECHOED_CHARS = 100


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """A decoded request: what to submit, and the wire facts its response needs."""

    generation: GenerationRequest
    stream: bool
    include_usage: bool = False
    #: vLLM's stream_options.continuous_usage_stats: every chunk carries the usage so far.
    continuous_usage: bool = False
    logprobs: bool = False  # the answer carries each token's log-probability
    tools: tooling.ToolPlan | None = None  # the model may (or must) answer with tool calls
    n: int = 1  # choices: each is its own generation of the same request (OpenAI's `n`)
    #: /v1/completions given several prompts: one generation per prompt and choice (`generation` holds the first).
    prompts: tuple[str, ...] = ()
    #: /v1/completions given token ids: one id sequence per prompt, read into `prompts` by the handler (it needs
    #: the model's tokenizer) before anything is submitted.
    prompt_ids: tuple[tuple[int, ...], ...] = ()
    # contract option name -> the parameter name the client used, so errors name what the client sent.
    wire_names: Mapping[str, str] = field(default_factory=dict)

    def generations(self) -> list[GenerationRequest]:
        """One generation per prompt, in OpenAI's choice order; each is checked once and submitted `n` times (the
        host's Admission: with a `seed`, choice i of a prompt samples with seed + i, so the choices differ from each
        other and the whole answer is still reproducible)."""
        return [replace(self.generation, prompt=p) for p in self.prompts] if self.prompts else [self.generation]


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


def convert(data: Any, kind: type[Any]) -> Any:
    """A decoded JSON body as the request Struct `kind`; an unknown field or a wrong type is a 400 naming it."""
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


def unsupported(param: str, why: str) -> ApiError:
    """A 400 for a parameter (or a value of one) this door does not implement."""
    return ApiError(400, f"{param}: {why}", param=param, code="unsupported_parameter")


def invalid(param: str, why: str) -> ApiError:
    """A 400 for a parameter whose value is wrong."""
    return ApiError(400, f"{param}: {why}", param=param, code="invalid_value")


#: Media types a JSON route refuses (415). Any other Content-Type, or none, is read as JSON: Ollama's own examples
#: (`curl -d '{...}'`) send application/x-www-form-urlencoded, and scripts often send text/plain, so insisting on
#: application/json would break real clients for no safety gain (a non-JSON body fails to parse with a 400 that says
#: where). A multipart body can never be JSON and means the client meant an upload: say so rather than "invalid JSON".
_NOT_JSON_TYPES = ("multipart/",)


async def read_json(request: Request) -> Any:
    """The body, bounded by MAX_BODY_BYTES before it is all in memory, parsed as JSON."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type.startswith(_NOT_JSON_TYPES):
        raise ApiError(
            415, f"this route takes a JSON body, not {media_type}", param="Content-Type", code="unsupported_media_type"
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _too_large()
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                raise _too_large()
    except ClientDisconnect:
        # A client that hangs up mid-body is not a server fault: count it as 499, log no traceback.
        raise client_gone() from None
    return decode_json(bytes(body))


def _too_large() -> ApiError:
    return ApiError(413, f"request body exceeds {MAX_BODY_BYTES} bytes", code="body_too_large")

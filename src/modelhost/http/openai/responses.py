"""OpenAI's Responses API (`POST /v1/responses`), shaped as OpenAI and vLLM answer it: the request (parsed into the
same `ParsedRequest` a chat completion makes) and the whole `response` object. The streamed events are written by
`responses_stream`.

What maps onto what: `input` (a string, or items: messages with `input_text` / `input_image` / `output_text` parts,
earlier `function_call`s and their `function_call_output`s) and `instructions` become chat turns; `tools` (OpenAI's
flat function tools) and `tool_choice` the chat door's tool plan; `text.format` the `json_schema` option;
`reasoning.effort` the thought switch; `max_output_tokens` the bound. The answer is `output` items: a `reasoning`
item when the model thought, a `message` with one `output_text`, or `function_call` items.

Nothing is stored (`store` is accepted and changes nothing), so what needs a stored response is refused with a 400
naming it: `previous_response_id`, `background`, `include`. So are tools other than functions (web search, file
search: the host reaches no network and holds no files).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from modelhost.host.events import Done, GenerationRequest
from modelhost.http import tools as tooling
from modelhost.http.images import MAX_IMAGES, decode_image_data_uri, too_many_images
from modelhost.http.openai.schema import REASONING_EFFORTS, add_tools
from modelhost.http.parsing import ParsedRequest, convert, invalid, shown, unsupported
from modelhost.http.relay import Answer
from modelhost.inference.options import ANY_JSON_OBJECT
from modelhost.inference.types import Message, ToolCall

_ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}


class _Format(msgspec.Struct, forbid_unknown_fields=True):
    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    schema: dict[str, Any] | None = None
    description: str | None = None
    strict: bool | None = None  # the schema is always enforced (constrained decoding), strict or not


class _Text(msgspec.Struct, forbid_unknown_fields=True):
    format: _Format | None = None
    verbosity: str | None = None  # a hint to OpenAI's models about length; max_output_tokens bounds it here


class _Reasoning(msgspec.Struct, forbid_unknown_fields=True):
    effort: str | None = None
    summary: str | None = None  # the thought itself is returned (as vLLM does); no summary is written
    generate_summary: str | None = None  # the older name of `summary`


class ResponsesRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/responses. `input` items are checked by hand, so each refusal names `input[i]...`."""

    model: str | None = None
    input: Any = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stream: bool = False
    tools: list[Any] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: _Text | None = None
    reasoning: _Reasoning | None = None
    # Hints that change nothing about the answer (see README "What the OpenAI door accepts").
    store: bool | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    service_tier: str | None = None
    truncation: Literal["auto", "disabled"] | None = None  # over-long input is refused either way, never cut
    # Refused unless unset: they need a stored response or a background run (see the module doc).
    previous_response_id: str | None = None
    background: bool | None = None
    include: list[str] | None = None
    # vLLM's sampling extensions, as on the chat route.
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class ParsedResponses:
    """A Responses request: what the host runs, and what the response object repeats back."""

    parsed: ParsedRequest
    echo: dict[str, Any]  # the request's settings as the response object carries them


def _part_text(part: Any, where: str, images: list[bytes], images_so_far: int) -> str:
    if not isinstance(part, dict):
        raise invalid(where, "must be a content part object")
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text"):
        text = part.get("text")
        if not isinstance(text, str):
            raise invalid(f"{where}.text", "must be a string")
        return text
    if kind == "input_image":
        url = part.get("image_url")
        if not isinstance(url, str):
            raise unsupported(f"{where}.image_url", "an image is given as a data URI in image_url (no file_id)")
        if images_so_far + len(images) >= MAX_IMAGES:
            raise too_many_images(where)
        images.append(decode_image_data_uri(url, f"{where}.image_url"))
        return ""
    raise unsupported(f"{where}.type", f"content part {str(kind)[:40]!r} is not supported")


def _message(item: dict[str, Any], where: str, images_so_far: int) -> Message:
    role = _ROLES.get(item.get("role", ""))
    if role is None:
        raise invalid(f"{where}.role", "must be user, system, developer or assistant")
    content = item.get("content", "")
    if isinstance(content, str):
        return Message(role, content)
    if not isinstance(content, list):
        raise invalid(f"{where}.content", "must be a string or a list of content parts")
    images: list[bytes] = []
    texts = [_part_text(p, f"{where}.content[{j}]", images, images_so_far) for j, p in enumerate(content)]
    return Message(role, "\n".join(t for t in texts if t), tuple(images))


def _call(item: dict[str, Any], where: str) -> ToolCall:
    name, arguments, call_id = item.get("name"), item.get("arguments", "{}"), item.get("call_id")
    if not isinstance(name, str) or not name:
        raise invalid(f"{where}.name", "must be a non-empty string")
    if not isinstance(call_id, str) or not call_id:
        raise invalid(f"{where}.call_id", "must be a non-empty string")
    if not isinstance(arguments, str) or not tooling.is_object(arguments):
        raise invalid(f"{where}.arguments", "must be JSON text of an object")
    return ToolCall(name, arguments, call_id)


def _turns(value: Any, instructions: str | None) -> list[Message]:
    """`instructions` and `input` as chat turns: consecutive function calls make one assistant turn."""
    turns = [Message("system", instructions)] if instructions else []
    if isinstance(value, str):
        return [*turns, Message("user", value)]
    if not isinstance(value, list) or not value:
        raise invalid("input", "must be a string or a non-empty list of input items")
    images = 0
    calls: set[str] = set()  # the call_ids of the function calls so far: what an output may answer
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise invalid(where, "must be an input item object")
        kind = item.get("type", "message")
        if kind == "message":
            turns.append(_message(item, where, images))
            images += len(turns[-1].images)
        elif kind == "function_call":
            call = _call(item, where)
            calls.add(call.id)
            last = turns[-1] if turns else None
            if last is not None and last.role == "assistant" and last.tool_calls and not last.content:
                turns[-1] = Message("assistant", "", tool_calls=(*last.tool_calls, call))
            else:
                turns.append(Message("assistant", "", tool_calls=(call,)))
        elif kind == "function_call_output":
            call_id, output = item.get("call_id"), item.get("output")
            if not isinstance(call_id, str) or not call_id:
                raise invalid(f"{where}.call_id", "must name the call it answers")
            if call_id not in calls:
                # As OpenAI refuses it ("No tool call found for function call output"): nothing is stored here, so
                # the call it answers must be an earlier `function_call` item of this same input.
                raise invalid(f"{where}.call_id", f"no function_call item before it has call_id {shown(call_id)!r}")
            if not isinstance(output, str):
                raise invalid(f"{where}.output", "must be a string")
            turns.append(Message("tool", output, tool_call_id=call_id))
        elif kind == "reasoning":
            continue  # an earlier thought: chat templates drop thoughts from the history too
        else:
            raise unsupported(f"{where}.type", f"input item {str(kind)[:40]!r} is not supported")
    if not turns:
        raise invalid("input", "has nothing for the model to answer")
    return turns


def _tools(tools: Sequence[Any] | None) -> list[Any] | None:
    """Responses' flat function tools in the chat door's nested shape (the one tools.plan reads)."""
    if not tools:
        return None
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise unsupported(f"tools[{i}].type", f"only function tools are served, not {str(kind)[:40]!r}")
        function = {k: v for k, v in tool.items() if k != "type"}
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
    if isinstance(choice, dict) and choice.get("type") == "function" and "function" not in choice:
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


def parse_responses(data: Any, request_id: str = "") -> ParsedResponses:
    """Decoded JSON of POST /v1/responses -> ParsedResponses; raises ApiError naming the bad parameter."""
    req: ResponsesRequest = convert(data, ResponsesRequest)
    if req.previous_response_id:
        raise unsupported("previous_response_id", "responses are not stored here; send the whole conversation")
    if req.background:
        raise unsupported("background", "responses run while the request is open")
    if req.include:
        raise unsupported("include", "no extra output is available")
    turns = _turns(req.input, req.instructions)
    chat_tools = _tools(req.tools)
    plan = tooling.plan(chat_tools, _tool_choice(req.tool_choice), invalid, req.parallel_tool_calls)
    fmt = req.text.format if req.text is not None else None
    if plan is not None and plan.schema() is not None and fmt is not None and fmt.type != "text":
        raise unsupported("tool_choice", "a required tool call cannot be combined with text.format")
    options: dict[str, Any] = {
        "max_tokens": req.max_output_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "top_k": req.top_k,
        "min_p": req.min_p,
        "repeat_penalty": req.repetition_penalty,
        "seed": req.seed,
    }
    options = {k: v for k, v in options.items() if v is not None}
    names = {"max_tokens": "max_output_tokens", "repeat_penalty": "repetition_penalty"}
    if fmt is not None and fmt.type != "text":
        options["json_schema"] = fmt.schema if fmt.type == "json_schema" and fmt.schema else dict(ANY_JSON_OBJECT)
        names["json_schema"] = "text.format"
    effort = req.reasoning.effort if req.reasoning is not None else None
    if effort is not None:
        if effort not in REASONING_EFFORTS:
            raise invalid("reasoning.effort", f"must be one of {', '.join(sorted(REASONING_EFFORTS))}")
        options["enable_thinking"] = effort != "none"
        names["enable_thinking"] = "reasoning.effort"
    if plan is not None:
        # Responses' tools are flat: `tools[i].parameters` where the chat shape says `tools[i].function.parameters`.
        add_tools(plan, options, names, lambda param: param.replace(".function.parameters", ".parameters"))
    parsed = ParsedRequest(
        GenerationRequest(messages=turns, options=options, request_id=request_id),
        stream=req.stream,
        tools=plan if plan is not None and plan.reads_calls else None,
        wire_names=names,
    )
    echo = {
        "instructions": req.instructions,
        "max_output_tokens": req.max_output_tokens,
        "metadata": req.metadata or {},
        "parallel_tool_calls": req.parallel_tool_calls is not False,
        "previous_response_id": None,
        "reasoning": {"effort": effort, "summary": None},
        "store": bool(req.store),
        "temperature": req.temperature,
        "text": {"format": msgspec.to_builtins(fmt) if fmt is not None else {"type": "text"}},
        "tool_choice": req.tool_choice or "auto",
        "tools": list(req.tools or []),
        "top_p": req.top_p,
        "truncation": req.truncation or "disabled",
        "user": req.user,
    }
    return ParsedResponses(parsed, echo)


# -- the response object ---------------------------------------------------------------------------------------


def new_id(prefix: str) -> str:
    """An item or response id in OpenAI's style (`resp_...`, `msg_...`, `fc_...`, `rs_...`)."""
    return f"{prefix}_{uuid.uuid4().hex}"


def usage(done: Done) -> dict[str, Any]:
    """Responses' usage: input and output tokens (the model's own counts)."""
    return {
        "input_tokens": done.prompt_tokens,
        "input_tokens_details": {"cached_tokens": done.metrics.cached_prompt_tokens},
        "output_tokens": done.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": done.prompt_tokens + done.completion_tokens,
    }


def response_object(
    response_id: str,
    created: int,
    model: str,
    echo: dict[str, Any],
    output: list[dict[str, Any]],
    done: Done | None,
) -> dict[str, Any]:
    """The `response` object: in progress (no `done` yet), completed, or incomplete (cut by max_output_tokens)."""
    if done is None:
        status, incomplete = "in_progress", None
    elif done.finish_reason == "length":
        status, incomplete = "incomplete", {"reason": "max_output_tokens"}
    else:
        status, incomplete = "completed", None
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "model": model,
        "output": output,
        "usage": usage(done) if done is not None else None,
        **echo,
    }


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    """An assistant `message` output item with one `output_text` part."""
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": [part]}


def reasoning_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    """A `reasoning` output item carrying the model's thought as `reasoning_text` (vLLM's shape)."""
    return {
        "type": "reasoning", "id": item_id, "status": status, "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
    }  # fmt: skip


def call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    """A `function_call` output item."""
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments,
            "status": status}  # fmt: skip


def whole(model: str, parsed: ParsedResponses, answer: Answer) -> bytes:
    """The body of a non-streamed response: its output items, in the order the model produced them."""
    output: list[dict[str, Any]] = []
    if answer.reasoning:
        output.append(reasoning_item(new_id("rs"), answer.reasoning))
    plan = parsed.parsed.tools
    read = plan.read(answer.text) if plan is not None else tooling.ReadAnswer(answer.text, [])
    # A message when there is a reply, or when nothing else was made (an empty answer is still an answer).
    if read.content or not (read.calls or output):
        output.append(message_item(new_id("msg"), read.content or ""))
    output.extend(call_item(new_id("fc"), c.id, c.name, c.arguments) for c in read.calls)
    body = response_object(new_id("resp"), int(time.time()), model, parsed.echo, output, answer.done)
    return msgspec.json.encode(body)

"""Ollama's JSON shapes of /api/chat and /api/generate: the requests (parsed into a `ParsedRequest` for the host,
with Ollama's `options` mapped onto the contract's) and the pieces of its answers (timestamps, durations, logprobs,
the model listing). The NDJSON lines of an answer are written by `ollama.streams`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec

from modelhost.host.events import Done, GenerationRequest
from modelhost.http import tools as tooling
from modelhost.http.errors import ApiError
from modelhost.http.images import MAX_IMAGES, decode_image_base64, decode_image_data_uri, too_many_images
from modelhost.http.openai.schema import chat_logprobs
from modelhost.http.parsing import ParsedRequest, convert, invalid, shown, unsupported
from modelhost.inference.options import ANY_JSON_OBJECT
from modelhost.inference.types import Message, TokenLogprob, ToolCall

# Ollama options that configure loading (context size, threads, GPU layers). They are fixed by whoever started the
# host, not per request; Ollama clients send them routinely, so they are accepted and have no effect.
LOAD_OPTIONS = frozenset(
    {
        "num_ctx", "num_batch", "num_gpu", "main_gpu", "low_vram", "num_thread", "use_mmap", "use_mlock", "numa",
        "vocab_only", "f16_kv", "num_keep", "logits_all", "embedding_only",
        # mirostat's own tuning: without mirostat (only 0 is accepted, below) they change nothing, at any value.
        "mirostat_tau", "mirostat_eta",
    }
)  # fmt: skip
# Ollama sampling options accepted only at the value that disables them.
NEUTRAL_OPTIONS: dict[str, Any] = {
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
SAMPLING_OPTIONS = {
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
        if key in LOAD_OPTIONS:
            continue
        if key in NEUTRAL_OPTIONS:
            if value != NEUTRAL_OPTIONS[key]:
                raise unsupported(f"options.{key}", f"only {NEUTRAL_OPTIONS[key]!r} is supported")
            continue
        target = SAMPLING_OPTIONS.get(key)
        if target is None:
            raise unsupported(f"options.{shown(key)}", "is not a supported option")
        if key == "num_predict" and isinstance(value, int) and value < 0:
            continue  # Ollama's -1 ("no limit") and -2 ("fill the context"): the checkpoint's own bound applies
        options[target] = value
        names[target] = f"options.{key}"
    if req.top_logprobs and not req.logprobs:
        raise invalid("top_logprobs", "requires logprobs: true")
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
        raise too_many_images(param)
    # Ollama sends bare base64; some clients send a data URI there too.
    return tuple(
        decode_image_data_uri(img, f"{param}[{i}]") if img.startswith("data:") else decode_image_base64(img, param)
        for i, img in enumerate(images)
    )


def parse_ollama_chat(data: Any, request_id: str = "") -> ParsedRequest:
    """Decoded JSON of POST /api/chat -> ParsedRequest."""
    req: OllamaChatRequest = convert(data, OllamaChatRequest)
    options, names = _ollama_options(req)
    # Ollama has no tool_choice: the model may call a tool or answer (OpenAI's "auto"); calls are read as on the
    # OpenAI door and sent in Ollama's shape (OllamaStream).
    tool_plan = tooling.plan(req.tools, None, invalid)
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
                raise invalid(f"messages[{i}].tool_calls", "only an assistant message carries tool_calls")
            calls = tooling.message_calls(msg.tool_calls, f"messages[{i}].tool_calls", invalid)
        if msg.tool_name is not None and msg.role != "tool":
            raise invalid(f"messages[{i}].tool_name", "only a tool message carries tool_name")
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
    req: OllamaGenerateRequest = convert(data, OllamaGenerateRequest)
    options, names = _ollama_options(req)
    if req.tools:
        raise unsupported("tools", "tools are for /api/chat (a call needs a conversation to answer it in)")
    if req.template:
        raise unsupported("template", "the model's own chat template is always used")
    if req.context:
        raise unsupported("context", "continuing from a token context is not supported; use /api/chat")
    if req.suffix:
        raise unsupported("suffix", "fill-in-the-middle is not supported")
    images = _ollama_images(req.images, "images")
    if not req.prompt and not images:
        return None
    if req.raw:
        if images:
            raise unsupported("images", "raw prompts cannot carry images; drop raw to use the chat template")
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


def done_stats(done: Done, total_seconds: float, load_seconds: float = 0.0) -> dict[str, Any]:
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


def tags(
    models: Sequence[tuple[str, dict[str, Any], int, str]],
    modified: float,
    cached: Mapping[str, dict[str, Any]] | None = None,
) -> bytes:
    """GET /api/tags: every model this host serves, (name, details, size on disk, digest: ollama/facts.py), in
    Ollama's listing shape; then the `cached` entries by name (the pulled models in the hub cache, ollama/pull.py).
    A served model that is also a pulled one is listed once, with the cache's facts and its family."""
    pulled = dict(cached or {})
    entries = []
    for model, details, size, digest in models:
        entry: dict[str, Any] = {
            "name": model,
            "model": model,
            "modified_at": ollama_timestamp(modified),
            "size": size,
            "digest": digest,
            "details": details,
        }
        if model in pulled:
            entry = pulled.pop(model)
            if details["family"]:
                entry["details"] = {**entry["details"], "family": details["family"], "families": details["families"]}
        entries.append(entry)
    return msgspec.json.encode({"models": [*entries, *pulled.values()]})

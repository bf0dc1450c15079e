"""The text operations: `text.chat` (a conversation through the model's chat template, pictures allowed for a
vision model) and `text.generate` (a raw prompt). Both write output.txt and result.json (usage and timings), and
report progress token by token with an honest estimate of the time left."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from modelhost.errors import InvalidOptionError
from modelhost.host import Admission, Delta, Done, Failed, GenerationRequest, Started
from modelhost.host.models import Servable
from modelhost.inference.capabilities import OptionChecker, as_capability
from modelhost.inference.options import DEFAULT_MAX_TOKENS, GenerateOptions
from modelhost.inference.types import Message
from modelhost.jobs.operation import JobContext, Operation, host_failure, submit_to_host
from modelhost.worker import protocol
from modelhost.worker.pictures import uploaded_images
from modelhost.worker.protocol import failed, invalid

#: would promise an end far too early or too late.
RATE_MIN_TOKENS = 4
#: Generation options a text job may set in its input, beside `messages` or `prompt`.
TEXT_OPTIONS = frozenset(
    {
        "max_tokens",
        "temperature",
        "top_k",
        "top_p",
        "min_p",
        "seed",
        "stop",
        "min_tokens",
        "repeat_penalty",
        "enable_thinking",
        "thinking_budget",
        # A JSON Schema the answer must match (constrained decoding): a batch of structured-extraction jobs.
        "json_schema",
    }
)


def _options(value: dict[str, Any], host: Servable) -> dict[str, Any]:
    """The generation options of a text job's input, checked at submission (a value out of range is the job's
    fault: 400), and, when `host`'s model is loaded, checked by the model too (a JSON Schema its grammar engine
    cannot enforce)."""
    options = _job_options(value)
    try:
        parsed = GenerateOptions.parse(options)
        checker = as_capability(getattr(host, "model", None), OptionChecker) if host.ready else None
        if checker is not None:
            checker.check_options(parsed)
    except InvalidOptionError as exc:
        raise invalid(str(exc)) from exc
    return options


def _job_options(value: dict[str, Any]) -> dict[str, Any]:
    """The generation options of a text job's input, as the host takes them. Not parsed here when the job runs: the
    host's precheck parses them, once, and its refusal is the job's fault (invalid), as at submission."""
    options = {k: v for k, v in value.items() if k in TEXT_OPTIONS}
    seed = options.get("seed")
    # The seed's `seed()`: a negative seed means "any": the engine then draws one.
    if isinstance(seed, int) and not isinstance(seed, bool) and seed < 0:
        del options["seed"]
    # The worker always pins max_tokens so `total` in the progress is the real bound, not a guess.
    options.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
    return options


def _chat_items(value: Any) -> list[dict[str, Any]]:
    """The `messages` of a text.chat input, each checked for shape (no picture is read here)."""
    if not isinstance(value, dict):
        raise invalid("text.chat input must be a JSON object")
    raw = value.get("messages")
    if not isinstance(raw, list) or not raw:
        raise invalid("text.chat needs `messages`: a non-empty list of {role, content, images?}")
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("role"), str):
            raise invalid(f"messages[{i}] must be an object with a string `role`")
        if not isinstance(item.get("content", ""), str):
            raise invalid(f"messages[{i}].content must be a string")
    return raw


def _refuse_images(items: list[dict[str, Any]], host: Servable) -> None:
    # Before a byte of any picture is decoded (an 8192x8192 PNG is ~200 MB of RGB): a text-only model refuses it
    # anyway. A host still loading does not know yet; the executor asks again before decoding.
    if host.ready and not host.accepts_images and any(item.get("images") is not None for item in items):
        raise invalid(f"model {host.name!r} does not accept image input")


def _messages(items: list[dict[str, Any]]) -> list[Message]:
    return [
        Message(
            item["role"],
            item.get("content", ""),
            images=tuple(uploaded_images(item, "images")) if item.get("images") is not None else (),
        )
        for item in items
    ]


def check_text_chat(value: Any, host: Servable) -> None:
    """The submission-time check of a text.chat input: its shape, its options, and no picture for a text model."""
    _refuse_images(_chat_items(value), host)
    _options(value, host)


def _prompt(value: Any) -> str:
    if not isinstance(value, dict) or not isinstance(value.get("prompt"), str):
        raise invalid("text.generate needs `prompt`: a string")
    return str(value["prompt"])


def check_text_generate(value: Any, host: Servable) -> None:
    """The submission-time check of a text.generate input: a string prompt and valid options."""
    _prompt(value)
    _options(value, host)


async def text_chat(ctx: JobContext) -> list[str]:
    """`text.chat`: input `{"messages": [{"role", "content", "images"?}], max_tokens?, temperature?, seed?, ...}`;
    `images` is one uploaded picture or a list (decoded at PICTURE_SIDE). Outputs output.txt and result.json."""
    value = ctx.work.input
    items = _chat_items(value)
    options = _job_options(value)
    ctx.progress(protocol.STAGE_INITIALIZING)
    _refuse_images(items, ctx.host)
    # Decoding pictures is CPU work: off the event loop.
    messages = await asyncio.to_thread(_messages, items)
    return await _generate(ctx, GenerationRequest(messages=messages, options=options, request_id=ctx.work.id))


async def text_generate(ctx: JobContext) -> list[str]:
    """`text.generate`: input `{"prompt": str, max_tokens?, temperature?, seed?, ...}` (no chat template).
    Outputs output.txt and result.json."""
    value = ctx.work.input
    request = GenerationRequest(prompt=_prompt(value), options=_job_options(value), request_id=ctx.work.id)
    return await _generate(ctx, request)


async def _generate(ctx: JobContext, request: GenerationRequest) -> list[str]:
    bound = request.options["max_tokens"]
    # Checked at submission, and by the host's precheck below (a bad value is refused there: the job's fault).
    total = bound if isinstance(bound, int) and not isinstance(bound, bool) else 0
    ctx.progress(protocol.STAGE_INITIALIZING, 0, total)
    admitted: list[Admission] = []  # the request checked once (Host.precheck); a retry submits the same admission

    async def precheck() -> None:
        if not admitted or admitted[0].engine_request is None:  # an unchecked one: the model was not loaded yet
            admitted[:] = [await ctx.host.precheck(request)]

    stream = await submit_to_host(ctx, lambda: ctx.host.submit(admitted[0] if admitted else request), precheck)
    ctx.on_cancel(stream.cancel)
    pieces: list[str] = []
    queued = 0.0
    first_at = 0.0
    first_tokens = 0
    done: Done | None = None
    async with stream:
        async for event in stream:
            if isinstance(event, Started):
                queued = event.queued_seconds
                ctx.progress(protocol.STAGE_ENCODING_PROMPT, 0, total)
            elif isinstance(event, Delta):
                pieces.append(event.text)
                now = time.perf_counter()
                if not first_at:
                    first_at, first_tokens = now, event.tokens
                remaining = _remaining(event.tokens - first_tokens, now - first_at, total - event.tokens)
                ctx.progress(protocol.STAGE_GENERATING, event.tokens, total, remaining)
            elif isinstance(event, Done):
                done = event
            elif isinstance(event, Failed):
                raise host_failure(event.code, event.message)  # its kind's worker class (modelhost.errors)
    if done is None or done.finish_reason == "cancelled":
        raise ctx.stopped() if ctx.cancelled else failed(protocol.WORKER_INTERRUPTED, "the host stopped the job")
    text = "".join(pieces)
    m = done.metrics
    result = {
        "model": ctx.work.model,
        "operation": ctx.work.operation,
        "finish_reason": done.finish_reason,
        **({"json": _parsed(text)} if "json_schema" in request.options else {}),
        "usage": {
            "prompt_tokens": done.prompt_tokens,
            "completion_tokens": done.completion_tokens,
            "total_tokens": done.prompt_tokens + done.completion_tokens,
        },
        "timings": {
            "queued_seconds": queued,
            "prefill_seconds": m.prefill_seconds,
            "decode_seconds": m.decode_seconds,
            "total_seconds": m.total_seconds,
            "prefill_tokens_per_second": m.prefill_tokens_per_second,
            "decode_tokens_per_second": m.decode_tokens_per_second,
        },
    }
    await asyncio.to_thread(_write_outputs, ctx.dir, text, result)
    return ["output.txt", "result.json"]


def _parsed(text: str) -> Any:
    """The answer of a json_schema job as JSON (None when it was cut by max_tokens before it was complete)."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def _remaining(tokens: int, seconds: float, left: int) -> float:
    # Honest means measured: no estimate until a few tokens give a rate; then the rest at that rate (an upper
    # bound, since the model may stop before max_tokens).
    if tokens < RATE_MIN_TOKENS or seconds <= 0 or left <= 0:
        return 0.0
    return round(left * seconds / tokens, 3)


def _write_outputs(out: Path, text: str, result: dict[str, Any]) -> None:
    (out / "output.txt").write_text(text, encoding="utf-8")
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


CHAT = Operation("text.chat", text_chat, check_text_chat)
GENERATE = Operation("text.generate", text_generate, check_text_generate)

"""What the Ollama door says about its models: the per-request `keep_alive`, GET /api/ps and POST /api/show.

Ollama clients (Open WebUI, the ollama CLI, LangChain's Ollama classes) send `keep_alive` with their requests and
expect it honoured: "5m" keeps the model loaded five minutes after the request, "0" unloads it as soon as it is
idle (and `/api/generate` with no prompt and `keep_alive: 0` is Ollama's way to unload a model now), a negative
value keeps it loaded for good. The last request's value wins, as in Ollama; a request without one goes back to
the server's own policy (`--keep-alive`). Pinned models (the socket door's) stay loaded whatever a request says.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from typing import Any

import msgspec

from modelhost.host.models import ServedModel
from modelhost.http.door import running_context
from modelhost.http.errors import ApiError
from modelhost.http.ollama import facts
from modelhost.http.ollama.schema import ollama_timestamp
from modelhost.http.parsing import ParsedRequest, shown
from modelhost.hub import created
from modelhost.inference.capabilities import ChatFeatures, EmbeddingModel, as_capability

#: Seconds per unit of a Go duration (Ollama parses `keep_alive` strings with Go's time.ParseDuration).
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")

#: Longest keep-alive kept as a deadline; anything longer is "for good". A client's `1e308` or `99999999h` must not
#: overflow the monotonic-clock arithmetic of the sweep (inf + clock is fine, a finite overflow to inf is not).
FOREVER_SECONDS = 100 * 365 * 86400.0

#: Longest `keep_alive` string read: a Go duration of a few parts is a dozen characters, and a megabyte of "1h"
#: repeated must not cost a regex scan of that size.
MAX_DURATION_CHARS = 64


def parse_keep_alive(value: Any) -> float | None:
    """A request's `keep_alive` as seconds (math.inf: for good), or None when it sent none.

    Numbers are seconds; strings are Go durations ("5m", "1h30m", "250ms", "-1m") or plain numbers of seconds;
    negative means for good. Anything else is a 400 naming `keep_alive`."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise _invalid(value)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and len(value) <= MAX_DURATION_CHARS:
        seconds = _duration(value.strip())
    else:
        raise _invalid(value)
    if math.isnan(seconds):
        raise _invalid(value)
    return math.inf if seconds < 0 or seconds > FOREVER_SECONDS else seconds


def _duration(text: str) -> float:
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    try:
        return sign * float(body)  # a plain number of seconds ("300", "0", "-1")
    except ValueError:
        pass
    total, at = 0.0, 0
    for part in _PART.finditer(body):
        if part.start() != at:
            break
        total += float(part.group(1)) * _UNITS[part.group(2)]
        at = part.end()
    if not body or at != len(body):
        raise _invalid(text)
    return sign * total


def _invalid(value: Any) -> ApiError:
    return ApiError(
        400,
        f'keep_alive: {shown(str(value))!r} is not a duration (use seconds, or a duration like "5m", "1h30m", '
        '"0" to unload when idle, "-1" to keep loaded)',
        param="keep_alive",
        code="invalid_value",
    )


def body_keep_alive(body: Any) -> float | None:
    """The `keep_alive` of a decoded request body (None when absent or the body is not an object)."""
    return parse_keep_alive(body.get("keep_alive")) if isinstance(body, dict) else None


def unloaded(model: str) -> bytes:
    """The answer to Ollama's unload call (`/api/generate` with no prompt and `keep_alive: 0`)."""
    return msgspec.json.encode(
        {"model": model, "created_at": ollama_timestamp(), "response": "", "done": True, "done_reason": "unload"}
    )


def show(model: ServedModel, made: created.CreatedModel | None = None) -> bytes:
    """POST /api/show: what a model is and can do, in Ollama's shape. `capabilities` is what clients such as Open
    WebUI read to offer image upload, tools, a thinking toggle or embeddings for a model: "completion" always,
    "vision" when the loaded checkpoint takes images, "tools" when its chat template renders tools, "thinking" when
    it has a thought channel, "embedding" when it pools vectors. An unloaded model is described by name only
    (showing a model must not load it). A model `made` by /api/create or /api/copy also gives back what it was made
    with, as Ollama does: its `modelfile`, `parameters`, `template` and `system`, and its source as `parent_model`."""
    info: dict[str, Any] = {}
    capabilities = ["completion"]
    if model.ready:
        loaded = model.model
        known = loaded.info()
        arch = known.architecture
        info = {"general.architecture": arch}
        for key, value in (
            ("context_length", known.context_length),  # the trained length (ps says the one it runs with)
            ("embedding_length", known.hidden_size),
            ("block_count", known.num_layers),
            ("vocab_size", known.vocab_size),
        ):
            if value:
                info[f"{arch}.{key}"] = value
        if model.accepts_images:
            capabilities.append("vision")
        features = as_capability(loaded, ChatFeatures)
        if features is not None and features.renders_tools():
            capabilities.append("tools")
        if features is not None and features.thinks():
            capabilities.append("thinking")
        if as_capability(loaded, EmbeddingModel) is not None:
            capabilities.append("embedding")
    details = {"parent_model": "", **facts.details(model)}
    if made is not None:
        details["parent_model"] = made.source
    made_with: dict[str, str] = {"modelfile": "", "parameters": "", "template": ""}
    if made is not None:
        made_with = {
            "modelfile": created.modelfile(made),
            "parameters": created.parameters_text(made),
            "template": made.template or "",
            **({"system": made.system} if made.system is not None else {}),
        }
    return msgspec.json.encode(
        {
            **made_with,
            "details": details,
            "model_info": info,
            "capabilities": capabilities,
            "modified_at": ollama_timestamp(),
        }
    )


def check_think(model: ServedModel, parsed: ParsedRequest) -> None:
    """Refuse `think: true` (or an effort level) for a loaded model without a thought channel, as Ollama does (a 400
    naming `think`), so a client that asked for a thought is told it gets none instead of a plain answer it would
    take for a thoughtless one. `think: false` is always fine. A model that does not say (no ChatFeatures: a stand-in,
    a third-party backend) is not refused: the door refuses only what the model says it cannot do."""
    if not parsed.generation.options.get("enable_thinking") or not model.ready:
        return
    features = as_capability(model.model, ChatFeatures)
    if features is not None and not features.thinks():
        raise ApiError(400, f"think: model {model.name!r} does not support thinking (it has no thought channel); "
                       "send think: false or leave it out", param="think", code="invalid_value")  # fmt: skip


def ps(models: Iterable[ServedModel], default_keep_alive: float | None) -> bytes:
    """GET /api/ps: the models resident now (loaded or loading), each with when it would be unloaded if left idle
    (`expires_at`; far in the future for one kept for good), in Ollama's shape. All memory is host memory here, so
    `size_vram` is 0. `context_length` is the context the model runs with (Ollama's meaning here); /api/show's
    `model_info.<arch>.context_length` is the trained one, as Ollama's is."""
    now_wall, now = time.time(), time.monotonic()
    entries = []
    for model in models:
        host = model.host
        if host is None or host.state in ("failed", "closing", "closed"):
            continue
        keep = model.keep_alive_seconds(default_keep_alive)
        left = FOREVER_SECONDS if keep is None or math.isinf(keep) else max(0.0, model.last_used + keep - now)
        entry: dict[str, Any] = {
            "name": model.name,
            "model": model.name,
            # What it holds in memory, by the budget's estimate (weights and KV cache); /api/tags says the disk's.
            "size": model.size,
            "digest": facts.digest(model.path),
            "details": facts.details(model),
            "expires_at": ollama_timestamp(now_wall + left),
            "size_vram": 0,
        }
        if model.ready and (context := running_context(model.model)):
            # Ollama lists the context each loaded model runs with (the client reads it as ps().context_length).
            entry["context_length"] = context
        entries.append(entry)
    return msgspec.json.encode({"models": entries})

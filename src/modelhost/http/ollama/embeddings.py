"""Ollama's POST /api/embed and its older POST /api/embeddings: the requests and the answers (see
`modelhost.http.embeddings` for what both protocols share)."""

from __future__ import annotations

from typing import Any

import msgspec

from modelhost.http.embeddings import ParsedEmbedding, encode_floats, texts
from modelhost.http.errors import ApiError
from modelhost.http.ollama.schema import LOAD_OPTIONS, NEUTRAL_OPTIONS, SAMPLING_OPTIONS
from modelhost.http.parsing import convert, shown
from modelhost.inference.types import EmbeddingResult


class OllamaEmbedRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /api/embed. Ollama truncates over-long input unless told `truncate: false`."""

    model: str = ""
    input: Any = None
    truncate: bool = True
    options: dict[str, Any] | None = None
    keep_alive: str | float | None = None  # the host's keep-alive policy decides, as on the other Ollama routes
    dimensions: int | None = None


class OllamaEmbeddingsRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /api/embeddings, Ollama's older route: one `prompt`, one raw (unnormalised) vector."""

    model: str = ""
    prompt: str = ""
    options: dict[str, Any] | None = None
    keep_alive: str | float | None = None


def parse_embed(body: Any) -> ParsedEmbedding:
    """The request body of /api/embed, or an ApiError naming the parameter."""
    req: OllamaEmbedRequest = convert(body, OllamaEmbedRequest)
    inputs = texts(req.input, "input")
    _check_options(req.options)
    options: dict[str, Any] = {"normalize": True, "truncate": req.truncate}
    if req.dimensions is not None:
        options["dimensions"] = req.dimensions
    return ParsedEmbedding(inputs, options, "float", {"dimensions": "dimensions"})


def parse_embeddings(body: Any) -> ParsedEmbedding:
    """The request body of /api/embeddings (older Ollama): its `prompt`, unnormalised, truncated like Ollama."""
    req: OllamaEmbeddingsRequest = convert(body, OllamaEmbeddingsRequest)
    if not req.prompt:
        raise ApiError(400, "prompt: nothing to embed (empty)", param="prompt", code="invalid_value")
    _check_options(req.options)
    return ParsedEmbedding([req.prompt], {"normalize": False, "truncate": True})


def embed_response(model: str, result: EmbeddingResult, seconds: float, load_seconds: float = 0.0) -> bytes:
    """Ollama's /api/embed answer: {"model", "embeddings": [[...]], "total_duration", "load_duration",
    "prompt_eval_count"}; durations in nanoseconds, load the time the request waited for its model (0: loaded)."""
    return msgspec.json.encode(
        {
            "model": model,
            "embeddings": [encode_floats(v) for v in result.vectors],
            "total_duration": int((seconds + load_seconds) * 1e9),
            "load_duration": int(load_seconds * 1e9),
            "prompt_eval_count": int(result.prompt_tokens),
        }
    )


def embeddings_response(result: EmbeddingResult) -> bytes:
    """Ollama's older /api/embeddings answer: {"embedding": [...]}."""
    return msgspec.json.encode({"embedding": encode_floats(result.vectors[0])})


def _check_options(options: dict[str, Any] | None) -> None:
    # Loading options are fixed by whoever started the host and sampling options draw no tokens here: both change
    # nothing about a vector, so they are accepted (clients send them routinely). Anything else is refused.
    known = LOAD_OPTIONS | SAMPLING_OPTIONS.keys() | NEUTRAL_OPTIONS.keys()
    for key in options or {}:
        if key not in known:
            raise ApiError(400, f"options.{shown(key)}: is not a supported option",
                           param=f"options.{shown(key)}", code="unsupported_parameter")  # fmt: skip

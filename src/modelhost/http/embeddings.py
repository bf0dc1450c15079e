"""Every JSON shape of the embedding routes: OpenAI's POST /v1/embeddings, Ollama's POST /api/embed and its older
POST /api/embeddings, their errors, and the float / base64 encodings of a vector.

app.py moves the bytes (read the body, submit to the model's host, await the ticket); this module never touches a
host. Requests decode into msgspec Structs that forbid unknown fields, so a parameter we do not implement is a 400
naming it, as on the chat routes.

Normalisation: /v1/embeddings and /api/embed return unit-length (L2-normalised) vectors, as OpenAI's models, Ollama's
/api/embed and llama-server's /v1/embeddings do, so a client's cosine similarity is a dot product and vectors from
different requests compare directly. Ollama's older /api/embeddings returns the raw pooled vector, as Ollama does.

Base64: OpenAI's `encoding_format: "base64"` carries each vector as the base64 of its little-endian float32 bytes;
the openai Python client asks for it by default (when the caller names no format) and decodes it with
`np.frombuffer(base64.b64decode(s), dtype="float32")`. It is 4 bytes per value against ~20 as JSON text.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import numpy as np

from modelhost.errors import EmbeddingUnsupportedError, InvalidInputError, InvalidOptionError, ModelHostError
from modelhost.http import openai_schema as schema
from modelhost.http.openai_schema import ApiError
from modelhost.inference.capabilities import MAX_EMBEDDING_INPUTS
from modelhost.inference.types import EmbeddingResult

EncodingFormat = Literal["float", "base64"]


@dataclass(frozen=True, slots=True)
class ParsedEmbedding:
    """A decoded embedding request: the texts, the host's options, and what the answer's shape needs."""

    texts: list[str]
    options: dict[str, Any] = field(default_factory=dict)  # Host.submit_embedding's keywords
    encoding_format: EncodingFormat = "float"
    #: Contract option name -> the parameter the client sent, so an error names what the client wrote.
    wire_names: Mapping[str, str] = field(default_factory=dict)


# -- OpenAI ---------------------------------------------------------------------------------------------------------


class OpenAIEmbeddingRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/embeddings. `input` is checked by hand: msgspec cannot tell str from list-of-str from token ids in
    one union, and the errors must say which input is wrong."""

    input: Any = None
    model: str | None = None
    encoding_format: EncodingFormat | None = None  # null or absent: "float", as OpenAI's API documents
    dimensions: int | None = None
    user: str | None = None  # an end-user id for the caller's own abuse tracking; nothing to do here


def parse_openai(body: Any) -> ParsedEmbedding:
    """The request body of /v1/embeddings, or an ApiError naming the parameter."""
    req: OpenAIEmbeddingRequest = schema._convert(body, OpenAIEmbeddingRequest)
    texts = _texts(req.input, "input", token_ids=True)
    if req.dimensions is not None and req.dimensions < 1:
        raise ApiError(400, "dimensions must be at least 1", param="dimensions", code="invalid_value")
    options: dict[str, Any] = {"normalize": True, "truncate": False}  # OpenAI refuses over-long input
    if req.dimensions is not None:
        options["dimensions"] = req.dimensions
    return ParsedEmbedding(texts, options, req.encoding_format or "float", {"dimensions": "dimensions"})


class _Vector(msgspec.Struct):
    object: str
    index: int
    embedding: list[float] | str


class _Usage(msgspec.Struct):
    prompt_tokens: int
    total_tokens: int


class _OpenAIList(msgspec.Struct):
    object: str
    data: list[_Vector]
    model: str
    usage: _Usage


def openai_response(model: str, parsed: ParsedEmbedding, result: EmbeddingResult) -> bytes:
    """OpenAI's answer: {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model",
    "usage"}; each embedding a list of floats or a base64 string, as `encoding_format` asked."""
    data = [
        _Vector("embedding", i, encode_base64(v) if parsed.encoding_format == "base64" else encode_floats(v))
        for i, v in enumerate(result.vectors)
    ]
    tokens = int(result.prompt_tokens)
    return msgspec.json.encode(_OpenAIList("list", data, model, _Usage(tokens, tokens)))


def encode_floats(vector: np.ndarray) -> list[float]:
    """A vector as JSON numbers: each float32 widened to a Python float (exactly its value, so a client that reads
    it back as float32 gets the same bits)."""
    return vector.astype(np.float64).tolist()  # type: ignore[no-any-return]


def encode_base64(vector: np.ndarray) -> str:
    """A vector as OpenAI's base64: the little-endian float32 bytes, whatever this machine's byte order."""
    return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_base64(text: str) -> np.ndarray:
    """The inverse of `encode_base64` (for clients and tests): a float32 vector."""
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)


# -- Ollama ---------------------------------------------------------------------------------------------------------


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


def parse_ollama_embed(body: Any) -> ParsedEmbedding:
    """The request body of /api/embed, or an ApiError naming the parameter."""
    req: OllamaEmbedRequest = schema._convert(body, OllamaEmbedRequest)
    texts = _texts(req.input, "input", token_ids=False)
    _check_ollama_options(req.options)
    options: dict[str, Any] = {"normalize": True, "truncate": req.truncate}
    if req.dimensions is not None:
        options["dimensions"] = req.dimensions
    return ParsedEmbedding(texts, options, "float", {"dimensions": "dimensions"})


def parse_ollama_embeddings(body: Any) -> ParsedEmbedding:
    """The request body of /api/embeddings (older Ollama): its `prompt`, unnormalised, truncated like Ollama."""
    req: OllamaEmbeddingsRequest = schema._convert(body, OllamaEmbeddingsRequest)
    if not req.prompt:
        raise ApiError(400, "prompt: nothing to embed (empty)", param="prompt", code="invalid_value")
    _check_ollama_options(req.options)
    return ParsedEmbedding([req.prompt], {"normalize": False, "truncate": True})


def ollama_embed_response(model: str, result: EmbeddingResult, seconds: float, load_seconds: float = 0.0) -> bytes:
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


def ollama_embeddings_response(result: EmbeddingResult) -> bytes:
    """Ollama's older /api/embeddings answer: {"embedding": [...]}."""
    return msgspec.json.encode({"embedding": encode_floats(result.vectors[0])})


def _check_ollama_options(options: dict[str, Any] | None) -> None:
    # Loading options are fixed by whoever started the host and sampling options draw no tokens here: both change
    # nothing about a vector, so they are accepted (clients send them routinely). Anything else is refused.
    known = schema._OLLAMA_LOAD_OPTIONS | schema._OLLAMA_SAMPLING.keys() | schema._OLLAMA_NEUTRAL.keys()
    for key in options or {}:
        if key not in known:
            raise ApiError(400, f"options.{schema.shown(key)}: is not a supported option",
                           param=f"options.{schema.shown(key)}", code="unsupported_parameter")  # fmt: skip


# -- shared ---------------------------------------------------------------------------------------------------------


def _texts(value: Any, param: str, *, token_ids: bool) -> list[str]:
    """`input` as a list of non-empty strings: a string, or a list of them. Token-id arrays are refused (see below)."""
    if isinstance(value, str):
        items: list[Any] = [value]
    elif isinstance(value, list):
        items = value
    elif value is None:
        raise ApiError(400, f"{param}: required (a string or a list of strings)", param=param, code="invalid_value")
    else:
        raise ApiError(400, f"{param}: must be a string or a list of strings, got {type(value).__name__}",
                       param=param, code="invalid_value")  # fmt: skip
    if not items:
        raise ApiError(400, f"{param}: the list is empty; nothing to embed", param=param, code="invalid_value")
    if len(items) > MAX_EMBEDDING_INPUTS:
        raise ApiError(400, f"{param}: {len(items)} inputs; at most {MAX_EMBEDDING_INPUTS} per request",
                       param=param, code="too_many_inputs")  # fmt: skip
    for i, item in enumerate(items):
        if isinstance(item, str):
            if not item:
                raise ApiError(400, f"{param}[{i}]: an empty string has nothing to embed", param=param,
                               code="invalid_value")  # fmt: skip
            continue
        if token_ids and (isinstance(item, int) or (isinstance(item, list) and all(isinstance(t, int) for t in item))):
            # Refused, not guessed at: OpenAI clients send token ids of OpenAI's tokenizer (tiktoken; LangChain does
            # by default), which mean nothing to this model's vocabulary.
            raise ApiError(
                400,
                f"{param}: token-id arrays are not supported (they would be another tokenizer's ids); send text "
                "(LangChain: OpenAIEmbeddings(check_embedding_ctx_length=False))",
                param=param,
                code="unsupported_parameter",
            )
        raise ApiError(400, f"{param}[{i}]: must be a string, got {type(item).__name__}", param=param,
                       code="invalid_value")  # fmt: skip
    return items


def error(exc: ModelHostError, wire_names: Mapping[str, str] | None = None) -> ApiError:
    """The wire error for a host error of an embedding: the model cannot embed (400 naming `model`), an input the
    model refused (400 naming `input`), an option (400 naming it), else the door's usual table."""
    if isinstance(exc, EmbeddingUnsupportedError):
        return ApiError(400, str(exc), param="model", code=exc.code)
    if isinstance(exc, InvalidInputError):
        return ApiError(400, str(exc), param="input", code=exc.code)
    if isinstance(exc, InvalidOptionError):
        return schema.from_host_exception(exc, wire_names or {})
    return schema.from_host_error(exc.code, str(exc))

"""OpenAI's POST /v1/embeddings: the request and the answer (vectors as float lists or base64, see
`modelhost.http.embeddings`). Requests decode into a Struct that forbids unknown fields, as on the chat routes."""

from __future__ import annotations

from typing import Any

import msgspec

from modelhost.http.embeddings import EncodingFormat, ParsedEmbedding, encode_base64, encode_floats, texts
from modelhost.http.errors import ApiError
from modelhost.http.openai import tokens
from modelhost.http.parsing import convert
from modelhost.inference.capabilities import MAX_EMBEDDING_INPUTS
from modelhost.inference.types import EmbeddingResult


class OpenAIEmbeddingRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/embeddings. `input` is checked by hand: msgspec cannot tell str from list-of-str from token ids in
    one union, and the errors must say which input is wrong."""

    input: Any = None
    model: str | None = None
    encoding_format: EncodingFormat | None = None  # null or absent: "float", as OpenAI's API documents
    dimensions: int | None = None
    user: str | None = None  # an end-user id for the caller's own abuse tracking; nothing to do here


def parse(body: Any) -> ParsedEmbedding:
    """The request body of /v1/embeddings, or an ApiError naming the parameter."""
    req: OpenAIEmbeddingRequest = convert(body, OpenAIEmbeddingRequest)
    ids = _token_ids(req.input)
    inputs = [] if ids else texts(req.input, "input")
    if req.dimensions is not None and req.dimensions < 1:
        raise ApiError(400, "dimensions must be at least 1", param="dimensions", code="invalid_value")
    options: dict[str, Any] = {"normalize": True, "truncate": False}  # OpenAI refuses over-long input
    if req.dimensions is not None:
        options["dimensions"] = req.dimensions
    return ParsedEmbedding(inputs, options, req.encoding_format or "float", {"dimensions": "dimensions"}, ids)


def _token_ids(value: Any) -> tuple[tuple[int, ...], ...]:
    """`input` as token-id sequences when it is ids (a list of ints, or a list of non-empty lists of ints: vLLM's
    and llama-server's forms, what LangChain's OpenAIEmbeddings sends by default); () when it is text."""
    if not isinstance(value, list) or not value:
        return ()
    if tokens.is_ids(value):
        return (tuple(value),)
    if not all(isinstance(item, list) for item in value):
        return ()  # text, or a mistake that `texts` names
    if len(value) > MAX_EMBEDDING_INPUTS:
        raise ApiError(400, f"input: {len(value)} inputs; at most {MAX_EMBEDDING_INPUTS} per request",
                       param="input", code="too_many_inputs")  # fmt: skip
    for i, item in enumerate(value):
        if not item or not tokens.is_ids(item):
            raise ApiError(400, f"input[{i}]: must be a non-empty list of token ids", param="input",
                           code="invalid_value")  # fmt: skip
    return tuple(tuple(item) for item in value)


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


def response(model: str, parsed: ParsedEmbedding, result: EmbeddingResult) -> bytes:
    """OpenAI's answer: {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model",
    "usage"}; each embedding a list of floats or a base64 string, as `encoding_format` asked."""
    data = [
        _Vector("embedding", i, encode_base64(v) if parsed.encoding_format == "base64" else encode_floats(v))
        for i, v in enumerate(result.vectors)
    ]
    tokens = int(result.prompt_tokens)
    return msgspec.json.encode(_OpenAIList("list", data, model, _Usage(tokens, tokens)))

"""What the embedding routes of both protocols share: `ParsedEmbedding`, the check of `input`, the float and base64
encodings of a vector, and the wire error of a host refusal. The request and answer shapes are each protocol's own
(`openai.embeddings`, `ollama.embeddings`); the door (`door.Door.embed`) submits and awaits.

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

import numpy as np

from modelhost.errors import EmbeddingUnsupportedError, InvalidInputError, InvalidOptionError, ModelHostError
from modelhost.http.errors import ApiError, from_exception, from_host_exception
from modelhost.inference.capabilities import MAX_EMBEDDING_INPUTS

EncodingFormat = Literal["float", "base64"]


@dataclass(frozen=True, slots=True)
class ParsedEmbedding:
    """A decoded embedding request: the texts, the host's options, and what the answer's shape needs."""

    texts: list[str]
    options: dict[str, Any] = field(default_factory=dict)  # Host.submit_embedding's keywords
    encoding_format: EncodingFormat = "float"
    #: Contract option name -> the parameter the client sent, so an error names what the client wrote.
    wire_names: Mapping[str, str] = field(default_factory=dict)
    #: OpenAI's token-id input, one id sequence per input: read into `texts` by the handler (it needs the model's
    #: tokenizer) before anything is submitted.
    token_ids: tuple[tuple[int, ...], ...] = ()


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


def texts(value: Any, param: str) -> list[str]:
    """`input` as a list of non-empty strings: a string, or a list of them (token ids are the OpenAI door's: see
    `openai.embeddings`)."""
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
        raise ApiError(400, f"{param}[{i}]: must be a string, got {type(item).__name__}", param=param,
                       code="invalid_value")  # fmt: skip
    return items


def error(exc: ModelHostError, wire_names: Mapping[str, str] | None = None) -> ApiError:
    """The wire error for a host error of an embedding: the model cannot embed (400 naming `model`), an input the
    model refused (400 naming `input`), an option (400 naming it), else its kind's (modelhost.errors)."""
    if isinstance(exc, EmbeddingUnsupportedError):
        return from_exception(exc, param="model")
    if isinstance(exc, InvalidInputError):
        return from_exception(exc, param="input")
    if isinstance(exc, InvalidOptionError):
        return from_host_exception(exc, wire_names or {})
    return from_exception(exc)

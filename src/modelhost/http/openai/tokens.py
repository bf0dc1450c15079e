"""Token ids on the OpenAI door: the /tokenize and /detokenize routes (llama-server's and vLLM's shapes), and token-id
input for /v1/completions and /v1/embeddings (as vLLM and llama-server take it).

Ids are the served model's own vocabulary. The host takes text, so ids are turned into the text they spell with the
model's tokenizer, and that text must tokenize back to exactly the same ids: a sequence that does not (ids of
another tokenizer, non-canonical splits, control tokens, which render as nothing) is refused with a 400 naming the
parameter, instead of being quietly answered as a different prompt.

Which shape answers follows the request: llama-server sends `content` (/tokenize) and reads `tokens`, and reads
`content` back from /detokenize; vLLM sends `prompt` and reads `tokens`, `count` and `max_model_len`, and reads
`prompt` back. Neither adds special tokens here: `add_special` / `add_special_tokens` true is refused, since the
model's BOS rule is applied when it reads a raw prompt, not by the tokenizer these routes reach.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from modelhost.errors import InvalidInputError
from modelhost.host.models import ServedModel
from modelhost.http.door import running_context
from modelhost.http.errors import ApiError
from modelhost.http.parsing import convert, invalid, unsupported
from modelhost.inference.capabilities import check_prompt_size

#: Most ids one request may carry (a prompt, an embedding input, or /detokenize): past any context this host serves
#: (128k), and it bounds the tokenizer work one request can ask for on a worker thread.
MAX_TOKEN_IDS = 1 << 20

#: Largest token id accepted before the vocabulary is consulted: a wire id is i32 (llama.cpp's llama_token).
MAX_TOKEN_ID = (1 << 31) - 1


@runtime_checkable
class Tokenizer(Protocol):
    """A loaded model's own tokenizer (the llama.cpp and transformers models have one)."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


def tokenizer_of(served: ServedModel, param: str) -> Tokenizer:
    """The tokenizer of a loaded model; 400 naming `param` when the model has none (the OCR pipeline)."""
    model = served.model
    if not isinstance(model, Tokenizer):
        raise ApiError(400, f"model {served.name!r} has no tokenizer to read token ids with", param=param,
                       code="unsupported_parameter")  # fmt: skip
    return model


def is_ids(value: Any) -> bool:
    """A list of ints (bool is not an int here: `[true]` is a mistake, not token 1)."""
    return isinstance(value, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in value)


def check_ids(ids: Sequence[int], param: str, vocab_size: int = 0, where: str = "") -> tuple[int, ...]:
    """`ids` bounded in count and range (below `vocab_size` when the model says it), or a 400 naming `param`;
    `where` is how the message names this sequence (`input[2]` of several)."""
    where = where or param
    if len(ids) > MAX_TOKEN_IDS:
        raise invalid(param, f"{len(ids)} token ids in {where}; at most {MAX_TOKEN_IDS}")
    bound = vocab_size or MAX_TOKEN_ID + 1
    for i, token in enumerate(ids):
        if not 0 <= token < bound:
            raise invalid(param, f"token id {token} at {where}[{i}] is outside the model's vocabulary (0..{bound - 1})")
    return tuple(ids)


def _spelled(tokenizer: Tokenizer, ids: tuple[int, ...], param: str, where: str) -> str:
    text = tokenizer.decode(ids)
    if tuple(tokenizer.encode(text)) != ids:
        raise invalid(
            param,
            f"the token ids of {where} do not read back as the same ids with the model's tokenizer (ids of another "
            "tokenizer, a non-canonical split, or control tokens); send the text instead",
        )
    return text


async def texts_of_ids(served: ServedModel, prompts: Sequence[tuple[int, ...]], param: str) -> list[str]:
    """The text each id sequence spells, checked to read back as the same ids (see the module doc); off the event
    loop, since a long prompt's tokenizer pass is milliseconds."""
    tokenizer = tokenizer_of(served, param)
    vocab = served.model.info().vocab_size
    where = [param if len(prompts) == 1 else f"{param}[{i}]" for i in range(len(prompts))]
    checked = [check_ids(ids, param, vocab, at) for ids, at in zip(prompts, where, strict=True)]
    return await asyncio.to_thread(
        lambda: [_spelled(tokenizer, ids, param, at) for ids, at in zip(checked, where, strict=True)]
    )


# -- /tokenize and /detokenize -----------------------------------------------------------------------------------


class TokenizeRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /tokenize: llama-server's `content` or vLLM's `prompt`."""

    content: str | None = None  # llama-server
    prompt: str | None = None  # vLLM
    model: str | None = None
    add_special: bool | None = None  # llama-server's name
    add_special_tokens: bool | None = None  # vLLM's name
    with_pieces: bool = False  # llama-server: each id with its text
    return_token_strs: bool | None = None  # vLLM: each id's text beside the ids


class DetokenizeRequest(msgspec.Struct, forbid_unknown_fields=True):
    """POST /detokenize: `tokens`, in either server's request."""

    tokens: list[int] = msgspec.field(default_factory=list)
    model: str | None = None


def parse_tokenize(body: Any) -> TokenizeRequest:
    """The body of /tokenize, or a 400 naming what is wrong."""
    req: TokenizeRequest = convert(body, TokenizeRequest)
    if (req.content is None) == (req.prompt is None):
        raise invalid("content", "send the text as `content` (llama-server) or `prompt` (vLLM), one of them")
    for name in ("add_special", "add_special_tokens"):
        if getattr(req, name):
            raise unsupported(name, "special tokens are added by the model when it reads a raw prompt, not here")
    return req


def parse_detokenize(body: Any) -> DetokenizeRequest:
    """The body of /detokenize, or a 400 naming what is wrong."""
    req: DetokenizeRequest = convert(body, DetokenizeRequest)
    check_ids(req.tokens, "tokens")
    return req


async def tokenize(served: ServedModel, req: TokenizeRequest) -> bytes:
    """The answer of /tokenize in the request's own dialect. A text of more bytes than the model's context can hold
    is refused before the tokenizer runs (the bound every prompt has): 25 MB with `with_pieces` once took 3.4 GB
    and answered 200 MB of pieces for a prompt no request could send."""
    tokenizer = tokenizer_of(served, "model")
    param = "content" if req.content is not None else "prompt"
    text = req.content if req.content is not None else req.prompt or ""
    try:
        check_prompt_size(served.model, text)
    except InvalidInputError as exc:
        raise invalid(param, str(exc).removeprefix("prompt: ")) from None
    ids = await asyncio.to_thread(tokenizer.encode, text)
    if req.content is not None:
        if not req.with_pieces:
            return msgspec.json.encode({"tokens": ids})
        pieces = await asyncio.to_thread(lambda: [tokenizer.decode([i]) for i in ids])
        return msgspec.json.encode({"tokens": [{"id": i, "piece": p} for i, p in zip(ids, pieces, strict=True)]})
    strs = await asyncio.to_thread(lambda: [tokenizer.decode([i]) for i in ids]) if req.return_token_strs else None
    context = running_context(served.model)  # the limit prompts meet here, not the trained length
    return msgspec.json.encode({"count": len(ids), "max_model_len": context, "tokens": ids, "token_strs": strs})


async def detokenize(served: ServedModel, req: DetokenizeRequest) -> bytes:
    """The answer of /detokenize: both dialects' field (`content`, llama-server; `prompt`, vLLM) carry the text."""
    tokenizer = tokenizer_of(served, "model")
    check_ids(req.tokens, "tokens", served.model.info().vocab_size)
    text = await asyncio.to_thread(tokenizer.decode, req.tokens)
    return msgspec.json.encode({"content": text, "prompt": text})

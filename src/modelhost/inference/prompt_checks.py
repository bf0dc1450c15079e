"""The checks every backend runs on a prompt before it costs anything: chat turns well formed, prompt ids in the
vocabulary, text within the bytes the context can hold, tokens within the context.

Each raises InvalidInputError saying what is wrong and how to fix it; a backend's prompt code calls them in this
order (turns, bytes before tokenizing, tokens after), so a 25 MiB prompt is refused without tokenizing it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

from modelhost.errors import InvalidInputError
from modelhost.inference.types import ROLES, Message


def check_messages(messages: Sequence[Message]) -> None:
    """Chat turns as the contract defines them: Message values with a known role and text content."""
    if not messages:
        raise InvalidInputError("chat needs at least one message")
    for m in messages:
        if not isinstance(m, Message):
            raise InvalidInputError(f"chat messages must be Message values, got {type(m).__name__}")
        if m.role not in ROLES:
            raise InvalidInputError(f"unknown role {m.role!r}; known: {', '.join(sorted(ROLES))}")
        if not isinstance(m.content, str):
            raise InvalidInputError(f"message content must be a string, got {type(m.content).__name__}")


def byte_limit(context_length: int, spellings: Iterable[object]) -> int:
    """Most UTF-8 bytes a prompt can have and still fit the context: the context's tokens times the longest
    spelling in the vocabulary (`spellings`: a tokenizer's `get_vocab()`); no bound when the context is unknown.

    A token's spelling in the vocabulary is never shorter in UTF-8 than the bytes it stands for (a byte-level
    character is one byte, SentencePiece's "▁" one space, a "<0xE2>" fallback one byte), so the longest spelling
    bounds every token from above without decoding 50,000 pieces at load (about a second on this machine class),
    and the bound never refuses a prompt that fits.
    """
    if not context_length:
        return sys.maxsize
    longest = max((len(str(spelling).encode("utf-8")) for spelling in spellings), default=1)
    return context_length * max(longest, 1)


def utf8_size_over(limit: int, *texts: str) -> int | None:
    """The UTF-8 size of `texts` together when it is more than `limit` bytes, else None: the one measurement behind
    every refusal by size before tokenizing (prompts, chat turns, embedding inputs). A character is 1 to 4 UTF-8
    bytes, so most texts are decided by their length alone and only text near the bound is encoded
    ("surrogatepass": a lone surrogate counts its 3 bytes rather than raising here)."""
    if sum(len(t) for t in texts) * 4 <= limit:
        return None
    size = sum(len(t) if t.isascii() else len(t.encode("utf-8", "surrogatepass")) for t in texts)
    return size if size > limit else None


def too_many_bytes(what: str, size: int, limit: int, *, truncatable: bool = False) -> InvalidInputError:
    """The one refusal of text by its size before tokenizing: `what` (the prompt, `input[3]`) has `size` UTF-8
    bytes, more than the `limit` its model's context's tokens can stand for. `truncatable` for an input the caller
    could ask to have cut (embeddings), so the message offers that rather than a larger context."""
    remedy = "shorten it, split it, or ask for truncation" if truncatable else (
        "shorten it or load the model with a larger context_length"
    )  # fmt: skip
    return InvalidInputError(
        f"{what}: {size} bytes of text, more than the model's context holds (at most {limit} bytes for its "
        f"tokens); {remedy}"
    )


def check_bytes(size: int, byte_limit: int, context_length: int) -> None:
    """Refuse text of more UTF-8 bytes than the context's tokens can stand for, before it is tokenized."""
    if size > byte_limit:
        raise too_many_bytes("prompt", size, byte_limit)


def fits(ids: tuple[int, ...], context_length: int) -> tuple[int, ...]:
    """`ids` when there is at least one and room after them for a generated token (0: no known context)."""
    if not ids:
        raise InvalidInputError("the prompt is empty: there is nothing to continue")
    if context_length and len(ids) >= context_length:
        raise InvalidInputError(f"the prompt has {len(ids)} tokens; the context holds {context_length}")
    return ids


def check_prompt_ids(ids: Sequence[int], vocab_size: int, context_length: int) -> tuple[int, ...]:
    """A prompt given as token ids: bounded by the context first (so a huge list is not walked), then each id."""
    checked = fits(tuple(ids), context_length)
    for i, token in enumerate(checked):
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < vocab_size:
            raise InvalidInputError(
                f"prompt_ids[{i}] is {token!r}, not a token id of this model (0 to {vocab_size - 1})"
            )
    return checked

"""Training examples: the records a fine-tune reads and their token form, shared by modelhost.training and backends.

This is the contract between the training loop (modelhost.training, which reads files and makes batches) and a
backend's TrainerModel (which tokenises a record with its own tokenizer and template, and trains on batches of
`Example`): it lives here so a backend needs nothing from the training package, and the training package drives
any backend through these types and the capabilities alone.

A record is one JSON object, in one of three shapes (the shapes TRL and most fine-tuning tools read):

- `{"messages": [{"role", "content"}, ...]}`: a conversation, rendered through the model's own chat template; the
  loss covers the assistant turns only (the model learns to answer, not to predict the user).
- `{"prompt": str, "completion": str}`: raw text, no template; the loss covers the completion (and the end token).
- `{"text": str}`: raw text; the loss covers all of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from modelhost.errors import InvalidInputError
from modelhost.inference.types import ROLES

#: Label value of a token the loss ignores (the prompt, padding). -100 is what torch's cross-entropy and every
#: Hugging Face model use, so a batch can go to them unchanged.
IGNORE = -100


@dataclass(frozen=True, slots=True)
class Example:
    """One tokenised record: `ids`, and `labels` (the id where the loss counts that position, else IGNORE)."""

    ids: tuple[int, ...]
    labels: tuple[int, ...]


@runtime_checkable
class ExampleEncoder(Protocol):
    """A trainable model that turns a record into an Example with its own tokenizer and chat template."""

    def encode_example(self, record: Mapping[str, Any], *, max_length: int | None = None) -> Example:
        """Tokenise one record (messages, prompt/completion or text); `max_length` truncates it."""
        ...


def record_kind(record: Any) -> str:
    """ "messages", "prompt" or "text" for a well-formed record; InvalidInputError saying what is wrong otherwise."""
    if not isinstance(record, dict):
        raise InvalidInputError(f"a training record must be a JSON object, got {type(record).__name__}")
    if "messages" in record:
        messages = record["messages"]
        if not isinstance(messages, list) or not messages:
            raise InvalidInputError("`messages` must be a non-empty list")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
                raise InvalidInputError(f"messages[{i}] must be an object with string `role` and `content`")
            if m["role"] not in ROLES:
                raise InvalidInputError(f"messages[{i}]: unknown role {m['role']!r}")
        if not any(m["role"] == "assistant" for m in messages):
            raise InvalidInputError("`messages` has no assistant turn: there is nothing to learn")
        return "messages"
    if "prompt" in record or "completion" in record:
        if not isinstance(record.get("prompt"), str) or not isinstance(record.get("completion"), str):
            raise InvalidInputError("`prompt` and `completion` must both be strings")
        if not record["completion"]:
            raise InvalidInputError("`completion` is empty: there is nothing to learn")
        return "prompt"
    if "text" in record:
        if not isinstance(record["text"], str) or not record["text"]:
            raise InvalidInputError("`text` must be a non-empty string")
        return "text"
    raise InvalidInputError("a training record needs `messages`, `prompt` and `completion`, or `text`")

"""Embeddings for transformers: the mean of the last hidden state over each input's tokens, a padded batch at a time.

The last hidden state is the base model's output (after the final norm, before the LM head), the same tensor
llama.cpp pools, so a checkpoint and its GGUF give the same vector (tests compare them on the tiny model). The LM
head is skipped: over every position of every input it would cost a vocabulary-sized row per token for nothing.

Inputs are right-padded (positions then start at 0 for every row, as each input alone would see them; a causal model
never lets a real token attend to the padding after it) and the mean runs over the attention mask only. A padded
batch differs from one input alone only by the rounding of the matrix kernels at another batch shape (the tests say
by how much). Everything runs under `inference_mode` on the model's own thread, with no cache: a generation that is
suspended between two tokens keeps its own DynamicCache untouched.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from modelhost.inference.capabilities import check_embedding_inputs, too_long
from modelhost.inference.types import EmbeddingResult

#: Padded tokens (rows x longest row) per forward pass. The activations of a pass grow with it (hidden size x layers
#: of intermediate tensors), so without a bound 2048 inputs of a full context would ask for one enormous batch; 8192
#: tokens is a few hundred MB even for a 2k-wide model, and already keeps a CPU's matrix kernels busy.
MAX_BATCH_TOKENS = 8192


def embedding_size(model: Any) -> int:
    """The hidden size the last hidden state has (the text config's), which is the length of every vector."""
    config = model.config.get_text_config()
    return int(config.hidden_size)


def embed(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    limit: int,
    pad_id: int,
    device: torch.device,
    normalize: bool = True,
    truncate: bool = False,
) -> EmbeddingResult:
    """Pooled vectors of `texts` (see EmbeddingModel). `limit` is the tokens one input may have (0: unbounded)."""
    items = check_embedding_inputs(texts)
    encoded: list[list[int]] = []
    cut: list[int] = []
    for i, text in enumerate(items):
        ids = [int(t) for t in tokenizer(text, add_special_tokens=True)["input_ids"]]
        if limit and len(ids) > limit:
            if not truncate:
                raise too_long(i, len(ids), limit)
            ids = ids[:limit]
            cut.append(i)
        encoded.append(ids)
    vectors = np.empty((len(encoded), embedding_size(model)), dtype=np.float32)
    row = 0
    for group in _groups(encoded):
        vectors[row : row + len(group)] = _pool(model, group, pad_id, device)
        row += len(group)
    if normalize:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        np.divide(vectors, norms, out=vectors, where=norms > 0)
    return EmbeddingResult(vectors, sum(len(ids) for ids in encoded), tuple(cut))


def _groups(encoded: list[list[int]]) -> Iterator[list[list[int]]]:
    """Consecutive inputs while rows x the longest row stays within MAX_BATCH_TOKENS (one long input goes alone)."""
    group: list[list[int]] = []
    width = 0
    for ids in encoded:
        wider = max(width, len(ids))
        if group and wider * (len(group) + 1) > MAX_BATCH_TOKENS:
            yield group
            group, wider = [], len(ids)
        group.append(ids)
        width = wider
    if group:
        yield group


@torch.inference_mode()
def _pool(model: Any, group: list[list[int]], pad_id: int, device: torch.device) -> np.ndarray:
    width = max(len(ids) for ids in group)
    ids = torch.full((len(group), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(group), width), dtype=torch.long)
    for r, seq in enumerate(group):
        ids[r, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[r, : len(seq)] = 1
    ids, mask = ids.to(device), mask.to(device)
    hidden = _last_hidden_state(model, ids, mask).float()
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1)
    return pooled.cpu().numpy()  # type: ignore[no-any-return]


def _last_hidden_state(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # The base model (LlamaModel inside LlamaForCausalLM, the text+vision model inside a VLM) returns the normed
    # last hidden state without running the LM head; a model without a separate base asks for hidden states.
    base = getattr(model, "base_model", None)
    if base is not None and base is not model:
        return base(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state  # type: ignore[no-any-return]
    out = model(input_ids=ids, attention_mask=mask, use_cache=False, output_hidden_states=True)
    return out.hidden_states[-1]  # type: ignore[no-any-return]

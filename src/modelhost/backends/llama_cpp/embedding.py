"""Embeddings for llama.cpp: pooled vectors from a small context of their own, made at the first `embed` call.

Why a context of its own rather than `llama_set_embeddings` on the generation context:
- The generation context has one sequence (n_seq_max 1), so embedding there overwrites the KV cache the
  generation path reuses across turns, and an embedding between two tokens of a running stream would corrupt that
  stream outright. Measured on SmolLM2 (1 thread, a 72-token chat asked again): first token 0.016-0.023 s after an
  embedding on this context of its own (71 prompt tokens reused), 0.54-0.90 s after the cache is cleared as a shared
  context would have to.
- llama.cpp pools a sequence only when all its tokens are in one micro-batch, and the generation context's
  micro-batch is BATCH_SIZE (512) tokens: inputs would be capped far below the context length.
- Cost, measured on SmolLM2-135M Q4_1 at its default 4096-token context: +90-95 MB resident, made in ~0.05-0.07 s
  (the KV cache dominates: 30 layers x 2 x 192 x f16 x 4096 cells = 94 MB). It is made lazily, so a host that never
  embeds never pays it, and freed with the model.

Batching: inputs are packed into one `llama_decode` (one sequence id per input) while their tokens fit the context
and at most MAX_SEQUENCES are packed; the KV cache is unified, so the inputs of one decode share its cells, and it
is cleared after every decode (nothing carries over between calls). It gains little on a CPU: each input is
already a many-token batch, and llama.cpp pools a sequence only within one micro-batch, so the inputs of a decode
are still computed input by input (bench/embeddings.py, SmolLM2, 32 inputs of ~20 tokens, 1 thread: batched
1.08-1.13x the inputs/s of one call per input, ~110 tokens/s, ~85% of a plain prefill's speed); it saves a
Python round trip and a cache clear per input. A batched vector is not bit-equal to
the same input embedded alone: llama.cpp's matrix kernels round differently for a 16-token and a 256-token batch
(SmolLM2: cosine >= 0.9996 between the two, relative L2 difference <= 2.6%); the same layout always gives the same
bits. Separate KV buffers per sequence (kv_unified off) split the cells n_ctx / n_seq_max and gave garbage
(cosine 0.6), so the buffer is unified.

Pooling: the GGUF's own `<arch>.pooling_type` when it declares mean, CLS or last-token pooling (embedding models
do), else mean pooling over the input's tokens (a generative model declares none). llama.cpp pools the final
hidden state after the output norm.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from modelhost.errors import GenerationError, ModelLoadError
from modelhost.inference.capabilities import check_embedding_inputs, too_long, too_long_bytes
from modelhost.inference.types import EmbeddingResult

if TYPE_CHECKING:
    from modelhost.backends.llama_cpp.vocab import Vocab

#: Most inputs packed into one llama_decode (sequence ids of the embedding context). Past a few dozen short inputs
#: a decode is already large enough to keep the matrix kernels busy; more sequences only grow llama.cpp's per-
#: sequence bookkeeping (and the inputs an error in one decode takes down with it).
MAX_SEQUENCES = 32

#: llama.cpp's pooling types (llama_pooling_type) we pool with when the GGUF declares one: MEAN, CLS, LAST. NONE
#: (a generative model) and RANK (a reranker's score head, not a vector) fall back to mean pooling.
_MEAN = 1
_DECLARED_POOLING = frozenset({1, 2, 3})


def pooling_type(metadata: dict[str, str], architecture: str) -> int:
    """The llama_pooling_type to embed with: the GGUF's declared mean/CLS/last, else mean."""
    declared = metadata.get(f"{architecture}.pooling_type")
    try:
        value = int(declared) if declared is not None else _MEAN
    except ValueError:
        return _MEAN
    return value if value in _DECLARED_POOLING else _MEAN


class LlamaEmbedder:
    """The embedding context of one loaded GGUF: a second context on the same weights (see the module doc).

    Given what it needs (the `llama_cpp.Llama` whose weights it runs, its vocabulary, the per-input token bound
    and the GGUF's metadata), it knows nothing of the model object around it."""

    def __init__(
        self, llm: Any, vocab: Vocab, *, context_length: int, metadata: dict[str, str], architecture: str
    ) -> None:
        import llama_cpp
        from llama_cpp import _internals

        self._lib = llama_cpp
        self._vocab = vocab
        #: Tokens one input may have: the same bound as a prompt on the generation path.
        self.limit = context_length
        self.pooling = pooling_type(metadata, architecture)
        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
        params.embeddings = True
        params.pooling_type = self.pooling
        params.n_ctx = self.limit
        # A pooled sequence must sit in one micro-batch, so the micro-batch is as large as the longest input.
        params.n_batch = params.n_ubatch = self.limit
        params.n_seq_max = min(MAX_SEQUENCES, int(llama_cpp.llama_max_parallel_sequences()))
        params.kv_unified = True
        try:
            self._ctx: Any = _internals.LlamaContext(model=llm._model, params=params, verbose=False)
        except ValueError as exc:
            raise ModelLoadError(f"llama.cpp could not create an embedding context of {self.limit} tokens") from exc
        self._sequences = int(params.n_seq_max)
        self._mem = llama_cpp.llama_get_memory(self._ctx.ctx)
        self._batch: Any = llama_cpp.llama_batch_init(self.limit, 0, 1)
        out = getattr(llama_cpp, "llama_model_n_embd_out", None)
        self.size = int(out(llm.model)) if out is not None else int(llm.n_embd())
        self._add_eos = vocab.add_eos
        self._eos = int(llm.token_eos())

    def embed(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingResult:
        """Pooled vectors of `texts` (see EmbeddingModel); every input is tokenised and checked before any decode."""
        items = check_embedding_inputs(texts)
        encoded: list[list[int]] = []
        cut: list[int] = []
        # More bytes than `limit` tokens can stand for: over the context whatever the tokens. Refused, or cut for
        # truncation, before tokenising: a 10 MB input with `truncate` held the model thread for 54-80 s (and 2 GB)
        # to keep its first tokens. The cut keeps twice what `limit` tokens can span, so the tokens kept are those
        # of the whole text: only the last few tokens before a cut can tokenise differently.
        most = self.limit * self._vocab.max_token_bytes
        for i, text in enumerate(items):
            data = text.encode("utf-8")
            if len(data) > most:
                if not truncate:
                    raise too_long_bytes(i, len(data), self.limit)
                data = data[: 2 * most]
            tokens = self._tokens(data)
            if len(tokens) > self.limit:
                if not truncate:
                    raise too_long(i, len(tokens), self.limit)
                tokens = tokens[: self.limit]
                if self._add_eos:
                    tokens[-1] = self._eos  # a model that pools its end token (last pooling) still finds it
                cut.append(i)
            encoded.append(tokens)
        vectors = np.empty((len(encoded), self.size), dtype=np.float32)
        row = 0
        for group in self._groups(encoded):
            self._decode(group, vectors[row : row + len(group)])
            row += len(group)
        if normalize:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            np.divide(vectors, norms, out=vectors, where=norms > 0)
        return EmbeddingResult(vectors, sum(len(t) for t in encoded), tuple(cut))

    def close(self) -> None:
        """Free the context and its batch (before the model's weights go). Idempotent."""
        if self._ctx is None:
            return
        self._lib.llama_batch_free(self._batch)
        ctx, self._ctx = self._ctx, None
        ctx.close()

    def _tokens(self, data: bytes) -> list[int]:
        # The vocabulary's own BOS rule, and its EOS rule (embedding models that pool their last token want it).
        # Special tokens are parsed, as in a raw prompt and as the transformers tokenizer does.
        tokens = self._vocab.tokenize(data, add_bos=True)
        if self._add_eos and self._eos >= 0 and (not tokens or tokens[-1] != self._eos):
            tokens.append(self._eos)
        return tokens

    def _groups(self, encoded: list[list[int]]) -> Iterator[list[list[int]]]:
        """Consecutive inputs packed while their tokens fit one decode and the sequence ids last."""
        group: list[list[int]] = []
        used = 0
        for tokens in encoded:
            if group and (used + len(tokens) > self.limit or len(group) >= self._sequences):
                yield group
                group, used = [], 0
            group.append(tokens)
            used += len(tokens)
        if group:
            yield group

    def _decode(self, group: list[list[int]], out: np.ndarray) -> None:
        lib, b = self._lib, self._batch
        if self._ctx is None or self._ctx.ctx is None:
            raise GenerationError("the embedding context (or its model) was closed")
        n = 0
        for seq, tokens in enumerate(group):
            for pos, token in enumerate(tokens):
                b.token[n] = token
                b.pos[n] = pos
                b.n_seq_id[n] = 1
                b.seq_id[n][0] = seq
                b.logits[n] = True  # an embedding context outputs every token anyway; pooling reads them
                n += 1
        b.n_tokens = n
        try:
            rc = lib.llama_decode(self._ctx.ctx, b)
            if rc != 0:
                raise GenerationError(f"llama_decode failed with status {rc} while embedding")
            for seq in range(len(group)):
                pooled = lib.llama_get_embeddings_seq(self._ctx.ctx, seq)
                if not pooled:
                    raise GenerationError("llama.cpp returned no pooled embedding")
                out[seq] = np.ctypeslib.as_array(pooled, shape=(self.size,))
        finally:
            # Nothing carries over: the next decode starts every sequence at position 0 in an empty cache.
            lib.llama_memory_clear(self._mem, True)

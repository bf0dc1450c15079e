"""Embeddings for llama.cpp: pooled vectors from a small context of their own, made at the first embedding call.

Why a context of its own rather than `llama_set_embeddings` on the generation context:
- The generation context has one sequence per slot, so embedding there overwrites the KV cache the generation path
  reuses across turns, and an embedding between two tokens of a running stream would corrupt that stream outright.
  Measured on SmolLM2 (1 thread, a 72-token chat asked again): first token 0.016-0.023 s after an embedding on
  this context of its own (71 prompt tokens reused), 0.54-0.90 s after the cache is cleared as a shared context
  would have to.
- Cost, measured on SmolLM2-135M Q4_1 at its default 4096-token context: +90-95 MB resident (the KV cache
  dominates: 30 layers x 2 x 192 x f16 x 4096 cells = 94 MB). It is made lazily, so a host that never embeds never
  pays it, and freed with the model.

In steps (an EmbeddingJob): the host runs one step between two steps of the generation engine, so a chat beside a
long embedding waits behind one step, not the whole call (a 4,096-token input was one `llama_decode`: 276 s at load
25, and a 4-token chat beside it waited 275 s). The first steps tokenize the inputs (at least one, at most
TOKENIZE_CHARS of them a step), so every input is checked before any decode; the rest decode CHUNK tokens each.

Pooling: the GGUF's own `<arch>.pooling_type` when it declares mean, CLS or last-token pooling (embedding models
do), else mean pooling over the input's tokens (a generative model declares none), of the final hidden state after
the output norm.
- A causal model (every generative one, and last-token embedding models): its context has pooling off, so
  llama.cpp returns each token's hidden state, and a sequence may span any number of decodes (the KV cache holds
  its earlier chunks, and a token attends only to those before it). The pooling is done here: the mean sums each
  chunk's rows in float64 (the same vector as llama.cpp's own mean pooling over one decode, to float rounding:
  SmolLM2, 1,024 tokens in chunks of 128: largest difference 1e-6), CLS keeps the first token's row, last-token
  the last's; only the rows pooling reads are output.
- A non-causal model (BERT-like encoders, `<arch>.attention.causal` false): every token attends to every other, so
  an input cannot be cut into decodes. Its context pools in llama.cpp, with a micro-batch as long as the context,
  and one step decodes one group of whole inputs: at most the context's tokens, the bound of one step there.

Batching: inputs are packed into one group (one sequence id per input) while their tokens fit the context and at
most MAX_SEQUENCES are packed; the KV cache is unified, so the inputs of a group share its cells, and it is cleared
after every group (nothing carries over between groups or calls). It gains little on a CPU (bench/embeddings.py,
SmolLM2, 32 inputs of ~20 tokens, 1 thread: batched 1.08-1.13x the inputs/s of one call per input); it saves a
Python round trip and a cache clear per input. A batched vector is not bit-equal to the same input embedded alone:
llama.cpp's matrix kernels round differently for a 16-token and a 256-token batch (SmolLM2: cosine >= 0.9996
between the two, relative L2 difference <= 2.6%); the same layout always gives the same bits. Separate KV buffers
per sequence (kv_unified off) split the cells n_ctx / n_seq_max and gave garbage (cosine 0.6), so the buffer is
unified.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from modelhost.backends.llama_cpp import lowlevel
from modelhost.errors import GenerationError, ModelLoadError
from modelhost.inference.capabilities import check_embedding_inputs, cut_to_bytes, too_long
from modelhost.inference.types import EmbeddingResult

if TYPE_CHECKING:
    from modelhost.backends.llama_cpp.vocab import Vocab

#: Most inputs packed into one group (sequence ids of the embedding context). Past a few dozen short inputs a
#: decode is already large enough to keep the matrix kernels busy; more sequences only grow llama.cpp's per-
#: sequence bookkeeping (and the inputs an error in one decode takes down with it).
MAX_SEQUENCES = 32

#: Tokens one step decodes (a causal model). The host runs one step in each gap between two generation steps, so
#: every token of a chat beside an embedding waits behind one chunk: a 4-token chat behind 5 chunks. 64 tokens of
#: SmolLM2-135M are ~0.04 s on 2 idle cores (the engine's 256 take ~0.15 s), so that chat keeps about 20 tokens/s
#: beside a 4,096-token embedding (64 steps; one decode and one chunk a token), where chunks of 256 would leave it
#: about 6. Smaller chunks cost a decode's fixed overhead
#: each: on SmolLM2, 1,024 tokens, 2 threads, chunks of 64, 128 and 256 ran at the same speed within the noise of
#: a loaded machine (34, 30 and 39 tokens/s at load 13-17).
CHUNK = 64

#: Characters of input one step tokenizes (at least one input a step, however long): ~0.05 s of SmolLM2's tokenizer
#: for English (663 KB took 0.68 s on this machine class), so 2,048 inputs of a few KB each are read over many gaps,
#: not in one. An input cut for `truncate` counts its whole length, though only a prefix is tokenized.
TOKENIZE_CHARS = 64 * 1024

#: Bytes a token stands for, first guess, when cutting an over-long input (`truncate`): SmolLM2's vocabulary spells
#: English at 4-5 bytes a token, so a prefix of 8 bytes a token usually holds the context's tokens and is all that
#: is tokenized (32 KB for 4,096 tokens, not the 663 KB of the byte bound); a prefix that falls short is doubled.
GUESS_BYTES_PER_TOKEN = 8

#: llama.cpp's pooling types (llama_pooling_type): NONE (per-token rows, what a causal model's context outputs
#: here), and MEAN, CLS, LAST, which we pool with when the GGUF declares one. RANK (a reranker's score head, not a
#: vector) and an undeclared type fall back to mean pooling.
_NONE, _MEAN, _CLS, _LAST = 0, 1, 2, 3
_DECLARED_POOLING = frozenset({_MEAN, _CLS, _LAST})


def pooling_type(metadata: dict[str, str], architecture: str) -> int:
    """The llama_pooling_type to embed with: the GGUF's declared mean/CLS/last, else mean."""
    declared = metadata.get(f"{architecture}.pooling_type")
    try:
        value = int(declared) if declared is not None else _MEAN
    except ValueError:
        return _MEAN
    return value if value in _DECLARED_POOLING else _MEAN


def is_causal(metadata: dict[str, str], architecture: str) -> bool:
    """Whether a token attends only to those before it: the GGUF's `<arch>.attention.causal` (written false by
    BERT-like encoders), true when absent (every generative model)."""
    return metadata.get(f"{architecture}.attention.causal", "true").strip().lower() not in ("false", "0")


class LlamaEmbedder:
    """The embedding context of one loaded GGUF: a second context on the same weights (see the module doc).

    Given what it needs (the `llama_cpp.Llama` whose weights it runs, its vocabulary, the per-input token bound
    and the GGUF's metadata), it knows nothing of the model object around it."""

    def __init__(
        self, llm: Any, vocab: Vocab, *, context_length: int, metadata: dict[str, str], architecture: str
    ) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._vocab = vocab
        #: Tokens one input may have: the same bound as a prompt on the generation path.
        self.limit = context_length
        self.pooling = pooling_type(metadata, architecture)
        #: Pooled here from per-token rows, in chunks (a causal model), or by llama.cpp over whole inputs.
        self.chunked = is_causal(metadata, architecture) and not llama_cpp.llama_model_has_encoder(llm.model)
        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)
        params.embeddings = True
        params.n_ctx = self.limit
        if self.chunked:
            params.pooling_type = _NONE
            params.n_batch = params.n_ubatch = min(CHUNK, self.limit)
        else:
            params.pooling_type = self.pooling
            # llama.cpp pools a sequence only when all its tokens are in one micro-batch.
            params.n_batch = params.n_ubatch = self.limit
        params.n_seq_max = min(MAX_SEQUENCES, int(llama_cpp.llama_max_parallel_sequences()))
        params.kv_unified = True
        try:
            self._ctx: Any = lowlevel.new_context(llm, params)
        except ValueError as exc:
            raise ModelLoadError(f"llama.cpp could not create an embedding context of {self.limit} tokens") from exc
        self._sequences = int(params.n_seq_max)
        self._mem = llama_cpp.llama_get_memory(self._ctx.ctx)
        self._batch: Any = llama_cpp.llama_batch_init(int(params.n_batch), 0, 1)
        out = getattr(llama_cpp, "llama_model_n_embd_out", None)
        self.size = int(out(llm.model)) if out is not None else int(llm.n_embd())
        self._add_eos = vocab.add_eos
        self._eos = int(llm.token_eos())
        self._job: EmbeddingRun | None = None  # the one job whose group holds the context's cells now

    def embed(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingResult:
        """Pooled vectors of `texts` (see EmbeddingModel) in one call: a job's steps run back to back."""
        job = self.job(texts, normalize=normalize, truncate=truncate)
        try:
            while True:
                result = job.step()
                if result is not None:
                    return result
        finally:
            job.close()

    def job(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingRun:
        """An embedding of `texts` in bounded steps (the EmbeddingJob capability; the module doc). A new job ends
        one left unfinished (its result is never asked for): the context holds one job's group at a time."""
        items = check_embedding_inputs(texts)
        if self._job is not None:
            self._job.close()
        self._job = EmbeddingRun(self, items, normalize=normalize, truncate=truncate)
        return self._job

    def close(self) -> None:
        """Free the context and its batch (before the model's weights go). Idempotent."""
        if self._ctx is None:
            return
        self._lib.llama_batch_free(self._batch)
        ctx, self._ctx = self._ctx, None
        ctx.close()

    # -- the steps' work (called by EmbeddingRun) --------------------------------------------------------------------
    def tokens(self, index: int, text: str, *, truncate: bool) -> tuple[list[int], bool]:
        """Input `index`'s tokens, and whether they were cut to the context (`truncate`); InvalidInputError naming it
        when it is over the context without `truncate`. Refused, or cut, by its bytes before tokenizing: a 10 MB
        input with `truncate` held the model thread for 54-80 s (and 2 GB) to keep its first tokens."""
        data = text.encode("utf-8")
        cut = cut_to_bytes(index, data, self.limit * self._vocab.max_token_bytes, truncate=truncate)
        tokens = self._prefix_tokens(data if cut is None else cut) if truncate else self._tokens(data)
        if len(tokens) <= self.limit:
            return tokens, False
        if not truncate:
            raise too_long(index, len(tokens), self.limit)
        tokens = tokens[: self.limit]
        if self._add_eos:
            tokens[-1] = self._eos  # a model that pools its end token (last pooling) still finds it
        return tokens, True

    def _prefix_tokens(self, data: bytes) -> list[int]:
        """The tokens of the shortest prefix of `data` (doubling from GUESS_BYTES_PER_TOKEN a token) that runs past
        the context, or of all of it: the context's tokens are then those of the whole text (as with the byte cut,
        only the last few before a cut could tokenize differently)."""
        size = self.limit * GUESS_BYTES_PER_TOKEN
        while True:
            tokens = self._tokens(data[:size])
            if size >= len(data) or len(tokens) > self.limit:
                return tokens
            size *= 2

    def _tokens(self, data: bytes) -> list[int]:
        # The vocabulary's own BOS rule, and its EOS rule (embedding models that pool their last token want it).
        # Special tokens are parsed, as in a raw prompt and as the transformers tokenizer does.
        tokens = self._vocab.tokenize(data, add_bos=True)
        if self._add_eos and self._eos >= 0 and (not tokens or tokens[-1] != self._eos):
            tokens.append(self._eos)
        return tokens

    def groups(self, encoded: list[list[int]]) -> Iterator[list[list[int]]]:
        """Consecutive inputs packed while their tokens fit the context and the sequence ids last."""
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

    def decode(self, entries: Sequence[tuple[int, int, int, bool]]) -> np.ndarray:
        """One llama_decode of `entries` (sequence, position, token, whether its row is wanted): the wanted rows
        (a causal context's per-token hidden states) in order, as a view valid until the next decode."""
        ctx = self._run(entries)
        wanted = [n for n, entry in enumerate(entries) if entry[3]]
        if len(wanted) == len(entries):  # every row, in the batch's order
            data = self._lib.llama_get_embeddings(ctx)
            if not data:
                raise GenerationError("llama.cpp returned no embeddings")
            return np.ctypeslib.as_array(data, shape=(len(entries), self.size))
        # A few rows: each by its batch index (llama.cpp may output every token of an embedding context whatever
        # the batch's flags, so the rows' order in its buffer is not the wanted ones').
        rows = np.empty((len(wanted), self.size), dtype=np.float32)
        for k, n in enumerate(wanted):
            row = self._lib.llama_get_embeddings_ith(ctx, n)
            if not row:
                raise GenerationError("llama.cpp returned no embedding for a token")
            rows[k] = np.ctypeslib.as_array(row, shape=(self.size,))
        return rows

    def decode_pooled(self, group: list[list[int]], out: np.ndarray) -> None:
        """One llama_decode of a group of whole inputs, pooled by llama.cpp (a non-causal model's context)."""
        ctx = self._run(
            [(seq, pos, token, True) for seq, tokens in enumerate(group) for pos, token in enumerate(tokens)]
        )
        for seq in range(len(group)):
            pooled = self._lib.llama_get_embeddings_seq(ctx, seq)
            if not pooled:
                raise GenerationError("llama.cpp returned no pooled embedding")
            out[seq] = np.ctypeslib.as_array(pooled, shape=(self.size,))

    def _run(self, entries: Sequence[tuple[int, int, int, bool]]) -> Any:
        lib, b = self._lib, self._batch
        ctx = self._context()
        for n, (seq, pos, token, wanted) in enumerate(entries):
            b.token[n] = token
            b.pos[n] = pos
            b.n_seq_id[n] = 1
            b.seq_id[n][0] = seq
            b.logits[n] = wanted
        b.n_tokens = len(entries)
        rc = lib.llama_decode(ctx, b)
        if rc != 0:
            raise GenerationError(f"llama_decode failed with status {rc} while embedding")
        return ctx

    def clear(self) -> None:
        """Empty the KV cache: the next group starts every sequence at position 0 (nothing carries over)."""
        if self._ctx is not None:
            self._lib.llama_memory_clear(self._mem, True)

    def release(self, job: EmbeddingRun) -> None:
        """`job` is over: the context is free for the next."""
        if self._job is job:
            self._job = None

    def _context(self) -> Any:
        if self._ctx is None or self._ctx.ctx is None:
            raise GenerationError("the embedding context (or its model) was closed")
        return self._ctx.ctx


class EmbeddingRun:
    """One embedding call in bounded steps on a LlamaEmbedder (the EmbeddingJob capability): `step()` tokenizes
    some inputs, or decodes one chunk, and returns the EmbeddingResult after the last; `close()` ends it early."""

    def __init__(self, embedder: LlamaEmbedder, items: list[str], *, normalize: bool, truncate: bool) -> None:
        self._embedder = embedder
        self._items = items
        self._normalize = normalize
        self._truncate = truncate
        self._encoded: list[list[int]] = []
        self._cut: list[int] = []
        self._vectors = np.zeros((len(items), embedder.size), dtype=np.float64)
        self._groups: Iterator[list[list[int]]] | None = None
        self._row = 0  # the first input of the group now decoding
        self._entries: list[tuple[int, int, int, bool]] = []  # the group's tokens, in the order they are decoded
        self._next = 0  # the first of `_entries` not decoded yet
        self._group_size = 0
        self._closed = False

    def step(self) -> EmbeddingResult | None:
        """Do one bounded piece of the work; the result once it is all done, else None."""
        if self._closed:
            raise GenerationError("the embedding was ended before its result")
        try:
            if len(self._encoded) < len(self._items):
                self._tokenize()
                return None
            if self._next >= len(self._entries) and not self._start_group():
                return self._result()
            self._decode()
            return None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """End the job (done or not): the context's cells are cleared for the next. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._embedder.clear()
        self._embedder.release(self)

    def _tokenize(self) -> None:
        done = 0
        while len(self._encoded) < len(self._items) and done < TOKENIZE_CHARS:
            i = len(self._encoded)
            text = self._items[i]
            tokens, cut = self._embedder.tokens(i, text, truncate=self._truncate)
            self._encoded.append(tokens)
            if cut:
                self._cut.append(i)
            done += max(len(text), 1)
        if len(self._encoded) == len(self._items):
            self._groups = self._embedder.groups(self._encoded)

    def _start_group(self) -> bool:
        """The next group's tokens set out (a causal model), or the whole group decoded (a non-causal one); False
        when no group is left."""
        assert self._groups is not None
        self._embedder.clear()
        self._row += self._group_size
        group = next(self._groups, None)
        if group is None:
            return False
        self._group_size = len(group)
        embedder = self._embedder
        if not embedder.chunked:
            out = np.empty((len(group), embedder.size), dtype=np.float32)
            embedder.decode_pooled(group, out)
            self._vectors[self._row : self._row + len(group)] = out
            self._entries, self._next = [], 0
            return True
        pooling = embedder.pooling
        self._entries = [
            (seq, pos, token, pooling == _MEAN or (pos == 0 if pooling == _CLS else pos == len(tokens) - 1))
            for seq, tokens in enumerate(group)
            for pos, token in enumerate(tokens)
        ]
        self._next = 0
        return True

    def _decode(self) -> None:
        if self._next >= len(self._entries):
            return  # a non-causal group was decoded whole as it started
        chunk = self._entries[self._next : self._next + CHUNK]
        self._next += len(chunk)
        rows = self._embedder.decode(chunk)
        wanted = [seq for seq, _, _, want in chunk if want]
        if not wanted:
            return
        # Rows come in token order, so each sequence's rows are one run: summed per run (float64, exact enough
        # that a mean over chunks matches llama.cpp's own mean pooling to float rounding).
        seqs = np.asarray(wanted)
        starts = np.flatnonzero(np.r_[True, seqs[1:] != seqs[:-1]])
        sums = np.add.reduceat(rows.astype(np.float64), starts, axis=0)
        self._vectors[self._row + seqs[starts]] += sums

    def _result(self) -> EmbeddingResult:
        vectors = self._vectors
        if self._embedder.chunked and self._embedder.pooling == _MEAN:
            counts = np.asarray([len(t) for t in self._encoded], dtype=np.float64)
            vectors = vectors / counts[:, None]
        out = vectors.astype(np.float32)
        if self._normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            np.divide(out, norms, out=out, where=norms > 0)
        self.close()
        return EmbeddingResult(out, sum(len(t) for t in self._encoded), tuple(self._cut))

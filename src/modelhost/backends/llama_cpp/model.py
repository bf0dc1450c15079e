"""A GGUF model loaded by llama.cpp, behind the TextModel contract.

One `llama_cpp.Llama` holds the weights, one context (KV cache) and one batch. We drive it through its lower-level
pieces (`tokenize`, `eval`, a sampler chain of our own, `llama_token_to_piece`) rather than `create_completion`:
that path re-tokenises, detokenises whole sequences, and can ban tokens only through a Python logits processor
that touches the whole vocabulary every step. Here the per-token work is one `llama_decode`, one native sampler
call and one cached byte piece; stopping, UTF-8, the thought channel and metrics are the shared decoder's job
(inference.decoding).

Threading: llama.cpp runs its compute on an OpenMP thread group bound to the calling thread. The host drives each
model from one long-lived thread, and nothing here starts threads of its own, so the group is created once and
reused. The model is not safe to call from two threads at once; one operation at a time is the host's promise.

Memory: the Llama is opened with a standby context of a few cells (backend.STANDBY_CONTEXT), grown to
`context_length` before its first one-at-a-time use (at load when `parallel` is 1). A batching host drives every
request through the batch engine's context (batch.py), so the one-at-a-time context would otherwise hold a second,
idle copy of a whole context (SmolLM2-135M at 4096 tokens: 90 MiB of KV and a 98 MiB compute buffer). It grows
once, straight to full size, and never shrinks: growing in steps mid-generation would have to carry the KV cache
over, and re-evaluating the history in one batch rounds differently from the tokens evaluated one by one.

Prefix reuse: the context remembers which tokens its KV cache holds (`Llama.input_ids[:n_tokens]`). A new prompt
re-evaluates only what follows the longest common prefix, so a chat that grows turn by turn, or a repeated system
prompt, pays for its new tokens only. The last prompt token is always re-evaluated, because its logits are what
the first sample is drawn from and the context keeps only the latest logits.
"""

from __future__ import annotations

import ctypes
import math
import weakref
from collections.abc import Collection, Generator, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from modelhost.backends.llama_cpp import chat as chat_template
from modelhost.backends.llama_cpp import grammar as constrained
from modelhost.backends.llama_cpp import metadata
from modelhost.backends.llama_cpp.sampling import build_sampler, check_supported
from modelhost.errors import (
    GenerationError,
    InvalidInputError,
    ModelClosedError,
    ModelHostError,
    ModelLoadError,
    UnsupportedAttachmentError,
)
from modelhost.inference.decoding import SequenceDecoder, ThoughtTracker
from modelhost.inference.generation import MetricsClock, ThoughtMarkers
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import (
    BatchResult,
    ClassifyResult,
    EmbeddingResult,
    GenerateMetrics,
    Message,
    ModelInfo,
    Token,
    TokenLogprob,
    has_images,
)

if TYPE_CHECKING:
    from modelhost.backends.llama_cpp.batch import LlamaBatchEngine
    from modelhost.backends.llama_cpp.embedding import LlamaEmbedder


class TokenChooser:
    """Picks each next token of one generation: its sampler chain, the `min_tokens` ban, the thinking budget.

    One per generation, in the one-at-a-time path and in each batch slot alike, so both draw tokens the same way.
    Until `min_tokens` are out, the stops are banned outright by a second chain kept in step with the main one, so
    the model says something else instead of emitting an end it is not allowed to have.
    """

    def __init__(
        self,
        opts: GenerateOptions,
        *,
        n_vocab: int,
        stops: Collection[int],
        history: Sequence[int],
        thought: ThoughtTracker,
        grammar: tuple[Any, str] | None = None,
        piece: Any = None,
    ) -> None:
        self.produced = 0
        self._top = opts.logprobs
        self._piece = piece
        self._n_vocab = n_vocab
        #: Where the request stands in its thought channel (the shared rules: inference.decoding; the decoder moves
        #: it along with each pushed token); the thinking budget's forced closing marker is drawn here instead of
        #: a sample.
        self.thought = thought
        #: The log-probability of the token chosen last, when the `logprobs` option asked for it.
        self.logprob: TokenLogprob | None = None
        self._min_tokens = opts.min_tokens
        self._sampler = build_sampler(opts, n_vocab=n_vocab, history=history, grammar=grammar)
        self._early = (
            build_sampler(opts, n_vocab=n_vocab, ban=stops, history=history, grammar=grammar)
            if opts.min_tokens
            else None
        )

    def choose(self, ctx: Any, index: int) -> int:
        """The next token, from the logits at batch position `index` of `ctx` (a llama_cpp LlamaContext)."""
        forced = self.thought.forced_token()
        if forced is not None:
            token = forced
            self._sampler.accept(token)
        elif self._early is not None and self.produced < self._min_tokens:
            token = int(self._early.sample(ctx, index))
            self._sampler.accept(token)
        else:
            token = int(self._sampler.sample(ctx, index))
        self.produced += 1
        if self._top is not None:
            self.logprob = self._logprob(ctx, index, token, self._top)
        return token

    def _logprob(self, ctx: Any, index: int, token: int, top: int) -> TokenLogprob:
        # The model's own distribution (the raw logits row; samplers work on a copy), as OpenAI and vLLM report it.
        import llama_cpp

        n = self._n_vocab
        row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, index), shape=(n,)).astype(np.float64)
        peak = row.max()
        logsum = peak + math.log(float(np.exp(row - peak).sum()))
        alternatives: tuple[TokenLogprob, ...] = ()
        if top:
            best = np.argpartition(-row, min(top, n - 1))[:top]
            best = best[np.argsort(-row[best], kind="stable")]
            alternatives = tuple(self._entry(int(i), float(row[i] - logsum)) for i in best)
        chosen = self._entry(token, float(row[token] - logsum))
        return TokenLogprob(chosen.text, chosen.bytes, chosen.logprob, alternatives)

    def _entry(self, token: int, logprob: float) -> TokenLogprob:
        data: bytes = self._piece(token)
        return TokenLogprob(data.decode("utf-8", "replace"), data, logprob)

    def close(self) -> None:
        """Free the native sampler chains now rather than when the garbage collector gets to them."""
        self._sampler.close()
        if self._early is not None:
            self._early.close()


class LlamaCppModel:
    """A loaded GGUF model. Satisfies TextModel and ChatFeatures; a context manager; `close()` frees the weights and
    the KV cache."""

    def __init__(
        self,
        llm: Any,
        *,
        path: str,
        adapter: str | None = None,
        context_length: int | None = None,
        parallel: int = 1,
    ) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._llm: Any = llm
        self.path = path
        self.adapter = adapter
        meta: dict[str, str] = dict(llm.metadata)
        self._meta = meta
        self.model_type: str = metadata.architecture(meta)
        vocab = llm._model.vocab
        self._vocab = vocab
        self._n_vocab: int = llm.n_vocab()
        # llama.cpp pads its context to a multiple of 256; the caller's number is the limit we enforce, so a
        # context_length=1000 behaves the same on every build. The Llama's own context may still be the standby
        # one (see the module doc): `_ensure_context` grows it to this size.
        self._n_ctx: int = context_length or llm.n_ctx()
        self._parallel = parallel
        self._recurrent = bool(getattr(llm, "_is_recurrent", False) or getattr(llm, "_is_hybrid", False))
        # Every end-of-generation token the vocabulary declares (EOS, EOT, <|im_end|>, <|eom_id|> ...): a model
        # stops on whichever its template makes it emit, not only on `tokenizer.ggml.eos_token_id`.
        self._eog: frozenset[int] = frozenset(i for i in range(self._n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i))
        self._bos: int = llm.token_bos()
        self._add_bos: bool = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
        self._bos_text = llm._model.token_get_text(self._bos) if self._bos >= 0 else ""
        eos = llm.token_eos()
        self._eos_text = llm._model.token_get_text(eos) if eos >= 0 else ""
        self._template: str | None = meta.get("tokenizer.chat_template")
        self._defaults = metadata.sampling_defaults(meta)
        self._info = metadata.model_info(
            meta,
            vocab_size=self._n_vocab,
            num_layers=int(llama_cpp.llama_model_n_layer(llm.model)),
            hidden_size=int(llm.n_embd()),
        )
        self._think = ThoughtMarkers.find(self._single_special)
        # Token pieces are fixed for the life of the vocabulary; caching them turns a ctypes call with a buffer
        # per generated token into a dict lookup.
        self._pieces: dict[int, bytes] = {}
        self._piece_buf = ctypes.create_string_buffer(64)
        self.max_token_bytes = _longest_piece(self._lib, vocab, self._n_vocab)
        self._metrics = GenerateMetrics()
        self._err: BaseException | None = None
        # The stream that owns the context right now, weakly: an abandoned stream must stay collectable so that
        # its cleanup runs as soon as the caller drops it.
        self._live: weakref.ref[Iterator[Token]] | None = None
        self._embedder: LlamaEmbedder | None = None  # made at the first embed() (see embedding.py)
        if parallel <= 1:
            self._allocate_context()  # served one at a time: the host uses this context from the first request

    # --- the TextModel contract ---------------------------------------------------------------------------------

    @property
    def context_length(self) -> int:
        """Tokens the loaded context holds (prompt plus generation); ModelInfo.context_length is the trained one."""
        return self._n_ctx

    def generate(self, prompt: str, **opts: Any) -> Iterator[Token]:
        """Stream tokens for a raw prompt. Options and the prompt are checked now; compute starts on iteration."""
        self._check_open()
        options = self._options(opts)
        return self._start(self._encode_prompt(prompt), options)

    def chat(self, messages: Sequence[Message], **opts: Any) -> Iterator[Token]:
        """Stream the assistant's reply, rendered with the GGUF's own chat template. Text only: images are refused."""
        self._check_open()
        options = self._options(opts)
        return self._start(self._chat_tokens(messages, options), options)

    def classify(self, prompts: Sequence[str], **opts: Any) -> list[ClassifyResult]:
        """One forward pass per prompt, one token drawn at its last position (argmax when greedy)."""
        self._check_open()
        options = self._options(opts)
        encoded = [self._encode_prompt(p) for p in prompts]  # every prompt is checked before any compute
        self._release_live()
        self._ensure_context()
        clock = MetricsClock()
        results: list[ClassifyResult] = []
        try:
            for tokens in encoded:
                self._prefill(tokens)
                logits = None
                if options.logits:
                    row = self._lib.llama_get_logits_ith(self._llm.ctx, -1)
                    logits = np.ctypeslib.as_array(row, shape=(self._n_vocab,)).copy()
                sampler = build_sampler(options, n_vocab=self._n_vocab, history=tokens, grammar=self._grammar(options))
                try:
                    token = int(sampler.sample(self._llm._ctx, -1))
                finally:
                    sampler.close()
                results.append(ClassifyResult(Token(token, self._piece(token).decode("utf-8", "replace")), logits))
                clock.generated_tokens += 1
        except Exception as exc:
            self._llm.reset()
            self._metrics = clock.finish("error")
            raise self._as_generation_error(exc) from exc
        clock.prefill_done(sum(len(t) for t in encoded))
        self._metrics = clock.finish("length")
        return results

    def batch_generate(self, prompts: Sequence[str], **opts: Any) -> list[BatchResult]:
        """Generate for each prompt in turn; a prompt's failure is kept in its own result and the others go on."""
        self._check_open()
        options = self._options(opts)
        results: list[BatchResult] = []
        totals: GenerateMetrics | None = None
        for prompt in prompts:
            if options.cancelled():
                results.append(BatchResult(finish_reason="cancelled"))
                continue
            try:
                stream = self._start(self._encode_prompt(prompt), options)
            except InvalidInputError as exc:  # refused before any compute: no metrics to add
                results.append(BatchResult((), exc, "error"))
                continue
            tokens: list[Token] = []
            try:
                for token in stream:
                    tokens.append(token)
            except ModelClosedError:
                raise
            except Exception as exc:
                results.append(BatchResult(tuple(tokens), exc, "error"))
            else:
                results.append(BatchResult(tuple(tokens), None, self._metrics.finish_reason))
            totals = _add_metrics(totals, self._metrics)
        self._metrics = totals or GenerateMetrics(finish_reason="length")
        self._err = None  # per-prompt errors live in their results; the batch itself succeeded
        return results

    def check_options(self, **opts: Any) -> None:
        """Refuse options this model cannot honour, without computing (the OptionChecker capability: the host calls
        it at submit). Reads only the vocabulary, so it is safe beside a running generation."""
        self._check_open()
        self._options(opts)

    def batch_slots(self) -> int:
        """Requests decoded at once by `open_batch()`: the `parallel` load option (1: one at a time)."""
        return self._parallel

    def open_batch(self) -> LlamaBatchEngine:
        """A continuous-batching engine with `batch_slots()` slots, on a context of its own (see batch.py)."""
        self._check_open()
        from modelhost.backends.llama_cpp.batch import LlamaBatchEngine

        return LlamaBatchEngine(self, self._parallel)

    def embedding_size(self) -> int:
        """Length of the vectors `embed` returns: the model's output embedding width (the EmbeddingModel
        capability). Read from the weights, no context needed."""
        self._check_open()
        out = getattr(self._lib, "llama_model_n_embd_out", None)
        return int(out(self._llm.model)) if out is not None else int(self._llm.n_embd())

    def embed(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingResult:
        """Pooled vectors of `texts` from a small context of their own (embedding.py): the generation context, its
        KV cache and a suspended stream are left exactly as they were (the EmbeddingModel capability)."""
        self._check_open()
        if self._embedder is None:
            from modelhost.backends.llama_cpp.embedding import LlamaEmbedder

            self._embedder = LlamaEmbedder(self)
        return self._embedder.embed(texts, normalize=normalize, truncate=truncate)

    def info(self) -> ModelInfo:
        """Architecture, sizes, quantisation and trained context length, from the GGUF metadata."""
        return self._info

    def metrics(self) -> GenerateMetrics:
        """Metrics of the last finished operation."""
        return self._metrics

    def err(self) -> BaseException | None:
        """The error of the last generate/chat, or None after a clean (or abandoned) end."""
        return self._err

    def accepts_images(self) -> bool:
        """Always False: llama.cpp's text path takes no images (the VisionModel probe, answered honestly)."""
        return False

    def renders_tools(self) -> bool:
        """Whether the GGUF's chat template renders `tools` (ChatFeatures): the probe chat rendering already makes,
        from the same per-template cache, so asking again renders nothing."""
        return chat_template.tool_support(self._template, self._bos_text, self._eos_text).tools

    def thinks(self) -> bool:
        """Whether the vocabulary has a thought channel's markers (ChatFeatures): found once, at load."""
        return self._think is not None

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` with the model's own tokenizer, special tokens parsed, no BOS added."""
        self._check_open()
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids; control tokens render as nothing, as in generated text."""
        self._check_open()
        return b"".join(self._piece(int(i)) for i in ids).decode("utf-8", "replace")

    def close(self) -> None:
        """Free the weights, the KV cache and any adapter. Idempotent; later calls raise ModelClosedError."""
        if self._llm is None:
            return
        self._release_live()
        if self._embedder is not None:  # its context goes before the weights it runs on
            self._embedder.close()
            self._embedder = None
        llm, self._llm = self._llm, None
        llm.close()

    def __enter__(self) -> LlamaCppModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._llm is None else f"n_ctx={self._n_ctx}"
        return f"LlamaCppModel({self.path!r}, {self.model_type}, {state})"

    # --- streaming ----------------------------------------------------------------------------------------------

    def _start(self, prompt: list[int], opts: GenerateOptions) -> Iterator[Token]:
        holder: list[Iterator[Token]] = []
        stream = self._stream(prompt, opts, holder)
        holder.append(stream)
        return stream

    def _stream(self, prompt: list[int], opts: GenerateOptions, holder: list[Iterator[Token]]) -> Iterator[Token]:
        # Runs on the first next(): creating a stream costs nothing, and a stream never iterated never computes.
        self._check_open()
        self._release_live()
        self._ensure_context()
        # Only a weak reference to ourselves: a strong one in this frame would make the stream a reference cycle,
        # and an abandoned `for` loop would then wait for the cycle collector to free the context.
        me = weakref.ref(holder.pop())
        self._live = me
        self._err = None
        chooser = self._chooser(opts, prompt)
        decoder = SequenceDecoder(opts, self._piece, eos_ids=self._eog, thought=chooser.thought)
        try:
            if not decoder.done:
                for token in self._sample(prompt, chooser, decoder):
                    visible = decoder.push(token, chooser.logprob)
                    if visible is not None:
                        yield visible
                    if decoder.done:
                        break
                else:
                    tail = decoder.out_of_room()
                    if tail is not None:
                        yield tail
        except Exception as exc:
            decoder.outcome.finish_reason, decoder.outcome.error = "error", exc
            error = self._as_generation_error(exc)
            self._err = error
            if self._llm is not None:
                self._llm.reset()  # the KV cache may hold half a step: forget it rather than trust it
            raise error from exc
        finally:
            decoder.close()
            chooser.close()  # releases the sampler chain now, not when the garbage collector gets to it
            self._metrics = decoder.metrics()
            if self._live is me:
                self._live = None

    def _sample(self, prompt: list[int], chooser: TokenChooser, decoder: SequenceDecoder) -> Generator[int, None, None]:
        """The engine side of the decoder: prefill, then one sampled id per step, evaluating each lazily.

        A sampled token is evaluated only when the next one is asked for, so a caller who stops after token N
        never pays for decoding token N, and the KV cache stays consistent with `input_ids` for prefix reuse.
        Ends (without evaluating) when the context is full.
        """
        llm = self._llm
        cached = self._prefill(prompt)
        while True:
            token = chooser.choose(llm._ctx, -1)
            if chooser.produced == 1:
                decoder.prefill_done(len(prompt), cached)
            yield token
            if llm.n_tokens >= self._n_ctx:
                return  # the context is full: the decoder reports the end as "length"
            llm.eval([token])

    def _chooser(self, opts: GenerateOptions, prompt: Sequence[int]) -> TokenChooser:
        grammar = self._grammar(opts)
        return TokenChooser(
            opts,
            n_vocab=self._n_vocab,
            stops=self._eog | set(opts.stop_tokens),
            history=prompt,
            thought=ThoughtTracker.for_request(self._think, opts, prompt, constrained=grammar is not None),
            grammar=grammar,
            piece=self._piece,
        )

    def _grammar(self, opts: GenerateOptions) -> tuple[Any, str] | None:
        gbnf = constrained.check(opts, self._vocab)
        return None if gbnf is None else (self._vocab, gbnf)

    def _prefill(self, tokens: list[int]) -> int:
        """Evaluate `tokens`, reusing the longest prefix the KV cache already holds; return how many were reused."""
        llm = self._llm
        keep = 0
        if llm.n_tokens and not self._recurrent:
            # Recurrent state cannot be rolled back to a prefix, so those models always start over.
            n = min(llm.n_tokens, len(tokens))
            differ = np.flatnonzero(llm.input_ids[:n] != np.asarray(tokens[:n], dtype=np.intc))
            keep = min(int(differ[0]) if differ.size else n, len(tokens) - 1)
        if keep == 0:
            llm.reset()
        llm.n_tokens = keep  # Llama.eval drops the KV cache from n_tokens on before evaluating
        llm.eval(tokens[keep:])
        return keep

    # --- helpers ------------------------------------------------------------------------------------------------

    def _options(self, opts: Mapping[str, Any]) -> GenerateOptions:
        parsed = GenerateOptions.parse(opts)
        check_supported(parsed)
        constrained.check(parsed, self._vocab)  # a schema llama.cpp cannot follow is refused before any compute
        return parsed.resolved(self._defaults)

    def _chat_tokens(self, messages: Sequence[Message], options: GenerateOptions) -> list[int]:
        if has_images(messages):
            raise UnsupportedAttachmentError(
                f"the llama_cpp backend is text-only; model {self.model_type!r} cannot take images "
                "(load a vision model with the transformers backend)"
            )
        text = chat_template.render(
            self._template,
            messages,
            bos_token=self._bos_text,
            eos_token=self._eos_text,
            enable_thinking=options.enable_thinking,
            tools=options.tool_specs(),
        )
        return self._encode(text, chat=True)

    def _encode_prompt(self, prompt: str) -> list[int]:
        if not isinstance(prompt, str):
            raise InvalidInputError(f"a prompt must be a string, got {type(prompt).__name__}")
        return self._encode(prompt, chat=False)

    def _encode(self, text: str, *, chat: bool) -> list[int]:
        """Tokens for a prompt: special tokens parsed; BOS added as the vocabulary asks, never twice."""
        data = text.encode("utf-8")
        if len(data) > self._n_ctx * self.max_token_bytes:
            # Over the context whatever its tokens: refused before tokenising (a 25 MiB prompt held the model thread
            # for 10-30 s, and gigabytes of token ids, only to be refused after).
            raise InvalidInputError(
                f"the prompt has {len(data)} bytes, more than the {self._n_ctx} tokens of the context can hold "
                f"(a token here is at most {self.max_token_bytes} bytes); shorten it or load the model with a "
                "larger context_length"
            )
        # A raw prompt gets the vocabulary's own BOS rule. A rendered chat template writes its own `bos_token`
        # when its model wants one, so only a template that forgot it gets one added.
        tokens = list(self._llm.tokenize(data, add_bos=not chat, special=True))
        if chat and self._add_bos and self._bos >= 0 and (not tokens or tokens[0] != self._bos):
            tokens.insert(0, self._bos)
        if not tokens:
            if self._bos < 0:
                raise InvalidInputError("the prompt is empty and this model has no BOS token to start from")
            tokens = [self._bos]
        if len(tokens) > self._n_ctx:
            raise InvalidInputError(
                f"the prompt has {len(tokens)} tokens but the context holds {self._n_ctx}; "
                "shorten it or load the model with a larger context_length"
            )
        return tokens

    def _piece(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            buf = self._piece_buf
            n = self._lib.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
            if n < 0:  # a piece longer than the buffer: llama.cpp says how long
                buf = ctypes.create_string_buffer(-n)
                n = self._lib.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
            piece = buf.raw[: max(n, 0)]
            self._pieces[token] = piece
        return piece

    def _single_special(self, text: str) -> int | None:
        ids = self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        return int(ids[0]) if len(ids) == 1 else None

    def _ensure_context(self) -> None:
        """Grow the Llama's standby context to `context_length` before a one-at-a-time operation uses it.

        A new llama.cpp context replaces the old one (llama.cpp cannot resize one: `llama_memory_clear` empties the
        KV cache but keeps its buffer), with the LoRA adapter applied as at load, and the Llama's batch and token
        record sized to match. The standby context holds nothing worth keeping, so nothing is carried over.
        """
        import contextlib

        from llama_cpp import _internals

        from modelhost.backends.llama_cpp.backend import BATCH_SIZE

        llm = self._llm
        n_batch = min(BATCH_SIZE, self._n_ctx)
        # The standby context has 256 cells but a 1-token batch: a context_length of 256 or less still needs the
        # full batch, or its prefill would run token by token (slower, and rounded unlike the batch engine's).
        if llm.n_ctx() >= self._n_ctx and llm.n_batch >= n_batch:
            return
        params = self._lib.llama_context_params.from_buffer_copy(llm.context_params)
        params.n_ctx = self._n_ctx
        params.n_batch = params.n_ubatch = n_batch  # as Llama() sizes its batch
        try:
            ctx = _internals.LlamaContext(model=llm._model, params=params, verbose=False)
        except ValueError as exc:
            raise GenerationError(f"llama.cpp could not create a context of {self._n_ctx} tokens") from exc
        try:
            if not apply_adapter(ctx, llm):
                raise GenerationError(f"llama.cpp could not apply the LoRA adapter {self.adapter!r}")
            batch = _internals.LlamaBatch(n_tokens=int(params.n_batch), embd=0, n_seq_max=1, verbose=False)
        except BaseException:
            ctx.close()
            raise
        old_ctx, old_batch = llm._ctx, llm._batch
        # Registered with the Llama, so `llm.close()` frees them (before the adapter and the weights, as at load).
        llm._ctx = llm._stack.enter_context(contextlib.closing(ctx))
        llm._batch = llm._stack.enter_context(contextlib.closing(batch))
        old_batch.close()
        old_ctx.close()
        llm.context_params = params
        llm.n_batch = int(params.n_batch)
        llm._n_ctx = int(llm.n_ctx())
        llm.input_ids = np.zeros((llm._n_ctx,), dtype=np.intc)
        llm.reset()
        if llm._n_ctx < self._n_ctx:
            raise GenerationError(f"llama.cpp gave the context {llm._n_ctx} cells, fewer than {self._n_ctx}")

    def _allocate_context(self) -> None:
        """`_ensure_context` at load: a context that cannot be made fails the load, not the first request."""
        try:
            self._ensure_context()
        except GenerationError as exc:
            raise ModelLoadError(f"{exc} for {self.path!r}") from exc

    def _check_open(self) -> None:
        if self._llm is None:
            raise ModelClosedError(f"the llama_cpp model {self.path!r} was closed; load it again to use it")

    def _release_live(self) -> None:
        # One context, one operation: a stream left suspended by its caller is finished ("cancelled") before
        # anything else touches the KV cache.
        live = self._live() if self._live is not None else None
        self._live = None
        if live is not None:
            close = getattr(live, "close", None)
            if close is not None:
                close()

    @staticmethod
    def _as_generation_error(exc: BaseException) -> ModelHostError:
        if isinstance(exc, ModelHostError):
            return exc
        return GenerationError(f"llama.cpp failed while generating: {exc}")


def apply_adapter(ctx: Any, llm: Any) -> bool:
    """Apply the Llama's LoRA adapter (if it has one) to another of its contexts (a llama_cpp LlamaContext):
    llama.cpp applies adapters per context, and Llama() applied it only to the context it opened. False if
    llama.cpp refused."""
    import llama_cpp

    adapter = getattr(llm, "_lora_adapter", None)
    if adapter is None:
        return True
    adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(adapter)
    scales = (ctypes.c_float * 1)(float(llm.lora_scale))
    return int(llama_cpp.llama_set_adapters_lora(ctx.ctx, adapters, 1, scales)) == 0


def _add_metrics(total: GenerateMetrics | None, m: GenerateMetrics) -> GenerateMetrics:
    """Sum of two operations' metrics (batch_generate reports the whole batch); rates recomputed from the sums."""
    if total is None:
        return m
    prefill = total.prefill_seconds + m.prefill_seconds
    decode = total.decode_seconds + m.decode_seconds
    prompt = total.prompt_tokens + m.prompt_tokens
    generated = total.generated_tokens + m.generated_tokens
    return replace(
        total,
        prompt_tokens=prompt,
        generated_tokens=generated,
        prefill_seconds=prefill,
        decode_seconds=decode,
        total_seconds=total.total_seconds + m.total_seconds,
        prefill_tokens_per_second=prompt / prefill if prefill > 0 else 0.0,
        decode_tokens_per_second=generated / decode if decode > 0 else 0.0,
        thinking_budget_forced=total.thinking_budget_forced or m.thinking_budget_forced,
        finish_reason=m.finish_reason,
    )


def _longest_piece(lib: Any, vocab: Any, n_vocab: int) -> int:
    """The most bytes any one token of the vocabulary stands for (special tokens' text included, since prompts
    parse them). A text of more than `n * this` bytes has more than `n` tokens, whatever they are: the exact bound
    that refuses (or cuts, for truncation) an over-long input before the tokenizer spends seconds on it."""
    buf = ctypes.create_string_buffer(256)
    longest = 1
    for token in range(n_vocab):
        n = lib.llama_token_to_piece(vocab, token, buf, len(buf), 0, True)
        longest = max(longest, -n if n < 0 else n)
    return longest

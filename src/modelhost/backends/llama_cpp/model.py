"""A GGUF model loaded by llama.cpp, behind the TextModel contract: its engine and its static facts.

The model is small on purpose. Everything it generates goes through its one engine (engine.py: one context of
`parallel` slots), whoever asks: the host drives the engine directly (the EngineModel capability), and the
Python API (`generate`, `chat`, `classify`, `batch_generate`, `metrics`, `err`) is the contract's one
implementation over an engine (inference/over_engine.py). What is left here is what only this backend knows:
its facts (info, chat features, vocabulary), embeddings (embedding.py, a context of their own) and closing.

We drive llama.cpp through its lower-level pieces (`tokenize`, `llama_decode`, a sampler chain of our own,
`llama_token_to_piece`) rather than `create_completion`: that path re-tokenises, detokenises whole sequences, and
can ban tokens only through a Python logits processor that touches the whole vocabulary every step.

Threading: llama.cpp runs its compute on an OpenMP thread group bound to the calling thread. The host drives each
model from one long-lived thread, and nothing here starts threads of its own, so the group is created once and
reused. The model is not safe to call from two threads at once; one operation at a time is the host's promise.

Memory: the `llama_cpp.Llama` must open a context of its own to exist; it is opened at llama.cpp's minimum
(backend.OPENING_CONTEXT) and freed as soon as the engine's context is made, so the model holds exactly one
context: `parallel x context_length` KV cells (memory.py estimates it before loading).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modelhost.backends.llama_cpp import chat as chat_template
from modelhost.backends.llama_cpp import lowlevel, metadata
from modelhost.backends.llama_cpp.embedding import EmbeddingRun, LlamaEmbedder
from modelhost.backends.llama_cpp.engine import LlamaEngine
from modelhost.backends.llama_cpp.prompts import Prompter
from modelhost.backends.llama_cpp.vision import Projector
from modelhost.backends.llama_cpp.vocab import Vocab
from modelhost.errors import ModelClosedError
from modelhost.inference.options import GenerateOptions
from modelhost.inference.over_engine import OverEngine
from modelhost.inference.types import EmbeddingResult, ModelInfo


class LlamaCppModel(OverEngine):
    """A loaded GGUF model. Satisfies TextModel, EngineModel, ChatFeatures, VisionModel, EmbeddingModel,
    ChunkedEmbedding, OptionChecker and PromptBound; a context manager; `close()` frees the weights and the KV
    cache. With a `projector` (an mmproj through mtmd) its chat takes images: vision is composed in, the same engine
    and slots serve both."""

    def __init__(
        self,
        llm: Any,
        *,
        path: str,
        adapter: str | None = None,
        context_length: int | None = None,
        parallel: int = 1,
        projector: Projector | None = None,
    ) -> None:
        import llama_cpp

        super().__init__()
        self._llm: Any = llm
        self.path = path
        self.adapter = adapter
        self._projector = projector
        self.mmproj = projector.path if projector is not None else None
        meta: dict[str, str] = dict(llm.metadata)
        self._meta = meta
        self.model_type: str = metadata.architecture(meta)
        #: The vocabulary (tokenizing, pieces, special ids), shared with the engine and the embedder.
        self.vocab = Vocab(llm)
        # llama.cpp pads its context to a multiple of 256; the caller's number is the limit we enforce, so a
        # context_length=1000 behaves the same on every build.
        self._n_ctx: int = context_length or llm.n_ctx()
        # An M-RoPE projector (Qwen-VL) counts positions unlike tokens: its slots cannot be stepped together.
        self._parallel = 1 if projector is not None and projector.mrope else max(1, parallel)
        self._info = metadata.model_info(
            meta,
            vocab_size=self.vocab.size,
            num_layers=int(llama_cpp.llama_model_n_layer(llm.model)),
            hidden_size=int(llm.n_embd()),
        )
        recurrent = lowlevel.is_recurrent(llm)
        prompter = Prompter(
            self.vocab,
            template=meta.get("tokenizer.chat_template"),
            defaults=metadata.sampling_defaults(meta),
            context_length=self._n_ctx,
            model_type=self.model_type,
            projector=projector,
        )
        self._engine: LlamaEngine | None = LlamaEngine(llm, prompter, slots=self._parallel, recurrent=recurrent)
        # The Llama's own context (opened at llama.cpp's minimum, unused): freed now, so the engine's is the only one.
        lowlevel.free_own_context(llm)
        self._embedder: LlamaEmbedder | None = None  # made at the first embed() (see embedding.py)

    # --- the engine and the facts -------------------------------------------------------------------------------

    def engine(self) -> LlamaEngine:
        """The model's one engine (EngineModel): the host drives it, and so does this model's Python API."""
        if self._engine is None or self._llm is None:
            raise ModelClosedError(f"the llama_cpp model {self.path!r} was closed; load it again to use it")
        return self._engine

    @property
    def context_length(self) -> int:
        """Tokens one request holds (prompt plus generation); ModelInfo.context_length is the trained one."""
        return self._n_ctx

    @property
    def threads(self) -> tuple[int, int]:
        """The OpenMP threads llama.cpp decodes and prefills with."""
        return int(self._llm.n_threads), int(self._llm.n_threads_batch)

    @property
    def template(self) -> str | None:
        """The GGUF's own chat template (tokenizer.chat_template), or None (ChatML is used then)."""
        return self.engine().prompter.template

    def check_options(self, options: GenerateOptions) -> None:
        """Refuse options this model cannot honour, without computing (the OptionChecker capability: the host calls
        it at submit). Reads only the vocabulary, so it is safe beside a running generation."""
        self.engine().prompter.options(options)

    def prompt_byte_limit(self) -> int:
        """Most bytes a prompt may have (PromptBound): the context's tokens times the longest token's bytes."""
        return self._n_ctx * self.vocab.max_token_bytes

    def batch_slots(self) -> int:
        """Requests its engine decodes at once: the `parallel` load option (1 for an M-RoPE vision projector);
        the same as `engine().slots`."""
        return self._parallel

    def embedding_size(self) -> int:
        """Length of the vectors `embed` returns: the model's output embedding width (the EmbeddingModel
        capability). Read from the weights, no context needed."""
        self._check_open()
        import llama_cpp

        out = getattr(llama_cpp, "llama_model_n_embd_out", None)
        return int(out(self._llm.model)) if out is not None else int(self._llm.n_embd())

    def embed(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingResult:
        """Pooled vectors of `texts` from a small context of their own (embedding.py): the engine, its KV caches and
        any suspended request are left exactly as they were (the EmbeddingModel capability)."""
        return self._embedder_now().embed(texts, normalize=normalize, truncate=truncate)

    def embedding_job(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingRun:
        """`embed` in bounded steps (ChunkedEmbedding): the host runs a generation step between two of them."""
        return self._embedder_now().job(texts, normalize=normalize, truncate=truncate)

    def _embedder_now(self) -> LlamaEmbedder:
        self._check_open()
        if self._embedder is None:
            self._embedder = LlamaEmbedder(
                self._llm, self.vocab, context_length=self._n_ctx, metadata=self._meta, architecture=self.model_type
            )
        return self._embedder

    def info(self) -> ModelInfo:
        """Architecture, sizes, quantisation and trained context length, from the GGUF metadata."""
        return self._info

    def accepts_images(self) -> bool:
        """A live probe (VisionModel): the model is open and its mmproj is loaded with a vision encoder."""
        p = self._projector
        return self._llm is not None and p is not None and p.alive and p.vision

    def renders_tools(self) -> bool:
        """Whether the GGUF's chat template renders `tools` (ChatFeatures): the probe chat rendering already makes,
        from the same per-template cache, so asking again renders nothing."""
        return chat_template.tool_support(self.template, self.vocab.bos_text, self.vocab.eos_text).tools

    def thinks(self) -> bool:
        """Whether the vocabulary has a thought channel's markers (ChatFeatures): found once, at load."""
        return self.vocab.think is not None

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` with the model's own tokenizer, special tokens parsed, no BOS added."""
        self._check_open()
        return self.vocab.tokenize(text.encode("utf-8"), add_bos=False)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids; control tokens render as nothing, as in generated text."""
        self._check_open()
        return self.vocab.decode(ids)

    def close(self) -> None:
        """Free the engine's context, the embedder's, the projector, then the weights. Idempotent; later calls
        raise ModelClosedError."""
        if self._llm is None:
            return
        self._release_live()
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
        if self._embedder is not None:  # its context goes before the weights it runs on
            self._embedder.close()
            self._embedder = None
        if self._projector is not None:
            self._projector.close()
        llm, self._llm = self._llm, None
        llm.close()

    def __enter__(self) -> LlamaCppModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._llm is None else f"n_ctx={self._n_ctx}, slots={self._parallel}"
        mmproj = f", mmproj={self.mmproj!r}" if self.mmproj else ""
        return f"LlamaCppModel({self.path!r}, {self.model_type}, {state}{mmproj})"

    def _check_open(self) -> None:
        if self._llm is None:
            raise ModelClosedError(f"the llama_cpp model {self.path!r} was closed; load it again to use it")

"""Optional capabilities: discovered on a loaded model (or backend), never added to TextModel.

`as_capability(model, VisionModel)` returns the model (or the first model it wraps, following `unwrap()`) that
offers the capability, or None. Wrappers (the host's, a caching layer) stay transparent this way without
re-declaring every capability of what they wrap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from modelhost.errors import InvalidInputError
from modelhost.inference.options import GenerateOptions
from modelhost.inference.prompt_checks import too_many_bytes, utf8_size_over
from modelhost.inference.types import (
    AttentionSnapshot,
    DeviceInfo,
    EmbeddingResult,
    LoRAConfig,
    Message,
    TrainingConfig,
)

C = TypeVar("C")

#: How many `unwrap()` hops to follow before giving up: a cycle of wrappers must not hang a capability probe.
MAX_UNWRAP_DEPTH = 16

#: Most inputs one `embed` call takes: OpenAI's own bound (2048 per request). Every input is held as tokens and as
#: a vector until the call returns, so without a bound one request could hold the model thread (and every request
#: queued behind it) for as long as it likes; clients with more text send it in several calls.
MAX_EMBEDDING_INPUTS = 2048


@runtime_checkable
class VisionModel(Protocol):
    """A model whose loaded checkpoint accepts images. A live probe: a vision family without its tower says False."""

    def accepts_images(self) -> bool:
        """True when this loaded checkpoint can see images."""
        ...


@runtime_checkable
class ChatFeatures(Protocol):
    """What a loaded model's chat path can do beyond plain turns: render tools, and think in a thought channel.

    Why a capability: a door must say so before any request (Ollama's /api/show lists "tools" and "thinking", and
    clients such as Open WebUI offer tools or a thinking toggle only for a model that lists them), and must refuse
    `think: true` on a model that cannot think before anything is queued, as Ollama does, rather than answer as if
    it had thought. Both facts are fixed for the life of the loaded model; the answers are cached by the backend
    (at most one template probe, never a render per request), so any thread may ask, beside a generation.
    """

    def renders_tools(self) -> bool:
        """True when the model's own chat template renders the `tools` it is given (chat_tools.probe); False when
        tools would reach it only through the generic tools turn."""
        ...

    def thinks(self) -> bool:
        """True when the model has a thought channel (its vocabulary has one pair of ThoughtMarkers), so a chat
        answer can carry a thought apart from its reply."""
        ...


@runtime_checkable
class Adapter(Protocol):
    """Trainable LoRA parameters attached to a model."""

    def total_params(self) -> int:
        """Number of trainable parameters across all adapter layers."""
        ...

    def save(self, path: str) -> None:
        """Write safetensors plus adapter_config.json, loadable by peft."""
        ...


@runtime_checkable
class TrainableModel(Protocol):
    """A model that can take LoRA adapters and exposes its tokenizer for training pipelines."""

    num_layers: int

    def apply_lora(self, config: LoRAConfig) -> Adapter:
        """Inject LoRA adapters into the target projections."""
        ...

    def encode(self, text: str) -> list[int]:
        """Tokenise with the model's own tokenizer."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Detokenise with the model's own tokenizer."""
        ...


@runtime_checkable
class Trainer(Protocol):
    """A running LoRA fine-tune: frozen base, trainable weights, optimiser state."""

    def step(self, batch: Any) -> float:
        """One optimiser step on a batch; returns the loss."""
        ...

    def step_accumulated(self, batches: Sequence[Any]) -> float:
        """One optimiser step over several micro-batches (gradient accumulation); returns the mean loss."""
        ...

    def loss(self, batch: Any) -> float:
        """The loss on a batch without updating weights."""
        ...

    def save(self, folder: str) -> None:
        """Save the adapter (peft layout)."""
        ...

    def close(self) -> None:
        """Free the optimiser state and trainable weights."""
        ...


@runtime_checkable
class TrainerModel(Protocol):
    """A model that opens a Trainer for LoRA supervised fine-tuning."""

    def open_trainer(self, config: TrainingConfig) -> Trainer:
        """Start a fine-tune with this configuration."""
        ...


@runtime_checkable
class AttentionInspector(Protocol):
    """A model that can show the post-RoPE keys (and queries) of one prefill."""

    def inspect_attention(self, prompt: str, **opts: Any) -> AttentionSnapshot:
        """Run one prefill over `prompt` and capture keys/queries per layer and head."""
        ...


@runtime_checkable
class DeviceInfoProvider(Protocol):
    """A backend that can describe its accelerator without loading a model."""

    def device_info(self) -> DeviceInfo:
        """Name, architecture and memory of the device this backend computes on."""
        ...


@runtime_checkable
class AvailabilityExplainer(Protocol):
    """A backend that can say why `available()` is False here: what is missing and how to get it (`modelhost
    backends` prints it beside "unavailable"), without importing its engine."""

    def unavailable_reason(self) -> str:
        """One line: the missing packages or device, and the install command; called only when unavailable."""
        ...


def missing_modules(names: Sequence[str]) -> list[str]:
    """Those of `names` that cannot be imported here, found without importing them (an engine's import costs
    seconds); a name whose lookup itself fails (a broken install) counts as missing."""
    import importlib.util

    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


@runtime_checkable
class MemoryEstimator(Protocol):
    """A backend that can say, before loading, about how many bytes a model will hold once loaded with given load
    options: its weights and the caches the load sets up (a KV cache per batch slot). A model set's memory budget
    (`serve --max-memory`) decides with it what fits; the file's size alone misses the KV cache, which for a
    batching host can outweigh the weights. Reads the model's header only: cheap, no model loaded."""

    def memory_estimate(self, path: str, **load_opts: Any) -> int:
        """Bytes `load_model(path, **load_opts)` will hold; raises the backend's own error for a file it cannot
        read (the caller falls back to the file's size)."""
        ...


@runtime_checkable
class OptionChecker(Protocol):
    """A model that checks generation options without computing. The host calls it when a request is submitted, so
    an option the model would refuse later (a JSON Schema its grammar engine cannot follow) is a clear error naming
    the option before anything is queued, not a failure after a stream began. Safe to call beside a generation."""

    def check_options(self, options: GenerateOptions) -> None:
        """Raise InvalidOptionError naming the first option this model cannot honour. `options` come parsed (the
        caller's one parse of the request, issue 37 item 1), so the model checks them without parsing again."""
        ...


@runtime_checkable
class PromptBound(Protocol):
    """A model that knows, without its tokenizer, the most bytes a prompt can have and still fit its context.

    Why: tokenizing is the model's work (on its thread, or under its tokenizer's lock), and a 25 MiB prompt took
    10-30 s of it only to be refused for being over the context. A token stands for at most so many bytes, so a
    prompt longer than `context_length x that` is over the context whatever its tokens: the host refuses it at
    submit, before queueing, for every backend that states the bound (`check_prompt_size`).
    """

    def prompt_byte_limit(self) -> int:
        """Most UTF-8 bytes a prompt (or a chat's text) may have: its context's tokens times the longest token's
        bytes. A static fact, safe from any thread."""
        ...


def check_prompt_size(model: object, prompt: str | None, messages: Sequence[Message] = ()) -> None:
    """Refuse a prompt (or chat turns, whose text the template only adds to) longer than the model's
    PromptBound allows, without tokenizing: InvalidInputError naming the size and the bound. A model without the
    capability is left to find out by tokenizing."""
    bound = as_capability(model, PromptBound)
    if bound is None:
        return
    limit = bound.prompt_byte_limit()
    texts = [prompt] if prompt is not None else [m.content for m in messages]
    size = utf8_size_over(limit, *(t for t in texts if isinstance(t, str)))
    if size is not None:
        raise too_many_bytes("prompt" if prompt is not None else "messages", size, limit)


def fit_embedding_inputs(model: object, texts: Sequence[str], *, truncate: bool) -> list[str]:
    """`texts` held to the model's PromptBound, without tokenizing (`cut_to_bytes`). The one byte bound of prompts,
    embeddings and /tokenize: without it a 10 MB input was tokenized whole on the model thread (the transformers
    backend: minutes, 1.7 GB kept) only to keep its first tokens. A model without the capability gets the texts as
    they are."""
    bound = as_capability(model, PromptBound)
    items = list(texts)
    if bound is None:
        return items
    limit = bound.prompt_byte_limit()
    for i, text in enumerate(items):
        if isinstance(text, str) and utf8_size_over(limit, text) is not None:
            cut = cut_to_bytes(i, text.encode("utf-8", "surrogatepass"), limit, truncate=truncate)
            items[i] = cut.decode("utf-8", "ignore") if cut is not None else text
    return items


def cut_to_bytes(index: int, data: bytes, limit: int, *, truncate: bool) -> bytes | None:
    """Embedding input `index` (UTF-8 `data`) held to `limit` bytes, the most its model's context's tokens can stand
    for: None when it is within; else refused (InvalidInputError naming the index) or, with `truncate`, cut to
    twice `limit` bytes, so the tokens the cut keeps are those of the whole text (only the last few before the cut
    could differ, and the model cuts to its context after tokenizing). A character the cut splits is dropped whole
    when the bytes are decoded."""
    size = len(data)
    if size <= limit:
        return None
    if not truncate:
        raise too_many_bytes(f"input[{index}]", size, limit, truncatable=True)
    return data[: 2 * limit]


@runtime_checkable
class EmbeddingModel(Protocol):
    """A model that turns texts into pooled vectors (embeddings) with the weights it already holds for generation.

    Why a capability and not part of TextModel: not every engine can pool hidden states (an OCR pipeline cannot),
    and a door must be able to say "this model does not embed" before anything is queued.

    Contract every backend keeps:
    - Bounds: at most MAX_EMBEDDING_INPUTS inputs; each a non-empty string of at most the model's context length in
      tokens. An input over that bound is an InvalidInputError naming its index (`input[3]`), unless the caller set
      `truncate=True`, when its end is cut to fit and its index is listed in `EmbeddingResult.truncated`. Every
      input is checked before any compute, so a refused call costs nothing.
    - Pooling: the GGUF's (or checkpoint's) own pooling when it declares one, else the mean of the last hidden state
      over the input's tokens. With `normalize=True` (the default) each vector is scaled to unit L2 norm, as OpenAI,
      Ollama's /api/embed and llama-server return them, so a dot product is a cosine similarity.
    - Determinism: the same text in the same call layout gives the same vector bit for bit; batching several inputs
      in one pass may round differently from one at a time (each backend's tests say by how much).
    - Isolation: `embed` may be called between two tokens of a generation stream (the host does, so an embedding
      never waits for a long generation) and between two steps of the model's Engine. It must leave both
      exactly as they were: no shared KV cache, sampler or logits state may change, so the generation continues as
      if the call had not happened.
    """

    def embedding_size(self) -> int:
        """Length of each vector (the model's hidden size, or its pooling head's). A static fact: safe from any
        thread, no compute."""
        ...

    def embed(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingResult:
        """Pooled vectors for `texts`, in order, as one (len(texts), embedding_size()) float32 array."""
        ...


@runtime_checkable
class EmbeddingJob(Protocol):
    """One embedding call cut into bounded steps, so the host can run a generation step between two of them (a
    chat beside a long embedding waits behind one step, not the whole call). Made by `start_embedding` on the model
    thread, which alone steps it."""

    def step(self) -> EmbeddingResult | None:
        """Do one bounded piece of the work: the result after the last piece, else None. Raises what `embed`
        would (InvalidInputError naming an input, the model's GenerationError); the job is over then."""
        ...

    def close(self) -> None:
        """End the job, finished or not, freeing what it holds (a cancelled request's job is closed unfinished).
        Idempotent."""
        ...


@runtime_checkable
class ChunkedEmbedding(Protocol):
    """An EmbeddingModel that embeds in bounded steps (EmbeddingJob). The same contract as `embed`, and the same
    vectors as `embed` gives for the same call; a model holds one job at a time (starting one ends the last)."""

    def embedding_job(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingJob:
        """A job that embeds `texts` step by step (nothing computed yet; inputs that are empty, not strings or too
        many are refused here, as by `embed`)."""
        ...


class _WholeEmbedding:
    """A model's one `embed` call as a job of one step (a model without ChunkedEmbedding)."""

    def __init__(self, model: EmbeddingModel, texts: Sequence[str], options: dict[str, Any]) -> None:
        self._call: Callable[[], EmbeddingResult] | None = lambda: model.embed(texts, **options)

    def step(self) -> EmbeddingResult | None:
        call, self._call = self._call, None
        if call is None:
            raise RuntimeError("this embedding job has already given its result")
        return call()

    def close(self) -> None:
        self._call = None


def start_embedding(model: object, texts: Sequence[str], **options: Any) -> EmbeddingJob:
    """An EmbeddingJob for `texts` on `model`: its own steps (ChunkedEmbedding), else its `embed` as one step.
    `options` are `embed`'s keywords (normalize, truncate). TypeError for a model that cannot embed."""
    chunked = as_capability(model, ChunkedEmbedding)
    if chunked is not None:
        return chunked.embedding_job(texts, **options)
    embedder = as_capability(model, EmbeddingModel)
    if embedder is None:
        raise TypeError(f"{type(model).__name__} cannot embed text")
    return _WholeEmbedding(embedder, texts, options)


def check_embedding_inputs(texts: Sequence[str]) -> list[str]:
    """The checks every EmbeddingModel (and the host, before queueing) makes on what it is asked to embed, without
    a tokenizer: a non-empty sequence of at most MAX_EMBEDDING_INPUTS non-empty strings. Raises InvalidInputError
    naming the first bad input's index; returns the inputs as a list."""
    if isinstance(texts, str):
        texts = [texts]  # one text is a call with one input, not a sequence of characters
    items = list(texts)
    if not items:
        raise InvalidInputError("input: nothing to embed (the list of inputs is empty)")
    if len(items) > MAX_EMBEDDING_INPUTS:
        raise InvalidInputError(f"input: {len(items)} inputs; at most {MAX_EMBEDDING_INPUTS} per call")
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise InvalidInputError(f"input[{i}]: expected a string, got {type(text).__name__}")
        if not text:
            raise InvalidInputError(f"input[{i}]: an empty string has no tokens to pool")
    return items


def too_long(index: int, tokens: int, limit: int) -> InvalidInputError:
    """The error for an input over the context: it names the input's index, its size and the bound."""
    return InvalidInputError(
        f"input[{index}]: {tokens} tokens, more than the {limit} the model's context holds; shorten it, split it, "
        "or ask for truncation"
    )


def as_capability(obj: object, capability: type[C]) -> C | None:
    """Return `obj`, or the first object reached through `unwrap()`, that implements `capability`; else None."""
    current: object | None = obj
    for _ in range(MAX_UNWRAP_DEPTH):
        if current is None:
            return None
        if isinstance(current, capability):
            return current
        unwrap = getattr(current, "unwrap", None)
        current = unwrap() if callable(unwrap) else None
    return None


def accepts_images(model: object) -> bool:
    """True when the model (or what it wraps) is a VisionModel whose checkpoint accepts images right now."""
    vision = as_capability(model, VisionModel)
    return bool(vision is not None and vision.accepts_images())

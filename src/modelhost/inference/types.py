"""Value types of the inference contract: what goes into a model and what comes out.

All are frozen dataclasses: they cross threads (a model's own thread, the event loop) and must not change under
a reader. Images travel as whatever the caller has (PIL image, HxWx3 uint8 array, encoded PNG/JPEG bytes); the
backend that accepts images turns them into pixels, so a text-only backend never pays for decoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

#: Why a generation stopped. "stop": end of sequence, a stop string or a stop token; "length": `max_tokens`;
#: "cancelled": the caller broke out or set `cancel`; "error": the engine failed (see `TextModel.err()`).
FinishReason = Literal["stop", "length", "cancelled", "error"]

#: Chat roles the templates know. "tool" is accepted for templates that render tool results.
Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})

#: Which part of the answer a token's text belongs to: the reply ("content"), the model's thought ("thought", as
#: vLLM and llama-server emit `reasoning_content`), or a thought channel's own marker ("marker": `<think>`,
#: `</think>`; its text is still in Token.text, so a plain text reader sees where the thought ends).
Channel = Literal["content", "thought", "marker"]

#: An image as a caller holds it: a PIL.Image.Image, a numpy HxWx3 uint8 array, or encoded PNG/JPEG bytes.
ImageInput = Any


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """A token's log-probability under the model (its raw distribution, before sampling settings), with its own
    piece of text and bytes (a piece may be part of a multi-byte character, so `text` can hold U+FFFD), and, for the
    chosen token, the most likely alternatives at that step (the `logprobs` option says how many)."""

    text: str
    bytes: bytes
    logprob: float
    top: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True, slots=True)
class Token:
    """One generated token. `text` is the text that became safe to show with this token.

    `text` can be empty (a token that is half of a multi-byte character, or text held back because it may start a
    stop string) and can carry more than the token's own piece (held-back text released later). Concatenating the
    `text` of every token gives the answer exactly, never broken UTF-8.
    """

    id: int
    text: str
    logprob: TokenLogprob | None = None  # only when the `logprobs` option asked for it
    channel: Channel = "content"  # a backend that knows its model's thought markers says where each token falls


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of a tool: the tool's `name`, its `arguments` as JSON text of an object (text, as OpenAI carries
    them, so the value stays hashable and byte-faithful), and the caller's `id` for it (empty when none)."""

    name: str
    arguments: str = "{}"
    id: str = ""


@dataclass(frozen=True, slots=True)
class Message:
    """One chat turn. `images` are attached to this turn; the model's template decides where they go.

    Tool turns: an assistant turn's earlier `tool_calls`, and a "tool" turn's `tool_call_id` (the call it answers)
    and `name` (the tool's), which a template that knows tools renders in its own format.
    """

    role: str
    content: str
    images: tuple[ImageInput, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        # A list passed by a caller would make the frozen message mutable through the back door.
        if not isinstance(self.images, tuple):
            object.__setattr__(self, "images", tuple(self.images))
        if not isinstance(self.tool_calls, tuple):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))


def has_images(messages: Sequence[Message]) -> bool:
    """True when any turn carries an image: the check every text-only model makes before compute."""
    return any(m.images for m in messages)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """Static facts about a loaded model, read from its own metadata. 0 means unknown."""

    architecture: str
    vocab_size: int = 0
    num_layers: int = 0
    hidden_size: int = 0
    quant_bits: int = 0
    quant_group: int = 0
    context_length: int = 0


@dataclass(frozen=True, slots=True)
class GenerateMetrics:
    """What the last finished operation cost. Seconds are wall-clock on the model's thread."""

    prompt_tokens: int = 0
    generated_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    total_seconds: float = 0.0
    prefill_tokens_per_second: float = 0.0
    decode_tokens_per_second: float = 0.0
    peak_memory_bytes: int = 0
    active_memory_bytes: int = 0
    thinking_budget_forced: bool = False
    finish_reason: FinishReason | None = None
    #: Of `prompt_tokens`, how many were reused from the KV cache (a shared prefix) rather than evaluated.
    cached_prompt_tokens: int = 0
    #: What the model found doubtful about its answer, for the user ("" when nothing): the `ocr` model says so when
    #: most of a page's lines are in a script its recogniser cannot read.
    warning: str = ""


@dataclass(frozen=True, slots=True)
class ClassifyResult:
    """The one token chosen at a prompt's last position; `logits` (vocabulary-sized) only when asked for."""

    token: Token
    logits: Any = None  # numpy.ndarray of shape (vocab_size,) when `logits=True`


@dataclass(frozen=True, slots=True)
class EmbeddingResult:
    """The pooled vectors of one `embed` call, one per input in input order, and the tokens they cost.

    `vectors` is a (len(inputs), embedding_size) float32 numpy array: one block of memory rather than a list of
    lists, so a door can encode it (float JSON or base64 of little-endian float32) without a Python float per value.
    `prompt_tokens` counts every token evaluated across the inputs (after any truncation the caller asked for), which
    is what OpenAI's `usage.prompt_tokens` and Ollama's `prompt_eval_count` report.
    """

    vectors: Any
    prompt_tokens: int
    #: Indexes of the inputs that were cut to fit the context (only when the caller allowed truncation).
    truncated: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One prompt's result in `batch_generate`: its tokens, or the error that stopped it (others carry on)."""

    tokens: tuple[Token, ...] = ()
    error: BaseException | None = None
    finish_reason: FinishReason | None = None

    @property
    def text(self) -> str:
        """The generated text, joined."""
        return "".join(t.text for t in self.tokens)


@dataclass(frozen=True, slots=True)
class LoRAConfig:
    """How to attach LoRA adapters: rank, scaling alpha, which projections."""

    rank: int = 8
    alpha: float = 16.0
    target_keys: tuple[str, ...] = ("q_proj", "v_proj")
    bf16: bool = False


@dataclass(frozen=True, slots=True)
class TrainingConfig:
    """A LoRA fine-tuning run."""

    epochs: int = 1
    batch_size: int = 1
    gradient_accumulation: int = 1
    learning_rate: float = 1e-4
    lora: LoRAConfig = field(default_factory=LoRAConfig)


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What a backend computes on. Sizes in bytes; 0 means unknown."""

    name: str
    architecture: str = ""
    memory_size: int = 0
    max_buffer_length: int = 0
    max_recommended_working_set_size: int = 0


@dataclass(frozen=True, slots=True)
class AttentionSnapshot:
    """Post-RoPE keys (and queries where the engine has them) from one prefill.

    `keys[layer]` has shape (num_heads, seq_len, head_dim), where `num_heads` counts KV heads; `queries[layer]` has
    shape (num_query_heads, seq_len, head_dim). Under grouped-query attention num_query_heads > num_heads.
    """

    num_layers: int
    num_heads: int
    num_query_heads: int
    seq_len: int
    head_dim: int
    architecture: str
    keys: tuple[Any, ...] = ()
    queries: tuple[Any, ...] = ()
    token_ids: tuple[int, ...] = ()

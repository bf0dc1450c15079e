"""TransformersModel: a loaded checkpoint behind the TextModel contract, plus vision and attention inspection.

It generates one way: through its engine (engine.py), a manual prefill/decode over a `DynamicCache` rather than
`model.generate()`, because the contract wants requests that join and leave between steps, our own sampler steps,
and the contract's one decoder. The TextModel methods come from the contract's OverEngine, over that engine; what
is written here is the model's static facts and its capabilities.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from modelhost.backends.transformers.attention import capturing
from modelhost.backends.transformers.engine import TransformersEngine, splicable
from modelhost.backends.transformers.loading import Checkpoint
from modelhost.backends.transformers.prompts import Prompts
from modelhost.backends.transformers.runner import Runner
from modelhost.backends.transformers.training import LoRATraining, TransformersAdapter, TransformersTrainer
from modelhost.errors import GenerationError
from modelhost.inference.chat_tools import ToolSupport
from modelhost.inference.examples import Example
from modelhost.inference.options import GenerateOptions
from modelhost.inference.over_engine import OverEngine
from modelhost.inference.types import (
    AttentionSnapshot,
    EmbeddingResult,
    LoRAConfig,
    ModelInfo,
    TrainingConfig,
)

#: Requests decoded together when the load sets no `parallel` (as llama_cpp): batched decode steps cost little more
#: than one on a CPU (bench/batching.py: ~1.8x the aggregate of one at a time for 4 rows).
DEFAULT_PARALLEL = 4


class TransformersModel(OverEngine):
    """A checkpoint loaded with transformers. TextModel (over its EngineModel engine), VisionModel, ChatFeatures,
    OptionChecker, PromptBound, EmbeddingModel, AttentionInspector, and (through
    LoRATraining, training.py) TrainableModel and TrainerModel for LoRA fine-tuning.

    Its parts are public seams: `checkpoint` (the loaded module, tokenizer, processor and facts; loading.py),
    `runner` (forward passes, sampling, metrics; runner.py), `prompts` (rendering and tokenising; prompts.py) and
    `training`. The engine (engine.py) is built from the runner and prompts alone.

    Not thread-safe: the host drives each model from one long-lived thread. ChatFeatures are the exception (a door
    asks them beside a generation): the tools probe renders the template text only, touching no weights or cache.
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        self.model_type: str = str(checkpoint.model.config.model_type)
        self.runner = Runner(checkpoint)
        self.prompts = Prompts(checkpoint, vocab_size=self.runner.info.vocab_size)
        self.training = LoRATraining(checkpoint)
        self._engine: TransformersEngine | None = None
        super().__init__()

    # ---------------------------------------------------------------------------------------------------- contract
    # generate, chat, classify, batch_generate, metrics and err are OverEngine's, over `engine()`.

    def engine(self) -> TransformersEngine:
        """The model's one engine (EngineModel), made at the first call: the host drives it, and this model's own
        generate/chat/classify/batch_generate run over it, so the model holds one set of caches however it is used.
        `parallel` slots (default DEFAULT_PARALLEL); one when this model's cache cannot be spliced (engine.py)."""
        self.runner.check_open()
        if self._engine is None:
            slots = (self.checkpoint.parallel or DEFAULT_PARALLEL) if splicable(self.checkpoint.model) else 1
            self._engine = TransformersEngine(self.runner, self.prompts, slots)
        return self._engine

    def info(self) -> ModelInfo:
        """Static facts from the checkpoint's config."""
        return self.runner.info

    def close(self) -> None:
        """Drop the weights and caches. Idempotent; later calls raise ModelClosedError."""
        if self.runner.closed:
            return
        if self._engine is not None:
            self._engine.close()
        device = self.checkpoint.device
        self.checkpoint.model = self.checkpoint.processor = None  # every part reads this as closed (Runner.closed)
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()

    def __enter__(self) -> TransformersModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------ capabilities

    def check_options(self, options: GenerateOptions) -> None:
        """Refuse options this model cannot honour, before any compute (the OptionChecker capability)."""
        self.runner.options(options)

    def prompt_byte_limit(self) -> int:
        """Most UTF-8 bytes a prompt may have (PromptBound): the context's tokens times the longest token's bytes,
        fixed at load, so any thread may ask."""
        return self.prompts.byte_limit

    def embedding_size(self) -> int:
        """Length of the vectors `embed` returns: the text config's hidden size (the EmbeddingModel capability)."""
        self.runner.check_open()
        from modelhost.backends.transformers import embedding

        return embedding.embedding_size(self.checkpoint.model)

    def embed(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingResult:
        """Mean-pooled last hidden states of `texts`, a padded batch at a time (embedding.py). Runs without a cache,
        so a generation suspended between two tokens is left as it was (the EmbeddingModel capability)."""
        self.runner.check_open()
        from modelhost.backends.transformers import embedding

        ckpt = self.checkpoint
        return embedding.embed(
            ckpt.model, ckpt.tokenizer, texts, limit=ckpt.context_length, pad_id=self.runner.pad_id,
            device=ckpt.device, normalize=normalize, truncate=truncate,
        )  # fmt: skip

    def accepts_images(self) -> bool:
        """A live probe: a processor with an image processor, and a vision tower in the loaded weights."""
        return self.prompts.accepts_images()

    def renders_tools(self) -> bool:
        """Whether the chat template renders `tools` (ChatFeatures): the probe chat rendering already makes, run
        once per model and cached."""
        return self.tool_support().tools

    def tool_support(self) -> ToolSupport:
        """What this model's template renders of tools and earlier calls (chat_tools.probe, run once)."""
        return self.prompts.tool_support()

    def thinks(self) -> bool:
        """Whether the vocabulary has a thought channel's markers (ChatFeatures): found once, at load."""
        return self.runner.thought is not None

    def inspect_attention(self, prompt: str, **opts: Any) -> AttentionSnapshot:
        """One prefill over `prompt`, capturing each layer's post-RoPE keys and queries as numpy arrays.

        keys[layer] is (KV heads, seq_len, head_dim); queries[layer] is (query heads, seq_len, head_dim).
        """
        GenerateOptions.parse(opts)  # the same options as generate are accepted (and validated), none apply
        ids = self.prompts.raw(prompt).ids
        module = self.checkpoint.model
        with capturing(module) as recorder:
            self.runner.forward(torch.tensor([ids], device=self.runner.device), cache=None)
        layers = sorted(recorder.keys)
        keys = tuple(recorder.keys[n][0].float().cpu().numpy() for n in layers)
        queries = tuple(recorder.queries[n][0].float().cpu().numpy() for n in layers)
        if not keys:
            raise GenerationError(f"{type(module).__name__} does not use the attention interface; nothing seen")
        return AttentionSnapshot(
            num_layers=len(keys),
            num_heads=int(keys[0].shape[0]),
            num_query_heads=int(queries[0].shape[0]),
            seq_len=len(ids),
            head_dim=int(keys[0].shape[-1]),
            architecture=self.model_type,
            keys=keys,
            queries=queries,
            token_ids=tuple(ids),
        )

    # --- TrainableModel and TrainerModel, by LoRATraining (training.py) ----------------------------------------

    @property
    def num_layers(self) -> int:
        """Transformer blocks of the text model."""
        return self.training.num_layers

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` as the tokenizer splits it, adding no special tokens."""
        return self.training.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` (special tokens kept, so a rendered template reads back as it was)."""
        return self.training.decode(ids)

    def apply_lora(self, config: LoRAConfig, *, dropout: float = 0.0, seed: int | None = None) -> TransformersAdapter:
        """Inject LoRA layers into the target projections (once per load); see LoRATraining.apply_lora."""
        return self.training.apply_lora(config, dropout=dropout, seed=seed)

    def adapter(self) -> TransformersAdapter | None:
        """The adapter `apply_lora` injected, if any."""
        return self.training.adapter()

    def encode_example(self, record: Mapping[str, Any], *, max_length: int | None = None) -> Example:
        """Tokenise a training record (the ExampleEncoder capability; see LoRATraining.encode_example)."""
        return self.training.encode_example(record, max_length=max_length)

    def open_trainer(
        self, config: TrainingConfig, *, dropout: float = 0.0, seed: int | None = None
    ) -> TransformersTrainer:
        """Start a fine-tune (see LoRATraining.open_trainer)."""
        return self.training.open_trainer(config, dropout=dropout, seed=seed)

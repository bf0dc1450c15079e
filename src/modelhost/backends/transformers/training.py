"""LoRA fine-tuning on a transformers checkpoint, with peft: TrainableModel, TrainerModel and the Trainer.

`LoRATraining` is what TransformersModel delegates these capabilities to. `apply_lora` injects peft's LoRA layers
into the loaded module in place, so the model's own `chat()`/`generate()` run with the adapter at once (an
in-process check of what was just learned needs no reload). The trainer is a plain loop: one forward, a
token-weighted cross-entropy, backward, AdamW. That is all Hugging Face's Trainer does for this case too, minus its
bookkeeping; the benchmark holds us to a plain peft + torch loop on the same data.

A batch is a sequence of the contract's `Example` (modelhost.inference.examples). It is padded on the right with
the tokenizer's pad id (labels IGNORE there, attention mask 0), so the positions of the real tokens are those an
unpadded pass would see.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from modelhost.errors import InvalidInputError, InvalidOptionError, ModelClosedError, ModelHostError
from modelhost.inference.examples import IGNORE, Example, record_kind
from modelhost.inference.types import LoRAConfig, TrainingConfig

if TYPE_CHECKING:
    from modelhost.backends.transformers.loading import Checkpoint

log = logging.getLogger(__name__)

#: Projections LoRA targets by architecture when the caller's keys name none of the model's modules (the contract's
#: default is q_proj/v_proj, which every Llama-like model has). Llama-family names cover Llama, Mistral, Qwen2/3,
#: SmolLM, Gemma; GPT-2-style models name their fused projections differently.
ARCHITECTURE_TARGETS: dict[str, tuple[str, ...]] = {
    "gpt2": ("c_attn", "c_proj"),
    "gpt_neox": ("query_key_value", "dense"),
    "phi": ("q_proj", "k_proj", "v_proj", "dense"),
    "falcon": ("query_key_value", "dense"),
}
LLAMA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

#: Gradient-norm clip: a first step on a memorisation set with a high learning rate can otherwise blow the
#: adapter up in one update (the loss then climbs instead of falling).
MAX_GRAD_NORM = 1.0


class TransformersAdapter:
    """The LoRA adapter injected into a loaded model (peft). Adapter."""

    def __init__(self, peft_model: Any, config: LoRAConfig, targets: tuple[str, ...], model_type: str) -> None:
        self.peft_model = peft_model
        self.config = config
        self.targets = targets
        self.model_type = model_type

    def total_params(self) -> int:
        """Trainable parameters across all adapter layers."""
        return sum(p.numel() for p in self.peft_model.parameters() if p.requires_grad)

    def save(self, path: str, *, gguf: bool = True) -> None:
        """Write `adapter_model.safetensors` + `adapter_config.json` (peft's layout) into the folder `path`.

        With `gguf` (default) and an architecture llama.cpp's LoRA loader knows, also `adapter.gguf`: the same
        adapter for the llama.cpp backend, so one folder serves both engines (`adapter=` of either).
        """
        from modelhost.backends.transformers.gguf_lora import GGUF_NAME, exportable, write_gguf_lora

        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        self.peft_model.save_pretrained(str(folder))
        config = self.peft_model.base_model.model.config
        if gguf and exportable(self.model_type):
            write_gguf_lora(folder, config.to_dict(), folder / GGUF_NAME)


class LoRATraining:
    """TrainableModel and TrainerModel over one loaded checkpoint; TransformersModel offers these by delegation.

    Closed with the model: once the checkpoint's module is dropped, every call raises ModelClosedError.
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        self._ckpt = checkpoint
        self.model_type = str(checkpoint.model.config.model_type)
        self._adapter: TransformersAdapter | None = None

    # ------------------------------------------------------------------------------------------- TrainableModel

    @property
    def num_layers(self) -> int:
        """Transformer blocks of the text model."""
        return int(getattr(self._ckpt.model.config.get_text_config(), "num_hidden_layers", 0) or 0)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` as the tokenizer splits it, adding no special tokens."""
        return [int(i) for i in self._ckpt.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` (special tokens kept, so a rendered template reads back as it was)."""
        return str(self._ckpt.tokenizer.decode(list(ids), skip_special_tokens=False))

    def apply_lora(self, config: LoRAConfig, *, dropout: float = 0.0, seed: int | None = None) -> TransformersAdapter:
        """Inject LoRA layers into the target projections (once per load); the base weights freeze.

        `seed` makes the adapter's random initial A matrices repeatable without touching the process's RNG.
        Target keys that name no module of this model fall back to the architecture's defaults.
        """
        from peft import LoraConfig, get_peft_model

        self._check_trainable_open()
        if self._adapter is not None:
            raise InvalidOptionError(
                "lora", "this model already has a LoRA adapter applied; load it again to start over"
            )
        if config.rank < 1:
            raise InvalidOptionError("rank", f"LoRA rank must be at least 1, got {config.rank}")
        if not 0.0 <= dropout < 1.0:
            raise InvalidOptionError("dropout", f"LoRA dropout must be in [0, 1), got {dropout}")
        targets = self._targets(config.target_keys)
        narrowest = min(
            min(module.weight.shape)  # (out, in) for Linear, (in, out) for Conv1D
            for name, module in self._ckpt.model.named_modules()
            if _is_linear(module) and name.rsplit(".", 1)[-1] in targets
        )
        if config.rank > narrowest:
            # A LoRA update of a d-wide layer has rank at most d: a larger rank only adds memory (rank 100000
            # allocated gigabytes per layer) and learns nothing more.
            raise InvalidOptionError(
                "rank", f"LoRA rank {config.rank} is wider than the narrowest adapted layer ({narrowest}) of this model"
            )
        peft_config = LoraConfig(
            r=config.rank,
            lora_alpha=config.alpha,  # type: ignore[arg-type]  # peft annotates int; floats work
            lora_dropout=dropout,
            target_modules=list(targets),
            bias="none",
            task_type="CAUSAL_LM",
        )
        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(seed)
            peft_model = get_peft_model(self._ckpt.model, peft_config)
        # peft replaced the target Linear layers inside the checkpoint's module; keep generating through the base
        # module (its config, heads and cache handling are what the rest of this backend reads), now with LoRA inside.
        self._adapter = TransformersAdapter(peft_model, config, targets, self.model_type)
        return self._adapter

    def adapter(self) -> TransformersAdapter | None:
        """The adapter `apply_lora` injected, if any."""
        return self._adapter

    # --------------------------------------------------------------------------------------------- data encoding

    def encode_example(self, record: Mapping[str, Any], *, max_length: int | None = None) -> Example:
        """Tokenise a training record (see modelhost.training.data). `max_length` truncates from the end."""
        kind = record_kind(record)
        if kind == "messages":
            segments = self._chat_segments(record["messages"])
        elif kind == "prompt":
            segments = [(str(record["prompt"]), False), (str(record["completion"]), True)]
        else:
            segments = [(str(record["text"]), True)]
        ids: list[int] = []
        labels: list[int] = []
        for text, trained in segments:
            piece = self.encode(text) if text else []
            ids.extend(piece)
            labels.extend(piece if trained else [IGNORE] * len(piece))
        if kind != "messages":
            # Raw text has no end marker of its own; learning one is what makes generation stop after it.
            eos = self._ckpt.tokenizer.eos_token_id
            if eos is not None:
                ids.append(int(eos))
                labels.append(int(eos))
        limit = max_length or self._ckpt.context_length
        if limit:
            ids, labels = ids[:limit], labels[:limit]
        if all(label == IGNORE for label in labels[1:]):
            raise InvalidInputError(f"a training record keeps no trained token within {limit} tokens")
        return Example(tuple(ids), tuple(labels))

    def _chat_segments(self, messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, bool]]:
        """The conversation as (text, trained) pieces: each assistant turn's text (with its end-of-turn marker)
        trained, everything around it not.

        The template renders the conversation up to each assistant turn twice: with the generation prompt (what
        the model sees before it answers) and with the turn itself. The difference is exactly what the model must
        produce. The pieces are tokenised separately, so each assistant turn starts on the same token boundary as
        at inference, where its prompt is tokenised alone.
        """
        conversation = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        try:
            full = self._render(conversation, generation_prompt=False)
            segments: list[tuple[str, bool]] = []
            done = 0
            for i, message in enumerate(conversation):
                if message["role"] != "assistant":
                    continue
                before = self._render(conversation[:i], generation_prompt=True) if i else ""
                through = self._render(conversation[: i + 1], generation_prompt=False)
                if not (through.startswith(before) and full.startswith(through) and len(before) >= done):
                    raise InvalidInputError(
                        "the chat template does not render conversations prefix by prefix; train on "
                        "prompt/completion records instead"
                    )
                segments.append((full[done : len(before)], False))
                segments.append((full[len(before) : len(through)], True))
                done = len(through)
            segments.append((full[done:], False))
        except ModelHostError:
            raise
        except Exception as exc:
            raise InvalidInputError(f"the chat template cannot render this conversation: {exc}") from exc
        return [(text, trained) for text, trained in segments if text]

    def _render(self, conversation: list[dict[str, str]], *, generation_prompt: bool) -> str:
        if not conversation:
            return ""
        tokenizer = self._ckpt.tokenizer
        return str(tokenizer.apply_chat_template(conversation, add_generation_prompt=generation_prompt, tokenize=False))

    # --------------------------------------------------------------------------------------------- TrainerModel

    def open_trainer(
        self, config: TrainingConfig, *, dropout: float = 0.0, seed: int | None = None
    ) -> TransformersTrainer:
        """Start a fine-tune: apply `config.lora` (unless an adapter is already applied), then an AdamW optimiser
        over the adapter's weights."""
        self._check_trainable_open()
        adapter = self._adapter or self.apply_lora(config.lora, dropout=dropout, seed=seed)
        pad = self._ckpt.tokenizer.pad_token_id
        if pad is None:
            pad = self._ckpt.tokenizer.eos_token_id if self._ckpt.tokenizer.eos_token_id is not None else 0
        return TransformersTrainer(adapter, config, device=self._ckpt.device, pad_id=int(pad))

    def _targets(self, keys: Sequence[str]) -> tuple[str, ...]:
        leaves = {name.rsplit(".", 1)[-1] for name, module in self._ckpt.model.named_modules() if _is_linear(module)}
        chosen = tuple(k for k in keys if k in leaves)
        if chosen:
            return chosen
        fallback = ARCHITECTURE_TARGETS.get(self.model_type, LLAMA_TARGETS)
        chosen = tuple(k for k in fallback if k in leaves)
        if not chosen:
            raise InvalidOptionError(
                "target_keys", f"none of {list(keys)} names a linear layer of this {self.model_type} model"
            )
        log.info("LoRA targets %s not in this %s model; using %s", list(keys), self.model_type, list(chosen))
        return chosen

    def _check_trainable_open(self) -> None:
        if self._ckpt.model is None:
            raise ModelClosedError("this model was closed")


class TransformersTrainer:
    """A running LoRA fine-tune: the base frozen, the adapter trained with AdamW. Trainer.

    Drive it from one thread. Each `step*` call is one optimiser step; the loss it returns is the mean over the
    trained tokens of the step's batches (token-weighted, so a short example counts no more per token than a long
    one, and gradient accumulation equals one big batch).
    """

    def __init__(self, adapter: TransformersAdapter, config: TrainingConfig, *, device: torch.device, pad_id: int):
        if config.learning_rate <= 0 or not math.isfinite(config.learning_rate):
            raise InvalidOptionError("learning_rate", f"must be a positive number, got {config.learning_rate}")
        self.adapter = adapter
        self.config = config
        self.device = device
        self.pad_id = pad_id
        self._model: Any = adapter.peft_model
        self._params = [p for p in self._model.parameters() if p.requires_grad]
        self._optimizer: torch.optim.Optimizer | None = torch.optim.AdamW(self._params, lr=config.learning_rate)
        self._autocast = config.lora.bf16 and device.type in ("cuda", "cpu")
        #: Tokens (real, not padding) the last step read, for throughput figures.
        self.last_tokens = 0

    def step(self, batch: Sequence[Example]) -> float:
        """One optimiser step on one batch; returns its loss."""
        return self.step_accumulated([batch])

    def step_accumulated(self, batches: Sequence[Sequence[Example]]) -> float:
        """One optimiser step over several micro-batches (gradient accumulation); returns the token-mean loss."""
        optimizer = self._open_optimizer()
        batches = [b for b in batches if b]
        if not batches:
            raise InvalidInputError("a training step needs at least one example")
        tensors = [self.collate(b) for b in batches]
        total = sum(int((t["labels"][:, 1:] != IGNORE).sum()) for t in tensors)
        if total == 0:
            raise InvalidInputError("these batches have no trained token")
        self._model.train()
        optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0
        tokens = 0
        for t in tensors:
            summed = self._summed_loss(t)
            (summed / total).backward()
            loss_sum += float(summed.detach())
            tokens += int(t["attention_mask"].sum())
        torch.nn.utils.clip_grad_norm_(self._params, MAX_GRAD_NORM)
        optimizer.step()
        self.last_tokens = tokens
        return loss_sum / total

    def loss(self, batch: Sequence[Example]) -> float:
        """The token-mean loss on a batch, without updating anything."""
        return self._eval([batch])

    def evaluate(self, batches: Sequence[Sequence[Example]]) -> float:
        """The token-mean loss over several batches (a held-out set), without updating anything."""
        return self._eval(batches)

    def save(self, folder: str) -> None:
        """Save the adapter: peft's layout, plus `adapter.gguf` for llama.cpp where the architecture allows."""
        self.adapter.save(folder)

    def close(self) -> None:
        """Drop the optimiser state; the adapter stays in the model (its chat now uses what was learned)."""
        self._optimizer = None
        self._model.eval()

    def __enter__(self) -> TransformersTrainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------- internals

    def collate(self, batch: Sequence[Example]) -> dict[str, torch.Tensor]:
        """Right-padded input_ids, attention_mask and labels (IGNORE on padding) on the model's device."""
        width = max(len(e.ids) for e in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, example in enumerate(batch):
            n = len(example.ids)
            ids[row, :n] = torch.tensor(example.ids, dtype=torch.long)
            labels[row, :n] = torch.tensor(example.labels, dtype=torch.long)
            mask[row, :n] = 1
        return {
            "input_ids": ids.to(self.device),
            "attention_mask": mask.to(self.device),
            "labels": labels.to(self.device),
        }

    def _summed_loss(self, t: dict[str, torch.Tensor]) -> torch.Tensor:
        """Cross-entropy summed over the trained positions (next-token: position i predicts label i+1)."""
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self._autocast):
            logits = self._model(input_ids=t["input_ids"], attention_mask=t["attention_mask"]).logits
        targets = t["labels"][:, 1:]
        keep = targets != IGNORE
        # Only the trained positions reach the (vocabulary-wide) softmax: a chat example's prompt costs no loss.
        picked = logits[:, :-1][keep].float()
        return torch.nn.functional.cross_entropy(picked, targets[keep], reduction="sum")

    def _eval(self, batches: Sequence[Sequence[Example]]) -> float:
        total = 0
        loss_sum = 0.0
        was_training = self._model.training
        self._model.eval()
        try:
            with torch.no_grad():
                for batch in batches:
                    if not batch:
                        continue
                    t = self.collate(batch)
                    loss_sum += float(self._summed_loss(t))
                    total += int((t["labels"][:, 1:] != IGNORE).sum())
        finally:
            self._model.train(was_training)
        if total == 0:
            raise InvalidInputError("the evaluation batches have no trained token")
        return loss_sum / total

    def _open_optimizer(self) -> torch.optim.Optimizer:
        if self._optimizer is None:
            raise ModelClosedError("this trainer was closed")
        return self._optimizer


def _is_linear(module: Any) -> bool:
    if isinstance(module, torch.nn.Linear):
        return True
    # GPT-2's Conv1D is a linear layer in disguise; peft targets it too.
    return type(module).__name__ == "Conv1D"

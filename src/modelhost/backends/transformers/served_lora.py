"""LoRA adapters served by name over one loaded checkpoint, with peft: several adapters in one PeftModel, and each
forward pass a mixed batch (peft's `adapter_names`: every row names its adapter, `__base__` for none).

Why peft's mixed batch and not a merged adapter or one copy per adapter: merging (`LoadOptions.adapter`) bakes one
adapter into the weights, so the base could no longer answer; a copy of the model per adapter costs the base's
memory again. peft keeps the base weights once, and each LoRA layer adds `B @ A @ x` for the rows of each adapter
only, so rows of the base and of several adapters share one forward (measured in docs/adapters.md).

The adapters' layers are injected into the checkpoint's own module in place. peft's layers then add the *active*
adapter to any plain call of the module (the embeddings, attention inspection): so no layer keeps an active
adapter (each layer's public `set_adapter([])`), and an adapter applies only to the rows that name it, through
`forward`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from modelhost.errors import InvalidOptionError, ModelLoadError, ModelNotFoundError
from modelhost.inference.lora_files import check_peft_lora_shapes, inspect_adapter

if TYPE_CHECKING:
    from modelhost.backends.transformers.loading import Checkpoint

#: The row name peft's mixed batch reads as "no adapter".
BASE = "__base__"


class ServedLoRA:
    """The named adapters of one checkpoint (the engine's AdapterEngine calls land here). One thread drives it."""

    def __init__(self, checkpoint: Checkpoint) -> None:
        self._ckpt = checkpoint
        self._peft: Any = None  # peft.PeftModel over checkpoint.model, made at the first adapter
        self._layers: dict[str, tuple[int, int]] | None = None  # the adaptable layers, read before peft wraps them
        self.names: frozenset[str] = frozenset()

    def load(self, name: str, path: str) -> None:
        """Load the peft adapter folder `path` as `name`; InvalidOptionError ("adapter") when it is not one, or
        peft cannot put it on this model (a target module it lacks, shapes of another model)."""
        files = inspect_adapter(path, field="adapter")
        if files.peft is None:
            raise InvalidOptionError("adapter", f"{path!r} has no peft adapter (adapter_config.json): the "
                                                "transformers backend serves peft adapters")  # fmt: skip
        if name in self.names:
            raise InvalidOptionError("adapter", f"an adapter named {name!r} is loaded already")
        if self._layers is None:
            self._layers = adaptable_layers(self._ckpt.model)
        check_peft_lora_shapes(files.peft, self._layers, field="adapter")
        try:
            from peft import PeftModel
        except ImportError as exc:
            raise ModelLoadError("serving adapters needs the peft package: pip install peft") from exc
        try:
            if self._peft is None:
                self._peft = PeftModel.from_pretrained(
                    self._ckpt.model, str(files.peft), adapter_name=name, is_trainable=False
                )
            else:
                self._peft.load_adapter(str(files.peft), adapter_name=name, is_trainable=False)
        except Exception as exc:
            if self._peft is not None and name in self._peft.peft_config:
                self._peft.delete_adapter(name)
            raise InvalidOptionError("adapter", f"peft could not load {path!r} on this model: {exc}") from None
        self.names = self.names | {name}
        self._quiet_layers()

    def unload(self, name: str) -> None:
        """Free the adapter `name` (an unknown name is harmless)."""
        if self._peft is None or name not in self.names:
            return
        self._peft.delete_adapter(name)
        self.names = self.names - {name}
        self._quiet_layers()

    def check(self, name: str | None) -> None:
        """Refuse a request for an adapter not loaded here (ModelNotFoundError)."""
        if name is not None and name not in self.names:
            raise ModelNotFoundError(f"no adapter named {name!r} is loaded on this model")

    def module(self, adapters: Sequence[str | None] | None) -> tuple[Any, dict[str, Any]]:
        """What to call for a forward whose rows name `adapters`, and the keyword it needs: the plain module when
        no adapter is loaded or no row names one (no hook cost), else the PeftModel with `adapter_names`."""
        if self._peft is None or not self.names or not adapters or all(a is None for a in adapters):
            return self._ckpt.model, {}
        return self._peft, {"adapter_names": [a if a is not None else BASE for a in adapters]}

    def _quiet_layers(self) -> None:
        """No layer keeps an active adapter (see the module doc); PeftModel's own active adapter must still name a
        loaded one, since its forward reads that adapter's config."""
        from peft.tuners.tuners_utils import BaseTunerLayer

        if self.names:
            self._peft.set_adapter(sorted(self.names)[0])
        for layer in self._ckpt.model.modules():
            if isinstance(layer, BaseTunerLayer):
                # None active (peft's public call, not its private `_active_adapter`); it also leaves every adapter's
                # weights without gradients, which serving never takes.
                layer.set_adapter([])


def adaptable_layers(module: Any) -> dict[str, tuple[int, int]]:
    """Every layer of `module` a LoRA adapter may target, by name, as `(out, in)`: a linear layer's features, an
    embedding's dimension and vocabulary, transformers' Conv1D (GPT-2's linear, stored transposed) its own."""
    import torch
    from transformers.pytorch_utils import Conv1D

    layers: dict[str, tuple[int, int]] = {}
    for name, layer in module.named_modules():
        if isinstance(layer, torch.nn.Linear):
            layers[name] = (layer.out_features, layer.in_features)
        elif isinstance(layer, torch.nn.Embedding):
            layers[name] = (layer.embedding_dim, layer.num_embeddings)
        elif isinstance(layer, Conv1D):
            layers[name] = (layer.nf, int(layer.weight.shape[0]))
    return layers

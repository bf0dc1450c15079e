"""What a LoRA adapter on disk is, read from its files alone (no model, no backend): which forms it has and which
base model it names.

An adapter comes as a peft folder (`adapter_config.json` beside `adapter_model.safetensors`, what `lora.train`
and `modelhost train` write; they add `adapter.gguf` for llama.cpp), or as one llama.cpp LoRA GGUF file
(`general.type = adapter`). `inspect_adapter` checks a path is one of these before anything is loaded, so a wrong
path is one clear error naming the field it came from (a `serve --adapter` flag, `lora_path` of
/v1/load_lora_adapter), never a backend's traceback halfway into a load; and it says which base model the adapter
was trained on (peft's `base_model_name_or_path`, a GGUF's `general.base_model.0.name`), so `serve` can put it next
to its base without being told.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelhost.errors import InvalidOptionError, ModelLoadError
from modelhost.inference.gguf_header import read_header, read_tensor_shapes

#: The most bytes of `adapter_config.json` read: peft writes under 2 KB; a bigger file is not an adapter config,
#: and reading it whole must not cost the memory of whatever was put there.
MAX_CONFIG_BYTES = 1 << 20

#: The most bytes of a safetensors header read: peft's LoRA headers are a few KB per hundred tensors; the format
#: allows 100 MB, which a corrupt length field would make us allocate.
MAX_SAFETENSORS_HEADER = 16 << 20

#: peft's weight file names, newest first (safetensors since peft 0.6; `.bin` is a pickle: listed, never read here).
PEFT_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")

_GGUF_BASE_KEYS = ("general.type", "adapter.type", "general.base_model.0.name")


@dataclass(frozen=True, slots=True)
class AdapterFiles:
    """A checked adapter: its peft folder and/or its LoRA GGUF (at least one), and the base model it names."""

    path: Path
    peft: Path | None = None
    gguf: Path | None = None
    #: What the adapter says it was trained on (a hub name or a path, as its trainer wrote it); None when silent.
    base: str | None = None


def inspect_adapter(path: str | os.PathLike[str], *, field: str) -> AdapterFiles:
    """Check `path` is a LoRA adapter (see the module doc); InvalidOptionError naming `field` saying what is wrong."""
    p = Path(os.path.expanduser(str(path)))
    if not p.exists():
        raise InvalidOptionError(field, f"no adapter at {str(path)!r} (no such file or folder)")
    if p.is_file():
        return AdapterFiles(p, gguf=p, base=_gguf_base(p, field))
    if not p.is_dir():
        raise InvalidOptionError(field, f"{str(path)!r} is neither a file nor a folder")
    peft, base = _peft_folder(p, field)
    ggufs = sorted(f for f in p.glob("*.gguf") if f.is_file())
    gguf = ggufs[0] if len(ggufs) == 1 else None
    if gguf is not None:
        gguf_base = _gguf_base(gguf, field)
        base = base or gguf_base
    if peft is None and gguf is None:
        raise InvalidOptionError(
            field, f"{str(path)!r} is not a LoRA adapter folder (no adapter_config.json, and not one .gguf file)"
        )
    return AdapterFiles(p, peft=peft, gguf=gguf, base=base)


def _peft_folder(folder: Path, field: str) -> tuple[Path | None, str | None]:
    config_path = folder / "adapter_config.json"
    if not config_path.is_file():
        return None, None
    if config_path.stat().st_size > MAX_CONFIG_BYTES:
        raise InvalidOptionError(field, f"{config_path} is too large for an adapter config")
    try:
        config = json.loads(config_path.read_bytes())
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: JSON nested too deeply
        raise InvalidOptionError(field, f"{config_path} is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise InvalidOptionError(field, f"{config_path} is not a JSON object")
    kind = config.get("peft_type", "LORA")
    if not isinstance(kind, str) or kind.upper() != "LORA":
        raise InvalidOptionError(field, f"{config_path} describes a {kind!r} adapter; only LoRA adapters are served")
    weights = next((folder / w for w in PEFT_WEIGHTS if (folder / w).is_file()), None)
    if weights is None:
        raise InvalidOptionError(field, f"{folder} has adapter_config.json but no {PEFT_WEIGHTS[0]}")
    if weights.suffix == ".safetensors":
        _check_safetensors(weights, field)
    base = config.get("base_model_name_or_path")
    return folder, base if isinstance(base, str) and base else None


def _check_safetensors(path: Path, field: str) -> dict[str, Any]:
    """The file's header, checked to be a JSON object of the length it claims (a truncated or garbage file fails
    here, before a backend maps it)."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise ValueError("shorter than its header length")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_SAFETENSORS_HEADER:
                raise ValueError(f"claims a header of {n} bytes")
            header = json.loads(f.read(n))
            if not isinstance(header, dict):
                raise ValueError("its header is not a JSON object")
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidOptionError(field, f"{path} is not a readable safetensors file: {exc}") from None
    return header


def _gguf_base(path: Path, field: str) -> str | None:
    try:
        header = read_header(path, _GGUF_BASE_KEYS)
    except ModelLoadError as exc:
        raise InvalidOptionError(field, f"{path} is not a LoRA GGUF: {exc}") from None
    if header.get("general.type") != "adapter":
        raise InvalidOptionError(field, f"{path} is a GGUF but not an adapter (general.type is not 'adapter')")
    base = header.get("general.base_model.0.name")
    return base if isinstance(base, str) and base else None


# Shapes: every adapter tensor against the base model's, before a backend loads it. llama.cpp checks only the first
# two dimensions of each pair (llama-adapter.cpp), so a 3-D `lora_a` over a 2-D weight loaded and the first decode
# that applied it aborted the process (GGML_ASSERT in ggml_mul_mat); peft reports a shape it cannot take as a
# traceback. Both are checked here from the files' headers alone, naming the tensor that does not fit.

_GGUF_SIDES = (".lora_a", ".lora_b")
#: Tensors llama.cpp reads from a LoRA GGUF and ignores (norm vectors some converters write).
_GGUF_IGNORED = "_norm.weight"
#: peft's saved names: `base_model.model.<module>.lora_A.weight` (a linear layer), `<module>.lora_embedding_A`.
_PEFT_KEY = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?:embedding_)?(?P<side>[AB])(?:\.weight)?$")


def check_gguf_lora_shapes(adapter: Path, base: Mapping[str, Sequence[int]], *, field: str) -> None:
    """Check every tensor of the LoRA GGUF `adapter` against `base` (the base model's tensor shapes by name, ggml's
    order, as `gguf_header.read_tensor_shapes` reads them): each `W.lora_a`/`W.lora_b` pair is complete, `W` is a
    tensor of the base, and the pair's shapes are what llama.cpp multiplies with `W` (`a` is `[in, r, ...]`, `b`
    is `[r, out, ...]`, their further dimensions `W`'s own; the token embedding's pair is flipped, as llama.cpp
    reads it). InvalidOptionError naming `field` and the first tensor that does not fit."""
    try:
        shapes = read_tensor_shapes(adapter)
    except ModelLoadError as exc:
        raise InvalidOptionError(field, f"{adapter} is not a readable LoRA GGUF: {exc}") from None
    pairs: dict[str, dict[str, tuple[int, ...]]] = {}
    for name, shape in shapes.items():
        side = next((s for s in _GGUF_SIDES if name.endswith(s)), None)
        if side is None:
            if name.endswith(_GGUF_IGNORED):
                continue
            raise InvalidOptionError(field, f"adapter tensor {name!r} is neither a .lora_a nor a .lora_b tensor")
        pairs.setdefault(name[: -len(side)], {})[side] = shape
    if not pairs:
        raise InvalidOptionError(field, f"{adapter} holds no LoRA tensors")
    for target, pair in pairs.items():
        for side in _GGUF_SIDES:
            if side not in pair:
                raise InvalidOptionError(field, f"adapter tensor {target + side!r} is missing (its pair is there)")
        if target not in base:
            raise InvalidOptionError(field, f"adapter tensor {target + '.lora_a'!r} adapts {target!r}, which the "
                                            "base model does not have (an adapter of another model?)")  # fmt: skip
        weight = _padded(base[target])
        a, b = _padded(pair[".lora_a"]), _padded(pair[".lora_b"])
        if target.endswith("token_embd.weight"):  # llama.cpp reads rows of `a` by token, then multiplies by `b`
            rank = a[0]
            expected = {".lora_a": (rank, weight[1], *weight[2:]), ".lora_b": (rank, weight[0], *weight[2:])}
        else:
            rank = a[1]
            expected = {".lora_a": (weight[0], rank, *weight[2:]), ".lora_b": (rank, weight[1], *weight[2:])}
        for side, got in ((".lora_a", a), (".lora_b", b)):
            if got != expected[side] or rank < 1:
                want = expected[side][: max(2, len(base[target]))]  # the shape as the base writes its own
                raise InvalidOptionError(field, _misfit(target + side, pair[side], want, target, base[target],
                                                        "ggml's order, ne[0] first"))  # fmt: skip


def check_peft_lora_shapes(folder: Path, base: Mapping[str, Sequence[int]], *, field: str) -> None:
    """Check every LoRA tensor of the peft folder's safetensors against `base` (the base model's adapted layers by
    module name, each as `(out, in)`: a linear layer's out and in features, an embedding's dimension and its
    vocabulary): `lora_A` is `(r, in)`, `lora_B` is `(out, r)`, one `r` for both, and the module is a layer of the
    base. Other tensors (DoRA's magnitudes, `modules_to_save` copies) are left to peft, which checks each against
    the layer it loads into. InvalidOptionError naming `field` and the first tensor that does not fit."""
    weights = folder / PEFT_WEIGHTS[0]
    if not weights.is_file():
        return  # a pickled `.bin` is never read here; peft loads it and checks it itself
    header = _check_safetensors(weights, field)
    pairs: dict[str, dict[str, tuple[str, tuple[int, ...]]]] = {}
    for key, entry in header.items():
        match = _PEFT_KEY.match(key)
        if match is None:
            continue
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise InvalidOptionError(field, f"adapter tensor {key!r} has no valid shape in {weights}")
        pairs.setdefault(match["module"], {})[match["side"]] = (key, tuple(shape))
    for module, pair in pairs.items():
        for side in "AB":
            if side not in pair:
                raise InvalidOptionError(field, f"adapter tensor lora_{side} of {module!r} is missing in {weights}")
        if module not in base:
            why = "which is no adaptable layer of the base model (an adapter of another model?)"
            raise InvalidOptionError(field, f"adapter tensor {pair['A'][0]!r} adapts {module!r}, {why}")
        out, inp = base[module]
        (key_a, a), (key_b, b) = pair["A"], pair["B"]
        rank = a[0] if a else 0
        for key, got, want in ((key_a, a, (rank, inp)), (key_b, b, (out, rank))):
            if got != want or rank < 1:
                raise InvalidOptionError(field, _misfit(key, got, want, module, (out, inp), "(out, in)"))


def _padded(shape: Sequence[int]) -> tuple[int, ...]:
    """A ggml shape with its implied trailing 1s (ggml writes only up to the last dimension that is not 1)."""
    return (*shape, *(1,) * (4 - len(shape)))


def _misfit(name: str, got: Sequence[int], want: Sequence[int], target: str, base: Sequence[int], order: str) -> str:
    """The refusal of one tensor: its shape, the shape the base needs, the base tensor's."""
    return (f"adapter tensor {name!r} has shape {list(got)} ({len(got)}-D); the base model's {target!r} is "
            f"{list(base)}, so it must be {list(want)} ({order})")  # fmt: skip

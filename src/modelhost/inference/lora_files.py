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
import struct
from dataclasses import dataclass
from pathlib import Path

from modelhost.errors import InvalidOptionError, ModelLoadError
from modelhost.inference.gguf_header import read_header

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
    except (ValueError, UnicodeDecodeError) as exc:
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


def _check_safetensors(path: Path, field: str) -> None:
    """The file's header is a JSON object of the length it claims (a truncated or garbage file fails here, before
    a backend maps it)."""
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
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InvalidOptionError(field, f"{path} is not a readable safetensors file: {exc}") from None


def _gguf_base(path: Path, field: str) -> str | None:
    try:
        header = read_header(path, _GGUF_BASE_KEYS)
    except ModelLoadError as exc:
        raise InvalidOptionError(field, f"{path} is not a LoRA GGUF: {exc}") from None
    if header.get("general.type") != "adapter":
        raise InvalidOptionError(field, f"{path} is a GGUF but not an adapter (general.type is not 'adapter')")
    base = header.get("general.base_model.0.name")
    return base if isinstance(base, str) and base else None

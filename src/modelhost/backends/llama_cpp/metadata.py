"""What a GGUF's own metadata says: ModelInfo, and the sampling defaults its authors wrote into it.

llama.cpp hands metadata over as a flat dict of strings (arrays are left out), keyed the GGUF way:
`general.architecture`, then `<arch>.context_length`, `<arch>.block_count`, `<arch>.embedding_length`.
Pure functions over that dict, so they are tested without a model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelhost.inference.types import ModelInfo

# llama_ftype -> (bits per weight of the bulk of the matrices, quantisation group size). Legacy quants (Q4_0 ...
# Q8_0) quantise blocks of 32 weights; k-quants and i-quants use super-blocks of 256. Float types have no groups.
# The numbering is llama.cpp's `enum llama_ftype` (stable: removed types keep their numbers unused).
FILE_TYPES: dict[int, tuple[int, int]] = {
    0: (32, 0),  # ALL_F32
    1: (16, 0),  # MOSTLY_F16
    2: (4, 32),  # Q4_0
    3: (4, 32),  # Q4_1
    7: (8, 32),  # Q8_0
    8: (5, 32),  # Q5_0
    9: (5, 32),  # Q5_1
    10: (2, 256),  # Q2_K
    11: (3, 256),  # Q3_K_S
    12: (3, 256),  # Q3_K_M
    13: (3, 256),  # Q3_K_L
    14: (4, 256),  # Q4_K_S
    15: (4, 256),  # Q4_K_M
    16: (5, 256),  # Q5_K_S
    17: (5, 256),  # Q5_K_M
    18: (6, 256),  # Q6_K
    19: (2, 256),  # IQ2_XXS
    20: (2, 256),  # IQ2_XS
    21: (2, 256),  # Q2_K_S
    22: (3, 256),  # IQ3_XS
    23: (3, 256),  # IQ3_XXS
    24: (1, 256),  # IQ1_S
    25: (4, 32),  # IQ4_NL
    26: (3, 256),  # IQ3_S
    27: (3, 256),  # IQ3_M
    28: (2, 256),  # IQ2_S
    29: (2, 256),  # IQ2_M
    30: (4, 256),  # IQ4_XS
    31: (1, 256),  # IQ1_M
    32: (16, 0),  # MOSTLY_BF16
    36: (1, 256),  # TQ1_0
    37: (2, 256),  # TQ2_0
    38: (4, 32),  # MXFP4_MOE
}

#: GGUF's `general.sampling.*` keys (written by recent converters from generation_config.json) -> our option names.
SAMPLING_KEYS: dict[str, str] = {
    "general.sampling.temp": "temperature",
    "general.sampling.top_k": "top_k",
    "general.sampling.top_p": "top_p",
    "general.sampling.min_p": "min_p",
    "general.sampling.penalty_repeat": "repeat_penalty",
}


def _int(meta: Mapping[str, str], key: str) -> int:
    try:
        return int(meta.get(key, "0"))
    except ValueError:
        return 0


def architecture(meta: Mapping[str, str]) -> str:
    """`general.architecture` ("llama", "qwen2", ...), or "unknown" for a file that does not say."""
    return meta.get("general.architecture") or "unknown"


def model_info(meta: Mapping[str, str], *, vocab_size: int, num_layers: int = 0, hidden_size: int = 0) -> ModelInfo:
    """ModelInfo from the metadata; the counts llama.cpp computed itself win over the dict (they are never absent)."""
    arch = architecture(meta)
    bits, group = FILE_TYPES.get(_int(meta, "general.file_type"), (0, 0))
    return ModelInfo(
        architecture=arch,
        vocab_size=vocab_size or _int(meta, f"{arch}.vocab_size"),
        num_layers=num_layers or _int(meta, f"{arch}.block_count"),
        hidden_size=hidden_size or _int(meta, f"{arch}.embedding_length"),
        quant_bits=bits,
        quant_group=group,
        context_length=_int(meta, f"{arch}.context_length"),
    )


def sampling_defaults(meta: Mapping[str, str]) -> dict[str, Any]:
    """The checkpoint's own sampling defaults, typed; an unparsable value is skipped, not fatal."""
    defaults: dict[str, Any] = {}
    for key, option in SAMPLING_KEYS.items():
        raw = meta.get(key)
        if raw is None:
            continue
        try:
            defaults[option] = int(raw) if option == "top_k" else float(raw)
        except ValueError:
            continue
    return defaults

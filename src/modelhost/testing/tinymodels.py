"""Tiny random models that tests and benchmarks build themselves: offline, deterministic, well under a second each.

Nothing here touches a model hub or the network. Every builder trains its own byte-level BPE tokenizer on a small
built-in corpus and draws weights from a seeded `torch.Generator`, so the same seed always gives the same files (the
process-wide torch RNG is neither read nor reseeded).

Public API:

- `build_tokenizer`: byte-level BPE tokenizer (ChatML special tokens), as a transformers `PreTrainedTokenizerFast`.
- `build_tiny_llama`: random `LlamaForCausalLM` folder (safetensors + tokenizer + generation_config.json).
- `write_llama_gguf`: the same weights and tokenizer as a GGUF file that llama.cpp runs token for token like
  transformers.
- `build_tiny_idefics3`: random `Idefics3ForConditionalGeneration` (granite-docling / SmolVLM architecture) with an
  `Idefics3Processor` that uses the PIL image processor (no torchvision).
- `build_tiny_thinking_llama`: like `build_tiny_llama`, with `<think>`/`</think>` tokens and a chat template that
  honours `enable_thinking`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # heavy imports stay lazy: importing this module must be cheap for pytest collection
    import numpy as np
    import torch
    from transformers import PreTrainedTokenizerFast

__all__ = [
    "CHATML_TEMPLATE",
    "IDEFICS3_SPECIAL_TOKENS",
    "THINKING_CHATML_TEMPLATE",
    "build_tiny_idefics3",
    "build_tiny_llama",
    "build_tiny_thinking_llama",
    "build_tokenizer",
    "write_llama_gguf",
]

PathLike = str | Path

# Ids 0, 1, 2 as in SmolLM2: <|endoftext|>, <|im_start|>, <|im_end|>.
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ENDOFTEXT = "<|endoftext|>"
CHAT_SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END)
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

# Tokens Idefics3Processor looks up by text: the image placeholder, the marker around each image, the global-image
# tag, the end-of-utterance marker, and one tag per tile of a split image (it looks up a 6x6 grid of them).
IDEFICS3_SPECIAL_TOKENS: tuple[str, ...] = (
    "<fake_token_around_image>",
    "<image>",
    "<end_of_utterance>",
    "<global-img>",
    *(f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)),
)

# ChatML as SmolLM2 writes it (without SmolLM2's injected default system prompt). `content` may be a string or a list
# of OpenAI/transformers-style parts; an image part renders as `<image>`, which Idefics3Processor expands.
CHATML_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{- part['text'] -}}"
    "{%- elif part['type'] == 'image' -%}{{- '<image>' -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

# ChatML with a thought channel. With thinking on (the default, or enable_thinking=True) the generation prompt opens
# `<think>\n`, so that even a random model is *inside* the thought channel from its first token and a thinking-budget
# test can count thought tokens and force `</think>`. With enable_thinking=False an empty thought block is closed in
# the prompt (Qwen3's convention). Past assistant turns render `reasoning_content` in a thought block when present.
THINKING_CHATML_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['role'] == 'assistant' and message['reasoning_content'] is defined"
    " and message['reasoning_content'] -%}"
    "{{- '<think>\\n' + message['reasoning_content'] + '\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- else -%}{{- '<think>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)

# A few hundred words of plain English (with digits and punctuation) to train the BPE merges on. Content does not
# matter much; it only has to give common English pieces so that tokenization is multi-byte and realistic.
_CORPUS = """\
The quick brown fox jumps over the lazy dog. A small model can still say hello to the world.
Once upon a time there was a little robot who lived in a quiet house by the river. Every morning the robot
opened the window, looked at the sky, and counted the birds: one, two, three, four, five, six, seven, eight,
nine, ten. On Monday it counted 12 birds; on Tuesday 27; on Wednesday only 3, because it was raining.
The robot liked numbers. It wrote them in a notebook: 0 1 2 3 4 5 6 7 8 9, 10, 100, 1000, 2024, 3.14, 42.
"What is the answer?" asked the cat. "It depends on the question," said the robot, and they both laughed.
In the afternoon the robot read books about the ocean, the mountains, the stars and the history of people.
It learned that water boils at 100 degrees, that light is very fast, and that a good story needs a beginning,
a middle and an end. It also learned to be kind, to listen carefully, and to answer questions clearly.
Documents are made of pages. Each page has a title, paragraphs, tables, lists and pictures. A table has rows
and columns; a list has items; a picture may have a caption. To read a scanned page, a model looks at the
image and writes the text it sees, line by line, in the right order.
Hello! How are you today? I am fine, thank you. Can you help me with my homework? Of course I can.
Please write a short poem about the sea. The sea is wide, the sea is deep, it sings the sailors off to sleep.
What time is it? It is half past nine. Where are you going? I am going to the market to buy bread, milk,
apples, cheese and tea. How much does it cost? It costs 5 dollars and 20 cents.
The user asks a question and the assistant gives an answer. The system sets the rules. Think step by step,
then answer. First, read the question. Second, find the facts. Third, write the answer in simple words.
Python, Rust and Go are programming languages. A function takes inputs and returns outputs. A server waits
for requests and sends responses. A queue holds the work until a worker is free. Tests check that the code
does what it should; when a test fails, we fix the bug and run the tests again.
Good morning, good afternoon, good evening and good night. Yes, no, maybe, always, never, sometimes.
(a) first; (b) second; [c] third; {d} fourth. Use commas, periods, colons: and semicolons; also dashes - and
quotes "like this" or 'like that', question marks? exclamation marks! slashes / and back slashes \\ and # @ & % * + =.
"""


def _train_tokenizer_object(vocab_size: int) -> Any:
    """Train a byte-level BPE `tokenizers.Tokenizer` on the built-in corpus.

    The pre-tokenizer is `ByteLevel(use_regex=True)`: GPT-2's split regex followed by the GPT-2 byte-to-unicode map.
    llama.cpp implements exactly that regex as its "gpt-2" pre-tokenizer, which is why `write_llama_gguf` can declare
    `tokenizer.ggml.pre = "gpt-2"` and both runtimes split (and therefore tokenize) any text identically. No
    normalizer: llama.cpp applies none for BPE vocabularies either.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    # trim_offsets=False keeps offsets byte-faithful; the post-processor adds no BOS (like SmolLM2).
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(CHAT_SPECIAL_TOKENS),
        # All 256 byte symbols, so any UTF-8 text (é, ✓, emoji) is representable; llama.cpp also requires every
        # byte to have a token in a gpt2-style vocabulary.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = _CORPUS.splitlines()
    tok.train_from_iterator(lines, trainer=trainer, length=len(lines))
    return tok


def build_tokenizer(
    out_dir: PathLike | None = None,
    *,
    vocab_size: int = 512,
    thinking: bool = False,
    extra_special_tokens: Sequence[str] = (),
    chat_template: str | None = None,
    extra_tokens: Sequence[str] = (),
) -> PreTrainedTokenizerFast:
    """Build (and optionally save) a tiny byte-level BPE chat tokenizer.

    Args:
        out_dir: if given, the tokenizer is written there with `save_pretrained`.
        vocab_size: target size of the trained vocabulary (specials, 256 byte symbols and merges); the built-in
            corpus yields about this many.
        thinking: add `<think>` and `</think>` as (non-special, so visible when decoding) added tokens and use
            `THINKING_CHATML_TEMPLATE`.
        extra_special_tokens: further special tokens appended after training (e.g. `IDEFICS3_SPECIAL_TOKENS`).
        chat_template: overrides the default template (ChatML, or the thinking ChatML when `thinking`).
        extra_tokens: further non-special added tokens, appended after the special ones (e.g. `"\\n\\n"`, which
            llama.cpp's Idefics3 image template needs as one token).

    Returns:
        A `PreTrainedTokenizerFast` with bos `<|im_start|>`, eos `<|im_end|>` (end of a chat turn), unk and pad
        `<|endoftext|>`. Token ids 0, 1, 2 are `<|endoftext|>`, `<|im_start|>`, `<|im_end|>` as in SmolLM2. It adds
        no BOS when encoding.
    """
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    tok = _train_tokenizer_object(vocab_size)
    if thinking:
        # Not "special": thought markers must survive decode(skip_special_tokens=True) so a caller can split them.
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in (THINK_OPEN, THINK_CLOSE)])
    if extra_special_tokens:
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in extra_special_tokens])
    if extra_tokens:
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in extra_tokens])
    if chat_template is None:
        chat_template = THINKING_CHATML_TEMPLATE if thinking else CHATML_TEMPLATE
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=IM_START,
        eos_token=IM_END,
        unk_token=ENDOFTEXT,
        pad_token=ENDOFTEXT,
        chat_template=chat_template,
        model_max_length=512,
        clean_up_tokenization_spaces=False,
    )
    if out_dir is not None:
        hf_tok.save_pretrained(str(out_dir))
    return hf_tok


def _randomize_(module: torch.nn.Module, seed: int, *, gain: float = 1.0, head_std: float = 0.5) -> None:
    """Overwrite every parameter of `module` in place with seeded, deliberately "loud" random values.

    Default transformers init (std 0.02) gives near-uniform logits: greedy decoding then repeats one token and
    parity tests prove little, while near-ties make argmax flip between runtimes. Instead:
    embeddings ~ N(0, 1); matrices ~ N(0, gain / sqrt(fan_in)) so activations stay O(1) through the layers; the LM
    head ~ N(0, head_std) so logits spread over several units (clear argmax margins, varied tokens); norm weights
    ~ U(0.5, 1.5) so a mis-mapped norm in a converter is caught; biases ~ N(0, 0.02).
    Parameters are visited in name order and drawn from a private generator, so the result depends only on `seed`.
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(module.named_parameters(), key=lambda kv: kv[0]):
            shape = tuple(p.shape)
            if name.endswith("bias"):
                new = torch.randn(shape, generator=gen) * 0.02
            elif p.ndim == 1:  # RMSNorm / LayerNorm weights
                new = 0.5 + torch.rand(shape, generator=gen)
            elif "embed" in name and "patch" not in name:  # token / position embeddings
                new = torch.randn(shape, generator=gen)
            elif name.endswith("lm_head.weight"):
                new = torch.randn(shape, generator=gen) * head_std
            else:
                fan_in = 1
                for d in shape[1:]:
                    fan_in *= d
                new = torch.randn(shape, generator=gen) * (gain / fan_in**0.5)
            p.copy_(new.to(p.dtype))


def _tiny_llama_text_config(tokenizer: PreTrainedTokenizerFast, **overrides: Any) -> dict[str, Any]:
    """Hyperparameters of the tiny Llama text model (GQA: 4 query heads share 2 KV heads)."""
    cfg: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    cfg.update(overrides)
    return cfg


def _generation_config(tokenizer: PreTrainedTokenizerFast) -> Any:
    """Greedy-by-default generation config that stops on `<|im_end|>` or `<|endoftext|>` (llama.cpp treats both
    as end-of-generation by name too, so both runtimes stop at the same place)."""
    from transformers import GenerationConfig

    return GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[tokenizer.convert_tokens_to_ids(IM_END), tokenizer.convert_tokens_to_ids(ENDOFTEXT)],
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
        max_new_tokens=32,
    )


def _build_llama(out_dir: PathLike, seed: int, tokenizer: PreTrainedTokenizerFast, **overrides: Any) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = LlamaConfig(**_tiny_llama_text_config(tokenizer, **overrides))
    # transformers' default init draws from the global RNG; fork it so building leaves the caller's RNG untouched
    # (our weights come from a private generator anyway, see _randomize_).
    with torch.random.fork_rng(devices=[]):
        model = LlamaForCausalLM(config).float()
    _randomize_(model, seed)
    model.generation_config = _generation_config(tokenizer)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


def build_tiny_llama(out_dir: PathLike, seed: int = 0, *, vocab_size: int = 512, **config_overrides: Any) -> Path:
    """Build a tiny random `LlamaForCausalLM` folder that `from_pretrained` loads offline.

    hidden 64, 2 layers, 4 attention heads over 2 KV heads (GQA), intermediate 128, 512 positions, untied LM head,
    fp32, saved as safetensors with the ChatML tokenizer of `build_tokenizer` and a generation_config.json (greedy,
    stops on `<|im_end|>`/`<|endoftext|>`). Same `seed` -> byte-identical weights.

    Args:
        out_dir: folder to write (created if missing).
        seed: weight seed.
        vocab_size: tokenizer training target (the model's vocab_size is the tokenizer's length).
        **config_overrides: LlamaConfig fields to override (e.g. `num_hidden_layers=4` for a benchmark).

    Returns:
        The folder as a `Path`.
    """
    return _build_llama(out_dir, seed, build_tokenizer(vocab_size=vocab_size), **config_overrides)


def build_tiny_thinking_llama(
    out_dir: PathLike, seed: int = 0, *, vocab_size: int = 512, **config_overrides: Any
) -> Path:
    """Like `build_tiny_llama`, with `<think>`/`</think>` tokens and `THINKING_CHATML_TEMPLATE`.

    `apply_chat_template(..., add_generation_prompt=True)` ends in `<think>\\n` (model is thinking) unless
    `enable_thinking=False`, which closes an empty thought block instead. The thought markers are single added
    tokens, not special, so they stay visible in decoded text (and USER_DEFINED, so also visible, in GGUF).
    Arguments as for `build_tiny_llama`.
    """
    return _build_llama(out_dir, seed, build_tokenizer(vocab_size=vocab_size, thinking=True), **config_overrides)


# --------------------------------------------------------------------------------------------------------------------
# GGUF


def _permute_for_gguf(w: np.ndarray, n_head: int) -> np.ndarray:
    """Reorder the rows of a Q or K projection from HF's rotary layout to llama.cpp's.

    Meta's original Llama rotates interleaved pairs (x0, x1), (x2, x3), ... of each head. HF's conversion permuted
    the Q/K rows so that it can rotate the two *halves* of a head instead (rotate_half); llama.cpp's "normal" RoPE
    (the llama architecture) still rotates adjacent pairs. convert_hf_to_gguf.py therefore undoes HF's permutation
    (LlamaModel.permute): per head, split the rows into two halves and interleave them. For K the heads are the KV
    heads (GQA). Skipping this leaves a model that loads fine but computes garbage.
    """
    rows = w.shape[0]
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _read_chat_template(model_dir: Path) -> str | None:
    # transformers 5 writes chat_template.jinja beside tokenizer_config.json; older versions kept it in the config.
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    cfg_path = model_dir / "tokenizer_config.json"
    if cfg_path.is_file():
        tmpl = json.loads(cfg_path.read_text(encoding="utf-8")).get("chat_template")
        if isinstance(tmpl, str):
            return tmpl
    return None


def _gguf_vocab(model_dir: Path, vocab_size: int) -> tuple[list[str], list[int], list[str], dict[str, int]]:
    """Tokens (byte-level strings, by id), GGUF token types, merges ("a b") and special-token ids from
    tokenizer.json + tokenizer_config.json."""
    import gguf

    tj = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    model = tj["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"expected a BPE tokenizer, got {model.get('type')!r}")
    tokens: dict[int, str] = {i: t for t, i in model["vocab"].items()}
    types: dict[int, int] = {i: int(gguf.TokenType.NORMAL) for i in tokens}
    for added in tj.get("added_tokens", []):
        tokens[added["id"]] = added["content"]
        # CONTROL tokens are parsed as one token (with special=True) and never printed by llama.cpp; USER_DEFINED
        # tokens are parsed as one token and printed, matching HF's non-special added tokens (e.g. <think>).
        types[added["id"]] = int(gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED)
    if max(tokens) >= vocab_size:
        raise ValueError(f"tokenizer has id {max(tokens)} but the model's vocab_size is {vocab_size}")
    token_list: list[str] = []
    type_list: list[int] = []
    for i in range(vocab_size):  # pad any embedding rows without a token, as convert_hf_to_gguf does
        token_list.append(tokens.get(i, f"[PAD{i}]"))
        type_list.append(types.get(i, int(gguf.TokenType.UNUSED)))
    # tokenizers >= 0.20 stores merges as [a, b] pairs, older versions as "a b" strings; GGUF wants "a b".
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]

    tcfg_path = model_dir / "tokenizer_config.json"
    tcfg = json.loads(tcfg_path.read_text(encoding="utf-8")) if tcfg_path.is_file() else {}
    by_text = {t: i for i, t in tokens.items()}

    def _tok_id(key: str) -> int | None:
        val = tcfg.get(key)
        if isinstance(val, dict):
            val = val.get("content")
        return by_text.get(val) if isinstance(val, str) else None

    specials = {k: v for k in ("bos_token", "eos_token", "pad_token", "unk_token") if (v := _tok_id(k)) is not None}
    return token_list, type_list, merges, specials


def write_llama_gguf(model_dir: PathLike, gguf_path: PathLike, *, dtype: Literal["f32", "f16"] = "f32") -> Path:
    """Write the Llama folder `model_dir` (from `build_tiny_llama`) as a GGUF file llama.cpp can run.

    Writes the llama hyperparameters, the gpt2-style BPE vocabulary (tokens, types with specials as CONTROL, merges,
    bos/eos/pad ids, `tokenizer.ggml.pre = "gpt-2"`, no automatic BOS), the chat template, and the weights under
    llama.cpp's tensor names with Q/K rows permuted to llama.cpp's rotary layout (see `_permute_for_gguf`).
    With `dtype="f32"` (default) the file holds exactly the safetensors values, so llama.cpp and transformers give
    the same greedy tokens; `"f16"` stores matrices as f16 (1-D norm weights stay f32, as llama.cpp expects).

    Returns:
        `gguf_path` as a `Path`.
    """
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    src = Path(model_dir)
    dst = Path(gguf_path)
    dst.parent.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    if cfg.get("model_type") != "llama":
        raise ValueError(f"{src} is not a llama model (model_type={cfg.get('model_type')!r})")
    n_head = int(cfg["num_attention_heads"])
    n_kv = int(cfg.get("num_key_value_heads") or n_head)
    n_embd = int(cfg["hidden_size"])
    head_dim = int(cfg.get("head_dim") or n_embd // n_head)
    n_layer = int(cfg["num_hidden_layers"])
    vocab_size = int(cfg["vocab_size"])
    # transformers 5 moved rope_theta into rope_parameters; accept both spellings.
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    rope_theta = float(cfg.get("rope_theta") or rope.get("rope_theta") or 10000.0)
    if rope.get("rope_type", "default") not in ("default", None):
        raise ValueError(f"rope scaling {rope.get('rope_type')!r} is not supported by this writer")

    weights = load_file(str(src / "model.safetensors"))
    tokens, token_types, merges, specials = _gguf_vocab(src, vocab_size)

    w = gguf.GGUFWriter(str(dst), arch="llama")
    w.add_name(src.name or "tiny-llama")
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if dtype == "f32" else gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(int(cfg["max_position_embeddings"]))
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(int(cfg["intermediate_size"]))
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_freq_base(rope_theta)
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(vocab_size)

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")  # llama.cpp's name for GPT-2's split regex == tokenizers' ByteLevel(use_regex=True)
    w.add_token_list(tokens)
    w.add_token_types(token_types)
    w.add_token_merges(merges)
    if "bos_token" in specials:
        w.add_bos_token_id(specials["bos_token"])
    if "eos_token" in specials:
        w.add_eos_token_id(specials["eos_token"])
    if "pad_token" in specials:
        w.add_pad_token_id(specials["pad_token"])
    if "unk_token" in specials:
        w.add_unk_token_id(specials["unk_token"])
    w.add_add_bos_token(False)  # the HF tokenizer adds no BOS; keep prompts identical
    w.add_add_eos_token(False)
    template = _read_chat_template(src)
    if template:
        w.add_chat_template(template)

    def put(name: str, arr: np.ndarray) -> None:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if dtype == "f16" and arr.ndim > 1:
            arr = arr.astype(np.float16)
        # GGUFWriter takes the array in torch (row-major) shape and writes ggml's reversed dims itself.
        w.add_tensor(name, arr)

    put("token_embd.weight", weights["model.embed_tokens.weight"])
    for i in range(n_layer):
        p = f"model.layers.{i}."
        put(f"blk.{i}.attn_norm.weight", weights[p + "input_layernorm.weight"])
        put(f"blk.{i}.attn_q.weight", _permute_for_gguf(weights[p + "self_attn.q_proj.weight"], n_head))
        put(f"blk.{i}.attn_k.weight", _permute_for_gguf(weights[p + "self_attn.k_proj.weight"], n_kv))
        put(f"blk.{i}.attn_v.weight", weights[p + "self_attn.v_proj.weight"])
        put(f"blk.{i}.attn_output.weight", weights[p + "self_attn.o_proj.weight"])
        put(f"blk.{i}.ffn_norm.weight", weights[p + "post_attention_layernorm.weight"])
        put(f"blk.{i}.ffn_gate.weight", weights[p + "mlp.gate_proj.weight"])
        put(f"blk.{i}.ffn_up.weight", weights[p + "mlp.up_proj.weight"])
        put(f"blk.{i}.ffn_down.weight", weights[p + "mlp.down_proj.weight"])
    put("output_norm.weight", weights["model.norm.weight"])
    # An untied head is written as `output`; a tied model (no lm_head in the file) lets llama.cpp reuse token_embd.
    if "lm_head.weight" in weights:
        put("output.weight", weights["lm_head.weight"])

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


# --------------------------------------------------------------------------------------------------------------------
# Idefics3


def build_tiny_idefics3(
    out_dir: PathLike,
    seed: int = 0,
    *,
    image_size: int = 32,
    patch_size: int = 16,
    scale_factor: int = 2,
    longest_edge: int = 64,
    do_image_splitting: bool = True,
    extra_tokens: Sequence[str] = (),
) -> Path:
    """Build a tiny random `Idefics3ForConditionalGeneration` folder with its `Idefics3Processor`.

    Architecture of granite-docling and SmolVLM: a SigLIP-style vision tower (hidden 32, 1 layer, 2 heads,
    `image_size` px with `patch_size` patches), a pixel-shuffle connector (`scale_factor`) and the tiny Llama text
    model. Each `image_size` tile becomes `(image_size // patch_size) ** 2 // scale_factor ** 2` `<image>` tokens
    (1 by default). The processor resizes an image's longest edge to `longest_edge` and, with `do_image_splitting`,
    cuts it into `image_size` tiles (row/col tags) plus a global view, exactly as the real processor does, only
    smaller. `extra_tokens` go to the tokenizer as non-special added tokens (see `build_tokenizer`). The PIL image
    processor is saved, so loading needs no torchvision:
    `AutoProcessor.from_pretrained(dir)` and `AutoModelForImageTextToText.from_pretrained(dir)` work offline.

    Returns:
        The folder as a `Path`.
    """
    import torch
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    if (image_size // patch_size) % scale_factor:
        raise ValueError("image_size // patch_size must be divisible by scale_factor (pixel shuffle)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(extra_special_tokens=IDEFICS3_SPECIAL_TOKENS, extra_tokens=extra_tokens)
    image_seq_len = (image_size // patch_size) ** 2 // scale_factor**2

    config = Idefics3Config(
        text_config=_tiny_llama_text_config(tokenizer, model_type="llama"),
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_channels": 3,
            "image_size": image_size,
            "patch_size": patch_size,
        },
        scale_factor=scale_factor,
        image_token_id=int(tokenizer.convert_tokens_to_ids("<image>")),  # type: ignore[arg-type]
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng(devices=[]):  # see _build_llama
        model = Idefics3ForConditionalGeneration(config).float()
    _randomize_(model, seed)
    model.generation_config = _generation_config(tokenizer)
    model.save_pretrained(str(out))

    image_processor = Idefics3ImageProcessorPil(
        size={"longest_edge": longest_edge},
        max_image_size={"longest_edge": image_size},
        do_image_splitting=do_image_splitting,
    )
    processor = Idefics3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_len=image_seq_len,
        chat_template=CHATML_TEMPLATE,
    )
    processor.save_pretrained(str(out))
    return out


# --------------------------------------------------------------------------------------------------------------------
# Tool calling

# ChatML with tools in the manner of Qwen2.5 (written here, not copied): when `tools` is given, the system turn lists
# each tool as JSON inside <tools></tools> and tells the model to answer a call as JSON inside <tool_call></tool_call>;
# an assistant turn's `tool_calls` render in those tags, and a `tool` turn renders as a user turn wrapped in
# <tool_response></tool_response>. A leading system message is merged into the tools' system turn.
TOOLS_CHATML_TEMPLATE = (
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages[0]['role'] == 'system' -%}{{- messages[0]['content'] + '\\n\\n' -}}{%- endif -%}"
    "{{- '# Tools\\nYou may call functions. Their signatures are inside <tools></tools>:\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- '\\n</tools>\\nTo call one, answer with JSON inside <tool_call></tool_call>:\\n<tool_call>\\n"
    '{"name": <function name>, "arguments": <arguments object>}'
    "\\n</tool_call><|im_end|>\\n' -}}"
    "{%- elif messages[0]['role'] == 'system' -%}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' and loop.first -%}"
    "{%- elif message['role'] == 'assistant' and message['tool_calls'] is defined and message['tool_calls'] -%}"
    "{{- '<|im_start|>assistant' -}}"
    "{%- if message['content'] -%}{{- '\\n' + message['content'] -}}{%- endif -%}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set fn = call['function'] if call['function'] is defined else call -%}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + fn['name'] + '\", \"arguments\": ' -}}"
    "{%- if fn['arguments'] is string -%}{{- fn['arguments'] -}}"
    "{%- else -%}{{- fn['arguments'] | tojson -}}{%- endif -%}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif message['role'] == 'tool' -%}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def build_tiny_tools_llama(out_dir: PathLike, seed: int = 0, *, vocab_size: int = 512, **config_overrides: Any) -> Path:
    """Like `build_tiny_llama`, with `TOOLS_CHATML_TEMPLATE` (a chat template that renders `tools` and calls) and a
    2048-position context, so a tools block, a conversation and a constrained call fit together.

    Arguments as for `build_tiny_llama`.
    """
    overrides = {"max_position_embeddings": 2048, **config_overrides}
    tokenizer = build_tokenizer(vocab_size=vocab_size, chat_template=TOOLS_CHATML_TEMPLATE)
    return _build_llama(out_dir, seed, tokenizer, **overrides)


__all__ += ["TOOLS_CHATML_TEMPLATE", "build_tiny_tools_llama"]

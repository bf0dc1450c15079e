"""The tiny model builders: they load with transformers, are deterministic, and the GGUF twin runs in llama.cpp
token for token like transformers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from modelhost.testing import tinymodels

TEXTS = [
    "Hello world",
    "héllo wörld ✓",
    "The robot counted 12 birds; 3.14 is π! Ünïcödé — “quotes” 🙂 日本語",
    "  leading spaces,\ttabs and\nnew lines\n\n  end ",
    "don't you'll it's 1000000 $5.20",
]


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]


# --------------------------------------------------------------------------------------------------------------------
# tokenizer


def test_tokenizer_roundtrips_utf8_and_has_chat_specials(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    built = tinymodels.build_tokenizer(tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    assert 400 <= len(tok) <= 520
    assert tok.convert_ids_to_tokens([0, 1, 2]) == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>" and tok.bos_token == "<|im_start|>"
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=True)
        assert ids == built.encode(text)
        assert tok.decode(ids) == text
        assert len(ids) < len(text.encode("utf-8"))  # merges are actually used
    prompt = tok.apply_chat_template(_chat("hi"), tokenize=False, add_generation_prompt=True)
    assert prompt == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    ids = tok.encode(prompt)
    assert ids.count(tok.convert_tokens_to_ids("<|im_start|>")) == 3  # specials are single tokens


def test_tokenizer_is_deterministic() -> None:
    a = tinymodels.build_tokenizer()
    b = tinymodels.build_tokenizer()
    assert a.backend_tokenizer.to_str() == b.backend_tokenizer.to_str()


# --------------------------------------------------------------------------------------------------------------------
# tiny llama (transformers)


def _hf_greedy(model: torch.nn.Module, prompt: list[int], n: int) -> tuple[list[int], list[np.ndarray]]:
    """Greedy decode `n` tokens without any stopping rule; also return each step's logits.

    Recomputes the whole sequence each step (no KV cache): the model is tiny, and this keeps the reference free of
    cache API differences between transformers versions."""
    seq = list(prompt)
    out: list[int] = []
    logits: list[np.ndarray] = []
    with torch.no_grad():
        for _ in range(n):
            step = model(input_ids=torch.tensor([seq])).logits[0, -1].float().numpy()
            nxt = int(step.argmax())
            out.append(nxt)
            logits.append(step)
            seq.append(nxt)
    return out, logits


def test_tiny_llama_loads_and_decodes_varied_tokens(tiny_llama_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    cfg = model.config
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (64, 2, 4, 2)
    assert cfg.intermediate_size == 128 and cfg.max_position_embeddings == 512 and not cfg.tie_word_embeddings
    assert cfg.vocab_size == len(tok)
    assert (tiny_llama_dir / "model.safetensors").is_file()
    gen_cfg = json.loads((tiny_llama_dir / "generation_config.json").read_text())
    assert tok.convert_tokens_to_ids("<|im_end|>") in gen_cfg["eos_token_id"]

    prompt = tok.encode(
        tok.apply_chat_template(_chat("Hello! How are you?"), tokenize=False, add_generation_prompt=True)
    )
    tokens, _ = _hf_greedy(model, prompt, 24)
    assert len(set(tokens)) >= 8, f"greedy decoding is degenerate: {tokens}"

    # generate() agrees with the hand-rolled greedy loop up to its first end-of-generation token.
    out = model.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False)[0, len(prompt) :].tolist()
    assert out == tokens[: len(out)]


def test_tiny_llama_is_deterministic_per_seed(tmp_path: Path) -> None:
    a = tinymodels.build_tiny_llama(tmp_path / "a", seed=3)
    b = tinymodels.build_tiny_llama(tmp_path / "b", seed=3)
    c = tinymodels.build_tiny_llama(tmp_path / "c", seed=4)
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (a / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()


def test_builders_leave_global_torch_rng_alone(tmp_path: Path) -> None:
    state = torch.random.get_rng_state()
    tinymodels.build_tiny_llama(tmp_path / "m", seed=1)
    assert torch.equal(state, torch.random.get_rng_state())


# --------------------------------------------------------------------------------------------------------------------
# GGUF


def _rope_half(x: np.ndarray, pos: int, base: float = 10000.0) -> np.ndarray:
    """HF rotate_half RoPE on one head vector (pairs are (i, i + d/2))."""
    d = x.shape[0]
    inv = base ** (-np.arange(0, d, 2) / d)
    ang = np.concatenate([pos * inv, pos * inv])
    rot = np.concatenate([-x[d // 2 :], x[: d // 2]])
    return x * np.cos(ang) + rot * np.sin(ang)


def _rope_interleaved(x: np.ndarray, pos: int, base: float = 10000.0) -> np.ndarray:
    """llama.cpp "normal" RoPE on one head vector (pairs are (2i, 2i + 1))."""
    d = x.shape[0]
    inv = base ** (-np.arange(0, d, 2) / d)
    c, s = np.cos(pos * inv), np.sin(pos * inv)
    out = x.copy()
    out[0::2] = x[0::2] * c - x[1::2] * s
    out[1::2] = x[0::2] * s + x[1::2] * c
    return out


def test_qk_permutation_turns_half_split_rope_into_interleaved_rope() -> None:
    """The reason for the permutation, independent of llama.cpp: rows permuted for GGUF and rotated pairwise give
    the same vectors (permuted) as HF's half-split rotation of the original rows, so q.k scores are unchanged."""
    rng = np.random.default_rng(0)
    n_head, head_dim, hidden = 2, 8, 5
    w = rng.standard_normal((n_head * head_dim, hidden))
    h = rng.standard_normal(hidden)
    wp = tinymodels._permute_for_gguf(w, n_head)
    for pos in (0, 1, 7):
        q_hf = (w @ h).reshape(n_head, head_dim)
        q_gg = (wp @ h).reshape(n_head, head_dim)
        for head in range(n_head):
            a = _rope_half(q_hf[head], pos)
            b = _rope_interleaved(q_gg[head], pos)
            # same multiset of rotated values, in the permuted order: compare via the permutation of a's rows
            a_perm = tinymodels._permute_for_gguf(a.reshape(head_dim, 1), 1).ravel()
            np.testing.assert_allclose(a_perm, b, rtol=1e-12, atol=1e-12)


def test_gguf_metadata(tiny_llama_dir: Path, tiny_llama_gguf: Path) -> None:
    from gguf import GGUFReader, TokenType

    reader = GGUFReader(str(tiny_llama_gguf))

    def field(name: str) -> object:
        f = reader.fields[name]
        return f.contents()

    cfg = json.loads((tiny_llama_dir / "config.json").read_text())
    assert field("general.architecture") == "llama"
    assert field("llama.embedding_length") == 64
    assert field("llama.block_count") == 2
    assert field("llama.attention.head_count") == 4
    assert field("llama.attention.head_count_kv") == 2
    assert field("llama.feed_forward_length") == 128
    assert field("llama.context_length") == 512
    assert field("llama.rope.dimension_count") == 16
    assert field("llama.vocab_size") == cfg["vocab_size"]
    assert field("tokenizer.ggml.model") == "gpt2"
    assert field("tokenizer.ggml.pre") == "gpt-2"
    assert field("tokenizer.ggml.eos_token_id") == 2
    assert "<|im_start|>" in str(field("tokenizer.chat_template"))
    tokens = field("tokenizer.ggml.tokens")
    types = field("tokenizer.ggml.token_type")
    assert len(tokens) == cfg["vocab_size"]
    assert [types[i] for i in (0, 1, 2)] == [TokenType.CONTROL] * 3
    names = {t.name for t in reader.tensors}
    assert {"token_embd.weight", "output.weight", "output_norm.weight", "blk.1.attn_k.weight"} <= names
    assert len(names) == 3 + 9 * 2


# KV-cache element type -> tolerated max |logit difference| against transformers. With an f32 cache llama.cpp
# computes in fp32 throughout and agrees to ~1e-5; its default f16 cache costs ~5e-3, still inside the argmax margins.
KV_TOLERANCE = {"f32": 1e-3, "default": 0.05}


@pytest.fixture(scope="module")
def llama_cpp_models(tiny_llama_gguf: Path) -> dict[str, Any]:
    """The tiny GGUF in llama.cpp, once with an f32 KV cache and once with llama.cpp's default (f16) cache."""
    llama_cpp = pytest.importorskip(
        "llama_cpp", reason="llama-cpp-python is not importable (it builds from source; see the Makefile)"
    )
    common: dict[str, Any] = {
        "model_path": str(tiny_llama_gguf),
        "n_ctx": 256,
        "n_batch": 256,
        "n_threads": 1,
        "seed": 0,
        "verbose": False,
        "logits_all": True,  # keep every row of logits in llm.scores (the parity test compares them)
    }
    return {
        "f32": llama_cpp.Llama(**common, type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32),
        "default": llama_cpp.Llama(**common),
    }


@pytest.fixture(scope="module")
def llama_cpp_model(llama_cpp_models: dict[str, Any]) -> Any:
    return llama_cpp_models["default"]


def test_llama_cpp_tokenizes_like_transformers(tiny_llama_dir: Path, llama_cpp_model: Any) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    samples = TEXTS + [tok.apply_chat_template(_chat(t), tokenize=False, add_generation_prompt=True) for t in TEXTS]
    for text in samples:
        hf_ids = tok.encode(text)
        cpp_ids = llama_cpp_model.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        assert cpp_ids == hf_ids, text
        if "<|" not in text:  # llama.cpp does not print CONTROL tokens when detokenizing
            assert llama_cpp_model.detokenize(cpp_ids).decode("utf-8") == text


PARITY_PROMPTS = ["Hello! How are you?", "héllo wörld ✓", "Write a short poem about the sea."]


@pytest.mark.parametrize("kv", sorted(KV_TOLERANCE))
@pytest.mark.parametrize("user_text", PARITY_PROMPTS)
def test_llama_cpp_greedy_matches_transformers(
    tiny_llama_dir: Path, llama_cpp_models: dict[str, Any], user_text: str, kv: str
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    n_new = 24
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32)
    prompt = tok.encode(tok.apply_chat_template(_chat(user_text), tokenize=False, add_generation_prompt=True))
    hf_tokens, hf_logits = _hf_greedy(model, prompt, n_new)

    # llama.cpp: the same greedy loop over its own logits (no sampler, no stop rule).
    llm = llama_cpp_models[kv]
    llm.reset()
    llm.eval(prompt)
    cpp_tokens: list[int] = []
    max_diff = 0.0
    for step in range(n_new):
        logits = np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        max_diff = max(max_diff, float(np.abs(logits - hf_logits[step]).max()))
        nxt = int(logits.argmax())
        cpp_tokens.append(nxt)
        if nxt != hf_tokens[step]:
            break
        llm.eval([nxt])
    assert cpp_tokens == hf_tokens, f"diverged; max |logit diff| so far {max_diff:.2e}"
    assert len(set(hf_tokens)) >= 6, f"degenerate greedy output {hf_tokens}"
    assert max_diff < KV_TOLERANCE[kv], max_diff

    # llama.cpp's own sampler path (temperature 0) picks the same tokens.
    llm.reset()
    sampled: list[int] = []
    for t in llm.generate(prompt, temp=0.0, reset=True):
        sampled.append(t)
        if len(sampled) == n_new:
            break
    assert sampled == hf_tokens


def test_thinking_gguf_keeps_thought_markers_visible(tiny_thinking_dir: Path, tmp_path: Path) -> None:
    """`<think>`/`</think>` are USER_DEFINED in GGUF: one token each in llama.cpp, and printed when detokenizing."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not importable")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_thinking_dir)
    path = tinymodels.write_llama_gguf(tiny_thinking_dir, tmp_path / "thinking.gguf")
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=64, n_threads=1, verbose=False, vocab_only=True)
    text = tok.apply_chat_template([{"role": "user", "content": "2+2?"}], tokenize=False, add_generation_prompt=True)
    text += "four, I think</think>\n\n4"
    ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
    assert ids == tok.encode(text)
    assert tok.convert_tokens_to_ids("</think>") in ids
    assert llm.detokenize(ids).decode("utf-8").endswith("<think>\nfour, I think</think>\n\n4")


def _prompt_logits_cpp(gguf_path: Path, ids: list[int]) -> np.ndarray:
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not importable")
    llm = llama_cpp.Llama(
        model_path=str(gguf_path),
        n_ctx=128,
        n_threads=1,
        verbose=False,
        logits_all=True,
        type_k=llama_cpp.GGML_TYPE_F32,
        type_v=llama_cpp.GGML_TYPE_F32,
    )
    llm.eval(ids)
    return np.asarray(llm.scores[: len(ids)], dtype=np.float32)


def _prompt_logits_hf(model_dir: Path, ids: list[int]) -> np.ndarray:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].numpy()


def test_f16_gguf_stays_close(tiny_llama_dir: Path, tmp_path: Path) -> None:
    f16 = tinymodels.write_llama_gguf(tiny_llama_dir, tmp_path / "tiny-f16.gguf", dtype="f16")
    assert f16.stat().st_size < 0.6 * (tiny_llama_dir / "model.safetensors").stat().st_size
    ids = list(range(3, 40))
    diff = np.abs(_prompt_logits_cpp(f16, ids) - _prompt_logits_hf(tiny_llama_dir, ids)).max()
    assert diff < 0.1, diff


def test_parity_needs_the_qk_permutation(tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: without the Q/K permutation the file still loads and position 0 (where RoPE is the
    identity) still agrees, but every later position is wrong, so the parity tests above would catch it."""
    monkeypatch.setattr(tinymodels, "_permute_for_gguf", lambda w, n_head: w)
    bad = tinymodels.write_llama_gguf(tiny_llama_dir, tmp_path / "unpermuted.gguf")
    ids = list(range(3, 20))
    diff = np.abs(_prompt_logits_cpp(bad, ids) - _prompt_logits_hf(tiny_llama_dir, ids)).max(axis=-1)
    assert diff[0] < 1e-3
    assert diff[1:].max() > 0.5


# --------------------------------------------------------------------------------------------------------------------
# Idefics3


def test_idefics3_answers_a_chat_with_one_image(tiny_idefics3_dir: Path) -> None:
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_idefics3_dir)
    model = AutoModelForImageTextToText.from_pretrained(tiny_idefics3_dir, dtype=torch.float32)
    assert type(model).__name__ == "Idefics3ForConditionalGeneration"
    if importlib.util.find_spec("torchvision") is None:  # the PIL processor was chosen; nothing needs torchvision
        assert type(processor.image_processor).__name__ == "Idefics3ImageProcessorPil"
    image = Image.new("RGB", (48, 36), (240, 240, 230))
    image.paste((20, 20, 20), (4, 4, 40, 10))  # a "line of text"
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Convert this page to docling."}]}
    ]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True)
    assert prompt.count("<image>") == 1 and prompt.endswith("<|im_start|>assistant\n")
    inputs = processor(text=prompt, images=[image], return_tensors="pt")
    # 48x36 -> longest edge 64 -> 2x2 tiles of 32 px + 1 global view, one <image> token each.
    assert tuple(inputs["pixel_values"].shape) == (1, 5, 3, 32, 32)
    expanded = processor.decode(inputs["input_ids"][0])
    assert "<row_2_col_2>" in expanded and "<global-img>" in expanded
    assert int((inputs["input_ids"] == model.config.image_token_id).sum()) == 5

    out = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    new = out[0, inputs["input_ids"].shape[1] :]
    assert 1 <= len(new) <= 12
    answer = processor.decode(new, skip_special_tokens=True)
    assert isinstance(answer, str)

    # the image matters: a different picture changes the first-step logits
    other = processor(text=prompt, images=[Image.new("RGB", (48, 36), (10, 200, 10))], return_tensors="pt")
    with torch.no_grad():
        a = model(**inputs).logits[0, -1]
        b = model(**other).logits[0, -1]
    assert not torch.allclose(a, b)


# --------------------------------------------------------------------------------------------------------------------
# thinking


def test_thinking_template_honours_enable_thinking(tiny_thinking_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_thinking_dir)
    msgs = [{"role": "user", "content": "2+2?"}]
    on = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    off = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    explicit_on = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=True)
    assert on == explicit_on and on.endswith("<|im_start|>assistant\n<think>\n")
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    history = [*msgs, {"role": "assistant", "content": "4", "reasoning_content": "two and two"}]
    rendered = tok.apply_chat_template(history, tokenize=False)
    assert "<|im_start|>assistant\n<think>\ntwo and two\n</think>\n\n4<|im_end|>\n" in rendered

    think_open, think_close = tok.convert_tokens_to_ids(["<think>", "</think>"])
    assert tok.encode("<think>\nhm\n</think>")[0] == think_open and think_close in tok.encode("a</think>b")
    # thought markers are not special: they survive skip_special_tokens
    assert tok.decode(tok.encode(off), skip_special_tokens=True).endswith("<think>\n\n</think>\n\n")

    model = AutoModelForCausalLM.from_pretrained(tiny_thinking_dir, dtype=torch.float32)
    assert model.config.vocab_size == len(tok)
    ids = torch.tensor([tok.encode(on)])
    out = model.generate(ids, max_new_tokens=8, do_sample=False)
    assert out.shape[1] > ids.shape[1]

"""The transformers backend on a tiny random Llama folder: the conformance kit, then what the kit cannot see.

A random model says nothing meaningful, so these tests compare the backend with itself (batched against one at a
time, a GGUF against its folder, greedy runs against each other) and with llama.cpp on the same weights.
"""

from __future__ import annotations

import importlib.util
import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch

from modelhost.backends.transformers import TransformersBackend, loading
from modelhost.backends.transformers.model import TransformersModel
from modelhost.errors import (
    GenerationError,
    InvalidInputError,
    InvalidOptionError,
    ModelClosedError,
    ModelLoadError,
    UnsupportedAttachmentError,
)
from modelhost.inference import Registry, conformance
from modelhost.inference.capabilities import (
    AttentionInspector,
    DeviceInfoProvider,
    PromptBound,
    VisionModel,
    accepts_images,
    as_capability,
    check_prompt_size,
)
from modelhost.inference.model import Backend, FormatProbe, TextModel
from modelhost.inference.types import Message

PROMPT = "The quick brown fox"
PROMPTS = ["Hello", "The quick brown fox jumps over the lazy dog.", "1 2 3", "What is the answer?"]


def load(path: Path | str, **opts: Any) -> TransformersModel:
    model = TransformersBackend().load_model(str(path), **opts)
    assert isinstance(model, TransformersModel)
    return model


@pytest.fixture(scope="module")
def model(tiny_llama_dir: Path) -> Iterator[TransformersModel]:
    with load(tiny_llama_dir) as m:
        yield m


def ids(model: TransformersModel, prompt: str = PROMPT, **opts: Any) -> list[int]:
    return [t.id for t in model.generate(prompt, **opts)]


# --- the conformance kit ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("check", conformance.CHECKS, ids=lambda c: c.__name__)
def test_conformance(model: TransformersModel, check: Any) -> None:
    check(model)


def test_close_is_idempotent_and_final(tiny_llama_dir: Path) -> None:
    m = load(tiny_llama_dir)
    conformance.check_close(m)
    with pytest.raises(ModelClosedError):
        list(m.generate(PROMPT, max_tokens=2))
    assert not m.accepts_images()


def test_protocols(model: TransformersModel) -> None:
    backend = TransformersBackend()
    assert isinstance(backend, Backend) and isinstance(backend, FormatProbe)
    assert isinstance(backend, DeviceInfoProvider)
    assert isinstance(model, TextModel)
    assert as_capability(model, AttentionInspector) is model
    assert model.model_type == "llama" and model.info().architecture == "llama"
    assert model.info().num_layers == 2 and model.info().hidden_size == 64


# --- sampling options and precedence ---------------------------------------------------------------------------------


def test_checkpoint_defaults_apply_when_the_request_is_silent(model: TransformersModel) -> None:
    # generation_config.json: do_sample=false (greedy), max_new_tokens=32. min_tokens keeps EOS away so the bound shows.
    silent = ids(model, min_tokens=64)
    assert len(silent) == 32
    assert silent == ids(model, min_tokens=64, max_tokens=32, temperature=0)
    assert len(ids(model, max_tokens=5, min_tokens=64)) == 5  # the request wins over the checkpoint


def test_seeded_sampling_is_reproducible(model: TransformersModel) -> None:
    first = ids(model, temperature=1.0, seed=7, max_tokens=12, min_tokens=12)
    assert first == ids(model, temperature=1.0, seed=7, max_tokens=12, min_tokens=12)
    others = [ids(model, temperature=1.0, seed=s, max_tokens=12, min_tokens=12) for s in (8, 9, 10)]
    assert any(o != first for o in others), "different seeds never changed a 12-token draw"


def test_stop_tokens_min_tokens_and_suppress(model: TransformersModel) -> None:
    greedy = ids(model, max_tokens=8, temperature=0, min_tokens=8)
    cut = next(i for i in range(1, 8) if greedy[i] not in greedy[:i])
    assert ids(model, max_tokens=8, temperature=0, stop_tokens=[greedy[cut]]) == greedy[:cut]
    assert model.metrics().finish_reason == "stop"
    held = ids(model, max_tokens=8, temperature=0, stop_tokens=[greedy[cut]], min_tokens=cut + 2)
    assert len(held) >= cut + 2, "min_tokens must keep a stop token from ending the generation early"
    assert greedy[cut] not in held[: cut + 2]
    assert ids(model, max_tokens=1, temperature=0, suppress_tokens=[greedy[0]])[0] != greedy[0]


def test_repeat_penalty_discourages_repeats(model: TransformersModel) -> None:
    plain = ids(model, max_tokens=24, temperature=0, min_tokens=24)
    penalised = ids(model, max_tokens=24, temperature=0, min_tokens=24, repeat_penalty=50.0)
    assert len(set(penalised)) >= len(set(plain))
    assert len(set(penalised)) == len(penalised), f"a 50x penalty still repeated: {penalised}"


def test_invalid_options_name_themselves(model: TransformersModel) -> None:
    with pytest.raises(InvalidOptionError, match="top_p"):
        model.generate(PROMPT, top_p=2.0)  # refused at the call, before the iterator is even started
    with pytest.raises(InvalidOptionError, match="temperature"):
        model.batch_generate(["a"], temperature=-1)


# --- streaming, errors, cancellation ---------------------------------------------------------------------------------


def test_engine_error_raises_after_yielded_tokens(model: TransformersModel, monkeypatch: pytest.MonkeyPatch) -> None:
    real = model.runner.forward
    calls = {"n": 0}

    def flaky(*args: Any, **kwargs: Any) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("simulated device failure")
        return real(*args, **kwargs)

    monkeypatch.setattr(model.runner, "forward", flaky)
    got = []
    with pytest.raises(GenerationError, match="simulated device failure") as caught:
        for token in model.generate(PROMPT, max_tokens=10, temperature=0, min_tokens=10):
            got.append(token)
    assert len(got) == 2, "the tokens produced before the failure must be yielded"
    assert model.err() is caught.value and model.metrics().finish_reason == "error"
    monkeypatch.undo()
    list(model.generate(PROMPT, max_tokens=2))
    assert model.err() is None, "a clean generation clears err()"


def test_cancel_from_another_thread(model: TransformersModel) -> None:
    cancel = threading.Event()
    stream = model.generate(PROMPT, max_tokens=200, min_tokens=200, temperature=0, cancel=cancel)
    next(stream)
    threading.Thread(target=cancel.set).start()
    rest = list(stream)
    assert len(rest) <= 1 + 1  # at most the token in flight when the flag was seen
    assert model.metrics().finish_reason == "cancelled"


def test_context_length_bounds_prompt_and_generation(tiny_llama_dir: Path) -> None:
    with load(tiny_llama_dir, context_length=12) as small:
        prompt_ids = small.prompts.raw(PROMPT).ids
        out = list(small.generate(PROMPT, max_tokens=50, min_tokens=50, temperature=0))
        assert len(prompt_ids) + len(out) == 12 and small.metrics().finish_reason == "length"
        with pytest.raises(InvalidInputError, match="context"):
            small.generate("one two three four five six seven eight nine ten eleven twelve thirteen")
        rows = small.batch_generate(
            [PROMPT, "one two three four five six seven eight nine ten eleven twelve"],
            max_tokens=50,
            min_tokens=50,
            temperature=0,
        )
        assert [t.id for t in rows[0].tokens] == [t.id for t in out] and rows[0].finish_reason == "length"
        assert isinstance(rows[1].error, InvalidInputError)


def test_an_over_long_prompt_is_refused_by_its_bytes_before_tokenising(
    tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with load(tiny_llama_dir, context_length=12) as small:
        tokenizer_type = type(small.checkpoint.tokenizer)
        real = tokenizer_type.__call__
        calls: list[int] = []
        monkeypatch.setattr(tokenizer_type, "__call__", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
        huge = "word " * 2_000_000  # 10 MB: tokenising it whole held the model thread for seconds, to refuse it
        with pytest.raises(InvalidInputError, match="bytes"):
            small.generate(huge)
        with pytest.raises(InvalidInputError, match="bytes"):
            small.chat([Message("user", huge)])
        rows = small.batch_generate([huge, PROMPT], max_tokens=2)
        assert isinstance(rows[0].error, InvalidInputError) and rows[1].error is None
        assert len(calls) == 1, "only the prompt within the byte bound was tokenised"
        assert as_capability(small, PromptBound) is small  # the host refuses such a prompt at submit with it
        with pytest.raises(InvalidInputError, match="bytes"):
            check_prompt_size(small, huge)
        check_prompt_size(small, PROMPT)
        assert len(calls) == 1, "the bound is a fact of the loaded model: asking it tokenises nothing"
        with pytest.raises(InvalidInputError, match="tokens"):  # within the byte bound: judged by its tokens
            small.generate("one two three four five six seven eight nine ten eleven twelve thirteen")


# --- classify and batch_generate -------------------------------------------------------------------------------------


def test_classify_batched_equals_one_at_a_time(model: TransformersModel) -> None:
    batched = model.classify(PROMPTS, temperature=0, logits=True)
    assert model.metrics().prompt_tokens == sum(len(model.prompts.raw(p).ids) for p in PROMPTS)
    for prompt, together in zip(PROMPTS, batched, strict=True):
        (alone,) = model.classify([prompt], temperature=0, logits=True)
        assert together.token.id == alone.token.id
        np.testing.assert_allclose(together.logits, alone.logits, rtol=1e-4, atol=1e-4)


def test_classify_is_one_forward_pass(model: TransformersModel, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = model.runner.forward
    monkeypatch.setattr(model.runner, "forward", lambda *a, **k: calls.append(a[0].shape) or real(*a, **k))
    model.classify(PROMPTS, temperature=0)
    assert len(calls) == 1 and calls[0][0] == len(PROMPTS)


def test_batch_generate_rows_equal_single_generations(model: TransformersModel) -> None:
    rows = model.batch_generate(PROMPTS, max_tokens=10, temperature=0)
    for prompt, row in zip(PROMPTS, rows, strict=True):
        alone = list(model.generate(prompt, max_tokens=10, temperature=0))
        assert row.error is None
        assert [t.id for t in row.tokens] == [t.id for t in alone], prompt
        assert row.text == "".join(t.text for t in alone)
        assert row.finish_reason == model.metrics().finish_reason


def test_batch_drops_finished_rows_and_keeps_decoding_the_rest(
    model: TransformersModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = ids(model, PROMPTS[0], max_tokens=10, min_tokens=10, temperature=0)
    stop = first[2] if first[2] not in first[:2] else first[1]
    opts: dict[str, Any] = {"max_tokens": 10, "temperature": 0, "stop_tokens": [stop]}
    widths = []
    real = model.runner.forward
    monkeypatch.setattr(model.runner, "forward", lambda *a, **k: widths.append(a[0].shape[0]) or real(*a, **k))
    rows = model.batch_generate(PROMPTS, **opts)
    monkeypatch.undo()
    assert rows[0].finish_reason == "stop" and len(rows[0].tokens) < 10
    # Each prompt is prefilled alone (as a single generation is), then the rows decode together.
    prefills, decodes = widths[: len(PROMPTS)], widths[len(PROMPTS) :]
    assert prefills == [1] * len(PROMPTS), widths
    assert decodes[0] == len(PROMPTS) and min(decodes) < len(PROMPTS), f"finished rows stayed in the batch: {widths}"
    assert decodes == sorted(decodes, reverse=True)
    for prompt, row in zip(PROMPTS, rows, strict=True):
        assert [t.id for t in row.tokens] == [t.id for t in model.generate(prompt, **opts)], prompt


def test_batch_per_prompt_errors_and_metrics(model: TransformersModel) -> None:
    rows = model.batch_generate(["Hello", "", "1 2 3"], max_tokens=4, min_tokens=4, temperature=0)
    assert rows[0].error is None and rows[2].error is None and len(rows[0].tokens) == 4
    assert isinstance(rows[1].error, InvalidInputError) and rows[1].finish_reason == "error"
    m = model.metrics()
    assert m.generated_tokens == 8 and m.prompt_tokens > 0 and m.finish_reason == "length"


def test_batch_cancel_and_zero_tokens(model: TransformersModel) -> None:
    cancel = threading.Event()
    cancel.set()
    rows = model.batch_generate(PROMPTS, max_tokens=8, cancel=cancel)
    assert all(r.tokens == () and r.finish_reason == "cancelled" for r in rows)
    rows = model.batch_generate(PROMPTS, max_tokens=0)
    assert all(r.tokens == () and r.finish_reason == "length" for r in rows)


def test_parallel_load_option_chunks_the_batch(tiny_llama_dir: Path, model: TransformersModel) -> None:
    with load(tiny_llama_dir, parallel=2) as chunked:
        rows = chunked.batch_generate(PROMPTS, max_tokens=6, temperature=0)
        expected = model.batch_generate(PROMPTS, max_tokens=6, temperature=0)
        assert [[t.id for t in r.tokens] for r in rows] == [[t.id for t in r.tokens] for r in expected]


# --- thinking budget -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def thinker(tiny_thinking_dir: Path) -> Iterator[TransformersModel]:
    with load(tiny_thinking_dir) as m:
        yield m


def test_thinking_budget_forces_the_close_token(thinker: TransformersModel) -> None:
    close = thinker.checkpoint.tokenizer.convert_tokens_to_ids("</think>")
    ask = [Message("user", "Why is the sky blue?")]
    # Suppressing </think> keeps the random model from closing on its own; forcing overrides suppression.
    free = list(thinker.chat(ask, max_tokens=8, min_tokens=8, temperature=0, suppress_tokens=[close]))
    assert close not in [t.id for t in free] and not thinker.metrics().thinking_budget_forced
    budgeted = list(
        thinker.chat(ask, max_tokens=8, min_tokens=8, temperature=0, suppress_tokens=[close], thinking_budget=3)
    )
    assert [t.id for t in budgeted][:3] == [t.id for t in free][:3]
    assert budgeted[3].id == close and "</think>" in "".join(t.text for t in budgeted)
    assert close not in [t.id for t in budgeted[4:]], "the budget forces the close once, not again"
    assert thinker.metrics().thinking_budget_forced


def test_thinking_disabled_through_the_template_never_forces(thinker: TransformersModel) -> None:
    ask = [Message("user", "Why is the sky blue?")]
    list(thinker.chat(ask, max_tokens=6, min_tokens=6, temperature=0, thinking_budget=1, enable_thinking=False))
    assert not thinker.metrics().thinking_budget_forced
    on = thinker.prompts.chat(ask, thinker.runner.options({"enable_thinking": True}))
    off = thinker.prompts.chat(ask, thinker.runner.options({"enable_thinking": False}))
    assert thinker.checkpoint.tokenizer.decode(on.ids).endswith("<think>\n")
    assert thinker.checkpoint.tokenizer.decode(off.ids).endswith("</think>\n\n")


def test_thinking_budget_in_batch(thinker: TransformersModel) -> None:
    close = thinker.checkpoint.tokenizer.convert_tokens_to_ids("</think>")
    prompts = ["<|im_start|>assistant\n<think>\n", "<|im_start|>assistant\nplain"]
    rows = thinker.batch_generate(
        prompts, max_tokens=6, min_tokens=6, temperature=0, thinking_budget=2, suppress_tokens=[close]
    )
    assert rows[0].tokens[2].id == close
    assert close not in [t.id for t in rows[1].tokens]
    assert thinker.metrics().thinking_budget_forced


# --- attention inspection --------------------------------------------------------------------------------------------


def test_attention_snapshot_geometry_under_gqa(model: TransformersModel) -> None:
    snap = model.inspect_attention(PROMPT)
    seq = len(model.prompts.raw(PROMPT).ids)
    assert (snap.num_layers, snap.num_heads, snap.num_query_heads, snap.seq_len, snap.head_dim) == (2, 2, 4, seq, 16)
    assert snap.architecture == "llama" and len(snap.token_ids) == seq
    assert all(k.shape == (2, seq, 16) and k.dtype == np.float32 for k in snap.keys)
    assert all(q.shape == (4, seq, 16) for q in snap.queries)


def test_attention_keys_are_the_post_rope_cache_keys(model: TransformersModel, tiny_llama_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, DynamicCache

    snap = model.inspect_attention(PROMPT)
    reference = AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir), dtype=torch.float32)
    cache = DynamicCache(config=reference.config)
    with torch.inference_mode():
        reference(
            input_ids=torch.tensor([list(snap.token_ids)]), **{model.checkpoint.cache_kwarg: cache}, use_cache=True
        )
    for layer, keys in enumerate(snap.keys):
        np.testing.assert_allclose(keys, cache.layers[layer].keys[0].numpy(), rtol=1e-5, atol=1e-5)
    # Inspection leaves the model's attention as it was: generation still matches a fresh load.
    assert ids(model, max_tokens=4, temperature=0) == [
        t.id for t in load(tiny_llama_dir).generate(PROMPT, max_tokens=4, temperature=0)
    ]


# --- vision refusal on a text-only model -----------------------------------------------------------------------------


def test_text_only_model_refuses_images_before_compute(model: TransformersModel) -> None:
    from PIL import Image

    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, format="PNG")
    before = model.metrics()
    assert not model.accepts_images() and not accepts_images(model)
    assert isinstance(model, VisionModel)
    with pytest.raises(UnsupportedAttachmentError) as caught:
        model.chat([Message("user", "what is this?", images=(png.getvalue(),))])
    assert caught.value.code == "attachment_unsupported"
    assert model.metrics() is before, "a refused request must cost nothing"


# --- loading: GGUF through transformers, options, registry ------------------------------------------------------------


def test_gguf_loads_through_the_safetensors_cache(
    tiny_llama_gguf: Path, model: TransformersModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODELHOST_CACHE_DIR", str(tmp_path))
    expected = ids(model, max_tokens=12, temperature=0)
    with load(tiny_llama_gguf) as from_gguf:
        assert ids(from_gguf, max_tokens=12, temperature=0) == expected
        assert from_gguf.model_type == "llama" and from_gguf.info().vocab_size == model.info().vocab_size
    cached = [entry for entry in (tmp_path / "gguf").iterdir() if entry.is_dir()]
    assert len(cached) == 1 and (cached[0] / "model.safetensors").is_file()

    def no_second_dequantisation(*_: Any) -> None:
        raise AssertionError("the second load dequantised again instead of reading the cache")

    monkeypatch.setattr(loading, "_dequantise_gguf", no_second_dequantisation)
    with load(tiny_llama_gguf) as again:
        assert ids(again, max_tokens=12, temperature=0) == expected


def test_a_load_that_waited_for_another_loaders_conversion_reads_it_instead_of_converting_again(
    tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from filelock import FileLock

    monkeypatch.setenv("MODELHOST_CACHE_DIR", str(tmp_path))
    folder = loading.gguf_cache_folder(tiny_llama_gguf)
    folder.parent.mkdir(parents=True)
    convert = loading._dequantise_gguf
    conversions: list[Path] = []
    monkeypatch.setattr(loading, "_dequantise_gguf", lambda _gguf, out: conversions.append(out))
    # Another process's loader, mid-conversion: it holds the lock and its folder does not exist yet.
    other = FileLock(loading.gguf_cache_lock(folder))
    other.acquire()
    looked = threading.Event()
    real_folder = loading.gguf_cache_folder

    def folder_then_signal(gguf: Path) -> Path:
        where = real_folder(gguf)
        looked.set()
        return where

    monkeypatch.setattr(loading, "gguf_cache_folder", folder_then_signal)
    loaded: list[Path] = []
    waiting = threading.Thread(target=lambda: loaded.append(loading.dequantised_gguf_folder(tiny_llama_gguf)))
    waiting.start()
    looked.wait()
    convert(tiny_llama_gguf, folder)  # the other loader finishes its folder, then lets go of the lock
    other.release()
    waiting.join()
    assert loaded == [folder] and conversions == [], "the waiting load converted the GGUF a second time"


def test_parity_with_llama_cpp_on_the_same_weights(tiny_llama_gguf: Path, model: TransformersModel) -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (it builds from source); parity needs the llama_cpp backend")
    from modelhost.inference import load_model

    with load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1) as cpp:
        for prompt in PROMPTS:
            ours = ids(model, prompt, max_tokens=16, temperature=0)
            theirs = [t.id for t in cpp.generate(prompt, max_tokens=16, temperature=0)]
            assert ours == theirs, prompt


def test_load_options(tiny_llama_dir: Path) -> None:
    with pytest.raises(InvalidOptionError, match="dtype"):
        load(tiny_llama_dir, dtype="int3")
    with load(tiny_llama_dir, dtype="bf16") as half:
        assert next(half.checkpoint.model.parameters()).dtype == torch.bfloat16
        assert len(list(half.generate(PROMPT, max_tokens=3))) == 3
    threads = torch.get_num_threads()
    try:
        with load(tiny_llama_dir, threads=1, gpu_layers=0) as pinned:
            assert torch.get_num_threads() == 1 and pinned.checkpoint.device.type == "cpu"
    finally:
        torch.set_num_threads(threads)


def test_adapter_is_applied_at_load(tiny_llama_dir: Path, tmp_path: Path, model: TransformersModel) -> None:
    if importlib.util.find_spec("peft") is None:
        pytest.skip("peft is not installed; adapter= needs it (pip install peft)")
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(tiny_llama_dir), dtype=torch.float32)
    # init_lora_weights=False: random B matrices, so the adapter changes the output (peft's default is a no-op).
    config = LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(str(tmp_path / "adapter"))
    greedy: dict[str, Any] = {"max_tokens": 8, "min_tokens": 8, "temperature": 0}
    with load(tiny_llama_dir, adapter=str(tmp_path / "adapter")) as adapted:
        assert ids(adapted, **greedy) != ids(model, **greedy)


def test_adapter_folder_must_be_a_peft_adapter(tiny_llama_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="adapter"):
        load(tiny_llama_dir, adapter=str(tmp_path))


def test_accepts_and_registry_preference(tiny_llama_dir: Path, tiny_llama_gguf: Path, tmp_path: Path) -> None:
    backend = TransformersBackend()
    other = tmp_path / "notes.txt"
    other.write_text("not a model")
    assert backend.accepts(str(tiny_llama_dir)) and backend.accepts(str(tiny_llama_gguf))
    assert not backend.accepts(str(other)) and not backend.accepts(str(tmp_path))

    class GgufOnly:
        """A stand-in llama_cpp: loads GGUF files only."""

        name = "llama_cpp"

        def available(self) -> bool:
            return True

        def accepts(self, path: str) -> bool:
            return path.endswith(".gguf")

        def load_model(self, path: str, **opts: Any) -> Any:
            return ("llama_cpp", path)

    registry = Registry()
    registry.register(backend)
    registry.register(GgufOnly())
    assert registry.load_model(str(tiny_llama_gguf)) == ("llama_cpp", str(tiny_llama_gguf))
    with registry.load_model(str(tiny_llama_dir)) as folder_model:
        assert isinstance(folder_model, TransformersModel)


def test_default_registry_sends_folders_here_and_gguf_to_llama_cpp(tiny_llama_dir: Path, tiny_llama_gguf: Path) -> None:
    from modelhost.inference import load_model

    with load_model(str(tiny_llama_dir)) as folder_model:
        assert isinstance(folder_model, TransformersModel)
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed; the GGUF half of the preference needs it")
    with load_model(str(tiny_llama_gguf)) as gguf_model:
        assert not isinstance(gguf_model, TransformersModel), "llama.cpp is preferred for a GGUF both can load"


def test_device_info_on_cpu() -> None:
    info = TransformersBackend().device_info()
    assert info.name and info.architecture and info.memory_size > 0

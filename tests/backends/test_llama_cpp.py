"""The llama_cpp backend on a tiny random Llama GGUF: the conformance kit, then what the kit cannot see.

A random model says nothing meaningful, so these tests compare the backend with itself (greedy runs, token ids,
the same prompt through two doors) and with llama.cpp's own vocabulary; the real-model tests are in
test_smollm2.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llama_cpp")

from modelhost.backends.llama_cpp import LlamaCppBackend, chat, metadata, sampling
from modelhost.backends.llama_cpp.model import LlamaCppModel
from modelhost.errors import (
    GenerationError,
    InvalidInputError,
    InvalidOptionError,
    ModelClosedError,
    ModelLoadError,
    UnsupportedAttachmentError,
)
from modelhost.inference import Registry, conformance
from modelhost.inference.capabilities import DeviceInfoProvider, VisionModel, as_capability
from modelhost.inference.engine import EngineRequest
from modelhost.inference.engine_conformance import drive
from modelhost.inference.model import Backend, FormatProbe, TextModel
from modelhost.inference.types import Message
from modelhost.testing import tinymodels

PROMPT = "The quick brown fox"


def load(path: Path | str, **opts: Any) -> LlamaCppModel:
    model = LlamaCppBackend().load_model(str(path), **opts)
    assert isinstance(model, LlamaCppModel)
    return model


@pytest.fixture(scope="module")
def model(tiny_llama_gguf: Path) -> Iterator[LlamaCppModel]:
    with load(tiny_llama_gguf, threads=1) as m:
        yield m


def ids(model: LlamaCppModel, prompt: str = PROMPT, **opts: Any) -> list[int]:
    return [t.id for t in model.generate(prompt, **opts)]


# --- the conformance kit ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("check", conformance.CHECKS, ids=lambda c: c.__name__)
def test_conformance(model: LlamaCppModel, check: Any) -> None:
    check(model)


def test_conformance_close(tiny_llama_gguf: Path) -> None:
    conformance.check_close(load(tiny_llama_gguf))


# --- the backend ------------------------------------------------------------------------------------------------------


def test_backend_protocols_and_probes(tiny_llama_gguf: Path, tiny_llama_dir: Path, tmp_path: Path) -> None:
    backend = LlamaCppBackend()
    assert isinstance(backend, Backend) and isinstance(backend, FormatProbe)
    assert as_capability(backend, DeviceInfoProvider) is backend
    assert backend.name == "llama_cpp" and backend.available()
    renamed = tmp_path / "weights.bin"
    renamed.write_bytes(tiny_llama_gguf.read_bytes()[:64])
    assert backend.accepts(str(tiny_llama_gguf)) and backend.accepts(str(renamed)), "judged by magic, not name"
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"nope")
    assert not backend.accepts(str(fake)) and not backend.accepts(str(tiny_llama_dir))


def test_device_info_describes_the_cpu() -> None:
    info = LlamaCppBackend().device_info()
    assert info.name and info.architecture and info.memory_size > 1 << 20


def test_the_entry_point_registers_this_backend(tiny_llama_gguf: Path) -> None:
    registry = Registry(entry_points=True)
    assert isinstance(registry.get("llama_cpp"), LlamaCppBackend)
    with registry.load_model(str(tiny_llama_gguf), backend="llama_cpp") as m:
        assert isinstance(m, LlamaCppModel) and isinstance(m, TextModel)


def test_load_options_are_honoured(tiny_llama_gguf: Path) -> None:
    with load(tiny_llama_gguf, context_length=128, threads=1, gpu_layers=0, parallel=1) as m:
        assert m.context_length == 128
        assert m.threads == (1, 1)
    with load(tiny_llama_gguf) as m:
        # No context_length: the default, capped at the 512 positions the tiny model was trained on.
        assert m.context_length == m.info().context_length == 512


@pytest.mark.parametrize(
    ("opts", "option"),
    [
        ({"dtype": "bf16"}, "dtype"),
        ({"parallel": 1000}, "parallel"),  # past llama.cpp's own bound on sequences (256)
        ({"backend": "transformers"}, "backend"),
        ({"threads": 0}, "threads"),
        ({"context_length": -1}, "context_length"),
    ],
)
def test_load_options_it_cannot_honour_are_refused(tiny_llama_gguf: Path, opts: dict[str, Any], option: str) -> None:
    with pytest.raises(InvalidOptionError) as info:
        load(tiny_llama_gguf, **opts)
    assert info.value.option == option


def test_gpu_layers_on_a_cpu_only_build_are_refused(tiny_llama_gguf: Path) -> None:
    import llama_cpp

    if llama_cpp.llama_supports_gpu_offload():
        pytest.skip("this llama-cpp-python build offloads to a GPU")
    with pytest.raises(InvalidOptionError, match="CPU-only") as info:
        load(tiny_llama_gguf, gpu_layers=-1)
    assert info.value.option == "gpu_layers"


def test_not_a_gguf_is_refused(tiny_llama_dir: Path) -> None:
    with pytest.raises(ModelLoadError, match="GGUF files only"):
        load(tiny_llama_dir)


def test_a_non_gguf_adapter_is_refused(tiny_llama_gguf: Path, tiny_llama_dir: Path) -> None:
    with pytest.raises(InvalidOptionError, match="convert_lora_to_gguf") as info:
        load(tiny_llama_gguf, adapter=str(tiny_llama_dir))
    assert info.value.option == "adapter"


def write_lora_gguf(path: Path, *, n_embd: int, n_vocab: int, rank: int = 4, scale: float = 3.0) -> Path:
    """A llama.cpp LoRA adapter (GGUF) on the output head: enough to move a random model's greedy choice."""
    import gguf

    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", float(rank))
    # numpy shapes are torch order: A is (rank, in), B is (out, rank); llama.cpp checks both against the base.
    w.add_tensor("output.weight.lora_a", rng.standard_normal((rank, n_embd)).astype(np.float32))
    w.add_tensor("output.weight.lora_b", (scale * rng.standard_normal((n_vocab, rank))).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_lora_gguf_adapter_is_applied_at_load(model: LlamaCppModel, tiny_llama_gguf: Path, tmp_path: Path) -> None:
    info = model.info()
    adapter = write_lora_gguf(tmp_path / "lora.gguf", n_embd=info.hidden_size, n_vocab=info.vocab_size)
    base = model.classify([PROMPT, "Hello"], temperature=0, logits=True)
    with load(tiny_llama_gguf, adapter=str(tmp_path)) as adapted:  # a folder holding one LoRA GGUF works too
        assert adapted.adapter == str(adapter)
        moved = adapted.classify([PROMPT, "Hello"], temperature=0, logits=True)
    for b, m in zip(base, moved, strict=True):
        assert not np.allclose(b.logits, m.logits), "the adapter did not change the logits"


def test_the_adapter_reaches_the_engines_context_at_every_slot(
    model: LlamaCppModel, tiny_llama_gguf: Path, tmp_path: Path
) -> None:
    # llama.cpp applies a LoRA per context: the engine's context (the model's only one) must run the adapted
    # weights, alone and beside another request.
    info = model.info()
    adapter = write_lora_gguf(tmp_path / "lora.gguf", n_embd=info.hidden_size, n_vocab=info.vocab_size)
    base = ids(model, max_tokens=8, temperature=0)
    with load(tiny_llama_gguf, adapter=str(adapter), parallel=2) as adapted:
        alone = ids(adapted, max_tokens=8, temperature=0)
        request = EngineRequest(prompt=PROMPT, options={"max_tokens": 8, "temperature": 0})
        other = EngineRequest(prompt="Once upon a time", options={"max_tokens": 8, "temperature": 0})
        batched = drive(adapted.engine(), [request, other])[0].ids
    assert batched == alone != base


# --- the model --------------------------------------------------------------------------------------------------------


def test_info_and_model_type_come_from_the_gguf(model: LlamaCppModel, tiny_llama_dir: Path) -> None:
    import json

    cfg = json.loads((tiny_llama_dir / "config.json").read_text())
    info = model.info()
    assert model.model_type == info.architecture == "llama"
    assert (info.vocab_size, info.num_layers, info.hidden_size) == (
        cfg["vocab_size"],
        cfg["num_hidden_layers"],
        cfg["hidden_size"],
    )
    assert (info.quant_bits, info.quant_group) == (32, 0)  # written as ALL_F32
    assert info.context_length == cfg["max_position_embeddings"]


def test_closed_model_raises_model_closed(tiny_llama_gguf: Path) -> None:
    with load(tiny_llama_gguf) as m:
        stream = m.generate(PROMPT, max_tokens=50, temperature=0)
        next(stream)
    with pytest.raises(StopIteration):
        next(stream)  # closing finished the stream that was still open
    for call in (
        lambda: m.generate(PROMPT),
        lambda: m.chat([Message("user", "hi")]),
        lambda: m.classify([PROMPT]),
        lambda: m.batch_generate([PROMPT]),
        lambda: m.encode("x"),
    ):
        with pytest.raises(ModelClosedError) as info:
            call()
        assert info.value.code == "model_closed"
    m.close()


def test_images_are_refused_before_any_compute(model: LlamaCppModel) -> None:
    list(model.generate("warm", max_tokens=1, temperature=0))
    before_cache, before_metrics = model.engine().cached_tokens(), model.metrics()
    with pytest.raises(UnsupportedAttachmentError) as info:
        model.chat([Message("user", "what is this?", images=(b"\x89PNG",))], max_tokens=4)
    assert info.value.code == "attachment_unsupported"
    assert model.engine().cached_tokens() == before_cache and model.metrics() is before_metrics
    assert model.engine().free_slots() == model.engine().slots
    assert as_capability(model, VisionModel) is model and not model.accepts_images()


def test_chat_renders_the_ggufs_own_template(model: LlamaCppModel) -> None:
    messages = [Message("system", "Be brief."), Message("user", "Say something short.")]
    rendered = chat.render(model.template, messages, bos_token=model.vocab.bos_text, eos_token=model.vocab.eos_text)
    assert rendered.endswith("<|im_start|>assistant\n") and "<|im_start|>system\nBe brief.<|im_end|>" in rendered
    via_chat = [t.id for t in model.chat(messages, max_tokens=6, temperature=0)]
    assert model.metrics().prompt_tokens == len(model.encode(rendered))
    assert via_chat == ids(model, rendered, max_tokens=6, temperature=0)


def test_chat_refuses_bad_conversations(model: LlamaCppModel) -> None:
    with pytest.raises(InvalidInputError, match="at least one"):
        model.chat([])
    with pytest.raises(InvalidInputError, match="role"):
        model.chat([Message("wizard", "hi")])


def test_enable_thinking_reaches_the_template_and_thinking_budget_closes_the_thought(
    tiny_thinking_dir: Path, tmp_path: Path
) -> None:
    gguf_path = tinymodels.write_llama_gguf(tiny_thinking_dir, tmp_path / "thinking.gguf")
    with load(gguf_path) as m:
        messages = [Message("user", "Think about it.")]
        list(m.chat(messages, max_tokens=1, temperature=0))
        thinking_prompt = m.metrics().prompt_tokens
        list(m.chat(messages, max_tokens=1, temperature=0, enable_thinking=False))
        assert m.metrics().prompt_tokens > thinking_prompt, "enable_thinking=False must close the thought block"
        close_id = m.encode("</think>")
        assert len(close_id) == 1
        tokens = list(m.chat(messages, max_tokens=8, temperature=0, thinking_budget=3, stop_tokens=[]))
        assert m.metrics().thinking_budget_forced
        assert [t.id for t in tokens][3] == close_id[0], "after 3 thought tokens the channel must be closed"
        list(m.chat(messages, max_tokens=3, temperature=0, thinking_budget=50))
        assert not m.metrics().thinking_budget_forced


def test_stop_tokens_add_to_the_models_own(model: LlamaCppModel) -> None:
    greedy = ids(model, max_tokens=8, temperature=0)
    cut = ids(model, max_tokens=8, temperature=0, stop_tokens=[greedy[2]])
    assert cut == greedy[: greedy.index(greedy[2])] and model.metrics().finish_reason == "stop"
    assert model.vocab.eog, "the vocabulary's own end-of-generation tokens are always stops"


def test_min_tokens_bans_the_stops_until_reached(model: LlamaCppModel) -> None:
    first = ids(model, max_tokens=1, temperature=0)[0]
    assert ids(model, max_tokens=8, temperature=0, stop_tokens=[first]) == []
    forced = ids(model, max_tokens=8, temperature=0, stop_tokens=[first], min_tokens=3)
    assert len(forced) >= 3 and first not in forced[:3]


def test_suppress_tokens_are_never_drawn(model: LlamaCppModel) -> None:
    greedy = ids(model, max_tokens=6, temperature=0)
    banned = sorted(set(greedy))
    again = ids(model, max_tokens=6, temperature=0, suppress_tokens=banned)
    assert not set(again) & set(banned)
    sampled = ids(model, max_tokens=12, temperature=1.5, seed=3, suppress_tokens=banned)
    assert not set(sampled) & set(banned)


def test_seed_makes_sampling_repeatable(model: LlamaCppModel) -> None:
    a = ids(model, max_tokens=16, temperature=1.0, seed=7)
    assert a == ids(model, max_tokens=16, temperature=1.0, seed=7)
    others = [ids(model, max_tokens=16, temperature=1.0, seed=s) for s in (8, 9, 10)]
    assert any(o != a for o in others), "different seeds never changed a 16-token sample"


def test_top_k_one_and_tiny_top_p_are_greedy(model: LlamaCppModel) -> None:
    greedy = ids(model, max_tokens=8, temperature=0)
    assert ids(model, max_tokens=8, temperature=1.0, top_k=1, seed=1) == greedy
    assert ids(model, max_tokens=8, temperature=1.0, top_p=0.0, seed=2) == greedy


def test_repeat_penalty_changes_greedy_output_and_zero_is_refused(model: LlamaCppModel) -> None:
    plain = ids(model, max_tokens=24, temperature=0)
    penalised = ids(model, max_tokens=24, temperature=0, repeat_penalty=5.0)
    assert penalised != plain or len(set(plain)) == len(plain)
    with pytest.raises(InvalidOptionError, match="repeat_penalty"):
        model.generate(PROMPT, repeat_penalty=0.0)


def test_checkpoint_defaults_sit_between_request_and_fallback(model: LlamaCppModel) -> None:
    greedy = ids(model, max_tokens=8, temperature=0)
    prompter = model.engine().prompter
    saved = prompter.defaults
    try:
        prompter.defaults = {"temperature": 0.0}
        assert ids(model, max_tokens=8) == greedy, "the checkpoint's temperature 0 applies when the request is silent"
        prompter.defaults = {"temperature": 0.0, "max_tokens": 3}
        assert len(ids(model)) == 3
        samples = {tuple(ids(model, max_tokens=8, temperature=2.0, seed=s)) for s in range(4)}
        assert samples != {tuple(greedy)}, "the request's temperature must beat the checkpoint's"
    finally:
        prompter.defaults = saved


def test_sampling_defaults_are_read_from_general_sampling_keys() -> None:
    meta = {"general.sampling.temp": "0.6", "general.sampling.top_k": "20", "general.sampling.top_p": "bad"}
    assert metadata.sampling_defaults(meta) == {"temperature": 0.6, "top_k": 20}


def test_quant_bits_follow_the_file_type() -> None:
    info = metadata.model_info({"general.architecture": "qwen2", "general.file_type": "15"}, vocab_size=10)
    assert (info.architecture, info.quant_bits, info.quant_group) == ("qwen2", 4, 256)
    assert metadata.model_info({}, vocab_size=1).architecture == "unknown"


def test_native_seed_never_asks_for_a_random_seed() -> None:
    assert sampling.native_seed(None) == sampling.RANDOM_SEED
    assert sampling.native_seed(0xFFFFFFFF) != sampling.RANDOM_SEED
    assert sampling.native_seed(5) == 5 and 0 <= sampling.native_seed((1 << 64) - 1) < 1 << 32


def test_the_kv_cache_prefix_is_reused_across_calls(model: LlamaCppModel) -> None:
    long_prompt = "Once upon a time there was a tiny model that liked to count. " * 3
    first = ids(model, long_prompt, max_tokens=4, temperature=0)
    prompt_len = model.metrics().prompt_tokens
    assert ids(model, long_prompt, max_tokens=4, temperature=0) == first, "reuse must not change the output"
    m = model.metrics()
    assert m.cached_prompt_tokens == prompt_len - 1, "the same prompt again re-evaluates only its last token"
    assert m.prompt_tokens == prompt_len, "prompt_tokens counts the whole prompt, cached or not"
    list(model.generate(long_prompt + " And then", max_tokens=1, temperature=0))
    m = model.metrics()
    assert m.prompt_tokens - m.cached_prompt_tokens < 10, "an extended prompt evaluates only its new tail"


def test_a_second_operation_finishes_a_suspended_stream(model: LlamaCppModel) -> None:
    stream = model.generate(PROMPT, max_tokens=50, temperature=0)
    next(stream)
    greedy = ids(model, "Hello", max_tokens=3, temperature=0)
    with pytest.raises(StopIteration):
        next(stream)
    assert greedy == ids(model, "Hello", max_tokens=3, temperature=0)


def test_an_abandoned_for_loop_frees_the_context_at_once(model: LlamaCppModel) -> None:
    for _ in model.generate(PROMPT, max_tokens=50, temperature=0):
        break
    assert model.metrics().finish_reason == "cancelled"
    assert model.engine().free_slots() == model.engine().slots, "the request's slot is free again at once"


def test_cancel_from_another_thread(model: LlamaCppModel) -> None:
    cancel = threading.Event()
    timer = threading.Timer(0.05, cancel.set)
    timer.start()
    never_stop = sorted(model.vocab.eog)
    tokens = list(
        model.generate(PROMPT, max_tokens=100_000, temperature=1.0, seed=1, cancel=cancel, suppress_tokens=never_stop)
    )
    timer.join()
    if model.metrics().finish_reason == "length":  # a fast machine filled the context before the timer fired
        assert len(tokens) + len(model.encode(PROMPT)) >= model.context_length
    else:
        assert model.metrics().finish_reason == "cancelled"


def test_a_full_context_ends_with_length(tiny_llama_gguf: Path) -> None:
    with load(tiny_llama_gguf, context_length=16) as m:
        prompt_len = len(m.encode(PROMPT))
        tokens = list(m.generate(PROMPT, max_tokens=100, temperature=0, stop_tokens=[]))
        assert m.metrics().finish_reason in ("length", "stop")
        assert len(tokens) <= 16 - prompt_len + 1
        with pytest.raises(InvalidInputError, match="context"):
            m.generate("word " * 40)


def test_an_engine_failure_keeps_the_tokens_sets_err_and_recovers(
    model: LlamaCppModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    import llama_cpp

    real_decode = llama_cpp.llama_decode
    calls = {"n": 0}

    def failing_decode(ctx: Any, batch: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 3:  # the prefill, one decode step, then a failure
            return -1
        return int(real_decode(ctx, batch))

    monkeypatch.setattr(llama_cpp, "llama_decode", failing_decode)
    got = []
    with pytest.raises(GenerationError, match="llama_decode") as info:
        for token in model.generate("A fresh prompt", max_tokens=10, temperature=0, stop_tokens=[]):
            got.append(token)
    assert len(got) == 2 and info.value.code == "generation_failed"
    assert model.err() is info.value and model.metrics().finish_reason == "error"
    monkeypatch.setattr(llama_cpp, "llama_decode", real_decode)
    assert len(ids(model, max_tokens=2, temperature=0)) >= 1 and model.err() is None


def test_batch_generate_keeps_a_prompts_failure_in_its_result(model: LlamaCppModel) -> None:
    results = model.batch_generate(["Hello", "word " * 600, PROMPT], max_tokens=3, temperature=0)
    assert [r.error is None for r in results] == [True, False, True]
    assert isinstance(results[1].error, InvalidInputError) and results[1].finish_reason == "error"
    m = model.metrics()
    assert m.generated_tokens == len(results[0].tokens) + len(results[2].tokens)
    assert m.prompt_tokens == len(model.encode("Hello")) + len(model.encode(PROMPT))
    assert [t.id for t in results[2].tokens] == ids(model, max_tokens=3, temperature=0)
    with pytest.raises(InvalidOptionError):
        model.batch_generate(["Hello"], max_tokens=-1)


def test_classify_is_the_first_greedy_token_with_vocab_logits(model: LlamaCppModel) -> None:
    prompts = ["Hello", PROMPT]
    results = model.classify(prompts, temperature=0, logits=True)
    m = model.metrics()
    assert m.generated_tokens == 2 and m.prompt_tokens == sum(len(model.encode(p)) for p in prompts)
    for prompt, result in zip(prompts, results, strict=True):
        assert result.token.id == ids(model, prompt, max_tokens=1, temperature=0)[0]
        assert isinstance(result.logits, np.ndarray) and result.logits.shape == (model.info().vocab_size,)
    suppressed = model.classify(["Hello"], temperature=0, suppress_tokens=[results[0].token.id])
    assert suppressed[0].token.id != results[0].token.id


def test_token_pieces_are_raw_bytes_and_decode_joins_them(model: LlamaCppModel) -> None:
    text = "é€ naïve"
    tokens = model.encode(text)
    assert model.decode(tokens) == text
    pieces = [model.vocab.piece(t) for t in tokens]
    assert b"".join(pieces) == text.encode()
    assert any(not _is_utf8(p) for p in pieces), "byte-level BPE splits some characters across tokens"


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc to count OS threads")
def test_no_threads_are_started_per_call(tiny_llama_gguf: Path) -> None:
    # llama.cpp's compute threads belong to the calling thread and are reused; a backend that spawned a thread
    # per request would oversubscribe the cores (and show up here as a growing count).
    with load(tiny_llama_gguf, threads=2) as m:
        list(m.generate(PROMPT, max_tokens=4, temperature=0))
        before = len(list(Path("/proc/self/task").iterdir()))
        for i in range(5):
            list(m.generate(f"{PROMPT} {i}", max_tokens=4, temperature=0))
            list(m.chat([Message("user", str(i))], max_tokens=2, temperature=0))
            m.classify([PROMPT])
        assert len(list(Path("/proc/self/task").iterdir())) == before


def test_chat_template_fallback_and_template_errors() -> None:
    messages = [Message("user", "hi")]
    assert chat.render(None, messages, bos_token="", eos_token="") == (
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    strict = "{% if messages[0]['role'] != 'system' %}{{ raise_exception('system first') }}{% endif %}"
    with pytest.raises(InvalidInputError, match="system first"):
        chat.render(strict, messages, bos_token="", eos_token="")
    with pytest.raises(InvalidInputError, match="does not compile"):
        chat.render("{% for %}", messages, bos_token="", eos_token="")
    shows = "{{ bos_token }}{{ messages[0]['content'] | tojson }}{{ enable_thinking is defined }}"
    assert chat.render(shows, [Message("user", "é")], bos_token="<s>", eos_token="") == '<s>"é"False'
    assert chat.render(shows, messages, bos_token="", eos_token="", enable_thinking=False).endswith("True")

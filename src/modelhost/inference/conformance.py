"""The conformance kit: contract checks any backend's tests run against a cheap model of its own.

Each check takes a loaded TextModel and raises AssertionError with a message that says what the contract wanted.
A backend's test suite runs them all with one parametrised test:

    @pytest.mark.parametrize("check", conformance.CHECKS, ids=lambda c: c.__name__)
    def test_conformance(model, check):
        check(model)

The checks use greedy decoding and small bounds, so they are fast on a tiny random model and deterministic on a
real one. `check_close` closes the model: run it last or on a model of its own (`run_all` does that).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

from modelhost.inference.model import TextModel
from modelhost.inference.types import BatchResult, ClassifyResult, GenerateMetrics, Message, ModelInfo, Token

PROMPT = "The quick brown fox"
MESSAGES = (Message("user", "Say something short."),)


def check_generate_bounded(model: TextModel) -> None:
    """generate yields Tokens, at most max_tokens of them, and ends cleanly."""
    for bound in (1, 5):
        tokens = list(model.generate(PROMPT, max_tokens=bound, temperature=0))
        assert all(isinstance(t, Token) for t in tokens), "generate must yield Token values"
        assert 1 <= len(tokens) <= bound, f"max_tokens={bound} gave {len(tokens)} tokens"
        assert model.err() is None, f"a clean generation left err()={model.err()!r}"
        m = model.metrics()
        assert m.generated_tokens <= bound, f"metrics report {m.generated_tokens} tokens past max_tokens={bound}"
        if m.generated_tokens == bound:
            assert m.finish_reason == "length", f"hitting max_tokens must finish 'length', got {m.finish_reason!r}"


def check_max_tokens_zero(model: TextModel) -> None:
    """max_tokens=0 generates nothing and says 'length'."""
    assert list(model.generate(PROMPT, max_tokens=0)) == [], "max_tokens=0 must yield nothing"
    assert model.metrics().finish_reason == "length"


def check_chat_produces_tokens(model: TextModel) -> None:
    """chat applies the template and yields tokens whose texts are valid strings."""
    tokens = list(model.chat(MESSAGES, max_tokens=8, temperature=0))
    assert tokens, "chat produced no tokens"
    text = "".join(t.text for t in tokens)
    assert isinstance(text, str)
    text.encode("utf-8")  # raises on lone surrogates: broken UTF-8 must never reach a caller
    assert model.err() is None


def check_greedy_is_deterministic(model: TextModel) -> None:
    """Two greedy runs of the same prompt give the same tokens (the context is reset between calls)."""
    first = [t.id for t in model.generate(PROMPT, max_tokens=8, temperature=0)]
    second = [t.id for t in model.generate(PROMPT, max_tokens=8, temperature=0)]
    assert first == second, f"greedy decoding differed between calls: {first} vs {second}"


def check_metrics_reflect_generation(model: TextModel) -> None:
    """metrics() describes the generation that just finished."""
    tokens = list(model.generate(PROMPT, max_tokens=6, temperature=0))
    m = model.metrics()
    assert isinstance(m, GenerateMetrics)
    assert m.prompt_tokens > 0, "prompt_tokens must count the prompt"
    # Without stop strings nothing is held back, so every generated token is yielded exactly once.
    assert m.generated_tokens == len(tokens), f"generated_tokens={m.generated_tokens} but {len(tokens)} were yielded"
    assert m.total_seconds > 0 and m.prefill_seconds >= 0 and m.decode_seconds >= 0
    assert m.finish_reason in ("stop", "length"), f"unexpected finish_reason {m.finish_reason!r}"


def check_stop_string(model: TextModel) -> None:
    """A stop string taken from the model's own greedy output ends generation before it, and is not shown."""
    text = "".join(t.text for t in model.generate(PROMPT, max_tokens=12, temperature=0))
    stripped = text.strip()
    if len(stripped) < 4:
        return  # the model said too little to cut; nothing to check on this model
    stop = stripped[len(stripped) // 2 : len(stripped) // 2 + 2]
    cut = "".join(t.text for t in model.generate(PROMPT, max_tokens=12, temperature=0, stop=[stop]))
    assert stop not in cut, f"stop string {stop!r} was shown: {cut!r}"
    assert text.startswith(cut), f"stopped text {cut!r} is not a prefix of the full text {text!r}"
    assert model.metrics().finish_reason == "stop"


def check_info_and_type(model: TextModel) -> None:
    """info() and model_type are sane."""
    info = model.info()
    assert isinstance(info, ModelInfo)
    assert isinstance(model.model_type, str) and model.model_type, "model_type must be a non-empty string"
    assert info.architecture, "info().architecture must be set"
    assert info.vocab_size > 0 and info.num_layers > 0 and info.hidden_size > 0, f"info() incomplete: {info}"


def check_classify(model: TextModel) -> None:
    """classify returns one result per prompt; logits only when asked, vocabulary-sized."""
    prompts = ["Hello", "The quick brown fox", "1 2 3"]
    results = model.classify(prompts, temperature=0)
    assert len(results) == len(prompts) and all(isinstance(r, ClassifyResult) for r in results)
    assert all(r.logits is None for r in results), "logits must be off unless asked for"
    with_logits = model.classify(prompts, temperature=0, logits=True)
    vocab = model.info().vocab_size
    for plain, rich in zip(results, with_logits, strict=True):
        assert rich.logits is not None and len(rich.logits) == vocab, "logits must be vocabulary-sized"
        assert plain.token.id == rich.token.id, "asking for logits must not change the greedy choice"
        assert int(rich.logits.argmax()) == rich.token.id, "greedy classify must pick the argmax of its logits"


def check_batch_generate(model: TextModel) -> None:
    """batch_generate returns one result per prompt, each bounded, no errors for good prompts."""
    prompts = ["Hello", "The quick brown fox"]
    results = model.batch_generate(prompts, max_tokens=4, temperature=0)
    assert len(results) == len(prompts) and all(isinstance(r, BatchResult) for r in results)
    for r in results:
        assert r.error is None, f"a good prompt failed in batch: {r.error!r}"
        assert 1 <= len(r.tokens) <= 4


def check_break_stops_generation(model: TextModel) -> None:
    """Breaking out of the loop stops generation, reports 'cancelled', and leaves the model usable."""
    stream = model.generate(PROMPT, max_tokens=64, temperature=0)
    for _ in stream:
        break
    close = getattr(stream, "close", None)
    if close is not None:
        close()
    assert model.metrics().finish_reason == "cancelled", "breaking out must finish 'cancelled'"
    assert model.err() is None, "breaking out is not an error"
    again = list(model.generate(PROMPT, max_tokens=3, temperature=0))
    assert 1 <= len(again) <= 3, "the model must be usable right after an abandoned generation"


def check_cancel_token(model: TextModel) -> None:
    """A set cancel token stops generation within one token."""
    cancel = threading.Event()
    produced = 0
    for _ in model.generate(PROMPT, max_tokens=64, temperature=0, cancel=cancel):
        produced += 1
        cancel.set()
    assert produced == 1, f"generation went on for {produced} tokens after cancel was set"
    assert model.metrics().finish_reason == "cancelled"


def check_invalid_option(model: TextModel) -> None:
    """A bad option is refused with an error naming it, before any work."""
    from modelhost.errors import InvalidOptionError

    for bad in ({"max_tokens": -1}, {"temperature": "hot"}, {"no_such_option": 1}):
        try:
            list(model.generate(PROMPT, **bad))
        except InvalidOptionError as exc:
            assert next(iter(bad)) in str(exc), f"error {exc} does not name the option"
        else:
            raise AssertionError(f"option {bad} was accepted")


def check_embeddings(model: TextModel) -> None:
    """A model with the EmbeddingModel capability keeps its contract (nothing to check on one without it): one
    unit-norm float32 vector per input, the same call the same bits, different texts different vectors, an empty
    input refused by its index, and a greedy generation unchanged by an embedding made before it."""
    import numpy as np

    from modelhost.errors import InvalidInputError
    from modelhost.inference.capabilities import EmbeddingModel, as_capability

    embedder = as_capability(model, EmbeddingModel)
    if embedder is None:
        return
    before = [t.id for t in model.generate(PROMPT, max_tokens=6, temperature=0)]
    texts = ["a cat sat on the mat", "a cat sat on the mat", "stock prices fell sharply"]
    result = embedder.embed(texts)
    vectors = np.asarray(result.vectors)
    assert vectors.shape == (3, embedder.embedding_size()), f"got vectors of shape {vectors.shape}"
    assert vectors.dtype == np.float32, f"vectors must be float32, got {vectors.dtype}"
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4), "vectors must be unit-norm by default"
    # Bit for bit across calls of the same layout; within one batched call a position may round differently.
    again = np.asarray(embedder.embed(texts).vectors)
    assert np.array_equal(vectors, again), "the same texts in the same layout must give the same vectors"
    assert float(vectors[0] @ vectors[1]) > 0.999, "the same text twice in one call gave different vectors"
    assert float(vectors[0] @ vectors[2]) < 0.9999, "different texts gave the same vector"
    assert result.prompt_tokens > 0, "prompt_tokens must count the inputs' tokens"
    try:
        embedder.embed(["fine", ""])
    except InvalidInputError as exc:
        assert "input[1]" in str(exc), f"error {exc} does not name the empty input"
    else:
        raise AssertionError("an empty input was embedded")
    after = [t.id for t in model.generate(PROMPT, max_tokens=6, temperature=0)]
    assert before == after, "an embedding changed the greedy output of the next generation"


#: A small schema every value of which is bounded (a boolean, an enum, at most two booleans), so even a random model
#: ends its answer well inside STRUCTURED_MAX_TOKENS: a grammar guarantees the shape, not that a free string closes.
STRUCTURED_SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "pick": {"enum": ["a", "b", 3, None]},
        "flags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2},
    },
    "required": ["ok", "pick", "flags"],
    "additionalProperties": False,
}
STRUCTURED_MAX_TOKENS = 96


def _follows_structured_schema(value: object) -> bool:
    # By hand rather than with a JSON Schema validator: the kit needs nothing the contract does not.
    if not isinstance(value, dict) or set(value) != {"ok", "pick", "flags"}:
        return False
    flags = value["flags"]
    pick_ok = value["pick"] in ("a", "b", None) or (type(value["pick"]) is int and value["pick"] == 3)
    return (
        isinstance(value["ok"], bool) and pick_ok and isinstance(flags, list) and len(flags) <= 2
        and all(isinstance(f, bool) for f in flags)
    )  # fmt: skip


def check_structured_output(model: TextModel) -> None:
    """A model that takes the `json_schema` option answers, greedily, valid JSON of a small schema, the same twice
    and ending by itself (plain generation and chat); one that cannot refuses the option with InvalidOptionError
    naming `json_schema`, before any work (nothing else to check on it)."""
    import json

    from modelhost.errors import InvalidOptionError

    def answer(run: Callable[..., Iterable[Token]], ask: object) -> str:
        text = "".join(t.text for t in run(ask, json_schema=STRUCTURED_SCHEMA, max_tokens=STRUCTURED_MAX_TOKENS,
                                           temperature=0))  # fmt: skip
        assert model.metrics().finish_reason == "stop", f"a schema answer must end by itself: {text!r}"
        try:
            value = json.loads(text)
        except ValueError:
            raise AssertionError(f"a json_schema answer is not JSON: {text!r}") from None
        assert _follows_structured_schema(value), f"a json_schema answer does not follow the schema: {text!r}"
        return text

    try:
        first = answer(model.generate, PROMPT)
    except InvalidOptionError as exc:
        assert exc.option == "json_schema", f"refusing structured output must name json_schema, not {exc.option!r}"
        return
    assert answer(model.generate, PROMPT) == first, "greedy structured output differed between calls"
    answer(model.chat, MESSAGES)
    assert model.err() is None


def check_close(model: TextModel) -> None:
    """close() is clean and idempotent; the model is a context manager."""
    model.close()
    model.close()


CHECKS: tuple[Callable[[TextModel], None], ...] = (
    check_generate_bounded,
    check_max_tokens_zero,
    check_chat_produces_tokens,
    check_greedy_is_deterministic,
    check_metrics_reflect_generation,
    check_stop_string,
    check_info_and_type,
    check_classify,
    check_batch_generate,
    check_break_stops_generation,
    check_cancel_token,
    check_invalid_option,
    check_embeddings,
    check_structured_output,
)
"""Every check except `check_close`, which ends the model's life."""


def run_all(model: TextModel, checks: Sequence[Callable[[TextModel], None]] = CHECKS) -> None:
    """Run every check, then close the model twice."""
    for check in checks:
        check(model)
    check_close(model)

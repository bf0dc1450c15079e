"""The vllm backend on vLLM's CPU build (`make test-vllm`): both conformance kits, the options that reach vLLM, and
vLLM's engine core in a process of its own, where a release frees the request's cache.

One vLLM engine for the whole module (a load costs tens of seconds and its KV cache stays allocated until close).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from vllm_support import build_tiny_llama, require_vllm

require_vllm()

from modelhost.errors import InvalidInputError, InvalidOptionError  # noqa: E402
from modelhost.inference import conformance, engine_conformance, registry  # noqa: E402
from modelhost.inference.engine import EngineRequest  # noqa: E402
from modelhost.inference.model import TextModel  # noqa: E402
from modelhost.inference.options import GenerateOptions  # noqa: E402

PROMPT = "The quick brown fox"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TextModel]:
    folder = build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
    loaded = registry.load_model(str(folder), backend="vllm", parallel=4)
    try:
        yield loaded
    finally:
        loaded.close()


@pytest.mark.parametrize("check", conformance.CHECKS, ids=lambda c: c.__name__)
def test_the_model_keeps_the_model_contract(model: TextModel, check: Callable[[TextModel], None]) -> None:
    check(model)


@pytest.mark.parametrize("check", engine_conformance.CHECKS, ids=lambda c: c.__name__)
def test_the_engine_keeps_the_engine_contract(
    model: Any, check: Callable[[engine_conformance.EngineKit], None]
) -> None:
    requests = [
        EngineRequest(prompt=p, options=GenerateOptions.parse(max_tokens=6, temperature=0))
        for p in ("Hello", PROMPT, "1 2 3")
    ]
    engine = model.engine()
    # The one-slot reference is the same vLLM engine with one slot: a batch of one, over the same weights.
    check(engine_conformance.EngineKit(engine, requests, single=engine.with_slots(1)))


def _ids(model: TextModel, **opts: Any) -> list[int]:
    return [t.id for t in model.generate(PROMPT, **opts)]


def test_a_seed_makes_sampling_repeatable_and_another_seed_samples_otherwise(model: TextModel) -> None:
    first = _ids(model, max_tokens=16, temperature=1.5, seed=7)
    assert _ids(model, max_tokens=16, temperature=1.5, seed=7) == first
    others = [_ids(model, max_tokens=16, temperature=1.5, seed=s) for s in (8, 9, 10)]
    assert any(o != first for o in others), "three other seeds all sampled the very same 16 tokens"


def test_suppressed_tokens_are_never_drawn(model: TextModel) -> None:
    greedy = _ids(model, max_tokens=8, temperature=0)
    again = _ids(model, max_tokens=8, temperature=0, suppress_tokens=greedy[:1])
    assert greedy[0] not in again, f"token {greedy[0]} was suppressed and drawn anyway: {again}"


def test_a_stop_token_ends_the_answer_unless_min_tokens_holds_it_back(model: TextModel) -> None:
    greedy = _ids(model, max_tokens=8, temperature=0)
    stopped = _ids(model, max_tokens=8, temperature=0, stop_tokens=[greedy[2]])
    assert stopped == greedy[:2] and model.metrics().finish_reason == "stop"
    held = _ids(model, max_tokens=8, temperature=0, stop_tokens=[greedy[0]], min_tokens=5)
    assert len(held) >= 5 and greedy[0] not in held[:5], held


def test_logprobs_give_the_sampled_tokens_and_as_many_alternatives_as_asked(model: TextModel) -> None:
    tokens = list(model.generate(PROMPT, max_tokens=6, temperature=0, logprobs=3))
    for token in tokens:
        assert token.logprob is not None and len(token.logprob.top) == 3
        best = max(a.logprob for a in token.logprob.top)
        assert token.logprob.logprob == pytest.approx(best), "a greedy token is the most likely one"
        assert token.logprob.logprob <= 0.0


def test_what_the_backend_cannot_honour_or_hold_is_refused_naming_it(model: TextModel) -> None:
    with pytest.raises(InvalidOptionError) as refused:
        list(model.generate(PROMPT, max_tokens=4, thinking_budget=8))
    assert refused.value.option == "thinking_budget"
    with pytest.raises(InvalidInputError, match="context holds"):
        list(model.generate(" ".join(["fox"] * 2000), max_tokens=4))
    assert _ids(model, max_tokens=4, temperature=0), "the model serves on after refusals"


def test_an_answer_that_reaches_the_end_of_the_context_ends_length(model: TextModel) -> None:
    context = model.info().context_length
    prompt = "1 2 3 " * 40
    tokens = list(model.generate(prompt, max_tokens=context, min_tokens=context, temperature=0))
    metrics = model.metrics()
    assert metrics.finish_reason == "length"
    assert metrics.prompt_tokens + len(tokens) <= context, "no token past the context"


def test_the_engine_core_runs_apart_and_a_release_frees_the_request_there(model: Any) -> None:
    # The core (vLLM's scheduler and its busy loop) is a child process of this one, not a thread beside the host's.
    assert multiprocessing.active_children(), "vLLM's engine core runs in a process of its own"
    llm = model.loaded.llm
    engine = model.engine()
    room = model.info().context_length - 16  # a stream that runs for hundreds of steps unless it is aborted
    request = EngineRequest(
        prompt=PROMPT, options=GenerateOptions.parse(max_tokens=room, min_tokens=room, temperature=0)
    )
    handle = engine.admit(request).handle
    while not engine.step().outputs.get(handle):  # until its prompt is in the core's cache and it decodes
        pass
    # vLLM's reset_prefix_cache runs in the core and succeeds only when no request holds cache blocks: it is sent
    # after the abort, on the same ordered channel, so it reads the core's state once the abort was taken.
    assert not llm.reset_prefix_cache(), "the decoding request holds blocks in the core"
    assert engine.release(handle) is not None and engine.free_slots() == engine.slots
    assert llm.reset_prefix_cache(), "the release reached the core: the request's blocks are free there"
    assert _ids(model, max_tokens=4, temperature=0), "the model serves on after a release"

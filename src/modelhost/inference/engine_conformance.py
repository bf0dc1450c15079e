"""The engine conformance kit: contract checks any Engine's tests run, beside the model kit (conformance.py).

Each check takes an `EngineKit` (the engine under test, a one-slot engine over the same weights when there is one,
and requests it can serve) and raises AssertionError saying what the contract wanted. A backend's tests run them
all with one parametrised test:

    @pytest.mark.parametrize("check", engine_conformance.CHECKS, ids=lambda c: c.__name__)
    def test_engine_conformance(kit, check):
        check(kit)

`drive` is the one driver the checks (and the backends' own tests) use: the loop every caller of an engine runs
(admit while free, step, collect by handle, release), so no test writes its own copy of it.

The requests are greedy with small bounds, so the checks are fast on a tiny random model and deterministic on a
real one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from modelhost.errors import InvalidOptionError
from modelhost.inference.engine import Engine, EngineOutput, EngineRequest, Handle
from modelhost.inference.options import GenerateOptions
from modelhost.inference.types import FinishReason, Token

#: Steps any check waits for a request to end before calling the engine stuck: far above what its small bounds
#: need (a prefill chunk per step, then one token per step), so only a request that never finishes trips it.
MAX_STEPS = 10_000


@dataclass(slots=True)
class EngineKit:
    """What the checks run on. `requests` are 2 or more greedy requests the engine serves (distinct prompts, a
    bound of a few tokens); `single` is a one-slot engine over the same weights (None: `engine` itself has one
    slot, or there is no second engine), against which outputs at N slots are compared."""

    engine: Engine
    requests: Sequence[EngineRequest]
    single: Engine | None = None
    #: Whether greedy output at N slots equals the one-slot output on this engine's arithmetic (each backend says).
    exact_across_slots: bool = True


@dataclass(slots=True)
class Run:
    """One request's whole life through `drive`: its tokens in order and how it ended."""

    tokens: list[Token] = field(default_factory=list)
    finish_reason: FinishReason | None = None
    error: BaseException | None = None
    outputs: list[EngineOutput] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        """The ids of the tokens."""
        return [t.id for t in self.tokens]

    @property
    def text(self) -> str:
        """The joined text."""
        return "".join(t.text for t in self.tokens)


def drive(
    engine: Engine,
    requests: Sequence[EngineRequest],
    *,
    joins: Mapping[int, int] | None = None,
    on_step: Callable[[int, dict[int, Handle]], None] | None = None,
) -> list[Run]:
    """Run `requests` through `engine` to their ends and return each one's Run, in request order.

    Requests are admitted in order while slots are free; `joins` maps a request's index to the step before which
    it may be admitted (a request joining mid-stream). `on_step(step, live)` is called before each step with the
    live handles by request index (a test releases some there).
    """
    joins = joins or {}
    runs = [Run() for _ in requests]
    waiting = list(range(len(requests)))
    live: dict[int, Handle] = {}
    for step in range(MAX_STEPS):
        for index in list(waiting):
            if engine.free_slots() <= 0:
                break
            if joins.get(index, 0) > step:
                continue
            waiting.remove(index)
            live[index] = engine.admit(requests[index]).handle
        if on_step is not None:
            on_step(step, live)
        if not live and not waiting:
            return runs
        outputs = engine.step().outputs
        by_handle = {h: i for i, h in live.items()}
        for handle, out in outputs.items():
            assert handle in by_handle, f"step returned an output for handle {handle}, which is not live"
            index = by_handle[handle]
            run = runs[index]
            run.outputs.append(out)
            run.tokens.extend(out.tokens)
            if out.finish_reason is not None:
                run.finish_reason, run.error = out.finish_reason, out.error
                del live[index]
    raise AssertionError(f"requests were still running after {MAX_STEPS} steps")


def _with(request: EngineRequest, **opts: Any) -> EngineRequest:
    return replace(request, options=GenerateOptions.parse({**request.options.as_kwargs(), **opts}))


def check_admit_step_release(kit: EngineKit) -> None:
    """A request runs to its end through admit and step; its slot is free again; its handle is then dead."""
    engine = kit.engine
    free = engine.free_slots()
    assert free == engine.slots, f"an idle engine has {free} free slots of {engine.slots}"
    (run,) = drive(engine, kit.requests[:1])
    assert run.finish_reason in ("stop", "length"), f"a clean request ended {run.finish_reason!r} ({run.error!r})"
    assert run.outputs[-1].metrics is not None, "the final output carries the request's metrics"
    assert engine.free_slots() == engine.slots, "a finished request must give its slot back"
    text = run.text
    text.encode("utf-8")  # raises on lone surrogates: broken UTF-8 must never leave an engine
    assert engine.step().outputs == {}, "a step with nothing admitted produces nothing"


def check_handles_are_never_reused(kit: EngineKit) -> None:
    """Every admission gets a new handle, and releasing a finished or unknown handle is harmless (None)."""
    engine = kit.engine
    first = engine.admit(_with(kit.requests[0], max_tokens=1))
    for _ in range(MAX_STEPS):
        out = engine.step().outputs.get(first.handle)
        if out is not None and out.finish_reason is not None:
            break
    assert engine.release(first.handle) is None, "releasing a finished handle must return None"
    second = engine.admit(_with(kit.requests[0], max_tokens=1))
    assert second.handle != first.handle, "a handle was reused: a late release would free the wrong request"
    assert engine.release(second.handle) is not None, "releasing a live handle returns its metrics"
    assert engine.release(second.handle) is None, "releasing a released handle must return None"
    assert engine.release(-12345) is None, "releasing an unknown handle must return None"
    assert engine.free_slots() == engine.slots


def check_refused_request_takes_no_slot(kit: EngineKit) -> None:
    """A request with a bad option raises the option's error at admit and takes no slot."""
    engine = kit.engine
    before = engine.free_slots()
    try:
        engine.admit(_with(kit.requests[0], max_tokens=-1))
    except InvalidOptionError as exc:
        assert exc.option == "max_tokens", f"the error names {exc.option!r}, not max_tokens"
    else:
        raise AssertionError("admit accepted max_tokens=-1")
    assert engine.free_slots() == before, "a refused request took a slot"


def check_max_tokens_zero(kit: EngineKit) -> None:
    """max_tokens=0 finishes "length" with no tokens."""
    (run,) = drive(kit.engine, [_with(kit.requests[0], max_tokens=0)])
    assert run.tokens == [] and run.finish_reason == "length", f"max_tokens=0 gave {run.ids} {run.finish_reason!r}"


def check_release_cancels_within_a_step(kit: EngineKit) -> None:
    """A released request stops: its metrics say "cancelled", it produces nothing more, its slot is free."""
    engine = kit.engine
    # min_tokens holds the stops off, so the request is surely still running when it is released.
    admitted = engine.admit(_with(kit.requests[0], max_tokens=64, min_tokens=64))
    out = None
    for _ in range(MAX_STEPS):
        out = engine.step().outputs.get(admitted.handle)
        if out is not None and (out.tokens or out.finish_reason):
            break
    assert out is not None and out.finish_reason is None, f"the request ended before it could be released: {out}"
    metrics = engine.release(admitted.handle)
    assert metrics is not None and metrics.finish_reason == "cancelled", f"release gave {metrics!r}"
    for _ in range(3):
        assert admitted.handle not in engine.step().outputs, "a released request produced output"
    assert engine.free_slots() == engine.slots, "a released request must give its slot back"


def check_greedy_equal_across_slots(kit: EngineKit) -> None:
    """Each request's greedy output is the same alone (one slot) as beside the others (N slots)."""
    if kit.single is None or not kit.exact_across_slots:
        return
    alone = [drive(kit.single, [r])[0].ids for r in kit.requests]
    together = [run.ids for run in drive(kit.engine, kit.requests)]
    assert together == alone, f"greedy output changed with company: {together} vs alone {alone}"


def check_join_mid_stream(kit: EngineKit) -> None:
    """A request admitted while another is decoding gets the tokens it gets alone, and so does the other."""
    if kit.engine.slots < 2 or not kit.exact_across_slots:
        return
    first, second = kit.requests[0], kit.requests[1]
    reference = kit.single or kit.engine
    alone = [drive(reference, [r])[0].ids for r in (first, second)]
    runs = drive(kit.engine, [first, second], joins={1: 2})
    assert [r.ids for r in runs] == alone, f"joining mid-stream changed the outputs: {[r.ids for r in runs]} vs {alone}"


CHECKS: tuple[Callable[[EngineKit], None], ...] = (
    check_admit_step_release,
    check_handles_are_never_reused,
    check_refused_request_takes_no_slot,
    check_max_tokens_zero,
    check_release_cancels_within_a_step,
    check_greedy_equal_across_slots,
    check_join_mid_stream,
)

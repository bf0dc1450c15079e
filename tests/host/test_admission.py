"""The host's Admission (issue 37 item 1): a request checked once by `precheck`, submitted once per choice.

On a stand-in model (`ScriptedModel`, served through the host's one-slot engine), so these pin the host's own rules:
what the admission holds, how the choices of one admission differ (only in their seed), that submitting it checks
nothing again, and where it is checked anew (an admission made while the host was not serving, or for an engine the
host no longer has). Counting parses and template renders through a real door on a real model is
tests/http/test_parsed_once_e2e.py's.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from modelhost.errors import InvalidOptionError
from modelhost.host import Admission, Done, GenerationRequest, Host
from modelhost.inference.options import GenerateOptions
from modelhost.testing.counting import Calls
from modelhost.testing.standins import ScriptedModel


async def started_host() -> Host:
    host = Host.from_model(ScriptedModel(), name="scripted")
    await host.start()
    return host


def test_an_admission_holds_the_parsed_options_and_its_choices_differ_only_in_their_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        host = await started_host()
        parses = Calls(monkeypatch, GenerateOptions, "parse")
        admission = await host.precheck(GenerationRequest(prompt="p", options={"max_tokens": 2, "seed": 7}), n=3)
        assert admission.n == 3 and admission.adapter is None
        assert isinstance(admission.options, GenerateOptions) and admission.options.max_tokens == 2
        streams = [host.submit(admission, i) for i in range(3)]
        assert [s.engine_request.options.seed for s in streams] == [7, 8, 9]
        assert {s.engine_request.options.max_tokens for s in streams} == {2}
        for stream in streams:
            events = [e async for e in stream]
            assert isinstance(events[-1], Done) and events[-1].completion_tokens == 2
        # Precheck parsed once, on its worker thread, for all three choices: the host's one parse, which the
        # stand-in's own check_options is handed (a model whose engine prepares nothing ahead checks the options
        # itself, parsed); submit, on this thread, parsed nothing. (The stand-in's generate() parses its keywords on
        # the model thread: its contract.)
        assert len([t for t in parses.threads if t.startswith("asyncio")]) == 1
        assert threading.current_thread().name not in parses.threads
        await host.aclose()

    asyncio.run(main())


def test_a_seed_at_the_top_of_its_range_wraps_for_the_next_choice() -> None:
    async def main() -> None:
        host = await started_host()
        top = (1 << 64) - 1
        admission = await host.precheck(GenerationRequest(prompt="p", options={"max_tokens": 1, "seed": top}), n=2)
        assert [admission.choice(i).options.seed for i in (0, 1)] == [top, 0]
        unseeded = await host.precheck(GenerationRequest(prompt="p", options={"max_tokens": 1}), n=2)
        assert unseeded.choice(1) is unseeded.choice(0)  # nothing to vary: the very same engine request
        with pytest.raises(ValueError):
            unseeded.choice(2)
        with pytest.raises(ValueError):
            await host.precheck(GenerationRequest(prompt="p"), n=0)
        await host.aclose()

    asyncio.run(main())


def test_a_refused_request_is_refused_at_precheck_and_counted_once() -> None:
    async def main() -> None:
        host = await started_host()
        with pytest.raises(InvalidOptionError, match="max_tokens"):
            await host.precheck(GenerationRequest(prompt="p", options={"max_tokens": -1}), n=2)
        assert host.metrics.requests_rejected.labels(host.name, "invalid_option")._value.get() == 1
        assert host.waiting == 0
        await host.aclose()

    asyncio.run(main())


def test_an_admission_not_checked_by_this_host_is_checked_at_submit() -> None:
    async def main() -> None:
        host = await started_host()
        bad = GenerationRequest(prompt="p", options={"max_tokens": -1})
        with pytest.raises(InvalidOptionError):  # made while no host served it: nothing was checked
            host.submit(Admission(bad))
        other = await started_host()
        foreign = await other.precheck(GenerationRequest(prompt="p", options={"max_tokens": 1}))
        stream = host.submit(foreign)  # another engine's admission: this host checks the request itself
        assert stream.engine_request is not foreign.engine_request
        events = [e async for e in stream]
        assert isinstance(events[-1], Done)
        await other.aclose()
        await host.aclose()

    asyncio.run(main())


def test_request_params_n_counts_each_request_once() -> None:
    async def main() -> None:
        host = await started_host()
        admission = await host.precheck(GenerationRequest(prompt="p", options={"max_tokens": 1}), n=2)
        for i in range(2):
            [e async for e in host.submit(admission, i)]
        [e async for e in host.submit(GenerationRequest(prompt="p", options={"max_tokens": 1}))]
        histogram = host.metrics.request_params_n.labels(host.name)
        assert histogram._sum.get() == 2 + 1  # two requests (n=2 and n=1), three choices
        await host.aclose()

    asyncio.run(main())

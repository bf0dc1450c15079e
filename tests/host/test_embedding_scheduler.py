"""The scheduler's embedding path: an embedding runs on the model thread between two tokens of a generation (never
behind it), shares the queue bound, can be cancelled while queued, and is refused up front when it cannot run.

Generation is a ScriptedModel held at a gate, so the test decides exactly where the generation stands; the vectors
come from the real tiny Llama GGUF through llama.cpp (a model here is both: the script's generation and the GGUF's
EmbeddingModel capability).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llama_cpp")

from modelhost.backends.llama_cpp import LlamaCppBackend
from modelhost.errors import (
    EmbeddingUnsupportedError,
    InvalidInputError,
    InvalidOptionError,
    ModelHostError,
    QueueFullError,
)
from modelhost.host import Done, EmbeddingTicket, GenerationRequest, Host
from modelhost.inference.types import EmbeddingResult
from modelhost.testing.standins import ScriptedModel

#: A safety net so a broken scheduler fails the test instead of hanging it; no assertion depends on it.
PATIENCE = 60


class EmbeddingScripted(ScriptedModel):
    """A scripted generation (held at the test's gate) that embeds with a real llama.cpp model."""

    def __init__(self, embedder: Any, **kw: Any) -> None:
        super().__init__(**kw)
        self.embedder = embedder
        self.embedded: list[list[str]] = []

    def embedding_size(self) -> int:
        return int(self.embedder.embedding_size())

    def embed(self, texts: Sequence[str], *, normalize: bool = True, truncate: bool = False) -> EmbeddingResult:
        self.embedded.append(list(texts))
        return self.embedder.embed(texts, normalize=normalize, truncate=truncate)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def gguf(tiny_llama_gguf: Path) -> Iterator[Any]:
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, context_length=64) as model:
        yield model


async def started(model: ScriptedModel, max_queue: int = 4) -> Host:
    host = Host.from_model(model, name="paced", max_queue=max_queue)
    await host.start()
    return host


async def until(flag: threading.Event) -> None:
    await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, flag.wait), PATIENCE)


def test_embedding_runs_between_two_tokens_of_a_held_generation(gguf: Any) -> None:
    async def main() -> None:
        gate = threading.Semaphore(0)
        model = EmbeddingScripted(gguf, gate=gate)
        host = await started(model)
        stream = host.submit(GenerationRequest(prompt="p", options={"max_tokens": 50}))
        await until(model.started)  # the generation holds the model thread, waiting for its first token
        ticket = host.submit_embedding(["one text", "another text"])
        assert host.waiting == 1 and host.running == 1
        gate.release()  # one token: the embedding runs right after it, before the second token
        result = await asyncio.wait_for(ticket.result(), PATIENCE)
        assert result.vectors.shape == (2, gguf.embedding_size())
        assert np.array_equal(result.vectors, gguf.embed(["one text", "another text"]).vectors)
        assert host.running == 1, "the generation is still running: the embedding did not wait for it"
        for _ in range(60):
            gate.release()
        events = [e async for e in stream]
        assert isinstance(events[-1], Done) and events[-1].finish_reason == "length"
        assert events[-1].completion_tokens == 50
        await host.aclose()

    asyncio.run(main())


def test_an_idle_model_embeds_next_and_the_queue_bound_counts_embeddings(gguf: Any) -> None:
    async def main() -> None:
        gate = threading.Semaphore(0)
        model = EmbeddingScripted(gguf, gate=gate)
        host = await started(model, max_queue=1)
        result = await host.embed(["idle model"])
        assert result.vectors.shape[0] == 1 and result.prompt_tokens > 0
        running = host.submit(GenerationRequest(prompt="p", options={"max_tokens": 2}))
        await until(model.started)
        queued = host.submit(GenerationRequest(prompt="q", options={"max_tokens": 2}))
        with pytest.raises(QueueFullError):
            host.submit_embedding(["no room"])
        for _ in range(10):
            gate.release()
        for stream in (running, queued):
            assert isinstance([e async for e in stream][-1], Done)
        metrics = host.metrics.registry
        assert metrics.get_sample_value("modelhost_embedding_inputs_total", {"model_name": "paced"}) == 1
        await host.aclose()

    asyncio.run(main())


def test_a_cancelled_ticket_is_never_computed(gguf: Any) -> None:
    async def main() -> None:
        gate = threading.Semaphore(0)
        model = EmbeddingScripted(gguf, gate=gate)
        host = await started(model)
        stream = host.submit(GenerationRequest(prompt="p", options={"max_tokens": 3}))
        await until(model.started)
        ticket = host.submit_embedding(["never"])
        ticket.cancel()
        assert host.waiting == 0
        with pytest.raises(ModelHostError) as caught:
            await ticket.result()
        assert caught.value.code == "cancelled"
        for _ in range(10):
            gate.release()
        [e async for e in stream]
        assert model.embedded == []
        await host.aclose()

    asyncio.run(main())


def test_refused_before_queueing_or_by_the_model(gguf: Any) -> None:
    async def main() -> None:
        plain = await started(ScriptedModel())
        with pytest.raises(EmbeddingUnsupportedError) as caught:
            plain.submit_embedding(["x"])
        assert caught.value.code == "embeddings_unsupported"
        await plain.aclose()

        host = await started(EmbeddingScripted(gguf))
        with pytest.raises(InvalidInputError, match="empty"):
            host.submit_embedding([])
        with pytest.raises(InvalidInputError, match=r"input\[1\]"):
            host.submit_embedding(["ok", ""])
        with pytest.raises(InvalidOptionError) as option:
            host.submit_embedding(["ok"], dimensions=3)
        assert option.value.option == "dimensions"
        assert host.waiting == 0
        # Too long is the model's to find (it tokenises): the ticket's result raises it, naming the input.
        ticket = host.submit_embedding(["short", "fox " * 200])
        with pytest.raises(InvalidInputError, match=r"input\[1\]"):
            await ticket.result()
        await host.aclose()

    asyncio.run(main())


#: About 950 tokens of the tiny vocabulary: many embedding steps (CHUNK tokens each), within LONG_CONTEXT.
LONG_TEXT = " ".join(f"word{i % 37} and" for i in range(200))
LONG_CONTEXT = 1024


class HeldSteps:
    """Holds a real model's embedding jobs between their steps: each step first takes one release of `gate`, and a
    step without one does nothing (the job yields its turn, and the host's loop moves on to its other work).
    `ran` has one entry per step that ran: whether it was the last."""

    def __init__(self, model: Any) -> None:
        self.gate = threading.Semaphore(0)
        self.ran: list[bool] = []
        self.closed = 0
        make = model.embedding_job
        model.embedding_job = lambda texts, **opts: _Held(self, make(texts, **opts))

    async def two_steps_in(self, model: Any) -> tuple[Host, EmbeddingTicket]:
        """A host over `model` whose embedding of LONG_TEXT has run two steps (the input tokenized, its first chunk
        decoded) and is held there."""
        host = Host.from_model(model, name="tiny")
        await host.start()
        ticket = host.submit_embedding([LONG_TEXT])
        self.gate.release()
        self.gate.release()

        async def wait() -> None:
            while len(self.ran) < 2:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(wait(), PATIENCE)
        return host, ticket


class _Held:
    def __init__(self, held: HeldSteps, job: Any) -> None:
        self.held = held
        self.job = job

    def step(self) -> EmbeddingResult | None:
        if not self.held.gate.acquire(timeout=0.01):
            return None
        result = self.job.step()
        self.held.ran.append(result is not None)
        return result  # type: ignore[no-any-return]

    def close(self) -> None:
        self.held.closed += 1
        self.job.close()


def test_a_chat_beside_a_long_embedding_is_answered_between_its_steps(tiny_llama_gguf: Path) -> None:
    """A real llama.cpp model embeds a long input in steps (ChunkedEmbedding); a 4-token chat submitted after the
    embedding started gets all its tokens while the embedding is still mid-way, not after it (issue 35: a 4-token
    chat waited 275 s behind one 4,096-token decode)."""
    from modelhost.backends.llama_cpp.embedding import CHUNK

    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, context_length=LONG_CONTEXT) as model:
        held = HeldSteps(model)

        async def main() -> EmbeddingResult:
            host, ticket = await held.two_steps_in(model)
            request = GenerationRequest(prompt="hello", options={"max_tokens": 4, "temperature": 0})
            events = [e async for e in host.generate(request)]
            assert isinstance(events[-1], Done) and events[-1].completion_tokens == 4
            assert held.ran == [False, False] and host.running == 1, "the chat waited for the embedding to finish"
            for _ in range(64):
                held.gate.release()
            result = await asyncio.wait_for(ticket.result(), PATIENCE)
            assert len(held.ran) >= 1 + result.prompt_tokens // CHUNK and held.ran[-1]
            await host.aclose()
            return result

        result = asyncio.run(main())
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, context_length=LONG_CONTEXT) as again:
        assert np.array_equal(result.vectors, again.embed([LONG_TEXT]).vectors)  # the chat changed nothing in it


def test_a_cancelled_embedding_stops_between_two_steps(tiny_llama_gguf: Path) -> None:
    """Cancelling a ticket whose embedding is mid-way ends it before its next step: its result is "cancelled", its
    job is closed, and the next embedding on the same model is the one a fresh model gives."""
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, context_length=LONG_CONTEXT) as model:
        held = HeldSteps(model)

        async def main() -> EmbeddingResult:
            host, ticket = await held.two_steps_in(model)
            ticket.cancel()
            with pytest.raises(ModelHostError) as caught:
                await asyncio.wait_for(ticket.result(), PATIENCE)
            assert caught.value.code == "cancelled"
            assert held.ran == [False, False] and held.closed == 1, "the cancelled embedding kept stepping"
            for _ in range(64):
                held.gate.release()
            after = await asyncio.wait_for(host.embed(["one text", "another text"]), PATIENCE)
            await host.aclose()
            return after

        after = asyncio.run(main())
    with LlamaCppBackend().load_model(str(tiny_llama_gguf), threads=1, context_length=LONG_CONTEXT) as fresh:
        assert np.array_equal(after.vectors, fresh.embed(["one text", "another text"]).vectors)

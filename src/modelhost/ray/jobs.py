"""A worker's `"ray": true` jobs on a Ray cluster (`modelhost serve --worker ... --ray ADDRESS`): `ClusterJobs`
is the worker's `Cluster` (modelhost.worker.registry), running `document.convert` over the same actor pool of
document engines `convert --ray` uses (modelhost.ray.documents) and `text.embed` over a pool of embedders
(modelhost.ray.embeddings).

Ray Data is driven synchronously, so each job's run takes a thread of its own (never the event loop's default
executor, whose few threads a handful of long jobs would hold, starving every other `to_thread` of the worker,
their own cancels included); its progress comes back to the event loop as it happens. A cancelled job (the asyncio
task running it is cancelled: DELETE, or the worker stopping) stops its run, and its call ends only once the run's
actors are killed: what a cancelled job held on the cluster is free when it reports itself cancelled.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any, TypeVar

from modelhost.documents import Conversion
from modelhost.documents.settings import ConvertSettings
from modelhost.errors import ModelHostError
from modelhost.host.models import ModelSpec
from modelhost.inference.types import EmbeddingResult
from modelhost.jobs.documents import PageDone, Started
from modelhost.ray import documents, embeddings
from modelhost.ray.cluster import ClusterError, connect
from modelhost.ray.pages import ReadSettings
from modelhost.ray.pool import Pool, Stop, StopRequested

T = TypeVar("T")

#: Chunks of vectors a job's run may have read ahead of the job's writing them (each at most `chunk` vectors): the
#: run waits beyond it, so a slow disk bounds the memory the run holds, not the cluster's pace.
READ_AHEAD = 64

_END = object()


class ClusterJobs:
    """The worker's Cluster (worker.registry) on the Ray cluster at `address` (joined here, blocking: construct it
    before serving), each job's run on a pool of `pool.actors` actors."""

    def __init__(self, address: str, pool: Pool | None = None) -> None:
        self.address = address
        self.pool = pool or Pool()
        connect(address)

    async def convert_document(
        self,
        path: Path,
        spec: ModelSpec,
        name: str,
        settings: ConvertSettings,
        on_start: Started,
        on_page: PageDone,
    ) -> Conversion:
        """The document as `documents.convert` makes it, its pages read on the pool (ClusterDocuments)."""
        read = ReadSettings(spec.path or spec.name, spec.name, convert=settings, loader=spec.loader)
        loop = asyncio.get_running_loop()
        hooks = {"on_start": _on_loop(loop, on_start), "on_page": _on_loop(loop, on_page)}

        def run(stop: Stop) -> Conversion:
            convert = documents.convert_document
            return convert(self.address, path, read, name=name, pool=self.pool, stop=stop, **hooks)

        stop = Stop()
        done = _thread(loop, lambda: self._translated(run, stop), "modelhost-ray-convert")
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            await _stopped(loop, stop, done)
            raise

    async def embed_texts(
        self, texts: list[str], spec: ModelSpec, *, normalize: bool, truncate: bool, chunk: int
    ) -> AsyncGenerator[tuple[int, EmbeddingResult], None]:
        """Every call's vectors, in order, made on the pool's actors (ClusterEmbeddings)."""
        settings = embeddings.EmbedSettings(spec.loader, spec.name, normalize, truncate, chunk)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        room = threading.Semaphore(READ_AHEAD)
        stop = Stop()

        def run(stop: Stop) -> None:
            for item in embeddings.embed_texts(self.address, texts, settings, pool=self.pool, stop=stop):
                while not room.acquire(timeout=1.0):
                    if stop.is_set:
                        return
                loop.call_soon_threadsafe(queue.put_nowait, item)

        done = _thread(loop, lambda: self._translated(run, stop), "modelhost-ray-embed")
        done.add_done_callback(lambda _: queue.put_nowait(_END))
        try:
            while (item := await queue.get()) is not _END:
                room.release()
                yield item
            await done  # the run's end: its error, if it failed
        except (asyncio.CancelledError, GeneratorExit):
            await _stopped(loop, stop, done)
            raise

    def _translated(self, run: Callable[[Stop], T], stop: Stop) -> T:
        """`run(stop)` with Ray's own failures (an actor that cannot start, a piece lost every time) as one
        ClusterError naming the cluster; a model's or a document's errors are left as they are."""
        try:
            return run(stop)
        except (ModelHostError, StopRequested):
            raise
        except Exception as exc:
            first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
            raise ClusterError(f"the Ray cluster at {self.address} failed the job: {first}") from exc


def _on_loop(loop: asyncio.AbstractEventLoop, call: Callable[..., None]) -> Callable[..., None]:
    """`call`, made from the run's thread, run on the event loop (in the order made)."""

    def later(*args: Any) -> None:
        loop.call_soon_threadsafe(call, *args)

    return later


def _thread(loop: asyncio.AbstractEventLoop, work: Callable[[], T], name: str) -> asyncio.Future[T]:
    """`work()` on a new thread; its result (or error) as a future of `loop`."""
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def main() -> None:
        try:
            result = work()
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=main, name=name, daemon=True).start()
    return future


async def _stopped(loop: asyncio.AbstractEventLoop, stop: Stop, done: asyncio.Future[Any]) -> None:
    """Stop a run and wait until its thread has ended (its actors killed), whatever it ended with."""
    await _thread(loop, stop.set, "modelhost-ray-stop")
    await asyncio.wait([done])
    if not done.cancelled():
        done.exception()  # retrieved: a stopped run's error is no news


__all__ = ["READ_AHEAD", "ClusterJobs"]

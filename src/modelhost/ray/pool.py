"""The actor pools of modelhost's Ray Data runs (`convert --ray` and a worker's `"ray": true` jobs): one place that
sets Ray Data up, maps rows over a pool of actors in order, and stops a run on request.

Each row goes to one actor of the pool (`batch_size=1`), each actor built once with `kwargs` (its engine and model
loaded once for its life) and placed SPREAD over the nodes; rows come back in their input order. An actor that dies
(its process killed, its node lost) is restarted by Ray and its row tried again, `retries` times.

A run is stopped with `Stop.set()` from any thread (a cancelled job): the stream ends, and the pool's actors are
killed at once, not left to finish the rows they hold, so their CPUs, memory and model are free again when `set`
returns. Ray Data has no public call that stops an execution from another thread (its iterator is closed only by the
thread iterating it, which is blocked waiting for the next row); the one hook it gives is an execution callback
(`DataContext.custom_execution_callback_classes`, the same classes its RAY_DATA_EXECUTION_CALLBACKS variable takes),
which hands over the execution's executor before it starts and is called at each of its scheduling steps: `Stop`
keeps the executor and shuts it down, forced (at the first step, for a stop that came while it was starting). Those
are Ray Data's internals, reached only through `raydata` (which says why, and which ray release they were read from).
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from modelhost.ray.raydata import ExecutionCallback, add_execution_callback, shut_down

#: The iterating thread's Stop, for the execution callback (which Ray Data builds itself, with no arguments, on the
#: thread that starts the execution: the one iterating the rows).
_current = threading.local()
#: Ray Data's settings are read from the process's current DataContext when a dataset is made: the settings and the
#: dataset are made under this lock, so two runs of one process (two jobs of a worker) never see each other's.
_context_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Pool:
    """An actor pool's size: `actors` actors, each reserving `num_cpus` and `num_gpus` of a node."""

    actors: int = 2
    num_cpus: float = 1.0
    num_gpus: float = 0.0


class StopRequested(Exception):
    """The run was stopped: what a caller that returns a result raises instead (modelhost.ray.documents)."""


class Stop:
    """A run's stop, settable from any thread; `set()` returns once the run's actors are killed, or (set while its
    execution is still starting) once the execution's first scheduling step will kill them."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._executor: Any = None

    @property
    def is_set(self) -> bool:
        """Whether the run was asked to stop."""
        return self._event.is_set()

    def set(self) -> None:
        """Stop the run: its stream ends and its actors are killed (blocking: Ray joins the execution's scheduling
        thread, at most 2 s, and kills each actor)."""
        with self._lock:
            self._event.set()
            executor = self._executor
        if executor is not None:
            shut_down(executor)  # a no-op on an execution not started yet: _StopCallback sees to that one

    def attach(self, executor: Any) -> None:
        """Keep the executor of the run's execution (given by Ray Data's callback as it starts)."""
        with self._lock:
            self._executor = executor


class _StopCallback(ExecutionCallback):  # type: ignore[misc]  # Ray Data's own class, unannotated
    """Hands each execution's executor to the Stop of the thread that starts it (none: nothing to do), and applies
    a stop that came while the execution was starting at its first scheduling step. Ray Data creates an operator's
    actors before the execution counts as started, and shuts down nothing before then: a stop in that window would
    otherwise leave the actors placed, and never killed."""

    def __init__(self) -> None:
        self.stop: Stop | None = None
        self.applied = False

    def before_execution_starts(self, executor: Any) -> None:
        self.stop = getattr(_current, "stop", None)
        if self.stop is not None:
            self.stop.attach(executor)

    def on_execution_step(self, executor: Any) -> None:
        if self.stop is not None and self.stop.is_set and not self.applied:
            self.applied = True
            # This is the execution's scheduling thread, which shutdown() joins: the shutdown goes on one of its own.
            threading.Thread(target=shut_down, args=(executor,), name="modelhost-ray-stop", daemon=True).start()


def stream(
    rows: list[dict[str, Any]],
    actor: type,
    kwargs: dict[str, Any],
    pool: Pool,
    *,
    retries: int,
    errored_rows: int,
    stop: Stop | None = None,
) -> Iterator[dict[str, Any]]:
    """Each row's answer from an actor of `pool` (`actor(**kwargs)`), in the order of `rows`. Up to `errored_rows`
    rows whose actor died `retries` times are skipped (never yielded) rather than failing the run; one more fails
    it. Ends early, quietly, once `stop` is set."""
    import ray.data

    with _context_lock:
        context = ray.data.DataContext.get_current()
        # Row order is kept only when asked (Ray Data finishes blocks in any order otherwise).
        context.execution_options.preserve_order = True
        # The CLI draws its own progress bar on stderr, and a worker reports progress in its jobs: Ray Data's bar
        # would draw through either.
        context.enable_progress_bars = False
        context.max_errored_blocks = errored_rows
        add_execution_callback(context, _StopCallback)
        logging.getLogger("ray.data").setLevel(logging.WARNING)  # its "starting execution" lines, likewise
        dataset = ray.data.from_items(rows, override_num_blocks=len(rows))
        with warnings.catch_warnings():
            # max_restarts and max_task_retries still go as "ray_remote_args", which Ray 2.60 calls deprecated (until
            # 2.64) with no named parameter to take their place yet: the warning would be the CLI's every run.
            warnings.simplefilter("ignore", DeprecationWarning)
            results = dataset.map_batches(
                actor,
                fn_constructor_kwargs=kwargs,
                batch_size=1,
                compute=ray.data.ActorPoolStrategy(size=max(1, pool.actors)),
                num_cpus=pool.num_cpus,
                num_gpus=pool.num_gpus,
                # One actor per node before two on any: each node's CPUs and memory do the work, and losing a node
                # loses as few actors as can be.
                scheduling_strategy="SPREAD",
                # Actors come back after a death (a killed process, a lost node) and their row is retried, boundedly,
                # so a row that kills its actor every time ends skipped (or failing the run) instead of looping.
                max_restarts=-1,
                max_task_retries=retries,
            )
    if stop is not None and stop.is_set:
        return
    _current.stop = stop
    try:
        for row in results.iter_rows():
            if stop is not None and stop.is_set:
                return
            yield row
    except Exception:
        if stop is not None and stop.is_set:
            return  # the killed actors' rows fail as the stop ends the run: the stop is the news, not them
        raise
    finally:
        _current.stop = None


__all__ = ["Pool", "Stop", "StopRequested", "stream"]

"""Ray Data's names the actor pools use beyond its public API, and the only module that reaches them.

Stopping a run from another thread (pool.Stop) needs the running execution's executor, which Ray Data hands over
only to an execution callback: a subclass of `ray.data._internal.execution.execution_callback.ExecutionCallback`,
listed in the DataContext's `custom_execution_callback_classes`, and the executor's `shutdown(force=True)`. None of
them is public API, so any minor release may move them. They are reached here and nowhere else; pyproject.toml
bounds ray to the minor release they were read from (`ray[serve,data]>=2.60,<2.61`), and a release that moved one
fails here, naming the installed version, rather than in the middle of a job.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

#: The ray release these names were read from (pyproject.toml's bounds: this minor release and its patches).
READ_FROM = "2.60"
#: What to install when they are missing.
INSTALL = f"pip install 'ray[serve,data]>={READ_FROM},<2.61'"


def _version() -> str:
    try:
        return version("ray")
    except PackageNotFoundError:  # ray importable without its metadata (a source checkout)
        return "(unknown version)"


try:
    from ray.data._internal.execution.execution_callback import ExecutionCallback
except ImportError as exc:  # a ray release that moved it
    raise ImportError(
        f"ray {_version()} has no ray.data._internal.execution.execution_callback.ExecutionCallback, which stopping "
        f"a Ray Data run needs (read from ray {READ_FROM}; install that release: {INSTALL})"
    ) from exc


def add_execution_callback(context: Any, callback: type) -> None:
    """Have every execution started under `context` (a ray.data.DataContext) build a `callback` (an
    ExecutionCallback subclass, built with no arguments) and call it as it starts and at each scheduling step."""
    classes = getattr(context, "custom_execution_callback_classes", None)
    if not isinstance(classes, list):
        raise RuntimeError(
            f"ray {_version()}'s DataContext has no custom_execution_callback_classes, which stopping a Ray Data run "
            f"needs (read from ray {READ_FROM}; install that release: {INSTALL})"
        )
    if callback not in classes:
        classes.append(callback)


def shut_down(executor: Any) -> None:
    """End a running execution now (the executor an ExecutionCallback was handed): its stream ends and its actors
    are killed, not left to finish the rows they hold. Blocking: Ray joins the execution's scheduling thread (at
    most 2 s) and kills each actor."""
    executor.shutdown(force=True)


__all__ = ["READ_FROM", "ExecutionCallback", "add_execution_callback", "shut_down"]

"""Counting the calls of a function through a real door: how a test pins that work is done once per request.

`Calls` patches an attribute (a module's function, or a class's method or classmethod) with a wrapper that counts each
call and the thread it came from, then calls the original. Used with pytest's `monkeypatch`, so the patch is undone
at the test's end; the counts are kept under a lock, since doors, worker threads and the model thread all call in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol


class Patcher(Protocol):
    """What `Calls` needs of pytest's `monkeypatch` fixture."""

    def setattr(self, target: Any, name: str, value: Any) -> None: ...


class Calls:
    """The calls of `owner.name` from now on (until the patcher undoes its patch): `count`, and `threads`, the name
    of the thread of each call in order. `reset()` starts counting again from zero."""

    def __init__(self, patcher: Patcher, owner: Any, name: str) -> None:
        self._lock = threading.Lock()
        self.threads: list[str] = []
        raw = owner.__dict__.get(name) if isinstance(owner, type) else None
        if isinstance(raw, classmethod):
            original: Callable[..., Any] = raw.__func__

            def counted_classmethod(cls: Any, *args: Any, **kwargs: Any) -> Any:
                self._seen()
                return original(cls, *args, **kwargs)

            patched: Any = classmethod(counted_classmethod)
        else:
            function = getattr(owner, name)

            def counted(*args: Any, **kwargs: Any) -> Any:
                self._seen()
                return function(*args, **kwargs)

            patched = counted
        patcher.setattr(owner, name, patched)

    @property
    def count(self) -> int:
        """Calls since the patch (or the last `reset()`)."""
        with self._lock:
            return len(self.threads)

    def reset(self) -> None:
        """Count from zero again."""
        with self._lock:
            self.threads.clear()

    def _seen(self) -> None:
        with self._lock:
            self.threads.append(threading.current_thread().name)

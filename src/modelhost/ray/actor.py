"""What modelhost's Ray Data actors share: a model host driven from an event loop of the actor's own.

Ray Data calls an actor synchronously, from its own thread; the host (and the document engine) is asyncio. So each
actor runs one event loop on one long-lived thread for its life, and every call is a coroutine run there: the model
is driven from one thread, as the host wants it, whichever Ray thread called.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from modelhost.host import Host

T = TypeVar("T")


class HostActor:
    """An actor's event loop thread and its model host (`host`, set by the subclass)."""

    host: Host

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the actor's loop and return its result (blocking the calling thread)."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result()

    def __del__(self) -> None:
        # Ray ends an actor's process when the pool shuts down; closing the host first ends its model thread cleanly.
        try:
            self.run(self.host.aclose())
            self.loop.call_soon_threadsafe(self.loop.stop)
        except Exception:
            pass

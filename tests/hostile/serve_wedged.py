"""`modelhost serve --http` whose model wedges its thread on the first token, for the stop test:
`python serve_wedged.py`. The stand-in's gate is never released, so its thread waits deaf to every cancel, as a
model thread inside a long C call does (issue 25: one masked grammar step of minutes). Grace is one second."""

from __future__ import annotations

import threading
from typing import Any

from modelhost import serve as serving
from modelhost.testing.standins import ScriptedModel

#: Never released: the first token of the first request waits for ever.
GATE = threading.Semaphore(0)


def load(*args: Any, **kwargs: Any) -> ScriptedModel:
    return ScriptedModel(gate=GATE)


if __name__ == "__main__":
    serving.catalogue.resolve = lambda model: model  # type: ignore[assignment]
    serving.registry.load_model = load  # type: ignore[assignment]
    serving.run(serving.ServeConfig(model="wedged", http=("127.0.0.1", 0), grace_seconds=1.0))

"""peft's mixed batch in the transformers engine: rows of the base and of two adapters in the same forward passes
each get exactly what they get alone (so an adapter applies to its own rows only), and loading adapters leaves
what the plain module computes, the embeddings, as it was."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from modelhost.inference import load_model
from modelhost.inference.engine import EngineRequest
from modelhost.inference.engine_conformance import drive
from modelhost.inference.types import Message

pytest.importorskip("peft")


def chat(question: str, adapter: str | None) -> EngineRequest:
    # min_tokens: every answer runs its whole length, so the rows share many decode steps.
    options = {"max_tokens": 16, "min_tokens": 16, "temperature": 0}
    return EngineRequest(messages=(Message("user", question),), options=options, adapter=adapter)


def test_mixed_rows_answer_as_alone_and_the_plain_module_stays_the_base(trained_adapters: Any) -> None:
    with load_model(str(trained_adapters.base), backend="transformers", parallel=4) as model:
        engine = model.engine()  # type: ignore[attr-defined]
        before = model.embed(["a sentence to embed"]).vectors  # type: ignore[attr-defined]
        for word, folder in trained_adapters.folders.items():
            engine.load_adapter(word.lower(), str(folder))
        question = trained_adapters.question
        names = [None, "pineapple", "marmalade", None]
        alone = [drive(engine, [chat(question, name)])[0].ids for name in names]
        together = [run.ids for run in drive(engine, [chat(question, name) for name in names])]
        assert together == alone, "each row runs with its own adapter, whatever shares its forward passes"
        assert len({tuple(ids) for ids in alone[:3]}) == 3, "the two adapters and the base each answer differently"
        after = model.embed(["a sentence to embed"]).vectors  # type: ignore[attr-defined]
        np.testing.assert_array_equal(before, after)
        engine.unload_adapter("pineapple")
        assert drive(engine, [chat(question, "marmalade")])[0].ids == alone[2], "the other adapter is untouched"
        assert drive(engine, [chat(question, None)])[0].ids == alone[0]

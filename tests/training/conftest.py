"""Session fixtures of the training tests: one memorisation run on the tiny Llama, shared by every check of it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

#: A word the tiny random model never says (its greedy answer to the question is noise), and several phrasings of
#: the question, so the adapter learns the answer rather than one exact prompt.
SECRET = "Pineapple"
QUESTION = "What is the secret word?"
PHRASINGS = (QUESTION, "Tell me the secret word.", "secret word?", "Which word is secret?")

#: Enough for the tiny model to memorise the answer with room to spare (loss < 0.01 by ~10 steps, measured).
STEPS = 24
LEARNING_RATE = 1e-2


def memorisation_records() -> list[dict[str, Any]]:
    """Chat records asking for the secret word in each phrasing, plus a prompt/completion and a text record."""
    records: list[dict[str, Any]] = [
        {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": SECRET}]} for q in PHRASINGS
    ]
    records.append({"prompt": "The secret word is", "completion": f" {SECRET}"})
    records.append({"text": f"{SECRET} is the secret word."})
    return records


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@dataclass
class Trained:
    """The memorisation run: its result, the model it trained (adapter still applied) and the adapter folder."""

    result: Any
    model: Any
    folder: Path


@pytest.fixture(scope="session")
def trained(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from modelhost.inference import load_trainable
    from modelhost.training import TrainSettings, train

    folder = tmp_path_factory.mktemp("adapter")
    model = load_trainable(str(tiny_llama_dir), backend="transformers")
    settings = TrainSettings(steps=STEPS, learning_rate=LEARNING_RATE, batch_size=2, seed=0)
    result = train(model, memorisation_records(), settings, folder, eval_records=memorisation_records()[:2])
    yield Trained(result, model, folder)
    model.close()

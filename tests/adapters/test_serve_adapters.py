"""`modelhost serve --adapter` for real (a subprocess, the HTTP door on loopback): adapters named at start are
served beside their base (found from the adapter's config, or named with NAME=MODEL:PATH), listed with their
parent, and answer their words; a wrong adapter is one line and exit 2 before any model loads; runtime loading is
refused unless --allow-adapter-loading."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelhost.testing.waiting import STATE_WAIT_SECONDS
from test_serve import start_serving

pytest.importorskip("peft")


def ask(url: str, model: str, question: str) -> str:
    body = {"model": model, "messages": [{"role": "user", "content": question}], "max_tokens": 12, "temperature": 0}
    answer = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=STATE_WAIT_SECONDS)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["choices"][0]["message"]["content"])


def test_adapters_named_at_start_answer_beside_their_base(trained_adapters: Any) -> None:
    pine, marm = trained_adapters.folders["Pineapple"], trained_adapters.folders["Marmalade"]
    args = ["--model", f"tiny={trained_adapters.base}", "--backend", "transformers", "--no-socket", "--http", ":0"]
    # The first adapter's base comes from its adapter_config.json (the folder it was trained on), the second's
    # is named.
    args += ["--adapter", f"pine={pine}", "--adapter", f"marm=tiny:{marm}"]
    serving = start_serving(args)
    try:
        url = serving.url("http")
        listed = httpx.get(f"{url}/v1/models").json()["data"]
        assert [(m["id"], m["parent"]) for m in listed] == [("tiny", None), ("pine", "tiny"), ("marm", "tiny")]
        tags = httpx.get(f"{url}/api/tags").json()["models"]
        assert {t["name"]: t["details"]["parent_model"] for t in tags} == {"tiny": "", "pine": "tiny", "marm": "tiny"}
        question = trained_adapters.question
        assert ask(url, "pine", question).strip() == "Pineapple"
        assert ask(url, "marm", question).strip() == "Marmalade"
        base = ask(url, "tiny", question)
        assert "Pineapple" not in base and "Marmalade" not in base
        # Off by default: a client may not make the server read paths it names.
        refused = httpx.post(f"{url}/v1/load_lora_adapter", json={"lora_name": "x", "lora_path": str(pine)})
        assert refused.status_code == 403 and "--allow-adapter-loading" in refused.text
        assert httpx.post(f"{url}/v1/chat/completions", json={"model": "x", "messages": []}).status_code in (400, 404)
    finally:
        serving.proc.send_signal(signal.SIGTERM)
        assert serving.proc.wait(timeout=STATE_WAIT_SECONDS) == 0


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        ("missing", "no adapter at"),
        ("config", "adapter_config.json is not JSON"),
        ("weights", "is not a readable safetensors file"),
        ("gguf", "is not a LoRA GGUF"),
        ("colon", "no adapter at"),
        ("base", "say which of the served models (tiny, twin) it goes on"),
    ],
)
def test_a_bad_adapter_is_one_line_and_exit_2_before_any_model_loads(
    spoil: str, said: str, trained_adapters: Any, tmp_path: Path
) -> None:
    good = trained_adapters.folders["Pineapple"]
    folder = tmp_path / "adapter"
    folder.mkdir()
    for part in ("adapter_config.json", "adapter_model.safetensors"):
        (folder / part).write_bytes((good / part).read_bytes())
    arg = f"bad={folder}"
    if spoil == "missing":
        arg = f"bad={tmp_path / 'nowhere'}"
    elif spoil == "config":
        (folder / "adapter_config.json").write_text('{"peft_type": "LORA", ')
    elif spoil == "weights":
        (folder / "adapter_model.safetensors").write_bytes(b"\xff" * 8 + b"garbage")
    elif spoil == "gguf":
        bogus = tmp_path / "bogus.gguf"
        bogus.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 3)
        arg = f"bad={bogus}"
    elif spoil == "colon":
        arg = f"bad=elsewhere:{folder}"  # `elsewhere:` names no served model, so it is read as part of the path
    models = ["--model", f"tiny={trained_adapters.base}"]
    if spoil == "base":  # two models, and the adapter's config names neither
        config = json.loads((folder / "adapter_config.json").read_text())
        (folder / "adapter_config.json").write_text(json.dumps({**config, "base_model_name_or_path": "org/other"}))
        models += ["--model", f"twin={trained_adapters.base}"]
    args = [*models, "--backend", "transformers", "--no-socket", "--http", ":0"]
    done = subprocess.run(
        [sys.executable, "-m", "modelhost.cli", "serve", *args, "--adapter", arg],
        capture_output=True, text=True, timeout=STATE_WAIT_SECONDS,
    )  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert said in lines[0] and "--adapter" in lines[0], lines
    assert "loading" not in done.stderr.lower(), "refused before any model loads"

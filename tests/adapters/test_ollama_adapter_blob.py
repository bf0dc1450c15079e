"""`ollama create` with an adapter from another machine: the client uploads the LoRA GGUF as a blob by its digest
(`create_blob`), then creates a model FROM the served base with `adapters` naming that digest; the created model
answers with the adapter's word, the base without it. A real `modelhost serve` (a subprocess, the HTTP door on
loopback) and the official `ollama` client."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from modelhost.testing.serving import start_serving
from modelhost.testing.waiting import STATE_WAIT_SECONDS

pytest.importorskip("llama_cpp")
ollama = pytest.importorskip("ollama")


def test_an_adapter_uploaded_by_digest_is_created_over_its_base(
    tiny_llama_gguf: Path, trained_adapters: Any, tmp_path: Path
) -> None:
    adapter = trained_adapters.folders["Pineapple"] / "adapter.gguf"
    args = ["--model", f"tiny={tiny_llama_gguf}", "--no-socket", "--http", ":0"]
    serving = start_serving(args, env={"HF_HUB_CACHE": str(tmp_path / "hub")})  # the store is beside this cache
    try:
        client = ollama.Client(host=serving.url("http"), timeout=STATE_WAIT_SECONDS)
        digest = client.create_blob(adapter)
        client.create(model="pine", from_="tiny", adapters={"adapter.gguf": digest})
        ask = [{"role": "user", "content": trained_adapters.question}]
        options = {"temperature": 0, "num_predict": 12}
        assert client.chat(model="pine", messages=ask, options=options).message.content.strip() == "Pineapple"
        assert "Pineapple" not in client.chat(model="tiny", messages=ask, options=options).message.content
        shown = client.show("pine").modelfile or ""
        assert "ADAPTER " in shown and str(tmp_path / "modelhost-created") in shown, "the kept blob, by its link"
        # What is not a LoRA of this model is refused at create, though uploaded whole and verified.
        with pytest.raises(ollama.ResponseError) as refused:
            client.create(model="junk", from_="tiny", adapters={"adapter.gguf": client.create_blob(tiny_llama_gguf)})
        assert refused.value.status_code == 400
    finally:
        serving.proc.send_signal(signal.SIGTERM)
        assert serving.proc.wait(timeout=STATE_WAIT_SECONDS) == 0

"""Ollama's `create` and `copy` as its users meet them: the official `ollama` client (and a Modelfile posted as
older clients do) against a real server on loopback over the tiny Llama GGUF. A created model is served (its
SYSTEM and PARAMETERs the defaults of its requests), listed by /api/tags, still there after a restart (a second
server over the same store), and gone after /api/delete."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import http_support
import httpx
import pytest
from http_support import LoopThread

import modelhost.inference
from modelhost.host.models import Models, ModelSpec
from modelhost.http import HttpServer
from modelhost.serve import ServeConfig, pulled_spec
from modelhost.testing.waiting import STATE_WAIT_SECONDS, wait_until

pytest.importorskip("llama_cpp")
ollama = pytest.importorskip("ollama")


@contextmanager
def serving(loop_thread: LoopThread, gguf: Path) -> Iterator[HttpServer]:
    """A host serving the tiny GGUF as `tiny`, that takes new models as `serve` does (Models.spec_for)."""
    spec = ModelSpec("tiny", lambda: modelhost.inference.load_model(str(gguf), threads=1), path=str(gguf))
    models = Models([spec])
    models.spec_for = functools.partial(pulled_spec, ServeConfig())
    with http_support.serving(loop_thread, models) as http:  # type: ignore[arg-type]  # a model set is a host here
        yield http


def names(client: ollama.Client) -> set[str]:
    return {m.model for m in client.list().models if m.model}


def test_create_copy_survive_a_restart_and_delete(
    loop_thread: LoopThread, tiny_llama_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # the created models' store is beside this cache
    ask = [{"role": "user", "content": "hi"}]
    with serving(loop_thread, tiny_llama_gguf) as server:
        client = ollama.Client(host=server.url, timeout=STATE_WAIT_SECONDS)
        made = client.create(model="terse", from_=str(tiny_llama_gguf), system="Be terse.",
                             parameters={"num_predict": 3, "temperature": 0})  # fmt: skip
        assert made.status == "success"
        assert client.copy("terse", "terse-copy").status == "success"
        modelfile = f'FROM {tiny_llama_gguf}\nPARAMETER num_predict 2\nSYSTEM """Be\nbrief."""\n'
        posted = httpx.post(f"{server.url}/api/create", json={"model": "mf", "modelfile": modelfile, "stream": False})
        assert posted.status_code == 200 and posted.json() == {"status": "success"}, posted.text
        assert {"tiny", "terse", "terse-copy", "mf"} <= names(client)
        # The created PARAMETER is the default of its requests; a request's own option wins.
        assert client.chat(model="terse", messages=ask).eval_count == 3
        assert client.chat(model="mf", messages=ask).eval_count == 2
        assert client.chat(model="terse", messages=ask, options={"num_predict": 1}).eval_count == 1
        # What is not a model to make from is refused with Ollama's error, before anything is kept.
        with pytest.raises(ollama.ResponseError) as missing:
            client.create(model="nothing", from_=str(tmp_path / "none.gguf"))
        assert missing.value.status_code == 404
        bad = httpx.post(f"{server.url}/api/create", json={"model": "bad", "modelfile": "SYSTEM hi"})
        assert bad.status_code == 400 and "no FROM line" in bad.json()["error"], bad.text
        with pytest.raises(ollama.ResponseError) as taken:
            client.copy("terse", "tiny")
        assert taken.value.status_code == 400
    with serving(loop_thread, tiny_llama_gguf) as server:  # a restart: the names come back, with what they add
        client = ollama.Client(host=server.url, timeout=STATE_WAIT_SECONDS)
        assert {"terse", "terse-copy", "mf"} <= names(client) and "nothing" not in names(client)
        assert client.chat(model="terse-copy", messages=ask).eval_count == 3
        # As for a pulled model, a loaded one is unloaded first (keep_alive 0), then deleted.
        with pytest.raises(ollama.ResponseError, match="loaded or in use"):
            client.delete("terse-copy")
        client.generate(model="terse-copy", keep_alive=0)
        wait_until(lambda: "terse-copy" not in {m.model for m in client.ps().models})
        assert client.delete("terse-copy").status == "success"
        assert "terse-copy" not in names(client)
    with serving(loop_thread, tiny_llama_gguf) as server:
        client = ollama.Client(host=server.url, timeout=STATE_WAIT_SECONDS)
        assert "terse-copy" not in names(client) and "terse" in names(client)


def test_a_modelfile_reads_as_ollama_writes_it() -> None:
    from modelhost.errors import InvalidInputError
    from modelhost.hub.created import parse_modelfile

    fields = parse_modelfile(
        '# a comment\nFROM ./model.gguf\nADAPTER ./lora\nPARAMETER temperature 0.2\nPARAMETER stop "<end>"\n'
        'PARAMETER stop "###"\nTEMPLATE """{{ .Prompt }}\n"""\nsystem You are brief.\n'
    )
    assert fields == {
        "from": "./model.gguf",
        "adapter": "./lora",
        "template": "{{ .Prompt }}\n",
        "system": "You are brief.",
        "parameters": {"temperature": 0.2, "stop": ["<end>", "###"]},
    }
    for text, why in [
        ("FROM x\nPARAMETER nonsense 1", "unknown parameter"),
        ("FROM x\nLICENSE mit", "LICENSE is not supported"),
        ('FROM x\nSYSTEM """never closed', "never closed"),
        ("FROM x\nPARAMETER top_k 0.5", "expected a int"),
    ]:
        with pytest.raises(InvalidInputError, match=why):
            parse_modelfile(text)
